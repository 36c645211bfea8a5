"""Conformance with the official graders, through the sandbox, on fixtures in the real schemas
(tests/fixtures/code/*_conformance*.jsonl): for LiveCodeBench, TACO and CodeContests, (a) the
reference solutions pass, (b) right answers in the other forms the official grader accepts
pass, and forms it rejects fail, (c) wrong programs fail, (d) the problem's own files and time
and memory limits are used. The pure rules are tests/test_code_judges.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from agon.tasks.code import CodeContestsTask, LiveCodeBenchTask, TacoTask

FIX = Path(__file__).parent / "fixtures" / "code"
LCB_FILES = {"test": str(FIX / "livecodebench_conformance.jsonl")}
TACO_FILES = {"test": str(FIX / "taco_conformance_test.jsonl")}
TACO_SPJ = str(FIX / "taco_spj.jsonl")
CC_FILES = {
    "test": str(FIX / "codecontests_conformance_test.jsonl"),
    "valid": str(FIX / "codecontests_valid.jsonl"),
}
SLEEP_1_5 = "import time\ntime.sleep(1.5)\n"


def fenced(code: str) -> str:
    return f"My answer:\n\n```python\n{code}\n```\n"


def grade(task, pairs: list[tuple[str, str]]):
    """Verdicts for (problem id, program) pairs."""
    problems = {p.id: p for p in task.problems("test")}
    return task.grade([problems[pid] for pid, _ in pairs], [fenced(code) for _, code in pairs])


def statuses(task, pairs):
    return [v.status for v in grade(task, pairs)]


# --- LiveCodeBench ---------------------------------------------------------------------------

HALF = "a, b = map(int, input().split())\n"
MAX_PAIR = (
    "class Solution:\n    def maxPairSum(self, nums: List[int]) -> int:\n"
    "        a, b = sorted(nums)[-2:]\n        return a + b\n"
)
MIN_MAX = "class Solution:\n    def minMax(self, nums):\n        return {}\n"
MEAN = "class Solution:\n    def mean(self, nums):\n        return {}\n"


@pytest.fixture(scope="module")
def lcb():
    task = LiveCodeBenchTask(data_files=LCB_FILES, grading_timeout_s=2.0)
    yield task
    task.close()


def test_lcb_reference_solutions_pass(lcb):
    """Including a starter-code signature with List[int] (the runner's import block), and a
    6021-digit answer (the runner's raised int-to-str limit)."""
    vs = grade(
        lcb,
        [
            ("lcb-abc900_a", HALF + "print(a / b)"),  # 2.0 for "2": Decimal("2.0") == 2
            ("lcb-abc900_b", "for i in range(1, int(input()) + 1):\n    print(i)"),
            ("lcb-abc900_c", "print(2 ** int(input()))"),
            ("lcb-3100", MAX_PAIR),
            ("lcb-3101", MIN_MAX.format("[min(nums), max(nums)]")),
            ("lcb-3102", MEAN.format("sum(nums) / len(nums)")),
        ],
    )
    assert [v.status for v in vs] == ["pass"] * 6, [v.detail for v in vs]
    counts = [(v.tests_passed, v.tests_total) for v in vs]
    assert counts == [(3, 3), (2, 2), (2, 2), (3, 3), (2, 2), (2, 2)]


def test_lcb_alternative_forms(lcb):
    """Accepted: 0.50 for 0.5 and 2.00 for 2 (Decimals), trailing spaces and blank lines, a
    tuple for a list. Rejected: a float off in the 7th digit (no tolerance), lines joined."""
    assert statuses(
        lcb,
        [
            ("lcb-abc900_a", HALF + "print(f'{a / b:.2f}')"),
            (
                "lcb-abc900_b",
                "for i in range(1, int(input()) + 1):\n    print(i, end='  \\n')\nprint()\nprint()",
            ),
            ("lcb-3101", MIN_MAX.format("(min(nums), max(nums))")),
            (
                "lcb-3102",
                MEAN.format("round(sum(nums) / len(nums), 6)"),
            ),
            ("lcb-abc900_b", "print(*range(1, int(input()) + 1))"),
        ],
    ) == ["pass", "pass", "pass", "wrong_answer", "wrong_answer"]


def test_lcb_wrong_programs_fail_and_count_the_tests_passed(lcb):
    vs = grade(
        lcb,
        [
            ("lcb-abc900_a", HALF + "print(a // b)"),  # wrong on the first test
            ("lcb-3100", MAX_PAIR.replace("return a + b", "return a + b if a > 0 else 0")),
            ("lcb-3100", "class Solution:\n    pass"),  # no such method
            ("lcb-3100", MAX_PAIR.replace("return a + b", "raise ValueError('x')")),
        ],
    )
    assert [(v.status, v.tests_passed, v.tests_total) for v in vs] == [
        ("wrong_answer", 0, 3),
        ("wrong_answer", 1, 3),  # call 2 of 3 failed
        ("wrong_answer", 0, 3),
        ("runtime_error", None, 3),
    ]


def test_lcb_timeout_and_strict(lcb):
    """LiveCodeBench states no per-problem limit: a run past grading_timeout_s times out.
    strict compares exact tokens: 0.50 no longer passes for 0.5."""
    sleeper = "import time\ntime.sleep(5)\n" + HALF + "print(a / b)"
    assert statuses(lcb, [("lcb-abc900_a", sleeper)]) == ["timeout"]
    strict = LiveCodeBenchTask(data_files=LCB_FILES, strict=True)
    try:
        assert statuses(strict, [("lcb-abc900_a", HALF + "print(f'{a / b:.2f}')")]) == [
            "wrong_answer"
        ]
    finally:
        strict.close()


# --- TACO ------------------------------------------------------------------------------------

SUM = "n = int(input())\nprint(sum(map(int, input().split())))"
COUNT = "for i in range(1, int(input()) + 1):\n    print(i)"


@pytest.fixture(scope="module")
def taco():
    task = TacoTask(
        data_files=TACO_FILES, special_judge="exact", time_limit_factor=1.0, grading_timeout_s=5
    )
    yield task
    task.close()


def test_taco_reference_solutions_pass(taco):
    """The data's own first solutions: stdin, a call with List from the prelude, and a
    program that reads input.txt and writes output.txt (TACO's fallback after it crashes on
    stdin)."""
    ps = taco.problems("test")
    vs = taco.grade(ps, [fenced(p.meta["solution"]) for p in ps])
    assert [v.status for v in vs] == ["pass"] * 6, [v.detail for v in vs]
    assert "TACO's fallback" in vs[3].detail
    assert "exact match" in vs[5].detail  # a special-judge problem kept by special_judge=exact


def test_taco_alternative_forms(taco):
    """compare_std_results on stdout: surrounding whitespace is free, one-character tokens
    may be laid out (and ordered) freely; execute_cb_code also takes the list-wrapped output
    itself; a longer float printed otherwise is rejected."""
    assert statuses(
        taco,
        [
            ("taco-test-0", "input()\nprint(sum(map(int, input().split())), '')\nprint()"),
            ("taco-test-1", "print(*range(int(input()), 0, -1))"),  # 3 2 1 for 1\n2\n3
            (
                "taco-test-2",
                "def largest_pair(xs):\n    a, b = sorted(xs)[-2:]\n    return [a + b]",
            ),
            ("taco-test-4", "print(int(input()) / 3)"),  # 0.3333333333333333 for 0.333333
        ],
    ) == ["pass", "pass", "pass", "wrong_answer"]


def test_taco_wrong_programs_fail(taco):
    assert statuses(
        taco,
        [
            ("taco-test-0", SUM.replace("sum(", "1 + sum(")),
            ("taco-test-1", "print(1)"),
            ("taco-test-2", "def largest_pair(xs):\n    return max(xs)"),
            ("taco-test-3", "with open('input.txt') as f:\n    n = int(f.read())\nprint(n)"),
        ],
    ) == ["wrong_answer", "wrong_answer", "wrong_answer", "wrong_answer"]


def test_taco_limits_are_the_problems_own(taco):
    """time_limit "1 second" (x1): a 1.5 s program times out there and passes on the problem
    whose limit is "2 seconds"; memory_limit "256 megabytes": 400 MiB is a memory failure."""
    assert statuses(
        taco,
        [
            ("taco-test-0", SLEEP_1_5 + SUM),
            ("taco-test-1", SLEEP_1_5 + COUNT),
            ("taco-test-0", "x = bytearray(400 * 2**20)\n" + SUM),
        ],
    ) == ["timeout", "pass", "memory"]


def test_taco_special_judges_excluded_by_default_or_checked():
    default = TacoTask(data_files=TACO_FILES)
    assert [p.id for p in default.problems("test")] == [f"taco-test-{i}" for i in range(5)]
    assert default.special_judge_summary()["excluded"] == {"train": 0, "test": 1}
    checker = TacoTask(data_files=TACO_FILES, special_judge_file=TACO_SPJ, special_judge="checker")
    try:
        assert [p.id for p in checker.problems("test")] == [f"taco-test-{i}" for i in range(5)]
        (v,) = grade(checker, [("taco-test-4", "print(int(input()) / 3)")])
        assert v.status == "pass" and "graded by its checker" in v.detail
    finally:
        checker.close()


def test_an_evaluation_summary_counts_the_problems_left_out(tmp_path):
    """The count of special-judge problems left out reaches the evaluation's summary.json,
    so a pass@1 is never read without it."""
    import json

    from tiny_models import ScriptedEngine

    from agon.evaluation import evaluate
    from agon.systems import single

    task = TacoTask(data_files=TACO_FILES)
    try:
        summary = evaluate(
            single(ScriptedEngine(lambda text, j: fenced("print(input())"))),
            task,
            task.problems("test"),
            tmp_path,
            n=1,
            n_boot=50,
            progress=False,
        )
    finally:
        task.close()
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    for s in (summary, on_disk):
        assert s["task_notes"]["special_judge"]["excluded"] == {"train": 0, "test": 1}


# --- CodeContests ----------------------------------------------------------------------------

RATIO = "a, b = map(int, input().split())\n"
PARITY = "print('YES' if int(input()) % 2 == 0 else 'NO')"


@pytest.fixture(scope="module")
def cc():
    task = CodeContestsTask(data_files=CC_FILES)
    yield task
    task.close()


def test_cc_reference_solutions_pass_and_incorrect_ones_fail(cc):
    ps = cc.problems("test")
    assert [p.meta["input_file"] for p in ps] == [None, None, "input.txt"]
    vs = cc.grade(ps, [fenced(p.meta["solution"]) for p in ps])
    assert [v.status for v in vs] == ["pass"] * 3, [v.detail for v in vs]
    vs = cc.grade(ps, [fenced(p.meta["incorrect_solution"]) for p in ps])
    assert [v.status for v in vs] == ["wrong_answer"] * 3, [v.detail for v in vs]


def test_cc_alternative_forms(cc):
    """OutputsMatch: lowercase tokens, numbers within 1e-5 absolute."""
    pid = [p.id for p in cc.problems("test")]
    assert statuses(
        cc,
        [
            (pid[0], RATIO + "print(a / b)"),  # 0.6666666666666666 for 0.666667
            (pid[1], PARITY.replace("'YES'", "'yes'").replace("'NO'", "'No'") + "\nprint()"),
            (pid[0], RATIO + "print('%.3f' % (a / b))"),  # 0.667: off by 3e-4
        ],
    ) == ["pass", "pass", "wrong_answer"]


def test_cc_limits_and_files_are_the_problems_own(cc):
    """Parity: time_limit 0.5 s (x2 = 1 s) and 64 MB; Files: 2 s, and its answer is read from
    output.txt, so a program that prints it instead gets no credit for the file."""
    pid = [p.id for p in cc.problems("test")]
    assert cc.limits(cc.problems("test")[1]) == (1.0, 94)  # ceil(64e6 / 2**20) + 32
    files_prog = "n = int(open('input.txt').read())\nopen('output.txt', 'w').write(str(n * n))"
    assert statuses(
        cc,
        [
            (pid[1], SLEEP_1_5 + PARITY),
            (pid[2], SLEEP_1_5 + files_prog),
            (pid[1], "x = bytearray(128 * 2**20)\n" + PARITY),
        ],
    ) == ["timeout", "pass", "memory"]


def test_cc_multiple_answer_problems_and_the_valid_split():
    default = CodeContestsTask(data_files=CC_FILES)
    assert len(default.problems("test")) == 3
    assert default.special_judge_summary()["excluded"]["test"] == 1
    assert [p.meta["cf_rating"] for p in default.problems("validation")] == [900, 2500]
    assert len(default.problems("validation_hard")) == 1
    one = CodeContestsTask(data_files=CC_FILES, validation_size=1)
    assert len(one.problems("validation")) == 1
    exact = CodeContestsTask(data_files=CC_FILES, special_judge="exact")
    try:
        pair = [p for p in exact.problems("test") if p.meta.get("special_judge")]
        assert [p.meta["special_judge_kind"] for p in pair] == ["any_answer"]
        (v,) = exact.grade(pair, [fenced("n = int(input())\nprint(n - 1, 1)")])
        assert v.status == "wrong_answer" and "graded by exact match" in v.detail
    finally:
        exact.close()
