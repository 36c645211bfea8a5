"""Math grading: extraction, real equivalences through math-verify, and hostile answers."""

import json
import subprocess
import sys
import time

import pytest

from agon.grading.math import MathGrader, extract_answer, grade_one, hostile_answers, last_boxed


@pytest.mark.parametrize(
    "completion,expected",
    [
        (r"first \boxed{1} then \boxed{2}", "2"),  # the last box wins
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # nested braces
        (r"\boxed {x^{2}}", "x^{2}"),
        (r"<think>maybe \boxed{3}</think> so \boxed{4}", "4"),  # only after </think>
        (r"<think>maybe \boxed{3}</think> no box here", None),
        (r"<think>unfinished \boxed{3}", None),  # thinking never closed: no answer
        (r"\boxed{5} and a truncated \boxed{", "5"),
        ("no answer at all", None),
    ],
)
def test_extract_answer(completion, expected):
    assert extract_answer(completion) == expected


def test_last_boxed_is_linear_on_unclosed_boxes():
    t0 = time.perf_counter()
    assert last_boxed("\\boxed{" * 200_000) is None
    assert time.perf_counter() - t0 < 5


EQUIVALENT = [
    (r"\frac{1}{2}", "0.5"),  # fraction vs decimal
    ("0.25", r"\frac14"),
    (r"[1, 2)", "[1,2)"),  # intervals
    (r"(0, \infty)", r"(0,\infty)"),
    (r"\{1, 2, 3\}", r"\{3, 1, 2\}"),  # sets, any order
    ("x^2 + 2x + 1", "(x+1)^2"),  # symbolic forms
    (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),
    (r"2\pi", r"\pi \cdot 2"),
]
DIFFERENT = [
    (r"\frac{1}{2}", "0.6"),
    ("[1, 2)", "[1, 2]"),
    (r"\{1, 2\}", r"\{1, 3\}"),
    ("x^2 + 1", "(x+1)^2"),
]


@pytest.mark.parametrize("gold,answer", EQUIVALENT)
def test_equivalent_answers_are_correct(gold, answer):
    v = grade_one(gold, f"The answer is \\boxed{{{answer}}}.")
    assert (v.correct, v.status) == (True, "graded"), v


@pytest.mark.parametrize("gold,answer", DIFFERENT)
def test_different_answers_are_wrong(gold, answer):
    v = grade_one(gold, f"\\boxed{{{answer}}}")
    assert (v.correct, v.status) == (False, "graded"), v


def test_thinking_model_output():
    out = "<think>Let me try \\boxed{7}. No wait, it is 6.</think>\n\nThe answer is $\\boxed{6}$."
    assert grade_one("6", out).correct is True
    assert grade_one("7", out).correct is False
    assert grade_one("6", "<think>I think \\boxed{6}").status == "no_answer"


def test_no_answer_is_wrong_not_unknown():
    v = grade_one("3", "I give up")
    assert (v.correct, v.status, v.extracted) == (False, "no_answer", None)


HOSTILE = hostile_answers()


@pytest.fixture(scope="module")
def grader():
    with MathGrader(timeout_s=3.0, workers=2) as g:
        yield g


def test_hostile_answers_cost_at_most_their_limit(grader):
    golds = ["7"] * len(HOSTILE) + ["2"]  # no hostile answer equals 7
    comps = HOSTILE + [r"\boxed{2}"]
    t0 = time.perf_counter()
    verdicts = grader.grade(golds, comps)
    elapsed = time.perf_counter() - t0
    assert len(verdicts) == len(comps)
    for v in verdicts[:-1]:
        assert v.correct in (False, None)  # never scored as right
        assert v.status in ("graded", "timeout", "no_answer", "error")
        if v.correct is None:
            assert v.status in ("timeout", "error")
    assert verdicts[-1].correct is True  # the batch is still graded
    # 2 workers, 8 items, 3 s hard limit each: far below a hang, bounded by limit * items / workers
    assert elapsed < 3.0 * len(comps) / 2 + 10


def test_hard_limit_kills_an_answer_that_escapes_soft_limits():
    # with math-verify's own SIGALRM limits disabled, (10^8)! runs in C for minutes;
    # only the hard wall-clock kill can stop it
    with MathGrader(timeout_s=2.0, workers=1, soft_timeout=0) as g:
        t0 = time.perf_counter()
        v_hostile, v_ok = g.grade(["1", "2"], [r"\boxed{(10^{8})!}", r"\boxed{2}"])
        elapsed = time.perf_counter() - t0
    assert (v_hostile.correct, v_hostile.status) == (None, "timeout")
    assert v_ok.correct is True  # the replacement worker graded the next item
    assert elapsed < 15


def test_pool_matches_in_process(grader):
    golds = [g for g, _ in EQUIVALENT + DIFFERENT]
    comps = [f"\\boxed{{{a}}}" for _, a in EQUIVALENT + DIFFERENT]
    pooled = [v.correct for v in grader.grade(golds, comps)]
    assert pooled == [grade_one(g, c).correct for g, c in zip(golds, comps)]
    assert pooled == [True] * len(EQUIVALENT) + [False] * len(DIFFERENT)


def test_length_mismatch_is_an_error(grader):
    with pytest.raises(ValueError):
        grader.grade(["1"], [])


def _agon(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "agon", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def test_cli_single_verdict():
    out = _agon(
        "grade", "math", "--gold", r"\frac12", "--completion", r"so \boxed{0.5}", "--workers", "1"
    )
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)
    assert (
        verdict["correct"] is True
        and verdict["extracted"] == "0.5"
        and verdict["status"] == "graded"
    )
    assert set(verdict) >= {"correct", "extracted", "status", "seconds"}


def test_cli_jsonl(tmp_path):
    path = tmp_path / "items.jsonl"
    rows = [
        {"gold": "2", "completion": r"\boxed{2}"},
        {"gold": "2", "completion": r"\boxed{3}"},
        {"gold": "1", "completion": "none"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = _agon("grade", "math", "--jsonl", str(path), "--workers", "1")
    assert out.returncode == 0, out.stderr
    verdicts = [json.loads(line) for line in out.stdout.splitlines()]
    assert [v["correct"] for v in verdicts] == [True, False, False]
    assert verdicts[2]["status"] == "no_answer"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"gold": 1}\n')
    out = _agon("grade", "math", "--jsonl", str(bad))
    assert out.returncode != 0 and "bad.jsonl:1" in out.stderr
