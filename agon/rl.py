# long: the core every in-house trainer shares, sample to update, read top to bottom in one file.
"""The policy-gradient core every in-house trainer stands on: sample, grade, advantage, update.

One model's part of a training step, in the order it runs:

1. :func:`sample` / :func:`solutions`: ``n`` completions per prompt, each prompt's samples
   seeded by its key (its place in the step's whole batch), so that a prompt draws the same
   samples whichever process or batch it lands in, and a resumed run needs no RNG replay;
2. :func:`grade`: the task's verifier scores every completion (c in {0, 1}, NaN when it
   cannot score);
3. :func:`group_advantages`: ``(r - mean_g) / (std + eps)`` over each group, as TRL's
   GRPOTrainer computes it;
4. :func:`update`: :func:`agon.loss.policy_loss` (the clipped policy gradient of TRL's
   GRPOTrainer) on the policy's own completion tokens, one optimizer step.

:func:`solo_rollout` strings 1-3 together for one model alone (reward = correctness, or what a
trainer's ``reward_fn`` makes of it); :func:`grpo_step` is GRPO: every model alone, one update
each, and ``tests/test_duel_parity.py`` shows its loss equals TRL GRPOTrainer's. The duel
(:mod:`agon.duel`) adds a reader and the rival term on top of these pieces; Cliff, GAR and
OPD-then-RL (``baselines/``) change one piece each (per-token advantages, a dense reward, a
teacher's log-probs). Every step function takes the same arguments,
``(task, policies, problems, settings, step, keys=None, n_total=None)``, and returns its
metrics row (keys: :mod:`agon.training.metrics`), so :func:`agon.training.loop.train` runs any
of them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agon.engines.base import Completion, Engine, Messages, SamplingParams
from agon.grading.verdict import correctness
from agon.logprobs import completion_logprobs, completion_mask, frozen_logprobs, micro_batches
from agon.loss import policy_loss
from agon.tasks.base import Problem, Task
from agon.training import logbook
from agon.training import metrics as mk
from agon.training.policy import Policy
from agon.training.settings import BASELINES, SCALES, RLSettings

log = logging.getLogger(__name__)

ADV_EPS = 1e-4  # TRL's constant in (r - mean) / (std + eps); kept equal for parity
DEAD_TOL = 1e-9  # |sum of a distinct completion's advantages| below this: no gradient from it


# -- 1. sample ------------------------------------------------------------------------------------


def sampling_seed(seed: int, step: int, salt: int) -> int:
    """A sampling seed that depends only on (run seed, step, salt): resume needs no RNG replay.
    The salt tells apart what one step samples (a model, a role, a direction)."""
    return (seed * 1_000_003 + step * 7_919 + salt) % (2**31 - 1)


def prompt_seeds(base: int, keys: Sequence[int]) -> tuple[int, ...]:
    """One sampling seed per prompt from its key (its place in the step's whole batch), so a
    prompt draws the same samples whichever process, or batch, it lands in."""
    return tuple((base * 1_000_003 + int(k)) % (2**31 - 1) for k in keys)


def sample(
    engine: Engine,
    prompts: Sequence[Messages],
    n: int,
    s: RLSettings,
    base: int,
    keys: Sequence[int],
) -> list[list[Completion]]:
    """``n`` completions of every prompt at the rollout temperature, prompt ``i`` seeded from
    ``base`` and ``keys[i]`` alone."""
    sp = SamplingParams(
        max_new_tokens=s.max_new_tokens,
        temperature=s.temperature,
        top_p=s.top_p,
        seed=base,
        prompt_seeds=prompt_seeds(base, keys),
    )
    return engine.generate(list(prompts), n=n, sampling=sp)


def solutions(
    task: Task,
    policy: Policy,
    problems: Sequence[Problem],
    s: RLSettings,
    step: int,
    salt: int,
    keys: Sequence[int] | None = None,
) -> list[list[Completion]]:
    """G samples of the solve prompt of every problem by ``policy`` (``[problem][g]``);
    ``keys`` (default ``0..P-1``) place each problem in the step's whole batch."""
    keys = list(range(len(problems))) if keys is None else list(keys)
    base = sampling_seed(s.seed, step, salt)
    prompts = [task.solve_prompt(p) for p in problems]
    return sample(policy.engine, prompts, s.num_generations, s, base, keys)


# -- 2. grade -------------------------------------------------------------------------------------


def grade(
    task: Task, problems: Sequence[Problem], completions: Sequence[Sequence[Completion]]
) -> np.ndarray:
    """Correctness ``(len(problems), n)`` of the ``n`` completions of every problem (1, 0, or
    NaN where the verifier could not score)."""
    P = len(problems)
    n = len(completions[0]) if completions else 0
    flat_problems = [p for p, row in zip(problems, completions) for _ in row]
    texts = [c.text for row in completions for c in row]
    return correctness(task.grade(flat_problems, texts)).reshape(P, n)


# -- 3. advantage ---------------------------------------------------------------------------------


@dataclass
class Advantages:
    """Advantages of one role's completions, and which groups had no learning signal.

    ``values`` holds one advantage per completion, or one row of per-token advantages per
    completion (Cliff, OPD), as :func:`agon.loss.policy_loss` takes them. A group is *dead*
    when its completions' gradient is zero: the advantages of each distinct completion sum to
    0 (all rewards equal; or identical completions whose rewards differ, as eight identical
    drafts whose reads did not all agree). ``zero_spread`` counts only the first kind and
    undercounts the dead (``frac_dead`` is the metric to read)."""

    values: np.ndarray  # one per completion (or per token); 0 for ungradable completions
    zero_spread: np.ndarray  # one bool per group: all rewards equal
    dead: np.ndarray | None = None  # one bool per group: zero gradient (None: not computed)


def group_advantages(
    rewards: Any,
    groups: Any,
    scale: str = "group",
    eps: float = ADV_EPS,
    completions: Sequence[Any] | None = None,
    baseline: str = "group",
) -> Advantages:
    """Group-relative advantages ``(r - mean_g) / (std + eps)``, as TRL's GRPOTrainer computes.

    ``groups`` gives each completion's group id (any hashable ints, groups need not be
    contiguous or equal-sized). ``scale``: ``group`` divides by the group's std, ``batch`` by
    the std over all completions, ``none`` not at all (Dr. GRPO). Std is Bessel-corrected and
    NaN-aware like TRL's ``nanstd``; a group of one has no spread (its advantage is 0), a NaN
    reward gets advantage 0 and leaves the baseline alone. Empty input gives empty output.

    ``baseline`` (``agon.baseline``): ``group`` subtracts the group's mean (TRL's), ``batch``
    the mean over every completion, ``none`` nothing; a term constant inside a group survives
    the last two (and still has no expected gradient: ``docs/method.md``). ``completions``
    (one hashable per completion, e.g. its token ids) marks the dead groups.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {SCALES}")
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    g = np.asarray(groups).reshape(-1)
    if r.shape != g.shape:
        raise ValueError(
            f"rewards ({r.size}) and groups ({g.size}) must have one entry per completion"
        )
    if r.size == 0:
        return Advantages(np.zeros(0), np.zeros(0, dtype=bool))
    ids, inverse = np.unique(g, return_inverse=True)
    mean = np.full(len(ids), np.nan)
    std = np.full(len(ids), np.nan)
    for k in range(len(ids)):
        x = r[inverse == k]
        x = x[~np.isnan(x)]
        if x.size:
            mean[k] = x.mean()
        std[k] = x.std(ddof=1) if x.size > 1 else np.nan
    # TRL: a zero-spread group is one whose std is (close to) 0; a lone sample counts as such too
    zero_spread = ~(std > 1e-8)
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; expected one of {BASELINES}")
    if baseline == "group":
        adv = r - mean[inverse]
    elif baseline == "batch":
        valid = r[~np.isnan(r)]
        adv = r - (valid.mean() if valid.size else 0.0)
    else:
        adv = r.copy()
    if scale == "group":
        adv = adv / (np.nan_to_num(std, nan=0.0)[inverse] + eps)
    elif scale == "batch":
        valid = r[~np.isnan(r)]
        batch_std = valid.std(ddof=1) if valid.size > 1 else 0.0
        adv = adv / (batch_std + eps)
    # a lone sample's advantage is 0 (mean == itself); NaN rewards -> 0 (TRL's nan_to_num)
    adv = np.nan_to_num(adv, nan=0.0, posinf=0.0, neginf=0.0)
    dead = None if completions is None else dead_groups(adv, inverse, len(ids), completions)
    return Advantages(adv, zero_spread, dead)


def dead_groups(
    adv: np.ndarray, inverse: np.ndarray, n_groups: int, completions: Sequence[Any]
) -> np.ndarray:
    """One bool per group: the advantages of each distinct completion in it sum to 0, so the
    group's gradient, sum over completions of A * grad log pi(completion), is zero."""
    sums: dict[tuple[int, Any], float] = {}
    for a, g, c in zip(adv, inverse, completions):
        sums[(int(g), c)] = sums.get((int(g), c), 0.0) + float(a)
    alive = np.zeros(n_groups, dtype=bool)
    for (g, _), total in sums.items():
        if abs(total) > DEAD_TOL:
            alive[g] = True
    return ~alive


def token_keys(completions: Sequence[Completion]) -> list[tuple[int, ...]]:
    """Each completion's token ids as a hashable: identical completions share a key."""
    return [tuple(c.token_ids) for c in completions]


def problem_groups(P: int, G: int) -> np.ndarray:
    """Group ids of ``P x G`` problem-major samples: each problem's G samples form a group."""
    return np.repeat(np.arange(P), G)


# -- 4. update ------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Completions of one role in one step, with their advantages: what a loss is made of."""

    role: str  # drafter | reader (a sample of a model alone counts as a draft)
    prompt_ids: list[list[int]] = field(default_factory=list)
    completion_ids: list[list[int]] = field(default_factory=list)
    advantages: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return len(self.completion_ids)


def samples_of(role: str, comps: Sequence[Completion], adv: Advantages) -> Samples:
    """One role's completions with their advantages, as the loss takes them: the prompt ids
    (for a read: problem + draft) are context, the completion ids are what is trained on."""
    return Samples(
        role=role,
        prompt_ids=[c.prompt_token_ids for c in comps],
        completion_ids=[c.token_ids for c in comps],
        advantages=adv.values,
    )


def update(policy: Policy, batches: list[Samples], s: RLSettings) -> dict[str, float]:
    """One optimizer step (or ``num_iterations``) of ``policy`` on its own completions.

    Gradients of micro-batches accumulate to exactly the full-batch loss (global normalizers).
    Over several processes the normalizers count every rank's completions and the loss is
    multiplied by the world size, so the mean that DDP / FSDP2 take of the ranks' gradients is
    the gradient of the whole batch's loss, whatever each rank's share of tokens.
    A non-finite loss or gradient norm skips the step (gradients dropped) and is reported.

    A step whose advantages are all zero on every process, with no KL term (``beta`` 0), has a
    loss of exactly 0 and a gradient of exactly 0: its forward and backward are skipped
    (``zero_advantage`` 1 in the metrics, no entropy, loss 0), and AdamW steps on zero
    gradients, as TRL's GRPOTrainer does after its backward of a zero loss, so the weights
    move as they would have (Adam's moments carry on) at none of the cost. Under
    ``master_dtype: float32`` the forward and backward run under :meth:`Policy.autocast`.
    """
    prompts = [p for b in batches for p in b.prompt_ids]
    comps = [c for b in batches for c in b.completion_ids]
    adv = torch.tensor(
        np.concatenate([b.advantages for b in batches]) if batches else np.zeros(0),
        dtype=torch.float32,
    )
    model = policy.model
    m: dict[str, float] = {"skipped": 0.0}
    cmask = completion_mask(comps).long()
    n_seq, n_tok = policy.sum_over_ranks(len(comps)), policy.sum_over_ranks(float(cmask.sum()))
    if n_tok == 0:  # nothing generated on any rank: nothing to learn from
        policy.scheduler_step()
        return {**m, "skipped": 1.0, "skip_reason_empty": 1.0}
    if not comps:
        raise RuntimeError(
            f"policy {policy.name}: this rank has no completions while others have some; give "
            "every process at least one problem per step (problems_per_step >= processes)"
        )
    n_seq, mine = int(n_seq), float(cmask.sum())  # mine: this rank's tokens
    world = policy.world_size
    chunks = micro_batches(n_seq, s.micro_batch_size)
    width, pad = cmask.size(1), policy.pad_token_id

    def logprobs_of(net: torch.nn.Module, c: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return completion_logprobs(net, prompts[c], comps[c], width, pad, s.packing)

    if not policy.any_rank(has_signal(adv, s)):
        return _zero_advantage_step(policy, s, mine)
    ref_logps, old_logps = [None] * len(chunks), [None] * len(chunks)
    with policy.autocast():
        if policy.ref_model is not None:
            ref_logps = frozen_logprobs(
                policy.ref_model, prompts, comps, width, pad, s.packing, chunks
            )
        if s.num_iterations > 1:
            old_logps = frozen_logprobs(model, prompts, comps, width, pad, s.packing, chunks)
    model.train()
    for _ in range(s.num_iterations):
        policy.optimizer.zero_grad(set_to_none=True)
        loss_sum, ent_sum, kl_sum, clip_sum = 0.0, 0.0, 0.0, 0.0
        for c, ref, old in zip(chunks, ref_logps, old_logps):
            with policy.autocast():
                logps, ent = logprobs_of(model, c)
            out = policy_loss(
                logps,
                adv[c],
                cmask[c],
                s.loss_type,
                old_logps=old,
                ref_logps=ref,
                beta=s.beta,
                epsilon_low=s.epsilon,
                epsilon_high=s.eps_high,
                max_completion_length=s.max_new_tokens,
                num_sequences=n_seq,
                num_tokens=n_tok,
                kl_ratio_correction=s.kl_ratio_correction,
            )
            policy.backward(out.loss * world if world > 1 else out.loss)
            w = float(cmask[c].sum())
            loss_sum += float(out.loss.detach())
            ent_sum += float((ent.detach() * cmask[c].to(ent.device)).sum())
            kl_sum += (out.kl * w) if not math.isnan(out.kl) else 0.0
            clip_sum += out.clip_ratio * w
        grad_norm = policy.clip_grad_norm(s.max_grad_norm)
        if policy.any_rank(not (math.isfinite(loss_sum) and math.isfinite(grad_norm))):
            # a NaN/inf would poison the weights and Adam's moments: drop this step, keep going
            policy.optimizer.zero_grad(set_to_none=True)
            m["skipped"] = 1.0
            log.warning(
                "policy %s: non-finite loss %s or grad norm %s; update skipped",
                policy.name,
                loss_sum,
                grad_norm,
            )
        else:
            policy.optimizer.step()
        policy.scheduler_step()
    policy.optimizer.zero_grad(set_to_none=True)
    m.update(
        {
            "loss": loss_sum,
            "grad_norm": grad_norm,
            "entropy": ent_sum / max(mine, 1.0),
            "kl": kl_sum / max(mine, 1.0) if s.beta else float("nan"),
            "clip_ratio": clip_sum / max(mine, 1.0),
            "lr": float(policy.scheduler.get_last_lr()[0]),
            "trained_tokens": mine,
            "zero_advantage": 0.0,
        }
    )
    return m


def has_signal(advantages: torch.Tensor, s: RLSettings) -> bool:
    """Whether a loss over these advantages can have a gradient: some advantage is not 0, or
    a KL term pulls toward the reference (``beta`` > 0)."""
    return s.beta != 0 or bool((advantages != 0).any())


def _zero_advantage_step(policy: Policy, s: RLSettings, mine: float) -> dict[str, float]:
    """:func:`update`'s step when no completion has an advantage (and no KL term): zero
    gradients, AdamW's step and the schedule's, no forward or backward."""
    for _ in range(s.num_iterations):
        policy.optimizer.zero_grad(set_to_none=False)
        for p in policy.model.parameters():
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        policy.optimizer.step()
        policy.scheduler_step()
    policy.optimizer.zero_grad(set_to_none=True)
    return {
        "skipped": 0.0,
        "loss": 0.0,
        "grad_norm": 0.0,
        "entropy": float("nan"),
        "kl": float("nan"),
        "clip_ratio": 0.0,
        "lr": float(policy.scheduler.get_last_lr()[0]),
        "trained_tokens": mine,
        "zero_advantage": 1.0,
    }


def update_each(
    policies: Mapping[str, Policy], own: Mapping[str, Sequence[Samples]], s: RLSettings
) -> dict[str, float]:
    """:func:`update` for every policy, each on its own samples with its own optimizer, then
    its rollout engine synced (a vLLM engine holds its own copy of the weights); the update
    metrics as ``{model}/{key}``."""
    out: dict[str, float] = {}
    for name, policy in policies.items():
        out.update({f"{name}/{k}": v for k, v in update(policy, own[name], s).items()})
        policy.sync_engine()
    return out


def finish_step(
    row: dict[str, float],
    policies: Mapping[str, Policy],
    own: Mapping[str, Sequence[Samples]],
    s: RLSettings,
    t0: float,
    tokens: int,
) -> dict[str, float]:
    """The tail every step shares: each policy updated on its own samples, and the step's
    generated tokens and wall seconds (rollout: since ``t0``; update) added to ``row``."""
    t_roll = time.perf_counter()
    row.update(update_each(policies, own, s))
    row.update(
        {
            mk.TOKENS: tokens,
            mk.ROLLOUT_S: t_roll - t0,
            mk.UPDATE_S: time.perf_counter() - t_roll,
        }
    )
    return row


# -- one model alone: GRPO ------------------------------------------------------------------------


@dataclass
class SoloRollout:
    """One model's samples of a step, graded, with their rewards, advantages and metrics."""

    problems: list[Problem]
    completions: list[list[Completion]]  # [problem][g]
    correct: np.ndarray  # (P, G): 1, 0, or NaN (ungraded)
    rewards: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (P, G)
    advantages: Advantages = field(default_factory=lambda: group_advantages([], []))
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def flat(self) -> list[Completion]:
        """The completions problem-major, as the advantages and the loss order them."""
        return [c for row in self.completions for c in row]


def wrong_styles(
    task: Task,
    problems: Sequence[Problem],
    completions: Sequence[Sequence[Completion]],
    correct: np.ndarray,
) -> list[str | None]:
    """How each wrong completion went wrong (:meth:`agon.tasks.base.Task.error_style`; None
    where the task cannot tell): the drafter's error style, a mechanism metric."""
    return [
        task.error_style(p, c.text)
        for p, row, c_row in zip(problems, completions, correct)
        for c, ok in zip(row, c_row)
        if ok == 0
    ]


def model_salt(name: str) -> int:
    """A model's sampling salt from its place in the family (A, B), whichever models train in
    a step (under a compute budget one may have stopped), as the duel salts its directions."""
    return 10 * mk.MODELS.index(name) if name in mk.MODELS else 0


def solo_rollout(
    task: Task,
    name: str,
    policy: Policy,
    problems: list[Problem],
    s: RLSettings,
    step: int,
    keys: Sequence[int] | None = None,
    reward_fn: Callable[[SoloRollout], np.ndarray] | None = None,
) -> SoloRollout:
    """Model ``name`` alone on ``problems``: G samples each, graded, rewarded (correctness, or
    ``reward_fn`` of the graded rollout), GRPO's group advantage, and the
    ``{name}/drafter/...`` rollout metrics."""
    comps = solutions(task, policy, problems, s, step, salt=model_salt(name), keys=keys)
    ro = SoloRollout(list(problems), comps, grade(task, problems, comps))
    ro.rewards = ro.correct.copy() if reward_fn is None else reward_fn(ro)
    P, G = ro.correct.shape
    ro.advantages = group_advantages(
        ro.rewards.ravel(), problem_groups(P, G), s.scale_rewards, completions=token_keys(ro.flat)
    )
    ro.metrics = logbook.role_metrics(
        name, "drafter", ro.rewards, ro.correct, ro.advantages, ro.flat
    )
    ro.metrics |= logbook.style_metrics(
        name,
        wrong_styles(task, ro.problems, ro.completions, ro.correct),
        ro.rewards[ro.correct == 0],
    )
    return ro


class Stopwatch:
    """Wall seconds a method's own work took inside a step (a teacher, a scoring pass):
    ``with watch: ...`` adds the block's seconds to :attr:`seconds`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._t0 = 0.0

    def __enter__(self) -> Stopwatch:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._t0


Counts = dict[str, float]


@dataclass(frozen=True)
class SoloHooks:
    """What a single-model method changes in GRPO's step, per model; none: GRPO itself.

    - ``reward(name, policy, rollout, watch) -> (rewards (P, G), counts)``: the reward of the
      graded samples (GAR's cosine term), before the group advantage is taken;
    - ``train_on(name, policy, rollout, watch) -> (samples, counts)``: what the model is
      updated on, from the rollout with its advantages (Cliff's and OPD's per-token
      advantages); default: its samples with GRPO's advantages;
    - ``metrics(name, counts) -> row``: the method's own metrics of model ``name``, from the
      counts its hooks returned, summed over every process (so a rate is the whole batch's);
    - ``seconds``: the row key of the hooks' wall seconds (the blocks they timed with
      ``watch``; the slowest process's), which sit inside ``time/rollout_s``.

    Counts are this process's share (numbers that add up over processes: counts and sums)."""

    reward: Callable[[str, Policy, SoloRollout, Stopwatch], tuple[np.ndarray, Counts]] | None = None
    train_on: Callable[[str, Policy, SoloRollout, Stopwatch], tuple[Samples, Counts]] | None = None
    metrics: Callable[[str, Counts], dict[str, float]] | None = None
    seconds: str | None = None


GRPO = SoloHooks()


def solo_step(
    task: Task,
    policies: Mapping[str, Policy],
    problems: list[Problem],
    s: RLSettings,
    step: int,
    keys: Sequence[int] | None = None,
    hooks: SoloHooks = GRPO,
) -> dict[str, float]:
    """One step of every policy, each alone on the same ``problems``: rollout -> grade ->
    reward (``hooks.reward``) -> group advantage -> what to train on (``hooks.train_on``) ->
    update; the metrics row (GRPO's drafter keys per model, the method's own, the timings).

    Under several processes each holds a share of the step's problems, ``keys`` their places
    in the whole batch (a problem's samples are seeded from its key alone), and the method's
    metrics are made from its counts summed over the processes
    (:func:`agon.training.metrics.counts_over_ranks`)."""
    t0 = time.perf_counter()
    row: dict[str, float] = {mk.STEP: step}
    own: dict[str, list[Samples]] = {}
    counts: dict[str, Counts] = {}
    watch = Stopwatch()
    tokens = 0
    for name, policy in policies.items():
        part: Counts = {}
        reward_fn = None
        if hooks.reward is not None:

            def reward_fn(
                ro: SoloRollout, name: str = name, policy: Policy = policy, part: Counts = part
            ) -> Any:
                rewards, got = hooks.reward(name, policy, ro, watch)  # type: ignore[misc]
                part.update(got)
                return rewards

        ro = solo_rollout(task, name, policy, problems, s, step, keys, reward_fn=reward_fn)
        if hooks.train_on is None:
            samples = samples_of("drafter", ro.flat, ro.advantages)
        else:
            samples, got = hooks.train_on(name, policy, ro, watch)
            part.update(got)
        own[name] = [samples]
        row.update(ro.metrics)
        counts[name] = part
        tokens += sum(len(c.token_ids) for c in ro.flat)
    if hooks.metrics is not None or hooks.seconds is not None:
        acc = next(iter(policies.values())).accelerator if policies else None
        counts, seconds = logbook.counts_over_ranks(acc, counts, watch.seconds)
        for name in policies:
            row.update(hooks.metrics(name, counts[name]) if hooks.metrics else {})
        if hooks.seconds is not None:
            row[hooks.seconds] = seconds  # inside the rollout's seconds
    return finish_step(row, policies, own, s, t0, tokens)


def grpo_step(
    task: Task,
    policies: Mapping[str, Policy],
    problems: list[Problem],
    s: RLSettings,
    step: int,
    keys: Sequence[int] | None = None,
    n_total: int | None = None,
) -> dict[str, float]:
    """One GRPO step of every policy, each alone on the same ``problems``: :func:`solo_step`
    with no hooks; the metrics row. ``n_total`` (the whole batch's size) is not needed, each
    model playing every problem."""
    return solo_step(task, policies, problems, s, step, keys)
