"""Rollout engines of the in-house trainers: the live model, or vLLM with weight sync per policy.

The algorithm in :mod:`agon.duel` only ever calls ``engine.generate`` and, after a policy's
update, ``engine.sync_weights(model)`` when the engine has it (:meth:`Policy.sync_engine
<agon.training.policy.Policy.sync_engine>`). On CPU and in the tests the
engine is :class:`agon.engines.hf.HFEngine` around the live model, so there is nothing to
sync. On GPUs, two ways (config ``train.backend: vllm``; see ``config/accelerate/README.md``),
each engine where :func:`agon.engines.placement.place` puts it:

- **server** (``agon.servers``: one URL per policy): each policy has its own
  ``trl vllm-serve --model M --port P`` on its own GPU(s), started by the user before the job
  (``docs/scale.md``, server mode). :class:`ServerRollouts` renders prompts with the same chat
  template code as the HF engine, sends token ids (and the stop strings) to the server through
  TRL's ``VLLMClient``, and after each update pushes the new weights over NCCL in one batched
  update (``update_named_params``: one request and one packed broadcast for every tensor, as
  TRL's own trainers sync) and resets the server's prefix cache. Its NCCL group lives on the
  policy's GPU, entered as a device context, so the trainer's current device is left as it was.
- **colocated**: a :class:`agon.engines.vllm.VLLMEngine` per policy in a process of its own
  (:class:`agon.engines.process.EngineProcess`), pinned to its GPU (beside its policy, or
  its own), built with vLLM's sleep mode so it sleeps through its policy's update
  (:meth:`agon.training.policy.Policy.sleep_engine`); after each update the policy's weights
  are staged in shared memory and loaded into it in place.

Neither path runs in CI (no GPU); the engine process's protocol and environment do, on CPU.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agon.engines import engine_options
from agon.engines.base import (
    Completion,
    Engine,
    Messages,
    SamplingParams,
    TemplatedEngine,
)
from agon.engines.hf import HFEngine, _first_stop, resolve_dtype
from agon.engines.placement import Part, visible_gpus
from agon.engines.process import EngineProcess, engine_env
from agon.engines.staging import checkpoint_state
from agon.engines.vllm import STAGED_WEIGHTS
from agon.training.settings import RLSettings

# the names a wrapper adds to a parameter's: DDP's module, torch's checkpoint_wrapper (FSDP's
# activation checkpointing); an engine loads the model's own
WRAPPER_PREFIXES = ("module.",)
WRAPPER_INFIXES = ("_checkpoint_wrapped_module.",)


def engine_weight_name(name: str) -> str:
    """A trained parameter's name as the engine's model calls it: the wrappers' parts dropped."""
    for prefix in WRAPPER_PREFIXES:
        name = name.removeprefix(prefix)
    for infix in WRAPPER_INFIXES:
        name = name.replace(infix, "")
    return name


class ServerRollouts(TemplatedEngine):
    """Rollouts from one policy's ``trl vllm-serve``; weights pushed to it after each update."""

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        *,
        system_prompt: str | None = None,
        chat_template_kwargs: dict | None = None,
        max_prompt_tokens: int | None = None,
        connection_timeout: float = 600.0,
        group_port: int = 51216,
        device: Any = 0,
        is_main: bool = True,
    ):
        # lazy: trl: its vllm_client imports vLLM where installed; only the server mode needs
        # it, not every in-house training run (agon.training.shell imports this module)
        from trl.generation.vllm_client import VLLMClient

        self.set_template(tokenizer, system_prompt, chat_template_kwargs, max_prompt_tokens)
        self.client = VLLMClient(
            base_url=base_url, group_port=group_port, connection_timeout=connection_timeout
        )
        self.device = (
            torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        )
        self.is_main = is_main
        if (
            is_main
        ):  # one NCCL group per server: the main training rank pushes, the others only generate
            with self.on_device():  # TRL's client sets the current device; the context restores it
                self.client.init_communicator(device=self.device)
        eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos])

    def on_device(self) -> contextlib.AbstractContextManager:
        """The policy's GPU as the current device while the weight-transfer group works on it
        (NCCL runs on the current device's stream), the trainer's own restored after: a
        ``torch.cuda.set_device`` would move every later default-``cuda`` load there."""
        if self.device.type != "cuda":
            return contextlib.nullcontext()
        return torch.cuda.device(self.device)

    def generate(
        self, prompts: Sequence[Messages], n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        """``n`` completions per prompt from the server (token-id prompts, sampled logprobs).

        ``trl vllm-serve`` takes one seed per request, not per prompt: ``prompt_seeds`` are
        checked and not used, so a run over several processes samples differently from one.
        A completion ends at eos or at a stop string; its text excludes the stop string, its
        token ids keep what was generated up to it (as :class:`agon.engines.hf.HFEngine`).
        """
        sampling = sampling or SamplingParams()
        encoded = [self.encode(p) for p in prompts]
        sampling.seeds_for(len(encoded))
        extra: dict[str, Any] = {"seed": sampling.seed} if sampling.seed is not None else {}
        if sampling.stop:
            extra["stop"] = list(sampling.stop)
        out = self.client.generate(
            prompts=encoded,
            n=n,
            temperature=max(sampling.temperature, 1e-6),
            top_p=sampling.top_p,
            top_k=0,
            max_tokens=sampling.max_new_tokens,
            logprobs=0,
            generation_kwargs=extra or None,
        )
        completions = []
        for i, prompt in enumerate(encoded):
            row = []
            for j in range(n):
                k = i * n + j  # the server returns the n samples of a prompt together, prompt-major
                ids = out["completion_ids"][k]
                stopped = bool(ids) and ids[-1] in self.eos_ids
                text = self.tokenizer.decode(
                    ids[:-1] if stopped else ids, skip_special_tokens=False
                )
                hit = _first_stop(text, sampling.stop)
                if hit is not None:
                    text, stopped = text[: hit[0]], True
                row.append(
                    Completion(
                        text=text,
                        token_ids=list(ids),
                        logprobs=[lp[0] for lp in out["logprobs"][k]],
                        prompt_token_ids=list(prompt),
                        finish_reason="stop" if stopped else "length",
                    )
                )
            completions.append(row)
        return completions

    def sync_weights(self, model: Any) -> None:
        """Send the trainer's current weights to the server in one batched update and drop its
        stale prefix cache.

        The server is told every tensor's name (the checkpoint's: :func:`checkpoint_state`),
        dtype and shape first (a DTensor's shape is the
        full one, so nothing is gathered for it), then the tensors stream in one packed NCCL
        broadcast. Under FSDP2 every rank takes part in gathering each full parameter
        (``full_tensor``), in the same order; the main rank streams it. All ranks wait until the
        server has them.
        """
        # under the checkpoint's names, as a staged file holds them (Qwen3.5's trainer calls its
        # layers model.layers.*, the checkpoint and vLLM's model model.language_model.*)
        named = {engine_weight_name(n): p for n, p in model.named_parameters()}
        params = list(checkpoint_state(model, named).items())

        def full_params():
            for name, p in params:
                yield name, (p.full_tensor() if hasattr(p, "full_tensor") else p.data)

        if self.is_main:
            metadata = [(n, str(p.dtype).removeprefix("torch."), list(p.shape)) for n, p in params]
            with self.on_device():
                self.client.update_named_params(metadata, full_params())
            self.client.reset_prefix_cache()
        else:
            for _ in full_params():
                pass
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.barrier()

    def close(self) -> None:
        if self.is_main:
            self.client.close_communicator()


@dataclass(frozen=True)
class RolloutOptions:
    """How the in-house trainers sample: their settings' ``train.backend`` and its sizes, and
    the ``agon.servers`` of server mode (one URL per policy; none: colocated vLLM)."""

    backend: str = "hf"  # hf | vllm
    batch_size: int = 128  # rows per generate call (train.rollout_batch_size)
    gpu_memory_utilization: float = 0.3  # each colocated vLLM engine's share of the GPU
    servers: Mapping[str, str | None] = field(default_factory=dict)  # policy name -> URL
    # the family's generation limit: with its prompt limit, the context a vLLM engine sizes for
    max_new_tokens: int = 256
    # vLLM's own keywords beyond the settings' (bench_paper_scale: load_format "dummy", its
    # weights sent by the first sync, as a resumed run's are)
    llm_kwargs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, s: RLSettings) -> RolloutOptions:
        """The options of an in-house trainer's settings."""
        return cls(
            backend=s.backend,
            batch_size=s.rollout_batch_size,
            gpu_memory_utilization=s.vllm_gpu_memory_utilization,
            servers=s.servers,
            max_new_tokens=s.max_new_tokens,
        )


# each server has its own weight-transfer group, so the two policies need distinct ports
SERVER_GROUP_PORT = 51216  # policy A's; B's is the next


def rollout_engine(
    options: RolloutOptions,
    fam: dict,
    name: str,
    model: Any,
    tokenizer: Any,
    autocast_dtype: Any = None,
    part: Part | None = None,
) -> Engine:
    """The engine policy ``name`` (A or B) samples with, where ``part`` (its placement,
    :func:`agon.engines.placement.place`) says: the live HF model (under autocast to
    ``autocast_dtype`` when its weights are float32 masters), a vLLM server, or a colocated
    vLLM in a process of its own on ``part``'s GPU (which holds its own copy in the family's
    dtype)."""
    mrow = fam[f"model_{name.lower()}"]
    common = engine_options(mrow, fam)
    if options.backend == "hf":
        return HFEngine(
            model, tokenizer, batch_size=options.batch_size, autocast_dtype=autocast_dtype, **common
        )
    if options.servers.get(name):
        return ServerRollouts(
            options.servers[name],
            tokenizer,
            **common,
            device=getattr(model, "device", 0),
            group_port=SERVER_GROUP_PORT + (0 if name == "A" else 1),
            is_main=int(os.environ.get("RANK", "0")) == 0,
        )
    gpu = 0 if part is None or part.gpu is None else part.gpu
    gpus = visible_gpus(count=torch.cuda.device_count())
    physical = gpus[gpu] if gpus else ""  # no GPU: vLLM's CPU build
    prompt_limit = fam.get("max_prompt_tokens")
    kwargs = dict(
        model=mrow["model"],
        revision=mrow.get("revision"),  # the row's revision, not the hub's main
        # the longest sequence a rollout makes, not the model's own context (262k for Qwen3.5)
        max_model_len=None if prompt_limit is None else prompt_limit + options.max_new_tokens,
        dtype=fam["dtype"],
        gpu_memory_utilization=options.gpu_memory_utilization,
        worker_extension_cls=STAGED_WEIGHTS,
        enable_sleep_mode=True,  # it sleeps through its policy's update (Policy.sleep_engine)
        **common,
        **options.llm_kwargs,
    )
    return EngineProcess(
        "agon.engines.vllm:VLLMEngine",
        kwargs,
        engine_env(physical),
        name=name,
        tokenizer=tokenizer,
        dtype=resolve_dtype(fam["dtype"]),
    )
