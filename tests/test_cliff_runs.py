"""The Cliff baseline's settings and training: a few steps in the toy world, its equivalence with
the GRPO step, processes, the summary's teacher totals and the compute budget (its pure parts:
tests/test_cliff.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from agon.config import ConfigError, load_config
from baselines.cliff import (
    CliffSettings,
    ModelTeacher,
)
from tests.duel_helpers import ParityTask, qwen3_models, solo_toy_config, write_config
from tests.tiny_models import ScriptedEngine

# ------------------------------------------------------------------------- settings and a run


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two tiny random qwen3 models (A and B), built once for this module."""
    return qwen3_models(tmp_path_factory, "cliff-models")


def _toy_config(models, **cliff) -> dict:
    return solo_toy_config(models, "cliff", cliff)


def test_settings_from_config(tmp_path, models):
    from agon.registry import TRAINERS

    cfg = load_config(write_config(tmp_path, _toy_config(models)))
    assert cfg["cliff"] == {
        "weight": 0.5,
        "correct": "prefix_all",
        "unlocated": "outcome_only",
        "teacher": "oracle",
        "teacher_model": None,
        "teacher_max_new_tokens": None,
    }
    s = TRAINERS.get("cliff").settings_from_config(cfg, cfg["families"][0], seed=3)
    assert isinstance(s, CliffSettings)
    assert (s.weight, s.num_generations, s.max_new_tokens, s.seed) == (0.5, 3, 8, 3)
    cfg = load_config(
        write_config(tmp_path, _toy_config(models, weight=0.2, correct="none", teacher="model"))
    )
    s = CliffSettings.from_config(cfg, cfg["families"][0])
    assert (s.weight, s.correct, s.teacher) == (0.2, "none", "model")
    with pytest.raises(ConfigError, match="cliff"):
        load_config(write_config(tmp_path, _toy_config(models, correct="all")))
    with pytest.raises(ValueError, match="teacher"):
        CliffSettings(teacher="human")


def test_toy_run_writes_summary_and_moves_both_models(tmp_path, models):
    """`agon train --method cliff` on the toy arith task with tiny models: two steps."""
    from transformers import AutoModelForCausalLM

    from agon.training.run import run

    config = write_config(tmp_path, _toy_config(models))
    out = tmp_path / "run"
    payload = run(config, "tiny", "arith", "cliff", seed=0, out=out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "cliff" and summary["steps"] == payload["steps"] == 2
    assert summary["settings"]["weight"] == 0.5
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    for name in ("A", "B"):
        assert summary[f"{name}/steps"] == 2 and summary[f"{name}/tokens_generated"] > 0
        for key in (f"{name}/drafter/correct", f"{name}/loss", f"{name}/grad_norm"):
            assert math.isfinite(rows[0][key]), key
        # untrained models answer wrong: every sample goes to the oracle
        assert rows[0][f"{name}/cliff/wrong"] == 6 and 0 <= rows[0][f"{name}/cliff/located"] <= 1
        row = _toy_config(models)["families"][0][f"model_{name.lower()}"]
        before = AutoModelForCausalLM.from_pretrained(row["model"])
        after = AutoModelForCausalLM.from_pretrained(out / name)
        assert any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters()))
    assert np.isfinite(summary["train_time_s"])
    # the oracle generates nothing; the teacher's totals are there all the same
    assert summary["A/teacher_tokens"] == summary["B/teacher_tokens"] == 0.0
    assert 0 <= summary["teacher_time_s"] <= summary["train_time_s"]
    assert summary["distributed"]["num_processes"] == 1
    # a rerun with more steps resumes from the last checkpoint: no step twice
    run(config, "tiny", "arith", "cliff", seed=0, out=out, steps=3)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]


def test_model_teachers_from_config(models):
    from baselines.cliff.trainer import make_teachers

    cfg = load_config(write_config(models[0].parent, _toy_config(models, teacher="model")))
    fam = cfg["families"][0]
    s = CliffSettings.from_config(cfg, fam)
    rival = make_teachers(cfg, fam, s)  # the other base model marks each model's samples
    assert rival["A"].engine.model.name_or_path == str(models[1])
    assert rival["B"].engine.model.name_or_path == str(models[0])
    assert rival["A"].max_new_tokens == 8
    s.teacher_model, s.teacher_max_new_tokens = str(models[0]), 16
    shared = make_teachers(cfg, fam, s)
    assert shared["A"] is shared["B"] and shared["A"].max_new_tokens == 16


def test_weight_zero_is_the_grpo_step_and_a_model_teacher_marks(models):
    """w = 0 takes exactly GRPO's step of the policy-gradient core (agon.rl.grpo_step); with
    w > 0 a model teacher's marks (here: always step 1) reach the loss."""
    from agon import rl
    from baselines.cliff.step import cliff_step
    from tests.duel_helpers import tiny_policies

    task, root = ParityTask(), models[0].parent
    problems = task.problems("train")[:2]
    s = CliffSettings(
        problems_per_step=2, num_generations=4, max_new_tokens=6, learning_rate=1e-2, weight=0.0
    )
    teacher = ModelTeacher(ScriptedEngine(lambda prompt, j: "1"), 4)
    cliff = tiny_policies("qwen3", root, s, names=["A"], seeds=[0])
    grpo = tiny_policies("qwen3", root, s, names=["A"], seeds=[0])
    m_cliff = cliff_step(task, cliff, problems, s, step=0, teachers={"A": teacher})
    m_grpo = rl.grpo_step(task, grpo, problems, s, step=0)
    assert m_cliff["A/loss"] == pytest.approx(m_grpo["A/loss"], abs=1e-7)
    for p, q in zip(cliff["A"].model.parameters(), grpo["A"].model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)

    s1 = CliffSettings(
        problems_per_step=2, num_generations=4, max_new_tokens=6, learning_rate=1e-2, weight=0.5
    )
    marked = tiny_policies("qwen3", root, s1, names=["A"], seeds=[0])
    m = cliff_step(task, marked, problems, s1, step=0, teachers={"A": teacher})
    assert m["A/drafter/correct"] == m_grpo["A/drafter/correct"]  # the same samples
    wrong = m["A/cliff/wrong"]
    assert wrong > 0 and m["A/cliff/teacher_unparsable"] == 0.0
    assert m["A/cliff/located"] > 0 and m["A/loss"] != pytest.approx(m_grpo["A/loss"])


def test_a_share_of_the_batch_draws_the_samples_of_the_whole(models):
    """A process holding problem 1 of a 2-problem step (keys=[1]) samples it as one process
    holding both does: Cliff's rollouts are seeded per problem, as the duel's."""
    from baselines.cliff.step import cliff_step
    from tests.duel_helpers import tiny_policies

    task, root = ParityTask(), models[0].parent
    problems = task.problems("train")[:2]
    s = CliffSettings(problems_per_step=2, num_generations=3, max_new_tokens=6)
    drawn = {}
    for label, mine, keys in (("whole", problems, None), ("share", problems[1:], [1])):
        policies = tiny_policies("qwen3", root, s, names=["A"], seeds=[0])
        engine, generate = policies["A"].engine, policies["A"].engine.generate

        def record(prompts, n=1, sampling=None, label=label, generate=generate):
            drawn[label] = generate(prompts, n=n, sampling=sampling)
            return drawn[label]

        engine.generate = record
        cliff_step(task, policies, mine, s, 0, keys, 2, teachers={"A": LocatesNothing()})
    assert [c.token_ids for c in drawn["share"][0]] == [c.token_ids for c in drawn["whole"][1]]
    assert [c.token_ids for c in drawn["share"][0]] != [c.token_ids for c in drawn["whole"][0]]


class LocatesNothing:
    """A teacher that locates nothing."""

    name = "none"

    def mark(self, task, problems, texts):
        from baselines.cliff.teacher import Marks

        return Marks([None] * len(texts))


def test_cliff_metrics_are_the_whole_batch_over_processes(monkeypatch):
    """Each process counts its share; every rank writes the sums' metrics, which the loop's
    combine_ranks keeps (Cliff declares them whole-batch values, ``same``)."""
    from types import SimpleNamespace

    import accelerate.utils

    from agon.training.logbook import combine_ranks
    from agon.training.logbook import counts_over_ranks as over_ranks
    from agon.training.metrics import Declared
    from baselines.cliff.step import KEYS, cliff_metrics, teacher_counts
    from baselines.cliff.teacher import Marks

    mine = {
        "A": teacher_counts(
            [None, 2, None], [4, 4, 4], 2, Marks([0, None], asked=2, unparsable=1, tokens=5)
        )
    }
    theirs = {
        "A": teacher_counts(
            [1, None, None], [4, 3, 3], 3, Marks([0, None, None], asked=3, said_none=1, tokens=7)
        )
    }
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda _: [(mine, 0.5), (theirs, 2.0)])
    counts, seconds = over_ranks(SimpleNamespace(num_processes=2), mine, 0.5)
    m = cliff_metrics("A", counts["A"], model_teacher=True)
    assert seconds == 2.0  # the slowest process's
    assert m == pytest.approx(
        {
            "A/cliff/wrong": 5.0,
            "A/cliff/located": 2 / 5,
            "A/cliff/mistake_at": (2 / 4 + 1 / 4) / 2,
            "A/cliff/teacher_unparsable": 1 / 5,
            "A/cliff/teacher_said_none": 1 / 5,
            "A/cliff/teacher_too_long": 0.0,
            "A/cliff/teacher_tokens": 12.0,
        }
    )
    assert combine_ranks([m, m], Declared(KEYS)) == pytest.approx(m)
    assert over_ranks(None, mine, 0.5) == (mine, 0.5)  # one process: as counted
    assert math.isnan(cliff_metrics("A", teacher_counts([], [], 0, Marks([])))["A/cliff/located"])


def test_teacher_totals_for_the_summary(tmp_path):
    """The teacher's tokens and seconds add up in summary.json: totals its keys declare."""
    from agon.training.logbook import declared_totals
    from baselines.cliff.trainer import TRAINER

    rows = [
        {
            "step": 0,
            "A/cliff/teacher_tokens": 10.0,
            "B/cliff/teacher_tokens": 4.0,
            "time/teacher_s": 1.5,
        },
        {
            "step": 1,
            "A/cliff/teacher_tokens": 6.0,
            "B/cliff/teacher_tokens": 0.0,
            "time/teacher_s": 0.5,
        },
        {"step": 2, "eval/hard_pass@1/A": 0.0},
    ]
    assert declared_totals(rows, TRAINER.declared) == {
        "A/teacher_tokens": 16.0,
        "B/teacher_tokens": 4.0,
        "teacher_time_s": 2.0,
    }


def test_compute_budget_stops_each_model_at_its_own_target(tmp_path, models):
    """Under ``train.budget`` the loop trains each model until it has generated its target
    tokens (or taken its most steps), then leaves it out of the steps that follow."""
    from agon.training.run import run

    cfg = _toy_config(models)
    cfg["train"]["budget"] = {"match": "tokens", "max_steps_factor": 2.0}  # cap: 4 steps
    config = write_config(tmp_path, cfg)
    reference = tmp_path / "agon-summary.json"  # A: reached by any first step; B: never
    reference.write_text(json.dumps({"A/tokens_generated": 1, "B/tokens_generated": 1e9}))
    out = tmp_path / "run"
    run(config, "tiny", "arith", "cliff", seed=0, out=out, match_run=reference)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert [("A/loss" in r, "B/loss" in r) for r in rows] == [(True, True)] + [(False, True)] * 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["A/steps"] == 1 and summary["B/steps"] == 4
    budget = summary["budget"]
    assert budget["match"] == "tokens" and budget["targets"] == {"A": 1.0, "B": 1e9}
    assert budget["A/spent"] == summary["A/tokens_generated"] > 1
    assert budget["A/hit_step_cap"] is False and budget["B/hit_step_cap"] is True
    # B's samples are seeded as in the unbudgeted run: the same first step for B
    free = tmp_path / "free"
    cfg["train"]["budget"] = {"match": "steps"}
    run(write_config(tmp_path, cfg), "tiny", "arith", "cliff", seed=0, out=free)
    first = json.loads((free / "metrics.jsonl").read_text().splitlines()[0])
    assert first["B/drafter/tokens"] == rows[0]["B/drafter/tokens"]
