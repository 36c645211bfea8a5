"""Adding a method, as docs/architecture.md tells it: a folder (settings plus a hook on the
single-model step) and one registry row. The method below is defined here and nowhere else; it
takes one real training step on the toy world and reaches the tables' columns, the figures'
colours, the planner and ``related.csv``'s columns with no other change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.duel_helpers import qwen3_models, solo_toy_config, write_config

ROOT = Path(__file__).resolve().parents[1]

# the whole method (about 30 lines): GRPO whose reward adds a bonus for varied tokens (the share
# of distinct tokens in a sample); its folder would be baselines/varied/__init__.py
METHOD = """
from dataclasses import dataclass

import numpy as np

from agon import rl
from agon.training import metrics as mk
from agon.training.settings import RLSettings, not_config
from agon.training.shell import InHouseTrainer

BONUS = "{model}/varied/bonus"  # mean bonus of the model's samples


@dataclass
class VariedSettings(RLSettings):
    weight: float = not_config(0.5, why="this example's own; a real method reads varied.weight")


def varied_step(task, policies, problems, s, step, keys=None, n_total=None):
    def reward(name, policy, ro, watch):
        ids = [[c.token_ids for c in row] for row in ro.completions]
        bonus = s.weight * np.array([[len(set(t)) / max(len(t), 1) for t in r] for r in ids])
        return ro.correct + bonus, {"bonus": float(bonus.sum()), "n": float(bonus.size)}

    def metrics(name, counts):
        return {mk.key(BONUS, model=name): counts["bonus"] / counts["n"]}

    hooks = rl.SoloHooks(reward=reward, metrics=metrics)
    return rl.solo_step(task, policies, problems, s, step, keys, hooks)


KEYS = (mk.Key(BONUS, "same", total="{model}/varied_bonus"),)
TRAINER = InHouseTrainer("varied", VariedSettings, varied_step, keys=KEYS)
"""

# the registry row (in agon/registry.py it is one line of TRAINERS), then every consumer
PROBE = """
import json, sys
from pathlib import Path
from agon import registry
registry.TRAINERS.rows["varied"] = registry.Method(
    "varied:TRAINER", colors=("#abcdef", "#fedcba"), helpers=()
)
registry.TRAINERS.register("varied", "varied:TRAINER")

from agon import methods
from agon.config import load_config
from agon.plan.planner import plan
from agon.report.figures import color_of
from agon.training.run import run
from safetensors.torch import load_file

config_path, base_a, out = sys.argv[1:4]
summary = run(config_path, "tiny", "arith", "varied", 0, out)
rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
before = load_file(Path(base_a) / "model.safetensors")
after = load_file(Path(out) / "A" / "model.safetensors")
config = load_config("config/config.yaml")
jobs = [j.job for j in plan(config, "results/related.csv").jobs if j.job.method == "varied"]
print(json.dumps({
    "steps": summary["steps"],
    "bonus": [r.get("A/varied/bonus") for r in rows],
    "total": summary.get("A/varied_bonus"),
    "moved": max(float((before[k] - after[k]).abs().max()) for k in before),
    "columns": methods.columns_for_methods(config["related"]["methods"]),
    "colors": [color_of(c) for c in ("varied", "varied_b")],
    "related": config["related"]["methods"],
    "plan_rules": sorted({j.rule for j in jobs}),
}))
"""


def test_a_method_defined_here_trains_and_reaches_every_consumer(tmp_path, tmp_path_factory):
    (tmp_path / "varied.py").write_text(METHOD)
    models = qwen3_models(tmp_path_factory, "varied-models")
    config = solo_toy_config(models, "cliff", {}, steps=1)
    path = write_config(tmp_path, config)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), str(models[0]), str(tmp_path / "run")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # one real step: its own metric in the row, its declared total in the summary, weights moved
    assert seen["steps"] == 1 and 0 < seen["bonus"][0] <= 0.5
    assert seen["total"] == seen["bonus"][0]
    assert seen["moved"] > 0
    # the tables, the figures, the related list and the planner know it from its row alone
    assert {"varied", "varied_b", "varied_cascade"} <= set(seen["columns"])
    assert seen["colors"] == ["#abcdef", "#fedcba"] and "varied" in seen["related"]
    assert "train" in seen["plan_rules"]
