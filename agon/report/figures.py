"""The paper's figures, from table 1's rows and the trainers' metrics: pass@1 per system,
training curves (hard-split pass@1 against each model's own generated tokens) and duel dynamics
(win rates).
Sized and typeset for a two-column paper; every figure is written as PNG and PDF with the
config hash in its metadata. Called by :func:`agon.report.table1.build_report`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # figures are files: no display is needed, or used if there is one
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
from matplotlib.ticker import EngFormatter  # noqa: E402

from agon.methods import COLUMNS
from agon.registry import TRAINERS
from agon.results import FIGURE_FORMATS, Layout, read_jsonl
from agon.training import metrics as mk
from agon.training.logbook import cumulative_tokens

# ----------------------------------------------------------------------------- figures

PAPER_WIDTH_IN = 6.75  # full text width of a two-column paper
FONT_PT = 8  # matches a paper's caption size, so the figure reads at 100%
DPI = 200


def color_of(name: str) -> str:
    """A column's colour (:attr:`agon.methods.Column.color`), or a trained method's: its model
    A's (the registry's row)."""
    if name in COLUMNS:
        return COLUMNS[name].color
    row = TRAINERS.rows.get(name)
    return row.colors[0] if row else "#555555"


def paper_style():
    """pyplot, set to the paper's type sizes (one rcParams update; figures are drawn off screen)."""
    plt.rcParams.update(
        {
            "font.size": FONT_PT,
            "axes.titlesize": FONT_PT + 1,
            "axes.labelsize": FONT_PT,
            "legend.fontsize": FONT_PT - 1,
            "xtick.labelsize": FONT_PT - 1,
            "ytick.labelsize": FONT_PT - 1,
            "pdf.fonttype": 42,
            "svg.hashsalt": "agon",
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return plt


def save(fig, figures_dir: str | Path, name: str, meta: dict) -> list[Path]:
    """Write ``name``.png and .pdf atomically (temp file + rename), with metadata; close ``fig``."""
    out = []
    Path(figures_dir).mkdir(parents=True, exist_ok=True)
    for ext in FIGURE_FORMATS:
        path = Path(figures_dir) / f"{name}.{ext}"
        tmp = path.with_name(f".{path.name}.tmp")
        md = (
            {"Title": name, "Subject": json.dumps(meta)}
            if ext == "pdf"
            else {"Title": name, "Description": json.dumps(meta)}
        )
        fig.savefig(tmp, format=ext, dpi=DPI, bbox_inches="tight", metadata=md)
        os.replace(tmp, path)
        out.append(path)
    plt.close(fig)
    return out


def grid(plt, n: int, ncols: int, height: float):
    """A figure of ``n`` panels in ``ncols`` columns at the paper's width, each ``height`` in."""
    nrows = max(1, math.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAPER_WIDTH_IN, height * nrows), squeeze=False)
    return fig, axes


def plot_pass1(
    rows: list[dict], systems: Sequence[str], figures_dir: str | Path, meta: dict
) -> list[Path]:
    """Bars of pass@1 per system with 95% interval error bars, one panel per (family, task)."""
    plt = paper_style()
    ncols = min(2, len(rows))
    fig, axes = grid(plt, len(rows), ncols, 2.4)
    for ax, r in zip(axes.flat, rows):
        vals = [100 * r[f"{s}_pass@1"] for s in systems]
        err = [
            [100 * (r[f"{s}_pass@1"] - r[f"{s}_pass@1_lo"]) for s in systems],
            [100 * (r[f"{s}_pass@1_hi"] - r[f"{s}_pass@1"]) for s in systems],
        ]
        ax.bar(
            range(len(systems)),
            vals,
            yerr=err,
            capsize=2,
            color=[color_of(s) for s in systems],
            error_kw={"elinewidth": 0.8},
        )
        # the value above each error bar: readable even when a bar is too short to see (e.g. 0)
        for x, (v, up) in enumerate(zip(vals, err[1])):
            ax.text(x, v + up + 1.5, f"{v:.1f}", ha="center", va="bottom", fontsize=FONT_PT - 2)
        ax.set_xticks(range(len(systems)), systems, rotation=40, ha="right")
        ax.set_ylabel(f"pass@1 on {r['split']} (%)")
        ax.set_ylim(0, 100)
        ax.set_title(f"{r['family']} / {r['task']}")
        ax.grid(axis="y", lw=0.3, alpha=0.6)
    for ax in list(axes.flat)[len(rows) :]:
        ax.axis("off")
    fig.tight_layout()
    return save(fig, figures_dir, "pass1_by_system", meta)


def model_tokens(rows: list[dict], model: str) -> list[float]:
    """Tokens ``model`` generated up to and including each row (its drafts and reads:
    ``{model}/drafter/tokens`` + ``{model}/reader/tokens``), the x-axis on which runs whose
    budgets are matched per model end at the same point. Metrics without per-model tokens
    (older runs) fall back to the run's ``tokens_generated``, both models together."""
    keys = [mk.key(mk.ROLE_TOKENS, model=model, role=role) for role in ("drafter", "reader")]
    if not any(k in r for r in rows for k in keys):
        return cumulative_tokens(rows)
    total, out = 0.0, []
    for r in rows:
        for k in keys:
            v = r.get(k)
            if isinstance(v, (int, float)) and math.isfinite(v):
                total += float(v)
        out.append(total)
    return out


def hard_curve(rows: list[dict], model: str) -> tuple[list[float], list[float], list[float]]:
    """(steps, ``model``'s cumulative tokens, hard-split pass@1) at the steps the trainer
    evaluated.

    A probe on row ``s`` was taken before that step's rollout (:mod:`agon.training.probe`),
    so its tokens are those generated by the rows before it: 0 for the base model."""
    toks = [0.0, *model_tokens(rows, model)[:-1]]
    key = mk.key(mk.HARD_PASS1, model=model)
    steps, xs, ys = [], [], []
    for r, tok in zip(rows, toks):
        v = r.get(key)
        if isinstance(v, (int, float)):
            steps.append(float(r.get(mk.STEP, len(steps))))
            xs.append(tok)
            ys.append(float(v))
    return steps, xs, ys


def train_curve(
    rows: list[dict], model: str, smooth: int
) -> tuple[list[float], list[float], list[float]]:
    """(steps, ``model``'s cumulative tokens, smoothed training-draft correctness)."""
    toks = model_tokens(rows, model)
    key = mk.key(mk.ROLE_CORRECT, model=model, role="drafter")
    pts = [
        (float(r.get(mk.STEP, i)), tok, float(r[key]))
        for i, (r, tok) in enumerate(zip(rows, toks))
        if isinstance(r.get(key), (int, float)) and not math.isnan(r[key])
    ]
    return [p[0] for p in pts], [p[1] for p in pts], _smooth([p[2] for p in pts], smooth)


def win_rates(rows: list[dict], model: str) -> tuple[list[float], list[float]]:
    """(steps, win rate of ``model``) per step: the share of its duels it won that step.

    Read from the per-direction outcomes
    (``A->B/duel/drafter_wins``: the share of A's drafts that beat B's reads of them), averaged
    over the directions ``model`` took part in that step. Ties count as no one's win;
    ``model="ties"`` gives the tie rate instead. NaN (no graded pair) is skipped."""
    pattern = re.compile(mk.DIRECTION_PATTERN)
    steps, rates = [], []
    for i, r in enumerate(rows):
        step = float(r.get(mk.STEP, i))
        won = []
        for key, v in r.items():
            m = pattern.match(key)
            if not m or not isinstance(v, (int, float)) or math.isnan(v):
                continue
            if model == "ties" and m["outcome"] == "ties":
                won.append(float(v))
            elif (m["outcome"] == "drafter_wins" and m["drafter"] == model) or (
                m["outcome"] == "reader_wins" and m["reader"] == model
            ):
                won.append(float(v))
        if won:
            steps.append(step)
            rates.append(sum(won) / len(won))
    return steps, rates


def _smooth(y: list[float], window: int) -> list[float]:
    """Trailing moving average: per-step duel outcomes are noisy at small batch sizes."""
    out = []
    for i in range(len(y)):
        part = y[max(0, i - window + 1) : i + 1]
        out.append(sum(part) / len(part))
    return out


def plot_training_curves(
    config: dict,
    layout: Layout,
    methods: Sequence[str],
    figures_dir: str | Path,
    meta: dict,
    smooth: int = 5,
) -> list[Path]:
    """Hard-split pass@1 against step and against the tokens each model generated, every
    trained method (Agon, GRPO, Agon without the contest), per model.

    Two panels (vs step, vs the model's own tokens: with budgets matched per model the curves
    of a model end at the same point) per (family, task); two (family, task) pairs per row
    once there are more than two, so the paper config's six pairs fit one page. If the
    trainers logged no hard-split evaluation at all, the curves show each model's
    correctness on its own training drafts instead, and the figure says so."""
    split = config["eval"]["split"]
    runs = {
        (f["name"], t["name"], m, seed): read_jsonl(
            layout.train_metrics(f["name"], t["name"], m, seed)
        )
        for f in config["families"]
        for t in config["tasks"]
        for m in methods
        for seed in config["seeds"]
    }
    use_hard = any(hard_curve(rows, model)[2] for rows in runs.values() for model in ("A", "B"))

    def curve(rows: list[dict], model: str):
        return hard_curve(rows, model) if use_hard else train_curve(rows, model, smooth)

    plt = paper_style()
    pairs = [(f["name"], t["name"]) for f in config["families"] for t in config["tasks"]]
    per_row = 1 if len(pairs) <= 2 else 2
    nrows = math.ceil(len(pairs) / per_row)
    fig, axes = plt.subplots(
        nrows,
        2 * per_row,
        figsize=(PAPER_WIDTH_IN, (2.3 if per_row == 1 else 2.0) * nrows),
        squeeze=False,
    )
    handles: dict[str, Any] = {}
    for i, (f, t) in enumerate(pairs):
        ax_step, ax_tok = (
            axes[i // per_row, 2 * (i % per_row)],
            axes[i // per_row, 2 * (i % per_row) + 1],
        )
        drawn, top = 0, 0.0
        for m in methods:
            for model, style in (("A", "-"), ("B", "--")):
                for j, seed in enumerate(config["seeds"]):
                    steps, toks, ys = curve(runs[(f, t, m, seed)], model)
                    if not ys:
                        continue
                    kw = {
                        "color": color_of(m),
                        "ls": style,
                        "lw": 1.0,
                        "alpha": 1.0 if j == 0 else 0.5,
                    }
                    if use_hard:
                        kw.update(marker="o", ms=2)
                    (line,) = ax_step.plot(steps, [100 * y for y in ys], **kw)
                    ax_tok.plot(toks, [100 * y for y in ys], **kw)
                    handles.setdefault(f"{m} {model}", line)
                    drawn += 1
                    top = max(top, 100 * max(ys))
        for ax, xl in ((ax_step, "training step"), (ax_tok, "tokens generated by the model")):
            ax.set_xlabel(xl)
            ax.set_ylabel("pass@1 (%)" if use_hard else "correct drafts (%)")
            # from 0, so gains are not exaggerated; a little below, so a curve at 0 stays visible
            hi = min(100.0, max(10.0, 1.15 * top))
            ax.set_ylim(-0.02 * hi, hi)
            ax.set_title(f"{f} / {t}")
            ax.grid(lw=0.3, alpha=0.6)
            if not drawn:
                ax.text(
                    0.5,
                    0.5,
                    "no curves\nin metrics.jsonl",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                )
        # 100000, 120000, ... run into each other at paper size; 100k, 120k do not
        ax_tok.xaxis.set_major_formatter(EngFormatter(sep=""))
    for ax in axes.flat[2 * len(pairs) :]:
        ax.axis("off")
    what = (
        f"{split}-split pass@1 during training"
        if use_hard
        else f"correctness of each model's own training drafts ({smooth}-step mean; "
        f"no {split}-split evaluations were logged)"
    )
    if handles:
        fig.legend(
            handles.values(),
            handles.keys(),
            loc="upper center",
            ncol=len(handles),
            frameon=False,
            title=f"{what}\nmodel A solid, B dashed; seeds after the first faded",
        )
    legend_in = 0.6  # room for the two-line legend above the panels
    fig.tight_layout(rect=(0, 0, 1, 1 - legend_in / fig.get_size_inches()[1]))
    return save(fig, figures_dir, "training_curves", meta)


def plot_duel_dynamics(
    config: dict, layout: Layout, figures_dir: str | Path, meta: dict, smooth: int
) -> list[Path]:
    """Each Agon model's duel win rate over training (ties count as neither model's win)."""
    plt = paper_style()
    pairs = [(f["name"], t["name"]) for f in config["families"] for t in config["tasks"]]
    ncols = min(2, len(pairs))
    fig, axes = grid(plt, len(pairs), ncols, 2.3)
    for ax, (f, t) in zip(axes.flat, pairs):
        drawn = 0
        for j, seed in enumerate(config["seeds"]):
            rows = read_jsonl(layout.train_metrics(f, t, "agon", seed))
            for model, color, label in (
                ("A", "#d62728", "model A wins"),
                ("B", "#1f77b4", "model B wins"),
                ("ties", "#9e9e9e", "ties"),
            ):
                steps, rates = win_rates(rows, model)
                if rates:
                    ax.plot(
                        steps,
                        [100 * r for r in _smooth(rates, smooth)],
                        color=color,
                        lw=1.0,
                        ls=":" if model == "ties" else "-",
                        alpha=1.0 if j == 0 else 0.5,
                        label=label if j == 0 else None,
                    )
                    drawn += 1
        ax.set_xlabel("training step")
        ax.set_ylabel(f"share of duels (%), {smooth}-step mean")
        ax.set_ylim(-2, 102)  # curves at 0 or 100 stay visible
        ax.set_title(f"{f} / {t}")
        ax.grid(lw=0.3, alpha=0.6)
        if drawn:
            ax.legend(frameon=False)
        else:
            ax.text(
                0.5,
                0.5,
                "no duel outcomes\nin metrics.jsonl",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
    for ax in list(axes.flat)[len(pairs) :]:
        ax.axis("off")
    fig.tight_layout()
    return save(fig, figures_dir, "duel_dynamics", meta)
