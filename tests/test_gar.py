"""The GAR baseline: the LM-head gradient cosine against autograd, chunked and Gram forms, the
reward rules, the tasks' worked solutions, and a few training steps in the toy world."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from agon.config import ConfigError, load_config
from agon.random_models import ARCHS
from agon.tasks.base import Problem
from agon.toy.tasks import ArithTask
from agon.toy.toycode import ToyCodeTask
from baselines.gar import (
    GARSettings,
    Head,
    anchor_ids,
    completion_hidden_states,
    explicit_gradient,
    gar_rewards,
    needs_cosine,
    problem_cosines,
)
from tests.duel_helpers import ParityTask, qwen3_models, solo_toy_config, write_config

# ------------------------------------------------------------------------- the cosine


def _autograd_head_gradient(model, prompt, completion, temperature):
    """dL/dW of the LM head for L = -sum log p(completion | prompt), by autograd through the
    model's own forward (its softcap included), the head untied from the embeddings."""
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1] / temperature
    nll = -torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None]).sum()
    model.zero_grad(set_to_none=True)
    nll.backward()
    return model.get_output_embeddings().weight.grad.detach().clone()


@pytest.mark.parametrize("arch", ARCHS)
def test_cosine_matches_autograd_on_a_tiny_model(arch, tiny):
    """The anchor's and two samples' LM-head gradients by autograd, against ours (hidden
    states from the extra forward, packed or padded as the model allows; qwen3.5's linear
    attention is padded, gemma4's head has a softcap), at a sampling temperature."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny[arch], dtype=torch.float32)
    head_w = model.get_output_embeddings().weight
    model.get_output_embeddings().weight = torch.nn.Parameter(head_w.detach().clone())
    model.config.tie_word_embeddings = False
    g = torch.Generator().manual_seed(1)
    V = head_w.size(0)

    def ids(n):
        return torch.randint(3, V, (n,), generator=g).tolist()

    prompts = [ids(5), ids(3), ids(7)]
    comps = [ids(6), ids(4), ids(9)]  # anchor, sample 1, sample 2
    T = 0.7
    grads = [_autograd_head_gradient(model, p, c, T).flatten() for p, c in zip(prompts, comps)]
    expected = [float(torch.nn.functional.cosine_similarity(grads[0], x, dim=0)) for x in grads[1:]]

    hidden = completion_hidden_states(model, prompts, comps, pad_token_id=0, micro_batch_size=2)
    seqs = [(h, torch.tensor(c)) for h, c in zip(hidden, comps)]
    head = Head.of(model, temperature=T)
    assert (head.softcap is not None) == (arch == "gemma4_text")
    for compute in ("explicit", "gram"):
        ours = problem_cosines(head, seqs[0], seqs[1:], compute=compute, chunk=64)
        assert ours.tolist() == pytest.approx(expected, abs=1e-5), compute
    # the gradient itself, formed whole, is autograd's
    h, y = seqs[1]
    assert torch.allclose(explicit_gradient(head, h, y).flatten(), grads[1], atol=1e-5)


def _random_problem(V=53, d=6, lengths=(4, 7, 0, 3), n_anchor=5, seed=0, softcap=None):
    g = torch.Generator().manual_seed(seed)
    head = Head(torch.randn(V, d, generator=g), torch.randn(V, generator=g), softcap, 0.8)

    def seq(n):
        return torch.randn(n, d, generator=g), torch.randint(0, V, (n,), generator=g)

    return head, seq(n_anchor), [seq(n) for n in lengths]


@pytest.mark.parametrize("softcap", [None, 3.0])
def test_chunked_gram_and_explicit_agree(softcap):
    head, anchor, rollouts = _random_problem(softcap=softcap)
    whole = problem_cosines(head, anchor, rollouts, compute="explicit", chunk=None)
    for compute in ("explicit", "gram", "auto"):
        for chunk in (None, 1, 7, 53, 1000):
            got = problem_cosines(head, anchor, rollouts, compute=compute, chunk=chunk)
            assert torch.allclose(got, whole, atol=1e-6), (compute, chunk)
    # against the gradients formed whole: <G, A> / (|G| |A|); an empty sample has cosine 0
    a = explicit_gradient(head, *anchor).flatten()
    for cos, (h, y) in zip(whole.tolist(), rollouts):
        gr = explicit_gradient(head, h, y, chunk=5).flatten()
        want = float(gr @ a / (gr.norm() * a.norm())) if len(y) else 0.0
        assert cos == pytest.approx(want, abs=1e-6)
    assert whole[2] == 0.0


def test_token_mean_is_the_mean_of_each_tokens_cosine():
    head, anchor, rollouts = _random_problem(seed=3)
    a = explicit_gradient(head, *anchor).flatten()
    want = []
    for h, y in rollouts:
        per = [
            torch.nn.functional.cosine_similarity(
                explicit_gradient(head, h[t : t + 1], y[t : t + 1]).flatten(), a, dim=0
            )
            for t in range(len(y))
        ]
        want.append(float(torch.stack(per).mean()) if per else 0.0)
    for compute in ("explicit", "gram"):
        for chunk in (None, 4):
            got = problem_cosines(head, anchor, rollouts, "token_mean", compute, chunk)
            assert got.tolist() == pytest.approx(want, abs=1e-6), (compute, chunk)


def test_sum_and_mean_reductions_have_one_cosine():
    """The token mean of a gradient is the sum over n: a cosine cannot tell them apart."""
    head, anchor, rollouts = _random_problem(seed=5)
    a = explicit_gradient(head, *anchor).flatten()
    h, y = rollouts[0]
    g = explicit_gradient(head, h, y).flatten()
    assert float(torch.nn.functional.cosine_similarity(g / len(y), a, dim=0)) == pytest.approx(
        float(problem_cosines(head, anchor, rollouts[:1])[0]), abs=1e-6
    )
    with pytest.raises(ValueError, match="gar.reduction"):
        problem_cosines(head, anchor, rollouts, reduction="mean")
    with pytest.raises(ValueError, match="gar.compute"):
        problem_cosines(head, anchor, rollouts, compute="fast")


# ------------------------------------------------------------------------- the reward


def test_reward_rules():
    correct = np.array([[1.0, 0.0, np.nan], [0.0, 1.0, 0.0]])
    cos = np.array([[0.4, -0.3, 0.9], [0.2, 0.8, -0.5]])
    anchored = np.array([True, False])
    r = gar_rewards(correct, cos, anchored, 0.5)  # clipped, all, outcome_only
    np.testing.assert_allclose(r, [[1.2, 0.0, np.nan], [0.0, 1.0, 0.0]])
    r = gar_rewards(correct, cos, anchored, 0.5, cosine_mode="signed")
    np.testing.assert_allclose(r, [[1.2, -0.15, np.nan], [0.0, 1.0, 0.0]])
    r = gar_rewards(correct, cos, anchored, 0.5, apply_to="wrong", cosine_mode="signed")
    np.testing.assert_allclose(r, [[1.0, -0.15, np.nan], [0.0, 1.0, 0.0]])
    r = gar_rewards(correct, cos, anchored, 0.5, missing="drop")
    np.testing.assert_allclose(r, [[1.2, 0.0, np.nan], [np.nan] * 3])
    assert needs_cosine(correct, anchored).tolist() == [[True, True, False], [False] * 3]
    with pytest.raises(ValueError, match="gar.cosine"):
        gar_rewards(correct, cos, anchored, 0.5, cosine_mode="abs")
    with pytest.raises(ValueError, match="gar.apply_to"):
        needs_cosine(correct, anchored, "correct")


def test_worked_solutions_and_anchor_ids():
    from agon.tasks.deepmath import DeepMathTask
    from agon.tasks.reasoning_gym import ReasoningGymTask
    from agon.toy.tokenizer import build_tokenizer

    arith = ArithTask(n_train=0, n_test=3, n_validation=0)
    p = arith.problems("test")[0]
    assert arith.worked_solution(p) == ArithTask.solution(p)
    code = ToyCodeTask(n_train=0, n_test=1, n_validation=0)
    q = code.problems("test")[0]
    assert code.worked_solution(q) == ToyCodeTask.solution(q)
    assert code.worked_solution(q).startswith("```python")
    assert ParityTask().worked_solution(ParityTask().problems("train")[0]) is None

    rg = ReasoningGymTask("gsm_symbolic")
    item = {"question": "Q?", "answer": "7", "metadata": {"answer_cot": "3+4=7\n#### 7"}}
    assert rg.worked_solution(rg.problem_of(item, 0)) == "3+4=7\n\\boxed{7}"
    no_marker = {"question": "Q?", "answer": "7", "metadata": {"answer_cot": "3+4=7"}}
    assert rg.worked_solution(rg.problem_of(no_marker, 0)) == "3+4=7\n\\boxed{7}"
    assert rg.worked_solution(rg.problem_of({"question": "Q", "answer": "1"}, 0)) is None
    dm = DeepMathTask(source="unused.jsonl")
    with_r1 = Problem("d", "Q", "1", 9.0, {"r1_solutions": ["  ", "so \\boxed{1}", None]})
    assert dm.worked_solution(with_r1) == "so \\boxed{1}"
    assert dm.worked_solution(Problem("d", "Q", "1", 9.0, {"topic": "x"})) is None

    tok = build_tokenizer([ArithTask.solution(x) for x in arith.problems("test")], vocab_size=280)
    got = anchor_ids(arith, p, tok, max_tokens=100)
    assert tok.decode(got[:-1]) == ArithTask.solution(p) and got[-1] == tok.eos_token_id
    assert anchor_ids(arith, p, tok, max_tokens=2) == got[:2]
    assert anchor_ids(ParityTask(), ParityTask().problems("train")[0], tok, 9) is None


# ------------------------------------------------------------------------- settings and a run


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two tiny random qwen3 models (A and B), built once for this module."""
    return qwen3_models(tmp_path_factory, "gar-models")


def _toy_config(models, **gar) -> dict:
    return solo_toy_config(models, "gar", gar)


def test_settings_from_config(tmp_path, models):
    from agon.registry import TRAINERS

    cfg = load_config(write_config(tmp_path, _toy_config(models)))
    assert cfg["gar"] == {
        "weight": 0.5,
        "gradient": "lm_head",
        "reduction": "sum",
        "anchor": "worked_solution",
        "anchor_max_tokens": None,
        "missing": "outcome_only",
        "cosine": "clipped",
        "apply_to": "all",
        "compute": "auto",
        "vocab_chunk": 8192,
    }
    s = TRAINERS.get("gar").settings_from_config(cfg, cfg["families"][0], seed=3)
    assert isinstance(s, GARSettings)
    assert (s.weight, s.num_generations, s.max_new_tokens, s.seed) == (0.5, 3, 8, 3)
    config = _toy_config(models, cosine="signed", apply_to="wrong")
    cfg = load_config(write_config(tmp_path, config))
    s = GARSettings.from_config(cfg, cfg["families"][0])
    assert (s.cosine, s.apply_to) == ("signed", "wrong")
    with pytest.raises(ConfigError, match="gar"):
        load_config(write_config(tmp_path, _toy_config(models, cosine="abs")))
    with pytest.raises(ValueError, match="missing"):
        GARSettings(missing="skip")


def test_weight_zero_is_the_grpo_step(models):
    """w = 0 takes exactly GRPO's step of the policy-gradient core (agon.rl.grpo_step),
    cosines computed or not; w > 0 changes the loss through the reward."""
    from agon import rl
    from baselines.gar.step import gar_step
    from tests.duel_helpers import tiny_policies

    task = ArithTask(n_train=8, n_test=1, n_validation=0, levels=2, hard_min_level=2)
    task.grading_workers, root = 1, models[0].parent
    problems = task.problems("train")[:2]
    kw = dict(problems_per_step=2, num_generations=4, max_new_tokens=6, learning_rate=1e-2)
    s0 = GARSettings(weight=0.0, **kw)
    gar = tiny_policies("qwen3", root, s0, names=["A"], seeds=[0])
    grpo = tiny_policies("qwen3", root, s0, names=["A"], seeds=[0])
    m_gar = gar_step(task, gar, problems, s0, step=0)
    m_grpo = rl.grpo_step(task, grpo, problems, s0, step=0)
    assert m_gar["A/loss"] == pytest.approx(m_grpo["A/loss"], abs=1e-7)
    for p, q in zip(gar["A"].model.parameters(), grpo["A"].model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert m_gar["A/gar/scored"] == 8 and m_gar["A/gar/no_anchor"] == 0
    assert -1 <= m_gar["A/gar/cosine"] <= 1 and m_gar["A/gar/bonus"] == 0.0
    # the anchors are forwarded; the samples' hidden states are the rollout's own
    assert m_gar["A/gar/anchor_tokens"] > 0 and m_gar["A/gar/rollout_tokens"] == 0

    s1 = GARSettings(weight=0.5, cosine="signed", **kw)
    scored = tiny_policies("qwen3", root, s1, names=["A"], seeds=[0])
    m = gar_step(task, scored, problems, s1, step=0)
    assert m["A/drafter/correct"] == m_grpo["A/drafter/correct"]  # the same samples
    assert m["A/drafter/reward"] != pytest.approx(m_grpo["A/drafter/reward"])
    assert m["A/loss"] != pytest.approx(m_grpo["A/loss"])


def test_toy_run_writes_summary_and_moves_both_models(tmp_path, models, monkeypatch):
    """`agon train --method gar` on the toy arith task with tiny models: two steps (resume is
    the duel's loop's, tested with it); the run closes its policies (their rollout engines)
    once their models are saved, not at interpreter exit."""
    from transformers import AutoModelForCausalLM

    from agon.training import shell
    from agon.training.run import run

    closed, close = [], shell.close_policies

    def recording(policies, accelerator):
        closed.append((sorted(policies), (tmp_path / "run" / "A").is_dir()))
        close(policies, accelerator)

    monkeypatch.setattr(shell, "close_policies", recording)

    # untrained models answer wrong and their cosines sit near 0: signed, they still differ
    config = write_config(tmp_path, _toy_config(models, cosine="signed"))
    out = tmp_path / "run"
    payload = run(config, "tiny", "arith", "gar", seed=0, out=out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "gar" and summary["steps"] == payload["steps"] == 2
    assert summary["settings"]["weight"] == 0.5
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    for name in ("A", "B"):
        assert summary[f"{name}/steps"] == 2 and summary[f"{name}/tokens_generated"] > 0
        for key in (f"{name}/drafter/correct", f"{name}/loss", f"{name}/gar/cosine"):
            assert math.isfinite(rows[0][key]), key
        assert rows[0][f"{name}/gar/scored"] == 6 and rows[0][f"{name}/gar/no_anchor"] == 0
        assert summary[f"{name}/gar_anchor_tokens"] == sum(
            r[f"{name}/gar/anchor_tokens"] for r in rows
        )
        # the trainer's transformers engine records the samples' states: none forwarded again
        assert summary[f"{name}/gar_rollout_tokens"] == 0 and summary[f"{name}/gar_no_anchor"] == 0
        row = _toy_config(models)["families"][0][f"model_{name.lower()}"]
        before = AutoModelForCausalLM.from_pretrained(row["model"])
        after = AutoModelForCausalLM.from_pretrained(out / name)
        assert any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters()))
    assert 0 < summary["gar_time_s"] <= summary["train_time_s"]
    assert closed == [(["A", "B"], True)]  # once, after the models were saved


# ------------------------------------------------------------------------- the samples' states


@pytest.mark.parametrize("arch", ARCHS)
def test_rollout_records_the_hidden_states_a_second_forward_makes(arch, tiny):
    """The engine records, per completion, the final hidden states that predicted its tokens:
    those of the extra forward (to float rounding), with the very same samples as without
    recording; only inside the block, and only for the completions sampled there."""
    from agon.engines import SamplingParams
    from agon.engines.hf import HFEngine

    torch.manual_seed(0)
    engine = HFEngine(str(tiny[arch]), dtype="float32", device="cpu", batch_size=5)
    task = ArithTask(n_train=6, n_test=1, n_validation=0, levels=3, hard_min_level=2)
    prompts = [task.solve_prompt(p) for p in task.problems("train")[:3]]
    sp = SamplingParams(max_new_tokens=12, seed=1, prompt_seeds=(5, 6, 7))
    plain = engine.generate(prompts, n=3, sampling=sp)
    with engine.recording_hidden_states() as hidden:
        rows = engine.generate(prompts, n=3, sampling=sp)
    after = engine.generate(prompts, n=3, sampling=sp)
    flat = [c for row in rows for c in row]
    assert [c.token_ids for row in plain for c in row] == [c.token_ids for c in flat]
    assert [c.logprobs for row in plain for c in row] == [c.logprobs for c in flat]
    assert len(hidden) == 9 and all(hidden.of(c) is None for row in plain + after for c in row)
    forwarded = completion_hidden_states(
        engine.model, [c.prompt_token_ids for c in flat], [c.token_ids for c in flat], 0
    )
    for c, want in zip(flat, forwarded):
        assert hidden.of(c).shape == want.shape == (len(c.token_ids), 32)
        assert torch.allclose(hidden.of(c), want, atol=1e-5)
    hidden.clear()
    assert len(hidden) == 0 and hidden.of(flat[0]) is None


def _reference_cosines(task, policy, ro, s) -> tuple[np.ndarray, dict[str, float]]:
    """The cosines as GAR took them before the rollout recorded hidden states, kept as the
    reference: one no-grad forward over each problem's anchor and its samples, then
    :func:`problem_cosines` per problem."""
    from baselines.gar.reward import anchor_ids

    P, G = ro.correct.shape
    limit = s.anchor_max_tokens or s.max_new_tokens
    anchors = [anchor_ids(task, p, policy.engine.tokenizer, limit) for p in ro.problems]
    need = needs_cosine(ro.correct, np.array([a is not None for a in anchors]), s.apply_to)
    prompts, comps, where = [], [], []
    for k in range(P):
        samples = [g for g in range(G) if need[k, g]]
        if samples:
            rows = ro.completions[k]
            prompts += [rows[0].prompt_token_ids] + [rows[g].prompt_token_ids for g in samples]
            comps += [anchors[k]] + [rows[g].token_ids for g in samples]
            where.append((k, samples))
    hidden = completion_hidden_states(
        policy.model, prompts, comps, policy.pad_token_id, s.packing, s.micro_batch_size
    )
    head = Head.of(policy.model, s.temperature)
    cosine, at = np.full((P, G), np.nan), 0
    tokens = {"anchor_tokens": 0.0, "rollout_tokens": 0.0}
    for k, samples in where:
        seqs = [(hidden[j], torch.tensor(comps[j])) for j in range(at, at + 1 + len(samples))]
        cos = problem_cosines(head, seqs[0], seqs[1:], s.reduction, s.compute, s.vocab_chunk)
        cosine[k, samples] = cos.numpy()
        tokens["anchor_tokens"] += len(prompts[at]) + len(comps[at])
        tokens["rollout_tokens"] += sum(
            len(prompts[j]) + len(comps[j]) for j in range(at + 1, at + 1 + len(samples))
        )
        at += 1 + len(samples)
    return cosine, tokens


@pytest.mark.parametrize("reduction", ["sum", "token_mean"])
def test_cosines_from_the_rollouts_states_are_the_old_paths(reduction, models):
    """GAR's cosines from the states the rollout recorded equal, to 1e-5, those of the old path
    that forwarded every sample again (:func:`_reference_cosines`), which forwards the anchors
    alone; an engine that cannot record (sampling under autocast) still forwards the samples,
    as the old path did, to the same cosines."""
    from dataclasses import replace

    from agon import rl
    from baselines.gar.step import gar_step, records_hidden, score_rollouts
    from tests.duel_helpers import tiny_policies

    task = ArithTask(n_train=8, n_test=1, n_validation=0, levels=3, hard_min_level=2)
    task.grading_workers = 1
    problems = task.problems("train")[:3]
    s = GARSettings(problems_per_step=3, num_generations=4, max_new_tokens=10, reduction=reduction)
    policy = tiny_policies("qwen3", models[0].parent, s, names=["A"], seeds=[0])["A"]
    assert records_hidden(policy)
    try:
        with policy.engine.recording_hidden_states() as hidden:
            ro = rl.solo_rollout(task, "A", policy, problems, s, step=0)
        want, tokens = _reference_cosines(task, policy, ro, s)
        got = score_rollouts(task, policy, ro, s, hidden)
        np.testing.assert_allclose(got.cosine, want, atol=1e-5)
        assert got.counts["rollout_tokens"] == 0 < tokens["rollout_tokens"]
        assert got.counts["anchor_tokens"] == tokens["anchor_tokens"] > 0
        # with no states given, the samples are forwarded again: the old path itself
        again = score_rollouts(task, policy, ro, s)
        np.testing.assert_allclose(again.cosine, want, atol=1e-7)
        assert again.counts["rollout_tokens"] == tokens["rollout_tokens"]
        policy.engine.autocast_dtype = torch.bfloat16  # samples in another precision: no states
        assert not records_hidden(policy)
        row = gar_step(task, {"A": policy}, problems, replace(s, learning_rate=1e-30), step=1)
        assert row["A/gar/rollout_tokens"] > 0
    finally:
        task.close()


def test_bench_times_two_steps_that_both_train(models):
    """``bench/bench_gar.py``: a random model solves nothing, so GRPO's step on the bare task
    skips its update while GAR's trains; graded by :class:`bench.bench_gar.SomeRight` (the
    verifier, then about half counted right), both train on the same samples."""
    from agon import rl
    from baselines.gar.step import gar_step
    from bench.bench_gar import SomeRight
    from tests.duel_helpers import tiny_policies

    task = ArithTask(n_train=8, n_test=1, n_validation=0, levels=3, hard_min_level=2)
    task.grading_workers = 1
    problems = task.problems("train")[:2]
    s = GARSettings(problems_per_step=2, num_generations=4, max_new_tokens=8, learning_rate=1e-30)
    policy = tiny_policies("qwen3", models[0].parent, s, names=["A"], seeds=[0])
    try:
        bare = rl.grpo_step(task, policy, problems, s, step=0)
        graded = rl.grpo_step(SomeRight(task), policy, problems, s, step=0)
        gar = gar_step(SomeRight(task), policy, problems, s, step=0)
    finally:
        task.close()
    assert bare["A/drafter/correct"] == 0.0 and bare["A/zero_advantage"] == 1.0
    assert 0.0 < graded["A/drafter/correct"] < 1.0
    assert graded["A/zero_advantage"] == gar["A/zero_advantage"] == 0.0
    assert graded["A/trained_tokens"] == gar["A/trained_tokens"] == bare["A/trained_tokens"]


def test_a_task_without_worked_solutions_is_refused(tmp_path, models):
    from baselines.gar.trainer import check

    s = GARSettings()
    with pytest.raises(ValueError, match="worked solution"):
        check({}, {}, ParityTask(), s, None)
    check({}, {}, ArithTask(n_train=3, n_test=1, n_validation=0), s, None)
