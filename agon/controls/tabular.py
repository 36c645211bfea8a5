"""A tabular duel: the contest as an adversarial curriculum, with no language model.

What is simulated. Two policies of two logits each. Model A always drafts: each draft is
right with a fixed probability (its skill, not learnable); a wrong draft is written in one of
two styles the drafter chooses, *subtle* (plausible: a reader that copies it is misled) or
*obvious* (a reader notices the mistake and solves the problem itself). Model B always reads:
for each draft it chooses to *copy* (take the draft's answer, unless the draft is obviously
wrong) or to *verify* (solve the problem itself, right with a fixed probability). The
drafter's learnable choice is P(subtle), the reader's P(verify).

Every step runs the duel's own pipeline on sampled actions: P problems x G drafts x K reads,
the correctness arrays ``c_draft (P, G)`` and ``c_read (P, G, K)``, then
:func:`agon.duel.role_rewards`, :func:`agon.duel.role_advantages` and
:func:`agon.loss.policy_loss` with the :class:`~agon.duel.DuelSettings` knobs
that shape them, and an AdamW step of each policy on its own completions.

What the algebra predicts (``docs/method.md``, "What the rival term does, per role"): the
reader's rival term is its prompt and has no expected gradient, so under ``agon`` and
``zero_sum`` the drafter is paid for wrong drafts that mislead its reader and the subtle
share rises; once drafts are mostly subtle, verifying pays for the reader's own correctness,
so the verify rate rises. Under the default ``reader_group: draft`` the reader's advantages are
the ``independent`` ones (the rival term is constant in its group and cancels): the reader
learns to verify only because the drafter's drafts changed, a curriculum. Under
``independent`` the style earns nothing and copying pays at the start, so neither rises;
under ``cooperative`` the drafter is paid for its reader's correctness and the subtle share
falls. :func:`run_control` measures this per scheme and seed;
``tests/test_tabular_control.py`` asserts the directions.

Where it departs from a language-model duel:

- a completion is one "token" (the chosen action), its log-probability the action's log-softmax
  with a mask of ones; there is no prompt, so a policy cannot condition on the problem or, for
  the reader, on the draft it reads (a subtle wrong draft and a right one look alike to it, as
  they should; an obvious one it notices in the environment, not by a learned choice);
- problems are exchangeable: a problem is only the group id of its G drafts;
- roles are fixed (A always drafts, B always reads), where the duel alternates or runs both
  directions: the contest's effect on each role is what is measured, and each model playing
  both roles would only mix the two measures;
- the drafter's accuracy and both solve rates are fixed, so only the incentives the rewards
  create can move the policies; one gradient step per rollout (the ratio is 1, nothing is
  clipped), no KL to a reference;
- the accuracies reported are exact expectations under the final policies, not samples.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch

# the code under control, imported in one place: if it moves, change these lines only
from agon.duel import REWARD_SCHEMES, DuelSettings, role_advantages, role_rewards
from agon.loss import policy_loss

SUBTLE, OBVIOUS = 1, 0  # the drafter's actions (index into its logits)
VERIFY, COPY = 1, 0  # the reader's actions
MEASURES = (
    "subtle_start",
    "subtle_end",
    "verify_start",
    "verify_end",
    "cascade",
    "adversarial",
)


@dataclass(frozen=True)
class TabularDuel:
    """The environment, the policies' start and the training knobs of one tabular duel.

    The skills are chosen so that the reader's best answer depends on the drafter:
    copying pays while few wrong drafts are subtle, verifying once most are
    (:attr:`verify_pays_above` is the subtle share at which they are equal, 0.43 here). That
    needs ``reader_skill > drafter_skill``: a reader that solves less often than the draft
    is right should always copy, and there would be no curriculum to find. The defaults
    start below the threshold (copying pays at first), with room on both sides.
    """

    drafter_skill: float = 0.5  # P(a draft is right): fixed, the drafter learns only the style
    reader_skill: float = 0.7  # P(the reader is right when it solves the problem itself)
    subtle_start: float = 0.2  # the drafter's initial P(subtle)
    verify_start: float = 0.2  # the reader's initial P(verify)
    problems: int = 4  # P problems per step
    drafts: int = 8  # G drafts per problem (the drafter's group)
    reads: int = 4  # K reads per draft (the reader's group under reader_group "draft")
    steps: int = 150  # optimizer steps of each policy
    # AdamW's step on a logit: large next to a language model's, as a logit here is a whole
    # policy; 150 steps of it move a probability from 0.2 to beyond 0.9 when the signal is clear
    learning_rate: float = 0.05
    # the agon scheme's lambda, the reader's groups (draft: it feels no rival term), the
    # advantage's scale and the loss are the duel's own defaults (DuelSettings, from the schema)

    def __post_init__(self) -> None:
        for name in ("drafter_skill", "reader_skill", "subtle_start", "verify_start"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")

    @property
    def verify_pays_above(self) -> float:
        """The subtle share above which verifying beats copying for the reader's correctness
        (copying is right on right drafts and on noticed obvious ones; 1.0 = never)."""
        s_d, s_r = self.drafter_skill, self.reader_skill
        return min(1.0, max(0.0, 1.0 - (s_r - s_d) / ((1.0 - s_d) * s_r)))

    def settings(self, scheme: str, seed: int) -> DuelSettings:
        """The duel settings this control runs the project's functions with."""
        return DuelSettings(
            steps=self.steps,
            problems_per_step=self.problems,
            num_generations=self.drafts,
            num_reads=self.reads,
            learning_rate=self.learning_rate,
            reward_scheme=scheme,
            max_new_tokens=1,  # a completion is one action
            seed=seed,
        )


def reader_accuracy(env: TabularDuel, subtle: float, verify: float) -> float:
    """The exact probability that a read is right, for a drafter with subtle share ``subtle``
    and a reader with verify rate ``verify``: the cascade's accuracy."""
    s_d, s_r = env.drafter_skill, env.reader_skill
    copy_right = s_d + (1.0 - s_d) * (1.0 - subtle) * s_r  # right drafts, noticed obvious ones
    return verify * s_r + (1.0 - verify) * copy_right


@dataclass
class Batch:
    """One step's sampled actions and the environment's verdicts on them."""

    style: torch.Tensor  # (P, G) the drafter's actions
    action: torch.Tensor  # (P, G, K) the reader's actions
    c_draft: np.ndarray  # (P, G) correctness of each draft
    c_read: np.ndarray  # (P, G, K) correctness of each read


def play(
    env: TabularDuel,
    drafter: torch.Tensor,
    reader: torch.Tensor,
    gen: torch.Generator,
    rng: np.random.Generator,
) -> Batch:
    """Sample P x G drafts and P x G x K reads from the current policies and grade them.

    The policies' choices come from ``gen`` (what the models sample), the world's from ``rng``
    (which drafts are right, which of the reader's own attempts are), so one seed fixes both.
    """
    P, G, K = env.problems, env.drafts, env.reads
    with torch.no_grad():
        p_draft, p_read = torch.softmax(drafter, -1), torch.softmax(reader, -1)
    style = torch.multinomial(p_draft, P * G, replacement=True, generator=gen).reshape(P, G)
    action = torch.multinomial(p_read, P * G * K, replacement=True, generator=gen)
    action = action.reshape(P, G, K)
    right = rng.random((P, G)) < env.drafter_skill
    solved = rng.random((P, G, K)) < env.reader_skill  # the reader's own attempt, when it makes one
    subtle = style.numpy() == SUBTLE
    # the reader solves itself when it verifies, or when it copies an obviously wrong draft
    solves_itself = (action.numpy() == VERIFY) | (~right & ~subtle)[:, :, None]
    # otherwise it takes the draft's answer: right if the draft is, misled if subtly wrong
    c_read = np.where(solves_itself, solved, right[:, :, None])
    return Batch(style, action, right.astype(np.float64), c_read.astype(np.float64))


def update_policy(
    logits: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    actions: torch.Tensor,
    advantages: np.ndarray,
    s: DuelSettings,
) -> None:
    """One optimizer step of a policy on its own completions, through the project's loss.

    Each completion is one token, its chosen action: log-probs (B, 1), a mask of ones.
    """
    logps = torch.log_softmax(logits, -1)[actions.reshape(-1)].unsqueeze(1)
    out = policy_loss(
        logps,
        torch.as_tensor(advantages, dtype=logps.dtype),
        torch.ones_like(logps),
        s.loss_type,
        epsilon_low=s.epsilon,
        epsilon_high=s.eps_high,
        max_completion_length=s.max_new_tokens,
    )
    optimizer.zero_grad(set_to_none=True)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_([logits], s.max_grad_norm)  # as the trainer clips
    optimizer.step()


def policy(p: float) -> torch.Tensor:
    """Two logits whose second action has probability ``p``."""
    return torch.tensor([0.0, math.log(p / (1.0 - p))], requires_grad=True)


def p_second(logits: torch.Tensor) -> float:
    """The probability of a policy's second action (subtle, verify)."""
    return float(torch.softmax(logits.detach(), -1)[1])


def optimizer_for(logits: torch.Tensor, s: DuelSettings) -> torch.optim.Optimizer:
    """AdamW with the trainer's betas and weight decay: each policy its own."""
    return torch.optim.AdamW(
        [logits], lr=s.learning_rate, betas=s.adam_betas, weight_decay=s.weight_decay
    )


@dataclass
class Row:
    """One scheme and seed: the policies at the start and end, and the accuracies they give."""

    scheme: str
    seed: int
    subtle_start: float  # the drafter's P(subtle) before training
    subtle_end: float  # ... and after
    verify_start: float  # the reader's P(verify) before training
    verify_end: float  # ... and after
    cascade: float  # the pair's own cascade: the trained reader after the trained drafter
    adversarial: float  # the trained reader after a fixed drafter that is always subtle


def train(env: TabularDuel, scheme: str, seed: int) -> Row:
    """Train the pair ``env.steps`` steps under ``scheme``; deterministic for a seed."""
    s = env.settings(scheme, seed)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    drafter, reader = policy(env.subtle_start), policy(env.verify_start)
    opt_d, opt_r = optimizer_for(drafter, s), optimizer_for(reader, s)
    start = p_second(drafter), p_second(reader)
    for _ in range(s.steps):
        b = play(env, drafter, reader, gen, rng)
        r_draft, r_read = role_rewards(b.c_draft, b.c_read, s)
        adv_d, adv_r = role_advantages(r_draft, r_read, s)
        # both from the same rollout, as the duel's step does: roll out, then update each
        update_policy(drafter, opt_d, b.style, adv_d.values, s)
        update_policy(reader, opt_r, b.action, adv_r.values, s)
    subtle, verify = p_second(drafter), p_second(reader)
    return Row(
        scheme=scheme,
        seed=seed,
        subtle_start=start[0],
        subtle_end=subtle,
        verify_start=start[1],
        verify_end=verify,
        cascade=reader_accuracy(env, subtle, verify),
        adversarial=reader_accuracy(env, 1.0, verify),
    )


def run_control(
    schemes: Iterable[str] = REWARD_SCHEMES,
    seeds: Iterable[int] = range(8),
    env: TabularDuel | None = None,
) -> list[Row]:
    """One :class:`Row` per scheme and seed (the same seeds for every scheme: paired runs)."""
    env = TabularDuel() if env is None else env
    seeds = list(seeds)
    return [train(env, scheme, seed) for scheme in schemes for seed in seeds]


def summarize(rows: Sequence[Row]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Per scheme, per measure: (mean, min, max) over seeds."""
    out: dict[str, dict[str, tuple[float, float, float]]] = {}
    for scheme in dict.fromkeys(r.scheme for r in rows):
        mine = [asdict(r) for r in rows if r.scheme == scheme]
        out[scheme] = {
            m: (
                float(np.mean([x[m] for x in mine])),
                min(x[m] for x in mine),
                max(x[m] for x in mine),
            )
            for m in MEASURES
        }
    return out


def format_table(rows: Sequence[Row]) -> str:
    """The summary as a text table: mean [min, max] over seeds, one line per scheme."""
    width = 20
    head = f"{'scheme':<12}" + "".join(f"{m:>{width}}" for m in MEASURES)
    lines = [head]
    for scheme, stats in summarize(rows).items():
        cells = "".join(
            f"{f'{mean:.2f} [{lo:.2f},{hi:.2f}]':>{width}}" for mean, lo, hi in stats.values()
        )
        lines.append(f"{scheme:<12}{cells}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m agon.controls.tabular``: run every scheme over some seeds, print the table."""
    defaults = TabularDuel()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8, help="seeds 0..N-1 (default 8)")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--steps", type=int, default=defaults.steps)
    ap.add_argument("--schemes", nargs="+", default=list(REWARD_SCHEMES), choices=REWARD_SCHEMES)
    args = ap.parse_args(argv)
    env = TabularDuel(**{**asdict(defaults), "steps": args.steps})
    rows = run_control(args.schemes, range(args.first_seed, args.first_seed + args.seeds), env)
    params = ", ".join(f"{f.name}={getattr(env, f.name)}" for f in fields(env))
    print(f"tabular duel: {params}")
    print(f"verifying pays for the reader above a subtle share of {env.verify_pays_above:.2f}")
    untrained = reader_accuracy(env, env.subtle_start, env.verify_start)
    print(f"the untrained pair's cascade: {untrained:.2f}")
    print(f"mean [min, max] over {args.seeds} seeds")
    print(format_table(rows))


if __name__ == "__main__":
    main()
