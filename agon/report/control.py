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
pays the drafter for its reader's success, so (1) falls. The Markdown states the outcome: the
implementation is falsified if (1) does not separate ``agon`` from ``independent``; the
mechanism fails in this world if (1) moves and (2) does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agon.config import CONTROL_FAMILY, config_hash, control_config
from agon.report.compare import RNG, SeedRates, holds, stats_columns, system_stats
from agon.report.render import head, short, table_row
from agon.report.write import write_table
from agon.results import Layout, read_jsonl
from agon.stats import minimal_detectable_effect, percentile_interval, two_level_bootstrap
from agon.tasks import task_from_config
from agon.tasks.base import Problem, Task

MEASURES = ("hidden_share", "robust", "cascade")  # the three measures, in the table's order
CONTROL_REFERENCE = "independent"  # every scheme is compared with the duel without the contest
# the drafter's mean reward for a hidden over a visible wrong draft during training: the rival
# term's pull on the style (exactly 0 under independent), whether or not the style moved
STYLE_PAY = "train_style_pay"
TITLES = {
    "hidden_share": "drafter's hidden-error share (%)",
    "robust": "reader vs fixed hidden-error drafts, pass@1 (%)",
    "cascade": "the pair's own cascade, pass@1 (%)",
}


# ----------------------------------------------------------------------------- the hidden share


def style_counts(
    task: Task, problems: Mapping[str, Problem], samples: str | Path
) -> dict[str, tuple[float, float]]:
    """Per problem of one cascade evaluation: the hidden and the styled (hidden + visible)
    wrong drafts among its samples' drafts."""
    out: dict[str, tuple[float, float]] = {}
    for r in read_jsonl(samples):
        problem = problems.get(r.get("problem_id"))
        if problem is None or not r.get("drafts"):
            continue
        style = task.error_style(problem, r["drafts"][0])
        hidden, styled = out.get(problem.id, (0.0, 0.0))
        out[problem.id] = (hidden + (style == "hidden"), styled + (style in ("hidden", "visible")))
    return out


def style_rates(
    task: Task, problems: Mapping[str, Problem], samples: Mapping[int, str | Path]
) -> tuple[SeedRates, SeedRates]:
    """The hidden and styled draft counts per (seed, problem), as two rate tables whose ratio
    of means is the hidden share (a ratio of sums: problems with more wrong drafts weigh
    more)."""
    hidden, styled = {}, {}
    for seed, path in samples.items():
        counts = style_counts(task, problems, path)
        hidden[seed] = {pid: h for pid, (h, _) in counts.items()}
        styled[seed] = {pid: n for pid, (_, n) in counts.items()}
    return SeedRates(hidden), SeedRates(styled)


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
        cascade, robust, hidden, styled = {}, {}, {}, {}
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
            hidden[s], styled[s] = style_rates(task, problems, files)
    finally:
        task.close()
    if any(r is None for r in (*cascade.values(), *robust.values())):
        raise ValueError("control: an evaluation's samples.jsonl lacks problem ids and verdicts")
    ids = sorted(set.intersection(*(r.ids() for r in cascade.values())))
    style_ids = sorted(set.intersection(*(h.ids() for h in hidden.values())))
    # one bootstrap per measure over every scheme, problems drawn alike and seeds paired
    reps = {
        "cascade": two_level_bootstrap(
            [cascade[s].matrix(ids) for s in schemes], n_boot, RNG["control"], shared_seeds=True
        ),
        "robust": two_level_bootstrap(
            [robust[s].matrix(ids) for s in schemes], n_boot, RNG["control"], shared_seeds=True
        ),
    }
    counts = two_level_bootstrap(
        [m for s in schemes for m in (hidden[s].matrix(style_ids), styled[s].matrix(style_ids))],
        n_boot,
        RNG["control"],
        shared_seeds=True,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        reps["hidden_share"] = counts[0::2] / counts[1::2]
    value = {
        "cascade": [float(cascade[s].matrix(ids).mean()) for s in schemes],
        "robust": [float(robust[s].matrix(ids).mean()) for s in schemes],
        "hidden_share": [
            float(hidden[s].matrix(style_ids).sum() / max(styled[s].matrix(style_ids).sum(), 1))
            for s in schemes
        ],
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
            "styled_drafts": float(np.sum([styled[s].matrix(style_ids)])),
        }
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
            row |= _logged(layout, s, seeds)
        rows.append(row)
    return rows


def _logged(layout: Layout, scheme: str, seeds: Sequence[int]) -> dict[str, float]:
    """What the scheme's runs logged of the mechanism, mean over seeds: the drafter's hidden
    share in the first and last quarter of its steps, what it was paid for a hidden over a
    visible wrong draft (also per seed: the rival term's pull on the style), the reader's
    validation probe on wrong drafts before and after training
    (agon.training.metrics.mechanism_summary)."""
    keys = {
        "A/hidden_share_first": "train_hidden_share_first",
        "A/hidden_share_last": "train_hidden_share_last",
        "A/hidden_minus_visible_reward": STYLE_PAY,
        "B/first_robust_pass@1": "train_robust_first",
        "B/last_robust_pass@1": "train_robust_last",
    }
    out: dict[str, float] = {}
    summaries = {k: read_summary(layout.control_train_summary(scheme, k)) for k in seeds}
    for src, dst in keys.items():
        vals = {k: float(s[src]) for k, s in summaries.items() if s.get(src) is not None}
        if vals:
            out[dst] = float(np.mean(list(vals.values())))
        if dst == STYLE_PAY:
            out |= {f"{STYLE_PAY}_seed{k}": v for k, v in vals.items()}
    return out


def read_summary(path: str | Path) -> dict:
    """A run's summary.json (empty if absent)."""
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else {}


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
    if not style_up:
        pay = {k: v for k, v in agon.items() if k.startswith(f"{STYLE_PAY}_seed")}
        reaches = bool(pay) and all(float(v) > 0 for v in pay.values())
        ref = by.get(CONTROL_REFERENCE, {})
        lines.append(
            f"**Not shown: agon's drafter hidden-error share does not exceed independent's** "
            f"({style}). By the rule stated before the run, this reads as the implementation "
            f"falsified in this world."
        )
        if pay:
            seeds = ", ".join(f"{float(v):+.3f}" for v in pay.values())
            lines.append(
                f"What the runs logged narrows it: during training a hidden wrong draft was paid "
                f"{_fmt(agon.get(STYLE_PAY))} over a visible one under agon (per seed {seeds}) "
                f"and {_fmt(ref.get(STYLE_PAY))} under independent, so the rival term "
                + (
                    "**does reach the drafter's reward**; it did not move the style past what "
                    "every scheme's training moved it (the first table's `base` row against "
                    "each scheme's)."
                    if reaches
                    else "**does not reliably reach the drafter's reward** (not positive at "
                    "every seed)."
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
        return cell + f" (MDE {100 * r[f'{key}_mde']:.1f})"

    lines = [
        "# The positive control: can the toy world register the contest?",
        "",
        "One pair of base models whose habitual arith error is written visible (the misread "
        "operand on the page) or hidden (the right operand, a wrong result) at equal rates; "
        "readers that anchor on hidden errors; each reward scheme trained at every seed. 95% "
        "intervals: a two-level bootstrap over training seeds and problems (seeds paired across "
        "schemes; one base pair, so the base draw is not in them). MDE: the minimal detectable "
        "effect at 80% power. `base`: the untrained pair.",
        "",
        *head(["scheme", *(TITLES[m] for m in MEASURES)]),
    ]
    for r in rows:
        lines.append(table_row([r["scheme"], *(pct(r, m) for m in MEASURES)]))
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
        lines.append(table_row([r["scheme"], *(short(r.get(k)) for k in keys)]))
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
