"""The real-data math tasks that install offline: reasoning-gym generators and CHAMP.

Both are graded by our math grader (math-verify); these tests check that it agrees with
reasoning-gym's own scorer on the generator's reference answers (and on wrong ones), that the
splits are seeded, disjoint and hashed, and that the hard split is the documented threshold.
"""

from __future__ import annotations

import pytest

from agon.tasks import get_task
from agon.tasks.champ import is_numeric
from agon.tasks.reasoning_gym import DEFAULT_LEVELS, cot_steps

rg = pytest.importorskip("reasoning_gym", reason="the real tier's extra: pip install 'agon[real]'")


def _wrong(answer: str) -> str:
    return str(int(answer) + 1) if answer.lstrip("-").isdigit() else answer + "1"


@pytest.mark.parametrize("generator", ["basic_arithmetic", "gsm_symbolic"])
def test_our_grader_agrees_with_the_generators_scorer(generator):
    task = get_task("reasoning_gym", generator=generator, train_size=0, validation_size=0)
    items = []
    for level, settings in enumerate(DEFAULT_LEVELS[generator]):
        items += list(rg.create_dataset(generator, seed=7 + level, size=15, **settings))
    problems = [task.problem_of(item, 0) for item in items]
    try:
        for answers in ([i["answer"] for i in items], [_wrong(i["answer"]) for i in items]):
            ours = [
                v.correct for v in task.grade(problems, [f"So \\boxed{{{a}}}." for a in answers])
            ]
            theirs = [
                rg.create_dataset(generator, seed=0, size=1).score_answer(a, item) == 1.0
                for a, item in zip(answers, items)
            ]
            assert ours == theirs
            assert len(set(ours)) == 1  # all right on the references, all wrong on the others
    finally:
        task.close()


def test_splits_are_seeded_disjoint_and_hard_by_the_documented_threshold():
    kw = dict(train_size=120, validation_size=40, test_size=80)
    task = get_task("reasoning_gym", **kw)
    splits = {s: task.problems(s) for s in ("train", "validation", "test")}
    ids = [p.id for ps in splits.values() for p in ps]
    assert len(ids) == len(set(ids))  # a question drawn twice is kept only by the first split
    assert len(splits["test"]) > 60 and len(splits["train"]) > 90
    assert {p.meta["level"] for p in splits["test"]} == {0, 1, 2, 3}
    hard = task.problems("hard")
    assert hard == [p for p in splits["test"] if p.difficulty >= 2.0] and hard
    manifest = task.split_manifest()
    again = get_task("reasoning_gym", **kw).split_manifest()
    assert manifest["content_sha256"] == again["content_sha256"]
    assert manifest["split_sha256"] == again["split_sha256"]
    other = get_task("reasoning_gym", seed=1, **kw).split_manifest()
    assert other["content_sha256"] != manifest["content_sha256"]
    assert manifest["generator"] == "basic_arithmetic" and manifest["reasoning_gym_version"]


def test_gsm_symbolic_difficulty_counts_worked_solution_steps():
    task = get_task("reasoning_gym", generator="gsm_symbolic", train_size=10, validation_size=5)
    test = task.problems("test")
    assert all(p.difficulty == cot_steps(p.meta["worked_solution"]) for p in test)
    assert task.problems("hard") == [p for p in test if p.difficulty >= 4]
    assert 0 < len(task.problems("hard")) < len(test)
    assert cot_steps("1. a = 2\n2. so b\n3. c = a + 1 = 3") == 2


def test_bad_generator_settings_fail_clearly():
    with pytest.raises(ValueError, match="not valid"):
        get_task("reasoning_gym", levels=[{"min_terms": 9, "max_terms": 2}]).problems("test")
    with pytest.raises(ValueError, match="difficulty"):
        get_task("reasoning_gym", difficulty="vibes")


def test_champ_numeric_subset_is_graded_by_math_verify():
    pytest.importorskip("champ_dataset", reason="the real tier's extra: pip install 'agon[real]'")
    task = get_task("champ")
    test = task.problems("test")
    assert len(test) == 85 and task.problems("hard") == test and not task.problems("train")
    assert all(is_numeric(p.answer) for p in test)
    assert len(get_task("champ", answers="all").problems("test")) == 270
    try:
        right = task.grade(test[:10], [f"\\boxed{{{p.answer}}}" for p in test[:10]])
        wrong = task.grade(test[:10], [f"\\boxed{{{_wrong(p.answer)}}}" for p in test[:10]])
    finally:
        task.close()
    assert all(v.correct for v in right) and not any(v.correct for v in wrong)
    assert is_numeric("1,024") and is_numeric("-3/4") and not is_numeric("2^n")
