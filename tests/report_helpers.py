"""Synthetic results in the workflow's layout, for the report and figure tests.

Every expected number is recomputed by the tests from what :func:`write_synthetic` wrote,
never hard-coded.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from agon.config import validate_config
from agon.methods import COLUMNS, columns_for_methods
from agon.results import Layout

ALL_METHODS = [
    "base",
    "base_cascade",
    "moa",
    "grpo",
    "grpo_cascade",
    "agon",
    "agon_rev",
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
    "agon_single": 0.5,
    "agon_single_b": 0.45,
}


def make_config(
    out_dir: Path, families=("fam1",), tasks=("arith",), seeds=(0, 1), methods=ALL_METHODS
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
    return validate_config(cfg)


def write_synthetic(
    cfg: dict, layout: Layout, n_problems: int = 30, rng_seed: int = 0, with_ids: bool = True
) -> dict:
    """Write samples.jsonl / summary.json per eval and metrics.jsonl / summary.json per run.

    Returns {(family, task, system): {problem_id: [correct, ...]}} pooled over seeds."""
    rng = random.Random(rng_seed)
    truth: dict = {}
    n = cfg["eval"]["n_samples"]
    systems = columns_for_methods(cfg["methods"])
    for fam in cfg["families"]:
        for task in cfg["tasks"]:
            f, t = fam["name"], task["name"]
            for s in systems:
                for seed in cfg["seeds"]:
                    d = Path(layout.eval_dir(f, t, s, seed))
                    d.mkdir(parents=True, exist_ok=True)
                    lines, n_correct = [], 0
                    for i in range(n_problems):
                        for j in range(n):
                            # correct: True / False / None (ungraded, counts as a failure)
                            u = rng.random()
                            c = None if u > 0.98 else (rng.random() < RATES[s])
                            truth.setdefault((f, t, s), {}).setdefault(f"p{i}", []).append(
                                c is True
                            )
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
            for m in ("grpo", "agon"):
                if not any(COLUMNS[s].train == m for s in systems):
                    continue
                for seed in cfg["seeds"]:
                    d = Path(layout.train_dir(f, t, m, seed))
                    d.mkdir(parents=True, exist_ok=True)
                    rows = []
                    for step in range(10):
                        row = {"step": step, "tokens_generated": 100}
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
                    (d / "summary.json").write_text(
                        json.dumps({"tokens_generated": 1000 * (seed + 1), "wall_s": 7200.0})
                    )
    return truth


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))
