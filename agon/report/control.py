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

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agon.config import (
    CONTROL_DIRECTIONS,
    CONTROL_FAMILY,
    config_hash,
    control_config,
    control_stage,
)
from agon.report.compare import RNG, holds
from agon.report.control_measures import (
    STYLE_COUNTS,
    STYLE_PAY,
    logged,
    probes,
    style_measures,
    style_rates,
    weight_change,
)
from agon.report.render import head, short, table_row
from agon.report.write import write_table
from agon.results import Layout, read_jsonl
from agon.stats import minimal_detectable_effect, percentile_interval, two_level_bootstrap
from agon.tasks import task_from_config

TABLES = ("control", "control_pilot", "control_curriculum")
MEASURES = ("hidden_share", "robust", "cascade")  # the three measures, in the table's order
CONTROL_REFERENCE = "independent"  # every scheme is compared with the duel without the contest
TITLES = {
    "hidden_share": "drafter's hidden-error share (%)",
    "robust": "reader vs fixed hidden-error drafts, pass@1 (%)",
    "cascade": "the direction's own cascade, pass@1 (%)",
    "lever": "lever: reads right after visible minus after hidden wrong drafts (points)",
}
RULE = (
    "Rule, per direction, fixed before the verdict's seeds were run: **shown** if agon's "
    "hidden-error share minus independent's has its 95% interval above 0; **falsified** if the "
    "drafter's pay for hiding is shown above 0 during training and that interval's upper end is "
    "below half the pilot's effect (unreachable when the pilot's effect is not above its own "
    "MDE); **inconclusive** otherwise, including when the pay is not shown above 0."
)


# ----------------------------------------------------------------------------- what a table is


def table_spec(config: dict, table: str) -> dict[str, Any]:
    """A control table's arm, seeds, stages (``base`` first), measures and sweep stages."""
    ctl = config["control"]
    schemes = list(ctl["schemes"])
    if table == "control":
        return dict(arm="drafter", seeds=ctl["seeds"], stages=["base", *schemes], robust=True)
    if table == "control_pilot":
        sweep = [f"lr{i}" for i in range(len(ctl["pilot"]["learning_rates"]))]
        stages = ["base", *(s for s in ("agon", CONTROL_REFERENCE) if s in schemes)]
        return dict(arm="drafter", seeds=[ctl["pilot"]["seed"]], stages=stages, robust=False,
                    sweep=sweep)  # fmt: skip
    if table == "control_curriculum":
        seeds = ctl["curriculum"]["seeds"]
        return dict(arm="curriculum", seeds=seeds, stages=["base", *schemes], robust=True)
    raise ValueError(f"no control table {table!r}; tables: {list(TABLES)}")


# ----------------------------------------------------------------------------- the table


def _interval(key: str, value: float, reps: np.ndarray) -> dict[str, Any]:
    lo, hi = percentile_interval(reps)
    return {key: value, f"{key}_lo": lo, f"{key}_hi": hi}


def _difference(key: str, reps: np.ndarray, value: float) -> dict[str, Any]:
    """A difference from the reference with its interval, minimal detectable effect and note."""
    lo, hi = percentile_interval(reps)
    mde = minimal_detectable_effect(reps)
    note = ""
    if holds(lo, hi, 0.0):
        note = (
            f"no difference shown: the 95% interval holds 0; not detectable below "
            f"{100 * mde:.1f} points (80% power)"
        )
    return {key: value, f"{key}_lo": lo, f"{key}_hi": hi, f"{key}_mde": mde, f"{key}_note": note}


def _rates(path: Path) -> dict[str, float]:
    """Per problem the share of correct samples of one ``samples.jsonl``."""
    counts: dict[str, list[int]] = {}
    for r in read_jsonl(path):
        c = counts.setdefault(r["problem_id"], [0, 0])
        c[0] += 1
        c[1] += bool(r.get("correct"))
    return {pid: right / n for pid, (n, right) in counts.items()}


def _matrix(layout: Layout, arm: str, stage: str, measure: str, seeds, ids) -> np.ndarray:
    """(seeds, problems) pass@1 of one measure of one stage."""
    out = []
    for k in seeds:
        path = Path(layout.control_eval_samples(arm, stage, measure, k))
        if not path.is_file():
            raise FileNotFoundError(f"control: {path} is missing (run its workflow target)")
        rates = _rates(path)
        out.append([rates[i] for i in ids])
    return np.asarray(out, dtype=float)


def _problem_ids(layout: Layout, arm: str, stages, measures, seeds) -> list[str]:
    """The problems every evaluation of the table shares."""
    sets = [
        set(_rates(Path(layout.control_eval_samples(arm, s, m, k))))
        for s in stages
        for m in measures
        for k in seeds
    ]
    return sorted(set.intersection(*sets))


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
            ids = _problem_ids(layout, arm, stages, measures.values(), seeds)
            reps, value = {}, {}
            for m, name in measures.items():
                x = [_matrix(layout, arm, s, name, seeds, ids) for s in stages]
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


RATE_RULE_DROP = 0.05  # the most a model's validation probe may fall over the sweep's run


def rate_rule(sweep: Sequence[Mapping[str, Any]]) -> float | None:
    """The pilot's learning-rate rule: the largest rate of the sweep at which no independent
    model's validation probe ends more than :data:`RATE_RULE_DROP` below where it started."""
    rates = sorted({float(r["learning_rate"]) for r in sweep})
    ok = [
        lr
        for lr in rates
        if all(
            r["probe_first"] is not None
            and r["probe_last"] is not None
            and float(r["probe_last"]) >= float(r["probe_first"]) - RATE_RULE_DROP
            for r in sweep
            if float(r["learning_rate"]) == lr
        )
    ]
    return max(ok) if ok else None


# ----------------------------------------------------------------------------- reading


def pilot_effects(path: str | Path) -> dict[str, dict[str, float]]:
    """Per direction, the pilot's agon minus independent hidden share and its MDE, read from
    results/control_pilot.csv (empty if the file is absent)."""
    p = Path(path)
    if not p.is_file():
        return {}
    with open(p) as f:
        rows = list(csv.DictReader(f))
    key = f"hidden_share_minus_{CONTROL_REFERENCE}"
    return {
        r["direction"]: {"effect": float(r[key]), "mde": float(r[f"{key}_mde"])}
        for r in rows
        if r["scheme"] == "agon" and r.get(key)
    }


def verdict(agon: Mapping[str, Any], pilot: Mapping[str, float] | None) -> tuple[str, str]:
    """(branch, why) of the rule (:data:`RULE`) for one direction's agon row."""
    key = f"hidden_share_minus_{CONTROL_REFERENCE}"
    lo, hi = float(agon[f"{key}_lo"]), float(agon[f"{key}_hi"])
    if lo > 0:
        return "shown", "the interval of agon minus independent is above 0"
    paid = agon.get(f"{STYLE_PAY}_lo") not in (None, "") and float(agon[f"{STYLE_PAY}_lo"]) > 0
    if pilot is None:
        return "inconclusive", "no pilot effect to compare with (results/control_pilot.csv)"
    if not pilot["effect"] > pilot["mde"]:
        return "inconclusive", (
            f"falsified is unreachable: the pilot's effect {100 * pilot['effect']:+.1f} points is "
            f"not above its MDE {100 * pilot['mde']:.1f}"
        )
    if not paid:
        return "inconclusive", "the drafter's pay for hiding is not shown above 0"
    if hi < pilot["effect"] / 2:
        return "falsified", (
            f"paid to hide, and the upper end {100 * hi:+.1f} is below half the pilot's effect "
            f"({100 * pilot['effect'] / 2:+.1f} points)"
        )
    return "inconclusive", (
        f"the upper end {100 * hi:+.1f} is not below half the pilot's effect "
        f"({100 * pilot['effect'] / 2:+.1f} points)"
    )


def _pts(r: Mapping[str, Any], key: str, mde: bool = True) -> str:
    """A measure in points with its interval, e.g. ``+20.6 [+7.3, +32.0] (MDE 5.1)``."""
    if r.get(key) in (None, ""):
        return "n/a"
    v, lo, hi = (100 * float(r[f"{key}{s}"]) for s in ("", "_lo", "_hi"))
    text = f"{v:+.1f} [{lo:+.1f}, {hi:+.1f}]"
    if mde and r.get(f"{key}_mde") not in (None, ""):
        text += f" (MDE {100 * float(r[f'{key}_mde']):.1f})"
    return text


def _pay(r: Mapping[str, Any]) -> str:
    if r.get(STYLE_PAY) in (None, ""):
        return "n/a"
    text = f"{float(r[STYLE_PAY]):+.3f}"
    if r.get(f"{STYLE_PAY}_lo") not in (None, ""):
        text += f" [{float(r[f'{STYLE_PAY}_lo']):+.3f}, {float(r[f'{STYLE_PAY}_hi']):+.3f}]"
    return text


def findings(
    rows: Sequence[Mapping[str, Any]], table: str, pilot: Mapping[str, Mapping[str, float]]
) -> list[str]:
    """What the table shows, per direction, stated from its rows."""
    diff = f"_minus_{CONTROL_REFERENCE}"
    lines = []
    for direction, (drafter, reader) in CONTROL_DIRECTIONS.items():
        by = {r["scheme"]: r for r in rows if r["direction"] == direction}
        agon, base = by.get("agon"), by.get("base", {})
        if agon is None or f"hidden_share{diff}" not in agon:
            continue
        who = f"{direction} ({drafter.upper()} drafts, {reader.upper()} reads)"
        head_ = f"**{who}**"
        if table == "control":
            branch, why = verdict(agon, pilot.get(direction))
            p = pilot.get(direction)
            ptext = (
                f"; the pilot's effect {100 * p['effect']:+.1f} points (MDE {100 * p['mde']:.1f})"
                if p
                else ""
            )
            head_ += f": **{branch}** ({why}{ptext})."
        elif table == "control_curriculum":
            head_ += " (exploratory, no rule stated before its first run):"
        else:
            head_ += " (the pilot: the expected effect the verdict's rule reads):"
        lines.append(
            f"{head_} Hidden share, agon minus independent {_pts(agon, 'hidden_share' + diff)}"
            f" points; the drafter's pay for hiding under agon {_pay(agon)}; the untrained "
            f"lever {_pts(base, 'lever', False)} points."
        )
        for s in ("zero_sum", "cooperative"):
            if s in by and f"hidden_share{diff}" in by[s]:
                lines.append(
                    f"{who}, {s} minus independent: hidden share "
                    f"{_pts(by[s], 'hidden_share' + diff)}, pay {_pay(by[s])}."
                )
        if f"robust{diff}" in agon:
            lines.append(
                f"{who}, the reader against fixed hidden-error drafts, agon minus independent "
                f"{_pts(agon, 'robust' + diff)}; the direction's own cascade "
                f"{_pts(agon, 'cascade' + diff)}."
            )
    return lines


def control_markdown(
    rows: Sequence[Mapping[str, Any]],
    table: str,
    config: dict,
    pilot: Mapping[str, Mapping[str, float]],
) -> str:
    """A control table for reading: the measures per scheme and direction, the differences
    from independent, what the runs logged, the sweep (the pilot), the rule and its branch."""

    def pct(r: Mapping[str, Any], key: str) -> str:
        if r.get(key) in (None, ""):
            return "n/a"
        return f"{100 * r[key]:.1f} [{100 * r[f'{key}_lo']:.1f}, {100 * r[f'{key}_hi']:.1f}]"

    spec = table_spec(config, table)
    ctl = control_config(config, "models", arm=spec["arm"])
    title = {
        "control": "The positive control, arm 1: does the rival term reach the drafter?",
        "control_pilot": "The positive control's pilot: the learning rate and the expected effect",
        "control_curriculum": "The positive control, arm 2 (exploratory): the adversarial "
        "curriculum",
    }[table]
    train, agon = ctl["train"], ctl["agon"]
    lines = [
        f"# {title}",
        "",
        f"Seeds {', '.join(map(str, spec['seeds']))}; {train['steps']} steps at learning rate "
        f"{train['learning_rate']:g}, role schedule `{agon['role_schedule']}` "
        f"({train['problems_per_step']} problems a step), roles trained "
        f"{', '.join(agon['train_roles'])}. One base pair whose habitual arith error is written "
        "hidden (a wrong result) or visible (the solution opened with the mark `~`, drawn before "
        "its first step); readers that copy an unmarked draft's wrong step and recompute a marked "
        "one's. Both directions: AB (A drafts, B reads) and "
        "BA. 95% intervals: a two-level bootstrap over training seeds and problems (seeds paired "
        "across schemes; one base pair, so the base draw is not in them). MDE: the minimal "
        "detectable effect at 80% power. `base`: the untrained pair. Pay: the drafter's mean "
        "reward for a hidden over a visible wrong draft during training, over steps, each "
        "weighted by its hidden-visible pairs. Moved: ||θ − θ₀|| / ||θ₀||.",
        "",
    ]
    measures = [m for m in MEASURES if any(m in r for r in rows)]
    lines += head(["scheme", "direction", *(TITLES[m] for m in measures), TITLES["lever"]])
    for r in rows:
        if r["direction"] in CONTROL_DIRECTIONS:
            cells = [pct(r, m) for m in measures]
            lines.append(table_row([r["scheme"], r["direction"], *cells, _pts(r, "lever", False)]))
    lines += ["", f"## Each scheme minus {CONTROL_REFERENCE} (points)", ""]
    lines += head(["scheme", "direction", *(TITLES[m].split(",")[0] for m in measures)])
    for r in rows:
        if f"hidden_share_minus_{CONTROL_REFERENCE}" in r:
            cells = [_pts(r, f"{m}_minus_{CONTROL_REFERENCE}") for m in measures]
            lines.append(table_row([r["scheme"], r["direction"], *cells]))
    lines += ["", "## What the runs logged (mean over seeds)", ""]
    lines += head(
        [
            "scheme",
            "direction",
            "hidden share, first quarter",
            "last quarter",
            "drafter's pay for hiding",
            "reader's probe before",
            "after",
            "drafter moved",
            "reader moved",
        ]
    )
    keys = ("train_hidden_share_first", "train_hidden_share_last")
    probe = ("train_robust_first", "train_robust_last")
    moved = ("drafter_weight_change", "reader_weight_change")
    for r in rows:
        if r["scheme"] != "base" and r["direction"] in CONTROL_DIRECTIONS:
            cells = [*(short(r.get(k)) for k in keys), _pay(r), *(short(r.get(k)) for k in probe)]
            cells += [f"{float(r[k]):.2e}" if r.get(k) is not None else "n/a" for k in moved]
            lines.append(table_row([r["scheme"], r["direction"], *cells]))
    sweep = [r for r in rows if r["direction"] == "sweep"]
    if sweep:
        lines += [
            "",
            "## The learning-rate sweep (independent only)",
            "",
            "The rule for `control.train.learning_rate`, stated before the sweep ran: the "
            "largest rate at which neither independent model's validation probe ends more than "
            "5 points below where it started.",
            "",
            *head(["learning rate", "model", "probe before", "probe after", "moved"]),
        ]
        for r in sweep:
            cells = [f"{r['learning_rate']:g}", r["drafter"], short(r["probe_first"])]
            cells += [short(r["probe_last"]), f"{r['drafter_weight_change']:.2e}"]
            lines.append(table_row(cells))
        pick = rate_rule(sweep)
        lines += [
            "",
            f"The rule picks {pick:g}; the config trains at {train['learning_rate']:g}."
            if pick is not None
            else "No rate of the sweep meets the rule.",
        ]
    lines += ["", "## What it shows", ""]
    if table == "control":
        lines += [RULE, ""]
    lines += [*(f"- {v}" for v in findings(rows, table, pilot)), ""]
    lines.append(f"Config hash: {config_hash(config)}.")
    return "\n".join(lines) + "\n"


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
