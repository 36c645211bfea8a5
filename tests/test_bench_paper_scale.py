"""``bench/bench_paper_scale.py``, the prepared GPU run, through its smoke mode: every phase of
the GPU code path on a CPU at toy scale (a paper architecture with 2 layers, hidden size 64, 16
new tokens, batch 4), run as it is run (a fresh process), its JSON summary checked; and the
refusals that keep a run from writing what it did not measure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agon.plan.hardware import MEASUREMENTS_DIR, read_measurements
from bench import bench_paper_scale as bench

ROOT = Path(__file__).resolve().parents[1]
MOST = 0.75  # of the new tokens a row runs on average (the toy model meets an eos at times)
SMOKE_TIMEOUT_S = 240  # the smoke run takes ~20 s; a loaded machine may take several times that


def _smoke(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.bench_paper_scale", "--smoke", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )


def test_smoke_run_measures_every_phase(tmp_path):
    """Every phase passes on the CPU; the JSON says what was measured and how (the settings
    used, lengths run to the end, the bound and the ratio to it, the planner's estimates), and
    the measurements land in the folder given, readable by the planner, and nowhere else."""
    before = sorted(MEASUREMENTS_DIR.glob("*.json"))
    done = _smoke(tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout)
    phases = summary["phases"]
    assert summary["ok"] and summary["mode"] == "smoke" and summary["measured_kind"] == "cpu"
    assert list(phases) == ["build", "decode_b4", "duel", "grpo", "trl_grpo"]
    assert all(p["ok"] and p["wall_s"] > 0 for p in phases.values()), phases

    new = bench.SMOKE.new_tokens
    assert phases["build"]["layers"] == 2 and phases["build"]["dtype"] == "float32"
    decode = phases["decode_b4"]
    # the toy vocabulary has 1,024 ids: an eos now and then ends a row early, and says so
    assert decode["tokens"] > (4 - 1) * bench.SMOKE.decode_new
    assert decode["tokens"] == 4 * bench.SMOKE.decode_new or decode["rows_ended_early"] > 0
    assert decode["bound_tokens_per_s"] > 0 and 0 < decode["measured_over_bound"]
    assert decode["bytes_per_decode_step"] > 0 and decode["planned_peak_gib"] > 0

    duel = phases["duel"]
    settings = duel["settings"]
    assert settings["gradient_checkpointing"] in (True, "not a setting")
    assert settings["master_dtype"] in (None, "not a setting")
    assert duel["rollout_s"] > 0 and duel["update_s"] > 0
    for who in ("A/drafter", "B/reader"):
        length, early = duel[f"{who}/mean_length"], duel[f"{who}/rows_ended_early_share"]
        assert length > MOST * new and (length == new) == (early == 0.0), who
    assert duel["planned_update_peak_gib"] > 0 and duel["planned_rollout_peak_gib"] > 0

    grpo = phases["grpo"]
    assert grpo["A/drafter/mean_length"] > MOST * new and grpo["planned_update_peak_gib"] > 0
    assert grpo["A/zero_advantage"] == 1.0 or grpo["training_tokens_per_s"] > 0
    assert phases["trl_grpo"]["completions/mean_length"] > MOST * new

    written = [Path(p) for p in summary["written"]]
    assert written and all(p.parent == tmp_path for p in written)
    measured = read_measurements(tmp_path)
    assert {m.gpu_kind for m in measured} == {"cpu"} and {m.engine for m in measured} == {"hf"}
    assert any(m.generation_tokens_per_s for m in measured)
    assert sorted(MEASUREMENTS_DIR.glob("*.json")) == before  # nothing written there


def test_refusals(capsys):
    """A smoke run never writes into bench/throughput; a GPU run needs a GPU."""
    assert bench.main(["--smoke", "--out", str(MEASUREMENTS_DIR)]) == 2
    assert "never writes into bench/throughput" in json.loads(capsys.readouterr().out)["refused"]
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the no-GPU refusal cannot be seen here")
    assert bench.main([]) == 2
    assert "no GPU" in json.loads(capsys.readouterr().out)["refused"]


def _run(tmp_path: Path) -> bench.Run:
    return bench.Run(
        scale=bench.SMOKE,
        device=torch.device("cpu"),
        gpu_kind="h200",
        measured_kind="cpu",
        out=None,
        work=tmp_path,
        deadline=float("inf"),
    )


def test_a_failed_phase_is_reported_and_the_next_runs(tmp_path):
    """One phase's exception is its result; the run goes on; with no budget left a phase is
    skipped, not started."""
    run = _run(tmp_path)

    def boom(r):
        raise RuntimeError("out of memory, say")

    bench.run_phase(run, "first", 10.0, boom)
    bench.run_phase(run, "second", 10.0, lambda r: {"value": 1})
    assert run.phases["first"]["ok"] is False and "out of memory" in run.phases["first"]["error"]
    assert run.phases["second"]["ok"] is True and run.phases["second"]["value"] == 1
    run.deadline = 0.0
    bench.run_phase(run, "third", 10.0, lambda r: {"value": 2})
    assert run.phases["third"]["ok"] is False and "skipped" in run.phases["third"]


# in a fresh process: under pytest-timeout the SIGALRM handler is the test runner's, and the
# phase limit then stands aside (bench_paper_scale.time_limit)
TIMEOUT_SCRIPT = """
import json, sys, time
from pathlib import Path
import torch
from bench import bench_paper_scale as b
run = b.Run(scale=b.SMOKE, device=torch.device("cpu"), gpu_kind="h200", measured_kind="cpu",
            out=None, work=Path(sys.argv[1]), deadline=float("inf"))
b.run_phase(run, "slow", 0.5, lambda r: time.sleep(30) or {})
b.run_phase(run, "next", 5.0, lambda r: {"value": 1})
print(json.dumps(run.phases))
"""


def test_a_phase_past_its_limit_is_stopped(tmp_path):
    """A phase past its time limit is stopped and reported; the next phase runs."""
    done = subprocess.run(
        [sys.executable, "-c", TIMEOUT_SCRIPT, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    phases = json.loads(done.stdout)
    assert phases["slow"]["ok"] is False and "PhaseTimeout" in phases["slow"]["error"]
    assert phases["slow"]["wall_s"] < 10 and phases["next"]["ok"] is True


def test_the_vllm_duel_is_built_as_the_trainer_builds_it(tmp_path, monkeypatch, capsys):
    """On a GPU with vLLM the duel samples from the trainer's colocated engines: each built by
    agon.engines.rollouts.rollout_engine, pinned to the GPU the one-GPU placement gives it,
    asleep through its update (sleep mode on), from dummy weights that the first sync replaces.
    Without a GPU or vLLM, --engine vllm is refused and auto means transformers."""
    from agon.engines import rollouts

    started = []

    class Recorder:
        def __init__(self, factory, kwargs, env, **kw):
            started.append((factory, kwargs, env["CUDA_VISIBLE_DEVICES"]))

    monkeypatch.setattr(rollouts, "EngineProcess", Recorder)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    run = _run(tmp_path)
    run.reader_prompt = 300
    for name in "AB":
        bench.vllm_engine(run, name, None, None, None, rows=16)
    (fa, ka, gpu_a), (_, kb, gpu_b) = started
    assert fa == "agon.engines.vllm:VLLMEngine" and gpu_a == gpu_b == "3"
    assert ka["model"] == str(tmp_path / "model-0") and kb["model"] == str(tmp_path / "model-1")
    assert ka["enable_sleep_mode"] and ka["load_format"] == "dummy"
    assert ka["gpu_memory_utilization"] == bench.VLLM_SHARE and ka["max_prompt_tokens"] == 300
    with bench.device_peak(run) as gpu:
        pass
    assert gpu["peak_bytes"] is None  # measured on a GPU only

    assert bench.duel_engine("auto", on_gpu=False) == "hf"
    assert bench.duel_engine("hf", on_gpu=True) == "hf"
    assert bench.main(["--smoke", "--engine", "vllm"]) == 2
    assert "needs a GPU and vLLM" in json.loads(capsys.readouterr().out)["refused"]
