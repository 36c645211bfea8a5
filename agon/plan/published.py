"""A family row's model's dimensions without a download: its ``config.json`` in its folder or
the Hugging Face cache (:func:`load_dims`, :func:`dims_from_config`), else the paper checkpoints'
published dimensions (:data:`PUBLISHED`); and the transformers config of any dims
(:func:`transformers_config`: the real-width, 1-2 layer random-weight test models).

Each row of :data:`PUBLISHED` is what the model's ``config.json`` / card states (text decoder
only), its source in a comment, with the total the authors publish (``PUBLISHED_PARAMS``,
checked in ``tests/test_plan.py`` within ``PARAMS_TOLERANCE``, and field by field against the
vendored ``tests/fixtures/published_configs``: for now transcriptions of these rows). Left out:
vision and audio towers, and Qwen3.5's multi-token-prediction layer. Gemma 4 E4B's per-layer
embeddings count as weights (stored, trained, optimized) but cost no FLOPs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import try_to_load_from_cache

from agon.plan.dims import FULL, LINEAR, SLIDING, ModelDims, PlanError

QWEN3_VOCAB = 151936  # Qwen3 config.json: vocab_size
QWEN3_5_VOCAB = 248320  # Qwen3.5 model cards: "Token Embedding: 248320 (Padded)"
GEMMA4_VOCAB = 262144  # Gemma 4 configs (transformers Gemma4TextConfig default; gemma.cpp)

# published totals are rounded (4.0B, 27B, "8B with embeddings"); and Gemma 4's totals include
# the vision and audio towers this table leaves out (a few hundred million parameters)
PARAMS_TOLERANCE = 0.10


def _qwen3(name: str, hidden: int, inter: int, layers: int, heads: int, tied: bool) -> ModelDims:
    """A Qwen3 dense checkpoint: GQA with 8 KV heads of 128, q/k norms, SwiGLU MLP."""
    return ModelDims(
        name=name,
        architecture="qwen3",
        hidden_size=hidden,
        intermediate_size=inter,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=8,
        head_dim=128,
        vocab_size=QWEN3_VOCAB,
        tied_embeddings=tied,
        source="Qwen3 config.json / model card (huggingface.co/" + name + ")",
    )


def _qwen3_5(
    name: str, hidden: int, inter: int, blocks: int, q_heads: int, v_heads: int, tied: bool
) -> ModelDims:
    """A Qwen3.5 dense checkpoint: ``blocks`` x (3 Gated DeltaNet + 1 gated attention layers);
    attention: 4 KV heads of 256; DeltaNet: 16 QK and ``v_heads`` V heads of 128, kernel 4."""
    return ModelDims(
        name=name,
        architecture="qwen3_5",
        hidden_size=hidden,
        intermediate_size=inter,
        num_layers=4 * blocks,
        num_heads=q_heads,
        num_kv_heads=4,
        head_dim=256,
        vocab_size=QWEN3_5_VOCAB,
        tied_embeddings=tied,
        layer_types=(LINEAR, LINEAR, LINEAR, FULL) * blocks,
        attn_output_gate=True,
        linear_num_key_heads=16,
        linear_num_value_heads=v_heads,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel=4,
        source="Qwen3.5 model card, 'Model Overview' (huggingface.co/" + name + ")",
    )


def _gemma4_pattern(layers: int) -> tuple[str, ...]:
    """Gemma 4's 5:1 pattern: every sixth layer (index 5, 11, ...) is full attention."""
    return tuple(FULL if i % 6 == 5 else SLIDING for i in range(layers))


PUBLISHED: dict[str, ModelDims] = {
    d.name: d
    for d in (
        # Qwen3 model cards: "Number of Layers", "Attention Heads (GQA): 16/32 for Q and 8 for
        # KV"; widths, head_dim 128, vocab and tie_word_embeddings from each config.json
        # (0.6B: hidden 1024 / MLP 3072; 1.7B: 2048 / 6144; 4B: 2560 / 9728; 8B: 4096 / 12288)
        _qwen3("Qwen/Qwen3-0.6B", 1024, 3072, 28, 16, tied=True),
        _qwen3("Qwen/Qwen3-1.7B", 2048, 6144, 28, 16, tied=True),
        _qwen3("Qwen/Qwen3-4B", 2560, 9728, 36, 32, tied=True),
        # the 2507 instruct release keeps Qwen3-4B's architecture (its card: 4.0B, 36 layers,
        # 32 Q / 8 KV heads); only the context length changes
        _qwen3("Qwen/Qwen3-4B-Instruct-2507", 2560, 9728, 36, 32, tied=True),
        _qwen3("Qwen/Qwen3-8B", 4096, 12288, 36, 32, tied=False),
        # Qwen3.5-4B card: hidden 2560, 32 layers = 8 x (3 DeltaNet + 1 attention), DeltaNet
        # 32 V / 16 QK heads of 128, attention 16 Q / 4 KV heads of 256, FFN 9216, "LM Output:
        # 248320 (Tied to token embedding)"
        _qwen3_5("Qwen/Qwen3.5-4B", 2560, 9216, 8, q_heads=16, v_heads=32, tied=True),
        # Qwen3.5-27B card: hidden 5120, 64 layers = 16 x (3 + 1), DeltaNet 48 V / 16 QK heads
        # of 128, attention 24 Q / 4 KV heads of 256, FFN 17408, LM output 248320 (not tied;
        # the slime model script passes --untie-embeddings-and-output-weights)
        _qwen3_5("Qwen/Qwen3.5-27B", 5120, 17408, 16, q_heads=24, v_heads=48, tied=False),
        # Gemma 4 E4B: gemma.cpp's ConfigGemma4_E4B_LM (google/gemma.cpp gemma/configs.cc):
        # model_dim 2560, 42 layers, FFN 10240, 8 heads, 2 KV heads, qkv_dim 256 on sliding
        # and 512 on global layers (every 6th), window 512, PLE dim 256, vocab 262144, layers
        # 24-41 reuse earlier KV; NVIDIA Megatron-Bridge's Gemma 4 E4B recipe agrees (42
        # layers, 2560, 10240, 8 heads, 2 KV heads, global head_dim 512, KV shared across
        # the last 18 layers, PLE vocab 262144 x 256). Published: 4.5B effective, 8B with
        # per-layer embeddings (Google's Gemma 4 docs), vision and audio towers included.
        ModelDims(
            name="google/gemma-4-E4B-it",
            architecture="gemma4",
            hidden_size=2560,
            intermediate_size=10240,
            num_layers=42,
            num_heads=8,
            num_kv_heads=2,
            head_dim=256,
            vocab_size=GEMMA4_VOCAB,
            tied_embeddings=True,
            layer_types=_gemma4_pattern(42),
            sliding_window=512,
            global_head_dim=512,
            num_kv_shared_layers=18,
            per_layer_input_size=256,
            per_layer_vocab_size=GEMMA4_VOCAB,
            source="gemma.cpp configs.cc ConfigGemma4_E4B_LM; Megatron-Bridge Gemma 4 E4B recipe",
        ),
        # Gemma 4 31B: slime's scripts/models/gemma4-31B.sh (THUDM/slime): 60 layers, hidden
        # 5376, FFN 21504, 32 heads, 16 KV heads of 256 (the sliding layers), vocab 262144;
        # the full layers (every 6th) from the Core AI conversion's card
        # (mlboydaisuke/Gemma-4-31B-CoreAI): global_head_dim 512, num_global_key_value_heads
        # 4 with attention_k_eq_v, tied embeddings, no PLE and no KV sharing; sliding window
        # 1024 (third-party model pages; it changes only the KV cache). Published: 30.7B.
        ModelDims(
            name="google/gemma-4-31B-it",
            architecture="gemma4",
            hidden_size=5376,
            intermediate_size=21504,
            num_layers=60,
            num_heads=32,
            num_kv_heads=16,
            head_dim=256,
            vocab_size=GEMMA4_VOCAB,
            tied_embeddings=True,
            layer_types=_gemma4_pattern(60),
            sliding_window=1024,
            global_head_dim=512,
            global_kv_heads=4,
            attention_k_eq_v=True,
            source="slime gemma4-31B.sh; Gemma-4-31B Core AI card (full-attention layers)",
            notes=(
                "sliding-layer KV heads and MLP width from a training framework's script, "
                "not Google's card; sliding window from third-party pages",
            ),
        ),
    )
}

# the totals each card publishes (parameters of the language model, as the card rounds them)
PUBLISHED_PARAMS: dict[str, float] = {
    "Qwen/Qwen3-0.6B": 0.6e9,  # card: "Number of Parameters: 0.6B" (0.44B non-embedding)
    "Qwen/Qwen3-1.7B": 1.7e9,  # card: 1.7B (1.4B non-embedding)
    "Qwen/Qwen3-4B": 4.0e9,  # card: 4.0B (3.6B non-embedding)
    "Qwen/Qwen3-4B-Instruct-2507": 4.0e9,  # card: 4.0B (3.6B non-embedding)
    "Qwen/Qwen3-8B": 8.2e9,  # card: 8.2B (6.95B non-embedding)
    "Qwen/Qwen3.5-4B": 4e9,  # card: "Number of Parameters: 4B"
    "Qwen/Qwen3.5-27B": 27e9,  # card: "Number of Parameters: 27B"
    "google/gemma-4-E4B-it": 8e9,  # "4.5B effective (8B with Per-Layer Embeddings)"
    "google/gemma-4-31B-it": 30.7e9,  # "30.7B parameters"
}


# ----------------------------------------------------------------------------- config.json

# config.json model_type -> agon.plan.dims.ARCHITECTURES (anything else: "generic")
MODEL_TYPES = {
    "qwen3": "qwen3",
    "qwen3_5": "qwen3_5",
    "qwen3_5_text": "qwen3_5",
    "gemma4": "gemma4",
    "gemma4_text": "gemma4",
}


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    if isinstance(cfg, Mapping):
        return cfg.get(key, default)
    return getattr(cfg, key, default)


def _global_overrides(text: Any, layer_types: tuple[str, ...]) -> tuple[int | None, int | None]:
    """(head dim, kv heads) of the full-attention layers where they differ (Gemma 4): the
    config.json keys, or a built config's ``per_layer_config``."""
    hd, kv = _get(text, "global_head_dim"), _get(text, "num_global_key_value_heads")
    per_layer = _get(text, "per_layer_config") or {}
    # transformers writes the layer indices as strings, zero-padded to the widest ("05")
    per_layer = {int(k): v for k, v in per_layer.items()} if isinstance(per_layer, Mapping) else {}
    for i, kind in enumerate(layer_types):
        if kind != FULL:
            continue
        over = per_layer.get(i)
        if isinstance(over, Mapping):
            hd = hd if hd is not None else over.get("head_dim")
            kv = kv if kv is not None else over.get("num_key_value_heads")
        break
    return hd, kv


def dims_from_config(cfg: Any, name: str = "", source: str = "") -> ModelDims:
    """The dimensions of a transformers config: a ``PretrainedConfig`` (a multimodal one's
    ``text_config``), a ``config.json`` mapping, or any object with those attributes."""
    if not isinstance(cfg, Mapping) and hasattr(cfg, "to_dict"):
        # a PretrainedConfig: its dict form, since Gemma 4's object refuses to read a per-layer
        # attribute (head_dim) globally
        cfg = cfg.to_dict()
    text = cfg if _get(cfg, "text_config") is None else _get(cfg, "text_config")
    model_type = str(_get(text, "model_type") or _get(cfg, "model_type") or "")
    arch = MODEL_TYPES.get(model_type, "generic")
    hidden = _get(text, "hidden_size")
    heads = _get(text, "num_attention_heads")
    layers = _get(text, "num_hidden_layers")
    if hidden is None or heads is None or layers is None:
        raise PlanError(
            f"{name or 'config'}: needs hidden_size, num_attention_heads and num_hidden_layers "
            f"(model_type {model_type!r}); is this a causal language model's config?"
        )
    head_dim = _get(text, "head_dim") or hidden // heads
    layer_types = tuple(_get(text, "layer_types") or ())
    if layer_types and set(layer_types) <= {FULL}:
        layer_types = ()  # plain decoders list every layer as full attention
    g_hd, g_kv = _global_overrides(text, layer_types)
    tied = _get(text, "tie_word_embeddings")
    if tied is None:
        tied = _get(cfg, "tie_word_embeddings", False)
    dtype = str(_get(text, "dtype") or _get(text, "torch_dtype") or _get(cfg, "dtype") or "")
    dtype = dtype.replace("torch.", "") or "bfloat16"
    ple = int(_get(text, "hidden_size_per_layer_input") or 0) if arch == "gemma4" else 0
    return ModelDims(
        name=name or str(_get(cfg, "_name_or_path") or model_type or "model"),
        architecture=arch,
        hidden_size=int(hidden),
        intermediate_size=int(_get(text, "intermediate_size")),
        num_layers=int(layers),
        num_heads=int(heads),
        num_kv_heads=int(_get(text, "num_key_value_heads") or heads),
        head_dim=int(head_dim),
        vocab_size=int(_get(text, "vocab_size")),
        tied_embeddings=bool(tied),
        layer_types=layer_types,
        sliding_window=_get(text, "sliding_window") if SLIDING in layer_types else None,
        global_head_dim=int(g_hd) if g_hd else None,
        global_kv_heads=int(g_kv) if g_kv else None,
        attention_k_eq_v=bool(_get(text, "attention_k_eq_v", False)),
        # transformers' Qwen3.5 attention always doubles q_proj for the output gate
        attn_output_gate=bool(_get(text, "attn_output_gate", arch == "qwen3_5")),
        qk_norm=arch != "generic",
        num_kv_shared_layers=int(_get(text, "num_kv_shared_layers") or 0),
        double_wide_mlp_shared=bool(_get(text, "use_double_wide_mlp", False)),
        linear_num_key_heads=int(_get(text, "linear_num_key_heads") or 0),
        linear_num_value_heads=int(_get(text, "linear_num_value_heads") or 0),
        linear_key_head_dim=int(_get(text, "linear_key_head_dim") or 0),
        linear_value_head_dim=int(_get(text, "linear_value_head_dim") or 0),
        linear_conv_kernel=int(_get(text, "linear_conv_kernel_dim") or 0),
        per_layer_input_size=ple,
        per_layer_vocab_size=int(_get(text, "vocab_size_per_layer_input") or 0) if ple else 0,
        checkpoint_dtype=dtype if dtype in ("float32", "bfloat16", "float16") else "bfloat16",
        source=source,
    )


def cached_config(model: str, revision: str | None = None) -> Path | None:
    """Hub model ``model``'s cached ``config.json`` at ``revision`` (default ``main``), or None."""
    try:
        found = try_to_load_from_cache(model, "config.json", revision=revision)
    except ValueError:  # not a hub id (a local path that holds no config.json)
        return None
    return Path(found) if isinstance(found, str) else None


def load_dims(model: str, revision: str | None = None) -> ModelDims:
    """The dimensions of a family row's ``model``: its ``config.json`` in its folder or the
    Hugging Face cache, else its :data:`PUBLISHED` row."""
    config_json = Path(model) / "config.json"
    where = str(config_json)
    if not config_json.is_file():
        config_json = cached_config(model, revision)
        where = f"{config_json} (the Hugging Face cache)"
    if config_json is not None and config_json.is_file():
        with open(config_json) as f:
            return dims_from_config(json.load(f), name=model, source=where)
    if model in PUBLISHED:
        return PUBLISHED[model]
    known = ", ".join(sorted(PUBLISHED))
    raise PlanError(
        f"model {model!r}: no config.json at that path or in the Hugging Face cache, and not "
        f"in the planner's table of published checkpoints ({known}); point the row at a local "
        "folder holding the model's config.json, or add its dimensions to agon/plan/published.py"
    )


# ----------------------------------------------------------------------------- transformers config

TEST_MAX_POSITIONS = 4096


def transformers_config(d: ModelDims, **overrides: Any) -> Any:
    """The transformers config of dims ``d`` (``LlamaConfig`` for a generic decoder);
    ``overrides`` replace or add fields (e.g. ``vocab_size`` for a small test tokenizer)."""
    # lazy: transformers: off agon plan's import; the planner itself never needs it
    import transformers

    common: dict[str, Any] = {
        "hidden_size": d.hidden_size,
        "intermediate_size": d.intermediate_size,
        "num_hidden_layers": d.num_layers,
        "num_attention_heads": d.num_heads,
        "num_key_value_heads": d.num_kv_heads,
        "head_dim": d.head_dim,
        "vocab_size": d.vocab_size,
        "tie_word_embeddings": d.tied_embeddings,
        "max_position_embeddings": TEST_MAX_POSITIONS,
    }
    if d.architecture == "qwen3":
        return transformers.Qwen3Config(**{**common, **overrides})
    if d.architecture == "qwen3_5":
        extra: dict[str, Any] = {
            "layer_types": list(d.kinds()),
            "linear_num_key_heads": d.linear_num_key_heads,
            "linear_num_value_heads": d.linear_num_value_heads,
            "linear_key_head_dim": d.linear_key_head_dim,
            "linear_value_head_dim": d.linear_value_head_dim,
            "linear_conv_kernel_dim": d.linear_conv_kernel,
        }
        return transformers.Qwen3_5TextConfig(**{**common, **extra, **overrides})
    if d.architecture == "gemma4":
        extra = {
            "layer_types": list(d.kinds()),
            "sliding_window": d.sliding_window or TEST_MAX_POSITIONS,
            "global_head_dim": d.global_head_dim or d.head_dim,
            "attention_k_eq_v": d.attention_k_eq_v,
            "num_kv_shared_layers": d.num_kv_shared_layers,
            "use_double_wide_mlp": d.double_wide_mlp_shared,
            "hidden_size_per_layer_input": d.per_layer_input_size,
            "vocab_size_per_layer_input": d.per_layer_vocab_size or d.vocab_size,
        }
        if d.global_kv_heads:
            extra["num_global_key_value_heads"] = d.global_kv_heads
        if FULL not in d.kinds():
            extra["layer_types"][-1] = FULL  # transformers forces Gemma 4's last layer to full
        return transformers.Gemma4TextConfig(**{**common, **extra, **overrides})
    return transformers.LlamaConfig(**{**common, **overrides})
