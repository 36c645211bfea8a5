"""The Cliff baseline's pure parts: per-token advantages, the toy oracle, the model teacher, the
per-token loss (its settings and training runs: tests/test_cliff_runs.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agon.loss import policy_loss
from agon.tasks.base import Problem
from agon.toy.tasks import ArithTask
from agon.toy.toycode import TRACE, ToyCodeTask, code_line, code_program
from baselines.cliff import (
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
from tests.duel_helpers import ParityTask
from tests.tiny_models import ScriptedEngine

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
    from agon.toy.chain import chain_text, gold_arith_steps

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


def test_toycode_oracle_in_a_trace_world_wants_every_line_printed_and_none_missing():
    """``answer: trace``: a line that does not print its result is the first mistake, and a
    missing line is one even where the map is already right (its result is not printed)."""
    task = ToyCodeTask(n_train=0, n_test=1, n_validation=0, answer="trace")
    p = Problem(
        id="c",
        question="sum",
        answer="[]",
        meta={"ops": [("*", 2), ("+", 3), ("-", 3)], "answer": "trace"},
    )
    gold = ToyCodeTask.solution(p)
    assert gold.count(TRACE) == 3 and oracle_mistake(task, p, gold) is None
    silent = gold.replace(f" x=(x+3)%7{TRACE}", " x=(x+3)%7", 1)
    assert oracle_mistake(task, p, silent) == silent.index(" x=(x+3)%7")
    # +3 -3 is the identity: dropping both keeps the map, which a final answer accepts
    for kind, at in (("final", None), ("trace", " s=(s+x)")):
        short = code_program([code_line("*", 2, answer=kind)])
        q = Problem(id="c", question="sum", answer="[]", meta={**p.meta, "answer": kind})
        assert oracle_mistake(task, q, short) == (at and short.index(at))
    assert oracle_mistake(task, p, gold[: gold.index(TRACE) + 3]) is None  # cut mid-line
