"""The Agon duel trainer: two policies that grade each other, read top to bottom.

One training step, for a batch of P problems (DESIGN.md §1):

1. **rollout**: the drafter samples G drafts per problem; for every draft the reader samples K
   reads of the reader prompt (problem + the rival's draft, shown through ``draft_view``);
2. **grade**: the task's verifier scores every draft and every read (c in {0, 1}, None when it
   cannot score);
3. **reward**: :func:`duel_rewards`, "each is rewarded for out-solving the other";
4. **advantage**: :func:`group_advantages`, group-relative and kept separate per role;
5. **loss**: :func:`policy_loss`, the clipped policy gradient of TRL's GRPOTrainer
   (``dapo | dr_grpo | grpo``, optional KL to a frozen reference with ``beta``), on each
   model's own completion tokens only;
6. **update**: each model steps its own optimizer.

``mode: solo`` drops the reader: one model, G samples per problem, reward = correctness. That is
GRPO, and ``tests/test_duel_parity.py`` shows its loss equals TRL GRPOTrainer's, so Agon and
GRPO differ only by the duel.

Where our reading of the paper may differ from the authors' (only the abstract is public;
every choice below is a config option, the default is our reading):

- *Who the rival is.* For a draft, ``c_rival`` is the mean correctness of the K reads of that
  draft; for a read, it is the correctness of the draft it read. The authors may compare
  against a single read, or against the best read.
- *Reward shape.* ``agon``: ``c_self + lam * (c_self - c_rival)`` with ``lam = 1``; so a
  drafter whose draft misleads a reader is paid for it (the reader "lost"). Whether the paper
  pays a drafter for a *wrong* draft that beats a reader is unknown; ``independent`` and
  ``cooperative`` are the ablations that remove the contest.
- *Roles.* ``alternate`` swaps drafter and reader each step; the paper may train both roles
  in every step (``both``: each direction on half the problems).
- *Advantages per role* follow the IB-RL abstract (independent baselines per role); the
  reader's group is the K reads of one draft (``reader_group: draft``) by default, since
  reads of different drafts face different prompts.
- *One model, two roles, one optimizer step per training step*: in ``alternate`` each model
  acts in one role per step and is updated on that role's tokens only.
- *Positions.* Updates score sequences packed several per row (``train.packing``), each at
  positions 0..len-1 as the sampler had them. With ``packing: false`` (and always for
  linear-attention models, which cannot be packed) rows are left-padded as in TRL, whose
  position ids run 0..T-1 over the padded row. RoPE sees only relative positions, so the two
  agree to float rounding, and solo mode matches GRPOTrainer either way (tested to 1e-5).

The draft inside a reader prompt is *prompt*: the reader's loss mask covers the reader's own
completion tokens only, and the drafter is never trained on the reader's prompt either.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agon.engines.base import Completion, Engine, SamplingParams
from agon.scoring import completion_logprobs, completion_mask, enable_token_logprobs
from agon.tasks.base import Problem, Task, apply_draft_view

log = logging.getLogger(__name__)

REWARD_SCHEMES = ("agon", "zero_sum", "independent", "cooperative")
LOSS_TYPES = ("dapo", "dr_grpo", "grpo")
SCALES = ("group", "batch", "none")
READER_GROUPS = ("draft", "problem")
ROLE_SCHEDULES = ("alternate", "both")
MODES = ("duel", "solo")
ADV_EPS = 1e-4  # TRL's constant in (r - mean) / (std + eps); kept equal for parity


# --------------------------------------------------------------------------------------------
# 3. rewards
# --------------------------------------------------------------------------------------------


def duel_rewards(
    c_self: Any, c_rival: Any, scheme: str = "agon", lam: float = 1.0, role: str = "drafter"
) -> np.ndarray:
    """Duel reward of each completion from its own and its rival's correctness (DESIGN.md §1.4).

    ``c_self``/``c_rival`` are arrays of correctness in [0, 1] (a drafter's ``c_rival`` is the
    mean over the reads of its draft); NaN means "could not be graded" and propagates, so the
    completion is left out of its group's baseline and gets advantage 0 (never a silent 0
    reward). ``role`` matters only for ``cooperative``, where both are paid the reader's
    correctness: the drafter's ``c_rival``, the reader's ``c_self``.
    """
    c_self = np.asarray(c_self, dtype=np.float64)
    c_rival = np.asarray(c_rival, dtype=np.float64)
    if c_self.shape != c_rival.shape:
        raise ValueError(
            f"c_self {c_self.shape} and c_rival {c_rival.shape} must have the same shape"
        )
    if scheme == "agon":
        return c_self + lam * (c_self - c_rival)
    if scheme == "zero_sum":
        return c_self - c_rival
    if scheme == "independent":
        return c_self.copy()
    if scheme == "cooperative":
        if role not in ("drafter", "reader"):
            raise ValueError(f"role must be 'drafter' or 'reader', got {role!r}")
        return (c_rival if role == "drafter" else c_self).copy()
    raise ValueError(f"unknown reward scheme {scheme!r}; expected one of {REWARD_SCHEMES}")


def correctness(verdicts: Sequence[Any]) -> np.ndarray:
    """Verdicts -> float array: 1.0 correct, 0.0 wrong, NaN when the grader could not score."""
    return np.array(
        [np.nan if v.correct is None else float(v.correct) for v in verdicts], dtype=np.float64
    )


def duel_outcomes(c_draft_per_read: np.ndarray, c_read: np.ndarray) -> dict[str, float]:
    """Fractions of (draft, read) pairs the drafter wins, the reader wins, or tie (graded pairs only)."""
    ok = ~(np.isnan(c_draft_per_read) | np.isnan(c_read))
    n = int(ok.sum())
    if n == 0:
        return {"drafter_wins": float("nan"), "reader_wins": float("nan"), "ties": float("nan")}
    d, r = c_draft_per_read[ok], c_read[ok]
    return {
        "drafter_wins": float((d > r).mean()),
        "reader_wins": float((r > d).mean()),
        "ties": float((d == r).mean()),
    }


# --------------------------------------------------------------------------------------------
# 4. advantages
# --------------------------------------------------------------------------------------------


@dataclass
class Advantages:
    """Advantages of one role's completions, and which groups had no reward spread."""

    values: np.ndarray  # one per completion; 0 for ungradable completions
    zero_spread: np.ndarray  # one bool per group: all rewards equal (no learning signal)


def group_advantages(
    rewards: Any, groups: Any, scale: str = "group", eps: float = ADV_EPS
) -> Advantages:
    """Group-relative advantages ``(r - mean_g) / (std + eps)``, as TRL's GRPOTrainer computes them.

    ``groups`` gives each completion's group id (any hashable ints, groups need not be
    contiguous or equal-sized). ``scale``: ``group`` divides by the group's std, ``batch`` by
    the std over all completions, ``none`` not at all (Dr. GRPO). Std is Bessel-corrected and
    NaN-aware like TRL's ``nanstd``; a group of one has no spread (its advantage is 0), a NaN
    reward gets advantage 0 and leaves the baseline alone. Empty input gives empty output.
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
    adv = r - mean[inverse]
    if scale == "group":
        adv = adv / (np.nan_to_num(std, nan=0.0)[inverse] + eps)
    elif scale == "batch":
        valid = r[~np.isnan(r)]
        batch_std = valid.std(ddof=1) if valid.size > 1 else 0.0
        adv = adv / (batch_std + eps)
    # a lone sample's advantage is 0 (mean == itself); NaN rewards -> 0 (TRL's nan_to_num)
    adv = np.nan_to_num(adv, nan=0.0, posinf=0.0, neginf=0.0)
    return Advantages(adv, zero_spread)


# --------------------------------------------------------------------------------------------
# 5. loss
# --------------------------------------------------------------------------------------------


@dataclass
class LossOutput:
    """The loss to backpropagate and detached statistics of it."""

    loss: torch.Tensor
    kl: float = float("nan")  # mean per-token KL to the reference (NaN when beta == 0)
    clip_ratio: float = 0.0  # fraction of tokens whose ratio was clipped


def policy_loss(
    logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    loss_type: str = "dapo",
    old_logps: torch.Tensor | None = None,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    max_completion_length: int | None = None,
    num_sequences: int | None = None,
    num_tokens: float | None = None,
    kl_ratio_correction: bool = True,
) -> LossOutput:
    """The clipped policy-gradient loss of TRL's GRPOTrainer (``_compute_loss``) on one micro-batch.

    ``logps``, ``mask`` (B, T): per-token log-probabilities of the completion tokens (with grad)
    and which tokens are trained on; ``advantages`` (B,). ``old_logps`` defaults to
    ``logps.detach()`` (one gradient step per rollout, ratio 1). The KL term is TRL's k3
    estimator to ``ref_logps``, multiplied by the ratio when ``kl_ratio_correction`` (TRL's
    ``use_bias_correction_kl``, default on: the unbiased reverse-KL gradient). Normalization, so that micro-batches sum to the full-batch loss:

    - ``grpo``: mean over sequences of each sequence's token mean (``num_sequences`` in total),
    - ``dr_grpo``: token sum / (``num_sequences`` * ``max_completion_length``),
    - ``dapo``: token sum / ``num_tokens`` (all trained tokens of the batch).

    Each normalizer defaults to this micro-batch's own count.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"unknown loss_type {loss_type!r}; expected one of {LOSS_TYPES}")
    mask = mask.to(logps.dtype)
    adv = advantages.to(logps.dtype).reshape(-1, 1)
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    kl_mean = float("nan")
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError(
                "beta != 0 needs ref_logps (log-probabilities under the frozen reference)"
            )
        per_token_kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        if kl_ratio_correction:
            per_token_kl = per_token_kl * ratio
        per_token = per_token + beta * per_token_kl
        kl_mean = float((per_token_kl.detach() * mask).sum() / mask.sum().clamp(min=1.0))
    n_seq = num_sequences if num_sequences is not None else logps.size(0)
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).sum() / max(n_seq, 1)
    elif loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("loss_type dr_grpo needs max_completion_length (the generation limit)")
        loss = (per_token * mask).sum() / (max(n_seq, 1) * max_completion_length)
    else:  # dapo
        n_tok = num_tokens if num_tokens is not None else mask.sum()
        loss = (per_token * mask).sum() / (torch.as_tensor(n_tok, dtype=logps.dtype).clamp(min=1.0))
    with torch.no_grad():
        is_clipped = ((ratio < 1 - epsilon_low) & (adv < 0)) | (
            (ratio > 1 + epsilon_high) & (adv > 0)
        )
        clip_ratio = float((is_clipped.to(mask.dtype) * mask).sum() / mask.sum().clamp(min=1.0))
    return LossOutput(loss=loss, kl=kl_mean, clip_ratio=clip_ratio)


# --------------------------------------------------------------------------------------------
# settings
# --------------------------------------------------------------------------------------------


@dataclass
class DuelSettings:
    """Everything a duel (or solo) run needs, from the config's ``train`` and ``agon`` sections."""

    mode: str = "duel"  # duel: drafter + reader; solo: one model, no reader (= GRPO)
    steps: int = 50  # optimizer steps per model
    problems_per_step: int = 8  # P: problems per step (split in half per direction under `both`)
    train_split: str = "train"  # train | train_hard: where training problems come from
    num_drafts: int = 8  # G: drafts per problem (solo: samples per problem)
    num_reads: int = 2  # K: reads per draft
    role_schedule: str = "alternate"  # alternate | both
    reward_scheme: str = "agon"  # agon | zero_sum | independent | cooperative
    lam: float = 1.0  # weight of the win bonus / loss penalty in the agon scheme
    reader_group: str = "draft"  # draft: K reads of one draft; problem: all G*K reads of a problem
    scale: str = "group"  # group | batch | none: what the advantage is divided by
    loss_type: str = "dapo"  # dapo | dr_grpo | grpo (TRL's names)
    beta: float = 0.0  # KL weight to a frozen reference (0: no reference model is kept)
    kl_ratio_correction: bool = True  # KL term times the ratio (TRL's use_bias_correction_kl)
    epsilon: float = 0.2  # lower clip of the ratio
    epsilon_high: float | None = None  # upper clip (None: = epsilon)
    num_iterations: int = 1  # gradient steps per rollout (mu); >1 makes the clipping bite
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    lr_scheduler: str = "constant_with_warmup"  # any transformers.get_scheduler name
    warmup_steps: int = 0
    max_grad_norm: float = 1.0  # clip; the pre-clip norm is logged
    micro_batch_size: int = 64  # rows per forward/backward (gradient accumulation inside a step)
    packing: bool = True  # score sequences packed several per row (agon.packing), not padded
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    draft_view: str = "full"
    checkpoint_every: int = 10  # steps between checkpoints (0: only at the end)
    keep_checkpoints: int = 2  # complete checkpoints kept on disk
    eval_every: int = 0  # steps between greedy hard-split evaluations (agon.train_eval); 0: none
    eval_problems: int | None = None  # the first N hard problems in them (None: all)
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "mode": (self.mode, MODES),
            "role_schedule": (self.role_schedule, ROLE_SCHEDULES),
            "reward_scheme": (self.reward_scheme, REWARD_SCHEMES),
            "reader_group": (self.reader_group, READER_GROUPS),
            "scale": (self.scale, SCALES),
            "loss_type": (self.loss_type, LOSS_TYPES),
        }
        checks["train_split"] = (self.train_split, ("train", "train_hard"))
        for name, (value, allowed) in checks.items():
            if value not in allowed:
                raise ValueError(f"duel setting {name}={value!r}: expected one of {allowed}")
        for name in (
            "steps",
            "problems_per_step",
            "num_drafts",
            "num_reads",
            "num_iterations",
            "micro_batch_size",
            "max_new_tokens",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"duel setting {name} must be >= 1, got {getattr(self, name)}")
        from agon.train_eval import check_settings

        check_settings(self.eval_every, self.eval_problems)
        if self.mode == "duel" and self.role_schedule == "both" and self.problems_per_step < 2:
            raise ValueError(
                "role_schedule 'both' splits the problems in two: problems_per_step must be >= 2"
            )

    @property
    def eps_high(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    @classmethod
    def from_config(
        cls, config: dict, family: dict | None = None, mode: str = "duel", seed: int = 0
    ) -> DuelSettings:
        """Build from a validated config's ``train``/``agon`` sections and a family row."""
        tr, ag = dict(config.get("train", {})), dict(config.get("agon", {}))
        reward = ag.get("reward", {})
        kw = dict(
            mode=mode,
            steps=tr.get("steps"),
            problems_per_step=tr.get("problems_per_step"),
            train_split=tr.get("split"),
            num_drafts=tr.get("num_generations"),
            num_reads=ag.get("num_reads"),
            role_schedule=ag.get("role_schedule"),
            reward_scheme=reward.get("scheme"),
            lam=reward.get("lam"),
            reader_group=ag.get("reader_group"),
            scale=tr.get("scale_rewards"),
            loss_type=tr.get("loss_type"),
            beta=tr.get("beta"),
            kl_ratio_correction=tr.get("kl_ratio_correction"),
            epsilon=tr.get("epsilon"),
            epsilon_high=tr.get("epsilon_high"),
            num_iterations=tr.get("num_iterations"),
            learning_rate=tr.get("learning_rate"),
            weight_decay=tr.get("weight_decay"),
            lr_scheduler=tr.get("lr_scheduler"),
            warmup_steps=tr.get("warmup_steps"),
            max_grad_norm=tr.get("max_grad_norm"),
            micro_batch_size=tr.get("micro_batch_size"),
            packing=tr.get("packing"),
            temperature=tr.get("temperature"),
            top_p=tr.get("top_p"),
            checkpoint_every=tr.get("checkpoint_every"),
            keep_checkpoints=tr.get("keep_checkpoints"),
            eval_every=tr.get("eval_every"),
            eval_problems=tr.get("eval_problems"),
            seed=seed,
        )
        if family is not None:
            kw["max_new_tokens"] = family.get("max_new_tokens")
            kw["draft_view"] = family.get("draft_view")
        return cls(**{k: v for k, v in kw.items() if v is not None})


# --------------------------------------------------------------------------------------------
# plumbing kept out of the algorithm's way: policies, samples
# --------------------------------------------------------------------------------------------


@dataclass
class Policy:
    """One trained model with its own optimizer, scheduler, engine and (optional) frozen reference."""

    name: str  # "A" or "B"
    model: torch.nn.Module
    engine: Engine  # generates with the live model (shares its weights)
    optimizer: torch.optim.Optimizer
    scheduler: Any
    ref_model: torch.nn.Module | None = None
    pad_token_id: int = 0
    accelerator: Any = (
        None  # set when run under `accelerate launch` (DDP / FSDP2); None on one device
    )


@dataclass
class Samples:
    """Completions of one role in one step, ready for the loss."""

    role: str  # drafter | reader
    prompt_ids: list[list[int]] = field(default_factory=list)
    completion_ids: list[list[int]] = field(default_factory=list)
    advantages: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return len(self.completion_ids)


def make_policy(
    name: str, model: torch.nn.Module, engine: Engine, settings: DuelSettings, pad_token_id: int
) -> Policy:
    """A policy with AdamW, a warmup scheduler, dropout off (as TRL) and, if ``beta``, a frozen copy."""
    import copy

    from transformers import get_scheduler

    for module in model.modules():  # TRL's disable_dropout: sampling and scoring see the same net
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    enable_token_logprobs(model, settings.temperature)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=settings.learning_rate,
        betas=settings.adam_betas,
        weight_decay=settings.weight_decay,
    )
    scheduler = get_scheduler(
        settings.lr_scheduler,
        optimizer,
        num_warmup_steps=settings.warmup_steps,
        num_training_steps=settings.steps * settings.num_iterations,
    )
    ref = None
    if settings.beta != 0.0:
        ref = copy.deepcopy(model).eval().requires_grad_(False)
        enable_token_logprobs(ref, settings.temperature)
    return Policy(
        name=name,
        model=model,
        engine=engine,
        optimizer=optimizer,
        scheduler=scheduler,
        ref_model=ref,
        pad_token_id=pad_token_id,
    )


def _seed_for(seed: int, step: int, salt: int) -> int:
    """A sampling seed that depends only on (run seed, step, role): resume needs no RNG replay."""
    return (seed * 1_000_003 + step * 7_919 + salt) % (2**31 - 1)


# --------------------------------------------------------------------------------------------
# 1-2. rollout
# --------------------------------------------------------------------------------------------


@dataclass
class Rollout:
    """What one direction of a duel produced: drafts, reads and their correctness."""

    problems: list[Problem]
    drafts: list[list[Completion]]  # [problem][g]
    reads: list[list[list[Completion]]]  # [problem][g][k] (empty in solo mode)
    c_draft: np.ndarray  # (P, G)
    c_read: np.ndarray  # (P, G, K)
    drafts_cut: int = 0  # drafts shortened to fit the reader's max_prompt_tokens


def rollout(
    task: Task,
    drafter: Policy,
    reader: Policy | None,
    problems: list[Problem],
    s: DuelSettings,
    step: int,
    salt: int,
) -> Rollout:
    """Drafts by ``drafter``, then (duel) ``s.num_reads`` reads of each by ``reader``, all graded."""
    P, G, K = len(problems), s.num_drafts, s.num_reads
    sp = SamplingParams(
        max_new_tokens=s.max_new_tokens,
        temperature=s.temperature,
        top_p=s.top_p,
        seed=_seed_for(s.seed, step, salt),
    )
    drafts = drafter.engine.generate([task.solve_prompt(p) for p in problems], n=G, sampling=sp)
    c_draft = correctness(
        task.grade([p for p in problems for _ in range(G)], [d.text for row in drafts for d in row])
    ).reshape(P, G)
    if reader is None:
        return Rollout(problems, drafts, [], c_draft, np.zeros((P, G, 0)))
    tok = getattr(drafter.engine, "tokenizer", None)
    fitted = [
        fit_reader_prompt(task, p, apply_draft_view(d.text, s.draft_view, tok), reader.engine)
        for p, row in zip(problems, drafts)
        for d in row
    ]
    reader_prompts = [msgs for msgs, _ in fitted]
    sp_read = dataclasses.replace(sp, seed=_seed_for(s.seed, step, salt + 1))
    flat_reads = reader.engine.generate(reader_prompts, n=K, sampling=sp_read)
    reads = [[flat_reads[i * G + g] for g in range(G)] for i in range(P)]
    read_problems = [p for p in problems for _ in range(G * K)]
    c_read = correctness(
        task.grade(read_problems, [r.text for row in flat_reads for r in row])
    ).reshape(P, G, K)
    return Rollout(
        problems, drafts, reads, c_draft, c_read, drafts_cut=sum(cut for _, cut in fitted)
    )


def fit_reader_prompt(
    task: Task, problem: Problem, shown: str, engine: Engine
) -> tuple[list, bool]:
    """The reader prompt for ``shown`` (the draft as ``draft_view`` shows it), made to fit.

    A draft that would push the prompt past the family's ``max_prompt_tokens`` keeps only its
    tail (where the answer is), shortened until the prompt fits; the bool says it was cut
    (logged as ``reader/drafts_cut``). Engines without ``encode`` are trusted to fit it.
    """
    from agon.engines.base import PromptTooLongError

    messages = task.reader_prompt(problem, shown)
    encode = getattr(engine, "encode", None)
    if (
        encode is None or getattr(engine, "max_prompt_tokens", 0) is None
    ):  # no limit: nothing to fit
        return messages, False

    def fits(n_chars: int) -> bool:
        try:
            encode(task.reader_prompt(problem, shown[len(shown) - n_chars :] if n_chars else ""))
            return True
        except PromptTooLongError:
            return False

    if fits(len(shown)):
        return messages, False
    if not fits(0):
        raise PromptTooLongError(
            f"problem {problem.id}: the reader prompt is too long even without the draft; raise max_prompt_tokens"
        )
    lo, hi = 0, len(shown)  # binary search for the longest tail that fits: fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return task.reader_prompt(problem, shown[len(shown) - lo :] if lo else ""), True


# --------------------------------------------------------------------------------------------
# 3-4. rewards and advantages of one rollout, per role
# --------------------------------------------------------------------------------------------


def score(ro: Rollout, s: DuelSettings) -> tuple[Samples, Samples | None, dict[str, float]]:
    """Duel rewards and per-role group-relative advantages of a rollout, and their metrics."""
    P, G = ro.c_draft.shape
    K = ro.c_read.shape[2]
    m: dict[str, float] = {}
    if K == 0:  # solo: reward is correctness, the group is the G samples of a problem (= GRPO)
        r_draft = ro.c_draft.copy()
    else:
        with (
            warnings.catch_warnings()
        ):  # a draft whose reads were all ungraded: NaN rival, on purpose
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_read = np.nanmean(ro.c_read, axis=2)
        r_draft = duel_rewards(ro.c_draft, mean_read, s.reward_scheme, s.lam, role="drafter")
        c_draft_per_read = np.repeat(ro.c_draft[:, :, None], K, axis=2)
        r_read = duel_rewards(ro.c_read, c_draft_per_read, s.reward_scheme, s.lam, role="reader")
        m.update(
            {
                f"duel/{k}": v
                for k, v in duel_outcomes(c_draft_per_read.ravel(), ro.c_read.ravel()).items()
            }
        )
    adv_d = group_advantages(r_draft.ravel(), np.repeat(np.arange(P), G), s.scale)
    drafter = Samples(
        role="drafter",
        prompt_ids=[c.prompt_token_ids for row in ro.drafts for c in row],
        completion_ids=[c.token_ids for row in ro.drafts for c in row],
        advantages=adv_d.values,
    )
    m.update(
        _role_metrics("drafter", r_draft, ro.c_draft, adv_d, [c for row in ro.drafts for c in row])
    )
    if K == 0:
        return drafter, None, m
    read_groups = np.arange(P * G) if s.reader_group == "draft" else np.repeat(np.arange(P), G)
    adv_r = group_advantages(r_read.ravel(), np.repeat(read_groups, K), s.scale)
    flat = [r for row in ro.reads for draft_reads in row for r in draft_reads]
    reader = Samples(
        role="reader",
        prompt_ids=[c.prompt_token_ids for c in flat],
        completion_ids=[c.token_ids for c in flat],
        advantages=adv_r.values,
    )
    m.update(_role_metrics("reader", r_read, ro.c_read, adv_r, flat))
    m["reader/drafts_cut"] = float(ro.drafts_cut)
    return drafter, reader, m


def _nanmean(x: Any) -> float:
    x = np.asarray(x, dtype=np.float64)
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else float("nan")


def _role_metrics(
    role: str, rewards: np.ndarray, correct: np.ndarray, adv: Advantages, comps: list[Completion]
) -> dict[str, float]:
    lengths = [len(c.token_ids) for c in comps]
    return {
        f"{role}/reward": _nanmean(rewards),
        f"{role}/correct": _nanmean(correct),
        f"{role}/ungraded": float(np.isnan(correct).mean()) if correct.size else 0.0,
        f"{role}/frac_zero_spread": float(adv.zero_spread.mean())
        if adv.zero_spread.size
        else float("nan"),
        f"{role}/mean_length": float(np.mean(lengths)) if lengths else 0.0,
        f"{role}/truncated": float(np.mean([c.finish_reason == "length" for c in comps]))
        if comps
        else 0.0,
        f"{role}/tokens": float(sum(lengths)),
    }


# --------------------------------------------------------------------------------------------
# 5-6. loss and update, one policy on its own tokens
# --------------------------------------------------------------------------------------------


def update(policy: Policy, batches: list[Samples], s: DuelSettings) -> dict[str, float]:
    """One optimizer step (or ``num_iterations``) of ``policy`` on its own completions.

    Gradients of micro-batches accumulate to exactly the full-batch loss (global normalizers).
    A non-finite loss or gradient norm skips the step (gradients dropped) and is reported.
    """
    prompts = [p for b in batches for p in b.prompt_ids]
    comps = [c for b in batches for c in b.completion_ids]
    adv = torch.tensor(
        np.concatenate([b.advantages for b in batches]) if batches else np.zeros(0),
        dtype=torch.float32,
    )
    model = policy.model
    m: dict[str, float] = {"skipped": 0.0}
    if not comps or sum(len(c) for c in comps) == 0:  # nothing generated: nothing to learn from
        _scheduler_step(policy)
        return {**m, "skipped": 1.0, "skip_reason_empty": 1.0}
    n_seq = len(comps)
    cmask = completion_mask(comps).long()
    n_tok = float(cmask.sum())
    chunks = [
        slice(i, min(i + s.micro_batch_size, n_seq)) for i in range(0, n_seq, s.micro_batch_size)
    ]

    def logprobs_of(net: torch.nn.Module, c: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return completion_logprobs(
            net, prompts[c], comps[c], cmask.size(1), policy.pad_token_id, s.packing
        )

    ref_logps, old_logps = [None] * len(chunks), [None] * len(chunks)
    with torch.no_grad():
        if policy.ref_model is not None:
            ref_logps = [logprobs_of(policy.ref_model, c)[0] for c in chunks]
        if s.num_iterations > 1:
            old_logps = [logprobs_of(model, c)[0] for c in chunks]
    model.train()
    for _ in range(s.num_iterations):
        policy.optimizer.zero_grad(set_to_none=True)
        loss_sum, ent_sum, kl_sum, clip_sum = 0.0, 0.0, 0.0, 0.0
        for c, ref, old in zip(chunks, ref_logps, old_logps):
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
            if policy.accelerator is not None:
                policy.accelerator.backward(out.loss)
            else:
                out.loss.backward()
            w = float(cmask[c].sum())
            loss_sum += float(out.loss.detach())
            ent_sum += float((ent.detach() * cmask[c]).sum())
            kl_sum += (out.kl * w) if not math.isnan(out.kl) else 0.0
            clip_sum += out.clip_ratio * w
        acc = policy.accelerator
        clip = acc.clip_grad_norm_ if acc is not None else torch.nn.utils.clip_grad_norm_
        grad_norm = float(clip(model.parameters(), s.max_grad_norm))
        bad = not (math.isfinite(loss_sum) and math.isfinite(grad_norm))
        if acc is not None and acc.num_processes > 1:  # every rank must take the same decision
            bad = bool(acc.reduce(torch.tensor(float(bad), device=acc.device), reduction="sum") > 0)
        if bad:
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
        _scheduler_step(policy)
    policy.optimizer.zero_grad(set_to_none=True)
    m.update(
        {
            "loss": loss_sum,
            "grad_norm": grad_norm,
            "entropy": ent_sum / max(n_tok, 1.0),
            "kl": kl_sum / max(n_tok, 1.0) if s.beta else float("nan"),
            "clip_ratio": clip_sum / max(n_tok, 1.0),
            "lr": float(policy.scheduler.get_last_lr()[0]),
            "trained_tokens": n_tok,
        }
    )
    return m


def _scheduler_step(policy: Policy) -> None:
    """Advance the schedule even when the update was skipped (torch warns; the skip is deliberate)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Detected call of `lr_scheduler.step\\(\\)` before"
        )
        policy.scheduler.step()


# --------------------------------------------------------------------------------------------
# one step, top to bottom
# --------------------------------------------------------------------------------------------


def directions(
    step: int, s: DuelSettings, names: Sequence[str], n_problems: int
) -> list[tuple[str, str | None, slice]]:
    """(drafter, reader, problem slice) for this step: ``alternate`` swaps roles each step,
    ``both`` runs A->B on the first half and B->A on the second; solo has no reader."""
    if s.mode == "solo":
        return [(names[0], None, slice(0, n_problems))]
    a, b = names
    if s.role_schedule == "alternate":
        return [(a, b, slice(0, n_problems))] if step % 2 == 0 else [(b, a, slice(0, n_problems))]
    half = n_problems // 2
    return [(a, b, slice(0, half)), (b, a, slice(half, n_problems))]


def duel_step(
    task: Task, policies: dict[str, Policy], problems: list[Problem], s: DuelSettings, step: int
) -> dict[str, float]:
    """One training step: rollout -> reward -> advantage -> loss -> update, for every policy."""
    t0 = time.perf_counter()
    metrics: dict[str, float] = {"step": step}
    own: dict[str, list[Samples]] = {name: [] for name in policies}
    tokens = 0
    for i, (d, r, sl) in enumerate(directions(step, s, list(policies), len(problems))):
        if sl.stop <= sl.start:
            continue
        ro = rollout(
            task, policies[d], policies[r] if r else None, problems[sl], s, step, salt=10 * i
        )  # 1-2
        drafts, reads, m = score(ro, s)  # 3-4
        own[d].append(drafts)
        tokens += int(m.get("drafter/tokens", 0) + m.get("reader/tokens", 0))
        metrics.update({f"{d}/{k}": v for k, v in m.items() if k.startswith("drafter/")})
        if reads is not None:
            own[r].append(reads)
            metrics.update({f"{r}/{k}": v for k, v in m.items() if k.startswith("reader/")})
            metrics.update({f"{d}->{r}/{k}": v for k, v in m.items() if k.startswith("duel/")})
    t_roll = time.perf_counter()
    for name, policy in policies.items():  # 5-6: each model on its own tokens, its own optimizer
        metrics.update({f"{name}/{k}": v for k, v in update(policy, own[name], s).items()})
        sync = getattr(policy.engine, "sync_weights", None)
        if sync is not None:  # a vLLM engine holds its own copy of the weights (duel_scale.py)
            sync(policy.model)
    _summarize_duels(metrics)
    metrics.update(
        {
            "tokens_generated": tokens,
            "time/rollout_s": t_roll - t0,
            "time/update_s": time.perf_counter() - t_roll,
        }
    )
    return metrics


def _summarize_duels(metrics: dict[str, float]) -> None:
    """Pool per-direction duel outcomes into duel/drafter_wins, duel/reader_wins, duel/ties."""
    for k in ("drafter_wins", "reader_wins", "ties"):
        vals = [v for key, v in metrics.items() if key.endswith(f"/duel/{k}") and not math.isnan(v)]
        if vals:
            metrics[f"duel/{k}"] = float(np.mean(vals))


# --------------------------------------------------------------------------------------------
# the run: problem stream, checkpoints, metrics
# --------------------------------------------------------------------------------------------


class ProblemStream:
    """Problems in a seeded order, reshuffled each epoch; its position is part of a checkpoint."""

    def __init__(self, problems: Sequence[Problem], seed: int):
        if not problems:
            raise ValueError("no training problems: the task's train split is empty")
        self.problems, self.seed = list(problems), seed
        self.epoch, self.pos = 0, 0

    def _order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.problems))

    def take(self, n: int) -> list[Problem]:
        """The next ``n`` problems (crossing into the next epoch's order when needed)."""
        out = []
        order = self._order()
        while len(out) < n:
            if self.pos >= len(order):
                self.epoch, self.pos = self.epoch + 1, 0
                order = self._order()
            out.append(self.problems[order[self.pos]])
            self.pos += 1
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "seed": self.seed, "n": len(self.problems)}

    def load_state_dict(self, state: dict) -> None:
        if state["n"] != len(self.problems) or state["seed"] != self.seed:
            raise ValueError(
                f"checkpoint data position is for {state['n']} problems / seed {state['seed']}, this run has {len(self.problems)} / {self.seed}"
            )
        self.epoch, self.pos = state["epoch"], state["pos"]


def train(
    task: Task,
    policies: dict[str, Policy],
    s: DuelSettings,
    out_dir: str | Path,
    on_step: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Train ``policies`` for ``s.steps`` steps on ``task``'s train split, resuming if possible.

    Writes ``out_dir/metrics.jsonl`` (one JSON row per step) and ``out_dir/checkpoints/``.
    A run killed at any point restarts from its last complete checkpoint; the metrics of steps
    after it are dropped and recomputed, so the file never has a step twice.

    With ``s.eval_every`` > 0, each policy is also evaluated alone on the hard split
    (:mod:`agon.train_eval`) before the update of step 0, every ``eval_every`` steps and after
    the last update; the scores go into the rows (the last one into a row ``step = s.steps`` of
    its own, not in the returned list). The evaluations do not touch the training RNG.
    """
    from agon import checkpoint as ckpt
    from agon import train_eval

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = out_dir / "metrics.jsonl"
    stream = ProblemStream(task.problems(s.train_split), s.seed)
    torch.manual_seed(s.seed)
    acc = next(iter(policies.values())).accelerator
    start = 0
    last = ckpt.latest_checkpoint(out_dir / "checkpoints")
    if last is not None:
        state = ckpt.load_checkpoint(
            last, policies, accelerator=policies[next(iter(policies))].accelerator
        )
        stream.load_state_dict(state["data"])
        start = state["step"]
        log.info("resumed from %s at step %d", last, start)
    if acc is None or acc.is_main_process:
        ckpt.truncate_jsonl(metrics_path, keep=lambda row: row.get("step", -1) < start)
    rank, world = (acc.process_index, acc.num_processes) if acc is not None else (0, 1)
    eval_set = train_eval.hard_problems(task, s.eval_problems) if s.eval_every else []

    def evaluate(updates: int) -> dict[str, float]:
        # every rank evaluates the whole set: sharded (FSDP) models need every rank in each forward
        m = train_eval.hard_pass1(
            {n: p.engine for n, p in policies.items()},
            task,
            eval_set,
            s.max_new_tokens,
            models=[p.model for p in policies.values()],
        )
        log.info("hard-split pass@1 after %d updates: %s", updates, train_eval.describe(m))
        return m

    def write(row: dict) -> None:
        if rank == 0:  # metrics of rank 0's share of the batch
            with open(metrics_path, "a") as f:
                f.write(json.dumps(row, allow_nan=True) + "\n")

    rows = []
    for step in range(start, s.steps):
        # every rank draws the same P problems and rolls out its share; groups live inside a
        # problem, so advantages need no communication (the loss normalizers are per rank)
        problems = stream.take(s.problems_per_step)[rank::world]
        evaluation = (
            evaluate(step) if train_eval.is_eval_step(step, s.eval_every) else {}
        )  # before this step's update
        row = duel_step(task, policies, problems, s, step) | evaluation
        rows.append(row)
        write(row)
        if on_step:
            on_step(row)
        done = step + 1
        if (s.checkpoint_every and done % s.checkpoint_every == 0) or done == s.steps:
            ckpt.save_checkpoint(
                out_dir / "checkpoints",
                done,
                policies,
                data=stream.state_dict(),
                keep=s.keep_checkpoints,
                accelerator=acc,
            )
    if (
        s.eval_every
    ):  # the trained models; a resume drops this row with the others and writes it again
        write(train_eval.final_row(s.steps, evaluate(s.steps)))
    return rows
