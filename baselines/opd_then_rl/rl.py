"""The RL phase of OPD-then-RL: every model alone, one GRPO step each (the duel's solo mode).

:func:`solo_rollout` is what both phases do first with a model: G samples per problem
(:func:`agon.duel.rollout`, seeded per problem), graded (:func:`agon.duel.grade`), reward =
correctness (:func:`agon.duel.role_rewards`), GRPO's group-normalized advantage
(:func:`agon.duel.role_advantages`) and the rollout metrics. :func:`grpo_step` then updates each
model on its own samples with :func:`agon.duel.update`, unchanged: for one model it is
:func:`agon.duel.duel_step` in ``mode: solo`` (``tests/test_opd_then_rl.py`` checks it), run for
every model of the family, so :func:`agon.training.loop.train` can run it as its ``step_fn``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agon import duel
from agon.engines.base import Completion
from agon.tasks.base import Problem, Task
from agon.training import metrics as mk
from agon.training.policy import Policy


def sample_salt(name: str) -> int:
    """A model's sampling salt: from its place in the family (A, B), whichever models train in a
    step (under a compute budget one may have stopped), as the duel's directions are salted."""
    return 10 * mk.MODELS.index(name) if name in mk.MODELS else 0


@dataclass
class SoloRollout:
    """One model's samples of a step, graded, with GRPO's advantages and the rollout metrics."""

    completions: list[Completion]  # P x G, problem-major
    correct: np.ndarray  # (P * G,): 1, 0, or NaN (ungraded)
    advantages: duel.Advantages
    metrics: dict[str, float]


def solo_rollout(
    task: Task,
    name: str,
    policy: Policy,
    problems: list[Problem],
    s: Any,
    step: int,
    keys: Sequence[int] | None = None,
) -> SoloRollout:
    """Model ``name`` alone on ``problems``: G samples each, graded, reward = correctness,
    GRPO's group advantage, and the ``{name}/drafter/...`` rollout metrics."""
    ro = duel.rollout(task, policy, None, problems, s, step, salt=sample_salt(name), keys=keys)
    c_draft, c_read = duel.grade(task, ro)
    rewards, r_read = duel.role_rewards(c_draft, c_read, s)
    adv, _ = duel.role_advantages(rewards, r_read, s)
    comps = [c for per_problem in ro.drafts for c in per_problem]
    metrics = mk.role_metrics(name, "drafter", rewards, c_draft, adv.zero_spread, comps)
    return SoloRollout(comps, c_draft.ravel(), adv, metrics)


def grpo_step(
    task: Task,
    policies: Mapping[str, Policy],
    problems: list[Problem],
    s: Any,
    step: int,
    keys: Sequence[int] | None = None,
    n_total: int | None = None,
) -> dict[str, float]:
    """One GRPO step of every policy, each alone on the same ``problems``; the metrics row.

    The arguments are :func:`agon.duel.duel_step`'s: under several processes each holds a share
    of the step's problems, ``keys`` their places in the whole batch (a problem's samples are
    seeded from its key alone); ``n_total`` is not needed, each model playing every problem."""
    t0 = time.perf_counter()
    row: dict[str, float] = {mk.STEP: step}
    own: dict[str, duel.Samples] = {}
    tokens = 0
    for name, policy in policies.items():
        got = solo_rollout(task, name, policy, problems, s, step, keys)
        own[name] = duel.samples_of("drafter", got.completions, got.advantages)
        row.update(got.metrics)
        tokens += sum(len(c.token_ids) for c in got.completions)
    t_roll = time.perf_counter()
    row.update(duel.update_each(policies, {n: [own[n]] for n in policies}, s))
    row.update(
        {
            mk.TOKENS: tokens,
            mk.ROLLOUT_S: t_roll - t0,
            mk.UPDATE_S: time.perf_counter() - t_roll,
        }
    )
    return row
