"""Precision as a choice (``train.master_dtype``) for both trainers, gradient checkpointing for
the in-house ones, and steps whose advantages are all zero, which skip their forward and
backward (agon.rl.update) and are counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agon import duel, rl
from agon.config import load_config
from agon.duel import DuelSettings
from agon.grading.verdict import Verdict
from agon.random_models import tiny_policies
from agon.tasks.synthetic import ParityTask
from agon.training import loop
from agon.training.settings import RLSettings
from agon.training.shell import family_policies, master_precision
from tests.duel_helpers import tiny_config


class AllRight(ParityTask):
    """Every completion is right: every group has one reward, every advantage is 0."""

    def grade(self, problems, completions):
        return [Verdict(True, "correct") for _ in completions]


def _samples(advantages) -> rl.Samples:
    return rl.Samples(
        "drafter",
        prompt_ids=[[1, 2, 3], [1, 2, 4]],
        completion_ids=[[4, 5], [6]],
        advantages=np.asarray(advantages, dtype=float),
    )


def _weights(policy) -> list[torch.Tensor]:
    return [p.detach().clone() for p in policy.model.parameters()]


def test_a_zero_advantage_update_runs_no_forward_and_moves_as_the_full_one(tmp_path, monkeypatch):
    """After a step with signal (Adam has momentum), a step whose advantages are all 0 runs no
    forward, reports itself, and leaves the weights and AdamW's state exactly where the full
    forward and backward of its zero loss leaves them."""
    s = RLSettings(max_new_tokens=4, learning_rate=1e-2)
    ends = {}
    for path in ("shortcut", "full"):
        pol = tiny_policies("qwen3", tmp_path / "m", s, names=["A"], seeds=[0])["A"]
        rl.update(pol, [_samples([1.0, -1.0])], s)
        forwards = []
        pol.model.register_forward_hook(lambda *a, forwards=forwards: forwards.append(1))
        if path == "full":
            monkeypatch.setattr(rl, "has_signal", lambda adv, s: True)
        m = rl.update(pol, [_samples([0.0, 0.0])], s)
        monkeypatch.undo()
        ends[path] = (_weights(pol), m, len(forwards), pol.optimizer.state_dict())
    (w_short, m_short, n_short, opt_short), (w_full, m_full, n_full, opt_full) = ends.values()
    assert m_short["zero_advantage"] == 1.0 and n_short == 0
    assert m_full["zero_advantage"] == 0.0 and n_full > 0 and m_full["loss"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(w_short, w_full))
    for k, state in opt_short["state"].items():
        assert torch.equal(state["exp_avg"], opt_full["state"][k]["exp_avg"])
        assert int(state["step"]) == int(opt_full["state"][k]["step"]) == 2
    # a KL term has a gradient even when every advantage is 0
    assert rl.has_signal(torch.zeros(2), RLSettings(beta=0.1))


def test_a_run_counts_its_zero_advantage_steps(tmp_path):
    """A duel in which every completion is right has no signal in any step: every step of
    both models is counted in metrics.jsonl and in the summary's totals."""
    from agon.training.logbook import summarize_metrics

    s = DuelSettings(steps=2, problems_per_step=2, num_generations=2, num_reads=1, max_new_tokens=4)
    policies = tiny_policies("qwen3", tmp_path / "m", s)
    loop.train(AllRight(), policies, s, tmp_path / "run", duel.duel_step)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["A/zero_advantage"] for r in rows] == [1.0, 1.0]
    summary = summarize_metrics(tmp_path / "run" / "metrics.jsonl")
    assert summary["A/zero_advantage_steps"] == summary["B/zero_advantage_steps"] == 2


def test_master_precision_keeps_fp32_masters_and_computes_in_the_family_dtype(tmp_path):
    """``train.master_dtype: float32`` on a bfloat16 family: float32 weights and AdamW
    moments, the forward, backward and generation autocast to bfloat16; without it, every
    tensor is bfloat16."""
    assert master_precision(RLSettings(), "bfloat16") == ("bfloat16", None)
    assert master_precision(RLSettings(master_dtype="float32"), "bfloat16") == (
        "float32",
        torch.bfloat16,
    )
    assert master_precision(RLSettings(master_dtype="float32"), "float32") == ("float32", None)
    with pytest.raises(ValueError, match="dtype"):
        master_precision(RLSettings(master_dtype="float32"), "auto")
    with pytest.raises(ValueError, match="master_dtype"):
        RLSettings(master_dtype="float16")
    for master, weights in ((None, torch.bfloat16), ("float32", torch.float32)):
        cfg = load_config(
            tiny_config(tmp_path, train={"master_dtype": master, "gradient_checkpointing": True})
        )
        cfg["families"][0]["dtype"] = "bfloat16"
        s = DuelSettings.from_config(cfg, cfg["families"][0])
        assert s.master_dtype == master and s.gradient_checkpointing
        policies, _ = family_policies(cfg, cfg["families"][0], s, None)
        pol = policies["A"]
        assert next(pol.model.parameters()).dtype == weights
        assert pol.model.is_activation_checkpointing
        m = duel.duel_step(ParityTask(), policies, ParityTask().problems("train")[:2], s, 0)
        assert m["A/skipped"] == 0.0
        for state in pol.optimizer.state.values():
            assert state["exp_avg"].dtype == weights
        if master:  # the forward really ran in bfloat16
            seen = []
            hook = pol.model.model.layers[0].mlp.register_forward_hook(
                lambda mod, inp, out, seen=seen: seen.append(out.dtype)
            )
            rl.update(pol, [_samples([1.0, -1.0])], s)
            hook.remove()
            assert seen and set(seen) == {torch.bfloat16}


def test_grpo_on_trl_keeps_fp32_masters_under_master_dtype(tmp_path):
    """GRPO on TRL with ``train.master_dtype: float32`` on a bfloat16 family: TRL's bf16 mixed
    precision on a float32 model; the saved model is float32 and it moved."""
    from transformers import AutoModelForCausalLM

    from agon.tasks import task_from_config
    from baselines.grpo import GRPOSettings, train_grpo

    cfg = load_config(
        tiny_config(tmp_path, train={"steps": 1, "checkpoint_every": 0, "master_dtype": "float32"})
    )
    fam = cfg["families"][0]
    fam["dtype"] = "bfloat16"
    s = GRPOSettings.from_config(cfg, fam)
    assert s.grpo_config(tmp_path / "w", bf16=True).bf16
    train_grpo(cfg, fam, task_from_config(cfg, "parity"), s, "a", tmp_path / "A", tmp_path / "w")
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "A", dtype="auto")
    before = AutoModelForCausalLM.from_pretrained(Path(fam["model_a"]["model"]))
    assert next(after.parameters()).dtype == torch.float32
    assert any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters()))


class HalfRight(ParityTask):
    """A completion is right when its text has an even length: some groups have signal, some
    (both lengths alike) none."""

    def grade(self, problems, completions):
        return [Verdict(len(c) % 2 == 0, "graded") for c in completions]


@pytest.mark.parametrize("task_cls", [AllRight, HalfRight], ids=["no-signal", "mixed"])
def test_trl_grpo_skips_micro_batches_without_signal_and_moves_as_trl(task_cls, tmp_path):
    """The GRPO baseline's trainer runs no forward for a micro-batch (one group here) whose
    advantages are all 0, logs the share it skipped, and ends on exactly the weights of TRL's
    own GRPOTrainer, which runs them."""
    from trl import GRPOTrainer

    from agon.engines.hf import load_model, load_tokenizer
    from agon.random_models import build_tiny_model
    from baselines.grpo import GRPOSettings, make_reward_fn
    from baselines.grpo.data import prompt_dataset
    from baselines.grpo.zero_advantage import SkipZeroAdvantageGRPOTrainer

    path = build_tiny_model("qwen3", tmp_path / "m")
    task = task_cls()
    s = GRPOSettings(
        steps=2,
        problems_per_step=2,
        num_generations=2,
        micro_batch_size=2,
        max_new_tokens=6,
        learning_rate=1e-2,
        checkpoint_every=0,
    )
    ends, logs = {}, {}
    for cls in (GRPOTrainer, SkipZeroAdvantageGRPOTrainer):
        model = load_model(path, dtype="float32")
        forwards = []
        model.register_forward_hook(lambda *a, forwards=forwards: forwards.append(1))
        trainer = cls(
            model=model,
            reward_funcs=[make_reward_fn(task, task.problems("train"))],
            args=s.grpo_config(tmp_path / cls.__name__),
            train_dataset=prompt_dataset(task),
            processing_class=load_tokenizer(path),
        )
        trainer.train()
        ends[cls] = (_weights(trainer.model), len(forwards))
        logs[cls] = [h for h in trainer.state.log_history if "loss" in h]
    (w_trl, n_trl), (w_skip, n_skip) = ends.values()
    assert all(torch.equal(a, b) for a, b in zip(w_trl, w_skip))
    skipped = [h["zero_advantage"] for h in logs[SkipZeroAdvantageGRPOTrainer]]
    assert len(skipped) == 2 and all(0.0 <= x <= 1.0 for x in skipped)
    # each skipped micro-batch saves TRL's one training forward (two micro-batches a step)
    assert n_trl - n_skip == round(2 * sum(skipped))
    if task_cls is AllRight:
        assert skipped == [1.0, 1.0]
