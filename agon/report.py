# long: table 1's numbers (per-seed rates, paired comparisons, the table) read in one order;
# the compute columns are agon/compute.py, what made them agon/origin.py, the ablations
# agon/ablations.py, the rendering agon/tables.py.
"""`agon report`: table 1 and the paper figures, and the ablations table, from the evaluation
and training results.

Table 1 (``docs/method.md``) has one row per (family, task). For every evaluated system it gives
pass@1 with a standard error and a 95% interval over training seeds *and* problems, and its
pass@1 at each training seed; the ratios ``agon / grpo`` (the paper's claim), ``agon /
grpo_cascade`` (the two-model control) and ``(agon - base) / (moa - base)`` (*not defined*, with
the reason, when MoA's gain is not positive or its interval holds 0), each model's gain over its
own base, and ``agon - agon_independent`` (what the contest adds over the same duel without
it), each with a paired interval; and per trained method the compute it used (per model steps,
completions, tokens generated and trained on, CPU and GPU seconds, and for a budget-matched
method how close it came to its budget).

Where the numbers come from:

- pass@1 is recounted from each evaluation's ``samples.jsonl`` (one line per sample with its
  problem id and verdict): per (seed, problem) the share of correct samples, then the mean
  over seeds and problems. An unscorable sample (``correct: null``: timeout, sandbox error)
  counts as a failure, as in the paper's pass@1. Trained systems are evaluated at every
  training seed, untrained ones at the first only (:func:`agon.methods.eval_seeds`).
- intervals: :func:`agon.stats.two_level_bootstrap`: each replicate draws problems with
  replacement (the same draw for every system of a comparison) and, per system, that system's
  seeds with replacement. The standard error is the replicates' standard deviation. If a
  ``samples.jsonl`` does not carry problem ids and verdicts, the system falls back to its
  ``summary.json`` numbers (mean over seeds, its interval the mean of the seeds' intervals
  over problems: no seed variance), the row says so (``{system}_source = summary``) and the
  comparisons involving it have no interval.
- compute: a training run's ``summary.json`` (keys of
  :func:`agon.training.metrics.summarize_metrics`, and ``budget`` for a budget-matched run);
  wall time from the Snakemake benchmark file of the job when there is one (the job's true
  elapsed time), else from the summary. A key a summary lacks (older code) leaves its cell
  empty.
- figures (:mod:`agon.figures`): training curves and duel dynamics are read from the trainers'
  ``metrics.jsonl`` (keys in :mod:`agon.training.metrics`).

Where a number is not meaningful (a ratio not defined, an interval unbounded, an effect whose
interval holds no effect, a budget missed by more than 5%), its ``{key}_note`` column says why
and the Markdown repeats it; an undefined number is an empty cell.

The ablations table (:func:`agon.ablations.build_ablations_report`) reads its variants with
the same functions.

Which systems exist, where each result lives and how results are read back is
:mod:`agon.results`. Everything is written atomically; each CSV gets a sidecar
``.provenance.json``, the Markdown and figures carry the same config hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agon.compute import compute_used, train_compute
from agon.figures import plot_duel_dynamics, plot_pass1, plot_training_curves
from agon.methods import (
    BUDGET_MATCHED,
    BUDGET_REFERENCE,
    GAINS,
    columns_for_methods,
    eval_seeds,
    trained_methods_for,
)
from agon.origin import origin
from agon.results import (
    Layout,
    problem_counts,
)
from agon.stats import percentile_interval, two_level_bootstrap
from agon.tables import table_csv, table_markdown
from agon.training.metrics import MODELS

# fixed bootstrap seeds, one per comparison, so every interval is reproducible on its own
RNG = {
    "pass@1": 0,
    "agon_over_grpo": 1,
    "moa": 2,
    "gain": 3,
    "agon_over_grpo_cascade": 4,
    "agon_minus_agon_independent": 5,
    "ablation": 6,
    "related": 7,
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
        ids = sorted(rates.ids())
        if not ids:
            raise ValueError(f"{label}: its seeds {rates.seeds} share no evaluated problem")
        x = rates.matrix(ids)
        reps = two_level_bootstrap([x], n_boot=n_boot, seed=RNG["pass@1"])[0]
        lo, hi = percentile_interval(reps)
        stats = {"pass@1": float(x.mean()), "pass@1_se": _sd(reps), "pass@1_lo": lo}
        stats |= {"pass@1_hi": hi, "n_problems": len(ids), "source": "samples"}
        stats["per_seed"] = {s: float(row.mean()) for s, row in zip(rates.seeds, x)}
        return stats, rates
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
    share; None when one lacks per-problem results or they share no problem."""
    if any(r is None for r in rates):
        return None
    ids = sorted(set.intersection(*(r.ids() for r in rates)))
    if not ids:
        return None
    return two_level_bootstrap([r.matrix(ids) for r in rates], n_boot=n_boot, seed=seed)


def _holds(lo: float, hi: float, value: float) -> bool:
    return lo <= value <= hi


def empty_columns(key: str) -> dict[str, Any]:
    return {key: None, f"{key}_lo": None, f"{key}_hi": None, f"{key}_note": ""}


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
    if _holds(d_lo, d_hi, 0.0):
        # the denominator's own interval holds 0: the ratio is unbounded at 95%, which is what
        # the table should say rather than a fake interval
        out[f"{key}_note"] = (
            f"interval unbounded: {den}'s 95% interval [{d_lo:.3g}, {d_hi:.3g}] holds 0"
        )
        return out
    with np.errstate(divide="ignore", invalid="ignore"):  # a rare replicate at 0: in the tails
        lo, hi = percentile_interval(reps[0] / reps[1])
    out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    if _holds(lo, hi, 1.0):
        out[f"{key}_note"] = "no effect shown: the 95% interval holds 1"
    return out


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
    out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    if _holds(lo, hi, 0.0):
        out[f"{key}_note"] = f"no {what} shown: the 95% interval holds 0"
    return out


def moa_gain_ratio(
    p: Mapping[str, float], rates: Mapping[str, SeedRates | None], n_boot: int
) -> dict[str, Any]:
    """``(agon - base) / (moa - base)`` with its paired interval, or not defined, with the
    reason, when MoA's gain over base is not positive or its paired interval holds 0: a
    negative or unbounded ratio is not a measurement of "times the gain"."""
    key = "agon_gain_over_moa_gain"
    out = empty_columns(key)
    gain = p["moa"] - p["base"]
    reps = paired_replicates([rates[s] for s in ("agon", "moa", "base")], n_boot, RNG["moa"])
    if gain <= 0:
        out[f"{key}_note"] = f"not defined: MoA's gain over base is {100 * gain:+.1f} points"
        return out
    if reps is not None:
        g_lo, g_hi = percentile_interval(reps[1] - reps[2])
        if g_lo <= 0:
            out[f"{key}_note"] = (
                f"not defined: MoA's gain over base, {100 * gain:+.1f} points, has a 95% "
                f"interval [{100 * g_lo:+.1f}, {100 * g_hi:+.1f}] that holds 0"
            )
            return out
    out[key] = (p["agon"] - p["base"]) / gain
    if reps is None:
        out[f"{key}_note"] = "no interval: per-problem results missing (summary source)"
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = percentile_interval((reps[0] - reps[2]) / (reps[1] - reps[2]))
    out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    if _holds(lo, hi, 1.0):
        out[f"{key}_note"] = "Agon's gain not shown larger than MoA's: the 95% interval holds 1"
    return out


# ----------------------------------------------------------------------------- table 1


def build_table(
    config: dict,
    layout: Layout,
    compare: Callable[
        [Mapping[str, float], Mapping[str, SeedRates | None], int], dict[str, Any]
    ] = None,
) -> list[dict]:
    """Table 1: one dict per (family, task) with every column (see the module docstring);
    ``compare`` (default :func:`comparison_columns`) makes the comparisons of each row from
    the systems' pass@1 and per-(seed, problem) rates."""
    compare = compare or comparison_columns
    systems = columns_for_methods(config["methods"])
    seeds = [int(s) for s in config["seeds"]]
    n_boot = int(config["eval"]["bootstrap"])
    trained = trained_methods_for(systems)
    rows = []
    for fam in config["families"]:
        for task in config["tasks"]:
            f, t = fam["name"], task["name"]
            row: dict[str, Any] = {
                "family": f,
                "task": t,
                "split": config["eval"]["split"],
                "seeds": len(seeds),
            }
            rates: dict[str, SeedRates | None] = {}
            p: dict[str, float] = {}
            for s in systems:
                ss = eval_seeds(s, seeds)
                stats, rates[s] = system_stats(
                    f"{f}/{t}/{s}",
                    {k: layout.eval_samples(f, t, s, k) for k in ss},
                    {k: layout.eval_summary(f, t, s, k) for k in ss},
                    n_boot,
                )
                row["n_problems"] = stats.get("n_problems")
                row.update(stats_columns(f"{s}_", stats))
                p[s] = stats["pass@1"]

            row.update(compare(p, rates, n_boot))
            row.update(training_columns(layout, f, t, trained, seeds))
            for s in systems:
                for k, v in compute_used(layout, f, t, s, eval_seeds(s, seeds)).items():
                    row[f"{s}_{k}"] = v
            rows.append(row)
    return rows


def comparison_columns(
    p: Mapping[str, float], rates: Mapping[str, SeedRates | None], n_boot: int
) -> dict[str, Any]:
    """Table 1's comparisons of the systems present in ``p`` (pass@1) with per-(seed, problem)
    ``rates``: the ratios, MoA's gain ratio, each model's gain, and what the contest adds."""
    out: dict[str, Any] = {}

    def paired(names: Sequence[str], rng: str) -> np.ndarray | None:
        return paired_replicates([rates[n] for n in names], n_boot, RNG[rng])

    # agon / grpo is the paper's literal claim (a two-model cascade over one model);
    # agon / grpo_cascade is the control (two models both ways, trained apart)
    for den in ("grpo", "grpo_cascade"):
        if "agon" in p and den in p:
            key = f"agon_over_{den}"
            out.update(ratio_columns(key, "agon", den, p, paired(["agon", den], key)))
    if {"agon", "moa", "base"} <= set(p):
        out.update(moa_gain_ratio(p, rates, n_boot))
    for _, base, trained_systems in GAINS:
        for s in (x for x in trained_systems if x in p and base in p):
            reps = paired([s, base], "gain")
            out.update(difference_columns(f"{s}_gain", s, base, p, reps, "gain"))
    if {"agon", "agon_independent"} <= set(p):
        key = "agon_minus_agon_independent"
        reps = paired(["agon", "agon_independent"], key)
        out.update(difference_columns(key, "agon", "agon_independent", p, reps, "contest effect"))
    return out


def training_columns(
    layout: Layout, family: str, task: str, trained: Sequence[str], seeds: Sequence[int]
) -> dict[str, Any]:
    """The compute columns of every trained method of one (family, task): ``{method}_{key}``
    (:func:`train_compute`), ``budget_match``, and for each method but the budget reference
    ``{method}_{model}_tokens_vs_agon``: its model's tokens relative to the same model's in
    the reference run (0 = the same)."""
    out: dict[str, Any] = {}
    if any(m in BUDGET_MATCHED for m in trained):
        out["budget_match"] = None
    per_method = {}
    for m in trained:
        c = train_compute(
            [layout.train_summary(family, task, m, s) for s in seeds],
            [layout.train_metrics(family, task, m, s) for s in seeds],
            [layout.benchmark(f"train/{family}/{task}/{m}/seed{s}") for s in seeds],
        )
        per_method[m] = c
        if m in BUDGET_MATCHED:
            out["budget_match"] = out["budget_match"] or c.pop("budget_match", None)
            for model in MODELS:  # the same columns whether or not the runs had a budget
                for k in ("budget_rel_diff", "budget_hit_step_cap", "budget_note"):
                    c.setdefault(f"{model}_{k}", "" if k == "budget_note" else None)
        else:
            c.pop("budget_match", None)
        out |= {f"{m}_{k}": v for k, v in c.items()}
    if BUDGET_REFERENCE in per_method:
        ref = per_method[BUDGET_REFERENCE]
        for m in (x for x in trained if x != BUDGET_REFERENCE):
            for model in MODELS:
                mine, theirs = (
                    per_method[m][f"{model}_tokens_generated"],
                    ref[f"{model}_tokens_generated"],
                )
                out[f"{m}_{model}_tokens_vs_{BUDGET_REFERENCE}"] = (
                    mine / theirs - 1 if mine is not None and theirs else None
                )
    return out


# ----------------------------------------------------------------------------- entry points


def result_paths(
    config: dict,
    path_of: Callable[[str, str, str, int], str],
    names: Sequence[str],
    seeds_of: Callable[[str], Sequence[int]],
) -> list[str]:
    """``path_of(family, task, name, seed)`` for every family, task, name and its seeds."""
    return [
        path_of(f["name"], t["name"], n, seed)
        for f in config["families"]
        for t in config["tasks"]
        for n in names
        for seed in seeds_of(n)
    ]


def build_report(config: dict, layout: Layout, smooth: int = 5) -> dict[str, list[Path]]:
    """Write table1.csv (+ provenance JSON), table1.md and the figures; return what was written."""
    from agon.checkpoints import prepared_models
    from agon.config import config_hash
    from agon.provenance import atomic_write_text, write_results

    systems = columns_for_methods(config["methods"])
    trained = trained_methods_for(systems)
    rows = build_table(config, layout)
    chash = config_hash(config)
    meta = {"config_hash": chash, "source": "agon report"}
    seeds = [int(s) for s in config["seeds"]]
    inputs = result_paths(config, layout.eval_summary, systems, lambda s: eval_seeds(s, seeds))
    runs = result_paths(config, layout.train_summary, trained, lambda _: seeds)
    lines, made = origin(inputs + runs, Path(layout.table_provenance()).name)
    markdown = table_markdown(rows, systems, chash) + "\n" + lines
    written: dict[str, list[Path]] = {}
    written["csv"] = [atomic_write_text(layout.table_csv(), table_csv(rows))]
    written["md"] = [atomic_write_text(layout.table_md(), markdown)]
    figs = plot_pass1(rows, systems, layout.figures_dir, meta)
    if "training_curves" in layout.figure_names(trained):
        figs += plot_training_curves(config, layout, trained, layout.figures_dir, meta, smooth)
    if "duel_dynamics" in layout.figure_names(trained):
        figs += plot_duel_dynamics(config, layout, layout.figures_dir, meta, smooth)
    written["figures"] = figs
    # the provenance sidecar is written last: its presence means the rest is complete
    written["provenance"] = [
        write_results(
            layout.table_provenance(),
            {
                "table": layout.table_csv(),
                "markdown": layout.table_md(),
                "figures": [str(p) for p in figs],
                "rows": len(rows),
                "inputs": inputs,
                "runs": runs,
                **made,
                "models": prepared_models(config),
            },
            config=config,
            seed=None,
        )
    ]
    return written
