"""The policy-gradient core every in-house trainer shares (agon.rl), each piece alone: group
advantages, the loss, the update, the loop's problem stream and the ranks' metrics rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agon import rl
from agon.engines.base import Completion
from agon.loss import policy_loss
from agon.training.loop import ProblemStream
from agon.training.settings import RLSettings
from tests.duel_helpers import ParityTask, tiny_policies


def test_group_advantages_scales():
    r = [1.0, 0.0, 0.0, 0.0, 2.0, 4.0]
    g = [0, 0, 0, 1, 1, 1]
    a = rl.group_advantages(r, g, "none").values
    assert np.allclose(a, [2 / 3, -1 / 3, -1 / 3, -2, 0, 2])
    a = rl.group_advantages(r, g, "group").values
    assert np.allclose(a[3:], [-1, 0, 1], atol=1e-3)  # group 1 has std 2
    a = rl.group_advantages(r, g, "batch").values
    assert np.allclose(a, np.array([2 / 3, -1 / 3, -1 / 3, -2, 0, 2]) / (np.std(r, ddof=1) + 1e-4))


def test_group_advantages_edge_cases():
    # all-equal group: zero advantage and flagged; lone member: zero; NaN: zero and out of the mean
    out = rl.group_advantages([1, 1, 1, 5, 0, np.nan, 1], [0, 0, 0, 1, 2, 2, 2], "group")
    assert out.values[:4].tolist() == [0, 0, 0, 0]
    assert out.zero_spread.tolist() == [True, True, False]
    assert out.values[5] == 0 and out.values[4] < 0 < out.values[6]
    empty = rl.group_advantages([], [], "group")
    assert empty.values.size == 0 and empty.zero_spread.size == 0
    # groups need not be contiguous
    a = rl.group_advantages([1, 0, 0, 1], [7, 3, 7, 3], "none").values
    assert a.tolist() == [0.5, -0.5, -0.5, 0.5]


def test_reader_trains_on_its_own_tokens_only():
    """The draft is in the reader's prompt ids, never in the completion it is trained on."""
    read = Completion(
        text="x", token_ids=[5], logprobs=None, prompt_token_ids=[1, 2, 3], finish_reason="stop"
    )
    adv = rl.Advantages(np.zeros(1), np.zeros(1, dtype=bool))
    reader = rl.samples_of("reader", [read], adv)
    assert reader.completion_ids[0] == [5] and reader.prompt_ids[0] == [1, 2, 3]


def test_policy_loss_ignores_masked_tokens_and_normalizes():
    logps = torch.log(torch.tensor([[0.5, 0.5, 0.9], [0.2, 0.3, 0.1]])).requires_grad_()
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([1.0, -2.0])
    dapo = policy_loss(logps, adv, mask, "dapo").loss
    assert dapo.item() == pytest.approx(-(1 + 1 - 2) / 3)
    grpo = policy_loss(logps, adv, mask, "grpo").loss
    assert grpo.item() == pytest.approx(-(1 + (-2)) / 2)
    dr = policy_loss(logps, adv, mask, "dr_grpo", max_completion_length=4).loss
    assert dr.item() == pytest.approx(-(1 + 1 - 2) / 8)
    dapo.backward()
    assert logps.grad[0, 2] == 0 and logps.grad[1, 1] == 0 and logps.grad[1, 2] == 0
    with pytest.raises(ValueError, match="max_completion_length"):
        policy_loss(logps, adv, mask, "dr_grpo")
    with pytest.raises(ValueError, match="ref_logps"):
        policy_loss(logps, adv, mask, "dapo", beta=0.1)


def test_clipping_stops_gradient_outside_trust_region():
    old = torch.zeros(1, 1)
    logps = torch.full((1, 1), math.log(2.0), requires_grad=True)  # ratio 2 > 1 + eps
    out = policy_loss(logps, torch.tensor([1.0]), torch.ones(1, 1), "dapo", old_logps=old)
    out.loss.backward()
    assert logps.grad.item() == 0 and out.clip_ratio == 1.0


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


def test_nan_loss_skips_update(tmp_path, caplog):
    s = RLSettings(problems_per_step=2, num_generations=4, max_new_tokens=4)
    policies = tiny_policies("qwen3", tmp_path, s, names=["A"], seeds=[0])
    pol = policies["A"]
    with torch.no_grad():
        next(pol.model.parameters()).view(-1)[0] = float(
            "nan"
        )  # a poisoned weight makes the loss NaN
    before = [p.detach().clone() for p in pol.model.parameters()]
    batch = rl.Samples(
        "drafter",
        prompt_ids=[[1, 2, 3]] * 2,
        completion_ids=[[4, 5], [6]],
        advantages=np.array([1.0, -1.0]),
    )
    m = rl.update(pol, [batch], s)
    assert m["skipped"] == 1.0 and not math.isfinite(m["loss"])
    assert all(
        torch.equal(a, b) or torch.isnan(a).any() for a, b in zip(before, pol.model.parameters())
    )
    assert pol.optimizer.state == {} or all(
        not torch.isnan(v["exp_avg"]).any() for v in pol.optimizer.state.values()
    )
    assert "update skipped" in caplog.text


def test_empty_batch_is_a_no_op(tmp_path):
    s = RLSettings(max_new_tokens=4)
    pol = tiny_policies("qwen3", tmp_path, s, names=["A"], seeds=[0])["A"]
    m = rl.update(pol, [], s)
    assert m["skipped"] == 1.0 and m["skip_reason_empty"] == 1.0


def test_combine_ranks_sums_counts_and_weights_rates():
    from agon.training.logbook import combine_ranks

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
        "duel/ties": 0.5,
        "B/reader/completions": 8.0,
        "B/reader/correct_after_right_draft": 1.0,
        "B/reader/reads_after_right_draft": 2.0,
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
        "duel/ties": 0.25,
        "B/reader/completions": 24.0,
        "B/reader/correct_after_right_draft": 0.5,
        "B/reader/reads_after_right_draft": 6.0,
    }
    m = combine_ranks([r0, r1])
    assert m["step"] == 4 and m["tokens_generated"] == 40 and m["A/drafter/tokens"] == 40
    assert m["A/drafter/completions"] == 16 and m["time/cpu_s"] == 6.0
    assert m["A/drafter/correct"] == pytest.approx((0.5 * 4 + 0.25 * 12) / 16)
    assert m["A/loss"] == pytest.approx(-0.25)  # each rank's loss is its share of the batch's
    assert m["A/grad_norm"] == 2.0 and m["time/rollout_s"] == 2.0
    # a direction's outcome is a share of its reads; the pooled one is made again from them
    assert m["A->B/duel/ties"] == pytest.approx((0.5 * 8 + 0.25 * 24) / 32)
    assert m["duel/ties"] == pytest.approx(m["A->B/duel/ties"])
    # a rate is weighted by its own denominator, not by the role's completions
    assert m["B/reader/correct_after_right_draft"] == pytest.approx((1.0 * 2 + 0.5 * 6) / 8)
    assert combine_ranks([r0]) == r0


def test_combine_ranks_refuses_a_key_nobody_declared():
    """Combining a key whose kind is unknown would be a guess: it is refused, naming it."""
    from agon.training.logbook import combine_ranks
    from agon.training.metrics import Declared, Key

    rows = [{"step": 0, "A/mine/rate": 0.5}, {"step": 0, "A/mine/rate": 0.25}]
    with pytest.raises(KeyError, match="A/mine/rate"):
        combine_ranks(rows)
    declared = Declared([Key("{model}/mine/rate", "same")])
    assert combine_ranks(rows, declared)["A/mine/rate"] == pytest.approx(0.375)


def test_every_declared_rate_names_a_counted_denominator():
    """Each rate's ``per`` is itself a declared count (``sum``), so combine_ranks can weigh it."""
    from agon.training.metrics import KEYS, Declared

    declared = Declared()
    for k in KEYS:
        if k.combine == "rate":
            example = k.per.format(model="A", role="reader", drafter="A", reader="B")
            found = declared.find(example)
            assert found is not None and found[0].combine == "sum", (k.template, k.per)
