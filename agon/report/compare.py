"""The comparisons every table of the report makes: a system's pass@1 over training seeds and
problems, and paired ratios and differences with two-level bootstrap intervals.

A system's pass@1 is recounted from each evaluation's ``samples.jsonl`` (one line per sample
with its problem id and verdict): per (seed, problem) the share of correct samples, then the
mean over seeds and problems. An unscorable sample (``correct: null``: timeout, sandbox error)
counts as a failure, as in the paper's pass@1. Intervals come from
:func:`agon.stats.two_level_bootstrap`: each replicate draws problems with replacement (the
same draw for every system of a comparison) and, per system, that system's seeds with
replacement; the standard error is the replicates' standard deviation. If a ``samples.jsonl``
does not carry problem ids and verdicts, the system falls back to its ``summary.json`` numbers
(mean over seeds, its interval the mean of the seeds' intervals over problems: no seed
variance), the row says so (``{system}_source = summary``) and the comparisons involving it
have no interval. Where a number is not meaningful (a ratio not defined, an interval unbounded,
an effect whose interval holds no effect), its ``{key}_note`` column says why. Every comparison
carries its minimal detectable effect (``{key}_mde``: the true effect it would detect with 80%
power at the 5% level, 2.8 bootstrap standard errors), so a "no effect shown" says what it
could have shown; systems evaluated at the same training seeds are paired seed by seed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agon.config import seeded_bases
from agon.methods import eval_seeds
from agon.report.audit_columns import audit_columns, draft_columns
from agon.results import problem_counts
from agon.stats import (
    NOT_MEANINGFUL,
    minimal_detectable_effect,
    percentile_interval,
    two_level_bootstrap,
)
from agon.toy.audit import TASKS as AUDITED_TASKS

# fixed bootstrap seeds, one per comparison, so every interval is reproducible on its own; a
# new comparison takes a new number at the end, so that no existing interval's draw changes
RNG = {
    "pass@1": 0,
    "agon_over_grpo": 1,
    "moa": 2,
    "gain": 3,
    "agon_over_grpo_cascade": 4,
    "agon_minus_agon_independent": 5,
    "ablation": 6,
    "related": 7,
    "control": 8,
    "regime": 9,
    "eight_times": 10,
    "agon_over_grpo_b": 11,
    "agon_over_max_grpo": 12,
    "cascade_minus_reader": 13,
}

# ----------------------------------------------------------------------------- per-seed rates


@dataclass(frozen=True)
class SeedRates:
    """One system's pass@1 on each problem at each of its seeds: ``{seed: {problem: rate}}``."""

    per_seed: Mapping[int, Mapping[str, float]]

    @property
    def seeds(self) -> list[int]:
        return list(self.per_seed)

    def ids(self) -> set[str]:
        """The problems every seed was evaluated on."""
        return set.intersection(*(set(v) for v in self.per_seed.values()))

    def matrix(self, ids: Sequence[str]) -> np.ndarray:
        """(seeds, problems) array of the rates of ``ids``, seeds in :attr:`seeds` order."""
        return np.array([[self.per_seed[s][i] for i in ids] for s in self.seeds], dtype=float)


def read_seed_rates(samples: Mapping[int, str | Path]) -> SeedRates | None:
    """Per seed and problem the share of correct samples of each ``samples.jsonl``; None if a
    file is missing or lacks problem ids or verdicts."""
    per_seed = {}
    for seed, path in samples.items():
        counts = problem_counts([path]) if Path(path).is_file() else None
        if counts is None:
            return None
        per_seed[seed] = {pid: c / n for pid, (n, c) in counts.items()}
    return SeedRates(per_seed)


def _sd(replicates: np.ndarray) -> float:
    return float(np.std(replicates, ddof=1)) if replicates.size > 1 else 0.0


def system_stats(
    label: str,
    samples: Mapping[int, str | Path],
    summaries: Mapping[int, str | Path],
    n_boot: int,
) -> tuple[dict[str, Any], SeedRates | None]:
    """pass@1 of one system over its seeds (mean, se, 95% interval over seeds and problems,
    per seed value under ``per_seed``), and its per-(seed, problem) rates for comparisons.

    ``samples`` and ``summaries``: the system's ``samples.jsonl`` and ``summary.json`` per
    seed; ``label`` names the system in errors."""
    rates = read_seed_rates(samples)
    if rates is not None:
        return rate_stats(label, rates, n_boot), rates
    loaded = {s: json.loads(Path(p).read_text()) for s, p in summaries.items()}
    keys = ("pass@1", "pass@1_se", "pass@1_lo", "pass@1_hi")
    missing = [k for k in keys if any(k not in s for s in loaded.values())]
    if missing:
        raise ValueError(
            f"{label}: summary.json lacks {missing} and samples.jsonl has no problem ids/verdicts"
        )
    stats = {k: sum(s[k] for s in loaded.values()) / len(loaded) for k in keys}
    stats["n_problems"] = next(iter(loaded.values())).get("n_problems")
    stats["source"] = "summary"
    stats["per_seed"] = {s: float(v["pass@1"]) for s, v in loaded.items()}
    return stats, None


def rate_stats(label: str, rates: SeedRates, n_boot: int) -> dict[str, Any]:
    """pass@1 of one system from its per-(seed, problem) ``rates`` over the problems every seed
    has: mean, se, 95% interval (its own bootstrap), problems, per seed value."""
    ids = sorted(rates.ids())
    if not ids:
        raise ValueError(f"{label}: its seeds {rates.seeds} share no evaluated problem")
    x = rates.matrix(ids)
    reps = two_level_bootstrap([x], n_boot=n_boot, seed=RNG["pass@1"])[0]
    lo, hi = percentile_interval(reps)
    stats = {"pass@1": float(x.mean()), "pass@1_se": _sd(reps), "pass@1_lo": lo}
    stats |= {"pass@1_hi": hi, "n_problems": len(ids), "source": "samples"}
    stats["per_seed"] = {s: float(row.mean()) for s, row in zip(rates.seeds, x)}
    return stats


def systems_columns(
    label: str,
    systems: Sequence[str],
    seeds: Sequence[int],
    seeded: bool,
    samples: Callable[[str, int], str],
    summary: Callable[[str, int], str],
    n_boot: int,
    row: dict[str, Any],
    task: str | None = None,
) -> tuple[dict[str, float], dict[str, SeedRates | None]]:
    """Each system's pass@1 over the seeds it is evaluated at (:func:`system_stats`;
    :func:`agon.methods.eval_seeds`), from its files ``samples(system, seed)`` and
    ``summary(system, seed)``, its columns added to ``row`` (with, for a toy ``task``, its
    drafts without an answer: :func:`draft_columns`); returns the point estimates and
    the per-(seed, problem) rates."""
    p: dict[str, float] = {}
    rates: dict[str, SeedRates | None] = {}
    for s in systems:
        ss = eval_seeds(s, seeds, seeded)
        stats, rates[s] = system_stats(
            f"{label}/{s}",
            {k: samples(s, k) for k in ss},
            {k: summary(s, k) for k in ss},
            n_boot,
        )
        row["n_problems"] = stats.get("n_problems")
        row.update(stats_columns(f"{s}_", stats))
        row.update(audit_columns(f"{s}_", [summary(s, k) for k in ss]))
        if task in AUDITED_TASKS:
            row.update(draft_columns(f"{s}_", task, {k: samples(s, k) for k in ss}))
        p[s] = stats["pass@1"]
    return p, rates


def systems_rows(
    config: dict,
    systems: Sequence[str],
    samples: Callable[[str, str, str, int], str],
    summary: Callable[[str, str, str, int], str],
    split: str,
    label: str = "",
    head: Callable[[dict], Mapping[str, Any]] | None = None,
) -> Iterator[tuple[dict, dict[str, Any], dict[str, float], dict[str, SeedRates | None]]]:
    """Per (family, task) of ``config``, in its order: the family's config row; a row that
    opens with ``family``, ``task``, ``split``, ``seeds`` (how many) and ``head(family row)``,
    then each system's pass@1 columns (:func:`systems_columns`, from its files
    ``samples(family, task, system, seed)`` and ``summary(...)``); the systems' pass@1 and
    per-(seed, problem) rates. ``label`` follows ``family/task`` in the errors."""
    seeds = [int(s) for s in config["seeds"]]
    n_boot = int(config["eval"]["bootstrap"])
    for fam in config["families"]:
        for task in config["tasks"]:
            f, t = fam["name"], task["name"]
            row: dict[str, Any] = {"family": f, "task": t, "split": split, "seeds": len(seeds)}
            row |= head(fam) if head else {}
            p, rates = systems_columns(
                f"{f}/{t}{label}",
                systems,
                seeds,
                seeded_bases(fam),
                partial(samples, f, t),
                partial(summary, f, t),
                n_boot,
                row,
                task=t,
            )
            yield fam, row, p, rates


def stats_columns(prefix: str, stats: Mapping[str, Any]) -> dict[str, Any]:
    """A system's pass@1 columns: value, se, interval, seeds, per seed value, source."""
    out = {f"{prefix}{k}": stats[k] for k in ("pass@1", "pass@1_se", "pass@1_lo", "pass@1_hi")}
    out[f"{prefix}n_seeds"] = len(stats["per_seed"])
    out |= {f"{prefix}pass@1_seed{s}": v for s, v in stats["per_seed"].items()}
    out[f"{prefix}source"] = stats["source"]
    return out


# ----------------------------------------------------------------------------- comparisons


def paired_replicates(
    rates: Sequence[SeedRates | None], n_boot: int, seed: int
) -> np.ndarray | None:
    """Two-level bootstrap replicates (systems x n_boot) of ``rates`` over the problems they all
    share; None when one lacks per-problem results or they share no problem. Systems evaluated
    at the same training seeds are paired seed by seed as well (a seed's base models and
    problem draw are shared: :func:`agon.stats.two_level_bootstrap`'s ``shared_seeds``)."""
    if any(r is None for r in rates):
        return None
    ids = sorted(set.intersection(*(r.ids() for r in rates)))
    if not ids:
        return None
    shared = len({tuple(r.seeds) for r in rates}) == 1
    return two_level_bootstrap(
        [r.matrix(ids) for r in rates], n_boot=n_boot, seed=seed, shared_seeds=shared
    )


def holds(lo: float, hi: float, value: float) -> bool:
    """Whether the interval ``[lo, hi]`` holds ``value``."""
    return lo <= value <= hi


def no_spread_note(replicates: np.ndarray, scale: float = 1.0, unit: str = "") -> str | None:
    """The note of a comparison whose bootstrap replicates are all one value (the systems
    compared scored alike on every problem and seed, e.g. every sample 0): its interval is that
    point and its standard error 0, which says nothing of the sampling error, so neither an
    interval nor a detectable effect means anything; None when the replicates spread."""
    x = np.asarray(replicates, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2 or np.ptp(x) > 0:
        return None
    return (
        f"{NOT_MEANINGFUL}: every bootstrap replicate is {scale * x[0]:+.3g}{unit} (the systems "
        "compared scored alike on every problem and seed resampled), so no interval or "
        "detectable effect can be stated"
    )


def empty_columns(key: str) -> dict[str, Any]:
    """A comparison's columns, empty: value, interval, minimal detectable effect, note."""
    return {key: None, f"{key}_lo": None, f"{key}_hi": None, f"{key}_mde": None, f"{key}_note": ""}


def ratio_columns(
    key: str, num: str, den: str, p: Mapping[str, float], reps: np.ndarray | None
) -> dict[str, Any]:
    """``p[num] / p[den]`` with the interval of its paired replicates ``reps`` (num, den)."""
    out = empty_columns(key)
    if not p[den] > 0:
        out[f"{key}_note"] = f"not defined: {den}'s pass@1 is {p[den]:.3g}"
        return out
    out[key] = p[num] / p[den]
    if reps is None:
        out[f"{key}_note"] = "no interval: per-problem results missing (summary source)"
        return out
    d_lo, d_hi = percentile_interval(reps[1])
    if holds(d_lo, d_hi, 0.0):
        # the denominator's own interval holds 0: the ratio is unbounded at 95%, which is what
        # the table should say rather than a fake interval
        out[f"{key}_note"] = (
            f"interval unbounded: {den}'s 95% interval [{d_lo:.3g}, {d_hi:.3g}] holds 0"
        )
        return out
    with np.errstate(divide="ignore", invalid="ignore"):  # a rare replicate at 0: in the tails
        ratio = reps[0] / reps[1]
        lo, hi = percentile_interval(ratio)
    flat = no_spread_note(ratio)
    if flat:
        out[f"{key}_note"] = flat
        return out
    out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    out[f"{key}_mde"] = minimal_detectable_effect(ratio)
    if holds(lo, hi, 1.0):
        out[f"{key}_note"] = (
            "no effect shown: the 95% interval holds 1; not detectable below "
            f"{out[f'{key}_mde']:.2f} (80% power)"
        )
    return out


def ratio_over_larger(
    key: str,
    num: str,
    over: Sequence[str],
    den: str,
    p: Mapping[str, float],
    rates: Mapping[str, SeedRates | None],
    n_boot: int,
) -> dict[str, Any]:
    """``p[num]`` over the larger pass@1 of the systems ``over`` (named ``den`` in the notes),
    as :func:`ratio_columns`: the point estimate over the larger of their means, each bootstrap
    replicate over the larger of their replicates (one paired draw of ``num`` and all of
    ``over``, seeded by ``RNG[key]``), so the denominator is the stronger system on every draw,
    whichever that is. Over one system it is that system's ratio."""
    reps = paired_replicates([rates[s] for s in (num, *over)], n_boot, RNG[key])
    if reps is not None:
        reps = np.vstack([reps[0], reps[1:].max(axis=0)])
    point = {num: p[num], den: max(p[s] for s in over)}
    return ratio_columns(key, num, den, point, reps)


def difference_columns(
    key: str, a: str, b: str, p: Mapping[str, float], reps: np.ndarray | None, what: str
) -> dict[str, Any]:
    """``p[a] - p[b]`` with the interval of its paired replicates ``reps`` (a, b); ``what``
    names the effect in the note when the interval holds 0."""
    out = empty_columns(key)
    out[key] = p[a] - p[b]
    if reps is None:
        out[f"{key}_note"] = "no interval: per-problem results missing (summary source)"
        return out
    lo, hi = percentile_interval(reps[0] - reps[1])
    flat = no_spread_note(reps[0] - reps[1], 100, " points")
    if flat:
        out[f"{key}_note"] = flat
        return out
    out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    out[f"{key}_mde"] = minimal_detectable_effect(reps[0] - reps[1])
    if holds(lo, hi, 0.0):
        out[f"{key}_note"] = (
            f"no {what} shown: the 95% interval holds 0; not detectable below "
            f"{100 * out[f'{key}_mde']:.1f} points (80% power)"
        )
    return out
