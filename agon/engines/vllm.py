"""The vLLM backend (GPU): the same interface and sampling parameters as :mod:`agon.engines.hf`.

vLLM is an optional extra (``pip install agon[gpu]`` on a GPU machine); it is imported only
when this engine is built, and its absence is a clear error, never an import failure of agon.

Prompts are rendered to token ids by :func:`agon.engines.base.render_prompt` with the HF
tokenizer, exactly as the transformers backend does, and handed to vLLM as token prompts, so
both backends see identical inputs. vLLM applies no checkpoint ``generation_config`` defaults
here (``generation_config="vllm"``): every knob comes from :class:`SamplingParams`. The
logprob of each sampled token is requested (``logprobs=0``); whether it is raw or processed is
vLLM's engine-wide ``logprobs_mode``, set at construction from ``logprobs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.engines.base import (
    Completion,
    Messages,
    SamplingParams,
    TemplatedEngine,
)

_MODES = {"raw": "raw_logprobs", "processed": "processed_logprobs"}


def _import_vllm() -> Any:
    try:
        # lazy: vllm: the GPU-only optional extra; agon imports without it
        import vllm
    except ImportError as err:
        raise ImportError(
            "the vLLM backend needs the optional 'vllm' package (GPU only): pip install "
            "'agon[gpu]', "
            "or use backend='hf' (transformers), which runs everywhere"
        ) from err
    return vllm


def to_vllm_sampling(sampling: SamplingParams, n: int) -> Any:
    """The ``vllm.SamplingParams`` equivalent of ours (greedy when temperature is 0)."""
    vllm = _import_vllm()
    return vllm.SamplingParams(
        n=n,
        temperature=sampling.temperature,
        top_p=1.0 if sampling.greedy else sampling.top_p,
        top_k=0,
        max_tokens=sampling.max_new_tokens,
        stop=list(sampling.stop) or None,
        seed=sampling.seed,
        logprobs=0,  # the sampled token's own logprob only
        skip_special_tokens=False,  # keep </think> and the like visible, as the HF backend does
    )


class VLLMEngine(TemplatedEngine):
    """Generation with vLLM. Arguments as :class:`agon.engines.hf.HFEngine`, plus vLLM's own.

    ``logprobs`` fixes the logprob mode for the engine's lifetime ("raw" or "processed");
    ``llm_kwargs`` go to ``vllm.LLM`` (e.g. ``gpu_memory_utilization``, ``tensor_parallel_size``).
    """

    def __init__(
        self,
        model: str | Path,
        tokenizer: Any = None,
        *,
        system_prompt: str | None = None,
        chat_template_kwargs: dict | None = None,
        dtype: str = "auto",
        max_prompt_tokens: int | None = None,
        max_model_len: int | None = None,
        revision: str | None = None,
        logprobs: str = "raw",
        seed: int = 0,
        **llm_kwargs: Any,
    ):
        if not isinstance(model, (str, Path)):
            raise TypeError(
                "VLLMEngine loads a model by hub id or path; for a live in-memory policy use "
                "HFEngine"
            )
        if logprobs not in _MODES:
            raise ValueError(f"logprobs must be one of {sorted(_MODES)}, got {logprobs!r}")
        vllm = _import_vllm()
        # lazy: torch, transformers (agon.engines.hf imports them): off the import of
        # agon.engines, which imports this module
        from agon.engines.hf import load_tokenizer

        tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model, revision=revision)
        self.set_template(tokenizer, system_prompt, chat_template_kwargs, max_prompt_tokens)
        self.logprobs_mode = logprobs
        self.llm = vllm.LLM(
            model=str(model),
            revision=revision,
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
            generation_config="vllm",
            logprobs_mode=_MODES[logprobs],
            **llm_kwargs,
        )

    def generate(
        self, prompts: Sequence[Messages], n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        """For each prompt, ``n`` completions with token ids and logprobs."""
        sampling = sampling or SamplingParams()
        if sampling.logprobs != self.logprobs_mode:
            raise ValueError(
                f"this VLLMEngine was built with logprobs={self.logprobs_mode!r}; build another "
                f"for {sampling.logprobs!r}"
            )
        encoded = [self.encode(p) for p in prompts]
        seeds = sampling.seeds_for(len(encoded))
        params = (
            to_vllm_sampling(sampling, n)
            if seeds is None  # one seed per request: vLLM then draws each prompt on its own
            else [to_vllm_sampling(dataclasses.replace(sampling, seed=x), n) for x in seeds]
        )
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in encoded], params, use_tqdm=False
        )
        return [
            [_completion(o, ids) for o in request.outputs] for request, ids in zip(outputs, encoded)
        ]

    def load_staged(self, path: str) -> None:
        """Load the weights staged at ``path`` (a safetensors file) into the model in place,
        then drop the prefix cache computed with the old ones. Needs the engine built with
        ``worker_extension_cls=STAGED_WEIGHTS`` (:mod:`agon.engines.process` builds it so)."""
        self.llm.collective_rpc("agon_load_staged", args=(str(path),))
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Drop the vLLM engine (its workers exit when it is garbage-collected)."""
        self.llm = None


class StagedWeights:
    """Mixed into each vLLM worker (``worker_extension_cls``, vLLM's way to add methods to
    its workers, as its RLHF examples do): load a staged safetensors file into the model
    tensor by tensor, through the model's own ``load_weights`` (which maps the checkpoint's
    names onto vLLM's fused layers)."""

    def agon_load_staged(self, path: str) -> None:
        # lazy: safetensors: only a vLLM worker loads staged weights
        from safetensors import safe_open

        with safe_open(path, framework="pt", device="cpu") as f:
            self.model_runner.model.load_weights((k, f.get_tensor(k)) for k in f.keys())


STAGED_WEIGHTS = f"{__name__}.StagedWeights"  # the worker_extension_cls of a staged engine


def _completion(output: Any, prompt_ids: list[int]) -> Completion:
    """Our :class:`Completion` from one ``vllm.CompletionOutput``."""
    ids = list(output.token_ids)
    logprobs = None
    if output.logprobs is not None:
        logprobs = [float(step[t].logprob) for step, t in zip(output.logprobs, ids)]
    finish = "stop" if output.finish_reason == "stop" else "length"
    return Completion(
        text=output.text,
        token_ids=ids,
        logprobs=logprobs,
        prompt_token_ids=list(prompt_ids),
        finish_reason=finish,
    )
