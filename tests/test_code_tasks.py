"""Code tasks: extraction, the loaders on fixture files of the real schemas, grading through the
sandbox, and the HumanEval canary (all canonical solutions pass, broken ones fail)."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest

from agon.tasks import get_task
from agon.tasks.code import (
    CodeContestsTask,
    HumanEvalTask,
    LiveCodeBenchTask,
    TacoTask,
    decode_lcb_tests,
    extract_code,
)

FIX = Path(__file__).parent / "fixtures" / "code"
TACO_FILES = {"train": str(FIX / "taco_train.jsonl"), "test": str(FIX / "taco_test.jsonl")}
CC_FILES = {
    "train": str(FIX / "codecontests_train.jsonl"),
    "test": str(FIX / "codecontests_test.jsonl"),
}
LCB_FILES = {"test": str(FIX / "livecodebench.jsonl")}


def fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}\n```\n"


# --- extraction --------------------------------------------------------------------------


def test_extract_code_last_python_block():
    text = "```python\nprint(1)\n```\ntext\n```py\nprint(2)\n```\n```cpp\nint main(){}\n```\n"
    assert extract_code(text) == "print(2)\n"
    assert extract_code("```\nprint(3)\n```") == "print(3)\n"  # untagged fences count as python
    assert extract_code("no code here") is None
    assert extract_code("```cpp\nint x;\n```") is None
    assert extract_code("```python\n\n```") is None
    assert extract_code("```python\nprint(4)\nprint(5)") == "print(4)\nprint(5)\n"  # truncated
    assert extract_code("  ```Python3\n  x = 1\n  ```") == "  x = 1\n"


def test_extract_code_thinking_models():
    assert (
        extract_code("<think>```python\nprint(0)\n```</think>\n```python\nprint(1)\n```")
        == "print(1)\n"
    )
    assert extract_code("<think>```python\nprint(0)\n```") is None  # never finished thinking
    assert extract_code("<think>x</think> no block") is None


def test_extract_code_is_linear_on_hostile_input():
    import time

    t0 = time.perf_counter()
    extract_code("```python\n" * 200_000 + "x" * 1_000_000)
    extract_code("`" * 2_000_000)
    assert time.perf_counter() - t0 < 2.0


# --- TACO --------------------------------------------------------------------------------


def test_taco_loader_splits_and_tests():
    task = get_task("taco", data_files=TACO_FILES)
    assert isinstance(task, TacoTask) and task.kind == "code"
    train, test = task.problems("train"), task.problems("test")
    assert len(train) == 3  # the row without tests is dropped
    assert [p.difficulty for p in train] == [1.0, 4.0, 3.0]
    assert [p.id for p in task.problems("train_hard")] == [train[1].id]
    assert [p.meta["mode"] for p in train] == ["stdin", "stdin", "call"]
    assert train[1].meta["tests"][0] == ("3\n3 2 1\n", "3")  # list outputs joined into text
    assert test[0].difficulty is None and [p.id for p in task.problems("hard")] == [test[1].id]
    assert json.loads(train[0].answer)["tests"] == [["1 2\n", "3\n"], ["10 -3\n", "7\n"]]
    with pytest.raises(ValueError, match="unknown split"):
        task.problems("valid")


def test_split_manifest_records_ids_and_hashes():
    m = TacoTask(data_files=TACO_FILES).split_manifest()
    assert m["sizes"] == {
        "train": 3,
        "validation": 0,  # 10% of 3 train problems, rounded down
        "test": 2,
        "hard": 1,
        "train_hard": 1,
        "validation_hard": 0,
    }
    assert m["ids"]["hard"] == ["taco-test-1"]
    again = TacoTask(data_files=TACO_FILES).split_manifest()
    assert m["problems_sha256"] == again["problems_sha256"] and len(m["split_sha256"]) == 64
    capped = TacoTask(data_files=TACO_FILES, max_tests=1).split_manifest()
    assert capped["problems_sha256"] != m["problems_sha256"]  # the tests are part of the problem


def test_validation_is_carved_from_train_seeded_and_test_is_the_sources():
    full = TacoTask(data_files=TACO_FILES)
    train, test = full.problems("train"), full.problems("test")
    for seed in (0, 1, 2, 3):
        task = TacoTask(data_files=TACO_FILES, validation_size=1, seed=seed)
        val, rest = task.problems("validation"), task.problems("train")
        assert len(val) == 1 and len(rest) == 2
        assert sorted(p.id for p in val + rest) == sorted(p.id for p in train)
        assert task.problems("test") == test  # the test split is the source's own
        again = TacoTask(data_files=TACO_FILES, validation_size=1, seed=seed)
        assert again.problems("validation") == val
        hard = task.problems("validation_hard")
        assert hard == [p for p in val if p.difficulty is not None and p.difficulty >= 4.0]
    carved = {
        TacoTask(data_files=TACO_FILES, validation_size=1, seed=s).problems("validation")[0].id
        for s in range(8)
    }
    assert len(carved) > 1  # the seed picks which
    # max_train caps what is left after the carve, so it never changes the validation split
    capped = TacoTask(data_files=TACO_FILES, validation_size=1, max_train=1)
    assert capped.problems("validation") == TacoTask(
        data_files=TACO_FILES, validation_size=1
    ).problems("validation")
    assert len(capped.problems("train")) == 1
    with pytest.raises(ValueError, match="validation_size"):
        TacoTask(data_files=TACO_FILES, validation_size=4).problems("train")


def test_code_proposals_prompt_numbers_the_attempts():
    task = TacoTask(data_files=TACO_FILES)
    p = task.problems("test")[0]
    (msg,) = task.proposals_prompt(p, ["```python\nprint(1)\n```", "```python\nprint(2)\n```"])
    content = msg["content"]
    assert content.startswith(task.solve_prompt(p)[0]["content"])
    assert "<rival_attempt_1>\n```python\nprint(1)\n```\n</rival_attempt_1>" in content
    assert "<rival_attempt_2>" in content and "```python code block" in content
    assert "boxed" not in content
    assert task.proposals_prompt(p, ["x"]) == task.reader_prompt(p, "x")


def test_taco_grading_gold_wrong_and_missing():
    task = TacoTask(data_files=TACO_FILES, grading_timeout_s=5)
    try:
        ps = task.problems("train") + task.problems("test")
        gold = [fenced(p.meta["solution"]) for p in ps]
        vs = task.grade(ps, gold)
        assert [v.status for v in vs] == ["pass"] * len(ps), [v.detail for v in vs]
        assert vs[0].extracted == ps[0].meta["solution"] + "\n"
        vs = task.grade(
            ps[:3], [fenced("print(0)"), "I give up", fenced("def rotate(xs, k):\n    return xs")]
        )
        assert [(v.correct, v.status) for v in vs] == [
            (False, "wrong_answer"),
            (False, "no_code"),
            (False, "wrong_answer"),
        ]
    finally:
        task.close()


def test_local_parquet_and_bad_sources(tmp_path):
    import datasets

    pq = tmp_path / "taco.parquet"
    datasets.load_dataset("json", data_files=TACO_FILES["train"], split="train").to_parquet(str(pq))
    task = TacoTask(data_files={"train": str(pq)})
    assert len(task.problems("train")) == 3 and task.problems("test") == []
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TacoTask(data_files={"train": str(tmp_path / "missing.jsonl")}).problems("train")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(ValueError, match="lack fields"):
        TacoTask(data_files={"train": str(bad)}).problems("train")


# --- CodeContests ------------------------------------------------------------------------


def test_codecontests_loader_tests_and_rating_hard_split():
    task = get_task("codecontests", data_files=CC_FILES)
    assert isinstance(task, CodeContestsTask)
    test = task.problems("test")
    assert len(test) == 3 and len(task.problems("train")) == 1  # empty-test row dropped
    assert len(test[0].meta["tests"]) == 1 + 2 + 1  # public + private + generated
    assert [p.difficulty for p in test] == [1000.0, 2400.0, None]
    assert [p.meta["cf_rating"] for p in task.problems("hard")] == [2400]
    no_gen = CodeContestsTask(data_files=CC_FILES, include_generated=False, max_tests=2)
    assert len(no_gen.problems("test")[0].meta["tests"]) == 2
    assert (
        CodeContestsTask(data_files=CC_FILES, hard_min_difficulty=900).problems("hard") == test[:2]
    )


def test_codecontests_correct_and_incorrect_solutions():
    task = CodeContestsTask(data_files=CC_FILES)
    try:
        ps = task.problems("test")
        assert [v.status for v in task.grade(ps, [fenced(p.meta["solution"]) for p in ps])] == [
            "pass"
        ] * 3
        bad = [p for p in ps if p.meta["incorrect_solution"]]
        vs = task.grade(bad, [fenced(p.meta["incorrect_solution"]) for p in bad])
        assert len(bad) == 2 and all(v.correct is False for v in vs)
    finally:
        task.close()


# --- LiveCodeBench -----------------------------------------------------------------------


def test_livecodebench_loader_stdin_functional_and_date_split():
    task = get_task("livecodebench", data_files=LCB_FILES)
    assert isinstance(task, LiveCodeBenchTask)
    ps = task.problems("test")
    assert len(ps) == 3 and task.problems("train") == []
    add, two_sum, primes = ps
    assert add.meta["tests"] == [
        ("1 2\n", "3\n"),
        ("100 200\n", "300\n"),
    ]  # private: base64/zlib/pickle
    assert two_sum.meta["mode"] == "call" and two_sum.meta["calls"][1] == ([[3, 2, 4], 6], [1, 2])
    assert [p.id for p in task.problems("hard")] == [two_sum.id, primes.id]
    assert "class Solution" in task.solve_prompt(two_sum)[0]["content"]
    assert "standard input" in task.solve_prompt(add)[0]["content"]
    split = LiveCodeBenchTask(data_files=LCB_FILES, test_after="2024-08-01")
    assert [p.id for p in split.problems("train")] == [add.id]
    assert [p.id for p in split.problems("test")] == [two_sum.id, primes.id]


def test_livecodebench_grading():
    task = LiveCodeBenchTask(data_files=LCB_FILES)
    two_sum = (
        "from typing import List\n"
        "class Solution:\n"
        "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n"
        "        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n"
        "                return [seen[target - x], i]\n"
        "            seen[x] = i\n"
    )
    primes = (
        "n = int(input())\ns = bytearray([1]) * (n + 1)\ns[0:2] = b'\\x00\\x00'\n"
        "for i in range(2, int(n ** 0.5) + 1):\n    if s[i]:\n"
        "        s[i*i::i] = bytearray(len(s[i*i::i]))\nprint(sum(s))\n"
    )
    try:
        ps = task.problems("test")
        vs = task.grade(
            ps,
            [
                fenced("a, b = map(int, input().split())\nprint(a + b)"),
                fenced(two_sum),
                fenced(primes),
            ],
        )
        assert [v.status for v in vs] == ["pass"] * 3, [v.detail for v in vs]
        wrong = two_sum.replace("[seen[target - x], i]", "[i, seen[target - x]]")
        (v,) = task.grade(ps[1:2], [fenced(wrong)])
        assert (v.correct, v.status) == (False, "wrong_answer")
        reader = task.reader_prompt(ps[0], "```python\nprint(3)\n```")[0]["content"]
        assert "rival" in reader and "print(3)" in reader and ps[0].question in reader
    finally:
        task.close()


def test_lcb_test_decoding_refuses_pickled_objects():
    cases = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    packed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()
    assert decode_lcb_tests(packed) == cases and decode_lcb_tests(json.dumps(cases)) == cases
    evil = base64.b64encode(zlib.compress(pickle.dumps(Path("x")))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        decode_lcb_tests(evil)


# --- HumanEval canary --------------------------------------------------------------------


@pytest.fixture(scope="module")
def humaneval():
    task = HumanEvalTask(grading_timeout_s=10)
    yield task
    task.close()


def test_humaneval_splits(humaneval):
    test = humaneval.problems("test")
    assert (
        len(test) == 164
        and humaneval.problems("hard") == test
        and humaneval.problems("train") == []
    )
    assert (
        test[0].id == "HumanEval/0"
        and "def has_close_elements" in humaneval.solve_prompt(test[0])[0]["content"]
    )


def test_humaneval_seeded_train_validation_test():
    task = HumanEvalTask(test_size=64, validation_size=20, seed=3)
    train, val, test = (task.problems(s) for s in ("train", "validation", "test"))
    assert (len(train), len(val), len(test)) == (80, 20, 64)
    assert not {p.id for p in train} & ({p.id for p in test} | {p.id for p in val})
    assert {p.id for p in train + val + test} == {f"HumanEval/{i}" for i in range(164)}
    again = HumanEvalTask(test_size=64, validation_size=20, seed=3).split_manifest()
    assert again["split_sha256"] == task.split_manifest()["split_sha256"]
    other = HumanEvalTask(test_size=64, validation_size=20, seed=4).split_manifest()
    assert other["split_sha256"] != again["split_sha256"] and again["test_size"] == 64
    with pytest.raises(ValueError, match="no training problems"):
        HumanEvalTask(test_size=164).problems("test")


def test_humaneval_canary_all_canonical_solutions_pass(humaneval):
    """All 164: full functions (prompt + canonical body) in a fence, as a chat model answers."""
    ps = humaneval.problems("test")
    vs = humaneval.grade(ps, [fenced(p.meta["prompt"] + p.meta["solution"]) for p in ps])
    failed = [(p.id, v.status, v.detail) for p, v in zip(ps, vs) if v.status != "pass"]
    assert not failed


BROKEN = {
    "returns_none": lambda p: p.meta["prompt"] + "    return None\n",
    "raises": lambda p: p.meta["prompt"] + "    raise NotImplementedError\n",
    "exits_early": lambda p: "import os\nprint('all tests passed')\nos._exit(0)\n",
    "bare_body_off": lambda p: (
        p.meta["solution"].replace("return ", "return not ", 1)
        if "return " in p.meta["solution"]
        else "    return 0\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_humaneval_canary_broken_solutions_fail_sampled(humaneval, kind):
    ps = humaneval.problems("test")[::8]  # 21 problems; the full sets are a slow test
    vs = humaneval.grade(ps, [fenced(BROKEN[kind](p)) for p in ps])
    passed = [p.id for p, v in zip(ps, vs) if v.correct is not False]
    assert not passed


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["returns_none", "raises", "exits_early"])
def test_humaneval_canary_broken_solutions_fail_all(humaneval, kind):
    ps = humaneval.problems("test")
    vs = humaneval.grade(ps, [fenced(BROKEN[kind](p)) for p in ps])
    assert not [p.id for p, v in zip(ps, vs) if v.correct is not False]


def test_humaneval_body_completion_also_graded(humaneval):
    ps = humaneval.problems("test")[:10]
    vs = humaneval.grade(ps, [fenced(p.meta["solution"].rstrip("\n")) for p in ps])
    assert [v.status for v in vs] == ["pass"] * 10


def test_worked_solutions_are_the_datas_reference_programs_and_pass(humaneval):
    """GAR's anchor for a code problem: the data's reference program as a fenced block that
    the task's own grader accepts (TACO's first solution; HumanEval's prompt + canonical body)."""
    taco = TacoTask(data_files=TACO_FILES, grading_timeout_s=5)
    try:
        ps = taco.problems("train") + taco.problems("test")
        anchors = [taco.worked_solution(p) for p in ps]
        assert all(a.startswith("```python\n") for a in anchors)
        assert [v.status for v in taco.grade(ps, anchors)] == ["pass"] * len(ps)
    finally:
        taco.close()
    ps = humaneval.problems("test")[:4]
    anchors = [humaneval.worked_solution(p) for p in ps]
    assert all(p.meta["prompt"].rstrip() in a for p, a in zip(ps, anchors))
    assert [v.status for v in humaneval.grade(ps, anchors)] == ["pass"] * 4
