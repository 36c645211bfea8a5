"""Precision as a choice (``train.master_dtype``, and ``train.bf16_update``: how AdamW's step
lands on 16-bit weights) for both trainers, gradient checkpointing for the in-house ones, and
steps whose advantages are all zero, which skip their forward and backward (agon.rl.update)
and are counted."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agon import duel, rl
from agon.config import load_config, validate_config
from agon.duel import DuelSettings
from agon.grading.verdict import Verdict
from agon.random_models import build_tiny_model, tiny_policies
from agon.tasks.synthetic import ParityTask
from agon.training import loop
from agon.training.policy import adamw_class, make_policy
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


# ------------------------------------------------------------------ train.bf16_update

LR = 1e-6  # the GPU configs' learning rate (config/paper.yaml, config/small-gpu.yaml)


def test_bf16_update_is_read_from_the_config_and_checked(tmp_path):
    """``train.bf16_update`` is a setting of every trainer (plain by default), read from the
    config; a value the schema does not list is refused by the config check and the settings,
    naming the key."""
    from baselines.grpo import GRPOSettings

    assert RLSettings().bf16_update == "plain"
    cfg = load_config(tiny_config(tmp_path, train={"bf16_update": "kahan"}))
    assert DuelSettings.from_config(cfg, cfg["families"][0]).bf16_update == "kahan"
    assert GRPOSettings.from_config(cfg, cfg["families"][0]).bf16_update == "kahan"
    with pytest.raises(ValueError, match="train.bf16_update"):
        RLSettings(bf16_update="fp8")
    cfg["train"]["bf16_update"] = "fp8"
    with pytest.raises(Exception, match="fp8"):
        validate_config(cfg)


def _bf16_policy(tmp_path, bf16_update: str, dtype: str = "bfloat16"):
    """A policy (make_policy) on a tiny random model in ``dtype`` at lr 1e-6, constant."""
    from agon.engines.hf import load_model

    path = build_tiny_model("qwen3", tmp_path / "m")
    model = load_model(path, dtype=dtype, device="cpu")
    s = RLSettings(
        learning_rate=LR, lr_scheduler="constant", warmup_steps=0, bf16_update=bf16_update
    )
    return make_policy("A", model, None, s, pad_token_id=0)


def test_plain_is_torchs_adamw_and_float32_weights_ignore_the_option(tmp_path):
    """``plain`` builds torch's AdamW with the settings' lr, betas and weight decay and nothing
    else (its defaults: the numbers every run had before); float32 weights (the toy world,
    float32 masters) get it whatever ``bf16_update`` says."""
    for update, dtype in (("plain", "bfloat16"), ("kahan", "float32"), ("plain", "float32")):
        pol = _bf16_policy(tmp_path / f"{update}-{dtype}", update, dtype)
        assert type(pol.optimizer) is torch.optim.AdamW
        made = dict(pol.optimizer.param_groups[0], params=None, initial_lr=None)  # scheduler's
        ref = torch.optim.AdamW([torch.zeros(1)], lr=LR, betas=(0.9, 0.999), weight_decay=0.0)
        assert made == dict(ref.param_groups[0], params=None, initial_lr=None)
    if importlib.util.find_spec("torchao") is not None:
        pol = _bf16_policy(tmp_path / "sr-f32", "stochastic_rounding", "float32")
        assert type(pol.optimizer) is torch.optim.AdamW


def _steps_landed(pol, steps: int, seed: int = 0) -> torch.Tensor:
    """Take ``steps`` AdamW steps of a constant gradient (+1) on one weight matrix whose
    entries are about 1e-3 in size: a float64 AdamW moves each by lr per step (to 1e-5),
    while bfloat16 holds them to 2^-17 = 7.6e-6 (half of it, 3.8e-6, is above lr: plain
    rounding drops every step). The matrix's change over the float64 one's (-steps x lr),
    per entry."""
    torch.manual_seed(seed)
    w = pol.model.model.layers[0].mlp.down_proj.weight
    # in [2^-10, 1.5 x 2^-10), so that no weight leaves [0, 2^-9), where a bf16 unit is <= 2^-17
    magnitude = 2.0**-10 * (1 + 0.5 * torch.rand(w.shape))
    sign = torch.where(torch.rand(w.shape) < 0.5, -1.0, 1.0)
    with torch.no_grad():
        w.copy_(magnitude * sign)
    before = w.detach().double().clone()
    for _ in range(steps):
        for p in pol.model.parameters():
            p.grad = None
        w.grad = torch.ones_like(w)
        pol.optimizer.step()
        pol.scheduler_step()
    return (w.detach().double() - before) / (-steps * LR)


@pytest.mark.parametrize("update", ["plain", "kahan", "stochastic_rounding"])
def test_bf16_steps_land_at_lr_1e6_with_kahan_and_stochastic_rounding(update, tmp_path):
    """At lr 1e-6 on bfloat16 weights of about 1e-3, plain rounding drops every one of 32
    AdamW steps; Kahan-compensated updates land them to within half a bf16 unit per weight
    (the compensation holds the rest); stochastic rounding lands them on average (each weight
    moves by whole units at random, unbiased)."""
    if update == "stochastic_rounding":
        pytest.importorskip("torchao", reason="the bf16-sr extra")
    pol = _bf16_policy(tmp_path, update)
    moved = _steps_landed(pol, steps=32)
    if update == "plain":
        assert type(pol.optimizer) is torch.optim.AdamW
        assert float(moved.abs().max()) == 0.0  # every step rounded away
    elif update == "kahan":
        assert type(pol.optimizer) is not torch.optim.AdamW
        half_unit = 2.0**-18 / (32 * LR)  # half a bf16 unit, over the float64 change
        assert float((moved - 1).abs().max()) <= half_unit * 1.05
        assert abs(float(moved.mean()) - 1) < 0.05
    else:
        assert type(pol.optimizer) is not torch.optim.AdamW
        assert abs(float(moved.mean()) - 1) < 0.05  # unbiased over 1024+ weights
        assert float(moved.std()) > 0.1  # and noisy weight by weight


@pytest.mark.parametrize("update", ["kahan", "stochastic_rounding"])
def test_a_bf16_update_resumes_exactly_from_its_state(update, tmp_path):
    """The optimizer's state (Kahan's compensation, the step count) goes through a
    checkpoint's save and load: after a reload and the same random state, the next steps
    end on the same weights as the run that went on."""
    if update == "stochastic_rounding":
        pytest.importorskip("torchao", reason="the bf16-sr extra")
    pol = _bf16_policy(tmp_path / "a", update)
    _steps_landed(pol, steps=4)
    saved = tmp_path / "state.pt"
    torch.save({"model": pol.model.state_dict(), "optimizer": pol.optimizer.state_dict()}, saved)
    rng = torch.get_rng_state()
    ends = []
    for run in ("went on", "resumed"):
        if run == "resumed":
            pol = _bf16_policy(tmp_path / "b", update)
            blob = torch.load(saved, weights_only=False)
            pol.model.load_state_dict(blob["model"])
            pol.optimizer.load_state_dict(blob["optimizer"])
        torch.set_rng_state(rng)
        w = pol.model.model.layers[0].mlp.down_proj.weight
        for _ in range(3):
            w.grad = torch.ones_like(w)
            pol.optimizer.step()
        ends.append(w.detach().clone())
    assert torch.equal(*ends)


def test_bf16_update_refuses_what_it_cannot_do(monkeypatch):
    """Stochastic rounding rounds to bfloat16 only (torchao): float16 weights are refused;
    without its library each option names what to install (stochastic rounding: the
    ``bf16-sr`` extra)."""
    with pytest.raises(ValueError, match="bfloat16 only"):
        adamw_class("stochastic_rounding", {torch.float16})
    monkeypatch.setitem(sys.modules, "torchao.optim", None)
    with pytest.raises(ImportError, match=r"agon\[bf16-sr\]"):
        adamw_class("stochastic_rounding", {torch.bfloat16})
    monkeypatch.setitem(sys.modules, "optimi", None)
    with pytest.raises(ImportError, match="torch-optimi"):
        adamw_class("kahan", {torch.bfloat16})


@pytest.mark.parametrize(
    "update, library",
    [
        ("kahan", "optimi"),
        pytest.param("stochastic_rounding", "torchao", marks=pytest.mark.slow),  # compiles
    ],
)
def test_grpo_on_trl_takes_the_bf16_update(update, library, tmp_path, monkeypatch):
    """GRPO on TRL honours ``train.bf16_update`` on bfloat16 weights: the Trainer builds that
    library's AdamW (with its own parameter groups and lr), and trains."""
    pytest.importorskip(library)
    from agon.tasks import task_from_config
    from baselines.grpo import GRPOSettings, train_grpo
    from baselines.grpo.zero_advantage import SkipZeroAdvantageGRPOTrainer

    seen = []
    train = SkipZeroAdvantageGRPOTrainer.train

    def spy(self, *args, **kwargs):
        seen.append(self)
        return train(self, *args, **kwargs)

    monkeypatch.setattr(SkipZeroAdvantageGRPOTrainer, "train", spy)
    cfg = load_config(
        tiny_config(tmp_path, train={"steps": 1, "checkpoint_every": 0, "bf16_update": update})
    )
    fam = cfg["families"][0]
    fam["dtype"] = "bfloat16"
    s = GRPOSettings.from_config(cfg, fam)
    train_grpo(cfg, fam, task_from_config(cfg, "parity"), s, "a", tmp_path / "A", tmp_path / "w")
    opt = seen[0].optimizer
    opt = getattr(opt, "optimizer", opt)  # accelerate's wrapper
    assert type(opt) is adamw_class(update, {torch.bfloat16})[0]
    assert type(opt).__module__.startswith(library)
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(1e-2)


# ------------------------------------------------------------------ the GPU configs' choice

REPO = Path(__file__).resolve().parents[1]
GPU_OF = {"paper": "h200", "small-gpu": "h100"}  # the GPU kind each GPU config is written for
MEMORY_FLAGS = ("memory:", "host memory:")  # agon plan's flags of a job that does not fit


@pytest.mark.parametrize("name", sorted(GPU_OF))
def test_a_gpu_config_trains_within_the_float32_master_error_and_fits_its_gpu(name):
    """Each GPU config's precision (``train.master_dtype``, ``train.bf16_update``) lands AdamW's
    steps at its own learning rate and steps within the float32-master error
    (``python -m bench precision``: float32 masters as the bf16 forward computes with them), and
    ``agon plan`` prices its table 1 jobs, that setting's optimizer state included, as fitting
    the GPU the config is written for."""
    from agon.plan import plan
    from bench import bench_precision as bench

    path = REPO / "config" / f"{name}.yaml"
    config = load_config(path)
    assert f"config/{name}.yaml" in bench.GPU_CONFIGS
    mode = bench.chosen_mode(config)
    errors = bench.adamw_errors(config["train"], modes=(mode, bench.BOUND))
    assert errors[mode] <= errors[bench.BOUND], (mode, errors)
    p = plan(config, "results/table1.csv", gpu=GPU_OF[name])
    trains = [j for j in p.jobs if j.job.rule == "train"]
    over = [(j.job.label, f) for j in trains for f in j.flags if f.startswith(MEMORY_FLAGS)]
    assert trains and not over
    duel = next(j for j in trains if j.job.method == "agon")
    held = duel.memory.per_device.components
    if config["train"]["bf16_update"] == "kahan" and not config["train"]["master_dtype"]:
        assert held["A.kahan_buffer"] > 0  # priced: the buffer is what made paper's duel not fit
