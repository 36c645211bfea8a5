"""TACO (BAAI/TACO): stdin tests or ``fn_name`` calls, with a five-level difficulty.

Kept apart from the other sets because TACO's schema is its own: tests in one ``input_output``
JSON, difficulty as a label (mapped to ordinals here so ``hard`` is a threshold like elsewhere),
limits as strings (``"2 seconds"``, ``"256 megabytes"``), special judges in a list outside the
data (:mod:`agon.tasks.code.taco_special`), and a grader that reruns a crashed stdin program with
``input.txt`` / ``output.txt`` (``execute_std_code`` in TACO's ``metrics/testing_util.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from agon.grading.verdict import Verdict
from agon.tasks.base import Param, Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.grading import Run
from agon.tasks.code.judges import taco as taco_judge
from agon.tasks.code.limits import parse_megabytes, parse_seconds
from agon.tasks.code.load import _as_json, _require, _text, load_rows
from agon.tasks.code.taco_special import taco_special_judges

TACO_DIFFICULTY = {"EASY": 1.0, "MEDIUM": 2.0, "MEDIUM_HARD": 3.0, "HARD": 4.0, "VERY_HARD": 5.0}
"""TACO's difficulty labels as ordinals; UNKNOWN_DIFFICULTY has none (never in ``hard``)."""

FILE_IO = ("input.txt", "output.txt")
"""The files of TACO's fallback for a stdin program that exits with an error."""


class TacoTask(CodeTask):
    """TACO (BAAI/TACO): tests in an ``input_output`` JSON; stdin style or ``fn_name`` calls.

    ``hard``: difficulty HARD or VERY_HARD (``hard_min_difficulty`` 4 on :data:`TACO_DIFFICULTY`).
    Problems without tests are dropped (they cannot be graded). Test problems on TACO's
    special-judge list are flagged by their position in the test split, which is the hub's
    order (a local test file must keep it).
    """

    name = "taco"
    version = "2"
    hub_id = "BAAI/TACO"
    judge = taco_judge.JUDGE
    hard_min_difficulty = 4.0
    FIELDS = ("question", "input_output", "difficulty")
    PUBLISHED_SIZES: ClassVar[dict[str, int]] = {"test": 1000}  # TACO's data set card
    PARAMS: ClassVar[dict[str, Param]] = {
        **CodeTask.PARAMS,
        "special_judge_file": Param(
            "string",
            None,
            "TACO's output_spj.jsonl (or a file in its format) to read instead of the copy kept "
            "here",
        ),
    }

    def __init__(self, special_judge_file: str | None = None, **kwargs: Any) -> None:
        """Parameters: :attr:`PARAMS` (``kwargs``: :class:`CodeTask`'s)."""
        super().__init__(**kwargs)
        self.special_judge_file = special_judge_file
        self._spj = taco_special_judges(special_judge_file)

    def _rows(self, split: str) -> list[dict]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"taco {split}")
        return rows

    def problem_from_row(self, row: dict, split: str, index: int) -> Problem | None:
        """A TACO row: stdin tests (inputs and outputs joined by newlines when lists, as
        ``execute_std_code`` does) or ``fn_name`` calls (arguments and outputs as stored)."""
        pid = f"taco-{split}-{index}"
        io_spec = _as_json(row["input_output"]) or {}
        inputs, outputs = io_spec.get("inputs") or [], io_spec.get("outputs") or []
        if not inputs or len(inputs) != len(outputs):
            return None
        meta: dict[str, Any] = {
            "starter_code": row.get("starter_code") or "",
            "source": row.get("source"),
            "url": row.get("url"),
            "time_limit_s": parse_seconds(row.get("time_limit")),
            "memory_limit_mb": parse_megabytes(row.get("memory_limit")),
        }
        if io_spec.get("fn_name"):
            meta.update(
                mode="call",
                fn_name=io_spec["fn_name"],
                calls=self._cap(pid, list(zip(inputs, outputs))),
            )
        else:
            tests = [(_text(a), _text(o)) for a, o in zip(inputs, outputs)]
            meta.update(mode="stdin", tests=self._cap(pid, tests))
        kind = self._spj.get(index) if split == "test" else None
        if kind is not None:
            meta.update(special_judge=True, special_judge_kind=kind)
        solutions = _as_json(row.get("solutions")) or []
        meta["solution"] = solutions[0] if solutions else None
        return _problem(
            pid, str(row["question"]), TACO_DIFFICULTY.get(str(row["difficulty"])), meta
        )

    def _retry(self, runs: Sequence[Run | None], verdicts: list[Verdict]) -> list[Verdict]:
        """TACO's fallback: a stdin program that exits with an error is run again with the
        input in ``input.txt`` and its answer read from ``output.txt`` (``execute_std_code``).
        TACO does this per test; here the whole program is rerun, and the second verdict is
        kept when the program ran to an answer (pass or wrong answer)."""
        again = [
            i
            for i, (r, v) in enumerate(zip(runs, verdicts))
            if r is not None and r.mode == "stdin" and r.io is None and v.status == "runtime_error"
        ]
        if not again:
            return verdicts
        second = self._run([dataclasses.replace(runs[i], io=FILE_IO) for i in again])
        out = list(verdicts)
        for i, v in zip(again, second):
            if v.status in ("pass", "wrong_answer"):
                detail = "run with input.txt/output.txt after a runtime error (TACO's fallback)"
                out[i] = dataclasses.replace(v, detail=f"{detail}; {v.detail}")
        return out
