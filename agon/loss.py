"""The clipped policy-gradient loss of TRL's GRPOTrainer, on one micro-batch of completions.

Every in-house trainer updates with it (:func:`agon.rl.update`): both of the duel's roles, and
each model alone in GRPO's step (:func:`agon.rl.grpo_step`), which
``tests/test_duel_parity.py`` shows equals TRL's GRPOTrainer: the duel and the GRPO baseline
differ in what they sample and reward, not in the loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agon.training.settings import LOSS_TYPES


@dataclass
class LossOutput:
    """The loss to backpropagate and detached statistics of it."""

    loss: torch.Tensor
    kl: float = float("nan")  # mean per-token KL to the reference (NaN when beta == 0)
    clip_ratio: float = 0.0  # fraction of tokens whose ratio was clipped


def policy_loss(
    logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    loss_type: str = "dapo",
    old_logps: torch.Tensor | None = None,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    max_completion_length: int | None = None,
    num_sequences: int | None = None,
    num_tokens: float | None = None,
    kl_ratio_correction: bool = True,
) -> LossOutput:
    """The clipped policy-gradient loss of TRL's GRPOTrainer (``_compute_loss``), one micro-batch.

    ``logps``, ``mask`` (B, T): per-token log-probabilities of the completion tokens (with
    grad) and which tokens are trained on; ``advantages`` (B,), one per sequence (GRPO, the
    duel), or (B, T), one per token (the Cliff baseline; a (B, T) tensor constant along T is
    the (B,) case). ``old_logps`` defaults to
    ``logps.detach()`` (one gradient step per rollout, ratio 1). The KL term is TRL's k3
    estimator to ``ref_logps``, multiplied by the ratio when ``kl_ratio_correction`` (TRL's
    ``use_bias_correction_kl``: the unbiased reverse-KL gradient). Normalization, so that
    micro-batches sum to the full-batch loss:

    - ``grpo``: mean over sequences of each sequence's token mean (``num_sequences`` in total),
    - ``dr_grpo``: token sum / (``num_sequences`` * ``max_completion_length``),
    - ``dapo``: token sum / ``num_tokens`` (all trained tokens of the batch).

    Each normalizer defaults to this micro-batch's own count.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"unknown loss_type {loss_type!r}; expected one of {LOSS_TYPES}")
    # mask and advantages are built on the CPU; logps live on the model's device
    mask = mask.to(device=logps.device, dtype=logps.dtype)
    adv = advantages.to(device=logps.device, dtype=logps.dtype)
    if adv.dim() == 2:  # per token
        if adv.shape != logps.shape:
            raise ValueError(
                f"per-token advantages {tuple(adv.shape)} must have the shape of the log-probs "
                f"{tuple(logps.shape)}"
            )
    else:  # per sequence
        adv = adv.reshape(-1, 1)
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    kl_mean = float("nan")
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta != 0 needs ref_logps (log-probs under the frozen reference)")
        per_token_kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        if kl_ratio_correction:
            per_token_kl = per_token_kl * ratio
        per_token = per_token + beta * per_token_kl
        kl_mean = float((per_token_kl.detach() * mask).sum() / mask.sum().clamp(min=1.0))
    n_seq = num_sequences if num_sequences is not None else logps.size(0)
    if loss_type == "grpo":
        per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        loss = per_seq.sum() / max(n_seq, 1)
    elif loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("loss_type dr_grpo needs max_completion_length (the generation limit)")
        loss = (per_token * mask).sum() / (max(n_seq, 1) * max_completion_length)
    else:  # dapo
        n_tok = num_tokens if num_tokens is not None else mask.sum()
        loss = (per_token * mask).sum() / torch.as_tensor(n_tok, dtype=logps.dtype).clamp(min=1.0)
    with torch.no_grad():
        is_clipped = ((ratio < 1 - epsilon_low) & (adv < 0)) | (
            (ratio > 1 + epsilon_high) & (adv > 0)
        )
        clip_ratio = float((is_clipped.to(mask.dtype) * mask).sum() / mask.sum().clamp(min=1.0))
    return LossOutput(loss=loss, kl=kl_mean, clip_ratio=clip_ratio)
