"""CodeContests (deepmind/code_contests): stdin tests, hard by Codeforces rating.

Kept apart because its schema is its own: tests in three groups (public, private, generated),
solutions keyed by language id, a rating rather than a difficulty label, limits per problem
(``time_limit`` as a protobuf Duration, ``memory_limit_bytes``), problems that read and write
named files (``input_file`` / ``output_file``), and a ``valid`` split of its own.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any, ClassVar

from agon.tasks.base import Param, Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.judges import codecontests as cc_judge
from agon.tasks.code.limits import duration_seconds
from agon.tasks.code.load import _require, load_rows

PYTHON3 = 3  # CodeContests' language id for Python 3 solutions

ANY_ANSWER = re.compile(
    r"\b(?:print|output|write)\s+any\b|\bany\s+of\s+them\b"
    r"|\b(?:multiple|several|many|more\s+than\s+one)\s+(?:possible\s+|valid\s+|correct\s+"
    r"|optimal\s+|suitable\s+)*(?:answers|solutions)\b",
    re.IGNORECASE,
)
"""Statements that accept any of several answers ("If there are multiple answers, print any
of them"). The data has no field for it and the official judge compares with the expected
output only, so such a problem would mark a right answer wrong; this flags them (a heuristic
on the statement: it can miss a problem worded otherwise, or flag one that says it of an
intermediate object)."""


class CodeContestsTask(CodeTask):
    """CodeContests (deepmind/code_contests): public, private and generated tests, stdin style.

    ``hard``: Codeforces rating ``cf_rating >= hard_min_difficulty`` (default 2000); problems
    without a rating (cf_rating 0: other judges) are never hard. ``include_generated``: grade
    on the generated tests too (the source's own standard: all must pass). Validation is the
    source's ``valid`` split (``data_files["valid"]`` locally), not carved from train.
    """

    name = "codecontests"
    version = "2"
    hub_id = "deepmind/code_contests"
    judge = cc_judge.JUDGE
    hard_min_difficulty = 2000.0
    FIELDS = ("name", "description", "public_tests", "private_tests", "generated_tests")
    # the data set card: 165 test and 117 valid problems
    PUBLISHED_SIZES: ClassVar[dict[str, int]] = {"test": 165, "validation": 117}
    PARAMS: ClassVar[dict[str, Param]] = {
        **CodeTask.PARAMS,
        "validation_size": Param(
            "integer", 0, "a seeded sample of that many of the source's valid split (0: all)"
        ),
        "include_generated": Param("boolean", True, "grade on the generated tests too"),
    }

    def __init__(self, include_generated: bool = True, **kwargs: Any) -> None:
        """Parameters: :attr:`PARAMS` (``kwargs``: :class:`CodeTask`'s)."""
        super().__init__(**kwargs)
        self.include_generated = bool(include_generated)

    def _rows(self, split: str) -> list[dict]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"codecontests {split}")
        return rows

    def _source_splits(self) -> tuple[list[Problem], list[Problem], list[Problem]]:
        valid = self._problems_of("valid")
        if self.validation_size:
            if self.validation_size > len(valid):
                raise ValueError(
                    f"codecontests: validation_size={self.validation_size} exceeds the "
                    f"{len(valid)} problems of the valid split"
                )
            rng = random.Random(f"{self.name}-validation-{self.seed}")
            keep = set(rng.sample(range(len(valid)), self.validation_size))
            valid = [p for i, p in enumerate(valid) if i in keep]
        return self._problems_of("train"), valid, self._problems_of("test")

    def problem_from_row(self, row: dict, split: str, index: int) -> Problem | None:
        """A CodeContests row: its tests (public, then private, then generated), limits,
        files, reference solutions, and the multiple-answer flag (:data:`ANY_ANSWER`)."""
        pid = "cc-" + hashlib.sha1(str(row["name"]).encode()).hexdigest()[:12]
        kinds = ("public_tests", "private_tests") + (
            ("generated_tests",) if self.include_generated else ()
        )
        groups = []
        for kind in kinds:
            t = row.get(kind) or {}
            groups.append(list(zip(t.get("input") or [], t.get("output") or [])))
        if not any(groups):
            return None
        rating = row.get("cf_rating") or 0
        memory = row.get("memory_limit_bytes") or 0
        meta = {
            "mode": "stdin",
            "tests": self._cap(pid, *groups),
            "solution": _solution(row.get("solutions")),
            "incorrect_solution": _solution(row.get("incorrect_solutions")),
            "source": row.get("source"),
            "cf_rating": rating or None,
            "source_difficulty": row.get("difficulty"),
            "time_limit_s": duration_seconds(row.get("time_limit")),
            "memory_limit_mb": memory / 2**20 if memory > 0 else None,
            "input_file": row.get("input_file") or None,
            "output_file": row.get("output_file") or None,
        }
        if ANY_ANSWER.search(str(row["description"])):
            meta.update(special_judge=True, special_judge_kind="any_answer")
        return _problem(pid, str(row["description"]), float(rating) if rating else None, meta)


def _solution(sols: dict | None) -> str | None:
    """The first Python 3 solution of a ``{language: [...], solution: [...]}`` group."""
    sols = sols or {}
    py = [
        s
        for lang, s in zip(sols.get("language") or [], sols.get("solution") or [])
        if lang == PYTHON3
    ]
    return py[0] if py else None
