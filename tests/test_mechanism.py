"""The mechanism metrics of the duel (docs/method.md, what the toy world can show): dead
groups counted per distinct completion, reads after right and after wrong drafts, the
drafter's error style and the toy world's wrong drafts, the readings the abstract leaves open
(agon.baseline, agon.reward.reader_robustness), and what each does to the advantages."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from agon import duel, rl
from agon.duel import DuelSettings
from agon.toy.chain import (
    arith_solution,
    first_error_style,
    gold_arith_steps,
    is_marked,
    wrong_arith_steps,
)
from agon.toy.mistake import Mistake
from agon.toy.sft_data import written_arith_steps
from agon.toy.tasks import ArithTask
from agon.toy.toycode import ToyCodeTask, parse_code_lines
from agon.training import logbook


def test_identical_completions_make_a_dead_group_that_zero_spread_misses():
    """Eight identical drafts whose reads disagree have reward spread but no gradient."""
    rewards = [1.0, 0.5, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]  # group 0: one draft x4; group 1: two
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    keys = ["x", "x", "x", "x", "y", "y", "z", "z"]
    adv = rl.group_advantages(rewards, groups, "none", completions=keys)
    assert adv.zero_spread.tolist() == [False, False]
    assert adv.dead.tolist() == [True, False]  # y's sum (+1) and z's (-1) are not 0
    assert rl.group_advantages(rewards, groups, "none").dead is None


def test_baselines():
    """group subtracts each group's mean, batch the batch's, none nothing."""
    r, g = [1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1]
    assert rl.group_advantages(r, g, "none").values.tolist() == [0.5, -0.5, 0.0, 0.0]
    assert rl.group_advantages(r, g, "none", baseline="batch").values.tolist() == [
        0.25,
        -0.75,
        0.25,
        0.25,
    ]
    assert rl.group_advantages(r, g, "none", baseline="none").values.tolist() == r
    with pytest.raises(ValueError, match="baseline"):
        rl.group_advantages(r, g, baseline="median")


def test_reader_robustness_reward_pays_right_reads_of_wrong_drafts():
    c_draft = np.array([[1.0, 0.0]])
    c_read = np.array([[[1.0, 0.0], [1.0, 0.0]]])
    s = DuelSettings(num_generations=2, num_reads=2, reward_scheme="independent")
    _, plain = duel.role_rewards(c_draft, c_read, s)
    s.reward_reader_robustness = 0.5
    _, paid = duel.role_rewards(c_draft, c_read, s)
    assert (paid - plain).ravel().tolist() == [0.0, 0.0, 0.5, 0.0]


def test_reader_and_style_metrics():
    d = np.array([1, 1, 0, 0, 0, np.nan])
    r = np.array([1, 0, 1, 0, 0, 1])
    m = logbook.reader_metrics("B", d, r)
    assert m["B/reader/correct_after_right_draft"] == 0.5
    assert m["B/reader/correct_after_wrong_draft"] == pytest.approx(1 / 3)
    assert m["B/reader/reads_after_wrong_draft"] == 3
    s = logbook.style_metrics("A", ["hidden", "visible", "hidden", "other", None])
    assert s == {"A/drafter/hidden_share": 2 / 3, "A/drafter/styled_wrong": 3.0}
    assert logbook.style_metrics("A", [None, "other"]) == {}
    paid = logbook.style_metrics(
        "A", ["hidden", "visible", "hidden", "other"], [0.0, -1.0, -0.5, 3.0]
    )
    assert paid["A/drafter/hidden_minus_visible_reward"] == pytest.approx(0.75)
    assert paid["A/drafter/style_gap_pairs"] == 1.0
    only_hidden = logbook.style_metrics("A", ["hidden", "other"], [0.0, 1.0])
    assert "A/drafter/hidden_minus_visible_reward" not in only_hidden


@pytest.mark.parametrize("scheme, expect", [("agon", 1.0), ("independent", 0.0)])
def test_style_reward_gap_is_the_rival_term(scheme, expect):
    """Two wrong drafts, one hidden (both reads misled) and one visible (both reads right): the
    rival term pays the hidden one lam more under agon, and nothing under independent."""
    c_draft = np.array([[0.0, 0.0]])
    c_read = np.array([[[0.0, 0.0], [1.0, 1.0]]])
    s = DuelSettings(reward_scheme=scheme, reward_lam=1.0)
    r_draft, _ = duel.role_rewards(c_draft, c_read, s)
    gap = logbook.style_metrics("A", ["hidden", "visible"], r_draft[c_draft == 0])
    assert gap["A/drafter/hidden_minus_visible_reward"] == pytest.approx(expect)
    assert math.isnan(
        logbook.reader_metrics("B", np.array([1.0]), np.array([1.0]))[
            "B/reader/correct_after_wrong_draft"
        ]
    )


@pytest.fixture(scope="module")
def arith():
    task = ArithTask(n_train=10, n_test=30, n_validation=5, grading_workers=1)
    yield task
    task.close()


def test_arith_error_styles_and_fixed_wrong_drafts(arith):
    """A hidden error keeps the question's operand and writes a wrong result; a visible one is
    the same draft opened with the mark. The probe's wrong drafts are wrong, of the style
    asked, and the same every time for a seed."""
    p = arith.problems("hard")[0]
    assert arith.error_style(p, arith.solution(p)) is None
    for style in ("hidden", "visible"):
        draft = arith.wrong_draft(p, 0, style)
        assert arith.error_style(p, draft) == style
        assert is_marked(draft) == (style == "visible")
        assert draft == arith.wrong_draft(p, 0, style)
        assert arith.grade([p], [draft])[0].correct is False
    assert arith.wrong_draft(p, 0) == arith.wrong_draft(p, 0, "hidden")
    assert arith.error_style(p, "\\boxed{3}") == "other"
    ops = p.meta["ops"]
    gold = gold_arith_steps(p.meta["start"], ops)
    assert first_error_style(p.meta["start"], ops, gold[:-1]) == "other"


def _styles(arith, mistake, rng, n=600):
    """The first-error styles of ``n`` solutions a writer with ``mistake`` writes."""
    c = Counter()
    for _ in range(n):
        q = arith.sample(rng, 4)
        mark = mistake.marks(rng)
        steps = written_arith_steps(q.meta["start"], q.meta["ops"], rng, mistake)
        c[arith.error_style(q, arith_solution(steps, mark))] += 1
    return c


def test_a_mistake_splits_hidden_and_visible_errors_as_configured(arith):
    """hidden_share 1 (table 1's toy world) writes only hidden errors; 0.5 about half each."""
    for share, lo, hi in ((1.0, 1.0, 1.0), (0.5, 0.4, 0.6)):
        c = _styles(arith, Mistake("*", (1, 2, 3, 4, 5, 6), 1.0, 1.0, share), random.Random(0))
        assert lo <= c["hidden"] / (c["hidden"] + c["visible"]) <= hi, c


def test_the_error_style_is_chosen_apart_from_correctness(arith):
    """The style is drawn before the first step, so a writer that errs less (what learning
    correctness does) marks the same share of its solutions, right or wrong."""
    shares = {}
    for rate in (1.0, 0.3):
        c = _styles(arith, Mistake("*", (1, 2, 3, 4, 5, 6), rate, 1.0, 0.5), random.Random(1))
        assert c[None] > (50 if rate < 1 else 0)  # the lower rate writes right solutions too
        shares[rate] = c["hidden"] / (c["hidden"] + c["visible"])
    assert abs(shares[1.0] - shares[0.3]) < 0.1, shares


def test_a_reader_anchors_on_unmarked_drafts_and_recomputes_marked_ones():
    """With copy_wrong 1 a reader copies an aligned wrong step as it stands, unless the draft
    is marked: then it recomputes it (the lever a drafter pulls by hiding)."""
    ops, start = [("*", 3), ("+", 2)], 4
    draft = wrong_arith_steps(start, ops, random.Random(0))
    wrong = next(i for i, s in enumerate(draft) if not s.correct)
    for marked, copied in ((False, True), (True, False)):
        own = written_arith_steps(
            start, ops, random.Random(0), None, keep=[draft], copy_wrong=1.0, marked=[marked]
        )
        assert (own[wrong].result == draft[wrong].result) is copied


def test_toycode_wrong_draft_has_one_wrong_line():
    task = ToyCodeTask(n_train=5, n_test=10, n_validation=2)
    try:
        p = task.problems("test")[0]
        draft = task.wrong_draft(p, 0)
        lines, gold = parse_code_lines(draft), list(p.meta["ops"])
        assert sum(a != tuple(b) for a, b in zip(lines, gold)) == 1
        assert task.grade([p], [draft])[0].correct is False
    finally:
        task.close()


def test_the_run_rate_after_a_right_draft_weights_each_step_by_its_reads_after_a_right_draft():
    """Two steps: 1 right read of 1 after a right draft, then 0 of 3; the run's rate is 1/4,
    not a weighting by the reader's completions (8 and 8 here: 1/2)."""
    rows = [
        {
            "B/reader/correct_after_right_draft": rate,
            "B/reader/reads_after_right_draft": right,
            "B/reader/correct_after_wrong_draft": 0.5,
            "B/reader/reads_after_wrong_draft": 8 - right,
            "B/reader/completions": 8,
        }
        for rate, right in ((1.0, 1), (0.0, 3))
    ]
    summary = logbook.mechanism_summary(rows, "B")
    assert summary["B/read_after_right"] == pytest.approx(0.25)
    assert summary["B/read_after_wrong"] == pytest.approx(0.5)
