"""Function-call tests judged by a data set's own rule, as sandboxed harness programs.

LiveCodeBench and TACO compare a function's return value differently (LiveCodeBench: ``==``
after reading a tuple as a list; TACO: also against the first element of its list-wrapped
outputs, with its dict-key conversions), and both look the function up the same way: on a
``Solution()`` instance when the program's text contains ``class Solution``, else as a
module-level name (``compile_code`` / ``get_function`` in LiveCodeBench's ``testing_util.py``,
``compile_and_get_func`` in TACO's). The sandbox's generic call harness has one rule of its own,
so this module builds the test on :func:`agon.sandbox.check_program` instead: its test code
looks the function up, then runs the judge's ``call_check`` (shipped by its source) on every
call, raising ``AssertionError`` at the first failure, which the harness reports as a wrong
answer. All calls run in one sandboxed process, as in both official runners.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

from agon.sandbox import check_program
from agon.tasks.code.judges import CallCheck

_TEST = """
import json as _agon_json
_agon_calls = _agon_json.loads({calls!r})
_agon_judge = {{}}
exec({check_source!r}, _agon_judge)
_agon_absent = object()
_agon_own_check = globals().get("check", _agon_absent)
if {use_class!r}:
    _agon_target = getattr(Solution(), {name!r}, None) if "Solution" in globals() else None
else:
    _agon_target = globals().get({name!r})


def check(_agon_fn):
    # check_program calls `check`; give the solution back its own name before the calls run
    if _agon_own_check is _agon_absent:
        del globals()["check"]
    else:
        globals()["check"] = _agon_own_check
    if _agon_fn is None:
        raise AssertionError("no function {name} defined")
    for _agon_i, (_agon_args, _agon_want) in enumerate(_agon_calls):
        try:
            _agon_ok, _agon_got = _agon_judge[{check_name!r}](_agon_fn, _agon_args, _agon_want)
        except AssertionError as _agon_err:  # the solution's own assert: a runtime error
            raise RuntimeError("the solution raised AssertionError") from _agon_err
        if not _agon_ok:
            raise AssertionError(
                "call %d/%d: got %r, expected %r"
                % (_agon_i + 1, len(_agon_calls), _agon_got, _agon_want)
            )
"""

_FAILED_CALL = re.compile(r"call (\d+)/(\d+): ")


def call_harness(
    solution: str, fn_name: str, calls: list[tuple[Any, Any]], call_check: CallCheck
) -> tuple[str, list[tuple[str, str]]]:
    """The harness program and its one (stdin, stdout) test for ``calls`` (``(args,
    expected)`` pairs, JSON-able) on ``solution``, judged by ``call_check``."""

    test_code = _TEST.format(
        calls=json.dumps([[args, expected] for args, expected in calls]),
        check_source=inspect.getsource(call_check),
        check_name=call_check.__name__,
        use_class="class Solution" in solution,
        name=fn_name,
    )
    return check_program(solution, test_code, "_agon_target")


def calls_passed(detail: str | None, n_calls: int, status: str) -> int | None:
    """How many calls passed, from a harness verdict: all on a pass, those before the failing
    one on a wrong answer (none when the function is missing), None when the run stopped
    otherwise (an exception, a timeout: the harness does not report how far it got)."""
    if status == "pass":
        return n_calls
    if status != "wrong_answer":
        return None
    m = _FAILED_CALL.search(detail or "")
    return int(m.group(1)) - 1 if m else 0
