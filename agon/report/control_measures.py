"""What the positive control measures from its evaluations' samples and its runs' logs.

The drafter's error style per cascade sample (``Task.error_style``: hidden or visible) counted
per problem, with how often the read after each was right: the hidden share and the *lever*
(how much more often a read is right after a visible wrong draft than after a hidden one).
From the training logs, for either direction: the drafter's pay for a hidden over a visible
wrong draft at every step, with a two-level interval, the mechanism's first and last quarter,
the validation probes; from the model folders, how far training moved each model.
``agon.report.control`` makes the tables from them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from agon.report.compare import RNG, SeedRates
from agon.results import Layout, read_jsonl
from agon.stats import percentile_interval
from agon.tasks.base import Problem, Task
from agon.training import metrics as mk

# the drafter's mean reward for a hidden over a visible wrong draft during training: the rival
# term's pull on the style (exactly 0 under independent), whether or not the style moved
STYLE_PAY = "train_style_pay"


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


def draft_kinds(
    task: Task, problems: Mapping[str, Problem], samples: Mapping[int, str | Path]
) -> dict[str, float]:
    """How a direction's cascade drafts came out, over every seed's samples: the share of
    drafts that are right (``draft_right``), and among the wrong ones the share that are
    neither hidden nor visible (``wrong_other``: a step missing, out of order or mangled), the
    channel a drafter has besides the style."""
    kinds = {"right": 0, "hidden": 0, "visible": 0, "other": 0}
    for path in samples.values():
        for r in read_jsonl(path):
            problem = problems.get(r.get("problem_id"))
            if problem is not None and r.get("drafts"):
                kinds[task.error_style(problem, r["drafts"][0]) or "right"] += 1
    total, wrong = sum(kinds.values()), sum(kinds.values()) - kinds["right"]
    return {
        "draft_right": kinds["right"] / total if total else float("nan"),
        "wrong_other": kinds["other"] / wrong if wrong else float("nan"),
    }


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
    layout: Layout,
    arm: str,
    stage: str,
    seeds: Sequence[int],
    drafter: str,
    reader: str,
    n_boot: int = 1000,
) -> dict[str, float]:
    """What a stage's runs logged of one direction (``drafter`` and ``reader``: ``A`` or ``B``),
    mean over seeds: the drafter's hidden share in the first and last quarter of its steps, the
    reader's validation probe on wrong drafts before and after, and the drafter's pay for a
    hidden over a visible wrong draft (also per seed) with its interval (:func:`pay_interval`)."""
    keys = {
        f"{drafter}/hidden_share_first": "train_hidden_share_first",
        f"{drafter}/hidden_share_last": "train_hidden_share_last",
        f"{reader}/first_robust_pass@1": "train_robust_first",
        f"{reader}/last_robust_pass@1": "train_robust_last",
    }
    out: dict[str, float] = {}
    summaries = {k: read_summary(layout.control_train_summary(arm, stage, k)) for k in seeds}
    for src, dst in keys.items():
        vals = [float(s[src]) for s in summaries.values() if s.get(src) is not None]
        if vals:
            out[dst] = float(np.mean(vals))
    steps = {
        k: pay_steps(Path(layout.control_train_dir(arm, stage, k)) / "metrics.jsonl", drafter)
        for k in seeds
    }
    steps = {k: v for k, v in steps.items() if len(v)}
    out |= {
        f"{STYLE_PAY}_seed{k}": float((v[:, 0] * v[:, 1]).sum() / v[:, 1].sum())
        for k, v in steps.items()
    }
    if steps:
        value, lo, hi = pay_interval(list(steps.values()), n_boot)
        out |= {STYLE_PAY: value, f"{STYLE_PAY}_lo": lo, f"{STYLE_PAY}_hi": hi}
    return out


def pay_steps(metrics: Path, drafter: str) -> np.ndarray:
    """(steps, 2): the drafter's logged pay for a hidden over a visible wrong draft at each
    step that had both, and its weight (the hidden-visible pairs behind it)."""
    if not metrics.is_file():
        return np.zeros((0, 2))
    pay, weight = (mk.key(k, model=drafter) for k in (mk.STYLE_REWARD_GAP, mk.STYLE_GAP_WEIGHT))
    rows = [
        (float(r[pay]), float(r.get(weight, 1.0)))
        for r in read_jsonl(metrics)
        if isinstance(r.get(pay), (int, float)) and np.isfinite(r[pay])
    ]
    return np.asarray(rows, dtype=float).reshape(-1, 2)


def pay_interval(
    per_seed: Sequence[np.ndarray], n_boot: int = 1000, seed: int = RNG["control"]
) -> tuple[float, float, float]:
    """The mean pay over every seed's steps, each step weighted by its hidden-visible pairs,
    with a 95% two-level bootstrap interval (seeds, then steps within each drawn seed; steps of
    one run are treated as exchangeable)."""
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


def probes(metrics: Path, model: str) -> tuple[float | None, float | None]:
    """A model's validation probe (greedy pass@1 alone) before its first and after its last
    update, from a run's ``metrics.jsonl`` (None where it was never probed)."""
    if not metrics.is_file():
        return None, None
    key = mk.key(mk.HARD_PASS1, model=model)
    vals = [float(r[key]) for r in read_jsonl(metrics) if isinstance(r.get(key), (int, float))]
    return (vals[0], vals[-1]) if vals else (None, None)


def weight_change(base: str | Path, trained: str | Path) -> float:
    """How far training moved a model: ||theta - theta_0|| / ||theta_0|| over every tensor of
    its ``model.safetensors`` (0: bitwise unchanged)."""
    a, b = (
        load_file(Path(base) / "model.safetensors"),
        load_file(Path(trained) / "model.safetensors"),
    )
    num = sum(float(np.sum((b[k].astype(np.float64) - a[k]) ** 2)) for k in a)
    den = sum(float(np.sum(a[k].astype(np.float64) ** 2)) for k in a)
    return float(np.sqrt(num / den))


def read_summary(path: str | Path) -> dict:
    """A run's summary.json (empty if absent)."""
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else {}


# ----------------------------------------------------------------------------- the tables

TABLES = ("control", "control_pilot", "control_curriculum")
MEASURES = ("hidden_share", "robust", "cascade")  # the three measures, in the table's order
CONTROL_REFERENCE = "independent"  # every scheme is compared with the duel without the contest


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
