"""Cliff's teachers: who marks the first mistake of a wrong rollout (``cliff.teacher``).

- ``oracle``: the toy world's exact first wrong step, from the task generator's gold chain
  (:func:`baselines.cliff.steps.oracle_mistake`); only for the toy tasks.
- ``model``: an :class:`agon.engines.base.Engine` shown the problem and the rollout's steps,
  numbered, and asked for the number of the first wrong one (:func:`teacher_prompt`), greedy.
  Its reply is read by :func:`parse_teacher_reply`; a reply that names no step in range, or
  says that no step is wrong, leaves the rollout *unlocated* (``cliff.unlocated`` says what it
  then gets). Which steps a task has is :func:`baselines.cliff.steps.task_steps`.

Both return, per rollout, a character offset in its text (None: unlocated); the trainer maps
it to a token (:func:`baselines.cliff.steps.char_to_token`). Only wrong rollouts are sent to a
teacher: a correct one needs no mistake under either ``cliff.correct`` option.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agon.engines.base import Engine, PromptTooLongError, SamplingParams
from agon.tasks.base import Messages, Problem, Task
from baselines.cliff.steps import Span, oracle_mistake, task_steps

TEACHERS = ("oracle", "model")

TEACHER_PROMPT = (
    "Problem: {question}\n\n"
    "A solution, step by step:\n{steps}\n\n"
    "Which step is the first wrong one? Answer with its number only, or 0 if every step is right."
)

_BOXED_INT = re.compile(r"\\boxed\{\s*(\d+)\s*\}")
_ONLY_INT = re.compile(r"^\W*(?:step\s*)?#?\s*(\d+)\W*$", re.IGNORECASE)
_NAMED = re.compile(
    r"(?:first\s+(?:wrong|incorrect|erroneous|mistaken)\s+step|first\s+(?:mistake|error))"
    r"\D{0,24}?(\d+)",
    re.IGNORECASE,
)
_NONE = re.compile(
    r"\b(?:no\s+(?:step\s+is\s+)?(?:wrong|incorrect|mistakes?|errors?)|none|all\s+(?:the\s+)?"
    r"steps\s+are\s+(?:right|correct)|every\s+step\s+is\s+(?:right|correct))\b",
    re.IGNORECASE,
)
_STEP_N = re.compile(r"\bstep\s*#?\s*(\d+)", re.IGNORECASE)
_ANY_INT = re.compile(r"(?<![\d.])(\d+)(?![\d.])")


def parse_teacher_reply(reply: str, n_steps: int) -> int | None:
    """The step a teacher's reply names: 1..``n_steps`` (the first wrong step), 0 (it says no
    step is wrong), or None (unparsable: nothing usable, a number out of range, or a thinking
    trace that never closed).

    Read in this order: the last ``\\boxed{N}``; a reply that is only a number (``3``,
    ``Step 3.``, ``[3]``); "first wrong step ... N"; a statement that no step is wrong; the
    first "step N"; the first integer.
    """
    text = reply
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif "<think>" in text:
        return None
    text = text.strip()
    found: str | None = None
    boxed = _BOXED_INT.findall(text)
    if boxed:
        found = boxed[-1]
    else:
        for pattern in (_ONLY_INT, _NAMED):
            m = pattern.search(text)
            if m:
                found = m.group(1)
                break
        else:
            if _NONE.search(text):
                return 0
            m = _STEP_N.search(text) or _ANY_INT.search(text)
            found = m.group(1) if m else None
    if found is None:
        return None
    n = int(found)
    return n if 0 <= n <= n_steps else None


def teacher_prompt(problem: Problem, text: str, steps: Sequence[Span]) -> Messages:
    """The model teacher's prompt: the problem and the numbered steps (one line each)."""
    shown = "\n".join(
        f"[{i}] {' '.join(text[a:b].split())}" for i, (a, b) in enumerate(steps, start=1)
    )
    return [
        {"role": "user", "content": TEACHER_PROMPT.format(question=problem.question, steps=shown)}
    ]


@dataclass
class Marks:
    """A teacher's answer for a batch: one character offset per rollout (None: unlocated)."""

    offsets: list[int | None]
    asked: int = 0  # rollouts a model teacher was asked about
    unparsable: int = 0  # replies that named no step
    said_none: int = 0  # replies that said no step is wrong
    too_long: int = 0  # prompts over the teacher's max_prompt_tokens (not asked)
    tokens: int = 0  # tokens the teacher generated


class OracleTeacher:
    """The exact first wrong step of a toy rollout (``cliff.teacher: oracle``)."""

    name = "oracle"

    def mark(self, task: Task, problems: Sequence[Problem], texts: Sequence[str]) -> Marks:
        return Marks([oracle_mistake(task, p, t) for p, t in zip(problems, texts)])


class ModelTeacher:
    """A model asked for the first wrong step of each rollout (``cliff.teacher: model``)."""

    name = "model"

    def __init__(self, engine: Engine, max_new_tokens: int = 256):
        self.engine, self.max_new_tokens = engine, int(max_new_tokens)

    def mark(self, task: Task, problems: Sequence[Problem], texts: Sequence[str]) -> Marks:
        marks = Marks([None] * len(texts))
        asks: list[tuple[int, list[Span], Messages]] = []
        encode = getattr(self.engine, "encode", None)
        for i, (p, t) in enumerate(zip(problems, texts)):
            steps = task_steps(task, t)
            if not steps:
                continue
            msgs = teacher_prompt(p, t, steps)
            if encode is not None:
                try:
                    encode(msgs)
                except PromptTooLongError:
                    marks.too_long += 1
                    continue
            asks.append((i, steps, msgs))
        if not asks:
            return marks
        sp = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=0.0)
        replies = self.engine.generate([msgs for _, _, msgs in asks], n=1, sampling=sp)
        marks.asked = len(asks)
        for (i, steps, _), (reply,) in zip(asks, replies):
            marks.tokens += len(reply.token_ids)
            n = parse_teacher_reply(reply.text, len(steps))
            if n is None:
                marks.unparsable += 1
            elif n == 0:
                marks.said_none += 1
            else:
                marks.offsets[i] = steps[n - 1][0]
        return marks
