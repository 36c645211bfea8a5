# long: one duel step, rollout to update, reads top to bottom in one file on purpose.
"""The Agon duel: two policies that grade each other, one training step read top to bottom.

For a batch of P problems (``docs/method.md`` has the full reading and every option's key):

1. :func:`rollout`: the drafter samples G drafts per problem; for every draft the reader samples
   K reads of the reader prompt (problem + the rival's draft, shown through ``draft_view``);
2. :func:`grade`: the task's verifier scores every draft and every read (c in {0, 1}, NaN when
   it cannot score);
3. :func:`duel_rewards`: "each is rewarded for out-solving the other";
4. :func:`group_advantages`: group-relative, kept separate per role;
5. :func:`agon.loss.policy_loss`: the clipped policy gradient of TRL's GRPOTrainer (``dapo |
   dr_grpo | grpo``, optional KL to a frozen reference with ``beta``), each model's own tokens;
6. :func:`update`: each model steps its own optimizer;

and :func:`duel_step` strings them together. The loop around it (problem stream, resume,
checkpoints, metrics file, probes) is :mod:`agon.training.loop`; the policies (model,
optimizer, devices) are :mod:`agon.training.policy`; the settings
:class:`agon.training.settings.DuelSettings`.

``mode: solo`` drops the reader: one model, G samples per problem, reward = correctness. That
is GRPO, and ``tests/test_duel_parity.py`` shows its loss equals TRL GRPOTrainer's, so Agon
and GRPO differ only by the duel.

Our reading of the paper (only the abstract is public) is ``docs/method.md``: who the rival
is, the reward shapes, what the rival term does to each role under each ``reader_group`` and
``scale_rewards`` (with group-relative advantages, a reward term constant inside a group
cancels: under ``reader_group: draft`` the reader's advantages under ``agon`` equal those under
``independent``, and only the drafter feels the contest), the role schedules and positions.
The draft inside a reader prompt is *prompt*: each model is trained on its own completion
tokens only.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agon.engines.base import Completion, Engine, PromptTooLongError, SamplingParams, fit_tail
from agon.grading.verdict import correctness
from agon.logprobs import completion_logprobs, completion_mask
from agon.loss import policy_loss
from agon.tasks.base import Problem, Task, apply_draft_view
from agon.training import metrics as mk
from agon.training.policy import Policy
from agon.training.settings import REWARD_SCHEMES, SCALES, DuelSettings

log = logging.getLogger(__name__)

ADV_EPS = 1e-4  # TRL's constant in (r - mean) / (std + eps); kept equal for parity


# -- 1. rollout ----------------------------------------------------------------------------------


@dataclass
class Rollout:
    """What one direction of a duel generated: the drafts and the reads of each draft."""

    problems: list[Problem]
    drafts: list[list[Completion]]  # [problem][g]
    reads: list[list[list[Completion]]]  # [problem][g][k] (empty in solo mode)
    drafts_cut: int = 0  # drafts shortened to fit the reader's max_prompt_tokens


def sampling_seed(seed: int, step: int, salt: int) -> int:
    """A sampling seed that depends only on (run seed, step, role): resume needs no RNG replay."""
    return (seed * 1_000_003 + step * 7_919 + salt) % (2**31 - 1)


def prompt_seeds(base: int, keys: Sequence[int]) -> tuple[int, ...]:
    """One sampling seed per prompt from its key (its place in the step's whole batch), so a
    prompt draws the same samples whichever process, or batch, it lands in."""
    return tuple((base * 1_000_003 + int(k)) % (2**31 - 1) for k in keys)


def rollout(
    task: Task,
    drafter: Policy,
    reader: Policy | None,
    problems: list[Problem],
    s: DuelSettings,
    step: int,
    salt: int,
    keys: Sequence[int] | None = None,
) -> Rollout:
    """G drafts per problem by ``drafter``, then (duel) K reads of each draft by ``reader``.

    ``keys`` (default ``0..P-1``) place each problem in the step's whole batch: problem ``k``'s
    drafts, and the reads of its draft ``g`` (key ``k * G + g``), are seeded from them alone.
    """
    P, G, K = len(problems), s.num_generations, s.num_reads
    keys = list(range(P)) if keys is None else list(keys)
    base = sampling_seed(s.seed, step, salt)
    sp = SamplingParams(
        max_new_tokens=s.max_new_tokens,
        temperature=s.temperature,
        top_p=s.top_p,
        seed=base,
        prompt_seeds=prompt_seeds(base, keys),
    )
    drafts = drafter.engine.generate([task.solve_prompt(p) for p in problems], n=G, sampling=sp)
    if reader is None:
        return Rollout(problems, drafts, [])
    tok = getattr(drafter.engine, "tokenizer", None)
    fitted = [
        fit_reader_prompt(task, p, apply_draft_view(d.text, s.draft_view, tok), reader.engine)
        for p, row in zip(problems, drafts)
        for d in row
    ]
    read_base = sampling_seed(s.seed, step, salt + 1)
    sp_read = dataclasses.replace(
        sp,
        seed=read_base,
        prompt_seeds=prompt_seeds(read_base, [k * G + g for k in keys for g in range(G)]),
    )
    flat_reads = reader.engine.generate([msgs for msgs, _ in fitted], n=K, sampling=sp_read)
    reads = [[flat_reads[i * G + g] for g in range(G)] for i in range(P)]
    return Rollout(problems, drafts, reads, drafts_cut=sum(cut for _, cut in fitted))


def fit_reader_prompt(
    task: Task, problem: Problem, shown: str, engine: Engine
) -> tuple[list, bool]:
    """The reader prompt for ``shown`` (the draft as ``draft_view`` shows it), made to fit the
    reader's ``max_prompt_tokens`` by keeping the draft's tail (logged as ``drafts_cut``)."""
    try:
        return fit_tail(lambda text: task.reader_prompt(problem, text), shown, engine)
    except PromptTooLongError:
        raise PromptTooLongError(
            f"problem {problem.id}: the reader prompt is too long even without the draft; "
            "raise max_prompt_tokens"
        ) from None


# -- 2. grade ------------------------------------------------------------------------------------


def grade(task: Task, ro: Rollout) -> tuple[np.ndarray, np.ndarray]:
    """Correctness of every draft ``(P, G)`` and every read ``(P, G, K)`` (K = 0 in solo mode)."""
    P, G = len(ro.problems), len(ro.drafts[0]) if ro.drafts else 0
    c_draft = correctness(
        task.grade(
            [p for p in ro.problems for _ in range(G)], [d.text for row in ro.drafts for d in row]
        )
    ).reshape(P, G)
    if not ro.reads:
        return c_draft, np.zeros((P, G, 0))
    flat = [r for row in ro.reads for draft_reads in row for r in draft_reads]
    K = len(flat) // max(P * G, 1)
    read_problems = [p for p in ro.problems for _ in range(G * K)]
    c_read = correctness(task.grade(read_problems, [r.text for r in flat])).reshape(P, G, K)
    return c_draft, c_read


# -- 3. reward -----------------------------------------------------------------------------------


def duel_rewards(
    c_self: Any, c_rival: Any, scheme: str = "agon", lam: float = 1.0, role: str = "drafter"
) -> np.ndarray:
    """Duel reward of each completion from its own and its rival's correctness.

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


def role_rewards(
    c_draft: np.ndarray, c_read: np.ndarray, s: DuelSettings
) -> tuple[np.ndarray, np.ndarray]:
    """Each draft's and each read's reward against its rival: a draft's rival is the mean of
    its K reads, a read's rival the draft it read. Solo mode (K = 0): reward = correctness."""
    K = c_read.shape[2]
    if K == 0:
        return c_draft.copy(), np.zeros_like(c_read)
    with warnings.catch_warnings():  # a draft whose reads were all ungraded: NaN rival, on purpose
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_read = np.nanmean(c_read, axis=2)
    r_draft = duel_rewards(c_draft, mean_read, s.reward_scheme, s.reward_lam, role="drafter")
    c_draft_per_read = np.repeat(c_draft[:, :, None], K, axis=2)
    r_read = duel_rewards(c_read, c_draft_per_read, s.reward_scheme, s.reward_lam, role="reader")
    return r_draft, r_read


# -- 4. advantage --------------------------------------------------------------------------------


@dataclass
class Advantages:
    """Advantages of one role's completions, and which groups had no reward spread."""

    values: np.ndarray  # one per completion; 0 for ungradable completions
    zero_spread: np.ndarray  # one bool per group: all rewards equal (no learning signal)


def group_advantages(
    rewards: Any, groups: Any, scale: str = "group", eps: float = ADV_EPS
) -> Advantages:
    """Group-relative advantages ``(r - mean_g) / (std + eps)``, as TRL's GRPOTrainer computes.

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


def role_advantages(
    r_draft: np.ndarray, r_read: np.ndarray, s: DuelSettings
) -> tuple[Advantages, Advantages | None]:
    """Per-role advantages: a draft's group is its problem's G drafts; a read's group is the K
    reads of one draft (``reader_group: draft``) or all G*K reads of a problem (``problem``)."""
    P, G, K = r_read.shape
    adv_d = group_advantages(r_draft.ravel(), np.repeat(np.arange(P), G), s.scale_rewards)
    if K == 0:
        return adv_d, None
    read_groups = np.arange(P * G) if s.reader_group == "draft" else np.repeat(np.arange(P), G)
    return adv_d, group_advantages(r_read.ravel(), np.repeat(read_groups, K), s.scale_rewards)


# -- 5-6. loss and update: one policy on its own tokens (the loss: agon.loss.policy_loss) --------


@dataclass
class Samples:
    """Completions of one role in one step, with their advantages: what a loss is made of."""

    role: str  # drafter | reader
    prompt_ids: list[list[int]] = field(default_factory=list)
    completion_ids: list[list[int]] = field(default_factory=list)
    advantages: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return len(self.completion_ids)


def update(policy: Policy, batches: list[Samples], s: DuelSettings) -> dict[str, float]:
    """One optimizer step (or ``num_iterations``) of ``policy`` on its own completions.

    Gradients of micro-batches accumulate to exactly the full-batch loss (global normalizers).
    Over several processes the normalizers count every rank's completions and the loss is
    multiplied by the world size, so the mean that DDP / FSDP2 take of the ranks' gradients is
    the gradient of the whole batch's loss, whatever each rank's share of tokens.
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
    mb = s.micro_batch_size
    chunks = [slice(i, min(i + mb, n_seq)) for i in range(0, n_seq, mb)]

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
        }
    )
    return m


# -- one step, top to bottom ---------------------------------------------------------------------


def directions(
    step: int, s: DuelSettings, names: Sequence[str], keys: Sequence[int], n_total: int
) -> list[tuple[int, str, str | None, list[int]]]:
    """(direction, drafter, reader, positions in ``keys``) for this step: ``alternate`` swaps
    roles each step, ``both`` runs A->B (direction 0) on the first half of the step's
    ``n_total`` problems and B->A (direction 1) on the second, each problem placed by its key,
    so a process holding a share of the batch plays each problem as one process would; solo
    has no reader. Directions with no problem here are left out."""
    everything = list(range(len(keys)))
    if s.mode == "solo":
        return [(0, names[0], None, everything)]
    a, b = names
    if s.role_schedule == "alternate":
        return [(0, a, b, everything)] if step % 2 == 0 else [(0, b, a, everything)]
    half = n_total // 2
    first = [i for i, k in enumerate(keys) if k < half]
    second = [i for i, k in enumerate(keys) if k >= half]
    return [d for d in [(0, a, b, first), (1, b, a, second)] if d[3]]


def samples_of(role: str, comps: list[Completion], adv: Advantages) -> Samples:
    """One role's completions with their advantages, as the loss takes them: the prompt ids
    (for a read: problem + draft) are context, the completion ids are what is trained on."""
    return Samples(
        role=role,
        prompt_ids=[c.prompt_token_ids for c in comps],
        completion_ids=[c.token_ids for c in comps],
        advantages=adv.values,
    )


def update_each(
    policies: Mapping[str, Policy], own: Mapping[str, Sequence[Samples]], s: DuelSettings
) -> dict[str, float]:
    """Steps 5-6 for every policy: each model on its own samples with its own optimizer, then
    its rollout engine synced (a vLLM engine holds its own copy of the weights); the update
    metrics as ``{model}/{key}``. Every trainer in the duel's loop ends its step with this."""
    out: dict[str, float] = {}
    for name, policy in policies.items():
        out.update({f"{name}/{k}": v for k, v in update(policy, own[name], s).items()})
        policy.sync_engine()
    return out


def duel_step(
    task: Task,
    policies: dict[str, Policy],
    problems: list[Problem],
    s: DuelSettings,
    step: int,
    keys: Sequence[int] | None = None,
    n_total: int | None = None,
) -> dict[str, float]:
    """One training step: rollout -> grade -> reward -> advantage -> loss -> update, for every
    policy; returns the step's metrics row (keys in :mod:`agon.training.metrics`).

    Under several processes each holds a share of the step's ``n_total`` problems, ``keys``
    giving their places in the whole batch (default: ``problems`` is the whole batch)."""
    t0 = time.perf_counter()
    row: dict[str, float] = {mk.STEP: step}
    own: dict[str, list[Samples]] = {name: [] for name in policies}
    tokens = 0
    keys = list(range(len(problems))) if keys is None else list(keys)
    n_total = len(problems) if n_total is None else n_total
    for i, d, r, at in directions(step, s, list(policies), keys, n_total):
        reader = policies[r] if r else None
        mine, my_keys = [problems[j] for j in at], [keys[j] for j in at]
        ro = rollout(task, policies[d], reader, mine, s, step, salt=10 * i, keys=my_keys)  # 1
        c_draft, c_read = grade(task, ro)  # 2
        r_draft, r_read = role_rewards(c_draft, c_read, s)  # 3
        adv_d, adv_r = role_advantages(r_draft, r_read, s)  # 4
        drafts = [c for per_problem in ro.drafts for c in per_problem]
        own[d].append(samples_of("drafter", drafts, adv_d))
        row.update(mk.role_metrics(d, "drafter", r_draft, c_draft, adv_d.zero_spread, drafts))
        tokens += int(row[mk.key(mk.ROLE_TOKENS, model=d, role="drafter")])
        if r is not None:
            reads = [x for per_problem in ro.reads for per_draft in per_problem for x in per_draft]
            own[r].append(samples_of("reader", reads, adv_r))
            row.update(mk.role_metrics(r, "reader", r_read, c_read, adv_r.zero_spread, reads))
            row[mk.key(mk.DRAFTS_CUT, model=r)] = float(ro.drafts_cut)
            tokens += int(row[mk.key(mk.ROLE_TOKENS, model=r, role="reader")])
            c_draft_per_read = np.repeat(c_draft[:, :, None], c_read.shape[2], axis=2)
            outcomes = mk.duel_outcomes(c_draft_per_read.ravel(), c_read.ravel())
            row.update({f"{d}->{r}/{k}": v for k, v in outcomes.items()})
    t_roll = time.perf_counter()
    row.update(update_each(policies, own, s))  # 5-6
    mk.pool_duel_outcomes(row)
    row.update(
        {
            mk.TOKENS: tokens,
            mk.ROLLOUT_S: t_roll - t0,
            mk.UPDATE_S: time.perf_counter() - t_roll,
        }
    )
    return row
