"""One completion's sandbox run, and its verdict as a code task reports it.

Kept apart from :mod:`agon.tasks.code.base` so the record of what runs (program, tests,
limits, comparison, files) is one small type that the task builds and the pool consumes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agon.grading.verdict import Verdict
from agon.tasks.code.calls import calls_passed
from agon.tasks.code.judges import Compare


@dataclasses.dataclass(frozen=True)
class Run:
    """What the sandbox runs for one completion: the program (prelude and harness included),
    its (stdin, expected) tests, its limits, the comparison (None: exact tokens), the files it
    talks through (``(input_file, output_file)``, None: stdin/stdout), how many calls a
    harness runs (``mode`` ``call``), and a note for the verdict's detail."""

    program: str
    tests: list[tuple[str, str]]
    timeout_s: float
    memory_mb: int
    compare: Compare | None = None
    io: tuple[str | None, str | None] | None = None
    n_tests: int = 0
    mode: str = "stdin"
    note: str | None = None


def finish(verdict: Verdict, run: Run | None, code: str | None) -> Verdict:
    """The verdict as the task reports it: the extracted code, the data's test count for a
    harness run, and the run's note in front of the detail."""
    changes: dict[str, Any] = {"extracted": code}
    if run is not None and run.mode == "call":
        changes["tests_total"] = run.n_tests
        changes["tests_passed"] = calls_passed(verdict.detail, run.n_tests, verdict.status)
    if run is not None and run.note:
        changes["detail"] = run.note + (f"; {verdict.detail}" if verdict.detail else "")
    return dataclasses.replace(verdict, **changes)
