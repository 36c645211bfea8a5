"""LiveCodeBench's grader (``LiveCodeBench/LiveCodeBench``, ``lcb_runner/evaluation/``).

Followed: ``testing_util.py`` (``grade_stdio``, ``get_stripped_lines``,
``convert_line_to_decimals``, ``grade_call_based``, ``compile_code``, ``import_string``) and
``compute_code_generation_metrics.py`` (``sys.set_int_max_str_digits(50000)`` in the process
that runs the solutions). What is not reproduced is listed in ``docs/method.md``.
"""

from __future__ import annotations

from decimal import Decimal

from agon.tasks.code.judges import Judge

IMPORTS = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\n"
    "import datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\nimport math\n"
    "import random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)
"""``testing_util.import_string``, verbatim: the runner puts it before every solution, stdin
and functional alike, which is why a LeetCode solution may use ``List[int]`` unimported."""

INT_DIGITS = "if hasattr(sys, 'set_int_max_str_digits'):\n    sys.set_int_max_str_digits(50000)\n"
"""The runner's process raises Python's int-to-str digit limit for the solutions it runs
(``compute_code_generation_metrics.py``, at import), so a long integer answer prints there.
(Guarded: interpreters from before the limit existed have no limit to raise.)"""


def prelude(code: str, mode: str) -> str:
    """The program as LiveCodeBench runs it: the import block first, in both modes.

    ``grade_stdio`` wraps the program in a function after the block (``make_function``) and
    ``grade_call_based`` prepends it; here the program stays at module level after the block
    (a sandboxed process of its own reads real stdin, so the wrapping is not needed).
    """
    del mode  # the same block in both modes
    return IMPORTS + INT_DIGITS + code


def _decimals(line: str) -> list[Decimal] | None:
    """``convert_line_to_decimals``: every whitespace token as a Decimal, or None."""
    try:
        return [Decimal(tok) for tok in line.split()]
    except ArithmeticError:  # decimal.InvalidOperation: not a number
        return None


def stdin_match(got: str, expected: str) -> bool:
    """``grade_stdio``: the outputs, stripped, split on ``\\n``, each line stripped; as many
    lines as expected, and each line equal as text or, token by token, as Decimals (so
    ``0.50`` == ``0.5`` and ``1e2`` == ``100``, but ``0.3333`` != ``0.33333``: no tolerance).
    """
    got_lines = [line.strip() for line in got.strip().split("\n")]
    want_lines = [line.strip() for line in expected.strip().split("\n")]
    if len(got_lines) != len(want_lines):
        return False
    for g, w in zip(got_lines, want_lines):
        if g == w:
            continue
        g_dec, w_dec = _decimals(g), _decimals(w)
        if g_dec is None or w_dec is None:
            return False
        try:
            if g_dec != w_dec:
                return False
        except ArithmeticError:  # a signaling NaN refuses comparison (a runner error there)
            return False
    return True


def call_check(fn, args, expected):
    """``grade_call_based``: ``fn(*args)``, a tuple read as a list (only at the top), then
    ``==`` against the expected JSON value: no float tolerance, no other conversion.

    Runs inside the sandbox from its source (:mod:`agon.tasks.code.calls`): self-contained.
    """
    got = fn(*args)
    if isinstance(got, tuple):
        got = list(got)
    return bool(got == expected), got


JUDGE = Judge(
    name="livecodebench",
    stdin_match=stdin_match,
    call_check=call_check,
    prelude=prelude,
    source="LiveCodeBench lcb_runner/evaluation/testing_util.py",
)
