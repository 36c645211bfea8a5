"""Generation engines behind one interface (:class:`agon.engines.base.Engine`).

``transformers`` (CPU or GPU) is always available; vLLM is an optional extra loaded only when
asked for, so importing agon never needs it. :func:`load_engine` builds an engine from a
family row of the config, so every caller applies the same persona, chat-template kwargs,
dtype and prompt limit.
"""

from __future__ import annotations

from typing import Any

from agon.engines.base import (
    Completion,
    Engine,
    Messages,
    PromptTooLongError,
    SamplingParams,
    render_prompt,
)
from agon.engines.vllm import VLLMEngine

BACKENDS = ("hf", "vllm")

__all__ = [
    "BACKENDS",
    "Completion",
    "Engine",
    "Messages",
    "PromptTooLongError",
    "SamplingParams",
    "engine_options",
    "load_engine",
    "render_prompt",
]


def engine_options(model_row: dict, family_row: dict) -> dict[str, Any]:
    """What every engine of one policy shares, whatever the backend or the caller: the row's
    persona and chat-template kwargs, and the family's prompt limit."""
    return {
        "system_prompt": model_row.get("system_prompt"),
        "chat_template_kwargs": model_row.get("chat_template_kwargs") or {},
        "max_prompt_tokens": family_row.get("max_prompt_tokens"),
    }


def load_engine(
    model_row: dict,
    family_row: dict,
    backend: str = "hf",
    *,
    path: str | None = None,
    **kwargs: Any,
) -> Engine:
    """An engine for one policy of a family.

    ``model_row`` is ``family_row["model_a"]`` or ``["model_b"]`` (model, revision,
    system_prompt, chat_template_kwargs); ``family_row`` gives dtype and max_prompt_tokens.
    ``path`` replaces the row's model (a trained checkpoint of that policy keeps its persona and
    template kwargs). Extra ``kwargs`` go to the backend (e.g. ``batch_size``, ``device``).
    """
    common = dict(
        **engine_options(model_row, family_row),
        dtype=family_row.get("dtype", "auto"),
        # a trained checkpoint is a local folder: the hub revision applies to the row's model only
        revision=None if path else model_row.get("revision"),
    )
    model = path or model_row["model"]
    if backend == "hf":
        # lazy: torch, transformers (agon.engines.hf imports them): off the import of this
        # package, which `agon eval`, `agon plan` and `agon toy` import
        from agon.engines.hf import HFEngine

        return HFEngine(model, **common, **kwargs)
    if backend == "vllm":
        kwargs.pop("batch_size", None)  # vLLM schedules its own batches
        return VLLMEngine(model, **common, **kwargs)
    raise ValueError(f"unknown engine backend {backend!r}; expected one of {BACKENDS}")
