"""Synthetic results in the workflow's layout, for the report and figure tests.

Every expected number is recomputed by the tests from what :func:`write_synthetic` and
:func:`write_synthetic_ablations` wrote, never hard-coded.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np

from agon.config import validate_config
from agon.methods import (
    BUDGET_MATCHED,
    BUDGET_REFERENCE,
    COLUMNS,
    RELATED,
    columns_for_methods,
)
from agon.methods import eval_seeds as column_seeds
from agon.results import Layout

ALL_METHODS = [
    "base",
    "base_cascade",
    "moa",
    "grpo",
    "grpo_cascade",
    "agon",
    "agon_rev",
    "agon_independent",
    "agon_single",
]
# true success rates of the synthetic systems (the ordering of the paper's claim)
RATES = {
    "base": 0.3,
    "base_b": 0.25,
    "base_cascade": 0.35,
    "moa": 0.34,
    "grpo": 0.4,
    "grpo_b": 0.3,
    "grpo_cascade": 0.45,
    "agon": 0.7,
    "agon_rev": 0.65,
    "agon_independent": 0.6,
    "agon_single": 0.5,
    "agon_single_b": 0.45,
    # the related methods' columns (results/related.csv)
    "cliff": 0.45,
    "cliff_b": 0.32,
    "cliff_cascade": 0.5,
    "opd_then_rl": 0.47,
    "opd_then_rl_b": 0.35,
    "opd_then_rl_cascade": 0.52,
    "gar": 0.43,
    "gar_b": 0.31,
    "gar_cascade": 0.48,
}
SEED_SPREAD = 0.05  # a trained system's true rate moves by this per training seed


def true_rate(rate: float, seed_index: int, trained: bool) -> float:
    """The success rate at the ``seed_index``-th training seed: seeds differ when trained."""
    return rate + (SEED_SPREAD * (seed_index - 1) if trained else 0.0)


def make_config(
    out_dir: Path,
    families=("fam1",),
    tasks=("arith",),
    seeds=(0, 1),
    methods=ALL_METHODS,
    ablations: dict | None = None,
) -> dict:
    cfg = {
        "out_dir": str(out_dir),
        "seeds": list(seeds),
        "families": [
            {"name": f, "model_a": {"model": "a"}, "model_b": {"model": "b"}} for f in families
        ],
        "tasks": [{"name": t, "params": {}} for t in tasks],
        "methods": list(methods),
        "eval": {"n_samples": 4, "k": [1], "bootstrap": 200},
    }
    if ablations is not None:
        cfg["ablations"] = ablations
    return validate_config(cfg)


def _write_eval(
    d: Path,
    rng: random.Random,
    rate: float,
    n_problems: int,
    n: int,
    with_ids: bool,
    seed: int,
) -> dict[str, list[bool]]:
    """samples.jsonl and summary.json of one evaluation; returns {problem: [correct, ...]}."""
    d.mkdir(parents=True, exist_ok=True)
    lines, n_correct, truth = [], 0, {}
    for i in range(n_problems):
        for j in range(n):
            # correct: True / False / None (ungraded, counts as a failure)
            u = rng.random()
            c = None if u > 0.98 else (rng.random() < rate)
            truth.setdefault(f"p{i}", []).append(c is True)
            n_correct += c is True
            row = {"correct": c, "total_tokens": 10 + j}
            if with_ids:
                row["problem_id"] = f"p{i}"
            lines.append(json.dumps(row))
    (d / "samples.jsonl").write_text("\n".join(lines) + "\n")
    p1 = n_correct / (n_problems * n)
    summary = {
        "pass@1": p1,
        "pass@1_se": 0.01,
        "pass@1_lo": p1 - 0.05,
        "pass@1_hi": p1 + 0.05,
        "n_problems": n_problems,
        "total_generated_tokens": 1000 + seed,
        "session_wall_s": 36.0,
    }
    (d / "summary.json").write_text(json.dumps(summary))
    return truth


def train_summary(rng: random.Random, old: bool, seed: int) -> dict:
    """A training run's summary.json: the keys of summarize_metrics (old: only the keys the
    code before matched budgets wrote)."""
    if old:
        return {"tokens_generated": 1000 * (seed + 1), "wall_s": 7200.0}
    out: dict = {"steps": 10, "wall_s": 7200.0 + rng.randint(0, 600)}
    for m in ("A", "B"):
        out[f"{m}/steps"] = 10 + rng.randint(0, 3)
        out[f"{m}/completions"] = float(64 * out[f"{m}/steps"] + rng.randint(0, 64))
        out[f"{m}/tokens_generated"] = float(rng.randint(50_000, 60_000))
        out[f"{m}/tokens_trained"] = out[f"{m}/tokens_generated"] * 0.9
        out[f"{m}/skipped_updates"] = 0.0
    out["tokens_generated"] = out["A/tokens_generated"] + out["B/tokens_generated"]
    out["cpu_s"] = float(rng.randint(100, 200))
    out["gpu_s"] = 0.0
    return out


def write_synthetic(
    cfg: dict,
    layout: Layout,
    n_problems: int = 30,
    rng_seed: int = 0,
    with_ids: bool = True,
    old_summaries: bool = False,
    budget_miss: dict | None = None,
) -> dict:
    """Write samples.jsonl / summary.json per eval and metrics.jsonl / summary.json per run.

    Trained systems are evaluated at every seed of the config, untrained ones at the first
    (:func:`agon.methods.eval_seeds`); a trained system's true rate differs per seed. A
    budget-matched method's run (grpo) generates ``1 + budget_miss[(model, seed)]`` times the
    tokens of the same model in the reference (agon) run of its seed (default: within 1%) and
    records its ``budget`` as the trainer does. ``old_summaries``: training summaries with
    only the keys older code wrote.

    Returns {(family, task, system): {seed: {problem_id: [correct, ...]}}}."""
    rng = random.Random(rng_seed)
    truth: dict = {}
    n = cfg["eval"]["n_samples"]
    seeds = [int(s) for s in cfg["seeds"]]
    systems = columns_for_methods(cfg["methods"])
    trained = [m for m in dict.fromkeys(COLUMNS[s].train for s in systems) if m]
    # the reference run first: the budget-matched runs are sized from it
    trained.sort(key=lambda m: m != BUDGET_REFERENCE)
    for fam in cfg["families"]:
        for task in cfg["tasks"]:
            f, t = fam["name"], task["name"]
            for s in systems:
                for idx, seed in enumerate(column_seeds(s, seeds)):
                    rate = true_rate(RATES[s], idx, bool(COLUMNS[s].train))
                    d = Path(layout.eval_dir(f, t, s, seed))
                    truth.setdefault((f, t, s), {})[seed] = _write_eval(
                        d, rng, rate, n_problems, n, with_ids, seed
                    )
            for m in trained:
                for seed in seeds:
                    d = Path(layout.train_dir(f, t, m, seed))
                    d.mkdir(parents=True, exist_ok=True)
                    rows = []
                    for step in range(10):
                        row = {
                            "step": step,
                            "tokens_generated": 100,
                            "A/drafter/tokens": 30,
                            "B/drafter/tokens": 30,
                        }
                        if m != "grpo":
                            row |= {"A/reader/tokens": 25, "B/reader/tokens": 15}
                        if step % 3 == 0:
                            slope = 0.03 if m == "agon" else 0.015
                            row["eval/hard_pass@1/A"] = 0.3 + slope * step
                            row["eval/hard_pass@1/B"] = 0.25 + slope * step
                        if m == "agon":
                            dr, rd = ("A", "B") if step % 2 == 0 else ("B", "A")
                            row[f"{dr}->{rd}/duel/drafter_wins"] = 0.2
                            row[f"{dr}->{rd}/duel/reader_wins"] = 0.5
                            row[f"{dr}->{rd}/duel/ties"] = 0.3
                        rows.append(json.dumps(row))
                    (d / "metrics.jsonl").write_text("\n".join(rows) + "\n")
                    summary = train_summary(rng, old_summaries, seed)
                    if m in RELATED and not old_summaries:  # a teacher's tokens, per model
                        summary |= {f"{x}/teacher_tokens": 1000.0 * (seed + 1) for x in "AB"}
                    if m in BUDGET_MATCHED and BUDGET_REFERENCE in trained and not old_summaries:
                        ref_path = layout.train_summary(f, t, BUDGET_REFERENCE, seed)
                        ref = json.loads(Path(ref_path).read_text())
                        budget: dict = {"match": "tokens", "reference": ref_path, "targets": {}}
                        for model in ("A", "B"):
                            target = ref[f"{model}/tokens_generated"]
                            miss = (budget_miss or {}).get((model, seed), 0.01 * (seed + 1))
                            spent = target * (1 + miss)
                            summary[f"{model}/tokens_generated"] = spent
                            summary[f"{model}/cpu_s"] = summary["cpu_s"] / 2
                            budget["targets"][model] = target
                            budget[f"{model}/spent"] = spent
                            budget[f"{model}/relative_difference"] = (spent - target) / target
                            budget[f"{model}/hit_step_cap"] = miss < -0.05
                        summary["budget"] = budget
                        summary["tokens_generated"] = sum(
                            summary[f"{x}/tokens_generated"] for x in ("A", "B")
                        )
                    (d / "summary.json").write_text(json.dumps(summary))
    return truth


def write_synthetic_ablations(
    cfg: dict, layout: Layout, rates: dict[str, float], n_problems: int = 30, rng_seed: int = 1
) -> dict:
    """Write each ablation variant's evaluation (samples.jsonl, summary.json) and training
    summary at every ``ablations.seeds`` seed; ``rates``: each variant's true rate (it moves
    per seed as a trained system's does).

    Returns {(family, task, variant): {seed: {problem_id: [correct, ...]}}}."""
    rng = random.Random(rng_seed)
    truth: dict = {}
    n = cfg["eval"]["n_samples"]
    for fam in cfg["families"]:
        for task in cfg["tasks"]:
            f, t = fam["name"], task["name"]
            for v in cfg["ablations"]["variants"]:
                name = v["name"]
                for idx, seed in enumerate(cfg["ablations"]["seeds"]):
                    d = Path(layout.ablation_eval_dir(f, t, name, seed))
                    rate = true_rate(rates[name], idx, True)
                    truth.setdefault((f, t, name), {})[seed] = _write_eval(
                        d, rng, rate, n_problems, n, True, seed
                    )
                    run = Path(layout.ablation_train_summary(f, t, name, seed))
                    run.parent.mkdir(parents=True, exist_ok=True)
                    run.write_text(json.dumps(train_summary(rng, False, seed)))
    return truth


def rate_matrix(per_seed: dict[int, dict[str, list[bool]]]) -> np.ndarray:
    """(seeds, problems) array of each seed's share of correct samples per problem, from the
    truth :func:`write_synthetic` returns for one system."""
    ids = sorted(next(iter(per_seed.values())))
    return np.array([[sum(v[i]) / len(v[i]) for i in ids] for v in per_seed.values()])


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))
