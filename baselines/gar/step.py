"""One GAR training step: GRPO (:func:`agon.rl.grpo_step`) with a gradient-alignment reward.

Each model trains alone on the core's single-model step, :func:`agon.rl.solo_step` (G samples
per problem, seeded per problem, graded, GRPO's group-normalized advantage of the reward, then
:func:`~agon.rl.update`). Its one hook (:func:`gar_hooks`, ``reward``), between grading and
advantage: each sample's cosine with its problem's anchor (:func:`score_rollouts`: the samples'
final hidden states, then :func:`baselines.gar.gradients.problem_cosines` per problem), which
makes the reward ``correct + weight * f(cosine)`` (:mod:`baselines.gar.reward`).

The samples' hidden states are the rollout's own: the transformers engine records them while it
samples (:meth:`agon.engines.hf.HFEngine.recording_hidden_states`; the policy's weights do not
change between the rollout and the reward), so the only extra forward is the anchors' (each
teacher-forced after its problem's prompt, with the current weights). Where the rollout cannot
give them (a vLLM engine; an engine that samples under autocast, whose states would be in
another precision than the forward's) the samples are forwarded again with the anchors, as
:func:`baselines.gar.gradients.completion_hidden_states` does; either way the cosines agree to
float rounding (``tests/test_gar.py``).

:func:`gar_step` takes the core's step arguments, so :func:`agon.training.loop.train` runs it
as its step, on one process or several (DDP).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agon import rl
from agon.engines.hf import HFEngine, HiddenStates
from agon.tasks.base import Problem, Task
from agon.training import metrics as mk
from agon.training.policy import Policy
from baselines.gar.gradients import Head, completion_hidden_states, problem_cosines
from baselines.gar.reward import anchor_ids, gar_rewards, needs_cosine

# metrics of one model's step, besides GRPO's drafter keys (whose reward is GAR's)
SCORED = "{model}/gar/scored"  # samples whose reward took a cosine
COSINE = "{model}/gar/cosine"  # their mean cosine
BONUS = "{model}/gar/bonus"  # their mean reward term, weight * f(cosine)
NO_ANCHOR = "{model}/gar/no_anchor"  # problems of the step without an anchor
ANCHOR_TOKENS = "{model}/gar/anchor_tokens"  # prompt + anchor tokens forwarded for anchors
ROLLOUT_TOKENS = "{model}/gar/rollout_tokens"  # prompt + sample tokens forwarded again (0 where
# the rollout's own hidden states served)
GAR_S = "time/gar_s"  # wall seconds of the cosines, both models (inside time/rollout_s)

# every key above is the whole batch's on every process (counts summed over processes before
# the means are taken: agon.rl.solo_step); the cosines' cost adds up in summary.json
KEYS = (
    *(mk.Key(t, "same") for t in (SCORED, COSINE, BONUS)),
    mk.Key(NO_ANCHOR, "same", total="{model}/gar_no_anchor"),
    mk.Key(ANCHOR_TOKENS, "same", total="{model}/gar_anchor_tokens"),
    mk.Key(ROLLOUT_TOKENS, "same", total="{model}/gar_rollout_tokens"),
    mk.Key(GAR_S, "same", total="gar_time_s"),
)


@dataclass
class Scores:
    """What :func:`score_rollouts` found for one model's ``(P, G)`` samples."""

    cosine: np.ndarray  # (P, G); NaN where no cosine was taken
    anchored: np.ndarray  # (P,) bool
    counts: dict[str, float] = field(default_factory=dict)


def records_hidden(policy: Policy) -> bool:
    """Whether ``policy``'s rollout can give GAR its samples' hidden states: a transformers
    engine sampling in the weights' own dtype, as the extra forward would run (under autocast
    its states would be in another precision)."""
    engine = policy.engine
    return isinstance(engine, HFEngine) and engine.autocast_dtype is None


def score_rollouts(
    task: Task, policy: Policy, ro: rl.SoloRollout, s: Any, hidden: HiddenStates | None = None
) -> Scores:
    """The cosine of every sample that needs one (:func:`~baselines.gar.reward.needs_cosine`)
    with its problem's anchor under ``policy`` as it is now (the anchor's gradient is taken
    with the current weights, every step), and the cost counts. ``hidden``: the samples'
    hidden states as the rollout recorded them; a sample without them is forwarded again, in
    one no-grad forward with the anchors."""
    correct = ro.correct
    P, G = correct.shape
    tokenizer = policy.engine.tokenizer
    limit = s.anchor_max_tokens or s.max_new_tokens
    anchors = [anchor_ids(task, p, tokenizer, limit) for p in ro.problems]
    anchored = np.array([a is not None for a in anchors], dtype=bool)
    need = needs_cosine(correct, anchored, s.apply_to)
    cosine = np.full((P, G), np.nan)
    prompts: list[list[int]] = []  # what the extra forward scores: anchors, samples not recorded
    comps: list[list[int]] = []
    # per problem with a sample to score: (problem, its samples, the anchor's and each sample's
    # hidden states: an index into the forward's output, or the rollout's recorded tensor)
    where: list[tuple[int, list[int], list[int | torch.Tensor]]] = []
    counts = {
        "problems": float(P),
        "no_anchor": float((~anchored).sum()),
        "scored": float(need.sum()),
        "anchor_tokens": 0.0,
        "rollout_tokens": 0.0,
    }
    for k in range(P):
        samples = [g for g in range(G) if need[k, g]]
        if not samples:
            continue
        rows = ro.completions[k]
        states: list[int | torch.Tensor] = [len(comps)]
        prompts.append(rows[0].prompt_token_ids)  # the samples' prompt: the anchor's too
        comps.append(anchors[k])
        counts["anchor_tokens"] += len(prompts[-1]) + len(comps[-1])
        for g in samples:
            recorded = hidden.of(rows[g]) if hidden is not None else None
            if recorded is not None:
                states.append(recorded)
                continue
            states.append(len(comps))
            prompts.append(rows[g].prompt_token_ids)
            comps.append(rows[g].token_ids)
            counts["rollout_tokens"] += len(prompts[-1]) + len(comps[-1])
        where.append((k, samples, states))
    if where:
        forwarded = completion_hidden_states(
            policy.model, prompts, comps, policy.pad_token_id, s.packing, s.micro_batch_size
        )
        head = Head.of(policy.model, s.temperature)
        for k, samples, states in where:
            rows = ro.completions[k]
            ids = [anchors[k]] + [rows[g].token_ids for g in samples]
            seqs = [
                (forwarded[x] if isinstance(x, int) else x, _ids(y)) for x, y in zip(states, ids)
            ]
            cos = problem_cosines(head, seqs[0], seqs[1:], s.reduction, s.compute, s.vocab_chunk)
            cosine[k, samples] = cos.numpy()
    return Scores(cosine, anchored, counts)


def _ids(ids: Sequence[int]) -> torch.Tensor:
    return torch.as_tensor(list(ids), dtype=torch.long)


def step_counts(scores: Scores, correct: np.ndarray, s: Any) -> dict[str, float]:
    """What one process's share of a model's step adds to its GAR metrics: counts and sums, so
    the shares of several processes add up to the whole batch's."""
    need = needs_cosine(correct, scores.anchored, s.apply_to)
    cos = scores.cosine[need]
    term = np.clip(cos, 0.0, 1.0) if s.cosine == "clipped" else cos
    return scores.counts | {
        "cos_sum": float(cos.sum()),
        "bonus_sum": float((s.weight * term).sum()),
    }


def gar_metrics(name: str, counts: Mapping[str, float]) -> dict[str, float]:
    """One model's GAR metrics (keys above) from its :func:`step_counts` (one process's, or
    summed over every process)."""

    def k(template: str) -> str:
        return mk.key(template, model=name)

    n = counts["scored"]
    return {
        k(SCORED): n,
        k(COSINE): counts["cos_sum"] / n if n else float("nan"),
        k(BONUS): counts["bonus_sum"] / n if n else float("nan"),
        k(NO_ANCHOR): counts["no_anchor"],
        k(ANCHOR_TOKENS): counts["anchor_tokens"],
        k(ROLLOUT_TOKENS): counts["rollout_tokens"],
    }


def gar_hooks(task: Task, s: Any, hidden: Mapping[str, HiddenStates] | None = None) -> rl.SoloHooks:
    """GAR's change to GRPO's step: each sample's reward takes its cosine with its problem's
    anchor, between grading and advantage. ``hidden``: per model, the hidden states its
    rollout recorded (:func:`gar_step` records them where :func:`records_hidden`)."""

    def reward(
        name: str, policy: Policy, ro: rl.SoloRollout, watch: rl.Stopwatch
    ) -> tuple[np.ndarray, dict[str, float]]:
        states = (hidden or {}).get(name)
        with watch:
            got = score_rollouts(task, policy, ro, s, states)
            rewards = gar_rewards(
                ro.correct, got.cosine, got.anchored, s.weight, s.cosine, s.apply_to, s.missing
            )
        if states is not None:
            states.clear()  # not needed past the reward: free them before the update
        return rewards, step_counts(got, ro.correct, s)

    return rl.SoloHooks(reward=reward, metrics=gar_metrics, seconds=GAR_S)


def gar_step(
    task: Task,
    policies: Mapping[str, Policy],
    problems: list[Problem],
    s: Any,
    step: int,
    keys: Sequence[int] | None = None,
    n_total: int | None = None,
) -> dict[str, float]:
    """One step of every policy, each alone on the same ``problems``: rollout -> grade ->
    cosines with the anchors -> GAR reward -> GRPO advantage -> update. ``s`` is a
    :class:`baselines.gar.trainer.GARSettings`; returns the step's metrics row.

    :func:`agon.rl.solo_step` with :func:`gar_hooks`: the GAR metrics of the row are the whole
    batch's. Each policy whose rollout can (:func:`records_hidden`) records its samples' hidden
    states while it samples them, so the cosines need no second forward of the samples."""
    with contextlib.ExitStack() as stack:
        hidden = {
            name: stack.enter_context(policy.engine.recording_hidden_states())
            for name, policy in policies.items()
            if records_hidden(policy)
        }
        return rl.solo_step(task, policies, problems, s, step, keys, gar_hooks(task, s, hidden))
