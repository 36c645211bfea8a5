"""`agon report`: table 1 and the paper figures, from the evaluation and training results.

Table 1 (``docs/method.md``) has one row per (family, task). For every evaluated system it gives
pass@1 with its standard error and 95% bootstrap interval, the ratios ``agon / grpo`` (the
paper's claim), ``agon / grpo_cascade`` (the two-model control) and ``(agon - base) / (moa -
base)`` (each with a paired bootstrap interval: the same problems resampled for all systems;
the last one *not defined*, with the reason, when MoA's gain is not positive or its interval
holds 0), and per method the compute it used: tokens
generated and wall hours.

Where the numbers come from:

- pass@1 is recounted from each evaluation's ``samples.jsonl`` (one line per sample with its
  problem id and verdict), pooling the samples of all seeds per problem, then
  :func:`agon.stats.summarize` (mean over problems, bootstrap over problems). An unscorable
  sample (``correct: null``: timeout, sandbox error) counts as a failure, as in the paper's
  pass@1. If a ``samples.jsonl`` does not carry problem ids and verdicts, the system falls
  back to its ``summary.json`` numbers (mean over seeds) and the row says so
  (``{system}_source = summary``).
- compute: tokens generated are read from each run's ``summary.json``; wall time from the
  Snakemake benchmark file of the job when there is one (the job's true elapsed time,
  process start-up included), else from the summary.
- figures (:mod:`agon.figures`): training curves and duel dynamics are read from the trainers'
  ``metrics.jsonl`` (keys in :mod:`agon.training.metrics`).

Which systems exist, where each result lives and how results are read back is
:mod:`agon.results`.

Everything is written atomically; the CSV gets a sidecar ``.provenance.json``, the Markdown
and figures carry the same config hash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.figures import plot_duel_dynamics, plot_pass1, plot_training_curves
from agon.methods import GAINS, columns_for_methods, trained_methods_for
from agon.results import (
    TOKEN_KEYS,
    WALL_KEYS,
    Layout,
    benchmark_seconds,
    problem_counts,
    read_jsonl,
    summary_number,
)
from agon.tables import table_csv, table_markdown
from agon.training.metrics import cumulative_tokens

# ----------------------------------------------------------------------------- table 1


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or any(map(math.isnan, (a, b))):
        return None
    return a / b


def _paired_means(series: Sequence[dict[str, float]], n_boot: int, seed: int) -> list | None:
    """Bootstrap means of each per-problem series over the problems they all share, every
    series resampled with the same draw (paired); None with fewer than two shared problems."""
    import numpy as np

    ids = sorted(set.intersection(*(set(s) for s in series)))
    if len(ids) < 2:
        return None
    idx = np.random.default_rng(seed).integers(0, len(ids), size=(n_boot, len(ids)))
    return [np.array([s[i] for i in ids])[idx].mean(1) for s in series]


def paired_ratio_ci(
    num: dict[str, float],
    den: dict[str, float],
    base: dict[str, float] | None,
    n_boot: int,
    seed: int,
) -> tuple[float | None, float | None]:
    """95% bootstrap interval of mean(num)/mean(den) (or of the gains over ``base``),
    resampling the problems the systems share, the same draw for all of them."""
    import numpy as np

    means = _paired_means([num, den] if base is None else [num, den, base], n_boot, seed)
    if means is None:
        return None, None
    z = means[2] if base is not None else 0.0
    top, bottom = means[0] - z, means[1] - z
    b_lo, b_hi = np.quantile(bottom, [0.025, 0.975])
    if b_lo <= 0 <= b_hi:
        # the denominator's own interval holds 0 (e.g. MoA no better than base): the ratio
        # is unbounded at 95%, which is what the table should say rather than a fake interval
        return -math.inf, math.inf
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # a rare resample at exactly 0: +-inf, in the tails
        lo, hi = np.quantile(top / bottom, [0.025, 0.975])
    return float(lo), float(hi)


def paired_gain_ci(
    num: dict[str, float], base: dict[str, float], n_boot: int, seed: int
) -> tuple[float | None, float | None]:
    """95% bootstrap interval of mean(num) - mean(base), paired over the problems both share
    (the gain of a trained model over its own base)."""
    import numpy as np

    means = _paired_means([num, base], n_boot, seed)
    if means is None:
        return None, None
    lo, hi = np.quantile(means[0] - means[1], [0.025, 0.975])
    return float(lo), float(hi)


def system_stats(
    layout: Layout, family: str, task: str, system: str, seeds: Sequence[int], n_boot: int
) -> tuple[dict, dict[str, float] | None]:
    """pass@1 (with se, interval) of one system, and its per-problem pass@1 for paired ratios."""
    from agon.stats import summarize

    samples = [layout.eval_samples(family, task, system, s) for s in seeds]
    counts = problem_counts(samples) if all(Path(p).is_file() for p in samples) else None
    if counts is not None:
        ids = sorted(counts)
        stats = summarize([counts[i] for i in ids], ks=(1,), n_boot=n_boot, seed=0)
        per_problem = {i: counts[i][1] / counts[i][0] for i in ids}
        return {**stats, "source": "samples"}, per_problem
    summaries = [
        json.loads(Path(layout.eval_summary(family, task, system, s)).read_text()) for s in seeds
    ]
    keys = ("pass@1", "pass@1_se", "pass@1_lo", "pass@1_hi")
    missing = [k for k in keys if any(k not in s for s in summaries)]
    if missing:
        raise ValueError(
            f"{family}/{task}/{system}: summary.json lacks {missing} and samples.jsonl has no "
            "problem ids/verdicts"
        )
    stats = {k: sum(s[k] for s in summaries) / len(summaries) for k in keys}
    stats["n_problems"] = summaries[0].get("n_problems")
    return {**stats, "source": "summary"}, None


def compute_used(layout: Layout, family: str, task: str, system: str, seeds: Sequence[int]) -> dict:
    """Mean per seed of eval tokens and wall hours of ``system``, and of its training run."""
    out: dict[str, float | None] = {}

    def mean(values: list[float | None]) -> float | None:
        vals = [v for v in values if v is not None]
        return sum(vals) / len(vals) if len(vals) == len(values) and vals else None

    ev = [json.loads(Path(layout.eval_summary(family, task, system, s)).read_text()) for s in seeds]
    out["eval_tokens"] = mean([summary_number(e, TOKEN_KEYS) for e in ev])
    wall = [
        benchmark_seconds(layout.benchmark(f"eval/{family}/{task}/{system}/seed{s}"))
        or summary_number(e, WALL_KEYS)
        for s, e in zip(seeds, ev)
    ]
    w = mean(wall)
    out["eval_wall_h"] = w / 3600 if w is not None else None
    return out


def train_compute(
    layout: Layout, family: str, task: str, method: str, seeds: Sequence[int]
) -> dict:
    """Mean per seed of the training run's generated tokens and wall hours."""
    toks, walls = [], []
    for s in seeds:
        summary = json.loads(Path(layout.train_summary(family, task, method, s)).read_text())
        t = summary_number(summary, TOKEN_KEYS)
        if t is None:
            rows = read_jsonl(layout.train_metrics(family, task, method, s))
            t = cumulative_tokens(rows)[-1] if rows else None
        toks.append(t)
        walls.append(
            benchmark_seconds(layout.benchmark(f"train/{family}/{task}/{method}/seed{s}"))
            or summary_number(summary, WALL_KEYS)
        )
    mean = lambda v: sum(v) / len(v) if v and all(x is not None for x in v) else None  # noqa: E731
    w = mean(walls)
    return {"train_tokens": mean(toks), "train_wall_h": w / 3600 if w is not None else None}


def moa_gain_ratio(
    p: dict[str, float], per_problem: dict[str, dict[str, float] | None], n_boot: int
) -> dict[str, Any]:
    """``(agon - base) / (moa - base)`` with its paired interval, or not defined, with the
    reason, when MoA's gain over base is not positive or its paired interval holds 0: a
    negative or unbounded ratio is not a measurement of "times the gain"."""
    key = "agon_gain_over_moa_gain"
    out: dict[str, Any] = {key: None, f"{key}_lo": None, f"{key}_hi": None, f"{key}_note": ""}
    gain = p["moa"] - p["base"]
    paired = all(per_problem[s] for s in ("agon", "moa", "base"))
    g_lo, g_hi = (
        paired_gain_ci(per_problem["moa"], per_problem["base"], n_boot, 2)
        if paired
        else (None, None)
    )
    if gain <= 0:
        out[f"{key}_note"] = f"not defined: MoA's gain over base is {100 * gain:+.1f} points"
    elif g_lo is not None and g_lo <= 0:
        out[f"{key}_note"] = (
            f"not defined: MoA's gain over base, {100 * gain:+.1f} points, has a 95% interval "
            f"[{100 * g_lo:+.1f}, {100 * g_hi:+.1f}] that holds 0"
        )
    else:
        out[key] = _ratio(p["agon"] - p["base"], gain)
        lo, hi = (
            paired_ratio_ci(per_problem["agon"], per_problem["moa"], per_problem["base"], n_boot, 2)
            if paired
            else (None, None)
        )
        out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    return out


def build_table(config: dict, layout: Layout) -> list[dict]:
    """Table 1: one dict per (family, task) with every column (see the module docstring)."""
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
            per_problem: dict[str, dict[str, float] | None] = {}
            for s in systems:
                stats, per_problem[s] = system_stats(layout, f, t, s, seeds, n_boot)
                row["n_problems"] = stats.get("n_problems")
                for key in ("pass@1", "pass@1_se", "pass@1_lo", "pass@1_hi"):
                    row[f"{s}_{key}"] = stats[key]
                row[f"{s}_source"] = stats["source"]
            p = {s: row[f"{s}_pass@1"] for s in systems}
            # agon / grpo is the paper's literal claim (a two-model cascade over one model);
            # agon / grpo_cascade is the control (two models both ways, trained apart)
            for den, seed in (("grpo", 1), ("grpo_cascade", 4)):
                if "agon" in p and den in p:
                    key = f"agon_over_{den}"
                    row[key] = _ratio(p["agon"], p[den])
                    lo, hi = (
                        paired_ratio_ci(per_problem["agon"], per_problem[den], None, n_boot, seed)
                        if per_problem["agon"] and per_problem[den]
                        else (None, None)
                    )
                    row[f"{key}_lo"], row[f"{key}_hi"] = lo, hi
            if {"agon", "moa", "base"} <= set(p):
                row.update(moa_gain_ratio(p, per_problem, n_boot))
            for _, base, trained_systems in GAINS:
                for s in (x for x in trained_systems if x in p and base in p):
                    row[f"{s}_gain"] = p[s] - p[base]
                    lo, hi = (
                        paired_gain_ci(per_problem[s], per_problem[base], n_boot, 3)
                        if per_problem[s] and per_problem[base]
                        else (None, None)
                    )
                    row[f"{s}_gain_lo"], row[f"{s}_gain_hi"] = lo, hi
            for m in trained:
                for k, v in train_compute(layout, f, t, m, seeds).items():
                    row[f"{m}_{k}"] = v
            for s in systems:
                for k, v in compute_used(layout, f, t, s, seeds).items():
                    row[f"{s}_{k}"] = v
            rows.append(row)
    return rows


# ----------------------------------------------------------------------------- entry points


def code_versions(paths: Sequence[str | Path]) -> dict[str, list[str]]:
    """The source fingerprints (``provenance.code.source_sha256``) of the results files at
    ``paths``, each with the files made by that code; ``unknown`` for files that lack one."""
    out: dict[str, list[str]] = {}
    for p in paths:
        prov = json.loads(Path(p).read_text()).get("provenance") or {}
        out.setdefault((prov.get("code") or {}).get("source_sha256") or "unknown", []).append(
            str(p)
        )
    return out


def code_note(versions: dict[str, list[str]]) -> str:
    """One line for table 1 on the code its numbers were made with; a warning for a mix."""
    if set(versions) == {"unknown"}:
        return "The code these results were made with is not recorded in their summaries."
    if len(versions) == 1:
        only = next(iter(versions))
        return f"Every run and evaluation was made by the same code (source {only[:12]})."
    counts = ", ".join(f"{v[:12]}: {len(files)} files" for v, files in versions.items())
    return (
        f"**Warning: mixed code versions** ({counts}): the runs were made by different code; "
        "rerun the stale ones (see table1.provenance.json) before comparing columns."
    )


def _summaries(config: dict, path_of: Any, names: Sequence[str]) -> list[str]:
    """``path_of(family, task, name, seed)`` for every family, task, name and seed."""
    return [
        path_of(f["name"], t["name"], n, seed)
        for f in config["families"]
        for t in config["tasks"]
        for n in names
        for seed in config["seeds"]
    ]


def build_report(config: dict, layout: Layout, smooth: int = 5) -> dict[str, list[Path]]:
    """Write table1.csv (+ provenance JSON), table1.md and the figures; return what was written."""
    from agon.config import config_hash
    from agon.provenance import atomic_write_text, write_results

    systems = columns_for_methods(config["methods"])
    trained = trained_methods_for(systems)
    rows = build_table(config, layout)
    chash = config_hash(config)
    meta = {"config_hash": chash, "source": "agon report"}
    inputs = _summaries(config, layout.eval_summary, systems)
    runs = _summaries(config, layout.train_summary, trained)
    versions = code_versions(inputs + runs)
    markdown = table_markdown(rows, systems, chash) + "\n" + code_note(versions) + "\n"
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
                "code_versions": versions,
            },
            config=config,
            seed=None,
        )
    ]
    return written
