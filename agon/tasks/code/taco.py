"""TACO (BAAI/TACO): stdin tests or ``fn_name`` calls, with a five-level difficulty.

Kept apart from the other sets because TACO's schema is its own: tests in one ``input_output``
JSON, difficulty as a label (mapped to ordinals here so ``hard`` is a threshold like elsewhere).
"""

from __future__ import annotations

from typing import Any

from agon.tasks.base import Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.load import _as_json, _require, _text, load_rows

TACO_DIFFICULTY = {"EASY": 1.0, "MEDIUM": 2.0, "MEDIUM_HARD": 3.0, "HARD": 4.0, "VERY_HARD": 5.0}
"""TACO's difficulty labels as ordinals; UNKNOWN_DIFFICULTY has none (never in ``hard``)."""


class TacoTask(CodeTask):
    """TACO (BAAI/TACO): tests in an ``input_output`` JSON; stdin style or ``fn_name`` calls.

    ``hard``: difficulty HARD or VERY_HARD (``hard_min_difficulty`` 4 on :data:`TACO_DIFFICULTY`).
    Problems without tests are dropped (they cannot be graded).
    """

    name = "taco"
    version = "1"
    hub_id = "BAAI/TACO"
    hard_min_difficulty = 4.0
    FIELDS = ("question", "input_output", "difficulty")

    def _problems_of(self, split: str) -> list[Problem]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"taco {split}")
        out = []
        for i, row in enumerate(rows):
            io_spec = _as_json(row["input_output"]) or {}
            inputs, outputs = io_spec.get("inputs") or [], io_spec.get("outputs") or []
            if not inputs or len(inputs) != len(outputs):
                continue
            meta: dict[str, Any] = {
                "starter_code": row.get("starter_code") or "",
                "source": row.get("source"),
                "url": row.get("url"),
            }
            if io_spec.get("fn_name"):
                calls = [
                    (list(a) if isinstance(a, list) else [a], o) for a, o in zip(inputs, outputs)
                ]
                meta.update(
                    mode="call",
                    fn_name=io_spec["fn_name"],
                    calls=self._cap(calls),
                    unwrap_single=True,
                )
            else:
                meta.update(
                    mode="stdin",
                    tests=self._cap([(_text(a), _text(o)) for a, o in zip(inputs, outputs)]),
                )
            solutions = _as_json(row.get("solutions")) or []
            meta["solution"] = solutions[0] if solutions else None
            out.append(
                _problem(
                    f"taco-{split}-{i}",
                    str(row["question"]),
                    TACO_DIFFICULTY.get(str(row["difficulty"])),
                    meta,
                )
            )
        return out
