"""results/related.csv: the methods published beside Agon, next to GRPO and Agon, at equal cost.

``snakemake --cores all results/related.csv`` trains every method the config's
``related.methods`` names (:data:`agon.methods.RELATED`: each trains A and B alone) under the
matched compute of table 1 (``train.budget``: each model runs until it has generated what the
same model generated in the Agon run of its seed), evaluates each as GRPO is evaluated (A alone,
B alone, the A -> B cascade of the two), and writes:

- ``results/related.csv`` (+ ``related.provenance.json``): one row per (family, task), the
  columns of table 1 for these systems (pass@1 with its two-level interval over seeds and
  problems, each model's gain over its own base, training and evaluation compute), and for each
  related method ``m``: ``agon_over_{m}_cascade`` (Agon's cascade over the two models ``m``
  trained, paired interval), ``{m}_cascade_over_grpo_cascade``, and its compute in full:
  ``{m}_extra_tokens`` (the tokens its helpers cost: a teacher's, an anchor's; see
  :data:`EXTRA_TOKENS`) and ``{m}_total_tokens`` (the policies' generated tokens plus those);
- ``results/related.md``: the same for reading;
- ``figures/related_compute.{png,pdf}``: pass@1 against total training tokens, every method.

The default target, ``results/table1.csv``, is not touched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agon.methods import COLUMNS, RELATED, columns_for_methods, trained_methods_for
from agon.report.compare import RNG, SeedRates, paired_replicates, ratio_columns
from agon.report.figures import color_of, grid, paper_style, save
from agon.report.render import COMPARISONS, head, short, table_markdown, table_row
from agon.report.table1 import build_table, comparison_columns
from agon.report.write import figure_meta, summaries_read, write_table
from agon.results import Layout
from agon.training.metrics import MODELS

# per model keys of a training summary (``{model}/{key}``) that count tokens a method spent on
# something other than generating its policies' samples: a teacher's generated or scored tokens
# (Cliff's marks, OPD's log-probabilities), and GAR's extra forwards (its anchors' tokens, and
# its samples forwarded again for their hidden states). A forwarded token costs about what a
# generated one does in a forward pass; the table counts both as tokens and says which is which
EXTRA_TOKENS = ("teacher_tokens", "gar_anchor_tokens", "gar_rollout_tokens")


def related_methods(config: dict) -> list[str]:
    """The config's ``related.methods``, checked against table 1's method names."""
    methods = list(config["related"]["methods"])
    columns_for_methods(methods)  # raises on an unknown name
    return methods


def related_comparisons(
    p: Mapping[str, float],
    rates: Mapping[str, SeedRates | None],
    n_boot: int,
    row: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Table 1's comparisons, and each related method's cascade against Agon's and GRPO's."""
    out = comparison_columns(p, rates, n_boot)

    def paired(names: list[str]):
        return paired_replicates([rates[n] for n in names], n_boot, RNG["related"])

    for m in RELATED:
        cascade = f"{m}_cascade"
        if cascade not in p:
            continue
        if "agon" in p:
            key = f"agon_over_{cascade}"
            out.update(ratio_columns(key, "agon", cascade, p, paired(["agon", cascade])))
        if "grpo_cascade" in p:
            key = f"{cascade}_over_grpo_cascade"
            pair = [cascade, "grpo_cascade"]
            out.update(ratio_columns(key, cascade, "grpo_cascade", p, paired(pair)))
    return out


def comparison_titles(methods: list[str]) -> list[tuple[str, str, str]]:
    """The Markdown columns of :func:`related_comparisons` for ``methods``."""
    out = [c for c in COMPARISONS if c[0] in ("agon_over_grpo", "agon_over_grpo_cascade")]
    for m in (x for x in RELATED if x in methods):
        out.append((f"agon_over_{m}_cascade", f"agon / {m}_cascade", "ratio"))
        out.append((f"{m}_cascade_over_grpo_cascade", f"{m}_cascade / grpo_cascade", "ratio"))
    return out


def extra_tokens(summaries: list[str | Path]) -> float | None:
    """Mean per seed of the tokens a run's helpers cost (:data:`EXTRA_TOKENS`, both models);
    0 for a run whose summary records none (GRPO, Agon: no helper)."""
    per_seed = []
    for path in summaries:
        s = json.loads(Path(path).read_text())
        per_seed.append(sum(float(s.get(f"{m}/{k}") or 0.0) for m in MODELS for k in EXTRA_TOKENS))
    return sum(per_seed) / len(per_seed) if per_seed else None


def build_related_table(config: dict, layout: Layout) -> list[dict]:
    """One row per (family, task): :func:`agon.report.table1.build_table` on
    ``related.methods`` with :func:`related_comparisons` and each trained method's full
    compute."""
    methods = related_methods(config)
    cfg = {**config, "methods": methods}
    rows = build_table(cfg, layout, compare=related_comparisons)
    trained = trained_methods_for(columns_for_methods(methods))
    seeds = [int(s) for s in config["seeds"]]
    for row in rows:
        f, t = row["family"], row["task"]
        for m in trained:
            extra = extra_tokens([layout.train_summary(f, t, m, s) for s in seeds])
            own = row.get(f"{m}_train_tokens")
            row[f"{m}_extra_tokens"] = extra
            known = own is not None and extra is not None
            row[f"{m}_total_tokens"] = own + extra if known else None
    return rows


def related_markdown(rows: list[dict], methods: list[str], chash: str) -> str:
    """The related table for reading: table 1's rendering of these systems, then each trained
    method's compute in full."""
    systems = columns_for_methods(methods)
    trained = trained_methods_for(systems)
    text = table_markdown(
        rows, systems, chash, title="Related methods", comparisons=comparison_titles(methods)
    )
    lines = [
        "",
        "## Total training compute (mean per seed; tokens of both models)",
        "",
        "Policy tokens are what the trained models generated; helper tokens are what a "
        "teacher generated or scored and what an anchor forwarded (0: the method has none).",
        "",
        *head(["family", "task", "method", "policy tokens", "helper tokens", "total tokens"]),
    ]
    for r in rows:
        for m in trained:
            cells = [r.get(f"{m}_train_tokens"), r.get(f"{m}_extra_tokens")]
            cells.append(r.get(f"{m}_total_tokens"))
            lines.append(table_row([r["family"], r["task"], m, *(short(v) for v in cells)]))
    return text + "\n".join(lines) + "\n"


# a method's marker in the compute figure (others cycle through the rest)
MARKERS = {"grpo": "o", "agon": "*", "agon_independent": "P"}
OTHER_MARKERS = ("s", "D", "^", "v", "X", "h")


def method_points(systems: Sequence[str], method: str) -> dict[str, str]:
    """The columns of a trained ``method`` the compute figure plots: its A -> B cascade and
    model A alone (``{"cascade": column, "alone": column}``, those present in ``systems``)."""
    out = {}
    for s in systems:
        c = COLUMNS[s]
        if c.train != method:
            continue
        if c.kind == "cascade" and c.drafter == "A":
            out.setdefault("cascade", s)
        elif c.kind == "single" and c.model == "A":
            out.setdefault("alone", s)
    return out


def plot_related_compute(
    rows: list[dict],
    systems: Sequence[str],
    trained: Sequence[str],
    figures_dir: str | Path,
    meta: dict,
) -> list[Path]:
    """pass@1 against total training tokens (both models, a teacher's and an anchor's
    included), one panel per (family, task): each trained method's A -> B cascade (filled) and
    model A alone (open), with 95% interval bars; the untrained base model A and base cascade
    as horizontal lines."""
    plt = paper_style()
    ncols = min(2, len(rows))
    fig, axes = grid(plt, len(rows), ncols, 2.6)
    others = iter(OTHER_MARKERS * 4)
    markers = {m: MARKERS.get(m) or next(others) for m in trained}
    for ax, r in zip(axes.flat, rows):
        for base, style in (("base", ":"), ("base_cascade", "--")):
            if r.get(f"{base}_pass@1") is not None:
                ax.axhline(100 * r[f"{base}_pass@1"], ls=style, lw=0.8, color="#777", label=base)
        for m in trained:
            x = r.get(f"{m}_total_tokens")
            if x is None:
                continue
            color = color_of(m)
            for kind, col in method_points(systems, m).items():
                v, lo, hi = (r.get(f"{col}_pass@1{k}") for k in ("", "_lo", "_hi"))
                if v is None:
                    continue
                err = [[100 * (v - lo)], [100 * (hi - v)]] if lo is not None else None
                ax.errorbar(
                    [x],
                    [100 * v],
                    yerr=err,
                    fmt=markers[m],
                    ms=6 if kind == "cascade" else 5,
                    mfc=None if kind == "cascade" else "none",
                    color=color,
                    capsize=2,
                    elinewidth=0.8,
                    label=col,
                )
        ax.set_xscale("log")
        ax.set_xlabel("training tokens, both models, helpers included")
        ax.set_ylabel(f"pass@1 on {r['split']} (%)")
        ax.set_ylim(0, 100)
        ax.set_title(f"{r['family']} / {r['task']}")
        ax.grid(lw=0.3, alpha=0.6)
    for ax in list(axes.flat)[len(rows) :]:
        ax.axis("off")
    handles: dict[str, Any] = {}  # one legend for all panels, below them, clear of the points
    for ax in list(axes.flat)[: len(rows)]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(
        handles.values(),
        handles.keys(),
        loc="lower center",
        ncol=min(len(handles), 6),
        frameon=False,
        title="filled: the method's A -> B cascade; open: its model A alone",
    )
    rows_of_legend = -(-len(handles) // 6) + 1  # entries' rows + the title
    legend_in = 0.18 * rows_of_legend
    fig.set_size_inches(fig.get_size_inches()[0], fig.get_size_inches()[1] + legend_in)
    fig.tight_layout(rect=(0, legend_in / fig.get_size_inches()[1], 1, 1))
    return save(fig, figures_dir, "related_compute", meta)


def build_related_report(config: dict, layout: Layout) -> dict[str, list[Path]]:
    """Write related.csv (+ provenance JSON), related.md and the compute figure."""
    methods = related_methods(config)
    systems = columns_for_methods(methods)
    trained = trained_methods_for(systems)
    rows = build_related_table(config, layout)
    inputs, runs = summaries_read(config, systems, layout.eval_summary, layout.train_summary)
    meta = figure_meta(config, "agon report --related")
    figures = plot_related_compute(rows, systems, trained, layout.figures_dir, meta)
    return write_table(
        layout.table_files("related"),
        rows,
        related_markdown(rows, methods, meta["config_hash"]),
        config,
        inputs + runs,
        figures=figures,
        provenance={"inputs": inputs, "runs": runs},
    )
