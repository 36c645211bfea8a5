"""Shared pieces of the duel / GRPO / checkpoint tests: a tiny task and policies on tiny models.

``ParityTask`` grades a completion correct when its token count is even: meaningless, but it
gives random-weight models groups with reward spread (so gradients are not all zero), and it is
deterministic and instant, with no grading pool to start.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agon.grading.verdict import Verdict
from agon.tasks.base import Problem, Task


class ParityTask(Task):
    """Six problems per split; a completion is "correct" when its whitespace-split count is even."""

    name = "parity_test"
    kind = "math"

    def problems(self, split: str) -> list[Problem]:
        return [
            Problem(id=f"{split}-{i}", question=f"What is {i} + {i + 1}?", answer=str(2 * i + 1))
            for i in range(6)
        ]

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        out = []
        for text in completions:
            ok = len(text) % 2 == 0
            out.append(
                Verdict(
                    correct=ok,
                    status="correct" if ok else "wrong",
                    extracted=None,
                    seconds=0.0,
                    detail="",
                )
            )
        return out


def tiny_policies(
    arch: str,
    root: Path,
    settings,
    names: Sequence[str] = ("A", "B"),
    seeds: Sequence[int] = (0, 1),
):
    """Policies on tiny random ``arch`` models (one model per name), each with its own HFEngine;
    the models are loaded on the CPU as the trainers load them (:func:`agon.engines.hf.
    load_model`: no Hub kernels, which a GPU would otherwise fetch at ``train()``)."""
    from transformers import AutoTokenizer

    from agon.engines.hf import HFEngine, load_model
    from agon.training.policy import make_policy
    from tests.tiny_models import build_tiny_model

    policies = {}
    for name, seed in zip(names, seeds):
        path = build_tiny_model(arch, Path(root) / f"{arch}-{seed}", seed=seed)
        tok = AutoTokenizer.from_pretrained(path)
        model = load_model(path, dtype="float32", device="cpu")
        engine = HFEngine(model, tok, batch_size=64)
        policies[name] = make_policy(name, model, engine, settings, pad_token_id=engine.pad_id)
    return policies


def tiny_config(root: Path, arch: str = "qwen3", **sections) -> Path:
    """A config file for `agon train` on tiny ``arch`` models and :class:`ParityTask` (registered
    here)."""

    from agon.tasks import register_task
    from tests.tiny_models import build_tiny_model

    register_task("parity_test", ParityTask)
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
        "tasks": [{"name": "parity_test", "params": {}}],
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
    from tests.tiny_models import build_tiny_model

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
    import yaml

    path = root / name
    path.write_text(yaml.safe_dump(config))
    return path


def kill_after_checkpoint(cmd: list[str], env: dict, out: Path, timeout: float = 300) -> int:
    """Start the training command ``cmd``, SIGKILL it (with every process under it: a launcher
    and its ranks) once its first complete checkpoint exists, and return the step of the
    newest complete checkpoint left behind."""
    import signal
    import subprocess
    import time

    import psutil

    from agon.training import checkpoint as ckpt

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
    task: str = "parity_test",
) -> list[str]:
    """`agon train` arguments (seed 3, one thread); by default for the tiny family and
    ParityTask."""
    args = ["train", "--config", str(config), "--family", family, "--task", task]
    args += ["--method", method, "--seed", "3", "--out", str(out), "--threads", "1"]
    return args + (["--steps", str(steps)] if steps is not None else [])
