"""Two training processes for real (gloo on the CPU): the duel trainer and the GRPO baseline.

Each test launches `agon train` under ``torch.distributed.run`` with 2 processes (what
``torchrun --nproc_per_node 2`` and ``accelerate launch --multi_gpu --num_processes 2`` start)
and checks what a user of the scale path relies on: the run knows its world size, every rank
trains on its own share of each step's problems, and the duel's two ranks together take the
step one process takes on the same global batch (the same problems, the same samples, one
loss over all of them), so their models equal the one-process run's to float rounding. A
killed two-process run resumes from its checkpoint. FSDP2 is a GPU path: accelerate never
turns a CPU run into FSDP, and the last test pins that (and the warning the trainer gives).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.duel_helpers import kill_after_checkpoint, tiny_config, train_args

pytestmark = pytest.mark.slow  # each test launches 1-3 training runs of ~10-15 s

ROOT = Path(__file__).resolve().parents[1]
# each process runs the `agon` CLI as a module (the launchers' -m)
STEPS = 3
# after 3 Adam steps at lr 1e-3 every weight has moved ~3e-3; two ranks and one process agree
# to ~5e-7 (the order of float sums differs: DDP adds two half-batch gradients)
TOLERANCE = 1e-5
MOVED = 1e-3
TRAIN = {  # the train section of every run here
    "steps": STEPS,
    "problems_per_step": 4,
    "num_generations": 4,
    "learning_rate": 1e-3,
    "checkpoint_every": 1,
    "keep_checkpoints": 0,
}


def _one(config: Path, out: Path, method: str = "agon") -> list[str]:
    return [sys.executable, "-m", "agon", *train_args(config, out, method)]


def _two(config: Path, out: Path, method: str = "agon") -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "agon",
        *train_args(config, out, method),
    ]


def _env() -> dict:
    """Both the one-process reference and the ranks on the CPU (gloo), also on a GPU machine:
    parity is asserted on one device, and two NCCL ranks cannot share one GPU."""
    path = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return r


def _weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return {name: load_file(out / name / "model.safetensors") for name in ("A", "B")}


def _max_diff(a: dict, b: dict) -> float:
    return max(float((a[n][k] - b[n][k]).abs().max()) for n in a for k in a[n])


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _shares(folder: Path) -> dict[int, list[dict]]:
    return {int(p.stem.split("-")[1]): _rows(p) for p in sorted(folder.glob("rank-*.jsonl"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny config, and the duel trained by one process and by two."""
    root = tmp_path_factory.mktemp("distributed")
    config = tiny_config(root, train=TRAIN)
    _run(_one(config, root / "one"))
    two = _run(_two(config, root / "two"))
    return {"root": root, "config": config, "one": root / "one", "two": root / "two", "log": two}


def test_duel_two_ranks_take_the_one_process_step(runs):
    _assert_two_ranks_take_the_one_process_step(runs["one"], runs["two"], runs["root"])


def test_cliff_two_ranks_take_the_one_process_step(tmp_path):
    """Cliff (``--method cliff``) runs the duel's loop and its solo-mode step with a model
    teacher (parity is no toy task, so there is no oracle): the two ranks together take
    the one-process step, the teacher's marks included (it is greedy, and each rank asks it
    about its own share's wrong samples). The teachers are the tiny random base models, whose
    replies name no step (``teacher_unparsable`` is 1): this covers the teacher's generation and
    the metrics summed over ranks, with every wrong sample unlocated (outcome advantage only)
    and every correct one +weight on all its tokens."""
    config = tiny_config(tmp_path, train=TRAIN, cliff={"teacher": "model"})
    one, two = tmp_path / "cliff-one", tmp_path / "cliff-two"
    _run(_one(config, one, "cliff"))
    _run(_two(config, two, "cliff"))
    summary, summary_one = _assert_two_ranks_take_the_one_process_step(one, two, tmp_path)
    for k in ("A/teacher_tokens", "B/teacher_tokens"):
        assert summary[k] == summary_one[k], k


def _assert_two_ranks_take_the_one_process_step(one: Path, two: Path, root: Path):
    """The two-process run ``two`` took the steps of the one-process run ``one``: world sizes,
    each rank's share (``batch[rank::2]``), the final models (within TOLERANCE, after moving
    more than MOVED from the base models under ``root``), and every metrics row (counts summed
    over ranks, rates weighted; timings aside). Returns both summaries."""
    summary = json.loads((two / "summary.json").read_text())
    summary_one = json.loads((one / "summary.json").read_text())
    assert summary["distributed"] == {"num_processes": 2, "distributed_type": "MULTI_CPU"}
    assert summary_one["distributed"]["num_processes"] == 1

    whole, shares = _shares(one / "shares")[0], _shares(two / "shares")
    assert sorted(shares) == [0, 1]
    for step, row in enumerate(whole):
        assert row["step"] == step and len(row["problems"]) == 4
        for rank in (0, 1):
            assert shares[rank][step]["world"] == 2
            assert shares[rank][step]["problems"] == row["problems"][rank::2]

    a, b = _weights(one), _weights(two)
    init = {n: _weights_at(root, n) for n in ("A", "B")}
    moved = max(float((a[n][k] - init[n][k]).abs().max()) for n in a for k in a[n])
    assert moved > MOVED
    assert _max_diff(a, b) < TOLERANCE, _max_diff(a, b)

    rows_one, rows_two = _rows(one / "metrics.jsonl"), _rows(two / "metrics.jsonl")
    assert [r["step"] for r in rows_two] == list(range(STEPS))
    for r1, r2 in zip(rows_one, rows_two):
        assert set(r1) == set(r2)
        for k, v in r1.items():
            # the rollout fingerprint of several processes is rank 0's share's (its declaration:
            # agon.training.metrics.ROLLOUT_SHA), so it cannot equal the whole batch's
            if not k.startswith("time/") and k != "rollout/sha" and v == v:  # NaN != NaN
                assert r2[k] == pytest.approx(v, abs=1e-4), k
    assert summary["tokens_generated"] == summary_one["tokens_generated"]
    return summary, summary_one


def _weights_at(root: Path, name: str) -> dict:
    from safetensors.torch import load_file

    return load_file(root / f"qwen3-{0 if name == 'A' else 1}" / "model.safetensors")


def test_duel_two_ranks_resume_after_a_kill(runs):
    cut = runs["root"] / "cut"
    killed_at = kill_after_checkpoint(_two(runs["config"], cut), _env(), cut)
    assert 1 <= killed_at < STEPS and not (cut / "A").exists()

    r = _run(_two(runs["config"], cut))
    resumed = [line for line in r.stderr.splitlines() if "resumed from" in line]
    assert resumed and all(line.endswith(f"at step {killed_at}") for line in resumed), resumed
    ran = sorted(
        {
            int(line.split()[3].rstrip(":"))
            for line in r.stdout.splitlines()
            if line.startswith("[agon train] step ")
        }
    )
    assert ran == list(range(killed_at, STEPS)), ran
    # the resumed run ends where the uninterrupted two-process run ended
    assert _max_diff(_weights(runs["two"]), _weights(cut)) < TOLERANCE
    assert [row["step"] for row in _rows(cut / "metrics.jsonl")] == list(range(STEPS))
    for rank, rows in _shares(cut / "shares").items():
        assert [row["step"] for row in rows] == list(range(STEPS)), rank


def test_grpo_on_trl_two_ranks_split_each_step(runs):
    """TRL's GRPOTrainer over 2 processes: the world size, and each step's problems split
    between the ranks as one process draws them. TRL samples each process's completions from
    that process's own RNG stream, so the weights are another draw of the same training, not
    the one-process run's: parity is not asserted here (the duel's is, above)."""
    one, two = runs["root"] / "grpo-one", runs["root"] / "grpo-two"
    _run(_one(runs["config"], one, "grpo"))
    _run(_two(runs["config"], two, "grpo"))
    summary = json.loads((two / "summary.json").read_text())
    assert summary["distributed"] == {"num_processes": 2, "distributed_type": "MULTI_CPU"}
    assert summary["A/steps"] == summary["B/steps"] == STEPS
    for name in ("A", "B"):  # one row per step (rank 0 writes; TRL's logs cover every rank)
        rows = _rows(two / "checkpoints" / f"grpo_{name}" / "metrics.jsonl")
        assert [row["step"] for row in rows] == list(range(STEPS))
        whole, shares = _shares(one / "shares" / name)[0], _shares(two / "shares" / name)
        assert [row["step"] for row in whole] == list(range(STEPS))
        for step, row in enumerate(whole):
            halves = [shares[rank][step]["problems"] for rank in (0, 1)]
            assert halves[0] + halves[1] == row["problems"] and not set(halves[0]) & set(halves[1])
    init = {n: _weights_at(runs["root"], n) for n in ("A", "B")}
    w = _weights(two)
    assert all(max(float((w[n][k] - init[n][k]).abs().max()) for k in w[n]) > MOVED for n in w)


def test_fsdp2_config_on_cpu_is_replicated_and_says_so(runs):
    """accelerate (1.16) enables FSDP only on GPU-family backends: with the FSDP2 config on
    CPU it runs MULTI_CPU (DDP), and the trainer warns. If accelerate learns FSDP on CPU, this
    test fails: then run the FSDP2 path here for real."""
    out = runs["root"] / "fsdp"
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(ROOT / "config" / "accelerate" / "fsdp2.yaml"),
        "--num_processes",
        "2",
        "--mixed_precision",
        "no",
        "-m",
        "agon",
        *train_args(runs["config"], out),
    ]
    r = _run(cmd)
    assert "asks for FSDP, but accelerate runs these processes as MULTI_CPU" in r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["distributed"] == {"num_processes": 2, "distributed_type": "MULTI_CPU"}
    # replicated, not sharded: the same models as the DDP run
    assert _max_diff(_weights(runs["two"]), _weights(out)) < TOLERANCE
    assert torch.cuda.is_available() is False
