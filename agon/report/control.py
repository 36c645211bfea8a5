"""results/control.csv: the toy world's positive control, with intervals and what it detects.

The control (the config's ``control`` section, ``workflow/rules/control.smk``) trains one pair of
base models under each reward scheme at each seed. Their habitual arith error is written
*visible* (the misread operand on the page) or *hidden* (the right operand, a wrong result) at
equal rates, and their readers anchor on hidden errors. Three measures of each trained pair,
and of the untrained pair (``base``):

1. the drafter's **hidden-error share**: hidden / (hidden + visible) among the wrong drafts of
   the pair's cascade (A drafts), classified by :meth:`agon.tasks.base.Task.error_style`;
2. the reader's **robustness**: B's pass@1 reading each test problem's fixed hidden-error draft
   (system ``robust_read``, the same drafts for every scheme);
3. the pair's **own cascade**: pass@1 of A drafts -> B reads.

Each with a 95% two-level bootstrap interval over training seeds and problems, and each scheme's
difference from ``independent`` (the same duel without the rival term) with its paired
interval and minimal detectable effect. What the algebra predicts (``docs/method.md``): under
``agon`` and ``zero_sum`` the drafter is paid for drafts that mislead its reader, so (1) rises
above ``independent``'s; if the reader then learns to check, (2) rises too; ``cooperative``
pays the drafter for its reader's success, so (1) falls.

All of this rests on a precondition the control measures too, on the untrained pair: the
**lever**, how much more often a read is right after a visible wrong draft than after a hidden
one. Under the rival term a hidden wrong draft is paid λ times the lever over a visible one (the
runs log the pay itself); with no lever there is nothing to learn, and the hidden share cannot
test the implementation. The Markdown states the outcome: *inconclusive* if the untrained
pair's lever is not shown positive; otherwise, by the rule stated before the first run, the
implementation is falsified if (1) does not separate ``agon`` from ``independent``, and the
mechanism fails in this world if (1) moves and (2) does not. Where (1) does not separate, the
pay the runs logged (with a two-level bootstrap interval over seeds and steps) says whether the
drafter's incentive was there during training at all: readers that learn to check hidden errors
take the lever away as they train.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agon.config import CONTROL_FAMILY, config_hash, control_config
from agon.report.compare import RNG, holds, stats_columns, system_stats
from agon.report.control_measures import (
    STYLE_COUNTS,
    STYLE_PAY,
    logged,
    style_measures,
    style_rates,
)
from agon.report.render import head, short, table_row
from agon.report.write import write_table
from agon.results import Layout
from agon.stats import minimal_detectable_effect, percentile_interval, two_level_bootstrap
from agon.tasks import task_from_config

MEASURES = ("hidden_share", "robust", "cascade")  # the three measures, in the table's order
CONTROL_REFERENCE = "independent"  # every scheme is compared with the duel without the contest
LEVER_TITLE = "the lever: reads right after visible minus after hidden wrong drafts (points)"
TITLES = {
    "hidden_share": "drafter's hidden-error share (%)",
    "robust": "reader vs fixed hidden-error drafts, pass@1 (%)",
    "cascade": "the pair's own cascade, pass@1 (%)",
}


# ----------------------------------------------------------------------------- the table


def _interval_columns(key: str, value: float, reps: np.ndarray) -> dict[str, Any]:
    lo, hi = percentile_interval(reps)
    return {key: value, f"{key}_lo": lo, f"{key}_hi": hi}


def _difference_columns(key: str, reps: np.ndarray, value: float, what: str) -> dict[str, Any]:
    """A difference from the reference with its interval, minimal detectable effect and note."""
    lo, hi = percentile_interval(reps)
    mde = minimal_detectable_effect(reps)
    note = ""
    if holds(lo, hi, 0.0):
        note = (
            f"no {what} shown: the 95% interval holds 0; not detectable below "
            f"{100 * mde:.1f} points (80% power)"
        )
    return {key: value, f"{key}_lo": lo, f"{key}_hi": hi, f"{key}_mde": mde, f"{key}_note": note}


def build_control_table(config: dict, layout: Layout) -> list[dict]:
    """One row per scheme (``base`` first, the untrained pair): the three measures with their
    intervals, each scheme's differences from ``independent``, and what its runs logged."""
    ctl = config["control"]
    seeds = [int(s) for s in ctl["seeds"]]
    schemes = ["base", *ctl["schemes"]]
    n_boot = int(config["eval"]["bootstrap"])
    task = task_from_config(control_config(config, layout.control_models()), ctl["task"])
    try:
        problems = {p.id: p for p in task.problems(config["eval"]["split"])}
        cascade, robust, styles = {}, {}, {}
        stats: dict[str, dict[str, dict]] = {}
        for s in schemes:
            stats[s] = {}
            for measure, rates in (("cascade", cascade), ("robust", robust)):
                files = {k: layout.control_eval_samples(s, measure, k) for k in seeds}
                sums = {k: layout.control_eval_summary(s, measure, k) for k in seeds}
                stats[s][measure], rates[s] = system_stats(
                    f"control/{s}/{measure}", files, sums, n_boot
                )
            files = {k: layout.control_eval_samples(s, "cascade", k) for k in seeds}
            styles[s] = style_rates(task, problems, files)
    finally:
        task.close()
    if any(r is None for r in (*cascade.values(), *robust.values())):
        raise ValueError("control: an evaluation's samples.jsonl lacks problem ids and verdicts")
    ids = sorted(set.intersection(*(r.ids() for r in cascade.values())))
    style_ids = sorted(set.intersection(*(st["hidden"].ids() for st in styles.values())))
    # one bootstrap per measure over every scheme, problems drawn alike and seeds paired
    reps = {
        "cascade": two_level_bootstrap(
            [cascade[s].matrix(ids) for s in schemes], n_boot, RNG["control"], shared_seeds=True
        ),
        "robust": two_level_bootstrap(
            [robust[s].matrix(ids) for s in schemes], n_boot, RNG["control"], shared_seeds=True
        ),
    }
    k = len(STYLE_COUNTS)
    counts = two_level_bootstrap(
        [styles[s][name].matrix(style_ids) for s in schemes for name in STYLE_COUNTS],
        n_boot,
        RNG["control"],
        shared_seeds=True,
    )
    reps["hidden_share"], reps["lever"] = style_measures([counts[j::k] for j in range(k)])
    totals = {
        s: [styles[s][name].matrix(style_ids).sum() for name in STYLE_COUNTS] for s in schemes
    }
    observed = {s: style_measures([np.float64(x) for x in totals[s]]) for s in schemes}
    value = {
        "cascade": [float(cascade[s].matrix(ids).mean()) for s in schemes],
        "robust": [float(robust[s].matrix(ids).mean()) for s in schemes],
        "hidden_share": [float(observed[s][0]) for s in schemes],
        "lever": [float(observed[s][1]) for s in schemes],
    }
    ref = schemes.index(CONTROL_REFERENCE) if CONTROL_REFERENCE in schemes else None
    rows = []
    for i, s in enumerate(schemes):
        row: dict[str, Any] = {
            "scheme": s,
            "task": ctl["task"],
            "split": config["eval"]["split"],
            "seeds": len(seeds),
            "n_problems": len(ids),
            "styled_drafts": float(totals[s][0] + totals[s][1]),
        }
        row |= _interval_columns("lever", value["lever"][i], reps["lever"][i])
        for m in MEASURES:
            row |= _interval_columns(m, value[m][i], reps[m][i])
            if ref is not None and s not in ("base", CONTROL_REFERENCE):
                row |= _difference_columns(
                    f"{m}_minus_{CONTROL_REFERENCE}",
                    reps[m][i] - reps[m][ref],
                    value[m][i] - value[m][ref],
                    "difference",
                )
        row |= {
            f"{m}_per_seed_{k}": v
            for m in ("cascade", "robust")
            for k, v in stats_columns("", stats[s][m]).items()
            if k.startswith("pass@1_seed")
        }
        if s != "base":
            row |= logged(layout, s, seeds, n_boot)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- reading


def verdicts(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the control shows, stated from its rows (the README's outcomes)."""
    by = {r["scheme"]: r for r in rows}
    agon = by.get("agon")
    if agon is None or "hidden_share_minus_independent" not in agon:
        return ["The control needs the agon and independent schemes to say anything."]

    def shown(key: str) -> tuple[bool, str]:
        v, lo, hi, mde = (agon.get(f"{key}{s}") for s in ("", "_lo", "_hi", "_mde"))
        text = f"{100 * v:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] points (MDE {100 * mde:.1f})"
        return lo > 0, text

    style_up, style = shown("hidden_share_minus_independent")
    robust_up, robust = shown("robust_minus_independent")
    _, cascade = shown("cascade_minus_independent")
    lines = []
    base = by.get("base", {})
    pay = _pay_text(by)
    if base.get("lever_lo") is not None and not base["lever_lo"] > 0:
        lines.append(
            f"**Inconclusive: this control world gives the drafter no lever.** In the untrained "
            f"pair's cascade a read is right after a visible wrong draft {_pts(base, 'lever')} "
            f"more often than after a hidden one (the interval does not show it positive), so "
            f"hiding an error does not mislead its reader more and the rival term pays nothing "
            f"for it: the hidden share cannot test the implementation here (agon minus "
            f"independent: {style})."
        )
        if pay:
            lines.append(f"The runs' logs agree: {pay}.")
    elif not style_up:
        lines.append(
            f"**Not shown: agon's drafter hidden-error share does not exceed independent's** "
            f"({style}). By the rule stated before the first run, this reads as the "
            f"implementation falsified in this world."
        )
        if pay:
            paid = agon.get(f"{STYLE_PAY}_lo") is not None and agon[f"{STYLE_PAY}_lo"] > 0
            trained = [r["lever"] for s, r in by.items() if s != "base" and "lever" in r]
            lines.append(
                f"What the runs logged: {pay}. A wrong draft's pay for hiding is λ times how "
                f"much more often hidden errors misled their reads than visible ones in its step, "
                + (
                    "so the incentive was there and did not move the style within this budget."
                    if paid
                    else "so the incentive itself was not shown during training (the untrained "
                    f"pair's lever on the evaluated problems: {_pts(base, 'lever')}; the trained "
                    f"pairs': {100 * min(trained):+.1f} to {100 * max(trained):+.1f} points): "
                    "readers that learn to check hidden errors take the lever away, and the run "
                    "tested the drafter's side little."
                )
            )
    else:
        lines.append(
            f"**The contest reaches the drafter**: agon's hidden-error share exceeds independent's "
            f"by {style}."
        )
        lines.append(
            f"**The mechanism {'follows' if robust_up else 'fails in this world'}**: the agon "
            f"reader's pass@1 against fixed hidden-error drafts differs from independent's by "
            f"{robust}"
            + (
                "."
                if robust_up
                else ": the drafts turned misleading, the reader did not learn to check them."
            )
        )
    lines.append(f"The pair's own cascade, agon minus independent: {cascade}.")
    coop = by.get("cooperative")
    if coop and "hidden_share_minus_independent" in coop:
        v = coop["hidden_share_minus_independent"]
        lo, hi = (
            coop["hidden_share_minus_independent_lo"],
            coop["hidden_share_minus_independent_hi"],
        )
        lines.append(
            f"Cooperative (the drafter paid for its reader's success): hidden share "
            f"{100 * v:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] points against independent."
        )
    return lines


def _pts(r: Mapping[str, Any], key: str) -> str:
    """A measure in points with its interval, e.g. ``+20.6 [+7.3, +32.0] points``."""
    v, lo, hi = (100 * float(r[f"{key}{s}"]) for s in ("", "_lo", "_hi"))
    return f"{v:+.1f} [{lo:+.1f}, {hi:+.1f}] points"


def _pay_text(by: Mapping[str, Mapping[str, Any]]) -> str:
    """What the drafter A was paid during training for a hidden over a visible wrong draft,
    under agon with its interval and per seed, and under the other schemes ('' if not logged)."""
    agon = by.get("agon", {})
    if agon.get(STYLE_PAY) is None:
        return ""
    seeds = ", ".join(
        f"{float(v):+.3f}" for k, v in agon.items() if k.startswith(f"{STYLE_PAY}_seed")
    )
    text = f"during training a hidden wrong draft was paid {_fmt(agon[STYLE_PAY])}"
    if agon.get(f"{STYLE_PAY}_lo") is not None:
        text += f" [{_fmt(agon[f'{STYLE_PAY}_lo'])}, {_fmt(agon[f'{STYLE_PAY}_hi'])}]"
    text += " over a visible one under agon" + (f" (per seed {seeds})" if seeds else "")
    others = [
        f"{_fmt(r.get(STYLE_PAY))} under {s}" for s, r in by.items() if s not in ("base", "agon")
    ]
    return text + (f", {', '.join(others)}" if others else "")


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):+.3f}"


def control_markdown(rows: Sequence[Mapping[str, Any]], chash: str) -> str:
    """The control for reading: the three measures per scheme, the differences from
    independent, what the runs logged, and the verdicts."""

    def pct(r: Mapping[str, Any], key: str) -> str:
        if r.get(key) is None:
            return "n/a"
        return f"{100 * r[key]:.1f} [{100 * r[f'{key}_lo']:.1f}, {100 * r[f'{key}_hi']:.1f}]"

    def diff(r: Mapping[str, Any], key: str) -> str:
        if r.get(key) is None:
            return ""
        cell = f"{100 * r[key]:+.1f} [{100 * r[f'{key}_lo']:+.1f}, {100 * r[f'{key}_hi']:+.1f}]"
        return cell + (f" (MDE {100 * r[f'{key}_mde']:.1f})" if f"{key}_mde" in r else "")

    lines = [
        "# The positive control: can the toy world register the contest?",
        "",
        "One pair of base models whose habitual arith error is written visible (the misread "
        "operand on the page) or hidden (the right operand, a wrong result) at equal rates; "
        "readers meant to anchor on hidden errors (the lever column measures whether they do: "
        "the drafter's reason to hide an error); each reward scheme trained at every seed. 95% "
        "intervals: a two-level bootstrap over training seeds and problems (seeds paired across "
        "schemes; one base pair, so the base draw is not in them). MDE: the minimal detectable "
        "effect at 80% power. `base`: the untrained pair.",
        "",
        *head(["scheme", *(TITLES[m] for m in MEASURES), LEVER_TITLE]),
    ]
    for r in rows:
        lever = "n/a" if r.get("lever") is None else diff(r, "lever")
        lines.append(table_row([r["scheme"], *(pct(r, m) for m in MEASURES), lever]))
    lines += [
        "",
        f"## Each scheme minus {CONTROL_REFERENCE} (points)",
        "",
        *head(["scheme", *(TITLES[m].split(",")[0] for m in MEASURES)]),
    ]
    for r in rows:
        if f"{MEASURES[0]}_minus_{CONTROL_REFERENCE}" in r:
            cells = [diff(r, f"{m}_minus_{CONTROL_REFERENCE}") for m in MEASURES]
            lines.append(table_row([r["scheme"], *cells]))
    lines += [
        "",
        "## What the runs logged (mean over seeds; validation split)",
        "",
        *head(
            [
                "scheme",
                "hidden share, first quarter",
                "hidden share, last quarter",
                "A's pay, hidden over visible wrong draft",
                "B's probe before",
                "B's probe after",
            ]
        ),
    ]
    for r in rows:
        if r["scheme"] == "base":
            continue
        keys = (
            "train_hidden_share_first",
            "train_hidden_share_last",
            STYLE_PAY,
            "train_robust_first",
            "train_robust_last",
        )
        cells = [short(r.get(k)) for k in keys]
        if r.get(f"{STYLE_PAY}_lo") is not None:
            cells[2] = (
                f"{_fmt(r[STYLE_PAY])} [{_fmt(r[f'{STYLE_PAY}_lo'])}, {_fmt(r[f'{STYLE_PAY}_hi'])}]"
            )
        lines.append(table_row([r["scheme"], *cells]))
    lines += ["", "## What it shows", "", *(f"- {v}" for v in verdicts(rows)), ""]
    lines.append(f"Config hash: {chash}.")
    return "\n".join(lines) + "\n"


def build_control_report(config: dict, layout: Layout) -> dict[str, list[Path]]:
    """Write control.csv (+ provenance JSON) and control.md; return what was written."""
    rows = build_control_table(config, layout)
    ctl = config["control"]
    schemes = ["base", *ctl["schemes"]]
    seeds = [int(s) for s in ctl["seeds"]]
    inputs = [
        layout.control_eval_summary(s, m, k)
        for s in schemes
        for m in ("cascade", "robust")
        for k in seeds
    ]
    runs = [layout.control_train_summary(s, k) for s in ctl["schemes"] for k in seeds]
    return write_table(
        layout.table_files("control"),
        rows,
        control_markdown(rows, config_hash(config)),
        config,
        inputs + runs,
        provenance={"inputs": inputs, "runs": runs, "family": CONTROL_FAMILY},
    )
