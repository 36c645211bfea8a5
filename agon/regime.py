"""Whether table 1's world sits in the paper's regime: the criteria on its baselines and the
ceilings of its ratios, as data and functions over measured pass@1.

The paper's claims are ratios on hard problems: Agon's cascade doubles GRPO's pass@1, with
about eight times the gain of an untrained Mixture-of-Agents pass over the same base. A world
can show them only where its baselines leave room: base models that solve few hard problems,
GRPO that moves them a little, untrained multi-model inference that adds almost nothing. The
criteria (:data:`SPECS`; thresholds: the config's ``regime`` section,
:func:`agon.config.regime_section`), each on pass@1 as a fraction:

- ``base_A``, ``base_B``: each base model in ``base_range`` (5% to 25%);
- ``base_gap``: the two base models within ``max_base_gap`` of each other (10 points);
- ``grpo_A_gain``, ``grpo_B_gain``: GRPO at least ``grpo_min_gain`` above its own base (8
  points), and ``grpo_A``, ``grpo_B``: at most ``grpo_max`` (45%, so 2.2 is representable);
- ``moa_gain``, ``base_cascade_gain``: MoA's and the untrained cascade's gain over the better
  base at most ``(1 - base) / untrained_gain_divisor`` (so a gain eight times larger fits);
- on shares counted in the evaluations' samples (:data:`SHARES`, :mod:`agon.toy.audit`; toy
  tasks): ``reading_possible``, the untrained reader takes a right draft step on one of its own
  always-wrong habits within ``take_up_range`` (10% to 60%: the action the duel would reinforce
  is sampled, and still left to learn); ``luck_rare``, at most ``max_luck_share`` (10%) of the
  base models' right answers hold a wrong step.

A criterion is met or not on its point estimate; its interval is reported beside it. Three
readers: ``results/regime.csv`` (the baselines alone on ``regime.split``, before any ``agon``
run of a new world: :mod:`agon.report.regime`), table 1's regime section (its own split, with
the ceilings and the difference form) and the toy gates (greedy, on the gate split:
:mod:`agon.toy.gates`).

A ratio's ceiling (:func:`ceilings`) is the largest value this world allows it (``agon /
grpo``: 1 / grpo; over several models, :data:`RATIOS`, 1 / the larger); where it is below the
paper's claim (``regime.claims``) the claim cannot be shown in this world, whatever Agon does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agon.config import regime_section
from agon.stats import NOT_MEANINGFUL, percentile_interval, wilson_interval
from agon.toy.sft_data import reader_targets
from agon.training.settings import DuelSettings

# the systems the criteria read, as table 1 names its columns; the trained one's method is GRPO
REGIME_SYSTEMS = ("base", "base_b", "base_cascade", "moa", "grpo", "grpo_b")
BASES = ("base", "base_b")

# system -> pass@1: a float (point estimate) or an array (bootstrap replicates, one draw shared
# by every system), so one expression gives a quantity's value and its replicates
Values = Mapping[str, Any]


@dataclass(frozen=True)
class Spec:
    """One criterion: the systems it reads, its quantity, and its bounds (from the point
    estimates ``p``, the better base's column ``best`` and the ``regime`` section)."""

    name: str
    what: str
    systems: tuple[str, ...]
    quantity: Callable[[Values, str], Any]
    bounds: Callable[[Mapping[str, float], str, Mapping], tuple[float | None, float | None]]
    single: str | None = None  # a system's own pass@1: its interval is the system's own


def _untrained_gain(system: str, what: str) -> Spec:
    return Spec(
        f"{system}_gain",
        f"{what}'s gain over the better base at most (100 - base) / divisor points",
        (system, *BASES),
        lambda x, best: x[system] - x[best],
        lambda p, best, r: (None, (1 - p[best]) / r["untrained_gain_divisor"]),
    )


SPECS: tuple[Spec, ...] = (
    *(
        Spec(
            f"base_{m}",
            f"base model {m} in the base range",
            (s,),
            lambda x, _b, s=s: x[s],
            lambda p, b, r: tuple(r["base_range"]),
            single=s,
        )
        for m, s in (("A", "base"), ("B", "base_b"))
    ),
    Spec(
        "base_gap",
        "the two base models within max_base_gap of each other",
        BASES,
        lambda x, _b: abs(x["base"] - x["base_b"]),
        lambda p, b, r: (None, r["max_base_gap"]),
    ),
    *(
        spec
        for m, g, s in (("A", "grpo", "base"), ("B", "grpo_b", "base_b"))
        for spec in (
            Spec(
                f"grpo_{m}_gain",
                f"GRPO-{m} at least grpo_min_gain above base model {m}",
                (g, s),
                lambda x, _b, g=g, s=s: x[g] - x[s],
                lambda p, b, r: (r["grpo_min_gain"], None),
            ),
            Spec(
                f"grpo_{m}",
                f"GRPO-{m} at most grpo_max",
                (g,),
                lambda x, _b, g=g: x[g],
                lambda p, b, r: (None, r["grpo_max"]),
                single=g,
            ),
        )
    ),
    _untrained_gain("moa", "MoA"),
    _untrained_gain("base_cascade", "the untrained cascade"),
)


@dataclass(frozen=True)
class Criterion:
    """A criterion as measured: its value with interval, its bounds, met on the value."""

    name: str
    what: str
    value: float
    lo: float | None
    hi: float | None
    min: float | None
    max: float | None

    @property
    def met(self) -> bool:
        return (self.min is None or self.value >= self.min) and (
            self.max is None or self.value <= self.max
        )


def better_base(p: Mapping[str, float]) -> str:
    """The base column with the higher pass@1 (model A's on a tie)."""
    present = [b for b in BASES if b in p]
    return max(present, key=lambda b: (p[b], b == "base"))


def criteria(
    p: Mapping[str, float],
    regime: Mapping,
    joint: Mapping[str, Any] | None = None,
    intervals: Mapping[str, tuple[float, float]] | None = None,
) -> list[Criterion]:
    """Every criterion whose systems ``p`` (pass@1 point estimates) has. Intervals: a single
    system's own (``intervals``: as its column shows it), a difference's from ``joint`` (each
    system's bootstrap replicates, one paired draw); none where those are missing."""
    out = []
    for spec in SPECS:
        if not set(spec.systems) <= set(p):
            continue
        best = better_base(p)
        lo = hi = None
        if spec.single and intervals and intervals.get(spec.single):
            lo, hi = intervals[spec.single]
        elif not spec.single and joint is not None and set(spec.systems) <= set(joint):
            lo, hi = percentile_interval(spec.quantity(joint, best))
        b_min, b_max = spec.bounds(p, best, regime)
        out.append(
            Criterion(spec.name, spec.what, float(spec.quantity(p, best)), lo, hi, b_min, b_max)
        )
    return out


# ----------------------------------------------------------------------------- the audit's shares


@dataclass(frozen=True)
class Share:
    """A criterion on a share counted in evaluations' samples (:mod:`agon.toy.audit`): ``part``
    of ``whole`` (audit keys), pooled over ``systems`` and their seeds; bounds from the
    ``regime`` section."""

    name: str
    what: str
    systems: tuple[str, ...]
    part: str
    whole: str
    bounds: Callable[[Mapping], tuple[float | None, float | None]]


SHARES: tuple[Share, ...] = (
    Share(
        "reading_possible",
        "on steps where a right draft shows one of the reader's always-wrong habits done right, "
        "the untrained reader writes it right (it took the step) within take_up_range",
        ("base_cascade",),
        "habit_steps_taken",
        "habit_steps",
        lambda r: tuple(r["take_up_range"]),
    ),
    Share(
        "luck_rare",
        "the base models' right answers with a wrong step (right by chance) at most max_luck_share",
        BASES,
        "right_with_wrong_work",
        "right",
        lambda r: (None, r["max_luck_share"]),
    ),
)


def share_criteria(counts: Mapping[str, Mapping[str, int]], regime: Mapping) -> list[Criterion]:
    """Every :data:`SHARES` criterion whose systems ``counts`` (system -> its audit counts,
    summed over seeds) has; interval: Wilson's, counting each step (answer) as a draw. A share
    of nothing (no such step seen) is not a number, and not met."""
    out = []
    for spec in SHARES:
        if not all(s in counts for s in spec.systems):
            continue
        part = sum(int(counts[s][spec.part]) for s in spec.systems)
        whole = sum(int(counts[s][spec.whole]) for s in spec.systems)
        lo, hi = wilson_interval(part, whole) if whole else (None, None)
        value = part / whole if whole else math.nan
        out.append(Criterion(spec.name, spec.what, value, lo, hi, *spec.bounds(regime)))
    return out


# ----------------------------------------------------------------------------- ceilings

DIFFERENCE = "agon_gain_minus_k_moa_gain"  # (agon - base) - k (moa - base), k the gain claim


@dataclass(frozen=True)
class Ratio:
    """One of table 1's ratios of Agon's cascade over a baseline: its columns' prefix ``key``,
    the columns ``over`` it divides by (several: the larger pass@1 of them, on the point
    estimate and on each bootstrap replicate) and the ``regime.claims`` entry it is read
    against."""

    key: str
    over: tuple[str, ...]
    claim: str

    @property
    def denominator(self) -> str:
        """How the tables name what it divides by: ``grpo``, ``max(grpo, grpo_b)``."""
        return self.over[0] if len(self.over) == 1 else f"max({', '.join(self.over)})"

    @property
    def title(self) -> str:
        """How the tables name the ratio: ``agon / grpo``."""
        return f"agon / {self.denominator}"


# In table order. agon / grpo is the paper's literal claim (the cascade over one model, GRPO's
# A); the cascade's answer is its reader's, B, so agon / grpo_b reads it against B's own GRPO
# model, and agon / max(grpo, grpo_b) against the stronger of the two (the conservative one);
# agon / grpo_cascade is the control (two models both ways, trained apart). The paper claims a
# doubling over GRPO without naming a model: each GRPO denominator is read against that claim.
RATIOS: tuple[Ratio, ...] = (
    Ratio("agon_over_grpo", ("grpo",), "agon_over_grpo"),
    Ratio("agon_over_grpo_b", ("grpo_b",), "agon_over_grpo"),
    Ratio("agon_over_max_grpo", ("grpo", "grpo_b"), "agon_over_grpo"),
    Ratio("agon_over_grpo_cascade", ("grpo_cascade",), "agon_over_grpo_cascade"),
)


@dataclass(frozen=True)
class Ceiling:
    """The largest value this world allows a comparison of table 1, against the paper's
    claim; ``ceiling`` None: not defined (``note`` says why)."""

    key: str
    ceiling: float | None
    claim: float
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.ceiling is None:
            return self.note
        if self.ceiling < self.claim:
            return "cannot be shown in this world"
        return "representable"


def claim_reading(lo: float | None, hi: float | None, claim: float) -> str:
    """What a comparison's 95% interval ``[lo, hi]`` says of the paper's claim (a ratio of at
    least ``claim``, or a difference of at least it): ``shown`` (the interval at or above it),
    ``excluded`` (below it), ``neither`` (it holds the claim); empty without an interval."""
    if lo is None or hi is None:
        return ""
    if lo >= claim:
        return "shown: the 95% interval is at or above the claim"
    if hi < claim:
        return "excluded: the 95% interval is below the claim"
    return "neither shown nor excluded: the 95% interval holds the claim"


def ceilings(p: Mapping[str, float], regime: Mapping) -> list[Ceiling]:
    """The ceilings of table 1's comparisons whose denominators ``p`` has: each of
    :data:`RATIOS` (1 / its denominator's pass@1: ``agon / grpo``, 1 / grpo; over several
    models, 1 / the larger), ``(agon - base) / (moa - base)`` ((1 - base) / (moa - base), not
    defined when MoA's gain is not positive) and its difference form against 0 ((1 - base) -
    k (moa - base), k the claimed gain ratio; not meaningful when MoA's gain is not
    positive: :func:`moa_gain_no_bar`)."""
    claims = regime["claims"]
    out = []
    for ratio in RATIOS:
        if set(ratio.over) <= set(p):
            den = max(p[s] for s in ratio.over)
            top = 1 / den if den > 0 else math.inf
            out.append(Ceiling(ratio.key, top, claims[ratio.claim]))
    if {"moa", "base"} <= set(p):
        k = claims["agon_gain_over_moa_gain"]
        gain, room = p["moa"] - p["base"], 1 - p["base"]
        key = "agon_gain_over_moa_gain"
        if gain > 0:
            out.append(Ceiling(key, room / gain, k))
        else:
            note = f"not defined: MoA's gain over base is {100 * gain:+.1f} points"
            out.append(Ceiling(key, None, k, note))
        if gain > 0:
            out.append(Ceiling(DIFFERENCE, room - k * gain, 0.0))
        else:
            out.append(Ceiling(DIFFERENCE, None, 0.0, moa_gain_no_bar(gain, k)))
    return out


def moa_gain_no_bar(gain: float, k: float) -> str:
    """Why ``(agon - base) - k (moa - base)`` says nothing when MoA's gain is not positive:
    ``k`` times a gain of 0 or less is no bar, and any Agon at or above base would read
    "shown"."""
    return (
        f"{NOT_MEANINGFUL}: MoA's gain over base is {100 * gain:+.1f} points, and {k:g} times "
        "that is no bar"
    )


# ----------------------------------------------------------------------------- the regime's runs


def planned_grpo_steps(config: dict) -> int:
    """The regime's GRPO steps (``regime.grpo_steps``, or planned): the most completions either
    model generates in the duel the config describes (its drafts and its reads of the rival's),
    in GRPO steps of ``problems_per_step x num_generations`` completions, capped at
    ``train.budget.max_steps_factor x train.steps``. Table 1's GRPO is matched to the agon run
    it waits for (``train.budget``); the regime's runs before any agon run, so it takes the
    budget the config plans (``agon.plan.workload`` prices the same duel)."""
    fixed = regime_section(config)["grpo_steps"]
    if fixed is not None:
        return int(fixed)
    s = DuelSettings.from_config(config)
    steps, reads = int(s.steps), int(s.num_reads)
    if s.role_schedule == "both":  # each model drafts half the problems every step
        per_model = [steps / 2 * (1 + reads)] * 2
    else:  # alternate: A drafts on even steps and reads B's drafts on odd ones
        first, second = math.ceil(steps / 2), steps // 2
        per_model = [first + second * reads, second + first * reads]
    return min(math.ceil(max(per_model)), s.max_steps)  # max_steps: the budget's cap


def regime_changes(config: dict, stage: str) -> dict:
    """What the regime's jobs change of table 1's snapshot of ``stage``: GRPO's steps, fixed up
    front (``train``); the split evaluated (``eval``)."""
    if stage == "train":
        return {"train": {"steps": planned_grpo_steps(config), "budget": {"match": "steps"}}}
    if stage == "eval":
        return {"eval": {"split": regime_section(config)["split"]}}
    raise ValueError(f"regime: no stage {stage!r}; stages: train, eval")


def readers_note(config: dict) -> str | None:
    """How the trained cascades' readers came to read, from ``toy.reader.targets``; None
    without a toy family (base models pretrained elsewhere)."""
    if not any(f.get("toy") for f in config["families"]) or "toy" not in config:
        return None
    reader = config["toy"].get("reader") or {}
    if reader_targets(reader) == "follow":
        return (
            f"toy.reader.targets is follow ({reader.get('follow', 0.0):g}): each base model, "
            "reading a draft, takes each step the draft shows aligned with its own as it stands "
            "with that probability, right or wrong, and otherwise does the step itself; so "
            "grpo_cascade reads with readers that anchor but were never taught which steps to "
            "take, and taking a right step is an action the duel can reinforce "
            "(reading_possible measures it)."
        )
    if reader_targets(reader) == "own":
        return (
            "toy.reader.targets is own: no base model was shown a target that depends on a "
            "draft, so grpo_cascade reads with untrained readers by construction, and reading "
            "is what the duel teaches."
        )
    return (
        "toy.reader.targets is draft: the base models were taught to read in pretraining (a "
        "read target keeps a draft's correct steps), so grpo_cascade reads with readers "
        "already taught to read, and the untrained cascade and MoA gain from reading before "
        "any RL."
    )
