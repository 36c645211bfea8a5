"""The regime in the report: whether table 1's world can show the paper's claims.

Two places read the criteria and ceilings of :mod:`agon.regime`:

- ``results/regime.csv`` (``agon report --regime``, :func:`build_regime_report`): the
  baselines alone (each base model, MoA, the untrained cascade, GRPO at a budget fixed up front)
  on ``regime.split``, built before any ``agon`` run of a new world, so that git history shows
  the world was fixed first;
- table 1 (:func:`agon.report.table1.table1_comparisons`, :func:`regime_markdown`): the same
  criteria on table 1's
  own split and evaluations, each ratio's ceiling beside it (in the CSV, the columns after the
  ratio's), and the "eight times" claim in difference form, ``(agon - base) - k (moa - base)``,
  with its paired interval, since a ratio over a gain near 0 is unstable.

Columns: ``regime_{criterion}`` (value), ``_lo``/``_hi`` (95% interval: a single system's own,
as its column has it; a difference's from one paired two-level bootstrap of every system the
criteria read), ``_min``/``_max`` (its bounds), ``_met`` (on the value); ``regime_met``; per
comparison ``{key}_ceiling``, ``{key}_claim``, ``{key}_verdict``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agon.config import config_hash, regime_section
from agon.regime import (
    DIFFERENCE,
    RATIOS,
    REGIME_SYSTEMS,
    ceilings,
    claim_reading,
    criteria,
    moa_gain_no_bar,
    planned_grpo_steps,
    readers_note,
    share_criteria,
)
from agon.report.audit_columns import audit_counts
from agon.report.compare import (
    RNG,
    SeedRates,
    difference_columns,
    paired_replicates,
    rate_stats,
    systems_rows,
)
from agon.report.render import INTERVAL_TEXT, head, table_row
from agon.report.write import summaries_read, write_table
from agon.results import Layout
from agon.stats import NOT_MEANINGFUL
from agon.toy.sft_data import reader_targets

# how the Markdown names each comparison whose ceiling it gives
TITLES = {
    **{r.key: r.title for r in RATIOS},
    "agon_gain_over_moa_gain": "(agon-base) / (moa-base)",
    DIFFERENCE: "(agon-base) - {k} (moa-base), points",
}
# the criteria read as points (differences) rather than as a system's pass@1
POINTS = ("gain", "gap")


def regime_columns(
    p: Mapping[str, float],
    rates: Mapping[str, SeedRates | None],
    n_boot: int,
    regime: Mapping,
    counts: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The criteria, the ceilings and (with ``agon``) the difference form of one row, from the
    systems' pass@1 ``p`` and per-(seed, problem) ``rates``, and the criteria on shares from
    the systems' audit ``counts`` (:func:`agon.report.audit_columns.audit_counts`)."""
    present = [s for s in REGIME_SYSTEMS if s in p]
    intervals = {
        s: (st["pass@1_lo"], st["pass@1_hi"])
        for s in present
        if rates.get(s) is not None
        for st in [rate_stats(s, rates[s], n_boot)]
    }
    reps = paired_replicates([rates.get(s) for s in present], n_boot, RNG["regime"])
    joint = dict(zip(present, reps)) if reps is not None else None
    out: dict[str, Any] = {}
    found = criteria(p, regime, joint, intervals) + share_criteria(counts or {}, regime)
    for c in found:
        key = f"regime_{c.name}"
        out |= {key: c.value, f"{key}_lo": c.lo, f"{key}_hi": c.hi}
        out |= {f"{key}_min": c.min, f"{key}_max": c.max, f"{key}_met": c.met}
    out["regime_met"] = all(c.met for c in found) if found else None
    for c in ceilings(p, regime):
        out |= {f"{c.key}_ceiling": c.ceiling, f"{c.key}_claim": c.claim}
        out[f"{c.key}_verdict"] = c.verdict
    if {"agon", "moa", "base"} <= set(p):
        out |= difference_form(p, rates, n_boot, regime["claims"]["agon_gain_over_moa_gain"])
    return out


def difference_form(
    p: Mapping[str, float], rates: Mapping[str, SeedRates | None], n_boot: int, k: float
) -> dict[str, Any]:
    """``(agon - base) - k (moa - base)`` with its paired interval and MDE: above 0, Agon's
    gain is more than ``k`` times MoA's; computed whatever MoA's gain, unlike the ratio, but
    not meaningful (its note says so) when MoA's gain is not positive."""
    names = ("agon", "moa", "base")
    reps = paired_replicates([rates.get(s) for s in names], n_boot, RNG["eight_times"])
    value = {"d": (p["agon"] - p["base"]) - k * (p["moa"] - p["base"]), "zero": 0.0}
    pair = None
    if reps is not None:
        agon, moa, base = reps
        pair = [(agon - base) - k * (moa - base), 0.0 * agon]
    out = difference_columns(DIFFERENCE, "d", "zero", value, pair, f"gain {k:g} times MoA's")
    if p["moa"] - p["base"] <= 0:
        out[f"{DIFFERENCE}_note"] = moa_gain_no_bar(p["moa"] - p["base"], k)
    elif out[f"{DIFFERENCE}_hi"] is not None and out[f"{DIFFERENCE}_hi"] < 0:
        out[f"{DIFFERENCE}_note"] = (
            f"below {k:g} times: Agon's gain is shown smaller than {k:g} times MoA's "
            "(the 95% interval is below 0)"
        )
    return out


# ----------------------------------------------------------------------------- Markdown


def _bound(name: str, lo: Any, hi: Any) -> str:
    unit = "" if name.endswith(POINTS) else "%"
    if lo is not None and hi is not None:
        return f"{100 * lo:.1f}{unit} to {100 * hi:.1f}{unit}"
    return f">= {100 * lo:.1f}" if lo is not None else f"<= {100 * hi:.1f}"


def criteria_lines(rows: Sequence[dict]) -> list[str]:
    """One line per (row, criterion): bound, value [95%], met; then each row's verdict."""
    lines = [*head(["family", "task", "criterion", "bound", "value [95%]", "met"])]
    verdicts = []
    for r in rows:
        names = [
            k[len("regime_") : -len("_met")]
            for k in r
            if k.startswith("regime_") and k.endswith("_met") and k != "regime_met"
        ]
        for name in names:
            key = f"regime_{name}"
            v, lo, hi = r[key], r.get(f"{key}_lo"), r.get(f"{key}_hi")
            cell = f"{100 * v:.1f}" + (
                f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None else ""
            )
            met = "yes" if r[f"{key}_met"] else "**no**"
            lines.append(
                table_row(
                    [
                        r["family"],
                        r["task"],
                        name,
                        _bound(name, r[f"{key}_min"], r[f"{key}_max"]),
                        cell,
                        met,
                    ]
                )
            )
        failed = [n for n in names if not r[f"regime_{n}_met"]]
        verdicts.append(
            f"- {r['family']}/{r['task']}: "
            + (
                "every criterion met."
                if not failed
                else f"not in the regime: {', '.join(failed)} not met."
            )
        )
    return [*lines, "", *verdicts]


def ceiling_lines(rows: Sequence[dict], with_values: bool) -> list[str]:
    """Per row and comparison: its value [95%] (``with_values``), its ceiling, the claim, the
    verdict and (``with_values``) what the interval says of the claim
    (:func:`agon.regime.claim_reading`)."""
    cols = [
        "family",
        "task",
        "comparison",
        *(["value [95%]"] if with_values else []),
        "ceiling",
        "paper's claim",
        "verdict",
        *(["the claim against the 95% interval"] if with_values else []),
    ]
    lines = head(cols)
    for r in rows:
        k = r.get("agon_gain_over_moa_gain_claim")
        for key, title in TITLES.items():
            if f"{key}_verdict" not in r:
                continue
            points = key == DIFFERENCE
            scale, fmt = (100, "{:+.1f}") if points else (1, "{:.2f}")
            cells = [r["family"], r["task"], title.format(k=f"{k:g}" if k else "k")]
            if with_values:
                v, lo, hi = (r.get(f"{key}{s}") for s in ("", "_lo", "_hi"))
                cell = "n/a" if v is None else fmt.format(scale * v)
                if lo is not None:
                    cell += f" [{fmt.format(scale * lo)}, {fmt.format(scale * hi)}]"
                if r.get(f"{key}_note"):
                    cell += f" *{r[f'{key}_note'].split(':')[0]}*"
                if r.get(f"{key}_mde") is not None:
                    cell += f" (MDE {fmt.format(scale * r[f'{key}_mde']).lstrip('+')})"
                cells.append(cell)
            top = r.get(f"{key}_ceiling")
            cells.append("n/a" if top is None else fmt.format(scale * top))
            claim = r[f"{key}_claim"]
            cells.append(f">= {scale * claim:g}" if points else f"{claim:g}")
            cells.append(r[f"{key}_verdict"])
            if with_values:
                lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
                meaningless = str(r.get(f"{key}_note") or "").startswith(NOT_MEANINGFUL)
                cells.append(NOT_MEANINGFUL if meaningless else claim_reading(lo, hi, claim))
            lines.append(table_row(cells))
    return lines


def regime_markdown(rows: Sequence[dict], config: dict, with_values: bool = True) -> str:
    """The regime section of table 1 (``with_values``: the comparisons' own values beside their
    ceilings) or the body of results/regime.md."""
    split = rows[0]["split"] if rows else ""
    lines = [
        "## Regime: can this world show the paper's claims?",
        "",
        "The criteria on the baselines (the config's `regime` section, `agon/regime.py`) on "
        f"the `{split}` split, pass@1 in % (gains and gaps in points), each met or not on its "
        f"point estimate; 95% intervals: {INTERVAL_TEXT} (a difference's paired).",
        "",
        *criteria_lines(rows),
        "",
        "Ceilings: the largest value this world allows each comparison (`agon / grpo`: 100 / "
        "grpo; the gain ratio: (100 - base) / (moa - base); its difference form: (100 - base) - "
        "k (moa - base)). Where a ceiling is below the paper's claim, the claim cannot be shown "
        "in this world, whatever Agon does."
        + (
            " Where it is above, the last column reads the comparison's 95% interval against "
            "the claim: shown (at or above it), excluded (below it) or neither."
            if with_values
            else ""
        )
        + " Where MoA's gain over base is not positive, neither form of the eight times says "
        "anything (the ratio is not defined; k times a loss is no bar, so the difference is not "
        "meaningful).",
        "",
        *ceiling_lines(rows, with_values),
        *oracle_lines(rows),
    ]
    note = readers_note(config)
    if note:
        lines += ["", f"Readers: {note}"]
    return "\n".join(lines) + "\n"


ORACLE_SYSTEMS = ("base_cascade", "grpo_cascade", "agon", "agon_independent")


def oracle_lines(rows: Sequence[dict]) -> list[str]:
    """The reachable ceiling of the cascade in this world, beside the ratios': per row, the
    oracle reader's pass@1 (:mod:`agon.toy.audit`) on each cascade's drafts, where counted."""
    found = [
        (r, [(s, r[f"{s}_oracle"]) for s in ORACLE_SYSTEMS if r.get(f"{s}_oracle") is not None])
        for r in rows
    ]
    found = [(r, cells) for r, cells in found if cells]
    if not found:
        return []
    lines = [
        "",
        "Reachable by reading: the pass@1 of an oracle reader, with the reader's habits, that "
        "keeps every right step of a cascade's drafts and writes the rest itself (what a reader "
        "that had learned to read would score with those drafters; agon.toy.audit):",
        "",
    ]
    for r, cells in found:
        text = ", ".join(f"{s}'s drafts {100 * v:.1f}%" for s, v in cells)
        lines.append(f"- {r['family']}/{r['task']}: {text}.")
    return lines


# ----------------------------------------------------------------------------- results/regime.csv


def build_regime_table(config: dict, layout: Layout) -> list[dict]:
    """One row per (family, task): each regime system's pass@1 on the regime's split (its
    evaluations under ``layout.regime_eval_*``), the criteria and the ceilings."""
    regime = regime_section(config)
    n_boot = int(config["eval"]["bootstrap"])
    mode = reader_targets((config.get("toy") or {}).get("reader") or {})

    def opening(fam: dict) -> dict[str, Any]:  # the columns after family, task, split, seeds
        reader = mode if fam.get("toy") else ""
        return {"grpo_steps": planned_grpo_steps(config), "reader_targets": reader}

    found = systems_rows(
        config,
        REGIME_SYSTEMS,
        layout.regime_eval_samples,
        layout.regime_eval_summary,
        regime["split"],
        label="/regime",
        head=opening,
    )
    return [
        row | regime_columns(p, rates, n_boot, regime, audit_counts(row, REGIME_SYSTEMS))
        for _, row, p, rates in found
    ]


def build_regime_report(config: dict, layout: Layout) -> dict[str, list]:
    """Write results/regime.csv (+ provenance JSON) and regime.md."""
    rows = build_regime_table(config, layout)
    inputs, runs = summaries_read(
        config, REGIME_SYSTEMS, layout.regime_eval_summary, layout.regime_train_summary
    )
    systems = " | ".join(REGIME_SYSTEMS)
    lines = [
        f"# Regime: table 1's baselines on {rows[0]['split'] if rows else ''}, before any agon run",
        "",
        f"pass@1 (%) [95% interval] of | {systems} |; GRPO trained "
        f"{rows[0]['grpo_steps'] if rows else ''} steps per model (the duel's planned "
        "completions per model; table 1's GRPO is matched to the agon run it waits for).",
        "",
        *head(["family", "task", *REGIME_SYSTEMS]),
    ]
    for r in rows:
        cells = [
            f"{100 * r[f'{s}_pass@1']:.1f} [{100 * r[f'{s}_pass@1_lo']:.1f}, "
            f"{100 * r[f'{s}_pass@1_hi']:.1f}]"
            for s in REGIME_SYSTEMS
        ]
        lines.append(table_row([r["family"], r["task"], *cells]))
    text = "\n".join(lines) + "\n\n" + regime_markdown(rows, config, with_values=False)
    text += f"\nConfig hash: {config_hash(config)}.\n"
    return write_table(
        layout.table_files("regime"),
        rows,
        text,
        config,
        inputs + runs,
        provenance={"inputs": inputs, "runs": runs},
    )
