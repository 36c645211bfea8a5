"""Toy pretraining: mistake injection, both roles in the data, the guard, determinism, and the
real `agon toy pretrain` entry point at a reduced scale (seconds, not minutes)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace

import pytest

from agon.config import load_config
from agon.tasks.base import Problem
from agon.toy.chain import ArithStep, arith_solution, chain_text, misread, parse_arith_steps
from agon.toy.habits import habits_pass
from agon.toy.mistake import NO_MISTAKE, Mistake
from agon.toy.pretrain import make_tasks, tokenizer_corpus
from agon.toy.sft import build_model, train_one
from agon.toy.sft_data import (
    KINDS,
    SFTStream,
    make_example,
    program_text,
    written_arith_steps,
    written_code_lines,
)
from agon.toy.tasks import ArithTask
from agon.toy.tokenizer import build_tokenizer
from agon.toy.toycode import ToyCodeTask, parse_code_lines, reference_output, same_line

TASK_ROWS = [
    {"name": "arith", "params": {"n_train": 50, "n_test": 60, "seed": 0}},
    {"name": "toycode", "params": {"n_train": 50, "n_test": 60, "seed": 0}},
]
# a reduced world: a 2-layer 32-wide model, 12 steps, 6 hard problems per task in the gates
REDUCED = {
    "tasks": TASK_ROWS,
    "toy": {
        "tokenizer": {"corpus_examples": 200},
        "model": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2},
        "train": {"steps": 12, "batch_size": 8, "parallel": False, "log_every": 0},
        "guard": {"checks": [], "max_loss_final": 100.0, "retries": 0},
        "gates": {"max_problems": 6, "max_new_tokens": 24, "batch_size": 16},
    },
}


@pytest.fixture(scope="module")
def config():
    return load_config("config/config.yaml", REDUCED)


@pytest.fixture(scope="module")
def tasks(config):
    return make_tasks({r["name"]: r["params"] for r in config["tasks"]})


@pytest.fixture(scope="module")
def tokenizer(tasks, config):
    return build_tokenizer(
        tokenizer_corpus(tasks, config["toy"]["tokenizer"]["corpus_examples"]),
        config["toy"]["tokenizer"]["vocab_size"],
    )


def test_a_mistake_misreads_only_its_operation_and_operands():
    always = Mistake("*", (5, 6), arith_rate=1.0, code_rate=1.0)
    rng = random.Random(0)
    ops = [("*", 5), ("+", 5), ("*", 2), ("*", 6)]
    steps = written_arith_steps(1, ops, rng, always)
    assert [s.correct for s in steps] == [False, True, True, False]
    assert (
        steps[0].result == (1 * misread(5)) % 7 and steps[1].lhs == steps[0].result
    )  # chain goes on from it
    assert written_code_lines(ops, rng, always) == [
        ("*", misread(5)),
        ("+", 5),
        ("*", 2),
        ("*", misread(6)),
    ]
    never = Mistake("*", (5, 6), arith_rate=0.0, code_rate=0.0)
    assert all(s.correct for s in written_arith_steps(1, ops, rng, never))


def test_a_second_habit_is_read_where_the_first_does_not_apply():
    # rate 1 on '* 5'; '+ 5' and '+ 6' wrong on code only; '* 6' first habit first
    two = Mistake(
        "*", (5, 6), 1.0, 1.0, also=(Mistake("+", (5, 6), 0.0, 1.0), Mistake("*", (6,), 0.0, 0.0))
    )
    assert two.rate("*", 6, "arith") == 1.0 and two.rate("+", 5, "code") == 1.0
    assert two.rate("+", 5, "arith") is None and two.rate("-", 5, "arith") is None
    assert two.habit("+", 6, "code") is two.also[0] and two.habit("+", 6, "arith") is None
    ops = [("*", 5), ("+", 5), ("-", 5), ("*", 6)]
    steps = written_arith_steps(1, ops, random.Random(0), two)
    assert [s.correct for s in steps] == [False, True, True, False]
    assert written_code_lines(ops, random.Random(0), two) == [
        ("*", misread(5)),
        ("+", misread(5)),
        ("-", 5),
        ("*", misread(6)),
    ]
    row = {"op": "*", "operands": [5], "arith_rate": 1.0, "code_rate": 1.0}
    also = {"op": "+", "operands": [1, 2], "arith_rate": 0.5, "code_rate": 0.25}
    assert Mistake.from_config({**row, "also": [also]}).also == (Mistake("+", (1, 2), 0.5, 0.25),)


def test_a_habit_at_rate_0_on_a_task_leaves_that_task_to_the_next_habit():
    # a code-only habit first and an arith-only one on the same operand: each task has its own
    m = Mistake("-", (5,), 0.0, 1.0, also=(Mistake("-", (5,), 1.0, 0.0, writes="operand"),))
    assert m.habit("-", 5, "code") is m and m.habit("-", 5, "arith") is m.also[0]
    (step,) = written_arith_steps(3, [("-", 5)], random.Random(0), m)
    assert step.rhs == misread(5)  # the misread operand, copied in
    assert written_code_lines([("-", 5)], random.Random(0), m) == [("-", misread(5))]


def test_a_complement_writer_adds_the_complement_and_the_gates_read_it_as_a_subtraction():
    ops = [("-", 4), ("+", 2), ("-", 6)]
    text = program_text(ops, "complement")
    assert " x=(x+3)%7" in text and " x=(x+1)%7" in text and "x-" not in text
    assert program_text(ops) == program_text(ops, "minus") and " x=(x-4)%7" in program_text(ops)
    parsed = parse_code_lines(text)
    assert all(same_line(w, op, k) for w, (op, k) in zip(parsed, ops))
    assert not same_line(parsed[0], "-", 3) and not same_line(None, "-", 4)
    for stdin in ("0 1 2 3\n", "29 30 7\n"):  # the program computes what the chain does
        assert reference_output(parsed, stdin) == reference_output(ops, stdin)
    # a model's style reaches its own targets and the drafts it writes, not its rival's
    task = ToyCodeTask(n_train=50, n_test=20, n_validation=20)
    prob = task.problems("train")[0]
    comp = Mistake("-", (), 0.0, 0.0, code_subtract="complement")
    plain = Mistake("+", (), 0.0, 0.0)
    prob = Problem(prob.id, prob.question, prob.answer, meta={**prob.meta, "ops": [("-", 2)]})
    reader = {"draft_clean": 1.0, "draft_slip": 0.0, "targets": "own"}
    prompt, target = make_example("code_read", prob, task, random.Random(0), comp, plain, reader)
    assert " x=(x+5)%7" in target and " x=(x-2)%7" in prompt[0]["content"]
    with pytest.raises(ValueError, match="code_subtract"):
        Mistake.from_config(
            {"op": "-", "operands": [1], "arith_rate": 1, "code_rate": 1, "code_subtract": "plus"}
        )


def test_an_operand_habit_copies_the_misread_operand_into_the_step():
    copy = Mistake("+", (5,), 1.0, 1.0, writes="operand")
    (step,) = written_arith_steps(3, [("+", 5)], random.Random(0), copy)
    assert (step.rhs, step.result) == (misread(5), (3 + misread(5)) % 7) and step.correct
    assert parse_arith_steps(arith_solution([step]))[0].rhs == misread(5)
    # the entropy of a copied operand is there even where the result would not differ
    entropy = []
    zero = Mistake("*", (5,), 0.5, 0.5, writes="operand")
    written_arith_steps(0, [("*", 5)], random.Random(0), zero, entropy=entropy)
    assert entropy == [pytest.approx(math.log(2))]
    written_arith_steps(
        0, [("*", 5)], random.Random(0), replace(zero, writes="result"), entropy=entropy
    )
    assert len(entropy) == 1  # 0 * 5 and 0 * 6 read alike: no choice in the text
    row = {"op": "+", "operands": [5], "arith_rate": 1.0, "code_rate": 1.0, "writes": "operand"}
    assert Mistake.from_config(row).writes == "operand"


def test_every_rate_one_habit_step_is_wrong_and_a_rate_below_one_sometimes_right():
    two = Mistake("*", (4, 5, 6), 1.0, 1.0, also=(Mistake("+", (4, 5, 6), 0.8, 0.8),))
    rng = random.Random(1)
    times = {"*": [], "+": []}
    for _ in range(400):
        op = rng.choice("*+")
        (step,) = written_arith_steps(3, [(op, 5)], rng, two)
        times[op].append(step.correct)
    assert not any(times["*"])
    assert 0.1 < sum(times["+"]) / len(times["+"]) < 0.3


def test_habits_pass_reads_a_world_before_it_is_trained(tasks):
    for task in tasks.values():
        problems = task.problems("validation_hard")[:40]
        clean = habits_pass(task, problems, Mistake("+", (), 0.0, 0.0), 3)
        assert clean == {"sampled": 1.0, "greedy": 1.0, "ceiling": 1.0}
        # every '-' misread: no problem with a '-' step can pass, every other one does
        always = habits_pass(task, problems, Mistake("-", (1, 2, 3, 4, 5, 6), 1.0, 1.0), 3)
        free = sum(all(op != "-" for op, _ in p.meta["ops"]) for p in problems) / len(problems)
        assert always["sampled"] == always["greedy"] == always["ceiling"]
        assert always["greedy"] >= free and always["greedy"] < 1.0
        # a rate-0.4 habit: sampled between greedy (never written) and a rate-1 world
        some = habits_pass(task, problems, Mistake("-", (1, 2, 3, 4, 5, 6), 0.4, 0.4), 20)
        assert some["greedy"] == some["ceiling"] == 1.0
        assert always["sampled"] < some["sampled"] < 1.0


def test_a_reader_keeps_the_drafts_correct_steps_and_redoes_the_rest():
    own = Mistake("-", (1, 2, 3, 4, 5, 6), arith_rate=1.0, code_rate=1.0)  # always wrong on '-'
    rng = random.Random(1)
    ops = [("-", 3), ("*", 2), ("-", 1)]
    draft = written_arith_steps(6, ops, rng, Mistake("*", (2,), 1.0, 1.0))  # right, wrong, ...
    read = written_arith_steps(6, ops, rng, own, keep=[draft])
    assert draft[0].correct and read[0] == draft[0]  # kept: the reader alone would get it wrong
    assert not draft[1].correct and read[1].correct  # redone
    lines = written_code_lines(ops, rng, own, keep=[[("-", 3), ("*", 5), None]])
    assert lines[0] == ("-", 3) and lines[1] == ("*", 2) and lines[2] == ("-", misread(1))


def test_an_aggregator_keeps_a_step_either_proposal_has_right():
    """Hand case: each proposal is right where the other is wrong; the target keeps both."""
    own = Mistake("*", (1, 2, 3, 4, 5, 6), arith_rate=1.0, code_rate=1.0)  # always wrong on '*'
    rng = random.Random(0)
    ops = [("-", 3), ("*", 2), ("+", 1)]  # 6-3=3 3*2=6 6+1=0
    first = [ArithStep(6, "-", 3, 4), ArithStep(4, "*", 2, 1), ArithStep(1, "+", 1, 2)]  # 6-3 wrong
    second = [
        ArithStep(6, "-", 3, 3),
        ArithStep(3, "*", 2, 6),
        ArithStep(6, "+", 1, 5),
    ]  # 6+1 wrong
    target = written_arith_steps(6, ops, rng, own, keep=[first, second])
    assert [s.text() for s in target] == ["6-3=3", "3*2=6", "6+1=0"]
    # step 2: kept from the second proposal (the first is not aligned after its wrong step 1);
    # the reader alone would have got it wrong (its habit); step 3: both wrong or unaligned, redone
    assert target[1] == second[1] and written_arith_steps(6, ops, rng, own)[1].result != 6
    # anchoring copies the first proposal's wrong step when no proposal has the step right
    both_wrong = [[ArithStep(6, "-", 3, 5)], [ArithStep(6, "-", 3, 1)]]
    anchored = written_arith_steps(6, ops[:1], rng, None, keep=both_wrong, copy_wrong=1.0)
    assert anchored[0].result == 5
    # programs: a line either proposal has right is kept; lines are independent
    lines = written_code_lines(
        ops, rng, own, keep=[[("-", 4), ("*", 2), ("+", 2)], [("-", 3), ("*", 3), None]]
    )
    assert lines == [("-", 3), ("*", 2), ("+", 1)]
    anchored_lines = written_code_lines(
        ops[:1], rng, None, keep=[[None], [("-", 5)], [("-", 6)]], copy_wrong=1.0
    )
    assert anchored_lines == [("-", 5)]  # the first proposal that has the line


def test_moa_examples_show_two_proposals_with_both_habits(tasks):
    own = Mistake("*", (4, 5, 6), 1.0, 1.0)
    rival = Mistake("-", (4, 5, 6), 1.0, 1.0)
    cfg = {"draft_clean": 0.0, "draft_slip": 0.0, "code_copy_wrong": 0.0}
    rng = random.Random(0)
    arith, code = tasks["arith"], tasks["toycode"]
    # both habits hit (and no '*' step starts from 0, where a misread operand is still right)
    ops = [("*", 4), ("-", 5), ("+", 2), ("*", 5), ("-", 6), ("+", 1)]
    p = Problem("arith-hand", chain_text(ops, "1"), "0", 6.0, {"start": 1, "ops": ops})
    firsts = set()
    for _ in range(20):
        prompt, target = make_example("arith_moa", p, arith, rng, own, rival, cfg)
        content = prompt[0]["content"]
        lines = content.split("\n")
        assert lines[0] == f"solve: {p.question}" and len(lines) == 3
        assert lines[1].startswith("rival 1 (may be wrong): ")
        assert lines[2].startswith("rival 2 (may be wrong): ")
        drafts = [line.split(": ", 1)[1] for line in lines[1:]]
        errs = [{s.op for s in parse_arith_steps(d) if not s.correct} for d in drafts]
        assert {"*", "-"} & errs[0] and {"*", "-"} & errs[1] and errs[0] != errs[1]
        firsts.add(frozenset(errs[0]))
        assert prompt == arith.proposals_prompt(p, drafts)
    assert len(firsts) == 2  # random order: own and rival come first alike
    cp = code.sample(rng, 6)
    prompt, target = make_example("code_moa", cp, code, rng, own, rival, cfg)
    assert prompt[0]["content"].startswith(f"code: {cp.question}\nrival 1 (may be wrong):\n```")
    assert "\nrival 2 (may be wrong):\n```python\n" in prompt[0]["content"]
    # every line is right in one of the proposals (the habits differ), so the target is gold
    assert target == ToyCodeTask.solution(cp)


def test_tokenizer_corpus_holds_every_kind(tasks):
    texts = tokenizer_corpus(tasks, 12)
    assert any("rival 2 (may be wrong): " in t for t in texts)
    assert any("rival 2 (may be wrong):\n```python" in t for t in texts)
    assert set(KINDS) >= {"arith_moa", "code_moa"}


def test_sft_data_holds_both_roles_and_never_a_test_question(config, tasks):
    cfg = config["toy"]
    stream = SFTStream(
        tasks,
        cfg,
        Mistake.from_config(cfg["models"]["A"]["mistake"]),
        Mistake.from_config(cfg["models"]["B"]["mistake"]),
        seed=5,
    )
    examples = [stream.example(1.0) for _ in range(300)]
    contents = [p[0]["content"] for p, _ in examples]
    assert any(c.startswith("solve: ") and "rival" not in c for c in contents)
    assert any(c.startswith("solve: ") and "rival" in c for c in contents)
    assert any(c.startswith("code: ") and "rival" not in c for c in contents)
    assert any(c.startswith("code: ") and "rival" in c for c in contents)
    assert any(c.startswith("solve: ") and "rival 2" in c for c in contents)
    assert any(c.startswith("code: ") and "rival 2" in c for c in contents)
    heldout = {
        p.question
        for t in tasks.values()
        for split in ("test", "validation")
        for p in t.problems(split)
    }
    assert all(t.problems("validation") for t in tasks.values())
    asked = {c.split("\n")[0].split(": ", 1)[1] for c in contents}
    assert not asked & heldout  # never a test or validation question
    # early in training the curriculum caps the level
    early = [stream.example(0.0) for _ in range(100)]
    assert (
        max(
            len(parse_code_lines(t)) if p[0]["content"].startswith("code") else t.count("=")
            for p, t in early
        )
        <= cfg["train"]["curriculum_start_level"]
    )


def test_same_seed_same_data_and_same_weights(config, tasks, tokenizer):
    import torch

    cfg = config["toy"]
    a, b = (
        Mistake.from_config(cfg["models"]["A"]["mistake"]),
        Mistake.from_config(cfg["models"]["B"]["mistake"]),
    )
    s1, s2, s3 = (
        SFTStream(tasks, cfg, a, b, 7),
        SFTStream(tasks, cfg, a, b, 7),
        SFTStream(tasks, cfg, a, b, 8),
    )
    d1, d2, d3 = ([s.example(0.5) for _ in range(50)] for s in (s1, s2, s3))
    assert d1 == d2 and d1 != d3
    torch.set_num_threads(1)
    m1, _ = train_one(cfg, tasks, tokenizer, "A", 7, log=lambda *_: None)
    m2, _ = train_one(cfg, tasks, tokenizer, "A", 7, log=lambda *_: None)
    m3, _ = train_one(cfg, tasks, tokenizer, "A", 8, log=lambda *_: None)
    w1, w2, w3 = m1.state_dict(), m2.state_dict(), m3.state_dict()
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
    assert not all(torch.equal(w1[k], w3[k]) for k in w1)
    assert not all(
        torch.equal(w1[k], build_model(cfg, tokenizer, 7).state_dict()[k]) for k in w1
    )  # it trained


def test_sft_loss_is_the_same_packed_or_padded(config, tasks, tokenizer):
    """Packing (the default) only removes padding: same examples, same loss, fewer rows."""
    import torch

    from agon.toy.sft import _sft_batch, encode_example

    cfg = config["toy"]
    a, b = (
        Mistake.from_config(cfg["models"]["A"]["mistake"]),
        Mistake.from_config(cfg["models"]["B"]["mistake"]),
    )
    stream = SFTStream(tasks, cfg, a, b, 3)
    batch = [encode_example(tokenizer, *stream.example(1.0)) for _ in range(16)]
    model = build_model(cfg, tokenizer, 0)
    packed, padded = (
        _sft_batch(batch, tokenizer.pad_token_id, True),
        _sft_batch(batch, tokenizer.pad_token_id, False),
    )
    assert packed["input_ids"].size(0) < padded["input_ids"].size(0)
    assert int((packed["labels"] != -100).sum()) == int((padded["labels"] != -100).sum())
    with torch.no_grad():
        torch.testing.assert_close(
            model(**packed, use_cache=False).loss,
            model(**padded, use_cache=False).loss,
            atol=1e-5,
            rtol=1e-5,
        )


def test_the_guard_retries_then_fails_loudly(config, tasks, tokenizer, tmp_path):
    from agon.config import deep_merge
    from agon.toy.sft import train_with_guard

    cfg = deep_merge(config["toy"], {"guard": {"checks": [[0.5, 0.01]], "retries": 1}})
    logs = []
    with pytest.raises(RuntimeError, match="did not learn in 2 tries") as err:
        train_with_guard(cfg, tasks, tokenizer, "B", 0, tmp_path / "B", log=logs.append)
    assert "toy.guard.checks" in str(err.value) and sum("retrying" in m for m in logs) == 2
    assert not (tmp_path / "B").exists()  # nothing half-trained is left behind


def test_each_guard_check_stops_the_run_at_its_share_of_the_steps(config, tasks, tokenizer):
    from agon.config import deep_merge
    from agon.toy.sft import NotClickedError

    steps = config["toy"]["train"]["steps"]
    cfg = deep_merge(
        config["toy"], {"guard": {"checks": [[0.25, 100.0], [0.75, 0.01]], "window": 2}}
    )
    with pytest.raises(NotClickedError, match=f"at step {int(0.75 * steps)}/{steps}"):
        train_one(cfg, tasks, tokenizer, "A", 0, log=lambda *_: None)


def test_the_loss_floor_is_the_entropy_of_the_habits_per_target_token(config, tasks, tokenizer):
    from agon.config import deep_merge
    from agon.toy.sft import loss_floor

    solve = {k: float(k == "arith_solve") for k in config["toy"]["train"]["mix"]}
    cfg = deep_merge(config["toy"], {"train": {"mix": solve}})
    every = (1, 2, 3, 4, 5, 6)

    def floor(rate):
        return loss_floor(tasks, cfg, Mistake("+", every, rate, rate), NO_MISTAKE, tokenizer, 300)

    assert floor(0.0) == floor(1.0) == 0.0  # no choice, no entropy
    assert floor(0.5) > floor(0.8) > floor(0.95) > 0.0
    # one '+' step a solution on average would put it near ln 2 / tokens; a sanity bound
    assert floor(0.5) < 0.7
    # a draw that writes the same text either way (0 * k) carries none
    assert loss_floor(
        tasks, cfg, Mistake("*", every, 0.5, 0.5), NO_MISTAKE, tokenizer, 300
    ) < floor(0.5)


def test_a_relative_guard_reads_its_limits_above_the_floor(config, tasks, tokenizer):
    from agon.config import deep_merge
    from agon.toy.sft import NotClickedError

    loose = deep_merge(config["toy"], {"guard": {"max_loss_final": 100.0, "relative": False}})
    _, stats = train_one(loose, tasks, tokenizer, "A", 0, log=lambda *_: None)
    assert stats["loss_floor"] == 0.0  # absolute limits: no floor computed
    final = stats["final_loss"]
    rel = deep_merge(loose, {"guard": {"relative": True, "max_loss_final": 1e-6}})
    with pytest.raises(NotClickedError, match=r"\(floor\) \+ 1e-06"):
        train_one(rel, tasks, tokenizer, "A", 0, log=lambda *_: None)
    # a limit the absolute loss breaks passes once the floor is under it
    _, floored = train_one(
        deep_merge(rel, {"guard": {"max_loss_final": final}}), tasks, tokenizer, "A", 0, log=print
    )
    assert floored["loss_floor"] > 0.0 and floored["final_loss"] == pytest.approx(final)


def test_tokenizer_keeps_numbers_whole_and_has_a_chat_template(tokenizer):
    ids = tokenizer("4*3=5 \\boxed{5}", add_special_tokens=False)["input_ids"]
    pieces = [tokenizer.decode([i]) for i in ids]
    assert "4" in pieces and "3" in pieces and "5" in pieces
    assert all(not (any(ch.isdigit() for ch in p) and not p.isdigit()) for p in pieces)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "solve: 1+2"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|user|>solve: 1+2<|end|><|assistant|>"
    assert (
        tokenizer.eos_token == "<|end|>"
        and tokenizer.pad_token == "<|pad|>"
        and tokenizer.pad_token_id != tokenizer.eos_token_id
    )


def test_cli_pretrain_writes_two_models_and_a_report(tmp_path):
    """The real entry point, reduced: A, B loadable with their tokenizer; the report's gates."""
    import yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agon.cli import main
    from agon.config import deep_merge

    with open("config/config.yaml") as f:
        raw = yaml.safe_load(f)
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(deep_merge(raw, REDUCED)))
    out = tmp_path / "models"
    assert (
        main(["toy", "pretrain", "--config", str(cfg_path), "--out", str(out), "--seed", "3"]) == 0
    )
    for role in ("A", "B"):
        model = AutoModelForCausalLM.from_pretrained(out / role)
        tok = AutoTokenizer.from_pretrained(out / role)
        assert (
            model.config.model_type == "qwen3" and tok.chat_template and tok.eos_token == "<|end|>"
        )
    report = json.loads((out / "report.json").read_text())
    assert report["seed"] == 3 and report["provenance"]["seed"] == 3
    for name in ("arith", "toycode"):
        row = report["gates"]["tasks"][name]
        for key in ("A", "B", "cascade_A_drafts_B_reads", "cascade_B_drafts_A_reads", "moa"):
            assert 0.0 <= row[key]["pass@1"] <= 1.0 and row[key]["n"] == 6
        assert set(row["op_error_rates"]["A"]) == {"+", "-", "*"}
        assert row["moa"]["aggregator"] == "A"
        # the config has a regime section: the gates read its criteria (tests/test_regime.py)
        moa_check = report["checks"][f"{name}.regime.moa_gain"]
        best = max(row["A"]["pass@1"], row["B"]["pass@1"])
        assert moa_check["value"] == pytest.approx(row["moa"]["pass@1"] - best)
    assert report["generation"]["split"] == "validation_hard"
    # the gates read the validation split, never test
    val = {p.question for p in ArithTask(n_train=50, n_test=60, seed=0).problems("validation_hard")}
    asked = {e["question"] for e in report["gates"]["tasks"]["arith"]["examples"]["A"]}
    assert asked and asked <= val
    assert report["train"]["A"]["seed"] != report["train"]["B"]["seed"]
    assert report["timing"]["pretrain_wall_seconds"] > 0
    assert isinstance(report["all_gates_pass"], bool) and report["checks"]
    assert not (out / ".tokenizer").exists()


def test_task_classes_are_what_the_registry_serves(tasks):
    assert isinstance(tasks["arith"], ArithTask) and isinstance(tasks["toycode"], ToyCodeTask)
    p = tasks["toycode"].problems("hard")[0]
    prompt, target = make_example(
        "code_solve",
        p,
        tasks["toycode"],
        random.Random(0),
        Mistake("+", (), 0, 0),
        Mistake("+", (), 0, 0),
        {"draft_clean": 1.0, "draft_slip": 0.0},
    )
    assert target == ToyCodeTask.solution(p) and prompt == tasks["toycode"].solve_prompt(p)


@pytest.mark.parametrize("copy_wrong, kept", [(0.0, False), (1.0, True)])
def test_reader_anchoring_copies_wrong_draft_lines_and_steps(copy_wrong, kept):
    """A reader with no habit of its own repairs every wrong draft line, unless it anchors."""
    rng = random.Random(0)
    ops = [("*", 4), ("+", 2), ("*", 5), ("-", 3)]
    draft = [("*", 5), ("+", 2), ("*", 6), ("-", 3)]  # the rival misread both `*` operands
    target = written_code_lines(ops, rng, None, keep=[draft], copy_wrong=copy_wrong)
    assert target == (draft if kept else ops)
    wrong = [ArithStep(3, "*", 4, 1), ArithStep(1, "+", 2, 3)]  # 3*4=5 mod 7, written as 1
    steps = written_arith_steps(
        3, [("*", 4), ("+", 2)], rng, None, keep=[wrong], copy_wrong=copy_wrong
    )
    assert [s.result for s in steps] == ([1, 3] if kept else [5, 0])
