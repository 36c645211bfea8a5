"""The one record every grader returns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Verdict:
    """The grade of one completion.

    ``correct`` is True or False when the grader could decide, and None when it could not
    (``status`` says why: ``timeout``, ``error``, ``sandbox_error``). It is never a silent 0.
    ``tests_passed`` / ``tests_total``: for graders that run tests (code), how many passed
    before the first failure (None where the run could not tell) and how many there are.
    """

    correct: bool | None
    status: str
    extracted: str | None = None
    seconds: float = 0.0
    detail: str | None = None
    tests_passed: int | None = None
    tests_total: int | None = None

    def to_dict(self) -> dict:
        """A JSON-able dict of the verdict."""
        return asdict(self)

    @property
    def score(self) -> float:
        """1.0 if correct else 0.0; callers that must score undecided items do so explicitly."""
        return 1.0 if self.correct else 0.0


def correctness(verdicts: Iterable[Verdict]) -> np.ndarray:
    """Verdicts as a float array: 1.0 correct, 0.0 wrong, NaN where the grader could not decide
    (so an undecided item stays visible, e.g. out of a group's baseline, not a silent 0)."""
    return np.array(
        [np.nan if v.correct is None else float(v.correct) for v in verdicts], dtype=np.float64
    )
