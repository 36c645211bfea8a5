"""The duel trainer's pieces, each alone, then whole steps on every paper architecture."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agon import duel
from agon.engines.base import Completion
from agon.training.loop import ProblemStream
from agon.training.metrics import duel_outcomes
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


def test_group_advantages_scales():
    r = [1.0, 0.0, 0.0, 0.0, 2.0, 4.0]
    g = [0, 0, 0, 1, 1, 1]
    a = duel.group_advantages(r, g, "none").values
    assert np.allclose(a, [2 / 3, -1 / 3, -1 / 3, -2, 0, 2])
    a = duel.group_advantages(r, g, "group").values
    assert np.allclose(a[3:], [-1, 0, 1], atol=1e-3)  # group 1 has std 2
    a = duel.group_advantages(r, g, "batch").values
    assert np.allclose(a, np.array([2 / 3, -1 / 3, -1 / 3, -2, 0, 2]) / (np.std(r, ddof=1) + 1e-4))


def test_group_advantages_edge_cases():
    # all-equal group: zero advantage and flagged; lone member: zero; NaN: zero and out of the mean
    out = duel.group_advantages([1, 1, 1, 5, 0, np.nan, 1], [0, 0, 0, 1, 2, 2, 2], "group")
    assert out.values[:4].tolist() == [0, 0, 0, 0]
    assert out.zero_spread.tolist() == [True, True, False]
    assert out.values[5] == 0 and out.values[4] < 0 < out.values[6]
    empty = duel.group_advantages([], [], "group")
    assert empty.values.size == 0 and empty.zero_spread.size == 0
    # groups need not be contiguous
    a = duel.group_advantages([1, 0, 0, 1], [7, 3, 7, 3], "none").values
    assert a.tolist() == [0.5, -0.5, -0.5, 0.5]


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


def test_reader_trains_on_its_own_tokens_only():
    """The draft is in the reader's prompt ids, never in the completion it is trained on."""
    read = Completion(
        text="x", token_ids=[5], logprobs=None, prompt_token_ids=[1, 2, 3], finish_reason="stop"
    )
    adv = duel.Advantages(np.zeros(1), np.zeros(1, dtype=bool))
    reader = duel.samples_of("reader", [read], adv)
    assert reader.completion_ids[0] == [5] and reader.prompt_ids[0] == [1, 2, 3]


def test_solo_rewards_are_correctness():
    s = duel.DuelSettings(mode="solo", num_generations=2)
    c_draft = np.array([[1.0, 0.0], [np.nan, 1.0]])
    r_draft, r_read = duel.role_rewards(c_draft, np.zeros((2, 2, 0)), s)
    assert np.array_equal(r_draft, c_draft, equal_nan=True) and r_read.size == 0
    adv_d, adv_r = duel.role_advantages(r_draft, r_read, s)
    assert adv_r is None and adv_d.values[2] == 0.0


# ------------------------------------------------------------------------------- loss


def test_policy_loss_ignores_masked_tokens_and_normalizes():
    logps = torch.log(torch.tensor([[0.5, 0.5, 0.9], [0.2, 0.3, 0.1]])).requires_grad_()
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([1.0, -2.0])
    dapo = duel.policy_loss(logps, adv, mask, "dapo").loss
    assert dapo.item() == pytest.approx(-(1 + 1 - 2) / 3)
    grpo = duel.policy_loss(logps, adv, mask, "grpo").loss
    assert grpo.item() == pytest.approx(-(1 + (-2)) / 2)
    dr = duel.policy_loss(logps, adv, mask, "dr_grpo", max_completion_length=4).loss
    assert dr.item() == pytest.approx(-(1 + 1 - 2) / 8)
    dapo.backward()
    assert logps.grad[0, 2] == 0 and logps.grad[1, 1] == 0 and logps.grad[1, 2] == 0
    with pytest.raises(ValueError, match="max_completion_length"):
        duel.policy_loss(logps, adv, mask, "dr_grpo")
    with pytest.raises(ValueError, match="ref_logps"):
        duel.policy_loss(logps, adv, mask, "dapo", beta=0.1)


def test_clipping_stops_gradient_outside_trust_region():
    old = torch.zeros(1, 1)
    logps = torch.full((1, 1), math.log(2.0), requires_grad=True)  # ratio 2 > 1 + eps
    out = duel.policy_loss(logps, torch.tensor([1.0]), torch.ones(1, 1), "dapo", old_logps=old)
    out.loss.backward()
    assert logps.grad.item() == 0 and out.clip_ratio == 1.0


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
    assert duel.directions(0, duel.DuelSettings(mode="solo"), ["A"], [0, 1, 2, 3], 4) == [
        (0, "A", None, [0, 1, 2, 3])
    ]


def test_problem_stream_resumes_in_place():
    problems = ParityTask().problems("train")
    a = ProblemStream(problems, seed=3)
    first = [p.id for p in a.take(4)]
    state = a.state_dict()
    rest = [p.id for p in a.take(9)]
    b = ProblemStream(problems, seed=3)
    b.load_state_dict(state)
    assert [p.id for p in b.take(9)] == rest
    assert sorted(first + rest[:2]) == sorted(p.id for p in problems)  # an epoch is a permutation


# ------------------------------------------------------------------------------- whole steps


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_5_text", "gemma4_text"])
def test_duel_and_solo_step_every_architecture(arch, tmp_path):
    """One duel step (both directions) and one solo (GRPO) step run and change the weights."""
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

    solo = duel.DuelSettings(
        mode="solo", problems_per_step=2, num_generations=4, max_new_tokens=6, learning_rate=1e-2
    )
    m = duel.duel_step(
        ParityTask(), {"A": policies["A"]}, ParityTask().problems("train")[:2], solo, step=0
    )
    assert "A/reader/reward" not in m and m["A/drafter/tokens"] > 0 and m["A/skipped"] == 0.0


def test_nan_loss_skips_update(tmp_path, caplog):
    s = duel.DuelSettings(mode="solo", problems_per_step=2, num_generations=4, max_new_tokens=4)
    policies = tiny_policies("qwen3", tmp_path, s, names=["A"], seeds=[0])
    pol = policies["A"]
    with torch.no_grad():
        next(pol.model.parameters()).view(-1)[0] = float(
            "nan"
        )  # a poisoned weight makes the loss NaN
    before = [p.detach().clone() for p in pol.model.parameters()]
    batch = duel.Samples(
        "drafter",
        prompt_ids=[[1, 2, 3]] * 2,
        completion_ids=[[4, 5], [6]],
        advantages=np.array([1.0, -1.0]),
    )
    m = duel.update(pol, [batch], s)
    assert m["skipped"] == 1.0 and not math.isfinite(m["loss"])
    assert all(
        torch.equal(a, b) or torch.isnan(a).any() for a, b in zip(before, pol.model.parameters())
    )
    assert pol.optimizer.state == {} or all(
        not torch.isnan(v["exp_avg"]).any() for v in pol.optimizer.state.values()
    )
    assert "update skipped" in caplog.text


def test_empty_batch_is_a_no_op(tmp_path):
    s = duel.DuelSettings(mode="solo", max_new_tokens=4)
    pol = tiny_policies("qwen3", tmp_path, s, names=["A"], seeds=[0])["A"]
    m = duel.update(pol, [], s)
    assert m["skipped"] == 1.0 and m["skip_reason_empty"] == 1.0


def test_long_draft_is_cut_to_fit_reader_prompt(tmp_path):
    from transformers import AutoTokenizer

    from agon.engines.base import PromptTooLongError
    from agon.engines.hf import HFEngine
    from tests.tiny_models import build_tiny_model

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
    # reading wrong drafts right is paid more when the group is the problem's reads
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


def test_combine_ranks_sums_counts_and_weights_rates():
    from agon.training.metrics import combine_ranks

    r0 = {
        "step": 4,
        "tokens_generated": 10,
        "A/drafter/tokens": 10.0,
        "A/drafter/completions": 4.0,
        "A/drafter/correct": 0.5,
        "A/loss": 0.25,
        "A/grad_norm": 2.0,
        "time/rollout_s": 1.0,
        "time/cpu_s": 3.0,
        "A->B/duel/ties": 0.5,
    }
    r1 = {
        **r0,
        "tokens_generated": 30,
        "A/drafter/tokens": 30.0,
        "A/drafter/completions": 12.0,
        "A/drafter/correct": 0.25,
        "A/loss": -0.5,
        "time/rollout_s": 2.0,
        "A->B/duel/ties": 0.25,
    }
    m = combine_ranks([r0, r1])
    assert m["step"] == 4 and m["tokens_generated"] == 40 and m["A/drafter/tokens"] == 40
    assert m["A/drafter/completions"] == 16 and m["time/cpu_s"] == 6.0
    assert m["A/drafter/correct"] == pytest.approx((0.5 * 4 + 0.25 * 12) / 16)
    assert m["A/loss"] == pytest.approx(-0.25)  # each rank's loss is its share of the batch's
    assert m["A/grad_norm"] == 2.0 and m["time/rollout_s"] == 2.0
    assert m["A->B/duel/ties"] == pytest.approx(0.375)
    assert combine_ranks([r0]) == r0
