"""The toy world's operation chains and the arith solutions written for them: the mod-7
operations, a chain's text, a written step and a solution's text, its answer (final or trace),
and the gold, wrong and parsed steps that the tasks (:mod:`agon.toy.tasks`), the SFT data
(:mod:`agon.toy.sft_data`) and the audit (:mod:`agon.toy.audit`) share.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MOD = 7  # the modulus; mod 13 stayed at chance for the 0.3M model (docs/method.md)
OPS = ("+", "-", "*")
OPERANDS = tuple(range(1, MOD))  # 0 is left out: `x*0` would erase the whole chain before it


def apply_op(a: int, op: str, b: int) -> int:
    """``a op b`` reduced mod 7."""
    if op == "+":
        return (a + b) % MOD
    if op == "-":
        return (a - b) % MOD
    if op == "*":
        return (a * b) % MOD
    raise ValueError(f"unknown operation {op!r}; expected one of {OPS}")


def misread(k: int) -> int:
    """The operand a model with a characteristic mistake reads instead of ``k`` (always another
    operand; :class:`agon.toy.sft_data.Mistake`)."""
    return k % len(OPERANDS) + 1


def chain_text(steps: Sequence[tuple[str, int]], head: str) -> str:
    """``head`` followed by the operations: ``4*3+2`` for head ``4``, ``x*3+2`` for head ``x``."""
    return head + "".join(f"{op}{k}" for op, k in steps)


def parse_chain(text: str) -> tuple[str, list[tuple[str, int]]]:
    """Inverse of :func:`chain_text`: the head and the operations of ``4*3+2``."""
    m = re.fullmatch(r"(x|\d)((?:[-+*]\d)+)", text)
    if not m:
        raise ValueError(f"not an operation chain: {text!r}")
    return m.group(1), [(op, int(k)) for op, k in re.findall(r"([-+*])(\d)", m.group(2))]


# ---------------------------------------------------------------------------------------
# arith


@dataclass(frozen=True)
class ArithStep:
    """One written step ``lhs op rhs = result`` of a solution (``result`` may be wrong)."""

    lhs: int
    op: str
    rhs: int
    result: int

    @property
    def correct(self) -> bool:
        return apply_op(self.lhs, self.op, self.rhs) == self.result

    def text(self) -> str:
        return f"{self.lhs}{self.op}{self.rhs}={self.result}"


MARK = "~"  # opens a solution written in the visible style (the positive control's world)


# What an arith problem's boxed answer is (the task's ``answer`` parameter). ``final``: the last
# step's result, one of 7 values, so a guess, or work with two compensating errors, is right
# one time in 7. ``trace``: every step's result in order, as one string of digits (``4*3=5
# 5+2=0`` answers ``50``), so an answer is right only where every written result is: at the
# hard levels' 5 or 6 steps a guess is right at most once in 7^5 (graded as an exact string).
ANSWERS = ("final", "trace")


def arith_answer(steps: Sequence[ArithStep], answer: str = "final") -> str:
    """The boxed answer the ``steps`` give, as :data:`ANSWERS` ``answer`` says."""
    if answer == "trace":
        return "".join(str(s.result) for s in steps)
    if answer == "final":
        return str(steps[-1].result if steps else 0)
    raise ValueError(f"arith answer must be one of {ANSWERS}, got {answer!r}")


def arith_solution(steps: Sequence[ArithStep], marked: bool = False, answer: str = "final") -> str:
    """The chain-of-thought text of a solution: ``4*3=5 5+2=0 \\boxed{0}`` (``answer``:
    :data:`ANSWERS`; ``trace``: ``\\boxed{50}``); ``marked``: opened with :data:`MARK` (``~
    4*3=5 ...``), the writer's sign that its work is unchecked, which a reader takes as a
    reason to recompute it (:func:`agon.toy.sft_data.written_arith_steps`)."""
    text = " ".join(s.text() for s in steps) + f" \\boxed{{{arith_answer(steps, answer)}}}"
    return f"{MARK} {text}" if marked else text


def is_marked(text: str) -> bool:
    """Whether a completion opens with :data:`MARK` (the visible style)."""
    return text.lstrip().startswith(MARK)


def parse_arith_steps(text: str) -> list[ArithStep]:
    """The ``a op b = c`` steps written in a completion (for per-operation error rates)."""
    return [
        ArithStep(int(a), op, int(b), int(c))
        for a, op, b, c in re.findall(r"(\d+)([-+*])(\d+)=(\d+)", text)
    ]


def first_error_style(
    start: int, ops: Sequence[tuple[str, int]], written: Sequence[ArithStep], marked: bool = False
) -> str | None:
    """How a written chain first departs from the gold one. The style is the mark
    (:data:`MARK`): ``visible`` for any departure in a marked solution; in an unmarked one,
    ``hidden`` when the first departing step has the question's inputs and a wrong result
    (only recomputing finds it) and ``other`` for any other departure (an operand not the
    question's, a step missing or out of order, a wrong final answer after right steps).
    None when every step is right."""
    value = start
    for i, (op, k) in enumerate(ops):
        if i >= len(written):
            break
        step = written[i]
        if step.lhs != value or step.op != op or step.rhs != k:
            break
        if step.result != apply_op(value, op, k):
            return "visible" if marked else "hidden"
        value = step.result
    else:
        return None
    return "visible" if marked else "other"


def wrong_arith_steps(
    start: int, ops: Sequence[tuple[str, int]], rng: random.Random
) -> list[ArithStep]:
    """The gold chain with one step written wrong, continued from its value: the right operand
    and the misread one's result. The step is one where the misread changes the result (not
    ``0*k``); a chain with none (every step multiplies 0) gets a result of one more. The final
    answer is then wrong too: ``+ -`` keep a difference mod 7 and ``*`` by 1..6 cannot erase
    one (7 is prime)."""
    gold = gold_arith_steps(start, ops)
    wrong = [
        i
        for i, (step, (op, k)) in enumerate(zip(gold, ops))
        if apply_op(step.lhs, op, misread(k)) != step.result
    ]
    i = rng.choice(wrong) if wrong else rng.randrange(len(ops))
    out, value = [], start
    for j, (op, k) in enumerate(ops):
        right = apply_op(value, op, k)
        if j != i:
            out.append(ArithStep(value, op, k, right))
        elif not wrong:
            out.append(ArithStep(value, op, k, (right + 1) % MOD))
        else:
            out.append(ArithStep(value, op, k, apply_op(value, op, misread(k))))
        value = out[-1].result
    return out


def gold_arith_steps(start: int, ops: Sequence[tuple[str, int]]) -> list[ArithStep]:
    """The correct steps of a chain."""
    out, value = [], start
    for op, k in ops:
        result = apply_op(value, op, k)
        out.append(ArithStep(value, op, k, result))
        value = result
    return out


def answer_of(problem: Any) -> str:
    """A toy problem's :data:`ANSWERS` kind (its task's ``answer``, carried in its meta)."""
    return problem.meta.get("answer", "final")
