"""Reading the positive control's tables: the pilot's learning-rate rule, the verdict's rule per
direction, what each table shows and its Markdown (``agon.report.control`` builds the rows)."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agon.config import CONTROL_DIRECTIONS, config_hash, control_config
from agon.report.control_measures import (
    CONTROL_REFERENCE,
    MEASURES,
    STYLE_PAY,
    table_spec,
)
from agon.report.render import head, short, table_row

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
    if agon.get(f"{key}_lo") in (None, ""):
        return "inconclusive", "the hidden share is not defined (no wrong drafts of one style)"
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
    lines += [
        "",
        "## How the drafts came out (all seeds; the cascade's drafts)",
        "",
        *head(["scheme", "direction", "drafts right (%)", "wrong drafts neither hidden nor "
               "visible (%): a step missing, out of order or mangled"]),
    ]  # fmt: skip
    for r in rows:
        if r["direction"] in CONTROL_DIRECTIONS and r.get("draft_right") is not None:
            cells = [f"{100 * float(r[k]):.1f}" for k in ("draft_right", "wrong_other")]
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
