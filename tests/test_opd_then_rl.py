"""The OPD-then-RL baseline: the OPD per-token loss (by hand and against TRL's IW-OPD), the
switch point, the RL step, and both phases in the toy world with tiny models."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
import yaml

from agon.config import ConfigError, load_config
from agon.logprobs import completion_logprobs, completion_mask, enable_token_logprobs
from agon.loss import policy_loss
from agon.random_models import build_tiny_model
from baselines.opd_then_rl import (
    OPDThenRLSettings,
    Teacher,
    best_updates,
    opd_advantages,
    validated_updates,
)
from baselines.opd_then_rl.switch import scores_from_rows
from tests.duel_helpers import ParityTask, qwen3_models, solo_toy_config, write_config


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Three tiny random qwen3 models with one tokenizer: A, B and a teacher."""
    return qwen3_models(tmp_path_factory, "opd-models", 3)


def _load(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


# ------------------------------------------------------------------------- the OPD loss

PROMPTS = [[5, 17, 40, 3], [9, 2]]
COMPLETIONS = [[33, 7, 81, 12, 6], [44, 19]]  # two lengths: the second is padded


def _hand_logps(model, prompt, completion, temperature):
    """log softmax(logits / T) of each completion token, from the model's own forward."""
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1] / temperature
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(completion)[:, None])[:, 0]


def test_opd_loss_is_the_per_token_reverse_kl_by_hand(models):
    """The pipeline (teacher scores, student scores, advantage teacher - student_old, the duel's
    loss) gives the sampled per-token reverse KL as its value and, as gradient, the hand-made
    score-function gradient -1/N sum_t (log p_T - log p_S)(y_t) grad log p_S(y_t)."""
    temperature = 0.7
    student, teacher_model = _load(models[0]), _load(models[2])
    n = sum(map(len, COMPLETIONS))
    # by hand: explicit log-probs from the models' logits, autograd for the gradient
    hand_s = [_hand_logps(student, p, c, temperature) for p, c in zip(PROMPTS, COMPLETIONS)]
    with torch.no_grad():
        hand_t = [
            _hand_logps(teacher_model, p, c, temperature) for p, c in zip(PROMPTS, COMPLETIONS)
        ]
    surrogate = -sum(((t - s.detach()) * s).sum() for s, t in zip(hand_s, hand_t)) / n
    hand_grads = torch.autograd.grad(surrogate, list(student.parameters()))
    reverse_kl = sum((s.detach() - t).sum() for s, t in zip(hand_s, hand_t)) / n

    # the pipeline: packed fused-head log-probs, the OPD advantage, agon.loss.policy_loss
    enable_token_logprobs(student, temperature)
    teacher = Teacher(teacher_model, temperature, pad_token_id=0)
    width = completion_mask(COMPLETIONS).size(1)
    t_logps = teacher.logprobs(PROMPTS, COMPLETIONS)
    s_logps, _ = completion_logprobs(student, PROMPTS, COMPLETIONS, width, 0, packing=True)
    mask = completion_mask(COMPLETIONS)
    for i, c in enumerate(COMPLETIONS):
        assert torch.allclose(t_logps[i, : len(c)], hand_t[i], atol=1e-5)
        assert torch.allclose(s_logps[i, : len(c)], hand_s[i].detach(), atol=1e-5)
    adv = opd_advantages(t_logps, s_logps, mask)
    assert (adv[~mask] == 0).all() and not adv.requires_grad
    out = policy_loss(s_logps, adv, mask, "dapo")
    grads = torch.autograd.grad(out.loss, list(student.parameters()))
    assert out.loss.item() == pytest.approx(float(reverse_kl), abs=1e-5)
    for g, h in zip(grads, hand_grads):
        assert torch.allclose(g, h, atol=1e-5)
    assert max(float(g.abs().max()) for g in grads) > 1e-4  # the check is not vacuous


def test_iw_opd_weights_by_hand():
    teacher, student = torch.tensor([[1.0, -1.0, 2.0]]), torch.tensor([[0.0, 1.0, 1.0]])
    a = opd_advantages(teacher, student, torch.tensor([[1, 1, 1]]), gamma=0.5)
    # A = [1, -2, 1]; |A| before each token: 0, 1, 3 of 4 -> weights 1.5, 1.375, 1.125
    assert a[0].tolist() == pytest.approx([1.5, -2.75, 1.125])
    masked = opd_advantages(torch.ones(1, 3), torch.zeros(1, 3), torch.tensor([[1, 1, 0]]), 0.5)
    assert masked[0].tolist() == pytest.approx([1.5, 1.25, 0.0])


@pytest.mark.parametrize("gamma", [0.0, 0.5])
def test_same_gradient_as_trl_iw_opd(models, gamma):
    """TRL's IW-OPD loss (``IWOPDTrainer._compute_iw_opd_loss``, on the student's logits) and
    ours (advantages into policy_loss) have one gradient; at gamma = 0 it is the plain OPD."""
    pytest.importorskip("trl.experimental.iw_opd")
    from trl.experimental.iw_opd import IWOPDTrainer

    student, teacher_model = _load(models[0]), _load(models[2])
    width = completion_mask(COMPLETIONS).size(1)
    tokens = torch.zeros(len(COMPLETIONS), width, dtype=torch.long)
    labels = torch.full_like(tokens, -100)
    logits = torch.zeros(len(COMPLETIONS), width, student.config.vocab_size)
    t_logps = torch.zeros(len(COMPLETIONS), width)
    for i, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS)):
        tokens[i, : len(c)] = labels[i, : len(c)] = torch.tensor(c)
        logits[i, : len(c)] = student(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1 : -1]
        with torch.no_grad():
            t_logps[i, : len(c)] = _hand_logps(teacher_model, p, c, 1.0)
    logits = logits.detach().requires_grad_()
    fake = SimpleNamespace(
        temperature=1.0,
        iw_opd_gamma=gamma,
        iw_opd_epsilon=1e-8,
        model=SimpleNamespace(training=True),
        _metrics={"train": defaultdict(list)},
    )
    trl_loss = IWOPDTrainer._compute_iw_opd_loss(fake, logits, tokens, labels, t_logps)
    (trl_grad,) = torch.autograd.grad(trl_loss, logits)

    mask = labels != -100
    s_logps = torch.log_softmax(logits, -1).gather(2, tokens[..., None])[..., 0]
    adv = opd_advantages(t_logps, s_logps, mask, gamma)
    ours = policy_loss(torch.where(mask, s_logps, 0.0), adv, mask, "dapo")
    (our_grad,) = torch.autograd.grad(ours.loss, logits)
    assert torch.allclose(our_grad, trl_grad, atol=1e-6)
    assert float(trl_grad.abs().max()) > 1e-4


# ------------------------------------------------------------------------- the switch point


def test_validated_updates_and_the_best_candidate():
    assert validated_updates(10, 5) == [0, 5, 10]
    assert validated_updates(7, 3) == [0, 3, 6, 7]
    assert validated_updates(2, 5) == [0, 2]
    with pytest.raises(ValueError):
        validated_updates(0, 1)
    scores = {0: 0.2, 5: 0.6, 10: 0.6, 15: 0.4}
    assert best_updates(scores) == 5  # a tie goes to fewer updates: more of the budget for RL
    assert best_updates(scores, available=[10, 15]) == 10  # 5's weights are gone
    assert best_updates(scores, available=[15]) == 15
    assert best_updates({0: 0.5, 5: 0.1}) == 0  # OPD never helped: RL from the base model
    assert best_updates({}) == 0
    rows = [
        {"step": 0, "A/opd/base_validation_pass@1": 0.1, "A/opd/validation_pass@1": 0.3},
        {"step": 1},
        {"step": 2, "A/opd/validation_pass@1": 0.2, "B/opd/validation_pass@1": 0.9},
    ]
    assert scores_from_rows(rows, "A") == {0: 0.1, 1: 0.3, 3: 0.2}
    assert scores_from_rows(rows, "B") == {3: 0.9}


def test_start_family_and_rl_settings():
    from baselines.opd_then_rl.trainer import opd_settings, rl_seed, rl_settings, start_family

    fam = {
        "name": "f",
        "model_a": {"model": "base-a", "revision": "v1", "system_prompt": "Be A."},
        "model_b": {"model": "base-b", "revision": None},
    }
    switch = {"models": {"A": {"path": "/opd/step-000005/A"}, "B": {"path": None}}}
    got = start_family(fam, switch)
    assert got["model_a"] == {
        "model": "/opd/step-000005/A",
        "revision": None,
        "system_prompt": "Be A.",
    }
    assert got["model_b"] == fam["model_b"] and fam["model_a"]["model"] == "base-a"

    s = OPDThenRLSettings(steps=20, opd_steps=8, learning_rate=1e-4, opd_learning_rate=1e-3)
    s1 = opd_settings(s)
    assert (s1.steps, s1.learning_rate, s1.seed) == (8, 1e-3, 0)
    s2 = rl_settings(s, [])
    assert (s2.steps, s2.learning_rate, s2.seed, s2.budget_targets) == (12, 1e-4, rl_seed(0), None)
    assert rl_seed(1) != rl_seed(0) and not {rl_seed(k) for k in range(10)} & set(range(1000))
    # under a compute budget: the targets less the OPD spend, the cap less the OPD steps
    s.budget_match, s.budget_max_steps_factor = "tokens", 2.0
    s.budget_targets = {"A": 100.0, "B": 50.0}
    opd_rows = [{"step": 0, "A/drafter/tokens": 30.0, "B/drafter/tokens": 60.0, "A/lr": 1.0}]
    s2 = rl_settings(s, opd_rows)
    assert s2.budget_targets == {"A": 70.0, "B": 0.0}
    assert s2.max_steps == 40 - 8 and s2.model_steps("A") == 32
    s.budget_match, s.budget_targets = "steps", {"A": 20.0, "B": 5.0}
    s2 = rl_settings(s, [{"step": i, "A/lr": 1.0, "B/lr": 1.0} for i in range(8)])
    assert (s2.model_steps("A"), s2.model_steps("B")) == (12, 0)


# ------------------------------------------------------------------------- settings


def _toy_config(models, **section) -> dict:
    settings = {"opd_steps": 2, "validate_every": 1} | section
    return solo_toy_config(models, "opd_then_rl", settings, steps=3, n_validation=4)


def test_settings_from_config(tmp_path, models):
    from agon.registry import TRAINERS

    cfg = load_config(write_config(tmp_path, _toy_config(models)))
    assert cfg["opd_then_rl"] == {
        "opd_steps": 2,
        "validate_every": 1,
        "teacher": None,
        "switch": "best_validation",
        "validation_split": "validation",
        "validation_problems": None,
        "opd_learning_rate": None,
        "iw_opd_gamma": 0.0,
    }
    assert cfg["families"][0]["teacher"]["model"] == str(models[2])
    s = TRAINERS.get("opd_then_rl").settings_from_config(cfg, cfg["families"][0], seed=3)
    assert isinstance(s, OPDThenRLSettings)
    assert (s.opd_steps, s.steps, s.max_new_tokens, s.seed) == (2, 3, 8, 3)
    with pytest.raises(ConfigError, match="opd_then_rl"):
        load_config(write_config(tmp_path, _toy_config(models, switch="plateau")))
    with pytest.raises(ValueError, match="opd_steps"):
        OPDThenRLSettings(steps=5, opd_steps=5)
    with pytest.raises(ValueError, match="validation_split"):
        OPDThenRLSettings(validation_split="test")


def test_teacher_row_checks(models):
    from agon.random_models import build_tiny_tokenizer
    from baselines.opd_then_rl.trainer import load_teacher, teacher_row

    s = OPDThenRLSettings()
    with pytest.raises(ValueError, match="needs a teacher"):
        teacher_row({"name": "f"}, s)
    with pytest.raises(ValueError, match="system_prompt"):
        teacher_row({"name": "f", "teacher": {"model": "t", "system_prompt": "Hi"}}, s)
    assert teacher_row(
        {"name": "f", "teacher": {"model": "t"}}, OPDThenRLSettings(teacher="u")
    ) == {"model": "u"}
    gemma = build_tiny_tokenizer("gemma", models[0].parent / "gemma-tok")
    fam = {"name": "f", "teacher": {"model": str(models[2])}, "dtype": "float32"}
    with pytest.raises(ValueError, match="tokenizer"):
        load_teacher(fam, s, {"A": gemma}, None)


# ------------------------------------------------------------------------- steps


def test_the_phases_are_opd_then_the_cores_grpo_step():
    """Phase 1 distills (OPD's step, with the teacher bound), phase 2 is GRPO's step of the
    policy-gradient core, unchanged; a finished phase 1 (its switch file) is skipped."""
    from agon.rl import grpo_step
    from baselines.opd_then_rl.opd import opd_step
    from baselines.opd_then_rl.trainer import TRAINER, opd_phase_step

    opd, rl_phase = TRAINER.phases
    assert (opd.name, rl_phase.name) == ("opd", "rl")
    assert opd.step is opd_phase_step and rl_phase.step is grpo_step
    assert "opd_step" in opd_phase_step.__code__.co_names and callable(opd_step)


def test_opd_step_with_the_student_as_teacher_has_no_signal(models):
    """A teacher identical to the student gives advantages of 0 (to float rounding): the
    reverse KL is 0; another teacher's is not (a sample estimate, of either sign). The
    teacher's tokens are the prompt and completion tokens of every sample."""
    from baselines.opd_then_rl.opd import opd_step
    from tests.duel_helpers import tiny_policies

    task, root = ParityTask(), models[0].parent
    s = OPDThenRLSettings(
        steps=3, opd_steps=1, problems_per_step=2, num_generations=3, max_new_tokens=6
    )
    problems = task.problems("train")[:2]
    for path, zero in ((models[0], True), (models[2], False)):
        policies = tiny_policies("qwen3", root, s, names=["A"], seeds=[0])
        sampled = []
        generate = policies["A"].engine.generate

        def record(prompts, n=1, sampling=None, generate=generate, sampled=sampled):
            out = generate(prompts, n=n, sampling=sampling)
            sampled.extend(c for row in out for c in row)
            return out

        policies["A"].engine.generate = record
        teacher = Teacher(_load(path), s.temperature, policies["A"].pad_token_id)
        row = opd_step(task, policies, problems, s, step=0, teacher=teacher)
        kl = row["A/opd/reverse_kl"]
        assert (abs(kl) < 1e-5) if zero else abs(kl) > 1e-4, (path, kl)
        expected = sum(len(c.prompt_token_ids) + len(c.token_ids) for c in sampled)
        assert row["A/opd/teacher_tokens"] == expected
        assert row["tokens_generated"] == sum(len(c.token_ids) for c in sampled)
        assert math.isfinite(row["A/loss"]) and row["time/teacher_s"] >= 0


# ------------------------------------------------------------------------- runs


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_toy_run_distills_switches_and_trains(tmp_path, models, monkeypatch):
    """`agon train --method opd_then_rl` on the toy arith task: 2 OPD steps (validated before,
    after 1 and after 2 updates), RL from A's best candidate (1 update) and B's base model (no
    validation ever beats it), then a resume with one more step."""
    from agon.training import probe
    from agon.training.run import run

    calls = []
    scores = {"A": [0.1, 0.5, 0.3], "B": [0.4, 0.4, 0.2]}  # before, after 1, after 2 updates

    def fake_pass1(engines, task, problems, max_new_tokens, models=()):
        k = len(calls)
        calls.append(len(problems))
        out = {f"eval/hard_pass@1/{n}": scores[n][k] for n in engines}
        return out | {f"eval/hard_tokens/{n}": 7.0 for n in engines} | {"time/eval_s": 0.01}

    monkeypatch.setattr(probe, "hard_pass1", fake_pass1)
    config = write_config(tmp_path, _toy_config(models))
    out = tmp_path / "run"
    run(config, "tiny", "arith", "opd_then_rl", seed=0, out=out)
    assert calls == [4, 4, 4]  # the validation split's 4 problems, 3 times
    switch = json.loads((out / "opd" / "switch.json").read_text())
    a, b = switch["models"]["A"], switch["models"]["B"]
    assert (a["updates"], a["validation_pass@1"]) == (1, 0.5)
    assert a["scores"] == {"0": 0.1, "1": 0.5, "2": 0.3}
    assert (b["updates"], b["path"]) == (0, None)  # a tie with the base goes to the base
    assert (out / "opd" / "candidates" / "step-000001" / "A" / "config.json").is_file()
    assert not (out / "opd" / "candidates" / "step-000002").exists()  # never A's best
    rows = _rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]
    for name in ("A", "B"):
        assert rows[0][f"{name}/opd/reverse_kl"] != 0 and math.isfinite(rows[0][f"{name}/loss"])
        assert rows[0][f"{name}/opd/teacher_tokens"] > rows[0][f"{name}/drafter/tokens"]
        assert f"{name}/opd/reverse_kl" not in rows[2] and math.isfinite(rows[2][f"{name}/loss"])
    assert rows[0]["A/opd/base_validation_pass@1"] == 0.1
    assert rows[0]["A/opd/validation_pass@1"] == 0.5 and rows[1]["A/opd/validation_pass@1"] == 0.3
    assert rows[0]["A/opd/validation_tokens"] == 14.0  # two validations in row 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "opd_then_rl" and summary["steps"] == 3
    for name in ("A", "B"):
        assert summary[f"{name}/steps"] == 3 and summary[f"{name}/tokens_generated"] > 0
        assert summary[f"{name}/teacher_tokens"] == sum(
            r.get(f"{name}/opd/teacher_tokens", 0) for r in rows
        )
        assert (out / name / "config.json").is_file()
    assert 0 < summary["teacher_time_s"] <= summary["train_time_s"]
    assert summary["opd_switch"]["models"]["A"]["updates"] == 1
    assert summary["opd_switch"]["validation_tokens"] == {"A": 21.0, "B": 21.0}
    assert summary["settings"]["opd_steps"] == 2
    # a rerun with one more step: the OPD phase is done; RL resumes from its checkpoint
    calls.clear()
    run(config, "tiny", "arith", "opd_then_rl", seed=0, out=out, steps=4)
    assert calls == []
    assert [r["step"] for r in _rows(out / "metrics.jsonl")] == [0, 1, 2, 3]
    # killed in the OPD phase's last step: it resumes from the checkpoint after 1 update (with the
    # scores validated before it) and validates once more, and switches as before
    import shutil

    for gone in (out / "opd" / "switch.json", out / "opd" / "checkpoints" / "step-000002"):
        shutil.rmtree(gone) if gone.is_dir() else gone.unlink()
    shutil.rmtree(out / "rl")
    calls[:] = [4, 4]  # the fake's next answer is the one after 2 updates
    run(config, "tiny", "arith", "opd_then_rl", seed=0, out=out)
    assert calls == [4, 4, 4]
    assert json.loads((out / "opd" / "switch.json").read_text()) == switch
    assert [r["step"] for r in _rows(out / "metrics.jsonl")] == [0, 1, 2]


def test_fixed_switch_and_a_compute_budget(tmp_path, models):
    """switch fixed: RL from the model after all OPD steps, nothing validated. Under a token
    budget the OPD spend counts: A's target is reached in OPD (no RL step), B runs RL up to the
    step cap of both phases (2 x 3 steps)."""
    from agon.training.run import run

    cfg = _toy_config(models, switch="fixed", opd_learning_rate=1e-3)
    cfg["train"]["budget"] = {"match": "tokens", "max_steps_factor": 2.0}
    config = write_config(tmp_path, cfg)
    reference = tmp_path / "agon-summary.json"
    reference.write_text(json.dumps({"A/tokens_generated": 1, "B/tokens_generated": 1e9}))
    out = tmp_path / "run"
    run(config, "tiny", "arith", "opd_then_rl", seed=0, out=out, match_run=reference)
    switch = json.loads((out / "opd" / "switch.json").read_text())
    assert switch["switch"] == "fixed" and switch["validation_problems"] == 0
    for name in ("A", "B"):
        assert switch["models"][name]["updates"] == 2
        assert (out / "opd" / "candidates" / "step-000002" / name / "config.json").is_file()
    rows = _rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5]
    assert not any("opd/validation" in k for r in rows for k in r)
    assert [("A/loss" in r, "B/loss" in r) for r in rows] == [(True, True)] * 2 + [
        (False, True)
    ] * 4
    assert rows[0]["A/lr"] == pytest.approx(1e-3) and rows[2]["B/lr"] == pytest.approx(1e-2)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["A/steps"] == 2 and summary["B/steps"] == 6
    budget = summary["budget"]
    assert budget["A/spent"] == summary["A/tokens_generated"] > 1
    assert budget["A/hit_step_cap"] is False and budget["B/hit_step_cap"] is True


# ------------------------------------------------------------------------- the toy teacher


def test_toy_teacher_is_trained_beside_the_pair_and_gated_against_it(tmp_path):
    """`agon toy pretrain --model teacher`, reduced, into a folder that holds the pair (here: its
    tokenizer and a report with its gate scores): the pair's tokenizer, a seed of its own, and
    the gate against A's and B's scores on the same problems."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agon.cli import main
    from agon.config import deep_merge
    from agon.toy.pretrain import make_tasks, tokenizer_corpus
    from agon.toy.sft import model_seed
    from agon.toy.tokenizer import build_tokenizer
    from tests.test_toy_pretrain import REDUCED

    with open("config/config.yaml") as f:
        raw = yaml.safe_load(f)
    cfg = load_config(write_config(tmp_path, deep_merge(raw, REDUCED)))
    config = tmp_path / "config.yaml"
    out = tmp_path / "models"
    teacher = ["toy", "pretrain", "--config", str(config), "--out", str(out), "--model", "teacher"]
    assert main(teacher) == 2  # no pair to read the tokenizer from and gate against
    tasks = make_tasks({r["name"]: r["params"] for r in cfg["tasks"]})
    corpus = tokenizer_corpus(tasks, cfg["toy"]["tokenizer"]["corpus_examples"])
    build_tokenizer(corpus, cfg["toy"]["tokenizer"]["vocab_size"]).save_pretrained(out / "A")
    pair = {"A": {"pass@1": 0.5, "n": 6}, "B": {"pass@1": 0.25, "n": 6}}
    report = {"seed": 3, "generation": {"split": "validation_hard"}}
    report["gates"] = {"tasks": {"arith": pair, "toycode": pair}}
    (out / "report.json").write_text(json.dumps(report))
    assert main(teacher) == 0
    assert AutoModelForCausalLM.from_pretrained(out / "teacher").config.model_type == "qwen3"
    vocab = AutoTokenizer.from_pretrained(out / "teacher").get_vocab()
    assert vocab == AutoTokenizer.from_pretrained(out / "A").get_vocab()
    got = json.loads((out / "teacher_report.json").read_text())
    assert got["seed"] == 3 and got["provenance"]["seed"] == 3  # the pair's base seed
    assert got["train"]["seed"] == model_seed(3, "teacher", 0) not in (3000, 3100)  # not A's, B's
    assert got["gates"]["split"] == "validation_hard"
    for name in ("arith", "toycode"):
        row = got["gates"]["tasks"][name]
        assert row["teacher"]["n"] == 6 and 0 <= row["teacher"]["pass@1"] <= 1
        mine = row["teacher"]["pass@1"]
        check = got["checks"][f"{name}.teacher.beats_A_and_B"]
        assert check == {"value": [mine, 0.5], "pass": mine > 0.5}
    assert got["all_gates_pass"] == all(c["pass"] for c in got["checks"].values())
    report["gates"]["tasks"]["arith"]["A"] = {"pass@1": 0.5, "n": 5}  # other problems
    (out / "report.json").write_text(json.dumps(report))
    assert main(teacher) == 2


@pytest.mark.slow  # ~1 min: a one-process and a two-process training run in subprocesses
def test_two_ranks_take_the_one_process_steps_in_both_phases(tmp_path):
    """`agon train --method opd_then_rl` under two processes (gloo on the CPU) takes the steps of
    one process in both phases: the same switch, the same metrics rows, the same final models
    (to float rounding); the accelerator prepares the RL phase's models after the OPD phase's."""
    from safetensors.torch import load_file

    from tests.duel_helpers import tiny_config
    from tests.test_distributed import TOLERANCE, _one, _run, _two

    train = {"steps": 3, "problems_per_step": 4, "num_generations": 4, "learning_rate": 1e-3}
    config = tiny_config(tmp_path, train=train | {"checkpoint_every": 1})
    raw = yaml.safe_load(config.read_text())
    raw["families"][0]["teacher"] = {
        "model": str(build_tiny_model("qwen3", tmp_path / "qwen3-2", 2))
    }
    raw["opd_then_rl"] = {"opd_steps": 2, "validate_every": 1}
    config.write_text(yaml.safe_dump(raw))
    one, two = tmp_path / "one", tmp_path / "two"
    _run(_one(config, one, "opd_then_rl"))
    _run(_two(config, two, "opd_then_rl"))
    s1, s2 = (json.loads((o / "summary.json").read_text()) for o in (one, two))
    assert s2["distributed"]["num_processes"] == 2 and s1["distributed"]["num_processes"] == 1
    for name in ("A", "B"):  # the same switch (the candidates' folders are each run's own)
        m1, m2 = (s["opd_switch"]["models"][name] for s in (s1, s2))
        assert {k: v for k, v in m1.items() if k != "path"} == {
            k: v for k, v in m2.items() if k != "path"
        }
    for k in ("A/teacher_tokens", "B/teacher_tokens", "tokens_generated", "A/steps", "B/steps"):
        assert s1[k] == s2[k], k
    rows1, rows2 = _rows(one / "metrics.jsonl"), _rows(two / "metrics.jsonl")
    assert [r["step"] for r in rows2] == [0, 1, 2]
    for r1, r2 in zip(rows1, rows2):
        assert set(r1) == set(r2)
        for k, v in r1.items():
            if not k.startswith("time/") and v == v:
                assert r2[k] == pytest.approx(v, abs=1e-4), k
    for name, seed in (("A", 0), ("B", 1)):
        a = load_file(one / name / "model.safetensors")
        b = load_file(two / name / "model.safetensors")
        base = load_file(tmp_path / f"qwen3-{seed}" / "model.safetensors")
        assert max(float((a[k] - base[k]).abs().max()) for k in a) > 1e-3  # trained
        assert max(float((a[k] - b[k]).abs().max()) for k in a) < TOLERANCE
