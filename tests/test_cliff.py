"""The Cliff baseline: per-token advantages, the toy oracle, the model teacher, the per-token
loss, and a few training steps in the toy world."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from agon.config import ConfigError, load_config
from agon.loss import policy_loss
from agon.tasks.base import Problem
from agon.toy.tasks import ArithTask
from agon.toy.toycode import ToyCodeTask, code_line, code_program
from baselines.cliff import (
    CliffSettings,
    ModelTeacher,
    OracleTeacher,
    char_to_token,
    oracle_mistake,
    padded_token_advantages,
    parse_teacher_reply,
    task_steps,
    token_advantages,
)
from baselines.cliff.steps import generic_steps
from tests.duel_helpers import ParityTask, solo_toy_config, write_config
from tests.tiny_models import ScriptedEngine, build_tiny_model

W = 0.5

# ------------------------------------------------------------------------- token advantages


def test_wrong_rollout_prefix_positive_suffix_negative():
    # outcome -1.2, 5 tokens, first mistake at token 2: [-1.2 + w, -1.2 + w, -1.2 - w, ...]
    adv = token_advantages(-1.2, 5, 0.0, 2, W)
    assert adv.tolist() == pytest.approx([-0.7, -0.7, -1.7, -1.7, -1.7])
    # a mistake at the first token: all suffix; past the end: all prefix (clipped)
    assert token_advantages(0.0, 3, 0.0, 0, W).tolist() == [-0.5, -0.5, -0.5]
    assert token_advantages(0.0, 3, 0.0, 9, W).tolist() == [0.5, 0.5, 0.5]


def test_correct_rollout_cases():
    assert token_advantages(0.8, 3, 1.0, None, W).tolist() == pytest.approx([1.3, 1.3, 1.3])
    assert token_advantages(0.8, 3, 1.0, None, W, correct_mode="none").tolist() == [0.8] * 3
    # a correct rollout's mark (if any) is ignored
    assert token_advantages(0.8, 3, 1.0, 1, W).tolist() == pytest.approx([1.3] * 3)


def test_unlocated_and_ungraded_cases():
    assert token_advantages(-0.4, 3, 0.0, None, W).tolist() == [-0.4] * 3  # outcome_only
    neg = token_advantages(-0.4, 3, 0.0, None, W, unlocated="negative")
    assert neg.tolist() == pytest.approx([-0.9] * 3)
    # ungraded: the outcome advantage is already 0, no term is added
    assert token_advantages(0.0, 2, float("nan"), 1, W).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="cliff.correct"):
        token_advantages(0.0, 2, 1.0, None, W, correct_mode="all")
    with pytest.raises(ValueError, match="cliff.unlocated"):
        token_advantages(0.0, 2, 0.0, None, W, unlocated="drop")


def test_padded_advantages_match_the_completion_mask():
    from agon.logprobs import completion_mask

    out = padded_token_advantages([1.0, -1.0, 0.0], [2, 4, 0], [1.0, 0.0, 0.0], [None, 1, None], W)
    assert out.shape == completion_mask([[1, 2], [1, 2, 3, 4], []]).shape == (3, 4)
    expected = [[1.5, 1.5, 0.0, 0.0], [-0.5, -1.5, -1.5, -1.5], [0.0, 0.0, 0.0, 0.0]]
    np.testing.assert_allclose(out, expected)
    assert padded_token_advantages([], [], [], [], W).shape == (0, 1)


# ------------------------------------------------------------------------- the toy oracle


def _arith(start: int, ops: list[tuple[str, int]]) -> Problem:
    from agon.toy.tasks import chain_text, gold_arith_steps

    q = chain_text(ops, str(start))
    answer = gold_arith_steps(start, ops)[-1].result
    return Problem(id=q, question=q, answer=str(answer), meta={"start": start, "ops": ops})


ARITH = _arith(4, [("*", 3), ("+", 2), ("-", 5)])  # 4*3=5 5+2=0 0-5=2 \boxed{2}


@pytest.mark.parametrize(
    "text, wrong_at",
    [
        ("4*3=5 5+2=0 0-5=2 \\boxed{2}", None),  # the gold solution
        ("4*3=5 5+2=1 1-5=3 \\boxed{3}", "5+2=1"),  # an arithmetic slip in step 2
        ("4*4=2 2+2=4 4-5=6 \\boxed{6}", "4*4=2"),  # a misread operand: the value is wrong
        ("4*3=5 5+2=0 \\boxed{0}", "\\boxed{0}"),  # a step skipped: the answer is the mistake
        ("4*3=5 5+2=0 0-5=2 2+1=3 \\boxed{3}", "2+1=3"),  # a step the chain does not have
        ("4*3=5 5+2=0 0-5=2 \\boxed{5}", "\\boxed{5}"),  # right steps, wrong answer
        ("4*3=5 ok 5+2=0", "ok"),  # text that is no step
        ("zz 4*3=5", "zz"),  # gibberish from the start
        ("4*3=5 5+2=0 0-5", None),  # cut by the generation limit mid-step: nothing wrong yet
        ("4*3=5 5+2=0 0-5=2 \\boxed{", None),
    ],
)
def test_arith_oracle_finds_the_first_wrong_step(text, wrong_at):
    task = ArithTask(n_train=0, n_test=1, n_validation=0)
    at = oracle_mistake(task, ARITH, text)
    assert at == (None if wrong_at is None else text.index(wrong_at))


def _code(ops: list[tuple[str, int]]) -> Problem:
    return Problem(id="c", question="sum", answer="[]", meta={"ops": ops})


def test_toycode_oracle_finds_the_first_wrong_line():
    task = ToyCodeTask(n_train=0, n_test=1, n_validation=0)
    p = _code([("*", 3), ("+", 2)])
    gold = ToyCodeTask.solution(p)
    assert oracle_mistake(task, p, gold) is None

    def at(text: str) -> int | None:
        return oracle_mistake(task, p, text)

    wrong_op = code_program([code_line("*", 4), code_line("+", 2)])
    assert at(wrong_op) == wrong_op.index(" x=(x*4)")
    # x-4 is x+3 mod 7: a different line with the same map is not a mistake
    same_map = code_program([code_line("*", 3), code_line("-", 5)])
    assert at(same_map) is None
    missing = code_program([code_line("*", 3)])
    assert at(missing) == missing.index(" s=(s+x)")  # the tail came one operation early
    extra = code_program([code_line("*", 3), code_line("+", 2), code_line("+", 1)])
    assert at(extra) == extra.index(" x=(x+1)")
    head = gold.replace("s=0", "s=1")
    assert at(head) == head.index("s=1")
    trailing = gold + "\nprint(1)"
    assert at(trailing) == trailing.index("print(1)")
    assert at(gold[: gold.index("%7") - 1]) is None  # cut mid-line
    assert at("hello") == 0


def test_oracle_only_for_toy_tasks():
    with pytest.raises(ValueError, match="teacher: model"):
        oracle_mistake(ParityTask(), ParityTask().problems("train")[0], "x")


def test_mistake_maps_to_the_token_that_holds_it():
    """On the toy tokenizer (numbers whole): the mark is the first token of the wrong step."""
    from agon.toy.tokenizer import build_tokenizer

    task = ArithTask(n_train=40, n_test=5, n_validation=0)
    corpus = [ArithTask.solution(p) for p in task.problems("train")]
    tok = build_tokenizer(corpus, vocab_size=280)
    text = "4*3=5 5+2=1 1-5=3 \\boxed{3}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    m = char_to_token(tok, ids, oracle_mistake(task, ARITH, text))
    assert tok.decode(ids[:m]) == "4*3=5 " and tok.decode(ids[m:]).startswith("5+2=1")
    assert char_to_token(tok, ids, 0) == 0
    assert char_to_token(tok, ids, len(text)) == len(ids)
    # a mark inside a token charges that whole token
    inside = text.index("boxed")
    t = char_to_token(tok, ids, inside)
    assert len(tok.decode(ids[:t])) <= inside < len(tok.decode(ids[: t + 1]))


def test_steps_per_task():
    arith = ArithTask(n_train=0, n_test=1, n_validation=0)
    text = "4*3=5 5+2=0 \\boxed{0}"
    assert [text[a:b] for a, b in task_steps(arith, text)] == ["4*3=5", "5+2=0", "\\boxed{0}"]
    assert task_steps(arith, "no steps") == [(0, 8)]  # none written: a generic completion
    code = ToyCodeTask(n_train=0, n_test=1, n_validation=0)
    prog = "a\n\n b\nc"
    assert [prog[a:b] for a, b in task_steps(code, prog)] == ["a", " b", "c"]
    one_line = "First add. Then multiply!  Done"
    assert [one_line[a:b] for a, b in generic_steps(one_line)] == [
        "First add.",
        "Then multiply!",
        "Done",
    ]
    lines = "Add 2.\nThen 3. Then 4.\n\n\\boxed{9}"
    assert [lines[a:b] for a, b in task_steps(ParityTask(), lines)] == [
        "Add 2.",
        "Then 3. Then 4.",
        "\\boxed{9}",
    ]


# ------------------------------------------------------------------------- the model teacher


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("3", 3),
        ("Step 2.", 2),
        ("[4]", 4),
        ("The first wrong step is step 2, since 5+2 is 0.", 2),
        ("reasoning... \\boxed{1}", 1),
        ("<think>step 1 looks fine</think>\n2", 2),
        ("<think>step 1 looks fine and then", None),  # never closed
        ("0", 0),
        ("None of the steps is wrong.", 0),
        ("I think it is 7", None),  # out of range (4 steps)
        ("", None),
        ("I cannot tell", None),
        ("Looking at it, 3", 3),
    ],
)
def test_teacher_reply_parser(reply, expected):
    assert parse_teacher_reply(reply, n_steps=4) == expected


def test_model_teacher_marks_the_named_step():
    replies = {"4*3=5": "2", "4*4=2": "nonsense", "9*9": "0"}

    def reply(prompt: str, j: int) -> str:
        return next(v for k, v in replies.items() if f"[1] {k}" in prompt)

    engine = ScriptedEngine(reply)
    task = ArithTask(n_train=0, n_test=1, n_validation=0)
    texts = ["4*3=5 5+2=1 \\boxed{1}", "4*4=2 2+2=4 \\boxed{4}", "9*9", ""]
    marks = ModelTeacher(engine, 8).mark(task, [ARITH] * 4, texts)
    assert marks.offsets == [texts[0].index("5+2=1"), None, None, None]
    assert (marks.asked, marks.unparsable, marks.said_none) == (3, 1, 1)  # "" is not asked
    prompt = engine.calls[0][0]["content"]
    assert "Problem: 4*3+2-5" in prompt and "[2] 5+2=1" in prompt and "[3] \\boxed{1}" in prompt
    assert OracleTeacher().mark(task, [ARITH], texts[:1]).offsets == [texts[0].index("5+2=1")]


# ------------------------------------------------------------------------- the loss


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "dr_grpo"])
def test_per_token_advantages_constant_along_t_equal_per_sequence(loss_type):
    g = torch.Generator().manual_seed(0)
    logps = (-torch.rand(3, 5, generator=g)).requires_grad_()
    old = logps.detach() + 0.3 * torch.randn(3, 5, generator=g)  # some ratios get clipped
    ref = logps.detach() - 0.1
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    adv = torch.tensor([0.7, -1.3, 0.2])
    kw = dict(old_logps=old, ref_logps=ref, beta=0.05, max_completion_length=5)
    seq = policy_loss(logps, adv, mask, loss_type, **kw)
    (grad_seq,) = torch.autograd.grad(seq.loss, logps)
    tok = policy_loss(logps, adv[:, None].expand(3, 5).clone(), mask, loss_type, **kw)
    (grad_tok,) = torch.autograd.grad(tok.loss, logps)
    assert tok.loss.item() == pytest.approx(seq.loss.item())
    assert torch.allclose(grad_tok, grad_seq)
    assert (tok.kl, tok.clip_ratio) == pytest.approx((seq.kl, seq.clip_ratio))
    with pytest.raises(ValueError, match="shape of the log-probs"):
        policy_loss(logps, torch.zeros(3, 4), mask, loss_type, **kw)


def test_per_token_advantages_weight_each_token():
    logps = torch.zeros(1, 3, requires_grad=True)
    out = policy_loss(logps, torch.tensor([[1.0, -2.0, 5.0]]), torch.tensor([[1, 1, 0]]), "dapo")
    (grad,) = torch.autograd.grad(out.loss, logps)
    assert grad[0].tolist() == pytest.approx([-0.5, 1.0, 0.0])  # -A_t / n_tokens, masked


# ------------------------------------------------------------------------- settings and a run


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two tiny random qwen3 models (A and B), built once for this module."""
    root = tmp_path_factory.mktemp("cliff-models")
    return [build_tiny_model("qwen3", root / f"qwen3-{seed}", seed=seed) for seed in (0, 1)]


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
    assert (s.mode, s.weight, s.num_generations, s.max_new_tokens, s.seed) == ("solo", 0.5, 3, 8, 3)
    cfg = load_config(
        write_config(tmp_path, _toy_config(models, weight=0.2, correct="none", teacher="model"))
    )
    s = CliffSettings.from_config(cfg, cfg["families"][0])
    assert (s.weight, s.correct, s.teacher) == (0.2, "none", "model")
    with pytest.raises(ConfigError, match="cliff"):
        load_config(write_config(tmp_path, _toy_config(models, correct="all")))
    with pytest.raises(ValueError, match="teacher"):
        CliffSettings(teacher="human")
    with pytest.raises(ValueError, match="solo"):
        CliffSettings(mode="duel")


def test_toy_run_writes_summary_and_moves_both_models(tmp_path, models):
    """`agon train --method cliff` on the toy arith task with tiny models: two steps."""
    from transformers import AutoModelForCausalLM

    from agon.training.run import run

    config = write_config(tmp_path, _toy_config(models))
    out = tmp_path / "run"
    payload = run(config, "tiny", "arith", "cliff", seed=0, out=out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "cliff" and summary["steps"] == payload["steps"] == 2
    assert summary["settings"]["weight"] == 0.5 and summary["settings"]["mode"] == "solo"
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


def test_weight_zero_is_the_solo_grpo_step_and_a_model_teacher_marks(models):
    """w = 0 takes exactly the duel trainer's solo (GRPO) step; with w > 0 a model teacher's
    marks (here: always step 1) reach the loss."""
    from agon import duel
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
    m_grpo = duel.duel_step(task, grpo, problems, s, step=0)
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
    combine_ranks (it averages keys it does not know) keeps."""
    from types import SimpleNamespace

    import accelerate.utils

    from agon.training.metrics import combine_ranks
    from agon.training.metrics import counts_over_ranks as over_ranks
    from baselines.cliff.step import cliff_metrics, teacher_counts
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
    assert combine_ranks([m, m]) == pytest.approx(m)
    assert over_ranks(None, mine, 0.5) == (mine, 0.5)  # one process: as counted
    assert math.isnan(cliff_metrics("A", teacher_counts([], [], 0, Marks([])))["A/cliff/located"])


def test_teacher_totals_for_the_summary(tmp_path):
    from baselines.cliff.trainer import teacher_totals

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
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert teacher_totals(path) == {
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
