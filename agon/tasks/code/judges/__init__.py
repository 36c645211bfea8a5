"""How each official grader decides that a program's answer is right, one module per grader.

A code task is only comparable to published numbers if it accepts what the benchmark's own
grader accepts and rejects what it rejects. The graders disagree with each other (LiveCodeBench
compares lines as Decimals, TACO runs a cascade written for a list of lines on a string,
CodeContests compares lowercased tokens with an absolute float tolerance), so each gets its own
module, and each rule cites the file and function it follows:

- :mod:`~agon.tasks.code.judges.livecodebench`: ``lcb_runner/evaluation/testing_util.py``;
- :mod:`~agon.tasks.code.judges.taco`: TACO's ``metrics/testing_util.py``;
- :mod:`~agon.tasks.code.judges.codecontests`: ``execution/tester_sandboxer.cc``;
- :mod:`~agon.tasks.code.judges.checkers`: checkers for special-judge problems whose data says
  which kind of judge they need (TACO's list).

A :class:`Judge` bundles one grader's parts: the stdin comparison (a pure module-level
``(got, expected) -> bool``, so the sandbox pool can hash it), the function-call check (whose
*source* runs inside the sandbox, see :mod:`agon.tasks.code.calls`) and the prelude the
official runner puts before the program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Compare = Callable[[str, str], bool]
CallCheck = Callable[[Callable[..., Any], Any, Any], tuple[bool, Any]]


@dataclass(frozen=True)
class Judge:
    """One official grader's semantics.

    ``stdin_match(got, expected)``: does a program's output pass a stdin/stdout test.
    ``call_check(fn, args, expected) -> (ok, got)``: call the solution's function on one
    test and compare; it must be self-contained (its source is shipped into the sandbox);
    None for a grader without function-call tests.
    ``prelude(code, mode)``: the program as the official runner runs it (``mode`` is
    ``stdin`` or ``call``). ``source``: where the rules come from.
    """

    name: str
    stdin_match: Compare
    call_check: CallCheck | None
    prelude: Callable[[str, str], str]
    source: str
