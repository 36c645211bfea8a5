"""The duel's pieces, each alone, then whole steps on every paper architecture (the shared
policy-gradient core under them: tests/test_rl.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agon import duel, rl
from agon.training.logbook import duel_outcomes
from agon.training.settings import RLSettings
from tests.duel_helpers import ParityTask, tiny_policies

# ------------------------------------------------------------------------------- rewards


def test_agon_reward_table():
    c_self = [1, 1, 0, 0]
    c_rival = [0, 1, 1, 0]
    assert duel.duel_rewards(c_self, c_rival, "agon", lam=1.0).tolist() == [2, 1, -1, 0]
    assert duel.duel_rewards(c_self, c_rival, "agon", lam=0.5).tolist() == [1.5, 1, -0.5, 0]
    assert duel.duel_rewards(c_self, c_rival, "zero_sum").tolist() == [1, 0, -1, 0]
    assert duel.duel_rewards(c_self, c_rival, "independent").tolist() == [1, 1, 0, 0]
    # cooperative: both are paid the reader's correctness
    assert duel.duel_rewards(c_self, c_rival, "cooperative", role="drafter").tolist() == [
        0,
        1,
        1,
        0,
    ]
    assert duel.duel_rewards(c_self, c_rival, "cooperative", role="reader").tolist() == [1, 1, 0, 0]


def test_reward_with_mean_rival_and_ungraded():
    # a drafter's rival is the mean of the K reads of its draft; NaN (ungraded) propagates
    r = duel.duel_rewards([1.0, 0.0, np.nan], [0.25, 0.5, 1.0], "agon", lam=1.0)
    assert r[:2].tolist() == [1.75, -0.5] and math.isnan(r[2])


def test_reward_rejects_unknown_scheme_and_shape():
    with pytest.raises(ValueError, match="unknown reward scheme"):
        duel.duel_rewards([1], [0], "nope")
    with pytest.raises(ValueError, match="same shape"):
        duel.duel_rewards([1, 0], [0], "agon")


def test_duel_outcomes():
    o = duel_outcomes(np.array([1, 1, 0, 0, np.nan]), np.array([0, 1, 1, 0, 1]))
    assert o == {"duel/drafter_wins": 0.25, "duel/reader_wins": 0.25, "duel/ties": 0.5}
    assert math.isnan(duel_outcomes(np.array([np.nan]), np.array([1.0]))["duel/ties"])


# ------------------------------------------------------------------------------- advantages


def _grades():
    """Correctness of 2 problems x 2 drafts, and of 2 reads of each draft."""
    c_draft = np.array([[1.0, 0.0], [0.0, 0.0]])
    c_read = np.array([[[1.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [1.0, np.nan]]])
    return c_draft, c_read


def test_rewards_and_advantages_per_role():
    s = duel.DuelSettings(num_generations=2, num_reads=2, scale_rewards="none")
    c_draft, c_read = _grades()
    adv_d, adv_r = duel.role_advantages(*duel.role_rewards(c_draft, c_read, s), s)
    # drafter: rewards c + (c - mean read) = [1, -0.5 | -0, -1]; group mean per problem
    r_draft = np.array([1.0, -0.5, 0.0, -1.0])
    assert np.allclose(adv_d.values, r_draft - np.repeat([0.25, -0.5], 2))
    # reader (group = the K reads of one draft): rewards [1,1 | 2,0 | 0,0 | 2,nan]
    assert np.allclose(adv_r.values, [0, 0, 1, -1, 0, 0, 0, 0])
    assert adv_d.zero_spread.mean() == 0.0 and adv_r.zero_spread.mean() == 0.75
    o = duel_outcomes(np.repeat(c_draft[:, :, None], 2, axis=2).ravel(), c_read.ravel())
    assert (o["duel/drafter_wins"], o["duel/reader_wins"], o["duel/ties"]) == pytest.approx(
        (0, 2 / 7, 5 / 7)
    )
    s_problem = duel.DuelSettings(
        num_generations=2, num_reads=2, scale_rewards="none", reader_group="problem"
    )
    _, adv_p = duel.role_advantages(*duel.role_rewards(c_draft, c_read, s_problem), s_problem)
    assert np.allclose(adv_p.values[:4], np.array([1, 1, 2, 0]) - 1.0)


# ------------------------------------------------------------------------------- loss


def test_settings_reject_bad_values():
    with pytest.raises(ValueError, match="reward_scheme"):
        duel.DuelSettings(reward_scheme="friendly")
    with pytest.raises(ValueError, match="problems_per_step"):
        duel.DuelSettings(role_schedule="both", problems_per_step=1)


def test_directions():
    s = duel.DuelSettings()
    assert duel.directions(0, s, ["A", "B"], [0, 1, 2, 3], 4) == [(0, "A", "B", [0, 1, 2, 3])]
    assert duel.directions(1, s, ["A", "B"], [0, 1, 2, 3], 4) == [(0, "B", "A", [0, 1, 2, 3])]
    both = duel.DuelSettings(role_schedule="both")
    assert duel.directions(3, both, ["A", "B"], range(5), 5) == [
        (0, "A", "B", [0, 1]),
        (1, "B", "A", [2, 3, 4]),
    ]
    # a process holding keys 1 and 3 of a 4-problem step plays each as one process would
    assert duel.directions(3, both, ["A", "B"], [1, 3], 4) == [
        (0, "A", "B", [0]),
        (1, "B", "A", [1]),
    ]
    assert duel.directions(0, both, ["A", "B"], [2, 3], 4) == [(1, "B", "A", [0, 1])]


# ------------------------------------------------------------------------------- whole steps


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_5_text", "gemma4_text"])
def test_duel_and_grpo_step_every_architecture(arch, tmp_path):
    """One duel step (both directions) and one GRPO step of one model run and change the
    weights."""
    s = duel.DuelSettings(
        problems_per_step=2,
        num_generations=4,
        num_reads=2,
        role_schedule="both",
        max_new_tokens=6,
        learning_rate=1e-2,
        beta=0.01,
    )
    policies = tiny_policies(arch, tmp_path, s)
    before = {
        n: [p.detach().clone() for p in pol.model.parameters()] for n, pol in policies.items()
    }
    m = duel.duel_step(ParityTask(), policies, ParityTask().problems("train")[:2], s, step=0)
    for name in ("A", "B"):
        assert m[f"{name}/skipped"] == 0.0 and math.isfinite(m[f"{name}/loss"])
        assert m[f"{name}/drafter/tokens"] > 0 and m[f"{name}/reader/tokens"] > 0
        changed = any(
            not torch.equal(a, b) for a, b in zip(before[name], policies[name].model.parameters())
        )
        assert changed, f"{name} did not move"
    for key in (
        "duel/drafter_wins",
        "duel/reader_wins",
        "duel/ties",
        "tokens_generated",
        "A/entropy",
        "A/kl",
        "A/grad_norm",
        "B/reader/frac_zero_spread",
    ):
        assert key in m, key
    assert m["duel/drafter_wins"] + m["duel/reader_wins"] + m["duel/ties"] == pytest.approx(1.0)

    solo = RLSettings(problems_per_step=2, num_generations=4, max_new_tokens=6, learning_rate=1e-2)
    m = rl.grpo_step(
        ParityTask(), {"A": policies["A"]}, ParityTask().problems("train")[:2], solo, step=0
    )
    assert "A/reader/reward" not in m and m["A/drafter/tokens"] > 0 and m["A/skipped"] == 0.0


def test_long_draft_is_cut_to_fit_reader_prompt(tmp_path):
    from transformers import AutoTokenizer

    from agon.engines.base import PromptTooLongError
    from agon.engines.hf import HFEngine
    from agon.random_models import build_tiny_model

    path = build_tiny_model("qwen3", tmp_path / "q")
    task, problem = ParityTask(), ParityTask().problems("train")[0]
    probe = HFEngine(path, AutoTokenizer.from_pretrained(path))
    bare = len(probe.encode(task.reader_prompt(problem, "")))
    engine = HFEngine(probe.model, probe.tokenizer, max_prompt_tokens=bare + 40)
    msgs, cut = duel.fit_reader_prompt(task, problem, "short draft \\boxed{3}", engine)
    assert not cut and "short draft" in msgs[0]["content"]
    long_draft = "step " * 200 + "\\boxed{3}"
    msgs, cut = duel.fit_reader_prompt(task, problem, long_draft, engine)
    assert cut and "\\boxed{3}" in msgs[0]["content"] and len(engine.encode(msgs)) <= bare + 40
    tight = HFEngine(probe.model, probe.tokenizer, max_prompt_tokens=bare - 1)
    with pytest.raises(PromptTooLongError, match="even without the draft"):
        duel.fit_reader_prompt(task, problem, long_draft, tight)


def _random_grades(P=4, G=4, K=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, (P, G)).astype(float), rng.integers(0, 2, (P, G, K)).astype(float)


@pytest.mark.parametrize("scale", ["group", "none", "batch"])
def test_reader_advantages_per_reader_group(scale):
    """docs/method.md: under reader_group draft the rival term cancels for the reader (agon and
    zero_sum give independent's advantages, up to a batch-wide factor under batch scaling and
    the std's eps under agon); under reader_group problem it does not."""
    c_draft, c_read = _random_grades()

    def reader_adv(scheme, group):
        s = duel.DuelSettings(
            num_generations=4,
            num_reads=3,
            scale_rewards=scale,
            reward_scheme=scheme,
            reader_group=group,
        )
        return duel.role_advantages(*duel.role_rewards(c_draft, c_read, s), s)[1].values

    indep = reader_adv("independent", "draft")
    for scheme in ("agon", "zero_sum"):
        adv = reader_adv(scheme, "draft")
        if scale == "batch":  # one positive factor for the whole batch
            nz = indep != 0
            ratio = adv[nz] / indep[nz]
            assert np.allclose(ratio, ratio[0]) and ratio[0] > 0
        elif scheme == "zero_sum" or scale == "none":
            factor = 2.0 if (scheme == "agon" and scale == "none") else 1.0  # 1 + lam
            assert np.allclose(adv, factor * indep)
        else:
            assert np.allclose(adv, indep, atol=1e-3)
    # under reader_group problem the rival term stays in the reader's advantages (as noise:
    # the draft it read is prompt, so its expected gradient is still 0; docs/method.md)
    assert not np.allclose(reader_adv("agon", "problem"), reader_adv("independent", "problem"))


def test_drafter_feels_the_contest():
    """The drafter's rival (mean of its reads) varies inside its group: agon != independent."""
    c_draft, c_read = _random_grades()
    s_agon = duel.DuelSettings(num_generations=4, num_reads=3, scale_rewards="none")
    s_ind = duel.DuelSettings(
        num_generations=4, num_reads=3, scale_rewards="none", reward_scheme="independent"
    )
    a = duel.role_advantages(*duel.role_rewards(c_draft, c_read, s_agon), s_agon)[0].values
    i = duel.role_advantages(*duel.role_rewards(c_draft, c_read, s_ind), s_ind)[0].values
    mean_read = c_read.mean(axis=2)
    centred = mean_read - mean_read.mean(axis=1, keepdims=True)
    assert np.allclose(a, 2 * i - centred.ravel())  # (1 + lam) A_ind - lam (m - mean m)


@pytest.mark.parametrize("roles", [["drafter"], ["drafter", "reader"]])
def test_train_roles_drafter_leaves_the_reader_as_it_was(roles, tmp_path):
    """``agon.train_roles: [drafter]``: the reads are sampled and graded, but the model that only
    reads in a step takes no optimizer step (its weights bitwise unchanged, no update keys);
    with both roles trained it moves (so the check can fail)."""
    s = duel.DuelSettings(
        problems_per_step=2,
        num_generations=4,
        num_reads=2,
        max_new_tokens=6,
        learning_rate=1e-2,
        train_roles=roles,
    )
    policies = tiny_policies("qwen3", tmp_path, s)
    before = {
        n: [p.detach().clone() for p in pol.model.parameters()] for n, pol in policies.items()
    }
    # step 0 of the alternate schedule: A drafts, B reads
    m = duel.duel_step(ParityTask(), policies, ParityTask().problems("train")[:2], s, step=0)
    moved = {
        n: any(not torch.equal(a, b) for a, b in zip(before[n], policies[n].model.parameters()))
        for n in policies
    }
    assert m["B/reader/completions"] == 16 and "B/reader/correct" in m  # the reads happened
    assert moved["A"] and "A/lr" in m
    if roles == ["drafter"]:
        assert not moved["B"] and "B/lr" not in m and "B/trained_tokens" not in m
    else:
        assert moved["B"] and m["B/trained_tokens"] > 0
    expected = ["A"] if roles == ["drafter"] else ["A", "B"]
    assert duel.training_models(0, s, ["A", "B"], 2) == expected
    # under role_schedule both each model drafts every step: both train on their drafts alone
    both = duel.DuelSettings(problems_per_step=2, role_schedule="both", train_roles=roles)
    assert duel.training_models(0, both, ["A", "B"], 2) == ["A", "B"]


def test_a_toy_reader_logs_its_take_up_each_step_and_the_run_sums_it(tmp_path, monkeypatch):
    """A reader with habits (a pretrained toy model) on a toy task: the step logs its take-up
    counts (agon.toy.audit.rollout_take_up over the step's drafts and reads) and their rate; a
    reader without habits logs none. The run's summary weighs each step's rate by its count,
    over the run and in its first and last quarter."""
    from agon.toy import audit
    from agon.toy.mistake import Mistake
    from agon.toy.tasks import ArithTask
    from agon.training.logbook import mechanism_summary

    seen = []

    def counts(task, problems, drafts, reads, reader):
        seen.append((task, len(problems), len(drafts[0]), len(reads[0][0]), reader))
        return 5, 2

    s = duel.DuelSettings(problems_per_step=2, num_generations=4, num_reads=2, max_new_tokens=6)
    task = ArithTask(n_train=20, n_test=10, n_validation=5, answer="trace")
    policies = tiny_policies("qwen3", tmp_path, s)
    habits = Mistake("*", (4, 5, 6), 1.0, 1.0)
    policies["B"].habits = habits
    m = duel.duel_step(task, policies, task.problems("train")[:2], s, step=0)  # the real count
    assert m["B/reader/habit_steps"] >= m["B/reader/habit_steps_taken"] >= 0
    monkeypatch.setattr(audit, "rollout_take_up", counts)
    m = duel.duel_step(task, policies, task.problems("train")[:2], s, step=0)  # A drafts, B reads
    assert seen == [("arith", 2, 4, 2, habits)]
    assert (m["B/reader/habit_steps"], m["B/reader/habit_steps_taken"]) == (5.0, 2.0)
    assert m["B/reader/take_up"] == pytest.approx(0.4)
    policies["B"].habits = None
    m = duel.duel_step(task, policies, task.problems("train")[:2], s, step=0)
    assert "B/reader/habit_steps" not in m and len(seen) == 1

    rows = [{"B/reader/habit_steps": n, "B/reader/take_up": r} for n, r in
            [(10, 0.1), (30, 0.2), (0, float("nan")), (10, 0.5), (10, 0.6)]]  # fmt: skip
    out = mechanism_summary(rows, "B")
    assert out["B/take_up"] == pytest.approx((1 + 6 + 5 + 6) / 60)
    assert out["B/take_up_first"] == pytest.approx(0.1)  # a quarter of the 4 counted steps
    assert out["B/take_up_last"] == pytest.approx(0.6)
