"""The Agon duel: two policies that grade each other, one training step read top to bottom.

For a batch of P problems (``docs/method.md`` has the full reading and every option's key):

1. :func:`rollout`: the drafter samples G drafts per problem; for every draft the reader samples
   K reads of the reader prompt (problem + the rival's draft, shown through ``draft_view``);
2. :func:`grade`: the task's verifier scores every draft and every read (c in {0, 1}, NaN when
   it cannot score);
3. :func:`duel_rewards`: "each is rewarded for out-solving the other";
4. :func:`role_advantages`: group-relative, kept separate per role;
5. the clipped policy gradient of TRL's GRPOTrainer on each model's own tokens, one optimizer
   step each (:func:`agon.rl.update`);

and :func:`duel_step` strings them together. Sampling, grading, group advantages and the
update are the policy-gradient core every in-house trainer shares (:mod:`agon.rl`, where one
model alone is GRPO), so Agon and GRPO differ only by the duel. The loop around a step
(problem stream, resume, checkpoints, metrics file, probes) is :mod:`agon.training.loop`; the
policies (model, optimizer, devices) are :mod:`agon.training.policy`; the duel's settings
(:class:`DuelSettings`, the config's ``agon`` section) are with every trainer's in
:mod:`agon.training.settings`, where the planner and the workflow read them without torch.

Our reading of the paper (only the abstract is public) is ``docs/method.md``: who the rival
is, the reward shapes, what the rival term does to each role under each ``reader_group`` and
``scale_rewards`` (with group-relative advantages, a reward term constant inside a group
cancels: under ``reader_group: draft`` the reader's advantages under ``agon`` equal those under
``independent``, and only the drafter feels the contest), the role schedules and positions.
The draft inside a reader prompt is *prompt*: each model is trained on its own completion
tokens only.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agon import rl
from agon.engines.base import Completion, Engine, PromptTooLongError, fit_tail
from agon.rl import Advantages, group_advantages, problem_groups
from agon.tasks.base import Problem, Task, apply_draft_view
from agon.toy import audit
from agon.training import logbook
from agon.training import metrics as mk
from agon.training.policy import Policy
from agon.training.settings import DuelSettings, choices
from agon.training.shell import InHouseTrainer

# -- 0. settings ---------------------------------------------------------------------------------

# the duel's settings are DuelSettings (agon.training.settings: the planner reads them too);
# its own choices (the schema's ``agon`` section, in its order)
REWARD_SCHEMES = choices("agon.reward.scheme")  # agon | zero_sum | independent | cooperative
READER_GROUPS = choices("agon.reader_group")  # draft | problem
ROLE_SCHEDULES = choices("agon.role_schedule")  # alternate | both


# -- 1. rollout ----------------------------------------------------------------------------------


@dataclass
class Rollout:
    """What one direction of a duel generated: the drafts and the reads of each draft."""

    problems: list[Problem]
    drafts: list[list[Completion]]  # [problem][g]
    reads: list[list[list[Completion]]]  # [problem][g][k]
    drafts_cut: int = 0  # drafts shortened to fit the reader's max_prompt_tokens


def rollout(
    task: Task,
    drafter: Policy,
    reader: Policy,
    problems: list[Problem],
    s: DuelSettings,
    step: int,
    salt: int,
    keys: Sequence[int] | None = None,
) -> Rollout:
    """G drafts per problem by ``drafter``, then K reads of each draft by ``reader``.

    ``keys`` (default ``0..P-1``) place each problem in the step's whole batch: problem ``k``'s
    drafts, and the reads of its draft ``g`` (key ``k * G + g``), are seeded from them alone.
    """
    P, G, K = len(problems), s.num_generations, s.num_reads
    keys = list(range(P)) if keys is None else list(keys)
    drafts = rl.solutions(task, drafter, problems, s, step, salt, keys)
    tok = getattr(drafter.engine, "tokenizer", None)
    fitted = [
        fit_reader_prompt(task, p, apply_draft_view(d.text, s.draft_view, tok), reader.engine)
        for p, row in zip(problems, drafts)
        for d in row
    ]
    read_keys = [k * G + g for k in keys for g in range(G)]
    read_base = rl.sampling_seed(s.seed, step, salt + 1)
    flat = rl.sample(reader.engine, [msgs for msgs, _ in fitted], K, s, read_base, read_keys)
    reads = [[flat[i * G + g] for g in range(G)] for i in range(P)]
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
    """Correctness of every draft ``(P, G)`` and every read ``(P, G, K)``."""
    P, G = len(ro.problems), len(ro.drafts[0]) if ro.drafts else 0
    c_draft = rl.grade(task, ro.problems, ro.drafts)
    per_draft = [p for p in ro.problems for _ in range(G)]
    c_read = rl.grade(task, per_draft, [reads for row in ro.reads for reads in row])
    return c_draft, c_read.reshape(P, G, c_read.shape[1])


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
    its K reads, a read's rival the draft it read. ``agon.reward.reader_robustness`` (mu > 0)
    adds ``mu * c_read * (1 - c_draft)`` to a read's reward: the reading in which the reader is
    paid for robustness to a wrong draft. It reweights the reader's gradient toward the prompts
    that hold wrong drafts; a factor constant inside a group cancels under ``scale_rewards:
    group``, so it acts under ``reader_group: problem`` or another scale (``docs/method.md``)."""
    K = c_read.shape[2]
    with warnings.catch_warnings():  # a draft whose reads were all ungraded: NaN rival, on purpose
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_read = np.nanmean(c_read, axis=2)
    r_draft = duel_rewards(c_draft, mean_read, s.reward_scheme, s.reward_lam, role="drafter")
    c_draft_per_read = np.repeat(c_draft[:, :, None], K, axis=2)
    r_read = duel_rewards(c_read, c_draft_per_read, s.reward_scheme, s.reward_lam, role="reader")
    if s.reward_reader_robustness:  # paid extra for being right where the draft was wrong
        r_read = r_read + s.reward_reader_robustness * c_read * (1.0 - c_draft_per_read)
    return r_draft, r_read


# -- 4. advantage --------------------------------------------------------------------------------


def role_advantages(
    r_draft: np.ndarray,
    r_read: np.ndarray,
    s: DuelSettings,
    keys_d: Sequence[Any] | None = None,
    keys_r: Sequence[Any] | None = None,
) -> tuple[Advantages, Advantages]:
    """Per-role advantages: a draft's group is its problem's G drafts; a read's group is the K
    reads of one draft (``reader_group: draft``) or all G*K reads of a problem (``problem``);
    each subtracts its group's mean, or the batch's or nothing (``agon.baseline``).
    ``keys_d``/``keys_r`` (each completion's token ids) mark the dead groups."""
    P, G, K = r_read.shape
    adv_d = group_advantages(
        r_draft.ravel(),
        problem_groups(P, G),
        s.scale_rewards,
        completions=keys_d,
        baseline=s.baseline,
    )
    read_groups = np.arange(P * G) if s.reader_group == "draft" else np.repeat(np.arange(P), G)
    adv_r = group_advantages(
        r_read.ravel(),
        np.repeat(read_groups, K),
        s.scale_rewards,
        completions=keys_r,
        baseline=s.baseline,
    )
    return adv_d, adv_r


# -- one step, top to bottom ---------------------------------------------------------------------


def directions(
    step: int, s: DuelSettings, names: Sequence[str], keys: Sequence[int], n_total: int
) -> list[tuple[int, str, str, list[int]]]:
    """(direction, drafter, reader, positions in ``keys``) for this step: ``alternate`` swaps
    roles each step, ``both`` runs A->B (direction 0) on the first half of the step's
    ``n_total`` problems and B->A (direction 1) on the second, each problem placed by its key,
    so a process holding a share of the batch plays each problem as one process would.
    Directions with no problem here are left out."""
    a, b = names
    if s.role_schedule == "alternate":
        everything = list(range(len(keys)))
        return [(0, a, b, everything)] if step % 2 == 0 else [(0, b, a, everything)]
    half = n_total // 2
    first = [i for i, k in enumerate(keys) if k < half]
    second = [i for i, k in enumerate(keys) if k >= half]
    return [d for d in [(0, a, b, first), (1, b, a, second)] if d[3]]


def duel_step(
    task: Task,
    policies: dict[str, Policy],
    problems: list[Problem],
    s: DuelSettings,
    step: int,
    keys: Sequence[int] | None = None,
    n_total: int | None = None,
) -> dict[str, float]:
    """One training step: rollout -> grade -> reward -> advantage -> update, for both
    policies; returns the step's metrics row (keys in :mod:`agon.training.metrics`).

    Under several processes each holds a share of the step's ``n_total`` problems, ``keys``
    giving their places in the whole batch (default: ``problems`` is the whole batch)."""
    t0 = time.perf_counter()
    row: dict[str, float] = {mk.STEP: step}
    own: dict[str, list[rl.Samples]] = {name: [] for name in policies}
    tokens, fingerprint = 0, []
    keys = list(range(len(problems))) if keys is None else list(keys)
    n_total = len(problems) if n_total is None else n_total
    trained = set(s.train_roles)
    for i, d, r, at in directions(step, s, list(policies), keys, n_total):
        mine, my_keys = [problems[j] for j in at], [keys[j] for j in at]
        ro = rollout(task, policies[d], policies[r], mine, s, step, salt=10 * i, keys=my_keys)  # 1
        c_draft, c_read = grade(task, ro)  # 2
        r_draft, r_read = role_rewards(c_draft, c_read, s)  # 3
        drafts = [c for per_problem in ro.drafts for c in per_problem]
        reads = [x for per_problem in ro.reads for per_draft in per_problem for x in per_draft]
        keys_d, keys_r = rl.token_keys(drafts), rl.token_keys(reads)
        adv_d, adv_r = role_advantages(r_draft, r_read, s, keys_d, keys_r)  # 4
        if "drafter" in trained:
            own[d].append(rl.samples_of("drafter", drafts, adv_d))
        if "reader" in trained:
            own[r].append(rl.samples_of("reader", reads, adv_r))
        row.update(logbook.role_metrics(d, "drafter", r_draft, c_draft, adv_d, drafts))
        row.update(logbook.role_metrics(r, "reader", r_read, c_read, adv_r, reads))
        row[mk.key(mk.DRAFTS_CUT, model=r)] = float(ro.drafts_cut)
        tokens += int(row[mk.key(mk.ROLE_TOKENS, model=d, role="drafter")])
        tokens += int(row[mk.key(mk.ROLE_TOKENS, model=r, role="reader")])
        c_draft_per_read = np.repeat(c_draft[:, :, None], c_read.shape[2], axis=2)
        outcomes = logbook.duel_outcomes(c_draft_per_read.ravel(), c_read.ravel())
        row.update({f"{d}->{r}/{k}": v for k, v in outcomes.items()})
        # the mechanism: how wrong drafts went wrong, and how often they mislead their reads
        row.update(logbook.reader_metrics(r, c_draft_per_read.ravel(), c_read.ravel()))
        if policies[r].habits is not None and task.name in audit.TASKS:  # a toy reader
            texts = [[c.text for c in per_problem] for per_problem in ro.drafts]
            read_texts = [[[x.text for x in per] for per in pp] for pp in ro.reads]
            seen, taken = audit.rollout_take_up(
                task.name, ro.problems, texts, read_texts, policies[r].habits
            )
            row.update(logbook.take_up_metrics(r, seen, taken))
        styles = rl.wrong_styles(task, ro.problems, ro.drafts, c_draft)
        row.update(logbook.style_metrics(d, styles, r_draft[c_draft == 0]))
        fingerprint.extend([*drafts, *reads])
    logbook.pool_duel_outcomes(row)
    row[mk.ROLLOUT_SHA] = logbook.rollout_sha(fingerprint)
    updating = {name: policies[name] for name in training_models(step, s, list(policies), n_total)}
    return rl.finish_step(row, updating, own, s, t0, tokens)  # 5


def training_models(step: int, s: DuelSettings, names: list[str], n_total: int) -> list[str]:
    """The models that hold a trained role (``agon.train_roles``) in some direction of the
    step's whole batch: the ones that take an optimizer step (the same on every process)."""
    every = list(range(n_total))
    held = [
        name
        for _, d, r, _ in directions(step, s, names, every, n_total)
        for name, role in ((d, "drafter"), (r, "reader"))
        if role in s.train_roles
    ]
    return [name for name in names if name in held]


# -- the trainers: the duel's settings and step, run by the one shell (agon.training.shell) -----

PROGRESS = (
    mk.ROLE_CORRECT.replace("{role}", "drafter"),
    mk.ROLE_CORRECT.replace("{role}", "reader"),
    mk.POOLED_OUTCOME.format(outcome="reader_wins"),
    mk.TOKENS,
    mk.HARD_PASS1,
)
TRAINER = InHouseTrainer("agon", DuelSettings, duel_step, progress=PROGRESS)
# The contest's control: the same duel (the same rollouts, cascade data and updates), but each
# model is rewarded for its own correctness only; `agon` minus this column is what the rival
# term adds (table 1's agon_minus_agon_independent).
INDEPENDENT = InHouseTrainer(
    "agon_independent",
    DuelSettings,
    duel_step,
    settings_overrides=(("reward_scheme", "independent"),),
    progress=PROGRESS,
)
