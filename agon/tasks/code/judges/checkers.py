"""Checkers for special-judge problems whose data says which kind of judge they need.

No source ships checker programs. TACO's special-judge list (``output_spj.jsonl``, see
:mod:`agon.tasks.code.taco_special`) names the kind for each flagged test problem: 1
non-deterministic output (any valid answer: no checker can be derived), 2 case-insensitive
strings, 3 floating point with a tolerance. Kinds 2 and 3 determine a checker, given here;
``special_judge: checker`` grades those problems with them (``docs/method.md``).
"""

from __future__ import annotations

import math

FLOAT_TOLERANCE = 1e-6
"""Absolute or relative error allowed by :func:`tokens_close`: the bound most statements of
such problems give ("absolute or relative error does not exceed 10^-6"); the list does not
record each problem's own bound."""


def tokens_casefold(got: str, expected: str) -> bool:
    """Whitespace tokens equal up to letter case (TACO's special-judge kind 2)."""
    return got.casefold().split() == expected.casefold().split()


def _close(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return abs(x - y) <= FLOAT_TOLERANCE * max(1.0, abs(y))


def tokens_close(got: str, expected: str) -> bool:
    """Whitespace tokens equal, or numbers within :data:`FLOAT_TOLERANCE` absolute or relative
    error (TACO's special-judge kind 3)."""
    g, w = got.split(), expected.split()
    return len(g) == len(w) and all(_close(a, b) for a, b in zip(g, w))


CHECKERS = {"case_insensitive": tokens_casefold, "float_tolerance": tokens_close}
"""Special-judge kinds that determine a checker, and the checker."""
