"""Validation-split evaluations during training (agon.training.probe), in both trainers.

Each trainer's ``eval/hard_pass@1/{A,B}`` is recounted here independently: the weights the
evaluated model had at that step are loaded from the run's checkpoints, the problems of
``train.eval_split`` (``validation_hard`` by default) are generated greedily through a fresh
engine and graded by the task directly, and the count must equal the logged value exactly.
Evaluations must not change training: a run with them ends in the same weights, bit for bit, as
a run without.
"""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from agon import duel
from agon.engines.base import Completion, Engine, SamplingParams
from agon.grading.verdict import Verdict
from agon.tasks.base import Problem
from agon.training import loop, probe
from agon.training.logbook import is_eval_only
from tests.duel_helpers import ParityTask, tiny_config, tiny_policies


class HardParityTask(ParityTask):
    """ParityTask with a validation_hard split of its own questions, graded on it by a hash of
    the completion: random-weight models then score anywhere in [0, 1], and a trainer that
    evaluated the wrong split (test's ``hard`` included), problems or weights would not match
    the recount."""

    name = "hard_parity_test"

    def problems(self, split):
        if split != "validation_hard":
            return super().problems(split)
        return [
            Problem(id=f"hard-{i}", question=f"Hard: what is {3 * i} * {i + 2}?", answer="0")
            for i in range(7)
        ]

    def grade(self, problems, completions):
        if not problems or not problems[0].id.startswith("hard-"):
            return super().grade(problems, completions)
        ok = [zlib.crc32(f"{p.id}:{c}".encode()) % 2 == 0 for p, c in zip(problems, completions)]
        return [Verdict(correct=o, status="correct" if o else "wrong") for o in ok]


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def _recount(
    model,
    tok,
    task,
    problems,
    max_new_tokens: int,
    system_prompt: str | None = None,
    batch_size: int = 64,
) -> tuple[float, float]:
    """Greedy pass@1 and generated tokens of ``model``, generated and graded here, not through
    agon.training.probe."""
    from agon.engines.hf import HFEngine

    engine = HFEngine(model, tok, system_prompt=system_prompt, batch_size=batch_size)
    comps = [
        row[0]
        for row in engine.generate(
            [task.solve_prompt(p) for p in problems],
            n=1,
            sampling=SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0),
        )
    ]
    verdicts = task.grade(problems, [c.text for c in comps])
    return sum(v.correct is True for v in verdicts) / len(problems), float(
        sum(len(c.token_ids) for c in comps)
    )


# ----------------------------------------------------------------------------- pieces


def test_eval_steps():
    assert [s for s in range(11) if probe.is_eval_step(s, 5)] == [0, 5, 10]
    assert [s for s in range(4) if probe.is_eval_step(s, 1)] == [0, 1, 2, 3]
    assert not any(probe.is_eval_step(s, 0) for s in range(10))
    with pytest.raises(ValueError, match="eval_every"):
        probe.is_eval_step(0, -1)
    task = HardParityTask()
    split = "validation_hard"
    assert [p.id for p in probe.hard_problems(task, 3, split)] == ["hard-0", "hard-1", "hard-2"]
    assert len(probe.hard_problems(task, None, split)) == 7
    assert [p.id for p in probe.hard_problems(task, 2, "validation")] == [
        "validation-0",
        "validation-1",
    ]
    for bad in ("hard", "test"):  # the probe never reads a test split
        with pytest.raises(ValueError, match="eval_split"):
            probe.hard_problems(task, 3, bad)
    assert is_eval_only(
        {"step": 9, "tokens_generated": 0, "eval/hard_pass@1/A": 0.5, "time/eval_s": 1.0}
    )
    assert not is_eval_only(
        {"step": 8, "tokens_generated": 10, "A/loss": 0.1, "eval/hard_pass@1/A": 0.5}
    )
    assert not is_eval_only({"step": 8})


class _NoisyEngine(Engine):
    """An engine that draws from every global RNG while it generates (as a careless one might)."""

    def generate(self, prompts, n=1, sampling=None):
        torch.rand(3), random.random(), np.random.rand()
        texts = ["ab" if i % 2 else "abc" for i in range(len(prompts))]
        return [[Completion(text=t, token_ids=[1] * len(t), logprobs=None)] for t in texts]


def test_hard_pass1_counts_and_leaves_rng_and_modes_alone():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    model.train()
    model[0].eval()  # a module in its own mode must get it back
    torch.manual_seed(7), random.seed(7), np.random.seed(7)
    task = ParityTask()  # correct: an even number of characters
    problems = probe.hard_problems(task, 5, "validation_hard")
    m = probe.hard_pass1(
        {"A": _NoisyEngine(), "B": _NoisyEngine()}, task, problems, max_new_tokens=4, models=[model]
    )
    # completions "abc", "ab", "abc", "ab", "abc": "ab" (even length) is correct
    assert m["eval/hard_pass@1/A"] == m["eval/hard_pass@1/B"] == pytest.approx(2 / 5)
    assert (
        m["eval/hard_tokens/A"] == 3 + 2 + 3 + 2 + 3
        and m["eval/hard_problems"] == 5
        and m["time/eval_s"] >= 0
    )
    # the global RNG streams continue as if nothing had run
    got = (torch.rand(2), random.random(), np.random.rand())
    torch.manual_seed(7), random.seed(7), np.random.seed(7)
    assert (
        torch.equal(got[0], torch.rand(2))
        and got[1] == random.random()
        and got[2] == np.random.rand()
    )
    assert model.training and model[1].training and not model[0].training


def test_ungradable_answer_counts_as_wrong():
    class Undecided(HardParityTask):
        def grade(self, problems, completions):
            return [Verdict(correct=None, status="timeout") for _ in completions]

    m = probe.hard_pass1(
        {"A": _NoisyEngine()},
        Undecided(),
        Undecided().problems("validation_hard")[:2],
        max_new_tokens=4,
    )
    assert m["eval/hard_pass@1/A"] == 0.0


def test_settings_read_the_train_section(tmp_path):
    from agon.config import ConfigError, load_config
    from baselines.grpo import GRPOSettings

    cfg = load_config(tiny_config(tmp_path, train={"eval_every": 3, "eval_problems": 5}))
    fam = cfg["families"][0]
    d = duel.DuelSettings.from_config(cfg, fam)
    g = GRPOSettings.from_config(cfg, fam)
    assert (d.eval_every, d.eval_problems, g.eval_every, g.eval_problems) == (3, 5, 3, 5)
    assert d.eval_split == g.eval_split == "validation_hard"
    defaults = load_config(tiny_config(tmp_path))["train"]
    assert (defaults["eval_every"], defaults["eval_problems"]) == (0, None)  # off unless asked for
    assert defaults["eval_split"] == "validation_hard"
    cfg = load_config(tiny_config(tmp_path, train={"eval_split": "validation"}))
    assert duel.DuelSettings.from_config(cfg, fam).eval_split == "validation"
    with pytest.raises(ConfigError, match="eval_split"):
        load_config(tiny_config(tmp_path, train={"eval_split": "hard"}))
    with pytest.raises(ValueError, match="eval_split"):
        duel.DuelSettings(eval_split="test")
    with pytest.raises(ConfigError, match="eval_every"):
        load_config(tiny_config(tmp_path, train={"eval_every": -1}))
    with pytest.raises(ValueError, match="eval_problems"):
        duel.DuelSettings(eval_problems=0)


# ----------------------------------------------------------------------------- duel trainer


def _duel_settings(**kw) -> duel.DuelSettings:
    base = dict(
        problems_per_step=2,
        num_generations=2,
        num_reads=1,
        max_new_tokens=6,
        learning_rate=1e-2,
        checkpoint_every=1,
        keep_checkpoints=0,
    )
    return duel.DuelSettings(**{**base, **kw})


def test_duel_logs_hard_pass1_at_0_every_n_and_last_equal_to_a_recount(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    s = _duel_settings(steps=5, eval_every=2, eval_problems=4)
    policies = tiny_policies("qwen3", tmp_path / "m", s)
    task = HardParityTask()
    loop.train(task, policies, s, tmp_path / "run", duel.duel_step)
    rows = _rows(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]  # 5 training steps, then the trained models
    evaluated = [r["step"] for r in rows if "eval/hard_pass@1/A" in r]
    assert evaluated == [0, 2, 4, 5] == [r["step"] for r in rows if "eval/hard_pass@1/B" in r]
    assert is_eval_only(rows[-1]) and rows[-1]["tokens_generated"] == 0
    assert not any(is_eval_only(r) for r in rows[:-1]) and all(
        r["tokens_generated"] > 0 for r in rows[:-1]
    )

    problems = task.problems("validation_hard")[:4]
    for name, seed in (("A", 0), ("B", 1)):
        path = tmp_path / "m" / f"qwen3-{seed}"
        tok = AutoTokenizer.from_pretrained(path)
        for step in evaluated:
            model = AutoModelForCausalLM.from_pretrained(
                path, dtype=torch.float32
            )  # step 0: the base model
            if (
                step
            ):  # the checkpoint after `step` updates holds the weights evaluated on row `step`
                blob = torch.load(
                    tmp_path / "run" / "checkpoints" / f"step-{step:06d}" / f"{name}.pt",
                    weights_only=False,
                )
                model.load_state_dict(blob["model"])
            row = next(r for r in rows if r["step"] == step)
            value = row[f"eval/hard_pass@1/{name}"]
            assert 0.0 <= value <= 1.0 and row["eval/hard_problems"] == 4
            assert (value, row[f"eval/hard_tokens/{name}"]) == _recount(
                model, tok, task, problems, s.max_new_tokens
            ), (name, step)
    # the trained models moved (so the recount compared different weights at different steps)
    first = AutoModelForCausalLM.from_pretrained(tmp_path / "m" / "qwen3-0")
    assert any(
        not torch.equal(a, b) for a, b in zip(first.parameters(), policies["A"].model.parameters())
    )


def test_duel_evaluations_do_not_change_training(tmp_path):
    runs = {}
    for every in (0, 1):
        s = _duel_settings(steps=3, eval_every=every, eval_problems=3)
        policies = tiny_policies("qwen3", tmp_path / "m", s)
        loop.train(HardParityTask(), policies, s, tmp_path / f"run{every}", duel.duel_step)
        runs[every] = (policies, _rows(tmp_path / f"run{every}" / "metrics.jsonl"))
    (pol_off, rows_off), (pol_on, rows_on) = runs[0], runs[1]
    for name in ("A", "B"):
        for (k, a), b in zip(
            pol_off[name].model.state_dict().items(), pol_on[name].model.state_dict().values()
        ):
            assert torch.equal(a, b), f"{name}.{k} differs when the run evaluates"
    assert (
        not any(k.startswith("eval/") for r in rows_off for k in r) and len(rows_off) == 3
    )  # eval_every 0: no key, no extra row
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith(("eval/", "time/"))}  # noqa: E731
    assert [strip(r) for r in rows_on[:3]] == [strip(r) for r in rows_off]
    assert [r["step"] for r in rows_on if "eval/hard_pass@1/A" in r] == [0, 1, 2, 3]


def test_duel_resume_rewrites_the_final_evaluation_once(tmp_path):
    s = _duel_settings(steps=2, eval_every=1, eval_problems=2)
    task = HardParityTask()
    loop.train(task, tiny_policies("qwen3", tmp_path / "m", s), s, tmp_path / "run", duel.duel_step)
    before = _rows(tmp_path / "run" / "metrics.jsonl")
    # a rerun of a finished run resumes at its last checkpoint: only the final row is redone
    loop.train(task, tiny_policies("qwen3", tmp_path / "m", s), s, tmp_path / "run", duel.duel_step)
    after = _rows(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in after] == [0, 1, 2]
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith("time/")}  # noqa: E731
    assert [strip(r) for r in after] == [strip(r) for r in before]


def test_a_resumed_run_gives_engines_with_their_own_weights_the_checkpoints(tmp_path):
    """A rollout engine that holds its own copy of the weights (vLLM) is handed the weights the
    checkpoint restored before the first resumed step: else that step would sample from the
    base model (a colocated engine) or the last weights pushed before the kill (a server)."""
    s = _duel_settings(steps=2)
    task = HardParityTask()
    loop.train(task, tiny_policies("qwen3", tmp_path / "m", s), s, tmp_path / "run", duel.duel_step)
    policies = tiny_policies("qwen3", tmp_path / "m", s)
    synced: list[str] = []
    for name, policy in policies.items():
        policy.engine.sync_weights = lambda model, name=name: synced.append(name)
    # a rerun of the finished run restores its last checkpoint; the engines get its weights
    loop.train(task, policies, s, tmp_path / "run", duel.duel_step)
    assert synced[:2] == ["A", "B"]


# ----------------------------------------------------------------------------- GRPO baseline


def _grpo_weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(Path(path) / "model.safetensors")


def test_grpo_logs_hard_pass1_per_model_and_merges_them(tmp_path):
    import yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agon.tasks import register_task
    from agon.training import run as train_run

    register_task("hard_parity_test", HardParityTask)
    path = tiny_config(
        tmp_path,
        train={
            "steps": 3,
            "checkpoint_every": 1,
            "keep_checkpoints": 0,
            "eval_every": 2,
            "eval_problems": 5,
            "problems_per_step": 2,
            "num_generations": 2,
        },
    )
    cfg = yaml.safe_load(path.read_text())
    cfg["tasks"] = [{"name": "hard_parity_test", "params": {}}]
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    payload = train_run.run(path, "tiny", "hard_parity_test", "grpo", 0, out)
    assert payload["steps"] == 3  # the evaluation-only row is not a step

    task = HardParityTask()
    problems = task.problems("validation_hard")[:5]
    fam = cfg["families"][0]
    per_model = {}
    for name in ("A", "B"):
        rows = per_model[name] = _rows(out / "checkpoints" / f"grpo_{name}" / "metrics.jsonl")
        assert [r["step"] for r in rows] == [0, 1, 2, 3]
        evaluated = [r["step"] for r in rows if f"eval/hard_pass@1/{name}" in r]
        assert evaluated == [0, 2, 3]
        mrow = fam[f"model_{name.lower()}"]
        tok = AutoTokenizer.from_pretrained(mrow["model"])
        for step in evaluated:
            # TRL's checkpoint-N holds the model after N updates; the end of training is the saved
            # model
            source = {0: mrow["model"], 3: out / name}.get(
                step, out / "checkpoints" / f"grpo_{name}" / f"checkpoint-{step}"
            )
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
            row = next(r for r in rows if r["step"] == step)
            value = row[f"eval/hard_pass@1/{name}"]
            assert 0.0 <= value <= 1.0
            # model B has a persona: the evaluation speaks to it as its rollouts do
            assert (value, row[f"eval/hard_tokens/{name}"]) == _recount(
                model,
                tok,
                task,
                problems,
                fam["max_new_tokens"],
                system_prompt=mrow.get("system_prompt"),
            ), (name, step)
    merged = _rows(out / "metrics.jsonl")
    assert [r["step"] for r in merged] == [0, 1, 2, 3]
    for r in merged:
        has = [f"eval/hard_pass@1/{n}" in r for n in ("A", "B")]
        assert has == [r["step"] in (0, 2, 3)] * 2, r["step"]
    assert merged[-1]["tokens_generated"] == 0 and all(
        r["tokens_generated"] > 0 for r in merged[:-1]
    )
    for i in (0, 2, 3):  # A's and B's evaluations each took their own time
        assert merged[i]["time/eval_s"] == pytest.approx(
            per_model["A"][i]["time/eval_s"] + per_model["B"][i]["time/eval_s"]
        )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3

    # evaluations do not change GRPO's training: the same run without them ends in the same weights
    path.write_text(yaml.safe_dump({**cfg, "train": {**cfg["train"], "eval_every": 0}}))
    train_run.run(path, "tiny", "hard_parity_test", "grpo", 0, tmp_path / "off")
    for name in ("A", "B"):
        on, off = _grpo_weights(out / name), _grpo_weights(tmp_path / "off" / name)
        assert on.keys() == off.keys() and all(torch.equal(on[k], off[k]) for k in on), name
    assert not any(
        k.startswith("eval/") for r in _rows(tmp_path / "off" / "metrics.jsonl") for k in r
    )
