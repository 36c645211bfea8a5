"""Table 1 as text: the CSV every number is read from, and its Markdown rendering.

The rows come from :func:`agon.report.build_table`; nothing here computes a number, it only
formats what the rows hold (``NA`` for a number that is not defined).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

from agon.methods import COLUMNS, GAINS


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.12g}"  # full precision in the CSV; the Markdown rounds for reading
    return str(v)


def _short(v: Any) -> str:
    """A number for reading (3 significant digits); the CSV keeps full precision."""
    return f"{v:.3g}" if isinstance(v, float) and math.isfinite(v) else _fmt(v)


def table_csv(rows: list[dict]) -> str:
    """The rows as CSV text (columns in first-seen order; empty cell = not defined)."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _fmt(r.get(k)) for k in cols})
    return buf.getvalue()


def table_markdown(rows: list[dict], systems: Sequence[str], config_hash_: str) -> str:
    """A readable rendering: pass@1 [95% CI] per system, the ratios, then compute."""

    def pct(r: dict, s: str) -> str:
        v, lo, hi = r.get(f"{s}_pass@1"), r.get(f"{s}_pass@1_lo"), r.get(f"{s}_pass@1_hi")
        return "" if v is None else f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    def ratio(r: dict, k: str) -> str:
        v = r.get(k)
        if v is None:
            return r.get(f"{k}_note") or "n/a"
        lo, hi = r.get(f"{k}_lo"), r.get(f"{k}_hi")
        if lo is not None and math.isinf(lo):
            return f"{v:.2f} [unbounded: denominator's interval holds 0]"
        return f"{v:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else "")

    lines = ["# Table 1: pass@1 (%) [95% bootstrap interval over problems]", ""]
    head = [
        "family",
        "task",
        *systems,
        "agon / grpo",
        "agon / grpo_cascade",
        "(agon-base) / (moa-base)",
    ]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r["family"],
            r["task"],
            *(pct(r, s) for s in systems),
            ratio(r, "agon_over_grpo"),
            ratio(r, "agon_over_grpo_cascade"),
            ratio(r, "agon_gain_over_moa_gain"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    gain_rows = [
        (r, model, base, ts)
        for r in rows
        for model, base, ts in GAINS
        if r.get(f"{base}_pass@1") is not None
    ]
    if gain_rows:
        lines += [
            "",
            "## Each model alone: trained vs. its own base "
            "(pass@1 %, gain in points [paired 95% interval])",
            "",
            "| family | task | model | base | grpo | agon (alone) |",
            "|---|---|---|---|---|---|",
        ]
        for r, model, base, ts in gain_rows:
            cells = [r["family"], r["task"], model, pct(r, base)]
            for s in ts:
                g, lo, hi = r.get(f"{s}_gain"), r.get(f"{s}_gain_lo"), r.get(f"{s}_gain_hi")
                gain = (
                    ""
                    if g is None
                    else f"; {100 * g:+.1f}"
                    + (f" [{100 * lo:+.1f}, {100 * hi:+.1f}]" if lo is not None else "")
                )
                cells.append(
                    f"{100 * r[f'{s}_pass@1']:.1f}{gain}"
                    if r.get(f"{s}_pass@1") is not None
                    else ""
                )
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Compute (mean per seed)",
        "",
        "| family | task | system | eval tokens | eval wall h | train tokens | train wall h |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for s in systems:
            m = COLUMNS[s].train
            tt, tw = (r.get(f"{m}_train_tokens"), r.get(f"{m}_train_wall_h")) if m else (0, 0)
            cells = [
                r["family"],
                r["task"],
                s,
                *(
                    _short(v)
                    for v in (r.get(f"{s}_eval_tokens"), r.get(f"{s}_eval_wall_h"), tt, tw)
                ),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    n = rows[0].get("n_problems") if rows else None
    lines += [
        "",
        f"Split: {rows[0]['split'] if rows else ''}; problems per row: {n}; "
        f"seeds: {rows[0]['seeds'] if rows else ''}; config hash: {config_hash_}. "
        "Trained systems' train columns are those of their training run "
        "(grpo_b and grpo_cascade share grpo's; agon_rev and agon_single(_b) share agon's).",
        "",
    ]
    return "\n".join(lines)
