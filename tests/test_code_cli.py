"""`agon grade code`: source rows plus a completion in, one JSON verdict per line out, graded
by the task's own row conversion and grader (the path evaluation takes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agon.cli import main

FIX = Path(__file__).parent / "fixtures" / "code"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIX / name).read_text().splitlines() if line.strip()]


def _grade(tmp_path, capsys, args: list[str], lines: list[dict]) -> list[dict]:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert main(["grade", "code", "--jsonl", str(path), *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_grade_code_codecontests_rows(tmp_path, capsys):
    ratio, parity, files, pair = _rows("codecontests_conformance_test.jsonl")
    empty = _rows("codecontests_train.jsonl")[0]  # a row without tests
    fence = "```python\n{}\n```"
    lines = [
        {**ratio, "completion": fence.format(ratio["solutions"]["solution"][1])},
        {**parity, "completion": fence.format("print('YES')")},
        {**files, "completion": "no code, sorry"},
        {**pair, "completion": fence.format("print(1, int(input()) - 1)")},
        {**empty, "completion": fence.format("print(1)")},
        {**parity, "completion": fence.format("while True:\n    pass")},
    ]
    out = _grade(tmp_path, capsys, ["--task", "codecontests"], lines)
    assert [o["status"] for o in out] == [
        "pass",
        "wrong_answer",
        "no_code",
        "pass",
        "sandbox_error",
        "timeout",
    ]
    assert out[0]["tests_passed"] == out[0]["tests_total"] == 4 and out[0]["seconds"] > 0
    assert out[1]["tests_passed"] == 1 and out[1]["tests_total"] == 2
    assert "exact match" in out[3]["detail"]  # a multiple-answer problem, graded all the same
    assert out[0]["id"].startswith("cc-") and out[4]["id"] is None


def test_grade_code_params_and_call_rows(tmp_path, capsys):
    rows = _rows("livecodebench_conformance.jsonl")
    solution = (
        "class Solution:\n    def maxPairSum(self, nums: List[int]) -> int:\n"
        "        return sum(sorted(nums)[-2:])"
    )
    lines = [
        {**rows[3], "completion": f"```python\n{solution}\n```"},
        {**rows[0], "completion": "```python\nprint('0.50')\n```"},
    ]
    out = _grade(tmp_path, capsys, ["--task", "livecodebench", "--param", "max_tests=1"], lines)
    assert [(o["id"], o["status"], o["tests_total"]) for o in out] == [
        ("lcb-3100", "pass", 1),
        ("lcb-abc900_a", "pass", 1),
    ]
    out = _grade(tmp_path, capsys, ["--task", "livecodebench", "--param", "strict=true"], lines)
    assert [o["status"] for o in out] == ["pass", "wrong_answer"]


def test_grade_code_refuses_bad_input(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"name": "x"}) + "\n")
    with pytest.raises(SystemExit, match="completion"):
        main(["grade", "code", "--task", "codecontests", "--jsonl", str(path)])
    with pytest.raises(SystemExit, match="--task"):
        main(["grade", "code", "--jsonl", str(path)])
    with pytest.raises(SystemExit, match="not a code task"):
        main(["grade", "code", "--task", "arith", "--jsonl", str(path)])
