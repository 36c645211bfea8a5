"""Dims from a transformers config (:func:`dims_from_config`; :func:`load_dims`: a family row's
model from its local or cached ``config.json``, else :mod:`agon.plan.published`, never a
download), and a transformers config from dims (:func:`transformers_config`: the real-width,
1-2 layer random-weight test models)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import try_to_load_from_cache

from agon.plan.dims import FULL, SLIDING, ModelDims, PlanError
from agon.plan.published import PUBLISHED

# config.json model_type -> agon.plan.dims.ARCHITECTURES (anything else: "generic")
MODEL_TYPES = {
    "qwen3": "qwen3",
    "qwen3_5": "qwen3_5",
    "qwen3_5_text": "qwen3_5",
    "gemma4": "gemma4",
    "gemma4_text": "gemma4",
}

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


def cached_config(model: str, revision: str | None = None, cache_dir: str | None = None):
    """Hub model ``model``'s cached ``config.json`` at ``revision`` (default ``main``), or None."""
    try:
        found = try_to_load_from_cache(model, "config.json", cache_dir, revision)
    except ValueError:  # not a hub id (a local path that holds no config.json)
        return None
    return Path(found) if isinstance(found, str) else None


def load_dims(
    model: str,
    published: Mapping[str, ModelDims] | None = None,
    revision: str | None = None,
    cache_dir: str | None = None,
) -> ModelDims:
    """The dimensions of a family row's ``model``: its ``config.json`` in its folder or the
    Hugging Face cache, else its ``published`` row (default :data:`PUBLISHED`)."""
    published = PUBLISHED if published is None else published
    config_json = Path(model) / "config.json"
    where = str(config_json)
    if not config_json.is_file():
        config_json = cached_config(model, revision, cache_dir)
        where = f"{config_json} (the Hugging Face cache)"
    if config_json is not None and config_json.is_file():
        with open(config_json) as f:
            return dims_from_config(json.load(f), name=model, source=where)
    if model in published:
        return published[model]
    known = ", ".join(sorted(published))
    raise PlanError(
        f"model {model!r}: no config.json at that path or in the Hugging Face cache, and not "
        f"in the planner's table of published checkpoints ({known}); point the row at a local "
        "folder holding the model's config.json, or add its dimensions to agon/plan/published.py"
    )
