"""TACO's grader (``FlagOpen/TACO``, ``metrics/testing_util.py``).

Followed: ``compare_std_results`` (stdin output), ``execute_std_code`` (how inputs and outputs
are joined, and the ``input.txt`` / ``output.txt`` fallback, done by the task),
``synthesize_std_code`` / ``synthesize_cb_code`` (the import block and where it goes),
``process_input_output`` and ``execute_cb_code`` (function-call tests), ``compile_and_get_func``
(``Solution()`` when the program contains ``class Solution``).

The cascade in ``compare_std_results`` was written (in APPS) for a list of output lines; TACO
passes it the program's stdout as one string, so past the first check it iterates over the
*characters* of the output. :func:`stdin_match` reproduces what it does on a string, quirks
included (see its docstring); ``docs/method.md`` lists what that means in practice.
"""

from __future__ import annotations

import math

from agon.tasks.code.judges import Judge

IMPORTS = (
    "import sys\nimport time\nimport itertools\n"
    "from itertools import accumulate, product, permutations, combinations\nimport collections\n"
    "from collections import Counter, OrderedDict, deque, defaultdict, ChainMap\n"
    "from functools import lru_cache\nimport math\n"
    "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2\n"
    "import fractions\nfrom typing import List, Tuple\n"
    "try:\n    import numpy as np\nexcept ImportError:\n    pass\n"
    "import random\nimport heapq\nfrom heapq import *\n"
)
"""The block of ``synthesize_std_code`` / ``synthesize_cb_code``, except that ``import numpy as
np`` is guarded: solutions here see the standard library only (unless the task allows
``site_packages``), and an unguarded import would fail every program."""

STD_NAMES = "\nstdin = sys.stdin\nstdout = sys.stdout\n"
"""``synthesize_std_code`` also binds these two names for stdin programs."""


def prelude(code: str, mode: str) -> str:
    """The program as TACO runs it.

    Function-call programs get the import block in front (``synthesize_cb_code``). Stdin
    programs get it, and :data:`STD_NAMES`, just before their first line that is neither an
    import (``from ...`` / ``import ...`` at the line's start) nor holds ``import *``, so a
    leading ``from __future__`` import stays first (``synthesize_std_code``, the program it
    runs). A program that is only import lines (not even an empty line after them) gets
    nothing.
    """
    if mode != "stdin":
        return IMPORTS + code
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if "import *" not in line and not line.startswith(("from ", "import ")):
            return "\n".join(lines[:i] + [IMPORTS + STD_NAMES + line] + lines[i + 1 :])
    return code


def _allclose(a: list[float], b: list[float]) -> bool:
    """``np.allclose`` with its defaults (rtol 1e-5, atol 1e-8; NaN never close)."""
    return all(
        abs(x - y) <= 1e-8 + 1e-5 * abs(y) if math.isfinite(x) and math.isfinite(y) else x == y
        for x, y in zip(a, b)
    )


def stdin_match(got: str, expected: str) -> bool:
    """``compare_std_results(stdout, "\\n".join(outputs))``, on strings as TACO calls it.

    In order, what passes:

    1. the outputs equal once both are stripped of leading and trailing whitespace;
    2. (float check) the output is made only of digit characters, one per non-empty expected
       line, each close to that line's number (``np.allclose``): ``5`` for ``5.000001``;
    3. (set check) the set of the output tokens' *character sets* equals the set of the
       expected lines' *token sets*: holds when every token is one character (``2 1`` for
       ``1\\n2``, order and layout free), or e.g. ``12`` for the line ``1 2``;
    4. (rounded set check) the same with every output character and expected token read as a
       float rounded to 3 places: ``1`` for ``1.0000``.

    So multi-character answers must match exactly up to surrounding whitespace: ``10 \\n20``
    fails for ``10\\n20``, and ``0.50`` fails for ``0.5`` (unlike LiveCodeBench).
    """
    if got.strip() == expected.strip():
        return True
    lines = [x.strip() for x in expected.split("\n") if x]
    try:
        got_floats = [float(c) for c in got]
        want_floats = [float(x) for x in lines]
        if len(got_floats) == len(want_floats) and _allclose(got_floats, want_floats):
            return True
    except ValueError:
        pass
    line_sets = [set(x.split()) for x in lines]
    tokens = set(got.split())
    if {frozenset(t) for t in tokens} == {frozenset(s) for s in line_sets}:
        return True
    try:
        return {frozenset(round(float(c), 3) for c in t) for t in tokens} == {
            frozenset(round(float(x), 3) for x in s) for s in line_sets
        }
    except ValueError:
        return False


def call_check(fn, args, expected):
    """``process_input_output`` then ``execute_cb_code`` for one test.

    A dict first argument (JSON keys are strings) becomes the only argument with int keys; a
    dict expected value becomes ``[dict with int keys]``. Then ``fn(*args)``; a tuple result
    is read as a list; it passes if it equals the expected value, or its first element when
    that is a non-empty list (TACO wraps outputs in a list), or (a list of tuples read as
    lists) that first element. A comparison that raises is a failure.

    Runs inside the sandbox from its source (:mod:`agon.tasks.code.calls`): self-contained.
    """
    try:
        if isinstance(args[0], dict):
            args = [{int(k): v for k, v in args[0].items()}]
    except Exception:  # noqa: BLE001 - TACO's bare except: keep the arguments as they are
        pass
    try:
        if isinstance(expected, dict):
            expected = [{int(k): v for k, v in expected.items()}]
    except Exception:  # noqa: BLE001 - as above
        pass
    try:
        if isinstance(expected[0], dict):
            expected = [{int(k): v for k, v in expected[0].items()}]
    except Exception:  # noqa: BLE001 - as above
        pass
    got = fn(*args)
    try:
        if isinstance(got, tuple):
            got = list(got)
        ok = got == expected
        if isinstance(expected, list) and expected:
            ok = ok or got == expected[0]
        try:
            if isinstance(got[0], tuple):
                got = [list(x) for x in got]
                ok = ok or got == expected[0]
        except Exception:  # noqa: BLE001 - as above
            pass
        return bool(ok), got
    except Exception:  # noqa: BLE001 - TACO scores a comparison that raises as a failure
        return False, got


JUDGE = Judge(
    name="taco",
    stdin_match=stdin_match,
    call_check=call_check,
    prelude=prelude,
    source="TACO metrics/testing_util.py",
)
