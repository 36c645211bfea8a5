"""CodeContests' grader (``google-deepmind/code_contests``, ``execution/tester_sandboxer.cc``).

Followed: ``OutputsMatch``, ``SplitAndLowercase`` and ``ValuesMatch``, the default comparison
of ``TesterSandboxer::Test``. Numbers are parsed as ``absl::SimpleAtod`` does (an optional
``+``, then ``std::from_chars``' general format: decimal with optional exponent, ``inf``,
``infinity``, ``nan``; no hex, no underscores). Programs run as written (no prelude).
"""

from __future__ import annotations

import math
import re

from agon.tasks.code.judges import Judge

_SEPARATORS = re.compile(r"[ \n\t\r\v]+")  # absl::ByAnyChar(" \n\t\r\v"); not \f
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_NUMBER = re.compile(
    r"(?:\+(?!-))?-?(?:(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|inf(?:inity)?|nan(?:\([0-9a-z_]*\))?)"
)
PRECISION = 1e-5
"""``ValuesMatch``' ``kDoublePrecision``: numbers match when they differ by less than this,
absolutely (no relative tolerance, for floats and integers alike)."""


def _parts(s: str) -> list[str]:
    """``SplitAndLowercase``: tokens between `` \\n\\t\\r\\v``, ASCII letters lowercased."""
    return [t for t in _SEPARATORS.split(s.translate(_ASCII_LOWER)) if t]


def _number(token: str) -> float | None:
    """``absl::SimpleAtod`` on a (lowercased) token, or None when it is not a number."""
    if not _NUMBER.fullmatch(token):
        return None
    body = token[1:] if token.startswith("+") else token
    if "nan" in body:
        return math.nan
    return float(body)  # overflow reads as +-inf, as SimpleAtod does


def values_match(a: str, b: str) -> bool:
    """``ValuesMatch``: two non-numbers (or a number and a non-number) must be equal strings;
    two numbers must differ by less than :data:`PRECISION` (so ``inf`` never matches ``inf``
    here, and 10**18 matches 10**18 + 1, both read as doubles)."""
    x, y = _number(a), _number(b)
    if x is None or y is None:
        return a == b
    return abs(x - y) < PRECISION


def stdin_match(got: str, expected: str) -> bool:
    """``OutputsMatch``: the outputs' tokens, lowercased, are equal lists; or, with as many
    tokens on each side, every pair satisfies :func:`values_match`.

    So layout (spaces, blank lines, line breaks) never matters, letter case never matters
    (``yes`` passes for ``YES``), and numbers are compared as doubles within 1e-5 absolute
    (``0.50`` == ``0.5``; ``0.333333`` == ``0.3333333``; ``1e-7`` == ``0``). The official judge
    has no relative tolerance and no checker: problems whose statements allow any valid
    answer are flagged when loaded (:mod:`agon.tasks.code.codecontests`).
    """
    got_parts, want_parts = _parts(got), _parts(expected)
    if got_parts == want_parts:
        return True
    if len(got_parts) != len(want_parts):
        return False
    return all(values_match(a, b) for a, b in zip(got_parts, want_parts))


def prelude(code: str, mode: str) -> str:
    """CodeContests runs the program as written."""
    del mode
    return code


JUDGE = Judge(
    name="codecontests",
    stdin_match=stdin_match,
    call_check=None,  # stdin/stdout tests only
    prelude=prelude,
    source="CodeContests execution/tester_sandboxer.cc OutputsMatch",
)
