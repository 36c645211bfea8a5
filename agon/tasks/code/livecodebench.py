"""LiveCodeBench (livecodebench/code_generation_lite): stdin and functional tests, split by date.

Kept apart because the source is a test set only (train comes from a date cut, the benchmark's
own guard against contamination) and its private tests are packed (see
:func:`agon.tasks.code.load.decode_lcb_tests`).
"""

from __future__ import annotations

import json
from typing import Any

from agon.tasks.base import Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.load import _as_json, _require, decode_lcb_tests, load_rows

LCB_DIFFICULTY = {"easy": 1.0, "medium": 2.0, "hard": 3.0}


class LiveCodeBenchTask(CodeTask):
    """LiveCodeBench (livecodebench/code_generation_lite): stdin and functional tests.

    The source is a test set; ``test_after`` (ISO date) splits it by ``contest_date`` into
    train (before) and test (on or after), the benchmark's own guard against contamination;
    without it every problem is test. ``hard``: difficulty ``hard``. Functional problems
    call ``Solution().<func_name>`` (or a top-level function) with the JSON arguments, one per
    input line, and compare with the JSON output.
    """

    name = "livecodebench"
    version = "1"
    hub_id = "livecodebench/code_generation_lite"
    hard_min_difficulty = 3.0
    FIELDS = (
        "question_id",
        "question_content",
        "difficulty",
        "public_test_cases",
        "private_test_cases",
    )

    def __init__(self, test_after: str | None = None, **kwargs: Any) -> None:
        """``test_after``: ISO date that splits train from test (None: all test). ``kwargs``:
        as :class:`CodeTask`."""
        super().__init__(**kwargs)
        self.test_after = test_after

    def _train_test(self) -> tuple[list[Problem], list[Problem]]:
        problems = self._problems_of("test")
        if self.test_after is None:
            return [], problems
        train = [p for p in problems if str(p.meta["contest_date"]) < self.test_after]
        test = [p for p in problems if str(p.meta["contest_date"]) >= self.test_after]
        return train, test

    def _problems_of(self, split: str) -> list[Problem]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"livecodebench {split}")
        out = []
        for row in rows:
            cases = decode_lcb_tests(row["public_test_cases"]) + decode_lcb_tests(
                row["private_test_cases"]
            )
            if not cases:
                continue
            meta: dict[str, Any] = {
                "starter_code": row.get("starter_code") or "",
                "platform": row.get("platform"),
                "contest_date": str(row.get("contest_date") or ""),
            }
            if all(c.get("testtype") == "functional" for c in cases):
                fn = (_as_json(row.get("metadata")) or {}).get("func_name")
                if not fn:
                    raise ValueError(
                        f"livecodebench {row['question_id']}: "
                        "functional tests but no metadata.func_name"
                    )
                calls = [
                    (
                        [json.loads(line) for line in c["input"].split("\n") if line.strip()],
                        json.loads(c["output"]),
                    )
                    for c in cases
                ]
                meta.update(mode="call", fn_name=fn, calls=self._cap(calls))
            else:
                meta.update(
                    mode="stdin", tests=self._cap([(c["input"], c["output"]) for c in cases])
                )
            out.append(
                _problem(
                    f"lcb-{row['question_id']}",
                    str(row["question_content"]),
                    LCB_DIFFICULTY.get(str(row["difficulty"]).lower()),
                    meta,
                )
            )
        return out
