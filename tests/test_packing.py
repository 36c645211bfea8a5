"""Packed rows give every sequence the same log-probs as a padded batch does.

The block-diagonal mask comes from transformers reading restarted position ids; if a release
stopped doing that, sequences would attend across each other and these comparisons would fail.
"""

from __future__ import annotations

import pytest
import torch

from agon.packing import pack, supports_packing
from agon.random_models import build_tiny_model


def _seqs(vocab: int, n: int = 9, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randint(
            3, vocab, (int(torch.randint(2, 23, (1,), generator=g)),), generator=g
        ).tolist()
        for _ in range(n)
    ]


def test_pack_places_every_sequence_once():
    seqs = [[1] * 5, [2] * 3, [3] * 2, [4] * 5, [5]]
    p = pack(seqs, pad_id=0, labels=[[7] * len(s) for s in seqs])
    assert p.input_ids.shape == (4, 5)  # 5 | 5 | 3+2 | 1 (+ tail)
    for i, s in enumerate(seqs):
        r, o = int(p.row[i]), int(p.start[i])
        assert p.input_ids[r, o : o + len(s)].tolist() == s
        assert p.position_ids[r, o : o + len(s)].tolist() == list(range(len(s)))
    assert int((p.labels == 7).sum()) == sum(map(len, seqs))
    assert int((p.input_ids != 0).sum()) == sum(map(len, seqs))
    with pytest.raises(ValueError, match="does not fit"):
        pack(seqs, pad_id=0, width=4)
    with pytest.raises(ValueError, match="empty"):
        pack([[1], []], pad_id=0)


@pytest.mark.parametrize("arch", ["qwen3", "gemma4_text"])
def test_packed_logprobs_equal_padded(arch, tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        build_tiny_model(arch, tmp_path / arch), dtype=torch.float32
    ).eval()
    assert supports_packing(model)
    seqs = _seqs(model.config.get_text_config().vocab_size)
    width = max(map(len, seqs))
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, s in enumerate(seqs):  # right padding: positions 0..len-1 as in the packed rows
        ids[i, : len(s)], attn[i, : len(s)] = torch.tensor(s), 1
    with torch.no_grad():
        padded = model(input_ids=ids, attention_mask=attn).logits.log_softmax(-1)
        p = pack(seqs, pad_id=0)
        assert p.input_ids.size(0) < len(seqs)  # something was actually packed
        packed = model(
            input_ids=p.input_ids, position_ids=p.position_ids, use_cache=False
        ).logits.log_softmax(-1)
    got = p.gather(packed, [0] * len(seqs), width)
    for i, s in enumerate(seqs):
        torch.testing.assert_close(got[i, : len(s)], padded[i, : len(s)], atol=1e-5, rtol=1e-5)


def test_linear_attention_is_not_packed(tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(build_tiny_model("qwen3_5_text", tmp_path / "q35"))
    assert not supports_packing(model)


@pytest.mark.parametrize("arch", ["qwen3", "gemma4_text"])
def test_duel_scoring_packed_equals_padded(arch, tmp_path):
    """The duel update's log-probs and entropies are the same packed or padded (TRL's layout),
    for ragged prompts and completions, an empty completion among them."""
    from transformers import AutoModelForCausalLM

    from agon import logprobs as scoring

    model = AutoModelForCausalLM.from_pretrained(
        build_tiny_model(arch, tmp_path / arch), dtype=torch.float32
    )
    scoring.enable_token_logprobs(model, 0.7)
    vocab = model.config.get_text_config().vocab_size
    prompts, comps = _seqs(vocab, 8, seed=1), _seqs(vocab, 8, seed=2)
    comps[3] = []
    width = max(map(len, comps)) + 2
    lp_pack, ent_pack = scoring.completion_logprobs(model, prompts, comps, width, 0, packing=True)
    lp_pad, ent_pad = scoring.completion_logprobs(model, prompts, comps, width, 0, packing=False)
    assert lp_pack.shape == lp_pad.shape == (8, width)
    torch.testing.assert_close(lp_pack, lp_pad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent_pack, ent_pad, atol=1e-5, rtol=1e-5)
    assert (
        float(lp_pack[3].detach().abs().sum()) == 0.0
        and float(lp_pack[0, : len(comps[0])].detach().abs().min()) > 0
    )
    # gradients flow through the packed rows as through the padded ones
    (lp_pack.sum()).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
