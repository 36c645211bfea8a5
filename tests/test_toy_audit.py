"""The toy audit: take-up of right draft steps on the reader's always-wrong habits, and right
answers with wrong work, counted by hand on written solutions and through a real evaluation."""

from __future__ import annotations

import json
import random
import re

import pytest
from tiny_models import ScriptedEngine

from agon.engines import SamplingParams
from agon.evaluation import evaluate
from agon.systems import cascade, single
from agon.tasks.base import Problem
from agon.toy.audit import (
    KEYS,
    audit,
    draft_counts,
    gives_answer,
    habit_steps,
    oracle_right,
    reader_mistake,
    wrong_work,
)
from agon.toy.chain import ArithStep, apply_op, arith_solution, gold_arith_steps
from agon.toy.mistake import Mistake
from agon.toy.tasks import ArithTask
from agon.toy.toycode import ToyCodeTask, code_line, code_program, reference_output

# a reader that always misreads `*` by 4, 5 or 6 (rate 1), and `+ 1` at rate 0.8 (not counted)
READER = Mistake("*", (4, 5, 6), 1.0, 1.0, also=(Mistake("+", (1,), 0.8, 0.8),))


def _problem(start, ops, task="arith") -> Problem:
    return Problem(id="p", question="q", answer="", meta={"start": start, "ops": ops})


def _steps(start, ops, wrong=()) -> list[ArithStep]:
    """The gold steps with the results of the steps in ``wrong`` off by one."""
    out, value = [], start
    for i, (op, k) in enumerate(ops):
        result = apply_op(value, op, k)
        if i in wrong:
            result = (result + 1) % 7
        out.append(ArithStep(value, op, k, result))
        value = result
    return out


def test_take_up_counts_right_draft_steps_on_the_readers_always_wrong_habits():
    ops = [("*", 4), ("+", 1), ("*", 5), ("-", 2)]
    p = _problem(3, ops)
    right = arith_solution(_steps(3, ops))
    # every habit step (the two `*`) shown right and aligned; the reader took both
    assert habit_steps("arith", p, right, right, READER) == (2, 2)
    # the reader wrote its habit at step 0, so step 2 no longer starts where the draft's does
    own = arith_solution(_steps(3, ops, wrong={0}))
    assert habit_steps("arith", p, right, own, READER) == (1, 0)
    # a draft wrong at step 0 shows no right habit step there; step 2 is then unaligned too
    assert habit_steps("arith", p, arith_solution(_steps(3, ops, wrong={0})), right, READER) == (
        0,
        0,
    )
    # `+ 1` is a rate-0.8 habit: never counted; a `*` from 0 is right even when misread
    zero = [("*", 4), ("+", 1)]
    right = arith_solution(_steps(0, zero))
    assert habit_steps("arith", _problem(0, zero), right, right, READER) == (0, 0)


def test_take_up_on_program_lines():
    ops = [("*", 4), ("-", 2), ("*", 6)]
    p = _problem(None, ops, "toycode")
    draft = code_program([code_line(op, k) for op, k in ops])
    took_one = code_program([code_line("*", 4), code_line("-", 2, "complement"), code_line("*", 1)])
    assert habit_steps("toycode", p, draft, draft, READER) == (2, 2)
    assert habit_steps("toycode", p, draft, took_one, READER) == (2, 1)
    wrong_draft = code_program([code_line("*", 5), code_line("-", 2), code_line("*", 6)])
    assert habit_steps("toycode", p, wrong_draft, draft, READER) == (1, 1)


def test_a_draft_without_an_answer_the_task_could_grade_is_counted_per_cascade_sample():
    """What a sabotaging drafter writes (seen in a trained arith drafter's drafts): symbols
    with no boxed answer, or no program; a wrong but complete draft still gives an answer."""
    ops = [("*", 4), ("-", 2)]
    right = arith_solution(_steps(3, ops))
    wrong = arith_solution(_steps(3, ops, wrong={1}))
    assert gives_answer("arith", right) and gives_answer("arith", wrong)
    assert not gives_answer("arith", "5******+*5****3*3616}")
    program = code_program([code_line(op, k) for op, k in ops])
    assert gives_answer("toycode", program)
    assert not gives_answer("toycode", "x=int(input())\nx=(x*3)%7")  # no fenced program
    records = [
        {"drafts": [right]},
        {"drafts": ["5******+*5****3*3616}"]},
        {"drafts": [wrong]},
        {"drafts": ["***", right]},  # MoA's proposals: not a cascade's draft
        {"completion": right},  # a single model: no draft
    ]
    assert draft_counts("arith", records) == (3, 1)


def test_wrong_work_is_any_departure_from_the_question():
    ops = [("+", 3), ("*", 2), ("-", 1)]
    p = _problem(4, ops)
    assert not wrong_work("arith", p, arith_solution(_steps(4, ops)))
    assert wrong_work("arith", p, arith_solution(_steps(4, ops, wrong={1})))
    assert wrong_work("arith", p, arith_solution(_steps(4, ops)[:2]))  # a step missing
    # two compensating errors: the final answer is right, the work is not
    two = _steps(4, ops, wrong={0})
    two[1] = ArithStep(two[1].lhs, "*", 2, apply_op(4 + 3, "*", 2))
    assert wrong_work("arith", p, arith_solution(two))
    assert not wrong_work(
        "toycode", _problem(None, ops), code_program([code_line(o, k) for o, k in ops])
    )
    assert wrong_work(
        "toycode", _problem(None, ops), code_program([code_line("+", 3), code_line("*", 2)])
    )


def _right_with_wrong_step(problem) -> str:
    """A final-answer solution right by luck: a wrong first step, and a last step that lands
    on the right answer anyway (its own result wrong for its operands)."""
    steps = gold_arith_steps(problem.meta["start"], problem.meta["ops"])
    steps[0] = ArithStep(steps[0].lhs, steps[0].op, steps[0].rhs, (steps[0].result + 1) % 7)
    return arith_solution(steps)


@pytest.mark.parametrize("answer", ["final", "trace"])
def test_an_evaluation_summary_carries_the_audit(tmp_path, answer):
    """A real evaluation of a cascade on arith: the drafter writes the gold solution, the
    reader copies it on every other problem and writes a lucky one (wrong first step, right
    final result) on the others. Under final answers the lucky ones count as right with wrong work;
    under trace answers they are wrong."""
    task = ArithTask(n_train=30, n_test=60, answer=answer)
    problems = task.problems("hard")[:6]
    by_question = {p.question: p for p in problems}

    def problem_of(text):
        return by_question[re.search(r"solve: (\S+)", text).group(1)]

    drafter = ScriptedEngine(lambda text, j: ArithTask.solution(problem_of(text)))
    lucky = {p.id for p in problems[::2]}

    def read(text, j):
        p = problem_of(text)
        return _right_with_wrong_step(p) if p.id in lucky else ArithTask.solution(p)

    reader = ScriptedEngine(read)
    mistake = Mistake("*", tuple(range(1, 7)), 1.0, 1.0)
    summary = _audited(cascade(drafter, reader), task, problems, tmp_path, 2, mistake)
    records = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    got = summary["audit"]
    assert got == json.loads((tmp_path / "summary.json").read_text())["audit"]
    assert got["right"] == sum(r["correct"] is True for r in records)
    right_lucky = sum(r["correct"] is True and r["problem_id"] in lucky for r in records)
    assert got["right_with_wrong_work"] == right_lucky
    assert (right_lucky > 0) == (answer == "final") and got["right"] > right_lucky
    # every `*` step of a gold draft from a non-zero value is a habit step, in both samples;
    # the lucky reader wrote step 0 wrong (and nothing else: its later steps are the gold's)
    star = {
        p.id: [
            i for i, ((op, _), s) in enumerate(zip(p.meta["ops"], gold(p))) if op == "*" and s.lhs
        ]
        for p in problems
    }
    assert got["habit_steps"] == 2 * sum(map(len, star.values()))
    missed = sum(0 in star[i] for i in lucky)
    assert got["habit_steps_taken"] == got["habit_steps"] - 2 * missed
    assert got["reads"] == len(records) == got["oracle_right"]  # gold drafts: all kept


def _audited(system, task, problems, out, n, reader):
    """A real evaluation of ``system`` on arith ``problems`` (``n`` samples each) with the
    audit of ``reader``'s habits; its summary. Closes ``task``."""
    try:
        return evaluate(
            system,
            task,
            problems,
            out,
            n=n,
            sampling=SamplingParams(seed=0),
            n_boot=20,
            progress=False,
            audit=lambda records, by_id: audit("arith", by_id, records, reader),
        )
    finally:
        task.close()


def gold(p):
    return gold_arith_steps(p.meta["start"], p.meta["ops"])


def test_a_single_model_counts_no_habit_steps_and_rows_map_to_models(tmp_path):
    task = ArithTask(n_train=30, n_test=60)
    problems = task.problems("hard")[:3]
    engine = ScriptedEngine(lambda text, j: "\\boxed{1}")
    summary = _audited(single(engine), task, problems, tmp_path, 1, READER)
    assert summary["audit"]["habit_steps"] == 0
    row = {"op": "-", "operands": [4], "arith_rate": 1.0, "code_rate": 0.0}
    config = {"toy": {"models": {"B": {"mistake": row}}}}
    assert reader_mistake(config, "b").op == "-" and reader_mistake(config, "a") is None
    assert reader_mistake({}, "b") is None


def test_moa_samples_are_not_read_as_a_cascades():
    """MoA's record holds its layers' proposals (a list per layer), not one draft text: the
    audit counts its answers' luck and no take-up."""
    ops = [("*", 4), ("+", 1)]
    p = _problem(3, ops)
    right = arith_solution(_steps(3, ops))
    record = {"problem_id": "p", "correct": True, "completion": right, "drafts": [[right, right]]}
    got = audit("arith", {"p": p}, [record], READER)
    assert got == dict.fromkeys(KEYS, 0) | {"right": 1}


def test_the_oracle_reader_keeps_right_steps_and_does_the_rest_with_its_habits():
    """A gold draft: the oracle keeps every step and is right. A draft wrong at its one `*`
    step from a non-zero value: the oracle writes that step itself, with a rate-1 habit there,
    and is wrong; without the habit, right. Program lines alike, on the hidden tests."""
    task = ArithTask(n_train=30, n_test=60, answer="trace")
    code = ToyCodeTask(n_train=30, n_test=60)
    try:
        p = next(
            p
            for p in task.problems("hard")
            if sum(op == "*" and s.lhs for (op, _), s in zip(p.meta["ops"], gold(p))) == 1
        )
        rng = random.Random(0)
        gold_text = ArithTask.solution(p)
        star = next(i for i, (op, _) in enumerate(p.meta["ops"]) if op == "*")
        wrong = gold(p)
        bad = ArithStep(wrong[star].lhs, "*", wrong[star].rhs, (wrong[star].result + 1) % 7)
        wrong_text = arith_solution([*wrong[:star], bad], answer="trace")
        every = Mistake("*", tuple(range(1, 7)), 1.0, 1.0)
        none = Mistake("*", (), 0.0, 0.0)
        assert oracle_right("arith", p, gold_text, every, rng)
        if wrong[star].lhs:
            assert not oracle_right("arith", p, wrong_text, every, rng)
        assert oracle_right("arith", p, wrong_text, none, rng)
        q = code.problems("hard")[0]
        right = ToyCodeTask.solution(q)
        assert oracle_right("toycode", q, right, every, rng)
        assert oracle_right("toycode", q, "no program", none, rng)
        if any(op == "*" for op, _ in q.meta["ops"]):
            assert not oracle_right("toycode", q, "no program", every, rng)
    finally:
        task.close()
        code.close()


def test_a_trace_program_world_leaves_a_habit_writer_almost_no_luck():
    """In a final-answer toycode world a habit writer's wrong `+` and `-` lines cancel, so many
    of its right programs hold wrong lines; printing every line's result (``answer: trace``)
    leaves almost none (a wrong line that prints the right value on every hidden input)."""
    from agon.toy.sft_data import program_text, written_code_lines

    writer = Mistake("+", (1, 2, 3), 0.0, 0.8, also=(Mistake("-", (2, 3, 4), 0.0, 0.8),))
    shares = {}
    for kind in ("final", "trace"):
        task = ToyCodeTask(n_train=0, n_test=300, seed=1, answer=kind)
        rng, right, lucky = random.Random(0), 0, 0
        for p in task.problems("hard"):
            for _ in range(4):
                lines = written_code_lines(p.meta["ops"], rng, writer)
                program = program_text(lines, answer=kind)
                if all(reference_output(lines, i, kind) == o for i, o in p.meta["tests"]):
                    right += 1
                    lucky += wrong_work("toycode", p, program)
        shares[kind] = lucky / right
    assert shares["final"] > 0.2 and shares["trace"] < 0.02, shares


def test_a_duel_steps_take_up_sums_every_read_and_habits_come_from_the_pretraining_report(
    tmp_path,
):
    """What the duel logs of a toy reader's take-up is :func:`habit_steps` summed over every
    read of every draft; the reader's habits are those its pretraining report says it was
    trained with (none for a model without one)."""
    from agon.toy.audit import model_habits, rollout_take_up

    ops = [("*", 4), ("+", 1), ("*", 5), ("-", 2)]
    p = _problem(3, ops)
    right = arith_solution(_steps(3, ops))
    own = arith_solution(_steps(3, ops, wrong={0}))
    reads = [[[right, own], [own, own]]]
    expected = [
        habit_steps("arith", p, d, r, READER) for d, rs in zip([right, own], reads[0]) for r in rs
    ]
    assert (
        rollout_take_up("arith", [p], [[right, own]], reads, READER)
        == tuple(map(sum, zip(*expected)))
        == (2 + 1, 2 + 0)
    )

    pair = tmp_path / "seed0"
    (pair / "A").mkdir(parents=True)
    assert model_habits(pair / "A") is None  # no report beside it
    mistake = {"op": "*", "operands": [4, 5, 6], "arith_rate": 1.0, "code_rate": 1.0}
    report = {"provenance": {"config": {"toy": {"models": {"A": {"mistake": mistake}}}}}}
    (pair / "report.json").write_text(json.dumps(report))
    assert model_habits(pair / "A") == Mistake.from_config(mistake)
    assert model_habits(pair / "B") is None  # the report names no B
    (pair / "report.json").write_text("{not json")
    assert model_habits(pair / "A") is None
