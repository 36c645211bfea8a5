"""One Cliff training step: GRPO (:func:`agon.rl.grpo_step`) with per-token advantages.

Each model trains alone on the core's single-model step, :func:`agon.rl.solo_step` (G samples
per problem, seeded per problem, graded, reward = correctness, GRPO's group-normalized
advantage, then :func:`~agon.rl.update`: micro-batches, global normalizers, the clipped loss).
Its one hook (:func:`cliff_hooks`, ``train_on``), between advantage and update: the teacher
marks the first mistake of every wrong sample (:mod:`baselines.cliff.teacher`), its character
offset becomes a token index (:func:`baselines.cliff.steps.char_to_token`), and each sample's
advantage becomes a row of per-token advantages (:mod:`baselines.cliff.advantages`), which
``update`` hands to :func:`agon.loss.policy_loss` as a ``(B, T)`` tensor.

:func:`cliff_step` takes the core's step arguments (and its teachers), so
:func:`agon.training.loop.train` runs it as its step, on one process or several.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agon import rl
from agon.engines.base import Completion
from agon.tasks.base import Problem, Task
from agon.training import metrics as mk
from agon.training.policy import Policy
from baselines.cliff.advantages import padded_token_advantages
from baselines.cliff.steps import char_to_token
from baselines.cliff.teacher import Marks

# metrics of one model's step, besides GRPO's drafter keys (agon.rl.solo_rollout's)
WRONG = "{model}/cliff/wrong"  # wrong samples (the ones a teacher is asked about)
LOCATED = "{model}/cliff/located"  # share of wrong samples whose first mistake was found
MISTAKE_AT = "{model}/cliff/mistake_at"  # mean place of the mistake in a located sample, 0..1
UNPARSABLE = "{model}/cliff/teacher_unparsable"  # share of a model teacher's replies
SAID_NONE = "{model}/cliff/teacher_said_none"  # share of replies that found no wrong step
TOO_LONG = "{model}/cliff/teacher_too_long"  # samples whose teacher prompt did not fit
TEACHER_TOKENS = "{model}/cliff/teacher_tokens"  # tokens a model teacher generated
TEACHER_S = "time/teacher_s"  # the teacher's wall seconds (the slowest process's)

# every key above is the whole batch's on every process (counts summed over processes before
# the rates are taken: agon.rl.solo_step); the teacher's tokens and seconds add up in
# summary.json as {model}/teacher_tokens (0 for the oracle, which generates nothing) and
# teacher_time_s
KEYS = (
    *(mk.Key(t, "same") for t in (WRONG, LOCATED, MISTAKE_AT, UNPARSABLE, SAID_NONE, TOO_LONG)),
    mk.Key(TEACHER_TOKENS, "same", total="{model}/teacher_tokens"),
    mk.Key(TEACHER_S, "same", total="teacher_time_s"),
)


def first_mistakes(
    teacher: Any,
    task: Task,
    problems: Sequence[Problem],
    completions: Sequence[Completion],
    correct: np.ndarray,
    tokenizer: Any,
) -> tuple[list[int | None], Marks]:
    """The token index of the first mistake of every wrong completion (None: correct,
    ungraded, or not located), and the teacher's answer for the wrong ones."""
    wrong = [i for i, c in enumerate(correct) if c == 0.0]
    marks = teacher.mark(task, [problems[i] for i in wrong], [completions[i].text for i in wrong])
    out: list[int | None] = [None] * len(completions)
    for i, offset in zip(wrong, marks.offsets):
        if offset is not None:
            out[i] = char_to_token(tokenizer, completions[i].token_ids, offset)
    return out, marks


def teacher_counts(
    mistakes: Sequence[int | None], lengths: Sequence[int], n_wrong: int, marks: Marks
) -> dict[str, float]:
    """What one process's share of a model's step adds to that step's Cliff metrics: counts
    (and one sum), so the shares of several processes add up to the whole batch's."""
    at = [m / n for m, n in zip(mistakes, lengths) if m is not None and n > 0]
    return {
        "wrong": float(n_wrong),
        "located": float(sum(m is not None for m in mistakes)),
        "at_sum": float(sum(at)),
        "at_n": float(len(at)),
        "asked": float(marks.asked),
        "unparsable": float(marks.unparsable),
        "said_none": float(marks.said_none),
        "too_long": float(marks.too_long),
        "tokens": float(marks.tokens),
    }


def cliff_metrics(
    name: str, counts: Mapping[str, float], model_teacher: bool = False
) -> dict[str, float]:
    """One model's teacher metrics (keys above; the ``teacher_*`` ones for a model teacher
    only) from its :func:`teacher_counts` (one process's, or summed over every process)."""

    def k(template: str) -> str:
        return mk.key(template, model=name)

    def share(part: str, whole: str) -> float:
        return counts[part] / counts[whole] if counts[whole] else float("nan")

    out = {
        k(WRONG): counts["wrong"],
        k(LOCATED): share("located", "wrong"),
        k(MISTAKE_AT): share("at_sum", "at_n"),
    }
    if not model_teacher:
        return out
    return out | {
        k(UNPARSABLE): share("unparsable", "asked"),
        k(SAID_NONE): share("said_none", "asked"),
        k(TOO_LONG): counts["too_long"],
        k(TEACHER_TOKENS): counts["tokens"],
    }


def cliff_hooks(teachers: Mapping[str, Any], task: Task, s: Any) -> rl.SoloHooks:
    """Cliff's change to GRPO's step: each model's wrong samples marked by its teacher, and
    its advantages made per token around the marks."""

    def train_on(
        name: str, policy: Policy, ro: rl.SoloRollout, watch: rl.Stopwatch
    ) -> tuple[rl.Samples, dict[str, float]]:
        comps, correct = ro.flat, ro.correct.ravel()
        flat_problems = [p for p in ro.problems for _ in range(s.num_generations)]
        tokenizer = getattr(policy.engine, "tokenizer", None)
        with watch:
            mistakes, marks = first_mistakes(
                teachers[name], task, flat_problems, comps, correct, tokenizer
            )
        lengths = [len(c.token_ids) for c in comps]
        adv = ro.advantages
        per_token = padded_token_advantages(
            adv.values, lengths, correct, mistakes, s.weight, s.correct, s.unlocated
        )
        samples = rl.samples_of("drafter", comps, rl.Advantages(per_token, adv.zero_spread))
        return samples, teacher_counts(mistakes, lengths, int((correct == 0.0).sum()), marks)

    def metrics(name: str, counts: Mapping[str, float]) -> dict[str, float]:
        return cliff_metrics(name, counts, getattr(teachers[name], "name", "") == "model")

    return rl.SoloHooks(train_on=train_on, metrics=metrics, seconds=TEACHER_S)


def cliff_step(
    task: Task,
    policies: Mapping[str, Policy],
    problems: list[Problem],
    s: Any,
    step: int,
    keys: Sequence[int] | None = None,
    n_total: int | None = None,
    *,
    teachers: Mapping[str, Any],
) -> dict[str, float]:
    """One step of every policy, each alone on the same ``problems``: rollout -> grade ->
    GRPO advantage -> first mistakes -> per-token advantages -> update. ``s`` is a
    :class:`baselines.cliff.trainer.CliffSettings`, ``teachers`` each policy's teacher;
    returns the step's metrics row.

    :func:`agon.rl.solo_step` with :func:`cliff_hooks` (bind ``teachers`` for
    :func:`agon.training.loop.train`'s ``step_fn``): each process asks its teacher about its
    own share's wrong samples; the Cliff metrics of the row are the whole batch's."""
    return rl.solo_step(task, policies, problems, s, step, keys, cliff_hooks(teachers, task, s))
