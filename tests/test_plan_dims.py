"""`agon plan`'s model arithmetic: parameters, FLOPs, KV cache and step memory against
hand-computed cases, and the dimensions it reads (published rows, local and cached
config.json, the vendored configs) against the published totals and transformers' modules.

Fast: no model is loaded; the check against transformers' own modules builds them on the meta
device (no weights).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from types import SimpleNamespace

import huggingface_hub
import pytest
import torch
from test_plan import PAPER, job
from test_workflow import REPO

from agon.config import load_config
from agon.plan.dims import (
    FULL,
    LINEAR,
    SLIDING,
    ModelDims,
    PlanError,
    flop_params,
    forward_flops,
    generation_flops,
    kv_cache_bytes,
    param_breakdown,
    param_count,
    training_flops,
)
from agon.plan.memory import estimate_step_memory
from agon.plan.planner import plan
from agon.plan.published import (
    PARAMS_TOLERANCE,
    PUBLISHED,
    PUBLISHED_PARAMS,
    dims_from_config,
    load_dims,
)

PUBLISHED_CONFIGS = REPO / "tests" / "fixtures" / "published_configs"

# A made-up decoder small enough to count by hand: hidden 8, MLP 16, 2 layers, 2 query heads
# and 1 KV head of 4, vocabulary 10, tied embeddings, Qwen3's layout (q/k norms, 2 norms/layer).
TINY = ModelDims(
    name="tiny",
    architecture="qwen3",
    hidden_size=8,
    intermediate_size=16,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=4,
    vocab_size=10,
    tied_embeddings=True,
)


# ----------------------------------------------------------------------------- by hand


def test_tiny_parameters_by_hand():
    # embedding 10 x 8 = 80 (tied: no LM head); per layer: q 8x8 = 64, k 8x4 = 32, v 32,
    # o 8x8 = 64 -> 192; MLP 3 x 8 x 16 = 384; norms 2 x 8 + q_norm 4 + k_norm 4 = 24;
    # 2 layers x 600 + the final norm 8 + 80 = 1288
    b = param_breakdown(TINY)
    assert (b["embedding"], b["lm_head"], b["attention"], b["mlp"]) == (80, 0, 384, 768)
    assert b["norms"] == 2 * 24 + 8
    assert param_count(TINY) == 1288
    # multiply-add parameters: the layers' matrices 2 x (192 + 384); the head 10 x 8
    assert flop_params(TINY) == {"backbone": 1152, "head": 80}


def test_tiny_flops_by_hand():
    # 3 prompt + 2 completion tokens, the head on the 2: 2 x 1152 x 5 = 11520, 2 x 80 x 2 = 320,
    # attention 4 x 2 heads x 4 dims x (1+2+3+4+5 = 15 pairs) = 480 per layer, 2 layers: 960
    assert forward_flops(TINY, 3, 2, 2) == 11520 + 320 + 960
    assert generation_flops(TINY, 3, 2) == 12800
    t = training_flops(TINY, 3, 2)
    assert t["forward_backward"] == 3 * 12800 and t["total"] == 38400
    # gradient checkpointing adds the backbone's forward once more (11520 + 960, no head)
    t = training_flops(TINY, 3, 2, gradient_checkpointing=True, reference_model=True)
    assert t["recompute"] == 12480 and t["reference"] == 12800
    assert t["total"] == 38400 + 12480 + 12800
    # two iterations: twice the forward + backward, and one no-grad forward for old log-probs
    assert training_flops(TINY, 3, 2, num_iterations=2)["total"] == 2 * 38400 + 12800


def test_tiny_kv_cache_by_hand():
    # 2 (K, V) x 2 layers x 1 KV head x 4 dims x 5 tokens x 3 sequences x 2 bytes = 480
    assert kv_cache_bytes(TINY, 2, 5, 3) == 480


def test_kv_cache_windows_and_shared_layers():
    # 3 layers: sliding (window 2), sliding, full with head_dim 4; the last one reuses earlier
    # keys (num_kv_shared_layers 1). At 5 tokens: each sliding layer keeps 2 tokens of
    # 2 x 1 head x 2 dims x 2 bytes = 8 bytes: 2 x 2 x 8 = 32; the shared full layer nothing
    d = ModelDims(
        name="windows", architecture="gemma4", hidden_size=8, intermediate_size=8, num_layers=3,
        num_heads=2, num_kv_heads=1, head_dim=2, vocab_size=10, tied_embeddings=True,
        layer_types=(SLIDING, SLIDING, FULL), sliding_window=2, global_head_dim=4,
        num_kv_shared_layers=1,
    )  # fmt: skip
    assert kv_cache_bytes(d, 2, 5, 1) == 32
    # without sharing the full layer adds all 5 tokens: 2 x 1 x 4 dims x 2 bytes x 5 = 80
    assert kv_cache_bytes(replace(d, num_kv_shared_layers=0), 2, 5, 1) == 32 + 80


def test_tiny_step_memory_by_hand():
    # pure bf16: weights, gradients 1288 x 2 = 2576 each, AdamW's two moments 5152
    m = estimate_step_memory(TINY, micro_batch=2, prompt_tokens=3, completion_tokens=2)
    c = m.components
    assert (c["weights"], c["gradients"], c["optimizer_states"]) == (2576, 2576, 5152)
    # activations per token and layer, as transformers' modules keep them (bf16, 2 bytes): an
    # RMSNorm over w keeps its float32 input, the normalized value and its output: 4w + 2 x 2w;
    # input norm (w 8) 64, q norm (8) 64, k norm (4) 32, v 2 x 4 = 8, the attention output
    # twice 2 x 2 x 8 = 32, MLP norm 64, gate, up, act, product 4 x 2 x 16 = 128 -> 392;
    # 2 layers + the final norm (64): 848 per token, x 2 x (3 + 2) = 10 tokens = 8480.
    # The head: logits tile 4 scored tokens x 10 x 2 = 80; float32 gradients (10 x 8 + 4 x 8) x 4
    assert c["activations"] == 8480
    assert (c["logits_chunk"], c["head_gradient"]) == (80, 448)
    # checkpointing keeps each layer's input (8 x 2 bytes), one layer's set and the final norm:
    # (2 x 16 + 392 + 64) x 10
    gc = estimate_step_memory(
        TINY, micro_batch=2, prompt_tokens=3, completion_tokens=2, gradient_checkpointing=True
    )
    assert gc.components["activations"] == 4880
    # fp32 master weights: weights, grads 5152 each, moments 10304, a bf16 autocast copy 2576
    fp32 = estimate_step_memory(
        TINY, micro_batch=2, prompt_tokens=3, completion_tokens=2, master_dtype="float32"
    ).components
    assert (fp32["weights"], fp32["gradients"], fp32["optimizer_states"]) == (5152, 5152, 10304)
    assert fp32["autocast_weight_copies"] == 2576


# ----------------------------------------------------------------------------- dims


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_rows_match_published_totals(name):
    d = PUBLISHED[name]
    assert d.source, f"{name}: every row cites its source"
    assert param_count(d) == pytest.approx(PUBLISHED_PARAMS[name], rel=PARAMS_TOLERANCE)


@pytest.mark.parametrize(
    "name,non_embedding",  # Qwen3 cards also publish the count without the embeddings
    [("Qwen/Qwen3-0.6B", 0.44e9), ("Qwen/Qwen3-1.7B", 1.4e9), ("Qwen/Qwen3-4B", 3.6e9),
     ("Qwen/Qwen3-8B", 6.95e9)],
)  # fmt: skip
def test_qwen3_non_embedding_counts(name, non_embedding):
    b = param_breakdown(PUBLISHED[name])
    assert b["total"] - b["embedding"] - b["lm_head"] == pytest.approx(non_embedding, rel=0.02)


def test_dims_from_config_objects_and_json():
    # a transformers-like object, any layer count (a 1-layer real-width test model)
    qwen = SimpleNamespace(
        model_type="qwen3", hidden_size=2560, intermediate_size=9728, num_hidden_layers=1,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
        tie_word_embeddings=True,
    )  # fmt: skip
    d, ref = dims_from_config(qwen, name="q"), PUBLISHED["Qwen/Qwen3-4B"].with_layers(1)
    assert replace(d, name=ref.name, source=ref.source) == ref
    assert param_count(d) == param_count(ref)
    # a multimodal config.json: the text decoder is read from text_config; Gemma 4's global
    # geometry from transformers' per_layer_config (indices as zero-padded strings)
    gemma = {
        "model_type": "gemma4",
        "text_config": {
            "model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "vocab_size": 100, "tie_word_embeddings": True,
            "layer_types": [SLIDING] * 5 + [FULL], "sliding_window": 8,
            "per_layer_config": {"05": {"head_dim": 32, "num_key_value_heads": 1}},
            "attention_k_eq_v": True, "hidden_size_per_layer_input": 0,
        },
    }  # fmt: skip
    d = dims_from_config(gemma)
    assert (d.architecture, d.global_head_dim, d.global_kv_heads, d.sliding_window) == (
        "gemma4",
        32,
        1,
        8,
    )
    assert d.heads_of(FULL) == (1, 32) and d.heads_of(SLIDING) == (2, 16)


def test_with_layers_keeps_widths_and_pattern():
    d = PUBLISHED["Qwen/Qwen3.5-4B"].with_layers(2)
    assert d.kinds() == (LINEAR, FULL)  # ends on a full-attention layer, as the checkpoint
    assert d.hidden_size == 2560 and d.num_layers == 2
    m = estimate_step_memory(d, micro_batch=1, prompt_tokens=16, completion_tokens=16)
    assert m.components["weights"] == param_count(d) * 2 and m.total > 0


def test_load_dims_prefers_a_local_config_and_never_downloads(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "llama", "hidden_size": 16, "intermediate_size": 32,
                    "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 50})
    )  # fmt: skip
    d = load_dims(str(tmp_path))
    assert d.architecture == "generic" and d.head_dim == 8 and d.num_kv_heads == 2
    with pytest.raises(PlanError, match="not in the planner's table .* config.json"):
        load_dims("someone/unknown-model")


def _cache(root, model: str, config: dict, revision: str = "main", commit: str = "a" * 40):
    """A Hugging Face cache holding ``model``'s config.json at ``revision`` (its layout:
    models--org--name/refs/<revision> -> snapshots/<commit>/config.json)."""
    repo = root / ("models--" + model.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps(config))


def test_dims_come_from_a_cached_config_before_the_table(tmp_path, monkeypatch):
    """A hub model's own config.json in the Hugging Face cache wins over the table (at the
    row's revision), through the planner too; the table is the fallback."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert load_dims("Qwen/Qwen3-8B") is PUBLISHED["Qwen/Qwen3-8B"]  # nothing cached
    vendored = json.loads((PUBLISHED_CONFIGS / "Qwen--Qwen3-4B" / "config.json").read_text())
    _cache(tmp_path, "Qwen/Qwen3-4B", vendored | {"num_key_value_heads": 4})
    d = load_dims("Qwen/Qwen3-4B")
    assert d.num_kv_heads == 4 and "the Hugging Face cache" in d.source
    assert load_dims("Qwen/Qwen3-4B", revision="v2").num_kv_heads == 8  # not cached: the table
    _cache(tmp_path, "Qwen/Qwen3-4B", vendored, revision="v2", commit="b" * 40)
    assert load_dims("Qwen/Qwen3-4B", revision="v2").num_kv_heads == 8
    config = load_config(PAPER)
    duel = job(plan(config, "results/table1.csv"), "train qwen3 deepmath agon seed0")
    # A (Qwen3-4B, cached with half the KV heads) keeps twice B's sequences in flight
    assert duel.concurrency["A drafts"] == pytest.approx(2 * duel.concurrency["B drafts"], abs=1)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_table_matches_its_vendored_config_json(name):
    """Each row of the fallback table equals what the planner reads from the vendored copy of
    the model's config.json, through the path a local model's config.json takes (load_dims): a
    wrong KV-head count, width or layer pattern in either fails here. The copies are
    transcriptions (their hub revision unknown) until replaced by the hub's files."""
    folder = PUBLISHED_CONFIGS / name.replace("/", "--")
    body = json.loads((folder / "config.json").read_text())
    if "_agon_transcription" not in body:  # the hub's own file: its revision said beside it
        assert re.fullmatch(r"[0-9a-f]{40}", body.get("_agon_revision") or ""), name
    read = load_dims(str(folder))
    row = PUBLISHED[name]
    assert replace(read, name=row.name, source=row.source, notes=row.notes) == row
    wrong = body | {"num_key_value_heads": body["num_key_value_heads"] * 2}
    assert (
        replace(dims_from_config(wrong), name=row.name, source=row.source, notes=row.notes) != row
    )


@pytest.mark.slow
@pytest.mark.parametrize("name,layers", [("Qwen/Qwen3-0.6B", 2), ("Qwen/Qwen3.5-4B", 2),
                                         ("google/gemma-4-E4B-it", 2)])  # fmt: skip
def test_activation_estimate_matches_saved_tensors(name, layers):
    """The activation estimate against what autograd keeps for a real-width random model's
    forward (bf16, SDPA, on CPU): within 15 per cent (the Gated DeltaNet's float32 copies are
    fitted to this, the rest is counted)."""
    from transformers import AutoModelForCausalLM

    from agon.plan.memory import activation_bytes
    from agon.plan.published import transformers_config

    small_vocab = 1000  # the embedding tables do not change what a forward keeps
    d = replace(
        PUBLISHED[name].with_layers(layers),
        vocab_size=small_vocab,
        per_layer_vocab_size=small_vocab if PUBLISHED[name].per_layer_input_size else 0,
    )
    config = transformers_config(d)
    config._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t):
        kept.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        return t

    tokens = 128
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.model(input_ids=torch.randint(0, small_vocab, (1, tokens)))
    saved = sum(n for ptr, n in kept.items() if ptr not in params)
    assert activation_bytes(d, tokens, 2, False) == pytest.approx(saved, rel=0.15)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_counts_equal_transformers_modules(name):
    """Every row, and its 2-layer cut, counted as transformers builds it: on the meta device,
    so no weight is allocated (a second or two for all of them)."""
    from transformers import AutoModelForCausalLM

    from agon.plan.published import transformers_config

    for d in (PUBLISHED[name], PUBLISHED[name].with_layers(2)):
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(transformers_config(d))
        assert sum(p.numel() for p in model.parameters()) == param_count(d)
        assert param_count(dims_from_config(model.config)) == param_count(d)
