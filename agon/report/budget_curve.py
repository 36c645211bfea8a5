"""`agon report --budget`: results/budget.csv, table 1's trained systems at each multiple of its
training budget (:mod:`agon.budget_curve`), with the mechanism beside pass@1, and its figure.

One row per (family, task, scale): each system's pass@1 over seeds and problems as table 1
reads it (:func:`agon.report.compare.systems_rows`), table 1's comparisons among them
(:func:`agon.report.table1.comparison_columns`: the ratios, each cascade minus its reader
alone, the contest effect), the audit's shares (take-up, luck) and the training compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.budget_curve import (
    SYSTEMS,
    TRAINED,
    budget_config,
    budget_section,
    budget_summaries,
    table1_steps,
)
from agon.config import config_hash
from agon.report.compare import systems_rows
from agon.report.compute import train_compute
from agon.report.figures import color_of, grid, paper_style, save
from agon.report.mechanism import TWINS, unanswered_cell
from agon.report.render import INTERVAL_TEXT, _estimate, _finite, head, table_row
from agon.report.table1 import comparison_columns
from agon.report.write import figure_meta, write_table
from agon.results import Layout

CURVES = ("agon", "agon_independent", "grpo", "grpo_b", "grpo_cascade")  # the figure's lines
READERS = ("agon", "agon_independent", "grpo_cascade")  # cascades whose take-up is shown


def benchmark_name(family: str, task: str, scale: int, method: str, seed: int) -> str:
    """A budget run's Snakemake benchmark name (scale 1: table 1's run's)."""
    if int(scale) == 1:
        return f"train/{family}/{task}/{method}/seed{seed}"
    return f"budget/{family}/{task}/x{scale}/train/{method}/seed{seed}"


def build_budget_table(config: dict, layout: Layout) -> list[dict]:
    """One dict per (family, task, scale) of the budget section (see the module docstring)."""
    b = budget_section(config)
    cfg = budget_config(config)
    n_boot = int(config["eval"]["bootstrap"])
    rows = []
    for scale in b["scales"]:

        def samples(f, t, s, k, scale=scale):
            return layout.budget_eval_samples(f, t, scale, s, k)

        def summary(f, t, s, k, scale=scale):
            return layout.budget_eval_summary(f, t, scale, s, k)

        for _fam, row, p, rates in systems_rows(
            cfg, SYSTEMS, samples, summary, config["eval"]["split"], label=f" x{scale}"
        ):
            f, t = row["family"], row["task"]
            out = {"family": f, "task": t, "scale": scale}
            out["steps"] = scale * table1_steps(config)
            out |= {k: v for k, v in row.items() if k not in ("family", "task")}
            out |= comparison_columns(p, rates, n_boot)
            for m in TRAINED:
                c = train_compute(
                    [layout.budget_train_summary(f, t, scale, m, s) for s in b["seeds"]],
                    [
                        f"{layout.budget_train_dir(f, t, scale, m, s)}/metrics.jsonl"
                        for s in b["seeds"]
                    ],
                    [layout.benchmark(benchmark_name(f, t, scale, m, s)) for s in b["seeds"]],
                )
                for k in ("train_tokens", "train_wall_h", "A_steps", "B_steps"):
                    out[f"{m}_{k}"] = c.get(k)
            rows.append(out)
    return rows


def _share(r: dict, system: str, name: str, count: str) -> str:
    """An audit share in % with the count it is over (empty: not counted)."""
    v, n = r.get(f"{system}_{name}"), r.get(f"{system}_audit_{count}")
    return "" if not _finite(v) else f"{100 * float(v):.1f} (of {n})"


def budget_markdown(rows: list[dict], config_hash_: str) -> str:
    """The budget table's Markdown: pass@1 per scale, then what reading did at each."""
    if not rows:
        return "# Budget\n\nNo rows: the budget section names no task.\n"
    seeds = rows[0]["seeds"]
    lines = [
        "# Budget: table 1's trained systems at multiples of its training budget",
        "",
        f"pass@1 (%) [95% interval] on {rows[0]['split']}; {seeds} training seeds per point, each "
        "from table 1's base models of that seed; scale 1 is table 1's own runs. GRPO is matched "
        "in generated tokens to the agon run of its scale and seed. 95% intervals: "
        f"{INTERVAL_TEXT}. Config `{config_hash_}`.",
        "",
        *head(["family", "task", "scale", "steps", *CURVES]),
    ]
    for r in rows:
        cells = [r["family"], r["task"], f"x{r['scale']}", str(r["steps"])]
        lines.append(
            table_row(
                cells + [_estimate(r, f"{s}_pass@1", 100, "{:.1f}", "{:.1f}") for s in CURVES]
            )
        )
    lines += [
        "",
        "## What reading did at each budget (agon.toy.audit; docs/method.md)",
        "",
        "Take-up: of the steps where a draft shows one of the reader's always-wrong habits done "
        "right, the share the reader wrote right (the action the duel would reinforce). "
        "Cascade - reader: the cascade minus its reader alone on the same problems (points, "
        "paired). Luck: right answers with a wrong step. Unanswered drafts: of a cascade's "
        "drafts, the share that hold no answer the task could grade, pooled (each seed's).",
        "",
        *head(
            [
                "family",
                "task",
                "scale",
                *(f"take-up {s} (%)" for s in READERS),
                "agon - agon_single_b",
                "grpo_cascade - grpo_b",
                "agon - agon_independent",
                "luck agon (%)",
                *(f"unanswered drafts {s} (%)" for s in TWINS),
                "agon / max(grpo, grpo_b)",
            ]
        ),
    ]
    for r in rows:
        cells = [r["family"], r["task"], f"x{r['scale']}"]
        cells += [_share(r, s, "take_up", "habit_steps") for s in READERS]
        for key in (
            "agon_minus_reader",
            "grpo_cascade_minus_reader",
            "agon_minus_agon_independent",
        ):
            cells.append(_estimate(r, key, 100, "{:+.1f}", "{:.1f}", missing="n/a"))
        cells.append(_share(r, "agon", "luck", "right"))
        cells += [unanswered_cell(r, s) or "n/a" for s in TWINS]
        cells.append(_estimate(r, "agon_over_max_grpo", 1, "{:.2f}", "{:.2f}", missing="n/a"))
        lines.append(table_row(cells))
    return "\n".join(lines) + "\n"


def plot_budget(rows: list[dict], figures_dir: str | Path, meta: dict) -> list[Path]:
    """pass@1 (top) and the cascades' take-up (bottom) against the budget scale, one column per
    (family, task), with 95% intervals."""
    plt = paper_style()
    keys = list(dict.fromkeys((r["family"], r["task"]) for r in rows))
    fig, axes = grid(plt, 2 * len(keys), 2, 2.2) if len(keys) > 1 else grid(plt, 2, 2, 2.4)
    for i, (f, t) in enumerate(keys):
        mine = sorted(
            (r for r in rows if (r["family"], r["task"]) == (f, t)), key=lambda r: r["scale"]
        )
        x = [r["scale"] for r in mine]
        top, bottom = axes.flat[2 * i], axes.flat[2 * i + 1]
        for s in CURVES:
            y = [100 * _num(r.get(f"{s}_pass@1")) for r in mine]
            lo = [100 * _num(r.get(f"{s}_pass@1_lo")) for r in mine]
            hi = [100 * _num(r.get(f"{s}_pass@1_hi")) for r in mine]
            top.errorbar(
                x, y, yerr=_err(y, lo, hi), marker="o", ms=3, capsize=2, label=s, color=color_of(s)
            )
        for s in READERS:
            y = [100 * _num(r.get(f"{s}_take_up")) for r in mine]
            bottom.plot(x, y, marker="o", ms=3, label=s, color=color_of(s))
        for ax, label in ((top, "pass@1 (%)"), (bottom, "take-up (%)")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(x, [f"x{v}" for v in x])
            ax.set_xlabel("training budget (x table 1's steps)")
            ax.set_ylabel(label)
            ax.set_title(f"{f} / {t}")
            ax.grid(lw=0.3, alpha=0.6)
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[2 * len(keys) :]:
        ax.axis("off")
    fig.tight_layout()
    return save(fig, figures_dir, "budget", meta)


def _num(v: Any) -> float:
    return float(v) if _finite(v) else math.nan


def _err(y: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> list[list[float]]:
    return [[a - b for a, b in zip(y, lo)], [b - a for a, b in zip(y, hi)]]


def build_budget_report(config: dict, layout: Layout) -> dict[str, list[Path]]:
    """Write budget.csv (+ provenance JSON), budget.md and the figure; return what was written."""
    b = budget_section(config)
    rows = build_budget_table(config, layout)
    meta = figure_meta(config, "agon report --budget")
    figs = plot_budget(rows, layout.figures_dir, meta) if rows else []
    inputs, runs = budget_summaries(config, layout)
    return write_table(
        layout.table_files("budget"),
        rows,
        budget_markdown(rows, config_hash(config)),
        config,
        inputs + runs,
        figures=figs,
        provenance={"budget": b, "inputs": inputs, "runs": runs},
    )
