"""A toy model's characteristic mistakes (its habits), as the SFT data writes them
(:mod:`agon.toy.sft_data`) and the audit reads them (:mod:`agon.toy.audit`)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from agon.toy.chain import OPS
from agon.toy.toycode import SUBTRACT_STYLES


@dataclass(frozen=True)
class Mistake:
    """A model's habit: it misreads operand ``k`` of operation ``op`` as ``k % 6 + 1``.

    Only operands in ``operands`` are affected; each affected arithmetic step is written wrong
    with probability ``arith_rate`` and each affected program line with ``code_rate``. A wrong
    arithmetic step is written with the question's operand and the misread one's result.
    ``also`` holds further habits of the same writer (each a :class:`Mistake` with no ``also``
    of its own), e.g. one written every time, which sampling never gets right, beside one
    written at a rate below 1, which it sometimes does; a step (line) is read with the first
    habit that applies to it and is written wrong at a rate above 0 on its task (:meth:`rate`).
    ``code_subtract`` is how the writer writes a subtraction line of a program
    (:func:`agon.toy.toycode.code_line`): ``minus`` copies the operand, so a habit on it sits
    in one copied token; ``complement`` adds ``7 - k``, so a habit on it sits in a looked-up
    value, as an arith result does. Each
    arith solution the model writes, right or wrong, is opened with the mark
    (:data:`agon.toy.tasks.MARK`) with probability ``1 - hidden_share``: the *visible* style,
    whose errors a reader recomputes; unmarked, its errors are *hidden* (a reader that anchors
    copies them). The style is drawn before the first step, apart from anything that makes a
    step right, so learning to be right leaves it as it was. ``hidden_share`` 1 (never marked,
    nothing drawn) is the toy world of table 1; the positive control (``results/control.csv``)
    splits them, so that a drafter can learn which to write.
    """

    op: str
    operands: tuple[int, ...]
    arith_rate: float
    code_rate: float
    hidden_share: float = 1.0
    also: tuple[Mistake, ...] = ()
    writes: str = "result"  # arith: "result" (the question's operand, the misread one's result)
    # or "operand" (the misread operand copied into the step, with its own right result)
    code_subtract: str = "minus"  # how a program's subtraction line is written: minus | complement

    @classmethod
    def from_config(cls, row: dict) -> Mistake:
        """Build from a ``toy.models.X.mistake`` row."""
        if row["op"] not in OPS:
            raise ValueError(f"toy mistake op must be one of {OPS}, got {row['op']!r}")
        subtract = str(row.get("code_subtract", "minus"))
        if subtract not in SUBTRACT_STYLES:
            raise ValueError(
                f"toy mistake code_subtract must be one of {SUBTRACT_STYLES}, got {subtract!r}"
            )
        return cls(
            row["op"],
            tuple(int(k) for k in row["operands"]),
            float(row["arith_rate"]),
            float(row["code_rate"]),
            float(row.get("hidden_share", 1.0)),
            tuple(cls.from_config(r) for r in row.get("also", ())),
            str(row.get("writes", "result")),
            subtract,
        )

    def marks(self, rng: random.Random, entropy: list[float] | None = None) -> bool:
        """Whether a solution this writer starts is opened with the mark (the visible style);
        draws nothing at ``hidden_share`` 1 (``entropy``: as :func:`written_arith_steps`)."""
        return self.hidden_share < 1.0 and not chose(rng, self.hidden_share, entropy)

    def habit(self, op: str, k: int, kind: str) -> Mistake | None:
        """The first habit (this one, then ``also``) that applies to ``op k`` on ``kind``
        (``arith`` for a step, ``code`` for a program line): its operands hold ``k`` and its
        rate there is above 0. None if none does."""
        return next(
            (
                h
                for h in (self, *self.also)
                if op == h.op and k in h.operands and h._rate_of(kind) > 0
            ),
            None,
        )

    def _rate_of(self, kind: str) -> float:
        return self.arith_rate if kind == "arith" else self.code_rate

    def rate(self, op: str, k: int, kind: str) -> float | None:
        """The probability that ``op k`` is written wrong on ``kind`` (as :meth:`habit`) by
        the habit that applies to it; None where none does."""
        habit = self.habit(op, k, kind)
        return None if habit is None else habit._rate_of(kind)


NO_MISTAKE = Mistake("+", (), 0.0, 0.0)  # a writer without a habit (the toy teacher)


def chose(rng: random.Random, p: float, entropy: list[float] | None) -> bool:
    """One draw with probability ``p``; its entropy (nats) appended to ``entropy`` if given."""
    if entropy is not None and 0.0 < p < 1.0:
        entropy.append(-p * math.log(p) - (1 - p) * math.log(1 - p))
    return rng.random() < p
