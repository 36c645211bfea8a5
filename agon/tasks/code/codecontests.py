"""CodeContests (deepmind/code_contests): stdin tests, hard by Codeforces rating.

Kept apart because its schema is its own: tests in three groups (public, private, generated),
solutions keyed by language id, and a rating rather than a difficulty label.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agon.tasks.base import Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.load import _require, load_rows

PYTHON3 = 3  # CodeContests' language id for Python 3 solutions


class CodeContestsTask(CodeTask):
    """CodeContests (deepmind/code_contests): public, private and generated tests, stdin style.

    ``hard``: Codeforces rating ``cf_rating >= hard_min_difficulty`` (default 2000); problems
    without a rating (cf_rating 0: other judges) are never hard. ``include_generated``: grade
    on the generated tests too (the source's own standard: all must pass).
    """

    name = "codecontests"
    version = "1"
    hub_id = "deepmind/code_contests"
    hard_min_difficulty = 2000.0
    FIELDS = ("name", "description", "public_tests", "private_tests", "generated_tests")

    def __init__(self, include_generated: bool = True, **kwargs: Any) -> None:
        """``include_generated``: grade on the generated tests too. ``kwargs``: as
        :class:`CodeTask`."""
        super().__init__(**kwargs)
        self.include_generated = bool(include_generated)

    def _problems_of(self, split: str) -> list[Problem]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"codecontests {split}")
        kinds = ("public_tests", "private_tests") + (
            ("generated_tests",) if self.include_generated else ()
        )
        out = []
        for row in rows:
            tests = []
            for kind in kinds:
                t = row.get(kind) or {}
                tests += list(zip(t.get("input") or [], t.get("output") or []))
            if not tests:
                continue
            rating = row.get("cf_rating") or 0
            sols = row.get("solutions") or {}
            py = [
                s
                for lang, s in zip(sols.get("language") or [], sols.get("solution") or [])
                if lang == PYTHON3
            ]
            bad = row.get("incorrect_solutions") or {}
            py_bad = [
                s
                for lang, s in zip(bad.get("language") or [], bad.get("solution") or [])
                if lang == PYTHON3
            ]
            meta = {
                "mode": "stdin",
                "tests": self._cap(tests),
                "solution": py[0] if py else None,
                "incorrect_solution": py_bad[0] if py_bad else None,
                "source": row.get("source"),
                "cf_rating": rating or None,
                "source_difficulty": row.get("difficulty"),
            }
            pid = "cc-" + hashlib.sha1(str(row["name"]).encode()).hexdigest()[:12]
            out.append(
                _problem(pid, str(row["description"]), float(rating) if rating else None, meta)
            )
        return out
