"""The GRPO baseline on TRL's GRPOTrainer: reward = the task's grader, settings from the config."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from agon.config import load_config
from agon.grading.verdict import Verdict
from agon.tasks.base import Problem, Task
from baselines.grpo import GRPOSettings, completion_text, make_reward_fn
from tests.duel_helpers import tiny_config


class _Hostile(Task):
    name = "hostile"

    def problems(self, split):
        return [Problem("p0", "q", "1"), Problem("p1", "q", "2")]

    def grade(self, problems, completions):
        # the grader decides; a timeout is None, never a silent 0
        return [
            Verdict(None, "timeout") if "loop" in c else Verdict(c.strip() == p.answer, "ok")
            for p, c in zip(problems, completions)
        ]


def test_reward_fn_is_the_task_grader():
    task = _Hostile()
    fn = make_reward_fn(task, task.problems("train"))
    comps = ["1", [{"role": "assistant", "content": "3"}], "while True: loop"]
    assert fn(prompts=[None] * 3, completions=comps, problem_id=["p0", "p1", "p1"]) == [
        1.0,
        0.0,
        None,
    ]
    assert fn.__name__ == "correctness"
    assert (
        completion_text(
            [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]
        )
        == "ab"
    )


def test_settings_from_config(tmp_path):
    cfg = load_config(
        tiny_config(
            tmp_path,
            train={"micro_batch_size": 4, "problems_per_step": 3},
            grpo={"extra": {"log_completions": True}},
        )
    )
    s = GRPOSettings.from_config(cfg, cfg["families"][0], seed=5)
    assert (s.num_generations, s.max_new_tokens, s.seed, s.micro_batch_size) == (4, 6, 5, 4)
    assert s.batch_shape() == (
        4,
        3,
    )  # 3 problems x 4 samples = 12 completions in 3 micro-batches of whole groups
    args = s.grpo_config(tmp_path / "o")
    assert (
        args.per_device_train_batch_size,
        args.gradient_accumulation_steps,
        args.log_completions,
    ) == (4, 3, True)
    assert (args.loss_type, args.max_completion_length, args.top_k, args.disable_dropout) == (
        "dapo",
        6,
        0,
        True,
    )
    with pytest.raises(ValueError, match="not GRPOConfig fields"):
        GRPOSettings.from_config(
            load_config(tiny_config(tmp_path, grpo={"extra": {"no_such_field": 1}})),
            cfg["families"][0],
        )


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_5_text", "gemma4_text"])
def test_grpo_step_every_architecture(arch, tmp_path):
    """One TRL GRPO step per paper architecture: the model moves, metrics and the model folder are
    written."""
    from transformers import AutoModelForCausalLM

    from agon.tasks import task_from_config
    from agon.training.logbook import summarize_metrics
    from baselines.grpo import train_grpo

    cfg = load_config(tiny_config(tmp_path, arch, train={"steps": 1, "checkpoint_every": 0}))
    fam = cfg["families"][0]
    s = GRPOSettings.from_config(cfg, fam)
    task = task_from_config(cfg, "parity")
    metrics = train_grpo(cfg, fam, task, s, "b", tmp_path / "B", tmp_path / "work")
    summary = summarize_metrics(metrics, models=["B"])
    assert summary["steps"] == 1 and summary["tokens_generated"] == 0  # the merge adds it
    assert summary["B/tokens_generated"] > 0
    row = json.loads((tmp_path / "work" / "metrics.jsonl").read_text().splitlines()[0])
    for key in (
        "B/drafter/correct",
        "B/entropy",
        "B/grad_norm",
        "B/drafter/frac_zero_spread",
        "B/drafter/mean_length",
    ):
        assert key in row and math.isfinite(row[key]), key
    before = AutoModelForCausalLM.from_pretrained(fam["model_b"]["model"])
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "B")
    assert any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters()))


def test_resume_skips_a_checkpoint_whose_save_was_cut_short(tmp_path):
    """A run killed while the Trainer saved checkpoint-2 (or on a full disk) resumes from
    checkpoint-1, the newest one written whole; the cut one is removed to be written again."""
    from baselines.grpo.trainer import last_complete_checkpoint

    assert last_complete_checkpoint(tmp_path / "none") is None
    whole = tmp_path / "checkpoint-1"
    whole.mkdir()
    for name in ("model.safetensors", "optimizer.pt", "trainer_state.json", "config.json"):
        (whole / name).write_text("x")
    cut = tmp_path / "checkpoint-2"
    cut.mkdir()
    (cut / "config.json").write_text("x")
    (tmp_path / "checkpoint-10").mkdir()  # by number, not by name: 10 is newer than 2
    assert last_complete_checkpoint(tmp_path) == str(whole)
    assert not cut.exists() and not (tmp_path / "checkpoint-10").exists()
    (whole / "optimizer.pt").unlink()
    assert last_complete_checkpoint(tmp_path) is None


# ----------------------------------------------------------------------------- where each trains


def test_on_gpus_each_model_gets_a_process_and_a_gpu_of_its_own(monkeypatch):
    """One process seeing several GPUs makes transformers' Trainer wrap the model in
    nn.DataParallel, which TRL's GRPOTrainer refuses, and holds one colocated vLLM: on GPUs
    each model trains in a process of its own seeing one GPU, A and B at once on two GPUs, one
    after the other on one GPU or through one server; the CPU and a launcher's ranks train
    both in their own process, as before."""
    from agon.engines.placement import place
    from baselines.grpo.trainer import grpo_placement, launch_waves

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert launch_waves(place("trl", "vllm", 2)) == [[("a", "0"), ("b", "1")]]
    assert launch_waves(place("trl", "hf", 1)) == [[("a", "0")], [("b", "0")]]
    served = place("trl", "vllm", 2, servers={"A": "http://s:8000", "B": "http://s:8000"})
    assert launch_waves(served) == [[("a", "0")], [("b", "0")]]
    assert launch_waves(place("trl", "hf", 0)) == []
    assert launch_waves(place("trl", "vllm", 2, processes=2)) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")  # physical ids, as the job was given
    assert launch_waves(place("trl", "vllm", 2)) == [[("a", "6"), ("b", "7")]]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    s = GRPOSettings(use_vllm=True, vllm_mode="colocate")
    assert grpo_placement(s).at_once
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launch_waves(grpo_placement(s)) == []


@pytest.mark.slow  # ~28 s: three spawned processes, each importing torch, transformers, TRL
def test_models_train_in_processes_of_their_own(tmp_path, monkeypatch, capfd):
    """train_pair with two GPUs (the count faked; the spawned processes find none and train on
    the CPU): each model trains and is saved by a process of its own that sees only its GPU;
    the trainer's own environment is untouched; a model that fails names itself and stops the
    run before the next wave."""
    from baselines.grpo.trainer import train_pair

    cfg = load_config(tiny_config(tmp_path, train={"steps": 1, "checkpoint_every": 0}))
    fam = cfg["families"][0]
    s = GRPOSettings.from_config(cfg, fam)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    summary = train_pair(cfg, fam, "parity", s, tmp_path / "out")
    printed = capfd.readouterr().out
    assert "[grpo A] training on GPU 0, in a process of its own" in printed
    assert "[grpo B] training on GPU 1, in a process of its own" in printed
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert summary["A/steps"] == summary["B/steps"] == 1
    assert (tmp_path / "out" / "A" / "config.json").is_file()
    assert (tmp_path / "out" / "B" / "config.json").is_file()

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # A, then B: A fails first
    fam["model_a"] = {**fam["model_a"], "model": str(tmp_path / "no-such-model")}
    with pytest.raises(RuntimeError, match="training model A failed"):
        train_pair(cfg, fam, "parity", s, tmp_path / "failed")
    assert "[grpo B]" not in capfd.readouterr().out
