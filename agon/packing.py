"""Padding-free batches: several sequences share a row, and each attends only to itself.

A padded batch costs ``rows x longest`` tokens whatever the lengths; on the toy world's SFT mix
about half of that is padding, and a reader's batch pads every row to the longest draft plus
the longest read. Packing places the sequences first-fit (longest first) into rows as wide as
the longest one, with position ids that restart at 0 for each sequence. Given such
``position_ids``, no ``attention_mask`` and no KV cache (``use_cache=False``), transformers
reads the rows as packed (``masking_utils.find_packed_sequence_indices``) and builds a
block-diagonal causal mask for full and sliding-window attention, the mechanism behind TRL's
``padding_free``. A row's tail padding becomes a segment of its own that no label reads.

Linear-attention layers (Qwen3.5's gated DeltaNet) carry a state along the row that this mask
does not reset, so :func:`supports_packing` says no for them and callers pad instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

PACKABLE_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})


def supports_packing(model: torch.nn.Module) -> bool:
    """Whether ``model``'s layers all respect the packed-sequence mask (attention only)."""
    while not hasattr(model, "config") and hasattr(model, "module"):  # DDP wraps the model
        model = model.module
    config = (
        model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    )
    layer_types = getattr(config, "layer_types", None)
    return not layer_types or set(layer_types) <= PACKABLE_LAYER_TYPES


@dataclass
class Packed:
    """Packed rows and where each input sequence went."""

    input_ids: torch.Tensor  # (rows, width)
    position_ids: torch.Tensor  # (rows, width); 0..len-1 per sequence, and per tail of padding
    labels: torch.Tensor | None  # (rows, width); -100 off the given labels, None if none given
    row: torch.Tensor  # (n,) row of sequence i
    start: torch.Tensor  # (n,) column where sequence i starts

    def gather(
        self, values: torch.Tensor, offset: Sequence[int] | torch.Tensor, length: int
    ) -> torch.Tensor:
        """``out[i, j] = values[row_i, start_i + offset_i + j]`` for ``j < length``: a padded
        ``(n, length)`` view of per-token ``values`` (rows x width). Positions past a row's end
        read its last column; callers mask what lies beyond each sequence."""
        offset = torch.as_tensor(offset, dtype=torch.long)
        cols = (self.start + offset).unsqueeze(1) + torch.arange(length)
        return values[self.row.unsqueeze(1), cols.clamp(max=values.size(1) - 1)]


def pack(
    seqs: Sequence[Sequence[int]],
    pad_id: int,
    labels: Sequence[Sequence[int]] | None = None,
    width: int | None = None,
) -> Packed:
    """First-fit-decreasing packing of ``seqs`` into rows of ``width`` tokens (default: the
    longest).

    Deterministic: ties keep input order. ``labels``, when given, must match ``seqs`` in shape.
    """
    if not seqs:
        raise ValueError("pack: no sequences")
    lengths = [len(s) for s in seqs]
    if min(lengths) == 0:
        raise ValueError("pack: empty sequence")
    width = max(lengths) if width is None else width
    if max(lengths) > width:
        raise ValueError(f"pack: a sequence of {max(lengths)} tokens does not fit rows of {width}")
    fill: list[int] = []
    row, start = [0] * len(seqs), [0] * len(seqs)
    for i in sorted(range(len(seqs)), key=lambda i: -lengths[i]):
        r = next((r for r, used in enumerate(fill) if used + lengths[i] <= width), len(fill))
        if r == len(fill):
            fill.append(0)
        row[i], start[i] = r, fill[r]
        fill[r] += lengths[i]
    ids = torch.full((len(fill), width), pad_id, dtype=torch.long)
    pos = torch.zeros((len(fill), width), dtype=torch.long)
    lab = torch.full((len(fill), width), -100, dtype=torch.long) if labels is not None else None
    for i, s in enumerate(seqs):
        r, o, n = row[i], start[i], lengths[i]
        ids[r, o : o + n] = torch.as_tensor(s, dtype=torch.long)
        pos[r, o : o + n] = torch.arange(n)
        if lab is not None:
            if len(labels[i]) != n:
                raise ValueError(
                    f"pack: labels of sequence {i} have {len(labels[i])} tokens, the sequence {n}"
                )
            lab[r, o : o + n] = torch.as_tensor(labels[i], dtype=torch.long)
    for r, used in enumerate(fill):
        pos[r, used:] = torch.arange(width - used)
    return Packed(ids, pos, lab, torch.tensor(row), torch.tensor(start))
