"""Precision as a choice (``train.master_dtype``), compared on the toy world for both trainers.

From the same toy base models (seed 0's pair, built by the default workflow, or the folder
``AGON_BENCH_TOY_MODELS`` names), the same problems and the same sampling seeds, each trainer
runs ``STEPS`` steps three ways:

- ``fp32``: float32 weights and compute, the reference;
- ``bf16``: the family in bfloat16 with everything in it (weights, gradients, AdamW's moments:
  today's pure bf16, as on a GPU);
- ``fp32_master``: ``train.master_dtype: float32`` on a bfloat16 family (float32 masters and
  moments, the forward and backward autocast to bfloat16).

Metrics, per trainer (``duel`` on the project's loop, ``grpo`` on TRL's GRPOTrainer), for model
A: ``{trainer}.{mode}.update_error``, the distance of that run's weight update from the
reference's over the reference update's norm (0: the same update; 1: as far from it as the
update is long), and ``{trainer}.{mode}.s_per_step``. The rollouts share their seeds, so the
runs differ by precision alone until a sampled token flips. On a CPU bf16 is emulated in part
and slower; the speed that matters is a GPU's. Expect several minutes on 2 cores.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

from agon import duel
from agon.config import load_config
from agon.duel import DuelSettings
from agon.engines.hf import load_model
from agon.tasks import task_from_config
from agon.training import loop
from agon.training.shell import family_policies
from baselines.grpo import GRPOSettings, train_grpo

ROOT = Path(__file__).resolve().parents[1]
MODELS_ENV = "AGON_BENCH_TOY_MODELS"  # a folder holding A/ and B/ (default: seed 0's toy pair)
STEPS = 10  # optimizer steps of each run
MODES = {  # mode -> (family dtype, train.master_dtype)
    "fp32": ("float32", None),
    "bf16": ("bfloat16", None),
    "fp32_master": ("bfloat16", "float32"),
}


def _config(models: Path, dtype: str, master: str | None) -> dict:
    """The default config with the toy family on ``models`` in ``dtype``, ``STEPS`` steps."""
    config = load_config(ROOT / "config" / "config.yaml")
    fam = config["families"][0]
    fam["dtype"] = dtype
    for row in ("a", "b"):
        fam[f"model_{row}"]["model"] = str(models / row.upper())
    config["tasks"] = [r for r in config["tasks"] if r["name"] == "arith"]
    config["train"] |= {
        "steps": STEPS,
        "master_dtype": master,
        "eval_every": 0,
        "checkpoint_every": 0,
        "budget": {"match": "steps", "max_steps_factor": 1.0},
    }
    return config


def _weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().float().clone() for p in model.parameters()]


def _update_error(before, after, ref_before, ref_after) -> float:
    """|| update - reference update || / || reference update ||."""
    pairs = zip(after, before, ref_after, ref_before)
    num = sum(float(((a - b) - (ra - rb)).pow(2).sum()) for a, b, ra, rb in pairs)
    den = sum(float((ra - rb).pow(2).sum()) for ra, rb in zip(ref_after, ref_before))
    return (num / den) ** 0.5 if den else float("nan")


def _duel(config: dict, out: Path) -> tuple[list, list, float]:
    fam = config["families"][0]
    s = DuelSettings.from_config(config, fam, seed=0)
    policies, _ = family_policies(config, fam, s, None)
    before = _weights(policies["A"].model)
    task = task_from_config(config, "arith")
    t0 = time.perf_counter()
    try:
        loop.train(task, policies, s, out, duel.duel_step)
    finally:
        task.close()
    return before, _weights(policies["A"].model), (time.perf_counter() - t0) / STEPS


def _grpo(config: dict, out: Path) -> tuple[list, list, float]:
    fam = config["families"][0]
    s = GRPOSettings.from_config(config, fam, seed=0)
    s.budget_targets = {"A": STEPS, "B": STEPS}  # budget.match steps: STEPS each
    before = _weights(load_model(fam["model_a"]["model"], dtype="float32", device="cpu"))
    task = task_from_config(config, "arith")
    t0 = time.perf_counter()
    try:
        train_grpo(config, fam, task, s, "a", out / "A", out / "work")
    finally:
        task.close()
    after = _weights(load_model(out / "A", dtype="float32", device="cpu"))
    return before, after, (time.perf_counter() - t0) / STEPS


def run() -> dict[str, float]:
    models = Path(os.environ.get(MODELS_ENV) or ROOT / "results" / "toy" / "models" / "seed0")
    if not (models / "A" / "config.json").is_file():
        raise RuntimeError(
            f"no toy base models in {models}: run `snakemake --cores all results/table1.csv` "
            f"first, or set {MODELS_ENV}=DIR (a folder holding A/ and B/)"
        )
    torch.set_num_threads(1)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for trainer, fn in (("duel", _duel), ("grpo", _grpo)):
            runs = {}
            for mode, (dtype, master) in MODES.items():
                runs[mode] = fn(_config(models, dtype, master), Path(tmp) / f"{trainer}-{mode}")
            ref_before, ref_after, _ = runs["fp32"]
            for mode, (before, after, sec) in runs.items():
                out[f"{trainer}.{mode}.s_per_step"] = sec
                if mode != "fp32":
                    out[f"{trainer}.{mode}.update_error"] = _update_error(
                        before, after, ref_before, ref_after
                    )
    return out
