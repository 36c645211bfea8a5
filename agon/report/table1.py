"""Table 1 (``docs/method.md``): one row per (family, task), from the evaluations and runs.

For every evaluated system: pass@1 with a standard error and a 95% interval over training seeds
*and* problems, and its pass@1 at each training seed (:mod:`agon.report.compare`); the ratios
``agon / grpo`` (the paper's claim), ``agon / grpo_b`` (over the cascade's reader's own GRPO
model), ``agon / max(grpo, grpo_b)`` (over the stronger GRPO model, replicate by replicate),
``agon / grpo_cascade`` (the two-model control) and
``(agon - base) / (moa - base)`` (*not defined*, with the reason, when MoA's gain is not
positive or its interval holds 0), each model's gain over its own base, and ``agon -
agon_independent`` (what the contest adds over the same duel without it), each with a paired
interval; and per trained method the compute it used (:mod:`agon.report.compute`: per model
steps, completions, tokens generated and trained on, CPU and GPU seconds, and for a
budget-matched method how close it came to its budget). Trained systems are evaluated at every
training seed; untrained ones too where each seed has its own base models (the toy world),
else at the first only (:func:`agon.methods.eval_seeds`).

Beside each ratio its ceiling, the largest value this world allows it, and after the
comparisons the regime's criteria on the baselines and the "eight times" claim in difference
form (:mod:`agon.report.regime`, :mod:`agon.regime`); the Markdown ends with the regime section.

Where a number is not meaningful (a ratio not defined, an interval unbounded, an effect whose
interval holds no effect, a budget missed by more than 5%), its ``{key}_note`` column says why
and the Markdown repeats it; an undefined number is an empty cell. :func:`build_report` writes
the table, its Markdown, the figures (:mod:`agon.report.figures`) and the provenance sidecar
(:func:`agon.report.write.write_table`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agon.config import regime_section, seeded_bases
from agon.methods import (
    BUDGET_MATCHED,
    BUDGET_REFERENCE,
    GAINS,
    columns_for_methods,
    eval_seeds,
    trained_methods_for,
)
from agon.regime import RATIOS
from agon.report.audit_columns import audit_counts
from agon.report.compare import (
    RNG,
    SeedRates,
    difference_columns,
    empty_columns,
    holds,
    paired_replicates,
    ratio_over_larger,
    systems_rows,
)
from agon.report.compute import compute_used, train_compute
from agon.report.figures import plot_duel_dynamics, plot_pass1, plot_training_curves
from agon.report.mechanism import mechanism_columns, mechanism_markdown, reading_markdown
from agon.report.regime import regime_columns, regime_markdown
from agon.report.render import table_markdown
from agon.report.write import figure_meta, summaries_read, write_table
from agon.results import Layout
from agon.stats import minimal_detectable_effect, percentile_interval
from agon.training.metrics import MODELS


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
        ratio = (reps[0] - reps[2]) / (reps[1] - reps[2])
        lo, hi = percentile_interval(ratio)
    out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    out[f"{key}_mde"] = minimal_detectable_effect(ratio)
    if holds(lo, hi, 1.0):
        out[f"{key}_note"] = "Agon's gain not shown larger than MoA's: the 95% interval holds 1"
    return out


# ----------------------------------------------------------------------------- table 1


def build_table(
    config: dict,
    layout: Layout,
    compare: Callable[..., dict[str, Any]] = None,
) -> list[dict]:
    """Table 1: one dict per (family, task) with every column (see the module docstring);
    ``compare`` (default :func:`comparison_columns`) makes the comparisons of each row from
    the systems' pass@1, per-(seed, problem) rates and bootstrap size, and the row so far
    (keyword ``row``: its systems' audit counts, which the regime's criteria read)."""
    compare = compare or comparison_columns
    systems = columns_for_methods(config["methods"])
    seeds = [int(s) for s in config["seeds"]]
    n_boot = int(config["eval"]["bootstrap"])
    trained = trained_methods_for(systems)
    rows = []
    for fam, row, p, rates in systems_rows(
        config, systems, layout.eval_samples, layout.eval_summary, config["eval"]["split"]
    ):
        f, t, seeded = row["family"], row["task"], seeded_bases(fam)
        row.update(compare(p, rates, n_boot, row=row))
        row.update(training_columns(layout, f, t, trained, seeds))
        row.update(mechanism_columns(layout, f, t, trained, seeds))
        for s in systems:
            for k, v in compute_used(layout, f, t, s, eval_seeds(s, seeds, seeded)).items():
                row[f"{s}_{k}"] = v
        rows.append(row)
    return rows


# each cascade and its reader alone (B, the model whose answer the cascade gives), trained as
# the cascade's was: the cascade minus it is what reading the draft added, on the same problems
CASCADE_READERS = (
    ("base_cascade", "base_b"),
    ("grpo_cascade", "grpo_b"),
    ("agon", "agon_single_b"),
)


def comparison_columns(
    p: Mapping[str, float],
    rates: Mapping[str, SeedRates | None],
    n_boot: int,
    row: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Table 1's comparisons of the systems present in ``p`` (pass@1) with per-(seed, problem)
    ``rates``: the ratios, MoA's gain ratio, each model's gain, what the contest adds, and each
    cascade over its reader alone (``row``: unused; :func:`table1_comparisons` reads it)."""
    out: dict[str, Any] = {}

    def paired(names: Sequence[str], rng: str) -> np.ndarray | None:
        return paired_replicates([rates[n] for n in names], n_boot, RNG[rng])

    # the ratios over GRPO's A, its B, the stronger of the two, and the control (agon.regime)
    for r in RATIOS:
        if "agon" in p and set(r.over) <= set(p):
            out.update(ratio_over_larger(r.key, "agon", r.over, r.denominator, p, rates, n_boot))
    if {"agon", "moa", "base"} <= set(p):
        out.update(moa_gain_ratio(p, rates, n_boot))
    for _, base, trained_systems in GAINS:
        for s in (x for x in trained_systems if x in p and base in p):
            reps = paired([s, base], "gain")
            out.update(difference_columns(f"{s}_gain", s, base, p, reps, "gain"))
    for cascade, reader in CASCADE_READERS:  # what reading added, on the same problems
        if {cascade, reader} <= set(p):
            reps = paired([cascade, reader], "cascade_minus_reader")
            key = f"{cascade}_minus_reader"
            out.update(difference_columns(key, cascade, reader, p, reps, "cascade - reader"))
    if {"agon", "agon_independent"} <= set(p):
        key = "agon_minus_agon_independent"
        reps = paired(["agon", "agon_independent"], key)
        out.update(difference_columns(key, "agon", "agon_independent", p, reps, "contest effect"))
    return out


def table1_comparisons(
    p: Mapping[str, float],
    rates: Mapping[str, SeedRates | None],
    n_boot: int,
    regime: Mapping,
    row: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`comparison_columns` with each ratio's ceiling right after its columns, then the
    regime's criteria (with those on the audit's shares, from ``row``'s audit counts) and the
    "eight times" claim in difference form (:func:`agon.report.regime.regime_columns`)."""
    counts = audit_counts(row or {}, list(p))
    extra = regime_columns(p, rates, n_boot, regime, counts)
    out: dict[str, Any] = {}
    for key, value in comparison_columns(p, rates, n_boot).items():
        out[key] = value
        ratio = key.removesuffix("_note")
        if ratio != key and f"{ratio}_ceiling" in extra:
            out |= {
                k: extra.pop(k) for k in (f"{ratio}_{x}" for x in ("ceiling", "claim", "verdict"))
            }
    return out | extra


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


# ----------------------------------------------------------------------------- entry point


def build_report(config: dict, layout: Layout, smooth: int = 5) -> dict[str, list[Path]]:
    """Write table1.csv (+ provenance JSON), table1.md and the figures; return what was written."""
    systems = columns_for_methods(config["methods"])
    trained = trained_methods_for(systems)
    rows = build_table(
        config, layout, compare=partial(table1_comparisons, regime=regime_section(config))
    )
    inputs, runs = summaries_read(config, systems, layout.eval_summary, layout.train_summary)
    meta = figure_meta(config, "agon report")
    figs = plot_pass1(rows, systems, layout.figures_dir, meta)
    if "training_curves" in layout.figure_names(trained):
        figs += plot_training_curves(config, layout, trained, layout.figures_dir, meta, smooth)
    if "duel_dynamics" in layout.figure_names(trained):
        figs += plot_duel_dynamics(config, layout, layout.figures_dir, meta, smooth)
    return write_table(
        layout.table_files("table1"),
        rows,
        table_markdown(rows, systems, meta["config_hash"])
        + "\n".join(mechanism_markdown(rows, trained))
        + "\n".join(reading_markdown(rows, systems, CASCADE_READERS))
        + "\n\n"
        + regime_markdown(rows, config),
        config,
        inputs + runs,
        figures=figs,
        provenance={"inputs": inputs, "runs": runs},
    )
