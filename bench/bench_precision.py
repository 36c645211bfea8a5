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

Then, for each GPU config (:data:`GPU_CONFIGS`: bfloat16 families, lr 1e-6), pure bf16, float32
masters, stochastic rounding and Kahan side by side, each said to be within the float32-master
error or not, and the config's own setting (``train.master_dtype``, ``train.bf16_update``)
marked. The float32-master error a bf16 setting is held to is ``fp32_master_fwd``'s: the
weights the forward computes with are bfloat16 either way, and no bfloat16 weights come closer
than ``bf16_floor``, far above the float32 masters' own error. Metrics
``adamw_{config}.chosen.update_error`` and ``adamw_{config}.chosen_over_fp32_master_fwd`` (the
chosen setting's error over that bound; :data:`TARGETS`: at most 1).

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
# AdamW alone: the configs whose learning rate and steps a run takes; the GPU configs train
# bfloat16 weights, and their setting is held to the float32-master error
GPU_CONFIGS = ("config/paper.yaml", "config/small-gpu.yaml")
RATES_FROM = (*GPU_CONFIGS, "config/config.yaml")
WEIGHTS = 1 << 14  # entries of the weight tensor
INIT_STD = 0.02  # the usual initialization's spread
SR_SEEDS = 5  # stochastic rounding's runs (its spread)
UPDATES = {  # mode -> (weights' dtype, train.bf16_update)
    "bf16": (torch.bfloat16, "plain"),
    "fp32_master": (torch.float32, "plain"),
    "bf16_kahan": (torch.bfloat16, "kahan"),
    "bf16_sr": (torch.bfloat16, "stochastic_rounding"),
}
UPDATE_MODE = {"plain": "bf16", "kahan": "bf16_kahan", "stochastic_rounding": "bf16_sr"}
BOUND = "fp32_master_fwd"  # the float32-master error a bf16 setting must land within
SAID = {  # mode -> what the verdict calls it
    "bf16": "pure bf16 (bf16_update: plain)",
    "fp32_master": "float32 masters (master_dtype: float32)",
    "bf16_kahan": "bf16_update: kahan",
    "bf16_sr": "bf16_update: stochastic_rounding",
}
TARGETS = {
    f"adamw_{Path(c).stem}.chosen_over_{BOUND}": ("<=", 1.0) for c in GPU_CONFIGS
}  # each GPU config's setting within the float32-master error


def chosen_mode(config: dict) -> str:
    """The :data:`UPDATES` mode a config's training takes: float32 masters, else its
    ``train.bf16_update`` on 16-bit weights (a float32 family's weights are float32 masters)."""
    train = config["train"]
    float32 = all(f.get("dtype") == "float32" for f in config["families"])
    if train.get("master_dtype") == "float32" or float32:
        return "fp32_master"
    return UPDATE_MODE[train.get("bf16_update") or "plain"]


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


def adamw_errors(train: dict, modes=(*UPDATES, "bf16_floor", BOUND)) -> dict[str, float]:
    """Each of ``modes``' update error at ``train``'s learning rate and steps, by mode
    (stochastic rounding's mean over :data:`SR_SEEDS` seeds, with ``bf16_sr_min`` and
    ``bf16_sr_max``)."""
    w0, grads = _stream(train["steps"])
    ref = _adamw_change(torch.float64, "plain", train, w0, grads)
    out: dict[str, float] = {}
    for mode in modes:
        if mode == "bf16_floor":
            start = w0.to(torch.bfloat16).double()
            floor = (start + ref).to(torch.bfloat16).double() - start
            out[mode] = _change_error(floor, ref)
            continue
        if mode == BOUND:
            master = w0.to(torch.float32)
            change = _adamw_change(torch.float32, "plain", train, w0, grads)
            end = (master.double() + change).float()
            seen = end.to(torch.bfloat16).double() - master.to(torch.bfloat16).double()
            out[mode] = _change_error(seen, ref)
            continue
        dtype, update = UPDATES[mode]
        seeds = range(SR_SEEDS) if update == "stochastic_rounding" else range(1)
        errs = [
            _change_error(_adamw_change(dtype, update, train, w0, grads, s), ref) for s in seeds
        ]
        out[mode] = sum(errs) / len(errs)
        if len(errs) > 1:
            out[f"{mode}_min"], out[f"{mode}_max"] = min(errs), max(errs)
    return out


def _adamw_errors() -> dict[str, float]:
    """Each :data:`UPDATES` mode's update error at each of :data:`RATES_FROM`'s learning rate
    and steps, and the bfloat16 floor, printed side by side; then each GPU config's verdict."""
    out: dict[str, float] = {}
    rows = []
    for path in RATES_FROM:
        config = load_config(ROOT / path)
        train = config["train"]
        lr, steps = train["learning_rate"], train["steps"]
        pre = f"adamw_lr{lr:g}_steps{steps}"
        errors = adamw_errors(train)
        for key, value in errors.items():  # bf16_sr_min -> bf16_sr.update_error_min
            mode, end = key, ""
            if key.endswith(("_min", "_max")):
                mode, end = key[:-4], key[-4:]
            out[f"{pre}.{mode}.update_error{end}"] = value
        chosen = chosen_mode(config)
        rows.append((path, lr, steps, pre, chosen))
        if path in GPU_CONFIGS:
            stem = f"adamw_{Path(path).stem}"
            out[f"{stem}.chosen.update_error"] = errors[chosen]
            out[f"{stem}.chosen_over_{BOUND}"] = errors[chosen] / errors[BOUND]
    _print_table(rows, out)
    for path, lr, steps, pre, chosen in rows:
        if path in GPU_CONFIGS:
            _print_verdict(path, lr, steps, pre, chosen, out)
    return out


def _print_table(rows, out: dict[str, float]) -> None:
    print(
        f"AdamW on one fixed stream of gradients, {WEIGHTS} weights ~ N(0, {INIT_STD}): the "
        "weight change's error against float64's (0: the same change)"
    )
    modes = [*UPDATES, "bf16_floor", BOUND]
    widths = {m: 26 if m == "bf16_sr" else 15 if m == BOUND else 12 for m in modes}
    print(
        f"{'config':20s} {'lr':>8s} {'steps':>6s} " + " ".join(f"{m:>{widths[m]}s}" for m in modes)
    )
    for path, lr, steps, pre, _ in rows:
        cells = []
        for m in modes:
            v, lo, hi = (out.get(f"{pre}.{m}.update_error{end}") for end in ("", "_min", "_max"))
            cell = f"{v:.3g}" if lo is None else f"{v:.3g} [{lo:.3g}, {hi:.3g}]"
            cells.append(f"{cell:>{widths[m]}s}")
        print(f"{path:22s} {lr:>8g} {steps:>6d} " + " ".join(cells))
    print(f"bf16_sr: the mean [min, max] over {SR_SEEDS} seeds")


def _print_verdict(path: str, lr: float, steps: int, pre: str, chosen: str, out) -> None:
    """Each setting of a GPU config against the float32-master error, the config's marked."""
    bound = out[f"{pre}.{BOUND}.update_error"]
    floor = out[f"{pre}.bf16_floor.update_error"]
    print(
        f"{path} (lr {lr:g}, {steps} steps): within the float32-master error, {bound:.3g} "
        f"({BOUND}: float32 masters as the bf16 forward computes with them; bf16 weights come "
        f"no closer than {floor:.3g})?"
    )
    for mode, said in SAID.items():
        err = out[f"{pre}.{mode}.update_error"]
        verdict = "within" if err <= bound else "NOT within"
        if mode == "fp32_master":
            verdict += f" (the masters themselves; {bound:.3g} as the forward sees them)"
        mark = "  <- the config's setting" if mode == chosen else ""
        print(f"  {said:40s} {err:>9.3g}  {verdict}{mark}")


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
