"""Table 1 and the ablations table as text: the CSV every number is read from, and its Markdown
rendering.

The rows come from :func:`agon.report.table1.build_table` and
:func:`agon.report.ablations.build_ablation_table`; nothing here computes a number, it only
formats what the rows hold. A number that is not meaningful has a ``{key}_note`` in its row: its
Markdown cell says so in a word and refers to a numbered note under the table that gives the
reason.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from typing import Any

from agon.methods import BUDGET_MATCHED, BUDGET_REFERENCE, COLUMNS, GAINS, trained_methods_for
from agon.regime import RATIOS
from agon.training.metrics import MODELS

INTERVAL_TEXT = (
    "a two-level bootstrap over training seeds and problems, each replicate resampling the "
    "problems (the same draw for every system of a comparison) and, per system, its training "
    "seeds"
)


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.12g}"  # full precision in the CSV; the Markdown rounds for reading
    return str(v)


def short(v: Any) -> str:
    """A number for reading (3 significant digits, whole with thousands separators from 1000
    up); the CSV keeps full precision."""
    if not (isinstance(v, float) and math.isfinite(v)):
        return _fmt(v)
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


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


class _Notes:
    """Numbered notes: a cell refers to one, the lines under its table give the reasons."""

    def __init__(self) -> None:
        self.count = 0
        self.pending: list[str] = []

    def ref(self, where: str, note: str | None) -> str:
        """`` *tag* (note N)`` for a note (its tag: the words before the first colon)."""
        if not note:
            return ""
        self.count += 1
        self.pending.append(f"{self.count}. {where}: {note}")
        return f" *{note.split(':')[0]}* (note {self.count})"

    def flush(self) -> list[str]:
        """The lines of the notes referred to since the last flush."""
        lines, self.pending = (["", "Notes:", "", *self.pending] if self.pending else []), []
        return lines


def _estimate(r: dict, key: str, scale: float, fmt: str, mde: str, missing: str = "") -> str:
    """``value [lo, hi] (MDE m)`` of the row's ``key``, each part the row has, each number
    ``scale`` times its column, the value and interval as ``fmt``, the MDE as ``mde`` (a
    size: no sign); ``missing`` for the value the row lacks."""
    v, lo, hi = r.get(key), r.get(f"{key}_lo"), r.get(f"{key}_hi")
    cell = missing if v is None else fmt.format(scale * v)
    if lo is not None:
        cell += f" [{fmt.format(scale * lo)}, {fmt.format(scale * hi)}]"
    if _finite(r.get(f"{key}_mde")):
        cell += f" (MDE {mde.format(scale * r[f'{key}_mde'])})"
    return cell


def _pct(r: dict, prefix: str) -> str:
    """A system's pass@1 in % with its interval; empty where the row lacks it."""
    key = f"{prefix}pass@1"
    return "" if r.get(key) is None else _estimate(r, key, 100, "{:.1f}", "{:.1f}")


def _points(r: dict, key: str, notes: _Notes, where: str) -> str:
    """A difference in points with its interval, and its note."""
    cell = _estimate(r, key, 100, "{:+.1f}", "{:.1f}")
    return (cell or "n/a") + notes.ref(where, r.get(f"{key}_note"))


def _ratio(r: dict, key: str, notes: _Notes, where: str) -> str:
    """A ratio with its interval, its ceiling in this world, and its notes."""
    cell = _estimate(r, key, 1, "{:.2f}", "{:.2f}", missing="n/a")
    if _finite(r.get(f"{key}_ceiling")):  # the largest value this world allows (agon.regime)
        cell += f" (ceiling {float(r[f'{key}_ceiling']):.2f})"
    shown = r.get(f"{key}_verdict", "").startswith("cannot")
    verdict = f"{r[f'{key}_verdict']}: the paper claims {r[f'{key}_claim']:g}" if shown else ""
    return cell + notes.ref(where, r.get(f"{key}_note")) + notes.ref(where, verdict)


def _finite(v: Any) -> bool:
    """A number that is neither missing nor NaN (a CSV round trip gives strings)."""
    try:
        return v is not None and v != "" and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _seed_note(rows: list[dict]) -> str:
    """How the untrained systems' intervals were made: over each training seed's own base
    models (a toy world that pretrains a pair per seed), or over problems only (one pair)."""
    n_base = [r.get("base_n_seeds") for r in rows if r.get("base_n_seeds") is not None]
    if n_base and min(int(n) for n in n_base) > 1:
        return (
            "Each training seed starts from base models pretrained with that seed, and the "
            "untrained systems are evaluated on every seed's pair, so every interval covers the "
            "base models' draw; systems evaluated at the same seeds are paired seed by seed."
        )
    return (
        "An untrained system is evaluated at one seed (one pair of base models), so only its "
        "problems vary: the intervals do not cover the base models' draw."
    )


def table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def head(cells: Sequence[str]) -> list[str]:
    return [table_row(cells), "|" + "---|" * len(cells)]


def section(title: str, cells: Sequence[str]) -> list[str]:
    """A Markdown section: a blank line, its ``## title``, a blank line, its table's head."""
    return ["", f"## {title}", "", *head(cells)]


def _seed_keys(rows: list[dict], prefix: str) -> list[int]:
    """The seeds of the ``{prefix}pass@1_seed{k}`` columns of ``rows``, in order."""
    pattern = re.compile(rf"^{re.escape(prefix)}pass@1_seed(\d+)$")
    found = [int(m[1]) for r in rows for k in r if (m := pattern.match(k))]
    return sorted(set(found))


# how the gains table heads a trained column (model A's name)
_ALONE = {"agon_single": "agon (alone)"}


# table 1's comparisons: (row key, column title, ratio | points)
COMPARISONS = (
    *((r.key, r.title, "ratio") for r in RATIOS),
    ("agon_gain_over_moa_gain", "(agon-base) / (moa-base)", "ratio"),
    ("agon_minus_agon_independent", "agon - agon_independent (points)", "points"),
)


def table_markdown(
    rows: list[dict],
    systems: Sequence[str],
    config_hash_: str,
    title: str = "Table 1",
    comparisons: Sequence[tuple[str, str, str]] = COMPARISONS,
) -> str:
    """A readable rendering: pass@1 [95% interval] per system, the ``comparisons`` the rows
    have (a line each), each model against its base, pass@1 per training seed, then training
    and evaluation compute."""
    notes = _Notes()
    comparisons = [c for c in comparisons if any(c[0] in r for r in rows)]
    lines = [
        f"# {title}: pass@1 (%) [95% interval over training seeds and problems]",
        "",
        f"95% intervals: {INTERVAL_TEXT}. {_seed_note(rows)}",
        "",
        "MDE: a comparison's minimal detectable effect, the true effect it would detect with 80% "
        "power at the 5% level (2.8 bootstrap standard errors): an interval that holds no "
        "effect says nothing of effects smaller than it.",
        "",
        *head(["family", "task", *systems]),
    ]
    for r in rows:
        lines.append(table_row([r["family"], r["task"], *(_pct(r, f"{s}_") for s in systems)]))
    if comparisons:  # a line each: as columns beside a dozen systems, too wide to read
        heading = "Comparisons: value [paired 95% interval] (MDE)"
        lines += section(heading, ["family", "task", "comparison", "value"])
        for r in rows:
            for k, name, kind in comparisons:
                where = f"{r['family']}/{r['task']}, {name}"
                cell = (_ratio if kind == "ratio" else _points)(r, k, notes, where)
                lines.append(table_row([r["family"], r["task"], name, cell]))
    lines += notes.flush()

    gain_rows = [
        (r, model, base, ts)
        for r in rows
        for model, base, ts in GAINS
        if r.get(f"{base}_pass@1") is not None and any(f"{s}_gain" in r for s in ts)
    ]
    # the trained columns some row has (by their place in GAINS: model A's name heads them)
    shown = [
        i
        for i in range(len(GAINS[0][2]))
        if any(f"{ts[i]}_pass@1" in r for r, _, _, ts in gain_rows)
    ]
    if gain_rows:
        names = [GAINS[0][2][i] for i in shown]
        lines += section(
            "Each model alone: trained vs. its own base "
            "(pass@1 %; gain in points [paired 95% interval])",
            ["family", "task", "model", "base", *(_ALONE.get(n, n) for n in names)],
        )
        for r, model, base, ts in gain_rows:
            cells = [r["family"], r["task"], model, _pct(r, f"{base}_")]
            for s in (ts[i] for i in shown):
                if r.get(f"{s}_pass@1") is None:
                    cells.append("")
                    continue
                where = f"{r['family']}/{r['task']}, {s} - {base}"
                cells.append(
                    f"{100 * r[f'{s}_pass@1']:.1f}; " + _points(r, f"{s}_gain", notes, where)
                )
            lines.append(table_row(cells))
        lines += notes.flush()

    trained_systems = [s for s in systems if COLUMNS[s].train]
    seeds = sorted({k for s in trained_systems for k in _seed_keys(rows, f"{s}_")})
    if trained_systems and seeds:
        lines += section(
            "Per training seed: pass@1 (%) of each trained system",
            ["family", "task", "system", *(f"seed {k}" for k in seeds), "mean [95%]"],
        )
        for r in rows:
            for s in trained_systems:
                per = [r.get(f"{s}_pass@1_seed{k}") for k in seeds]
                cells = [r["family"], r["task"], s]
                cells += ["" if v is None else f"{100 * v:.1f}" for v in per]
                lines.append(table_row([*cells, _pct(r, f"{s}_")]))

    trained = trained_methods_for(systems)
    if trained:
        lines += _training_compute(rows, trained, notes)

    lines += section(
        "Evaluation compute (mean per evaluated seed)",
        ["family", "task", "system", "seeds", "eval tokens", "eval wall h"],
    )
    for r in rows:
        for s in systems:
            vals = map(short, (r.get(f"{s}_eval_tokens"), r.get(f"{s}_eval_wall_h")))
            lines.append(table_row([r["family"], r["task"], s, _fmt(r.get(f"{s}_n_seeds")), *vals]))
    n = rows[0].get("n_problems") if rows else None
    lines += [
        "",
        f"Split: {rows[0]['split'] if rows else ''}; problems per row: {n}; "
        f"training seeds: {rows[0]['seeds'] if rows else ''} (trained systems are evaluated at "
        f"each; untrained ones at each where every seed has its own base models, else at the "
        f"first: the `seeds` column above); config hash: {config_hash_}. "
        "Each trained system's training compute is its run's "
        "(grpo_b and grpo_cascade share grpo's; agon_rev and agon_single(_b) share agon's).",
        "",
    ]
    return "\n".join(lines)


def _training_compute(rows: list[dict], trained: Sequence[str], notes: _Notes) -> list[str]:
    """Per (family, task, method) a row per model and one for the run: what each spent."""
    ref = BUDGET_REFERENCE
    lines = [
        "",
        "## Training compute (mean per seed)",
        "",
        f"Per model: optimizer steps, completions and tokens it generated, tokens it was trained "
        f"on, its CPU seconds where the trainer records them per model; `vs {ref}`: its tokens "
        f"generated relative to the same model's in the {ref} run (0% = the same); budget: what "
        f"a budget-matched run (train.budget) spent against its target, per seed, on average. "
        f"Row `A+B`: the whole run (CPU and GPU seconds of its training work, probes excluded).",
        "",
        *head(
            [
                "family",
                "task",
                "method",
                "model",
                "steps",
                "completions",
                "tokens generated",
                "tokens trained",
                "cpu s",
                "gpu s",
                "wall h",
                f"tokens vs {ref}",
                "budget",
            ]
        ),
    ]
    for r in rows:
        for m in trained:
            for model in MODELS:
                vs = r.get(f"{m}_{model}_tokens_vs_{ref}")
                budget = ""
                if m in BUDGET_MATCHED:
                    rel = r.get(f"{m}_{model}_budget_rel_diff")
                    budget = (
                        f"{r.get('budget_match') or ''}: {100 * rel:+.1f}%"
                        if rel is not None
                        else "none recorded"
                    )
                    where = f"{r['family']}/{r['task']}, {m} model {model} budget"
                    budget += notes.ref(where, r.get(f"{m}_{model}_budget_note"))
                cells = [
                    r["family"],
                    r["task"],
                    m,
                    model,
                    *(
                        short(r.get(f"{m}_{model}_{k}"))
                        for k in ("steps", "completions", "tokens_generated", "tokens_trained")
                    ),
                    short(r.get(f"{m}_{model}_cpu_s")),
                    "",
                    "",
                    ("reference" if m == ref else "") if vs is None else f"{100 * vs:+.1f}%",
                    budget,
                ]
                lines.append(table_row(cells))
            run = [r.get(f"{m}_{k}") for k in ("train_tokens", "cpu_s", "gpu_s", "train_wall_h")]
            cells = [r["family"], r["task"], m, "A+B", "", "", short(run[0]), ""]
            lines.append(table_row([*cells, *map(short, run[1:]), "", ""]))
    return lines + notes.flush()


def ablations_markdown(rows: list[dict], config_hash_: str) -> str:
    """The ablations table: per (family, task, variant) its changes, its cascade's pass@1 [95%
    interval] and per seed, the difference from the reference variant, and its compute."""
    notes = _Notes()
    seeds = _seed_keys(rows, "")
    ref = rows[0]["reference"] if rows else ""
    lines = [
        "# Ablations: the cascade (A drafts, B reads) of each Agon variant, pass@1 (%) "
        "[95% interval over training seeds and problems]",
        "",
        f"95% intervals: {INTERVAL_TEXT}. Differences are in points against the reference "
        f"variant `{ref}`, paired (the same problems drawn for both).",
        "",
        *head(
            [
                "family",
                "task",
                "variant",
                "changes",
                "pass@1",
                *(f"seed {k}" for k in seeds),
                f"- {ref}",
                "A tokens",
                "B tokens",
                "cpu s",
                "gpu s",
            ]
        ),
    ]
    for r in rows:
        per = [r.get(f"pass@1_seed{k}") for k in seeds]
        where = f"{r['family']}/{r['task']}, {r['variant']} - {ref}"
        cells = [
            r["family"],
            r["task"],
            r["variant"],
            f"`{r['changes']}`",
            _pct(r, ""),
            *("" if v is None else f"{100 * v:.1f}" for v in per),
            "reference" if r["variant"] == ref else _points(r, "minus_reference", notes, where),
            *(short(r.get(k)) for k in ("A_tokens_generated", "B_tokens_generated")),
            *(short(r.get(k)) for k in ("cpu_s", "gpu_s")),
        ]
        lines.append(table_row(cells))
    lines += notes.flush()
    n = rows[0].get("n_problems") if rows else None
    lines += [
        "",
        f"Split: {rows[0]['split'] if rows else ''}; problems per row: {n}; "
        f"training seeds: {rows[0]['seeds'] if rows else ''}; compute: mean per seed of each "
        f"variant's training run; config hash: {config_hash_}.",
        "",
    ]
    return "\n".join(lines)
