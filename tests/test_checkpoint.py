"""Checkpoints: atomic with a completion marker; a run killed with SIGKILL resumes bit for bit.

The kill test runs `agon train --method agon` three times as real subprocesses on tiny qwen3
models: once uninterrupted, once killed (SIGKILL) right after its first complete checkpoint
appears, and once more to resume. The resumed run's final weights must equal the
uninterrupted run's exactly, and its metrics.jsonl must hold each step once, equal to the
uninterrupted run's rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agon import duel, rl
from agon.training import checkpoint as ckpt
from agon.training.settings import RLSettings
from tests.duel_helpers import kill_after_checkpoint, tiny_config, tiny_policies, train_args

ROOT = Path(__file__).resolve().parents[1]


def test_half_written_checkpoints_are_ignored(tmp_path):
    s = RLSettings(max_new_tokens=4)
    pol = tiny_policies("qwen3", tmp_path / "m", s, names=["A"], seeds=[0])
    root = tmp_path / "ck"
    ckpt.save_checkpoint(root, 1, pol, data={"pos": 1}, keep=2)
    # a crash mid-write leaves a temp folder or a folder without the marker: neither is used
    (root / ".tmp-step-000002-999").mkdir()
    (root / "step-000003").mkdir()
    assert ckpt.latest_checkpoint(root).name == "step-000001"
    for step in (4, 5, 6):
        ckpt.save_checkpoint(root, step, pol, keep=2)
    assert [p.name for p in ckpt.complete_checkpoints(root)] == ["step-000005", "step-000006"]
    with pytest.raises(FileNotFoundError, match="marker"):
        ckpt.load_checkpoint(root / "step-000003", pol)


def test_roundtrip_restores_model_optimizer_scheduler_rng(tmp_path):
    s = RLSettings(
        problems_per_step=2,
        num_generations=4,
        max_new_tokens=4,
        learning_rate=1e-2,
        warmup_steps=3,
        lr_scheduler="linear",
    )
    pol = tiny_policies("qwen3", tmp_path / "m", s, names=["A"], seeds=[0])
    from tests.duel_helpers import ParityTask

    rl.grpo_step(ParityTask(), pol, ParityTask().problems("train")[:2], s, 0)
    torch.manual_seed(123)
    path = ckpt.save_checkpoint(tmp_path / "ck", 1, pol, data={"epoch": 0})
    expected_rand = torch.rand(3)
    weights = {k: v.clone() for k, v in pol["A"].model.state_dict().items()}
    lr = pol["A"].scheduler.get_last_lr()
    rl.grpo_step(ParityTask(), pol, ParityTask().problems("train")[:2], s, 1)  # move everything on
    state = ckpt.load_checkpoint(path, pol)
    assert state["step"] == 1 and state["data"] == {"epoch": 0}
    assert torch.equal(torch.rand(3), expected_rand)
    assert all(torch.equal(v, pol["A"].model.state_dict()[k]) for k, v in weights.items())
    assert pol["A"].scheduler.get_last_lr() == lr and len(pol["A"].optimizer.state) > 0


def test_truncate_jsonl_drops_torn_line(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 0}\n{"step": 1}\n{"step": 2}\n{"ste')
    ckpt.truncate_jsonl(p, keep=lambda r: r["step"] < 2)
    assert p.read_text() == '{"step": 0}\n{"step": 1}\n'


def _train_cmd(config: Path, out: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "agon", *train_args(config, out, steps=steps)]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def _final_weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return {name: load_file(out / name / "model.safetensors") for name in ("A", "B")}


@pytest.mark.slow  # ~30 s: three training runs in subprocesses, one killed with SIGKILL
def test_sigkill_then_resume_is_bit_exact(tmp_path):
    # hard-split evaluations every step: they must not disturb what resumes bit for bit
    config = tiny_config(
        tmp_path,
        "qwen3",
        train={
            "checkpoint_every": 1,
            "keep_checkpoints": 0,
            "problems_per_step": 2,
            "num_generations": 4,
            "eval_every": 1,
            "eval_problems": 3,
        },
        agon={"role_schedule": "alternate"},
    )
    steps = 3
    full, cut = tmp_path / "full", tmp_path / "cut"
    r = subprocess.run(
        _train_cmd(config, full, steps),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr

    killed_at = kill_after_checkpoint(_train_cmd(config, cut, steps), _env(), cut)
    assert killed_at < steps and not (cut / "A").exists()

    r = subprocess.run(
        _train_cmd(config, cut, steps),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # it really resumed (a rerun from scratch would also match, being seeded): no step before the
    # checkpoint ran
    ran = [
        int(line.split()[3].rstrip(":"))
        for line in r.stdout.splitlines()
        if line.startswith("[agon train] step ")
    ]
    assert ran == list(range(killed_at, steps)), ran
    assert f"at step {killed_at}" in r.stderr
    a, b = _final_weights(full), _final_weights(cut)
    for name in a:
        assert a[name].keys() == b[name].keys()
        for k in a[name]:
            assert torch.equal(a[name][k], b[name][k]), f"{name}.{k} differs after resume"
    rows_full = [json.loads(x) for x in (full / "metrics.jsonl").read_text().splitlines()]
    rows_cut = [json.loads(x) for x in (cut / "metrics.jsonl").read_text().splitlines()]
    # every step once, then the evaluation of the trained models; evaluated before each update and
    # after the last
    assert [r["step"] for r in rows_cut] == list(range(steps + 1))
    assert all("eval/hard_pass@1/A" in r and "eval/hard_pass@1/B" in r for r in rows_cut)

    def strip(r):
        return {k: v for k, v in r.items() if not k.startswith("time/")}

    assert [strip(r) for r in rows_cut] == [strip(r) for r in rows_full]
    summary = json.loads((cut / "summary.json").read_text())
    assert summary["steps"] == steps and summary["provenance"]["seed"] == 3


def test_accelerate_path_steps_and_roundtrips(tmp_path):
    """The accelerate path (used by `accelerate launch` with DDP / FSDP2), exercised in one
    process (on the GPU when there is one, as make_accelerator chooses)."""
    from accelerate import Accelerator

    from tests.duel_helpers import ParityTask

    s = duel.DuelSettings(
        problems_per_step=2, num_generations=4, num_reads=1, max_new_tokens=4, learning_rate=1e-2
    )
    pols = tiny_policies("qwen3", tmp_path / "m", s)
    acc = Accelerator(cpu=not torch.cuda.is_available(), step_scheduler_with_optimizer=False)
    for p in pols.values():
        p.model, p.optimizer, p.scheduler = acc.prepare(p.model, p.optimizer, p.scheduler)
        p.accelerator = acc
    m = duel.duel_step(ParityTask(), pols, ParityTask().problems("train")[:2], s, 0)
    assert m["A/skipped"] == 0.0 and m["B/skipped"] == 0.0
    path = ckpt.save_checkpoint(tmp_path / "ck", 1, pols, data={"pos": 2}, accelerator=acc)
    assert (path / ckpt.MARKER).is_file() and (path / "accelerate").is_dir()
    saved = {k: v.clone() for k, v in pols["B"].model.state_dict().items()}
    duel.duel_step(ParityTask(), pols, ParityTask().problems("train")[:2], s, 1)
    state = ckpt.load_checkpoint(path, pols, accelerator=acc)
    assert state["data"] == {"pos": 2}
    assert all(torch.equal(v, pols["B"].model.state_dict()[k]) for k, v in saved.items())


class _Ranks:
    """A stand-in for accelerate's Accelerator on one of several ranks: gathering returns the
    model's weights, and a wait records that the rank waited."""

    def __init__(self, main: bool):
        self.is_main_process, self.waited = main, False

    def get_state_dict(self, model):
        return model.state_dict()

    def unwrap_model(self, model):
        return model

    def wait_for_everyone(self):
        self.waited = True


@pytest.mark.parametrize("main", [True, False], ids=["rank0", "rank1"])
def test_a_final_model_is_written_by_rank_0_alone(tmp_path, main):
    """Under several processes every rank reaches the final save (the duel's shell, GRPO on
    TRL): rank 0 writes the folder from the gathered weights, the others write nothing and
    wait; two ranks writing one folder raced (one's rename could leave it without weights)."""
    from agon.training.shell import save_final

    model = torch.nn.Linear(2, 2)
    writes: list[tuple] = []
    ranks = _Ranks(main)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("agon.training.shell.save_model", lambda *a, **k: writes.append((a, k)))
        save_final(model, "tokenizer", tmp_path / "A", ranks)
    assert ranks.waited
    assert len(writes) == (1 if main else 0)
    if main:
        (m, tok, path), kw = writes[0]
        assert m is model and path == tmp_path / "A" and set(kw["state_dict"]) == {"weight", "bias"}
