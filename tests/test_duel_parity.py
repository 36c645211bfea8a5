"""Parity: the duel trainer's loss is TRL GRPOTrainer's loss.

Same tiny model, same prompts/completions (ragged, left-padded prompts), same advantages: our
:func:`agon.loss.policy_loss` over :func:`agon.logprobs.token_logprobs` must equal
``GRPOTrainer._compute_loss`` to 1e-5, and so must the gradients, for every loss_type both
support, with and without the KL term. The policy-gradient core (:mod:`agon.rl`) scores and
normalizes exactly like this, so its GRPO step is TRL's and Agon differs from GRPO only by the
duel.
"""

from __future__ import annotations

import copy

import pytest
import torch

from agon import logprobs as scoring
from agon import rl
from agon.loss import policy_loss
from agon.random_models import build_tiny_model

MAX_COMPLETION = 8
TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model("qwen3", tmp_path_factory.mktemp("tiny") / "qwen3")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _batch(pad_id: int, vocab: int):
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(5, vocab, (n,), generator=g).tolist() for n in (5, 9, 3, 7)]
    comps = [torch.randint(5, vocab, (n,), generator=g).tolist() for n in (8, 2, 5, 1)]
    adv = torch.tensor([1.3, -0.7, 0.2, -0.8])
    return prompts, comps, adv


def _trl_trainer(model, tok, loss_type: str, beta: float, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        loss_type=loss_type,
        beta=beta,
        max_completion_length=MAX_COMPLETION,
        num_generations=2,
        per_device_train_batch_size=4,
        report_to=[],
        use_cpu=True,
        temperature=TEMPERATURE,
        gradient_checkpointing=False,
        bf16=False,  # fp32 on both sides: TRL would autocast to bf16 on CPU
    )
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}]}] * 4)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[lambda prompts, completions, **kw: [0.0] * len(completions)],
        args=args,
        train_dataset=ds,
        processing_class=tok,
    )
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which we do not run
    trainer.model.train()
    return trainer


@pytest.mark.parametrize(
    "loss_type,beta",
    [("dapo", 0.0), ("dr_grpo", 0.0), ("grpo", 0.0), ("dapo", 0.05), ("grpo", 0.05)],
)
def test_loss_and_grads_match_trl(tiny, tmp_path, loss_type, beta):
    base, tok = tiny
    ours_model, trl_model, ref_model = copy.deepcopy(base), copy.deepcopy(base), copy.deepcopy(base)
    with torch.no_grad():  # a reference that differs from the policy, so the KL term is not 0
        for p in ref_model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    prompts, comps, adv = _batch(tok.pad_token_id, len(tok))
    ids, attn, cmask = scoring.collate(prompts, comps, tok.pad_token_id)
    P = max(map(len, prompts))

    for m in (ours_model, ref_model):
        scoring.enable_token_logprobs(m, TEMPERATURE)
    ref_logps = (
        scoring.token_logprobs(ref_model, ids, attn, cmask.size(1))[0].detach() if beta else None
    )
    # "old" log-probs of an earlier iteration (num_iterations > 1): ratios away from 1, so the
    # clipping bites and the loss value depends on the model (with old == logps it would be
    # -mean(adv))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        old_logps = scoring.token_logprobs(ours_model, ids, attn, cmask.size(1))[
            0
        ] + 0.3 * torch.randn(cmask.shape, generator=g)

    ours_model.train()
    logps, _ = scoring.token_logprobs(ours_model, ids, attn, cmask.size(1))
    # micro-batches of 3 + 1 rows with global normalizers must add up to the full-batch loss
    ours = 0.0
    for sl in (slice(0, 3), slice(3, 4)):
        out = policy_loss(
            logps[sl],
            adv[sl],
            cmask[sl],
            loss_type,
            old_logps=old_logps[sl],
            ref_logps=None if ref_logps is None else ref_logps[sl],
            beta=beta,
            max_completion_length=MAX_COMPLETION,
            num_sequences=ids.size(0),
            num_tokens=float(cmask.sum()),
        )
        ours = ours + out.loss
    ours.backward()

    trainer = _trl_trainer(trl_model, tok, loss_type, beta, tmp_path)
    inputs = {
        "prompt_ids": ids[:, :P],
        "prompt_mask": attn[:, :P],
        "completion_ids": ids[:, P:],
        "completion_mask": cmask,
        "advantages": adv,
        "num_items_in_batch": cmask.sum(),
        "old_per_token_logps": old_logps,
    }
    if beta:
        inputs["ref_per_token_logps"] = ref_logps
    theirs = trainer._compute_loss(trainer.model, inputs)
    theirs.backward()

    assert abs(float(ours.detach()) - float(theirs.detach())) < 1e-5, (float(ours), float(theirs))
    assert (
        abs(float(theirs) + float(adv.mean())) > 1e-3
    )  # the loss is not the model-free -mean(adv)
    for (name, a), (_, b) in zip(ours_model.named_parameters(), trainer.model.named_parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), (
            name,
            float((a.grad - b.grad).abs().max()),
            float(b.grad.abs().max()),
        )


def test_group_advantages_match_trl_formula():
    """Contiguous equal groups: ours equals TRL's (r - mean) / (nanstd + 1e-4), and 'batch' too."""
    from trl.trainer.utils import nanstd

    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 2.0, 0.5])
    G = 3
    mean = r.view(-1, G).mean(1).repeat_interleave(G)
    std = nanstd(r.view(-1, G), dim=1).repeat_interleave(G)
    expected = (r - mean) / (std + 1e-4)
    ours = rl.group_advantages(r.numpy(), [0, 0, 0, 1, 1, 1, 2, 2, 2], "group").values
    assert torch.allclose(torch.tensor(ours, dtype=torch.float32), expected, atol=1e-6)
    expected_b = (r - mean) / (nanstd(r) + 1e-4)
    ours_b = rl.group_advantages(r.numpy(), [0, 0, 0, 1, 1, 1, 2, 2, 2], "batch").values
    assert torch.allclose(torch.tensor(ours_b, dtype=torch.float32), expected_b, atol=1e-6)
