"""Precision as a choice (``train.master_dtype``, ``train.bf16_update``): AdamW's steps on one
fixed stream of gradients at each config's learning rate, and the toy world for both trainers.

**AdamW alone** (always run). One weight tensor (``WEIGHTS`` entries drawn like a 0.02-std
initialization) takes a run's steps of AdamW on one fixed stream of gradients (a constant part
plus twice as much noise, rounded to bfloat16 as a bf16 backward gives them), at the GPU
configs' learning rate and steps (``config/paper.yaml``) and at the toy world's
(``config/config.yaml``), in float64 (the reference) and:

- ``bf16``: bfloat16 weights and moments, torch's AdamW (``bf16_update: plain``: pure bf16);
- ``fp32_master``: float32 weights and moments (``master_dtype: float32``);
- ``bf16_kahan``: bfloat16 weights, ``bf16_update: kahan`` (torch-optimi);
- ``bf16_sr``: bfloat16 weights, ``bf16_update: stochastic_rounding`` (torchao), over
  ``SR_SEEDS`` seeds: the mean, with ``_min`` and ``_max``;
- ``bf16_floor``: the float64 run's end rounded once to bfloat16: the least error any
  bfloat16 weights can show, whatever their optimizer;
- ``fp32_master_fwd``: the float32 masters as a bfloat16 forward computes with them (autocast
  rounds each master to bfloat16 for every matmul): the change between the start's and the
  end's rounded masters. It is what ``fp32_master``'s error is beside the other modes' on the
  weights a forward sees, and it sits on the floor too.

Each optimizer is built as the trainers build it (:func:`agon.training.policy.adamw_class`).
Metric ``adamw_lr{lr}_steps{steps}.{mode}.update_error``: the distance of the weight change
after the run from the float64 run's, over the float64 change's norm (0: the same change; 1: as
far from it as the change is long). A table prints them side by side.

**The toy world** (when its base models are there). From the same toy base models (seed 0's
pair, built by the default workflow, or the folder ``AGON_BENCH_TOY_MODELS`` names), the same
problems and the same sampling seeds, each trainer runs ``STEPS`` steps five ways:

- ``fp32``: float32 weights and compute, the reference;
- ``bf16``: the family in bfloat16 with everything in it (weights, gradients, AdamW's moments:
  pure bf16, as on a GPU);
- ``fp32_master``: ``train.master_dtype: float32`` on a bfloat16 family (float32 masters and
  moments, the forward and backward autocast to bfloat16);
- ``bf16_kahan``, ``bf16_sr``: pure bf16 with ``train.bf16_update`` kahan, stochastic_rounding.

Metrics, per trainer (``duel`` on the project's loop, ``grpo`` on TRL's GRPOTrainer), for model
A: ``{trainer}.{mode}.update_error``, the distance of that run's weight update from the
reference's over the reference update's norm (0: the same update; 1: as far from it as the
update is long), and ``{trainer}.{mode}.s_per_step``. The rollouts share their seeds, so the
runs differ by precision alone until a sampled token flips. On a CPU bf16 is emulated in part
and slower; the speed that matters is a GPU's. Expect several minutes on 2 cores. Without
the toy base models this part is left out, and says so.
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
from agon.training.policy import adamw_class
from agon.training.settings import RLSettings
from agon.training.shell import family_policies
from baselines.grpo import GRPOSettings, train_grpo

ROOT = Path(__file__).resolve().parents[1]
MODELS_ENV = "AGON_BENCH_TOY_MODELS"  # a folder holding A/ and B/ (default: seed 0's toy pair)
STEPS = 10  # optimizer steps of each toy-world run
MODES = {  # mode -> (family dtype, train.master_dtype, train.bf16_update)
    "fp32": ("float32", None, "plain"),
    "bf16": ("bfloat16", None, "plain"),
    "fp32_master": ("bfloat16", "float32", "plain"),
    "bf16_kahan": ("bfloat16", None, "kahan"),
    "bf16_sr": ("bfloat16", None, "stochastic_rounding"),
}
# AdamW alone: the configs whose learning rate and steps a run takes
RATES_FROM = ("config/paper.yaml", "config/small-gpu.yaml", "config/config.yaml")
WEIGHTS = 1 << 14  # entries of the weight tensor
INIT_STD = 0.02  # the usual initialization's spread
SR_SEEDS = 5  # stochastic rounding's runs (its spread)
UPDATES = {  # mode -> (weights' dtype, train.bf16_update)
    "bf16": (torch.bfloat16, "plain"),
    "fp32_master": (torch.float32, "plain"),
    "bf16_kahan": (torch.bfloat16, "kahan"),
    "bf16_sr": (torch.bfloat16, "stochastic_rounding"),
}


def _stream(steps: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The start weights and ``steps`` gradients (float64 holding bfloat16 values), seeded."""
    gen = torch.Generator().manual_seed(0)
    w0 = torch.randn(WEIGHTS, generator=gen, dtype=torch.float64) * INIT_STD
    mean = torch.randn(WEIGHTS, generator=gen, dtype=torch.float64)
    grads = [
        ((0.5 * mean + torch.randn(WEIGHTS, generator=gen, dtype=torch.float64)) * 1e-3)
        .to(torch.bfloat16)
        .double()
        for _ in range(steps)
    ]
    return w0, grads


def _adamw_change(dtype, update, train: dict, w0, grads, seed: int = 0) -> torch.Tensor:
    """The weight change (float64) after AdamW's steps on ``grads`` from ``w0`` in ``dtype``,
    the optimizer built as the trainers build it for ``update``."""
    p = torch.nn.Parameter(w0.to(dtype))
    start = p.detach().double().clone()
    cls, extra = adamw_class(update, {dtype})
    opt = cls(
        [p],
        lr=train["learning_rate"],
        betas=RLSettings().adam_betas,
        weight_decay=train["weight_decay"],
        **extra,
    )
    torch.manual_seed(seed)  # stochastic rounding draws from torch's generator
    for g in grads:
        p.grad = g.to(dtype, copy=True)  # torch-optimi writes into the gradient
        opt.step()
    return p.detach().double() - start


def _change_error(change: torch.Tensor, ref: torch.Tensor) -> float:
    return float((change - ref).norm() / ref.norm())


def _adamw_errors() -> dict[str, float]:
    """Each :data:`UPDATES` mode's update error at each of :data:`RATES_FROM`'s learning rate
    and steps, and the bfloat16 floor; printed side by side."""
    out: dict[str, float] = {}
    rows = []
    for path in RATES_FROM:
        train = load_config(ROOT / path)["train"]
        lr, steps = train["learning_rate"], train["steps"]
        w0, grads = _stream(steps)
        ref = _adamw_change(torch.float64, "plain", train, w0, grads)
        pre = f"adamw_lr{lr:g}_steps{steps}"
        for mode, (dtype, update) in UPDATES.items():
            seeds = range(SR_SEEDS) if update == "stochastic_rounding" else range(1)
            errs = [
                _change_error(_adamw_change(dtype, update, train, w0, grads, s), ref) for s in seeds
            ]
            out[f"{pre}.{mode}.update_error"] = sum(errs) / len(errs)
            if len(errs) > 1:
                out[f"{pre}.{mode}.update_error_min"] = min(errs)
                out[f"{pre}.{mode}.update_error_max"] = max(errs)
        start = w0.to(torch.bfloat16).double()
        floor = (start + ref).to(torch.bfloat16).double() - start
        out[f"{pre}.bf16_floor.update_error"] = _change_error(floor, ref)
        master = w0.to(torch.float32)
        end = (master.double() + _adamw_change(torch.float32, "plain", train, w0, grads)).float()
        seen = end.to(torch.bfloat16).double() - master.to(torch.bfloat16).double()
        out[f"{pre}.fp32_master_fwd.update_error"] = _change_error(seen, ref)
        rows.append((path, lr, steps, pre))
    _print_table(rows, out)
    return out


def _print_table(rows, out: dict[str, float]) -> None:
    print(
        f"AdamW on one fixed stream of gradients, {WEIGHTS} weights ~ N(0, {INIT_STD}): the "
        "weight change's error against float64's (0: the same change)"
    )
    modes = [*UPDATES, "bf16_floor", "fp32_master_fwd"]
    widths = {m: 26 if m == "bf16_sr" else 15 if m == "fp32_master_fwd" else 12 for m in modes}
    print(
        f"{'config':20s} {'lr':>8s} {'steps':>6s} " + " ".join(f"{m:>{widths[m]}s}" for m in modes)
    )
    for path, lr, steps, pre in rows:
        cells = []
        for m in modes:
            v, lo, hi = (out.get(f"{pre}.{m}.update_error{end}") for end in ("", "_min", "_max"))
            cell = f"{v:.3g}" if lo is None else f"{v:.3g} [{lo:.3g}, {hi:.3g}]"
            cells.append(f"{cell:>{widths[m]}s}")
        print(f"{path:22s} {lr:>8g} {steps:>6d} " + " ".join(cells))
    print(f"bf16_sr: the mean [min, max] over {SR_SEEDS} seeds")


def _config(models: Path, dtype: str, master: str | None, update: str) -> dict:
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
        "bf16_update": update,
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
    torch.set_num_threads(1)
    out = _adamw_errors()
    models = Path(os.environ.get(MODELS_ENV) or ROOT / "results" / "toy" / "models" / "seed0")
    if not (models / "A" / "config.json").is_file():
        print(
            f"toy world left out: no toy base models in {models}: run `snakemake --cores all "
            f"results/table1.csv` first, or set {MODELS_ENV}=DIR (a folder holding A/ and B/)"
        )
        return out
    with tempfile.TemporaryDirectory() as tmp:
        for trainer, fn in (("duel", _duel), ("grpo", _grpo)):
            runs = {}
            for mode, (dtype, master, update) in MODES.items():
                config = _config(models, dtype, master, update)
                runs[mode] = fn(config, Path(tmp) / f"{trainer}-{mode}")
            ref_before, ref_after, _ = runs["fp32"]
            for mode, (before, after, sec) in runs.items():
                out[f"{trainer}.{mode}.s_per_step"] = sec
                if mode != "fp32":
                    out[f"{trainer}.{mode}.update_error"] = _update_error(
                        before, after, ref_before, ref_after
                    )
    return out
