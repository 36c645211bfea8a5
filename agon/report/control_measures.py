"""What the positive control measures from its evaluations' samples and its runs' logs.

The drafter's error style per cascade sample (``Task.error_style``: hidden or visible) counted
per problem, with how often the read after each was right: the hidden share and the *lever*
(how much more often a read is right after a visible wrong draft than after a hidden one).
From the training logs: the drafter's pay for a hidden over a visible wrong draft at every
step, with a two-level interval, and the mechanism's first and last quarter
(``agon.training.metrics.mechanism_summary``). ``agon.report.control`` makes the table from
them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from agon.report.compare import RNG, SeedRates
from agon.results import Layout, read_jsonl
from agon.stats import percentile_interval
from agon.tasks.base import Problem, Task
from agon.training import metrics as mk

# the drafter's mean reward for a hidden over a visible wrong draft during training: the rival
# term's pull on the style (exactly 0 under independent), whether or not the style moved
STYLE_PAY = "train_style_pay"
PAY_KEY = mk.key(mk.STYLE_REWARD_GAP, model="A")  # the drafter A's per-step pay in metrics.jsonl
PAY_WEIGHT = mk.key(mk.STYLE_GAP_WEIGHT, model="A")


# ----------------------------------------------------------------------------- the hidden share


STYLE_COUNTS = ("hidden", "visible", "hidden_read_right", "visible_read_right")


def style_counts(
    task: Task, problems: Mapping[str, Problem], samples: str | Path
) -> dict[str, np.ndarray]:
    """Per problem of one cascade evaluation, the counts :data:`STYLE_COUNTS`: its samples'
    hidden and visible wrong drafts, and how many of the reads after each were right."""
    out: dict[str, np.ndarray] = {}
    for r in read_jsonl(samples):
        problem = problems.get(r.get("problem_id"))
        if problem is None or not r.get("drafts"):
            continue
        style = task.error_style(problem, r["drafts"][0])
        counts = out.setdefault(problem.id, np.zeros(len(STYLE_COUNTS)))
        if style in ("hidden", "visible"):
            right = bool(r.get("correct"))
            counts[STYLE_COUNTS.index(style)] += 1
            counts[STYLE_COUNTS.index(f"{style}_read_right")] += right
    return out


def style_rates(
    task: Task, problems: Mapping[str, Problem], samples: Mapping[int, str | Path]
) -> dict[str, SeedRates]:
    """The counts of :data:`STYLE_COUNTS` per (seed, problem), one rate table each: ratios of
    their means are the hidden share and the reads' accuracy after each style (ratios of
    sums: problems with more wrong drafts weigh more)."""
    per = {name: {} for name in STYLE_COUNTS}
    for seed, path in samples.items():
        counts = style_counts(task, problems, path)
        for j, name in enumerate(STYLE_COUNTS):
            per[name][seed] = {pid: float(c[j]) for pid, c in counts.items()}
    return {name: SeedRates(v) for name, v in per.items()}


def style_measures(m: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(hidden share, lever) from the :data:`STYLE_COUNTS` sums (last axis: problems summed):
    the lever is how much more often a read is right after a visible wrong draft than after a
    hidden one, the drafter's reason under the rival term to hide its errors."""
    hidden, visible, hidden_right, visible_right = m
    with np.errstate(divide="ignore", invalid="ignore"):
        share = hidden / (hidden + visible)
        lever = visible_right / visible - hidden_right / hidden
    return share, lever


# ----------------------------------------------------------------------------- the runs' logs


def logged(
    layout: Layout, scheme: str, seeds: Sequence[int], n_boot: int = 1000
) -> dict[str, float]:
    """What the scheme's runs logged of the mechanism, mean over seeds: the drafter's hidden
    share in the first and last quarter of its steps, what it was paid for a hidden over a
    visible wrong draft (also per seed: the rival term's pull on the style), the reader's
    validation probe on wrong drafts before and after training
    (agon.training.metrics.mechanism_summary). The pay's value and interval come from the
    runs' steps (:func:`pay_interval`)."""
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
    steps = {
        k: pay_steps(Path(layout.control_train_dir(scheme, k)) / "metrics.jsonl") for k in seeds
    }
    steps = {k: v for k, v in steps.items() if len(v)}
    if steps:
        value, lo, hi = pay_interval(list(steps.values()), n_boot)
        out |= {STYLE_PAY: value, f"{STYLE_PAY}_lo": lo, f"{STYLE_PAY}_hi": hi}
    return out


def pay_steps(metrics: Path) -> np.ndarray:
    """(steps, 2): the drafter A's logged pay for a hidden over a visible wrong draft at each
    step that had both, and its weight (the pairs behind it)."""
    if not metrics.is_file():
        return np.zeros((0, 2))
    rows = [
        (float(r[PAY_KEY]), float(r.get(PAY_WEIGHT, 1.0)))
        for r in read_jsonl(metrics)
        if isinstance(r.get(PAY_KEY), (int, float)) and np.isfinite(r[PAY_KEY])
    ]
    return np.asarray(rows, dtype=float).reshape(-1, 2)


def pay_interval(
    per_seed: Sequence[np.ndarray], n_boot: int = 1000, seed: int = RNG["control"]
) -> tuple[float, float, float]:
    """The weighted mean pay over every seed's steps, with a 95% two-level bootstrap interval
    (seeds, then steps within each drawn seed; steps of one run are treated as exchangeable)."""
    rng = np.random.default_rng(seed)
    allv = np.concatenate(per_seed)
    value = float((allv[:, 0] * allv[:, 1]).sum() / allv[:, 1].sum())
    reps = np.empty(n_boot)
    for b in range(n_boot):
        num = den = 0.0
        for i in rng.integers(0, len(per_seed), len(per_seed)):
            x = per_seed[i][rng.integers(0, len(per_seed[i]), len(per_seed[i]))]
            num, den = num + float((x[:, 0] * x[:, 1]).sum()), den + float(x[:, 1].sum())
        reps[b] = num / den if den else np.nan
    lo, hi = percentile_interval(reps[np.isfinite(reps)])
    return value, lo, hi


def read_summary(path: str | Path) -> dict:
    """A run's summary.json (empty if absent)."""
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else {}
