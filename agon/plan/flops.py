"""FLOPs of generating and of training on sequences, for any :class:`~agon.plan.dims.ModelDims`.

With ``N_b`` the backbone's multiply-add parameters and ``N_h = vocab x hidden`` the LM head's
(:func:`agon.plan.dims.flop_params`; embedding lookups cost nothing):

- **One forward** over a sequence of ``T = p + c`` tokens whose head runs on ``k`` positions:
  ``2 N_b T + 2 N_h k`` plus attention: per attention layer ``4 x heads x head_dim`` per
  (token, attended token) pair (QK^T and AV), a token at position ``i`` attending to
  ``min(i + 1, window)`` tokens (all of them on full layers); plus per Gated DeltaNet layer and
  token ``4 x value heads x key dim x value dim`` (the state's decay, update and readout).
- **Generation** of a completion of ``c`` tokens after a prompt of ``p``: the prefill is a
  forward over the prompt, each new token a forward of one position attending to its context;
  summed, it is one forward over ``p + c`` tokens with the head on the ``c`` new positions
  (:func:`generation_flops`): about ``2 N`` per generated token plus attention over the context.
- **Training** on it (:func:`training_flops`): forward + backward = 3 forwards (the backward
  costs twice the forward), over prompt and completion, since the completion attends to the
  prompt's keys and values and the gradient flows back through them; the head only on the
  completion tokens. That is ``6 N`` per trained token plus ``6 N_b`` per prompt token.
  Gradient checkpointing recomputes the forward once more (x4/3 of the backbone's part);
  ``beta > 0`` adds a forward of the frozen reference, ``num_iterations > 1`` a forward for
  the old log-probs, and ``num_iterations`` repeats the forward + backward.
"""

from __future__ import annotations

from agon.plan.dims import LINEAR, SLIDING, ModelDims, flop_params

FLOPS_PER_MAC = 2  # a multiply-add
BACKWARD_OVER_FORWARD = 2  # the backward computes gradients for inputs and weights: 2 forwards
ATTENTION_FLOPS_PER_PAIR_PER_DIM = 4  # QK^T and AV: 2 multiply-adds per head dimension
LINEAR_STATE_FLOPS = 4  # Gated DeltaNet per token: decay + rank-1 update + readout of the state


def context_sum(start: int, end: int, window: int | None = None) -> float:
    """Sum over positions ``i`` in ``[start, end)`` of the tokens position ``i`` attends to:
    ``min(i + 1, window)`` (causal, ``window`` None: no limit)."""
    if end <= start:
        return 0.0

    def full(a: int, b: int) -> float:  # sum of (i + 1) for i in [a, b)
        return (b * (b + 1) - a * (a + 1)) / 2.0

    if not window:
        return full(start, end)
    cut = max(start, min(end, window))  # positions before `cut` see fewer than `window` tokens
    return full(start, cut) + float(end - cut) * window


def forward_flops(d: ModelDims, prompt: int, completion: int, head_positions: int) -> float:
    """FLOPs of one forward over ``prompt + completion`` tokens, the LM head on
    ``head_positions`` of them (see the module docstring)."""
    n = flop_params(d)
    tokens = prompt + completion
    total = FLOPS_PER_MAC * (n["backbone"] * tokens + n["head"] * head_positions)
    for kind in d.kinds():
        if kind == LINEAR:
            total += (
                LINEAR_STATE_FLOPS
                * d.linear_num_value_heads
                * d.linear_key_head_dim
                * d.linear_value_head_dim
                * tokens
            )
            continue
        _, hd = d.heads_of(kind)
        window = d.sliding_window if kind == SLIDING else None
        pairs = context_sum(0, tokens, window)
        total += ATTENTION_FLOPS_PER_PAIR_PER_DIM * d.num_heads * hd * pairs
    return total


def generation_flops(d: ModelDims, prompt: int, completion: int) -> float:
    """FLOPs of sampling ``completion`` tokens after a ``prompt``-token prompt (prefill and
    decode together)."""
    return forward_flops(d, prompt, completion, completion)


def prefill_flops(d: ModelDims, prompt: int) -> float:
    """FLOPs of the prefill alone (the prompt's forward, the head on its last position)."""
    return forward_flops(d, prompt, 0, 1)


def training_flops(
    d: ModelDims,
    prompt: int,
    completion: int,
    *,
    gradient_checkpointing: bool = False,
    reference_model: bool = False,
    num_iterations: int = 1,
) -> dict[str, float]:
    """FLOPs of training on one sequence (the completion's tokens in the loss), by part:
    ``forward_backward`` (x ``num_iterations``), ``recompute`` (gradient checkpointing),
    ``reference`` (the frozen reference's forward, ``beta > 0``), ``old_logprobs`` (a no-grad
    forward before the first of several iterations), and ``total``."""
    fwd = forward_flops(d, prompt, completion, completion)
    backbone_fwd = forward_flops(d, prompt, completion, 0)
    out = {
        "forward_backward": (1 + BACKWARD_OVER_FORWARD) * fwd * num_iterations,
        "recompute": backbone_fwd * num_iterations if gradient_checkpointing else 0.0,
        "reference": fwd if reference_model else 0.0,
        "old_logprobs": fwd if num_iterations > 1 else 0.0,
    }
    out["total"] = sum(out.values())
    return out
