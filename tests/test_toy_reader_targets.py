"""toy.reader.targets: read and MoA examples whose targets ignore the drafts (``own``), beside
today's targets that keep a draft's correct steps (``draft``, also what no key means)."""

from __future__ import annotations

import random

import pytest

from agon.config import ConfigError, load_config
from agon.toy.mistake import Mistake
from agon.toy.pretrain import make_tasks
from agon.toy.sft_data import make_example, reader_targets
from agon.toy.tasks import ArithTask
from agon.toy.toycode import ToyCodeTask

READ_KINDS = ("arith_read", "arith_moa", "code_read", "code_moa")
# a writer who misreads every operand of `*`, every time: its own work is wrong on a `*` step
HABIT = Mistake("*", (1, 2, 3, 4, 5, 6), 1.0, 1.0)
NONE = Mistake("+", (), 0.0, 0.0)


@pytest.fixture(scope="module")
def tasks():
    made = make_tasks({"arith": {"n_train": 50, "n_test": 60}, "toycode": {"n_train": 50}})
    yield made
    for t in made.values():
        t.close()


def _gold(task, problem) -> str:
    return (ArithTask if task.name == "arith" else ToyCodeTask).solution(problem)


def _examples(tasks, kind, mode, n=60, reader=None):
    """(problem, prompt, target) of ``n`` examples of ``kind`` with clean drafts, read by a
    model with :data:`HABIT`, each from its own seeded rng."""
    task = tasks["arith" if kind.startswith("arith") else "toycode"]
    cfg = {"draft_clean": 1.0, "draft_slip": 0.0, **(reader or {})}
    if mode is not None:
        cfg["targets"] = mode
    out = []
    for i in range(n):
        problem = task.sample(random.Random(f"p{i}"), task.levels)
        prompt, target = make_example(kind, problem, task, random.Random(i), HABIT, NONE, cfg)
        out.append((problem, prompt, target))
    return task, out


def _has_star(problem) -> bool:
    """Whether the habit changes the answer: a `*` step (arith: one from a non-zero value,
    where misreading the operand changes the result mod 7)."""
    value = problem.meta.get("start")
    for op, k in problem.meta["ops"]:
        if op == "*" and (value is None or value != 0):
            return True
        if value is not None:
            value = {"+": value + k, "-": value - k, "*": value * k}[op] % 7
    return False


@pytest.mark.parametrize("kind", READ_KINDS)
def test_own_targets_are_the_readers_own_work_whatever_the_drafts(tasks, kind):
    """Every draft is right: a `draft` target keeps them and is right; an `own` target is the
    reader's own work, wrong on every `*` step its habit reaches, with the same prompt."""
    task, copied = _examples(tasks, kind, "draft")
    _, own = _examples(tasks, kind, "own")
    starred = [i for i, (p, _, _) in enumerate(copied) if _has_star(p)]
    assert starred, "no problem with a `*` step: the check below says nothing"
    for (p, prompt_d, target_d), (_, prompt_o, _) in zip(copied, own):
        assert prompt_o == prompt_d  # the drafts are drawn and shown the same way
        assert target_d == _gold(task, p)
    for i in starred:
        assert own[i][2] != _gold(task, own[i][0])


@pytest.mark.parametrize("kind", READ_KINDS)
def test_own_targets_never_copy_a_wrong_draft(tasks, kind):
    """Drafts with the rival's habit, readers taught to anchor (copy_wrong 1): `draft` targets
    copy wrong steps, `own` targets of a reader without a habit are always right."""
    cfg = {"draft_clean": 0.0, "draft_slip": 0.3, "arith_copy_wrong": 1.0, "code_copy_wrong": 1.0}
    wrong = _wrong_targets(tasks, kind, cfg, ("draft", "own"))
    assert wrong["draft"] > 0 and wrong["own"] == 0


def _wrong_targets(tasks, kind, cfg, modes) -> dict[str, int]:
    """Per mode, how many of 60 targets of ``kind`` are not the gold solution: a reader
    without a habit reads drafts written with :data:`HABIT` (and ``cfg``'s slips)."""
    task = tasks["arith" if kind.startswith("arith") else "toycode"]
    wrong = dict.fromkeys(modes, 0)
    for mode in modes:
        for i in range(60):
            problem = task.sample(random.Random(f"p{i}"), task.levels)
            _, target = make_example(
                kind, problem, task, random.Random(i), NONE, HABIT, {**cfg, "targets": mode}
            )
            wrong[mode] += target != _gold(task, problem)
    return wrong


@pytest.mark.parametrize("kind", ("arith_solve", *READ_KINDS, "code_solve"))
def test_no_key_is_todays_draft_targets(tasks, kind):
    task, absent = _examples(tasks, kind, None, n=20, reader={"arith_copy_wrong": 0.5})
    _, draft = _examples(tasks, kind, "draft", n=20, reader={"arith_copy_wrong": 0.5})
    assert absent == draft


def test_an_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="toy.reader.targets"):
        reader_targets({"targets": "mixed"})
    raw = (
        "families: [{name: toy, toy: true, model_a: {model: a}, model_b: {model: b}}]\n"
        "tasks: [{name: arith}]\nmethods: [base]\ntoy: {reader: {targets: mixed}}\n"
    )
    (tmp_path / "c.yaml").write_text(raw)
    with pytest.raises(ConfigError, match="targets"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text(raw.replace("{targets: mixed}", "{draft_clean: 0.2}"))
    assert "targets" not in load_config(tmp_path / "d.yaml")["toy"]["reader"]  # no default


# ----------------------------------------------------------------------------- follow


def _habit_steps_right(task, kind, examples) -> tuple[int, int]:
    """(the `*` steps of the targets that the drafts show right and aligned, of them written
    right): on a `*` step the reader's own work is always wrong (:data:`HABIT`), so a right
    one was taken from the draft."""
    from agon.toy.chain import parse_arith_steps
    from agon.toy.toycode import parse_code_lines, same_line

    seen = right = 0
    for problem, _, target in examples:
        ops = problem.meta["ops"]
        if kind.startswith("arith"):
            steps = parse_arith_steps(target)
            value = problem.meta["start"]
            for step, (op, _) in zip(steps, ops):
                if op == "*" and value != 0:
                    seen += 1
                    right += step.correct
                    if not step.correct:
                        break  # the draft's next steps are no longer aligned
                value = step.result
        else:
            for line, (op, k) in zip(parse_code_lines(target), ops):
                if op == "*":
                    seen += 1
                    right += same_line(line, op, k)
    return seen, right


@pytest.mark.parametrize("kind", READ_KINDS)
def test_follow_takes_aligned_draft_steps_at_its_rate(tasks, kind):
    """Clean drafts, a reader whose own `*` steps are always wrong: under `follow` it writes a
    `*` step right about `follow` of the time (taken from the draft), never at 0, always at 1."""
    rates = {}
    for follow in (0.0, 0.3, 1.0):
        task, made = _examples(tasks, kind, "follow", n=150, reader={"follow": follow})
        seen, right = _habit_steps_right(task, kind, made)
        assert seen > 50, "too few `*` steps: the rate below says nothing"
        rates[follow] = right / seen
    assert rates[0.0] == 0.0 and rates[1.0] == 1.0
    assert 0.2 < rates[0.3] < 0.4


@pytest.mark.parametrize("kind", READ_KINDS)
def test_follow_takes_wrong_steps_too_and_draft_mode_never_does(tasks, kind):
    """Drafts with the rival's habit, a reader without one: `follow` copies wrong steps as
    readily as right ones, so some targets are wrong; `draft` (copy_wrong 0) never copies one."""
    cfg = {"draft_clean": 0.0, "draft_slip": 0.3, "follow": 0.5}
    wrong = _wrong_targets(tasks, kind, cfg, ("draft", "follow"))
    assert wrong["draft"] == 0 and wrong["follow"] > 10


def test_follow_zero_is_own_and_follow_is_read_only_under_its_mode(tasks):
    for kind in READ_KINDS:
        _, own = _examples(tasks, kind, "own", n=20)
        _, zero = _examples(tasks, kind, "follow", n=20, reader={"follow": 0.0})
        assert zero == own
        _, draft = _examples(tasks, kind, "draft", n=20)
        _, ignored = _examples(tasks, kind, "draft", n=20, reader={"follow": 0.7})
        assert ignored == draft
