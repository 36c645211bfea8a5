"""Shared pieces of the trainer tests: configs and commands for `agon train` on tiny random
models (:mod:`agon.random_models`) and the synthetic parity task (:mod:`agon.tasks.synthetic`).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
import yaml

from agon.random_models import build_tiny_model, tiny_policies
from agon.tasks.synthetic import ParityTask
from agon.training import checkpoint as ckpt

__all__ = ["ParityTask", "tiny_policies"]  # re-exported: the tests take them from here


def tiny_config(root: Path, arch: str = "qwen3", **sections) -> Path:
    """A config file for `agon train` on tiny ``arch`` models and the parity task."""
    a = build_tiny_model(arch, Path(root) / f"{arch}-0", seed=0)
    b = build_tiny_model(arch, Path(root) / f"{arch}-1", seed=1)
    config = {
        "families": [
            {
                "name": "tiny",
                "model_a": {"model": str(a)},
                "model_b": {"model": str(b), "system_prompt": "Be bold."},
                "dtype": "float32",
                "max_prompt_tokens": 512,
                "max_new_tokens": 6,
            }
        ],
        "tasks": [{"name": "parity", "params": {}}],
        "methods": ["grpo", "agon"],
        "train": {
            "steps": 2,
            "problems_per_step": 2,
            "num_generations": 4,
            "learning_rate": 1e-2,
            "checkpoint_every": 1,
            # GRPO alone: train.steps; tests of the matched budget set it (tests/test_budget.py)
            "budget": {"match": "steps"},
        },
        "agon": {"num_reads": 2},
    }
    for key, value in sections.items():
        config[key] = {**config.get(key, {}), **value}
    return write_config(Path(root), config, f"config-{arch}.yaml")


def qwen3_models(tmp_path_factory, name: str, n: int = 2) -> list[Path]:
    """``n`` tiny random qwen3 models sharing one tokenizer (seeds 0..n-1: A, B, a teacher),
    built once in a folder ``name`` of the session's temporary root."""
    root = tmp_path_factory.mktemp(name)
    return [build_tiny_model("qwen3", root / f"qwen3-{seed}", seed=seed) for seed in range(n)]


def solo_toy_config(
    models: Sequence[Path], section: str, settings: dict, steps: int = 2, n_validation: int = 0
) -> dict:
    """A config for a related method's few-step run (Cliff, GAR, OPD-then-RL) on the toy arith
    task with tiny models: ``models`` is A, B and optionally a teacher; ``settings`` is the
    method's own ``section``."""
    a, b, *teacher = models
    family = {
        "name": "tiny",
        "model_a": {"model": str(a)},
        "model_b": {"model": str(b)},
        "dtype": "float32",
        "max_prompt_tokens": 256,
        "max_new_tokens": 8,
    }
    if teacher:
        family["teacher"] = {"model": str(teacher[0])}
    params = {"n_train": 20, "n_test": 4, "n_validation": n_validation}
    return {
        "families": [family],
        "tasks": [{"name": "arith", "params": params | {"levels": 2, "hard_min_level": 2}}],
        "methods": ["grpo"],
        "grading": {"workers": 1},
        "train": {
            "steps": steps,
            "problems_per_step": 2,
            "num_generations": 3,
            "learning_rate": 1e-2,
            "checkpoint_every": 1,
            "budget": {"match": "steps"},
        },
        section: settings,
    }


def write_config(root: Path, config: dict, name: str = "config.yaml") -> Path:
    """``config`` as YAML at ``root / name``."""
    path = root / name
    path.write_text(yaml.safe_dump(config))
    return path


def kill_after_checkpoint(cmd: list[str], env: dict, out: Path, timeout: float = 300) -> int:
    """Start the training command ``cmd``, SIGKILL it (with every process under it: a launcher
    and its ranks) once its first complete checkpoint exists, and return the step of the
    newest complete checkpoint left behind."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if ckpt.complete_checkpoints(out / "checkpoints"):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed; make it longer"
    launcher = psutil.Process(proc.pid)  # torchrun's workers may sit in sessions of their own
    for p in [*launcher.children(recursive=True), launcher]:
        p.send_signal(signal.SIGKILL)
    proc.wait()
    return int(ckpt.latest_checkpoint(out / "checkpoints").name.split("-")[1])


def train_args(
    config: Path,
    out: Path,
    method: str = "agon",
    steps: int | None = None,
    family: str = "tiny",
    task: str = "parity",
) -> list[str]:
    """`agon train` arguments (seed 3, one thread); by default for the tiny family and
    ParityTask."""
    args = ["train", "--config", str(config), "--family", family, "--task", task]
    args += ["--method", method, "--seed", "3", "--out", str(out), "--threads", "1"]
    return args + (["--steps", str(steps)] if steps is not None else [])
