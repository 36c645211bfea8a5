"""Log-probabilities of completions under a policy: what the duel trainer's loss is made of.

The model gets TRL's fused LM head (:func:`enable_token_logprobs`), so per-token log-probs and
entropies come without materializing the (B, T, V) logits and exactly as GRPOTrainer computes
them. :func:`completion_logprobs` scores a batch of (prompt, completion) pairs either packed
several per row (:mod:`agon.packing`; no padding) or in TRL's padded layout
(:func:`collate`, :func:`token_logprobs`), which the parity tests compare with GRPOTrainer.
:func:`frozen_logprobs` scores without a gradient, micro-batch by micro-batch (a reference
model, the sampling policy before an update, a teacher); :func:`frozen_scorer` makes a model
such a scorer (dropout off, evaluation mode, no gradients, the fused head).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agon.packing import pack, supports_packing


def collate(
    prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]], pad_token_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[left-padded prompt | right-padded completion]`` ids, attention mask, completion mask."""
    cmask = completion_mask(completion_ids).long()
    P, (B, C) = max(len(p) for p in prompt_ids), cmask.shape
    ids = torch.full((B, P + C), pad_token_id, dtype=torch.long)
    attn = torch.zeros((B, P + C), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        ids[i, P - len(p) : P] = torch.tensor(p, dtype=torch.long)
        attn[i, P - len(p) : P] = 1
        if c:
            ids[i, P : P + len(c)] = torch.tensor(c, dtype=torch.long)
            attn[i, P : P + len(c)] = 1
    return ids, attn, cmask


def enable_token_logprobs(model: torch.nn.Module, temperature: float) -> None:
    """Give ``model`` TRL's fused LM head, so log-probs come without the (B, T, V) logits.

    The same head GRPOTrainer adds, so the in-house GRPO step scores tokens exactly as TRL
    does; generation (``fused_lm_head=False``) is unchanged. Idempotent for a given temperature.
    """
    if getattr(model, "_agon_fused_temperature", None) == temperature:
        return
    # lazy: trl (its trainer utils load datasets too): off import agon.rl and agon.duel
    # (agon train's checks before a model loads)
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
    model._agon_fused_temperature = temperature


def dropout_off(model: torch.nn.Module) -> None:
    """Every dropout of ``model`` at p = 0 (TRL's ``disable_dropout``): sampling and scoring see
    one network."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def frozen_scorer(model: torch.nn.Module, temperature: float) -> torch.nn.Module:
    """``model`` as a frozen scorer of tokens at ``temperature``: dropout off, evaluation mode,
    no gradients, the fused head (a KL reference, a teacher)."""
    dropout_off(model)
    model.eval().requires_grad_(False)
    enable_token_logprobs(model, temperature)
    return model


def micro_batches(n: int, size: int) -> list[slice]:
    """``0..n-1`` in slices of at most ``size``: the micro-batches of a forward."""
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def frozen_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    width: int,
    pad_token_id: int,
    packing: bool,
    parts: Sequence[slice],
) -> list[torch.Tensor]:
    """The per-token log-probs of each micro-batch ``parts`` of the completions (as
    :func:`completion_logprobs`), with no gradient: one ``(len(part), width)`` tensor each.

    ``parts`` may reach past this process's completions (:func:`micro_batches` of the whole
    batch's count): every process then runs as many forwards, as sharded models need."""
    with torch.no_grad():
        return [
            completion_logprobs(
                model, prompt_ids[c], completion_ids[c], width, pad_token_id, packing
            )[0]
            for c in parts
        ]


def token_logprobs(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropies of the last ``n_completion`` tokens of each row.

    Rows are ``[left-padded prompt | right-padded completion]``; the model must have been
    through :func:`enable_token_logprobs`.
    """
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-n_completion] = -100
    out = model(
        input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True
    )
    return out.log_probs[:, -n_completion:], out.entropy[:, -n_completion:]


def completion_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    width: int,
    pad_token_id: int,
    packing: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropies of each completion given its prompt, as ``(n, width)``
    tensors (zero past a completion's end) on the model's device (the ids are built on the CPU
    and moved there).

    ``packing`` (when the model supports it) scores the sequences packed several per row, with
    positions 0..len-1 as the sampler had them; otherwise rows are TRL's
    ``[left-padded prompt | right-padded completion]`` (:func:`collate`). The two agree to float
    rounding (RoPE sees the same relative positions); packing skips the padding, which in a
    reader's batch is the spread of draft lengths plus that of read lengths.
    """
    dev = model_device(model)
    if not (packing and supports_packing(model)):
        ids, attn, _ = collate(prompt_ids, completion_ids, pad_token_id)
        n_completion = ids.size(1) - max(len(p) for p in prompt_ids)
        logps, ent = token_logprobs(model, ids.to(dev), attn.to(dev), n_completion)
        return _fit(logps, width), _fit(ent, width)
    p = pack(
        [[*a, *b] for a, b in zip(prompt_ids, completion_ids)],
        pad_token_id,
        labels=[[-100] * len(a) + list(b) for a, b in zip(prompt_ids, completion_ids)],
    )
    out = model(
        input_ids=p.input_ids.to(dev),
        position_ids=p.position_ids.to(dev),
        labels=p.labels.to(dev),
        fused_lm_head=True,
    )
    # out.* are shifted: column t scores token t + 1, so completion token j sits at
    # len(prompt) - 1 + j
    first = [len(a) - 1 for a in prompt_ids]
    off = ~completion_mask(completion_ids, width).to(dev)
    return p.gather(out.log_probs, first, width).masked_fill(off, 0.0), p.gather(
        out.entropy, first, width
    ).masked_fill(off, 0.0)


def model_device(model: torch.nn.Module) -> torch.device:
    """Where ``model``'s weights live (also through a DDP wrapper): its inputs go there."""
    return next(model.parameters()).device


def completion_mask(
    completion_ids: Sequence[Sequence[int]], width: int | None = None
) -> torch.Tensor:
    """``(n, width)`` bool mask of each completion's tokens (width: the longest, at least 1)."""
    lengths = torch.tensor([len(c) for c in completion_ids], dtype=torch.long)
    width = max(int(lengths.max()) if len(lengths) else 0, 1) if width is None else width
    return torch.arange(width) < lengths.unsqueeze(1)


def _fit(x: torch.Tensor, width: int) -> torch.Tensor:
    """``x`` cut or zero-padded on the right to ``width`` columns."""
    return (
        x[:, :width] if x.size(1) >= width else torch.nn.functional.pad(x, (0, width - x.size(1)))
    )
