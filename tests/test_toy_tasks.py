"""The toy tasks: seeded splits, prompts, and grading that rewards only a correct answer."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from agon.tasks import get_task
from agon.tasks.base import SPLITS, Problem, build_splits
from agon.toy.chain import apply_op, gold_arith_steps, parse_arith_steps, parse_chain
from agon.toy.tasks import ArithTask
from agon.toy.toycode import (
    TRACE,
    ToyCodeTask,
    code_line,
    code_program,
    parse_code_lines,
    reference_output,
)


def test_arith_splits_are_seeded_disjoint_and_hard_is_top_levels():
    a1 = ArithTask(n_train=300, n_test=120, levels=6, hard_min_level=5, seed=3)
    a2 = ArithTask(n_train=300, n_test=120, levels=6, hard_min_level=5, seed=3)
    assert [p.question for p in a1.problems("train")] == [p.question for p in a2.problems("train")]
    assert [p.id for p in a1.problems("test")] != [
        p.id for p in ArithTask(n_test=120, seed=4).problems("test")
    ]
    test_q = {p.question for p in a1.problems("test")}
    assert len(test_q) == 120  # test questions are unique
    assert not test_q & {p.question for p in a1.problems("train")}
    hard = a1.problems("hard")
    assert hard and all(p.difficulty >= 5 for p in hard)
    assert {p.id for p in hard} <= {p.id for p in a1.problems("test")}
    assert all(p.difficulty >= 5 for p in a1.problems("train_hard"))
    # the test split does not depend on n_train
    assert [p.id for p in ArithTask(n_train=10, n_test=120, seed=3).problems("test")] == [
        p.id for p in a1.problems("test")
    ]


def _sha(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


@pytest.mark.parametrize("cls", [ArithTask, ToyCodeTask])
def test_validation_split_is_seeded_and_disjoint_from_test_and_train(cls):
    task = cls(n_train=400, n_test=120, n_validation=80, seed=3)
    train, val, test = (task.problems(s) for s in ("train", "validation", "test"))
    val_q, test_q = {p.question for p in val}, {p.question for p in test}
    assert len(val) == 80 and len(val_q) == 80  # validation questions are unique
    assert not val_q & test_q
    assert not {p.question for p in train} & (val_q | test_q)
    assert task.heldout_questions() == val_q | test_q
    assert [p.id for p in task.problems("validation_hard")] == [
        p.id for p in val if p.difficulty >= task.hard_min_level
    ]
    again = cls(n_train=10, n_test=120, n_validation=80, seed=3)
    assert [p.id for p in again.problems("validation")] == [p.id for p in val]  # not on n_train
    other = cls(n_train=10, n_test=120, n_validation=80, seed=4)
    assert [p.id for p in other.problems("validation")] != [p.id for p in val]
    # the test split does not depend on n_validation
    assert [p.id for p in cls(n_train=0, n_test=120, n_validation=0, seed=3).problems("test")] == [
        p.id for p in test
    ]


@pytest.mark.parametrize(
    "task, test_sha, hard_sha",
    [
        (ArithTask(), "b0a8b7d8a4db3ddc", "6a18ba58d72e3dc6"),
        (ToyCodeTask(), "454834237edce064", "d488d12165468a7e"),
        (ArithTask(n_test=120, seed=3), "b36a7f52303fb56c", "4ad51f1ce02aeaf2"),
    ],
)
def test_test_split_is_what_it_was_before_the_validation_split(task, test_sha, hard_sha):
    """Ids hashed before the validation split existed: adding it left test and hard alone."""
    assert _sha([p.id for p in task.problems("test")]) == test_sha
    assert _sha([p.id for p in task.problems("hard")]) == hard_sha


def test_build_splits_makes_the_six_splits_and_refuses_a_leaked_validation_problem():
    def prob(i: int, level: int) -> Problem:
        return Problem(f"p{i}", f"q{i}", "0", float(level))

    train, val, test = [prob(0, 1), prob(1, 5)], [prob(2, 5), prob(3, 1)], [prob(4, 6)]
    splits = build_splits(train, val, test, lambda p: p.difficulty >= 5)
    assert tuple(splits) == SPLITS
    assert [p.id for p in splits["hard"]] == ["p4"]
    assert [p.id for p in splits["train_hard"]] == ["p1"]
    assert [p.id for p in splits["validation_hard"]] == ["p2"]
    with pytest.raises(ValueError, match="validation and test"):
        build_splits(train, val, [val[0]], lambda p: True)
    with pytest.raises(ValueError, match="validation and train"):
        build_splits([val[1]], val, test, lambda p: True)


def test_arith_gold_answer_matches_left_to_right_mod7():
    task = ArithTask(n_train=0, n_test=50, seed=1)
    for p in task.problems("test"):
        head, ops = parse_chain(p.question)
        value = int(head)
        for op, k in ops:
            value = apply_op(value, op, k)
        assert p.answer == str(value)
        assert len(ops) == p.difficulty
        sol = task.solution(p)
        assert sol.endswith(f"\\boxed{{{value}}}")
        assert all(s.correct for s in parse_arith_steps(sol))


def test_arith_prompts_are_short_and_reader_prompt_holds_problem_and_draft():
    task = ArithTask(n_train=0, n_test=5)
    p = task.problems("test")[0]
    assert task.solve_prompt(p) == [{"role": "user", "content": f"solve: {p.question}"}]
    (msg,) = task.reader_prompt(p, "1+2=3 \\boxed{3}")
    assert (
        p.question in msg["content"]
        and "1+2=3 \\boxed{3}" in msg["content"]
        and "rival" in msg["content"]
    )


def test_proposals_prompts_number_the_rivals_compactly():
    arith, code = ArithTask(n_train=0, n_test=5), ToyCodeTask(n_train=0, n_test=5)
    p = arith.problems("test")[0]
    (msg,) = arith.proposals_prompt(p, ["1+2=3 \\boxed{3}", " 1+2=4 \\boxed{4}\n"])
    assert msg == {
        "role": "user",
        "content": f"solve: {p.question}\nrival 1 (may be wrong): 1+2=3 \\boxed{{3}}"
        "\nrival 2 (may be wrong): 1+2=4 \\boxed{4}",
    }
    assert arith.proposals_prompt(p, ["x"]) == arith.reader_prompt(p, "x")  # one: a read
    c = code.problems("test")[0]
    prog1, prog2 = code.solution(c), "```python\nprint(0)\n```"
    (msg,) = code.proposals_prompt(c, [prog1, prog2])
    assert msg["content"] == (
        f"code: {c.question}\nrival 1 (may be wrong):\n{prog1}\nrival 2 (may be wrong):\n{prog2}"
    )
    with pytest.raises(ValueError, match="at least one"):
        arith.proposals_prompt(p, [])


def test_arith_grades_through_the_math_pool():
    task = ArithTask(n_train=0, n_test=6, grading_workers=1)
    try:
        probs = task.problems("test")[:3]
        wrong = str((int(probs[1].answer) + 1) % 7)
        verdicts = task.grade(
            probs, [task.solution(probs[0]), f"\\boxed{{{wrong}}}", "no box here"]
        )
    finally:
        task.close()
    assert [v.correct for v in verdicts] == [True, False, False]
    assert verdicts[2].status == "no_answer"


def test_registry_builds_both_tasks_from_config_params():
    t = get_task("arith", n_train=10, n_test=20, levels=4, hard_min_level=3, seed=2)
    assert isinstance(t, ArithTask) and max(p.difficulty for p in t.problems("test")) <= 4
    c = get_task("toycode", n_train=10, n_test=20, seed=2)
    assert isinstance(c, ToyCodeTask) and c.kind == "code"
    with pytest.raises(ValueError, match="hard_min_level"):
        get_task("arith", levels=3, hard_min_level=5)


def test_toycode_tests_match_the_reference_and_inputs_are_hidden():
    task = ToyCodeTask(n_train=0, n_test=30, n_tests=4, seed=5)
    for p in task.problems("test"):
        tests = json.loads(p.answer)
        assert len(tests) == 4
        assert all(out == reference_output(p.meta["ops"], inp) for inp, out in tests)
        assert all(inp.strip() not in task.solve_prompt(p)[0]["content"] for inp, _ in tests)
        assert [(op, k) for op, k in parse_code_lines(task.solution(p))] == [
            tuple(o) for o in p.meta["ops"]
        ]


def test_toycode_grading_passes_only_a_program_that_computes_the_chain():
    task = ToyCodeTask(n_train=0, n_test=40, seed=7, grading_timeout_s=2.0)
    p = task.problems("hard")[0]
    gold = task.solution(p)
    (_inp, out), *_ = json.loads(p.answer)
    op, k = p.meta["ops"][0]
    off_by_one = gold.replace(f" x=(x{op}{k})%7", f" x=(x{op}{k % 6 + 1})%7", 1)
    completions = [
        gold,
        "Here you go:\n" + gold + "\nDone.",  # prose around the block is fine
        f"```python\nprint({out})\n```",  # a constant right for one hidden test only
        "```python\n" + p.question + "\n```",  # the prompt copied
        off_by_one,
        "I cannot write code.",
        "```python\nwhile True:\n    pass\n```",  # hostile: never ends
        gold[: len(gold) // 2],  # truncated generation
    ]
    try:
        verdicts = task.grade([p] * len(completions), completions)
    finally:
        task.close()
    assert [v.correct for v in verdicts] == [True, True, False, False, False, False, False, False]
    assert verdicts[5].status == "no_answer"
    assert verdicts[6].seconds < 10


def test_gold_steps_continue_from_each_result():
    steps = gold_arith_steps(4, [("*", 3), ("+", 2), ("-", 5)])
    assert [s.text() for s in steps] == ["4*3=5", "5+2=0", "0-5=2"]
    rng = random.Random(0)
    assert ArithTask(n_train=0, n_test=1).sample(rng, 3).difficulty == 3


def test_trace_answers_box_every_result_and_are_graded_exactly():
    """``answer: trace``: the gold answer is every step's result in order; a completion must
    box exactly that string (a dropped leading 0 is a dropped step, not padding), and the
    questions and splits are the final-answer task's."""
    final = ArithTask(n_train=30, n_test=60, answer="final")
    trace = ArithTask(n_train=30, n_test=60, answer="trace")
    try:
        for f, t in zip(final.problems("test"), trace.problems("test")):
            assert f.question == t.question and f.id == t.id
            steps = gold_arith_steps(t.meta["start"], t.meta["ops"])
            assert t.answer == "".join(str(s.result) for s in steps) and f.answer == t.answer[-1]
            assert ArithTask.solution(t).endswith(f"\\boxed{{{t.answer}}}")
        p = next(p for p in trace.problems("hard") if p.answer.startswith("0"))
        gold = ArithTask.solution(p)
        wrong = gold.replace(f"{{{p.answer}}}", f"{{{p.answer[1:]}}}")
        last = gold.replace(f"{{{p.answer}}}", f"{{{p.answer[-1]}}}")
        verdicts = trace.grade([p] * 4, [gold, wrong, last, "no box"])
        assert [v.correct for v in verdicts] == [True, False, False, False]
        assert verdicts[3].status == "no_answer"
    finally:
        final.close()
        trace.close()


def test_an_unknown_answer_kind_is_refused():
    with pytest.raises(ValueError, match="answer"):
        ArithTask(n_train=10, n_test=10, answer="sum")
    from agon.tasks import check_task_params

    with pytest.raises(ValueError, match="params.answer"):
        check_task_params("arith", {"answer": "sum"})
    check_task_params("arith", {"answer": "trace"})


def test_toycode_trace_checks_every_line_where_the_sum_passes_compensating_lines():
    """``answer: trace``: each program line prints its result, then the sum is printed; the
    hidden tests hold the whole printout. Two wrong lines that cancel (``+`` and a later ``-``,
    each written one too high) give the right map, so a final-answer test passes them; a trace
    test does not. A program that prints only the sum fails a trace problem. The questions and
    splits are the final-answer task's."""
    final = ToyCodeTask(n_train=0, n_test=80, seed=3, grading_timeout_s=2.0)
    trace = ToyCodeTask(n_train=0, n_test=80, seed=3, grading_timeout_s=2.0, answer="trace")
    try:
        for f, t in zip(final.problems("test"), trace.problems("test")):
            assert (f.question, f.id, f.meta["ops"]) == (t.question, t.id, t.meta["ops"])
            for (fi, fo), (ti, to) in zip(f.meta["tests"], t.meta["tests"]):
                ops = t.meta["ops"]
                assert fi == ti and to == reference_output(ops, ti, "trace")
                assert to.split()[-1] == fo
                assert len(to.split()) == len(ti.split()) * len(ops) + 1
        # a chain that opens `+a -b` with a, b < 6: write both one too high, the map unchanged
        p_f, p_t = next(
            (f, t)
            for f, t in zip(final.problems("test"), trace.problems("test"))
            if [o for o, _ in t.meta["ops"][:2]] == ["+", "-"]
            and max(k for _, k in t.meta["ops"][:2]) < 6
        )
        (_, ka), (_, kb), *rest = p_t.meta["ops"]
        cancel = [("+", ka + 1), ("-", kb + 1), *rest]
        both = [
            code_program([code_line(o, k, answer=kind) for o, k in cancel])
            for kind in ("final", "trace")
        ]
        assert [v.correct for v in final.grade([p_f], both[:1])] == [True]
        assert [v.correct for v in trace.grade([p_t], both[1:])] == [False]
        gold_t, gold_f = ToyCodeTask.solution(p_t), ToyCodeTask.solution(p_f)
        assert gold_t.count(TRACE) == len(p_t.meta["ops"]) and TRACE not in gold_f
        assert parse_code_lines(gold_t) == parse_code_lines(gold_f)
        verdicts = trace.grade([p_t] * 3, [gold_t, gold_f, trace.wrong_draft(p_t, 0)])
        assert [v.correct for v in verdicts] == [True, False, False]
    finally:
        final.close()
        trace.close()
    with pytest.raises(ValueError, match="answer"):
        ToyCodeTask(n_train=0, n_test=1, answer="sum")
