"""The toy world's positive control: results/control.csv, control_pilot.csv, control_curriculum.csv.

The control (the config's ``control`` section, a world of its own; ``workflow/rules/control.smk``)
pretrains one pair of base models whose habitual arith error is written *hidden* (the right
operand, a wrong result) or *visible* (the solution opened with the mark ``~``) at equal rates,
with readers that anchor on hidden errors, and trains each reward scheme from it at each seed.
Every measure is taken in both directions (``AB``: A drafts, B reads; ``BA``: B drafts, A
reads):

1. the drafter's **hidden-error share**: hidden / (hidden + visible) among the wrong drafts of
   the direction's cascade, classified by :meth:`agon.tasks.base.Task.error_style`;
2. the reader's **robustness**: its pass@1 reading each test problem's fixed hidden-error draft
   (system ``robust_read``, the same drafts for every scheme);
3. the direction's **own cascade** pass@1;
4. the **lever**: how much more often a read is right after a visible wrong draft than after a
   hidden one, the drafter's reason under the rival term to hide its errors.

Each with a 95% two-level bootstrap interval over training seeds and problems, and each
scheme's difference from ``independent`` (the same duel without the rival term) with its paired
interval and minimal detectable effect; from the runs, the drafter's pay for a hidden over a
visible wrong draft (steps weighted by their hidden-visible pairs) and how far training moved
each model.

Three tables: ``control`` (arm 1, the drafter's link: readers frozen, the verdict's seeds),
``control_pilot`` (arm 1 at a seed the verdict does not use: independent at each learning rate
of the sweep, and the expected effect, agon minus independent, that the verdict's rule reads)
and ``control_curriculum`` (arm 2, exploratory: readers learn). The rule per direction
(:func:`verdict`): *shown* if agon minus independent's interval is above 0; *falsified* if the
drafter's pay is shown above 0 and the interval's upper end is below half the pilot's effect
(unreachable when the pilot's effect is not above its own MDE); *inconclusive* otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from agon.config import CONTROL_DIRECTIONS, CONTROL_FAMILY, control_config, control_stage
from agon.report.compare import RNG, SeedRates, holds, read_seed_rates
from agon.report.control_measures import (
    CONTROL_REFERENCE,
    MEASURES,
    STYLE_COUNTS,
    draft_kinds,
    logged,
    probes,
    style_measures,
    style_rates,
    table_spec,
    weight_change,
)
from agon.report.control_reading import control_markdown, pilot_effects, verdict
from agon.report.write import write_table
from agon.results import Layout
from agon.stats import minimal_detectable_effect, percentile_interval, two_level_bootstrap
from agon.tasks import task_from_config

# ----------------------------------------------------------------------------- the table


UNDEFINED = "not defined: the pair wrote no wrong drafts of one style (a share or lever of 0/0)"


def _interval(key: str, value: float, reps: np.ndarray) -> dict[str, Any]:
    """A measure with its interval; where no replicate is defined (0/0), none, and a note."""
    if not np.isfinite(reps).any():
        return {key: None, f"{key}_lo": None, f"{key}_hi": None, f"{key}_note": UNDEFINED}
    lo, hi = percentile_interval(reps)
    return {key: value if np.isfinite(value) else None, f"{key}_lo": lo, f"{key}_hi": hi}


def _difference(key: str, reps: np.ndarray, value: float) -> dict[str, Any]:
    """A difference from the reference with its interval, minimal detectable effect and note."""
    if not np.isfinite(reps).any():
        return {key: None, f"{key}_note": UNDEFINED}
    lo, hi = percentile_interval(reps)
    mde = minimal_detectable_effect(reps)
    note = ""
    if holds(lo, hi, 0.0):
        note = (
            f"no difference shown: the 95% interval holds 0; not detectable below "
            f"{100 * mde:.1f} points (80% power)"
        )
    return {key: value, f"{key}_lo": lo, f"{key}_hi": hi, f"{key}_mde": mde, f"{key}_note": note}


def _seed_rates(layout: Layout, arm: str, stage: str, measure: str, seeds) -> SeedRates:
    """One measure of one stage at every seed, read once (:func:`read_seed_rates`)."""
    files = {k: layout.control_eval_samples(arm, stage, measure, k) for k in seeds}
    rates = read_seed_rates(files)
    if rates is None:
        raise FileNotFoundError(
            f"control: {arm}/{stage}/{measure} lacks a samples.jsonl with problem ids and "
            "verdicts at a seed (run its workflow target)"
        )
    return rates


def build_control_table(config: dict, layout: Layout, table: str = "control") -> list[dict]:
    """One row per stage and direction (``base`` first, the untrained pair): the measures with
    their intervals, each scheme's differences from ``independent`` in the same direction, what
    its runs logged and how far they moved each model; the pilot's sweep rows last."""
    spec = table_spec(config, table)
    arm, seeds, stages = spec["arm"], [int(s) for s in spec["seeds"]], spec["stages"]
    ev = control_config(config, layout.control_models(arm), arm=arm)
    n_boot = int(ev["eval"]["bootstrap"])
    kinds = ["cascade", *(["robust"] if spec["robust"] else [])]
    rows = []
    task = task_from_config(ev, config["control"]["task"]["name"])
    try:
        problems = {p.id: p for p in task.problems(ev["eval"]["split"])}
        for direction, (drafter, reader) in CONTROL_DIRECTIONS.items():
            measures = {m: f"{m}_{direction}" for m in kinds}
            rates = {
                (s, m): _seed_rates(layout, arm, s, name, seeds)
                for s in stages
                for m, name in measures.items()
            }
            ids = sorted(set.intersection(*(r.ids() for r in rates.values())))
            reps, value = {}, {}
            for m in measures:
                x = [rates[s, m].matrix(ids) for s in stages]
                reps[m] = two_level_bootstrap(x, n_boot, RNG["control"], shared_seeds=True)
                value[m] = [float(v.mean()) for v in x]
            styles = {
                s: style_rates(
                    task,
                    problems,
                    {k: layout.control_eval_samples(arm, s, measures["cascade"], k) for k in seeds},
                )
                for s in stages
            }
            style_ids = sorted(set.intersection(*(st["hidden"].ids() for st in styles.values())))
            counts = two_level_bootstrap(
                [styles[s][n].matrix(style_ids) for s in stages for n in STYLE_COUNTS],
                n_boot,
                RNG["control"],
                shared_seeds=True,
            )
            k = len(STYLE_COUNTS)
            reps["hidden_share"], reps["lever"] = style_measures([counts[j::k] for j in range(k)])
            totals = {
                s: [styles[s][n].matrix(style_ids).sum() for n in STYLE_COUNTS] for s in stages
            }
            observed = [style_measures([np.float64(t) for t in totals[s]]) for s in stages]
            value["hidden_share"] = [float(o[0]) for o in observed]
            value["lever"] = [float(o[1]) for o in observed]
            ref = stages.index(CONTROL_REFERENCE) if CONTROL_REFERENCE in stages else None
            for i, s in enumerate(stages):
                row: dict[str, Any] = {
                    "scheme": s,
                    "direction": direction,
                    "drafter": drafter.upper(),
                    "reader": reader.upper(),
                    "arm": arm,
                    "seeds": ";".join(map(str, seeds)),
                    "n_problems": len(ids),
                    "styled_drafts": float(totals[s][0] + totals[s][1]),
                }
                for m in ("lever", *(m for m in MEASURES if m in reps)):
                    row |= _interval(m, value[m][i], reps[m][i])
                    if ref is not None and m != "lever" and s not in ("base", CONTROL_REFERENCE):
                        row |= _difference(
                            f"{m}_minus_{CONTROL_REFERENCE}",
                            reps[m][i] - reps[m][ref],
                            value[m][i] - value[m][ref],
                        )
                cascade = {
                    k: layout.control_eval_samples(arm, s, measures["cascade"], k) for k in seeds
                }
                row |= draft_kinds(task, problems, cascade)
                if s != "base":
                    row |= logged(layout, arm, s, seeds, drafter.upper(), reader.upper(), n_boot)
                    row |= _moved(layout, arm, s, seeds, drafter, reader)
                rows.append(row)
    finally:
        task.close()
    for stage in spec.get("sweep", []):
        rows += _sweep_rows(config, layout, stage, seeds)
    return rows


def _moved(layout: Layout, arm: str, stage: str, seeds, drafter: str, reader: str) -> dict:
    """How far a stage's runs moved the direction's drafter and reader (mean over seeds)."""
    base = layout.control_models(arm)
    out = {}
    for role, row in (("drafter", drafter), ("reader", reader)):
        m = row.upper()
        runs = [Path(layout.control_train_dir(arm, stage, k)) / m for k in seeds]
        out[f"{role}_weight_change"] = float(
            np.mean([weight_change(f"{base}/{m}", r) for r in runs])
        )
    return out


def _sweep_rows(config: dict, layout: Layout, stage: str, seeds) -> list[dict]:
    """The pilot's independent run at one learning rate: per model, its validation probe
    before and after and how far the weights moved."""
    _, lr = control_stage(config, stage)
    rows = []
    for m in ("A", "B"):
        for k in seeds:
            run = Path(layout.control_train_dir("drafter", stage, k))
            first, last = probes(run / "metrics.jsonl", m)
            rows.append(
                {
                    "scheme": CONTROL_REFERENCE,
                    "direction": "sweep",
                    "drafter": m,
                    "arm": "drafter",
                    "seeds": str(k),
                    "learning_rate": lr,
                    "probe_first": first,
                    "probe_last": last,
                    "drafter_weight_change": weight_change(
                        f"{layout.control_models('drafter')}/{m}", run / m
                    ),
                }
            )
    return rows


def build_control_report(
    config: dict, layout: Layout, table: str = "control"
) -> dict[str, list[Path]]:
    """Write a control table's CSV (+ provenance JSON) and Markdown; return what was written.
    The verdict's table reads the pilot's effect (and its provenance) from the pilot's files."""
    spec = table_spec(config, table)
    rows = build_control_table(config, layout, table)
    pilot_files = layout.table_files("control_pilot")
    pilot = pilot_effects(pilot_files.csv) if table == "control" else {}
    if table == "control":
        for r in rows:
            if r["scheme"] == "agon" and r["direction"] in CONTROL_DIRECTIONS:
                p = pilot.get(r["direction"])
                branch, _ = verdict(r, p)
                r |= {"verdict": branch, "pilot_effect": p and p["effect"]}
                r["pilot_mde"] = p and p["mde"]
    arm, seeds = spec["arm"], spec["seeds"]
    inputs = [
        layout.control_eval_summary(arm, s, f"{m}_{d}", k)
        for s in spec["stages"]
        for m in ("cascade", *(["robust"] if spec["robust"] else []))
        for d in CONTROL_DIRECTIONS
        for k in seeds
    ]
    runs = [
        layout.control_train_summary(arm, s, k)
        for s in [*spec["stages"], *spec.get("sweep", [])]
        if s != "base"
        for k in seeds
    ]
    extra = {"inputs": inputs, "runs": runs, "family": CONTROL_FAMILY, "arm": arm}
    if table == "control" and Path(pilot_files.provenance).is_file():
        made = json.loads(Path(pilot_files.provenance).read_text())
        extra["pilot"] = {
            "csv": pilot_files.csv,
            "git": made.get("provenance", {}).get("git"),
        }
    return write_table(
        layout.table_files(table),
        rows,
        control_markdown(rows, table, config, pilot),
        config,
        inputs + runs,
        provenance=extra,
    )
