"""A policy: one trained model with its own optimizer, scheduler, rollout engine and devices.

The duel trains two of them (A and B), each on its own tokens with its own optimizer; the
algorithm (:mod:`agon.duel`) only calls the few methods here (``backward``,
``clip_grad_norm``, ``all_agree``, ``scheduler_step``), so whether the model sits on one
device or is sharded over several processes by accelerate (DDP / FSDP2) is decided here and
nowhere else.

A rollout engine with memory of its own on the GPU (a colocated vLLM) sleeps through its
policy's update and wakes for the weight sync that follows it, as TRL's colocate mode, verl and
OpenRLHF release theirs: the engine's share of the GPU is the update's while it runs. Engines
without ``sleep`` and ``wake_up`` (the transformers engine, a server) are left alone.
"""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from accelerate import Accelerator
from transformers import get_scheduler

from agon.engines.base import Engine
from agon.logprobs import dropout_off, enable_token_logprobs, frozen_scorer
from agon.training.settings import RLSettings


@dataclass
class Policy:
    """One trained model with its own optimizer, scheduler, engine and optional frozen reference."""

    name: str  # "A" or "B"
    model: torch.nn.Module
    engine: Engine  # generates with the live model (shares its weights)
    optimizer: torch.optim.Optimizer
    scheduler: Any
    ref_model: torch.nn.Module | None = None
    pad_token_id: int = 0
    accelerator: Any = None  # set under `accelerate launch` (DDP / FSDP2); None on one device
    # train.master_dtype float32: the dtype the forward and backward compute in (the family's),
    # the weights and AdamW's moments staying float32; None: no autocast
    autocast_dtype: torch.dtype | None = None
    engine_asleep: bool = False  # the engine sleeps through this policy's update
    # a pretrained toy model's habits (agon.toy.audit.model_habits), which the duel reads its
    # take-up of right draft steps against; None for any other model
    habits: Any = None

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward's precision: autocast to :attr:`autocast_dtype` on the model's device,
        or nothing (the weights' own dtype)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        device = next(self.model.parameters()).device
        return torch.autocast(device_type=device.type, dtype=self.autocast_dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """Backpropagate ``loss`` (through accelerate when the model is wrapped by it), the
        rollout engine asleep (:meth:`sleep_engine`)."""
        self.sleep_engine()
        if self.accelerator is not None:
            self.accelerator.backward(loss)
        else:
            loss.backward()

    def clip_grad_norm(self, max_norm: float) -> float:
        """Clip the gradient to ``max_norm``; return the norm before clipping."""
        acc = self.accelerator
        clip = acc.clip_grad_norm_ if acc is not None else torch.nn.utils.clip_grad_norm_
        return float(clip(self.model.parameters(), max_norm))

    def any_rank(self, flag: bool) -> bool:
        """``flag`` of this process, or'ed over every process (each rank must decide alike)."""
        acc = self.accelerator
        if acc is None or acc.num_processes <= 1:
            return flag
        return bool(acc.reduce(torch.tensor(float(flag), device=acc.device), reduction="sum") > 0)

    @property
    def world_size(self) -> int:
        """How many processes train this policy together (1 without accelerate)."""
        return 1 if self.accelerator is None else self.accelerator.num_processes

    def sum_over_ranks(self, x: float) -> float:
        """``x`` summed over every process (``x`` itself on one)."""
        acc = self.accelerator
        if self.world_size <= 1:
            return x
        return float(acc.reduce(torch.tensor(float(x), device=acc.device), reduction="sum"))

    def scheduler_step(self) -> None:
        """Advance the schedule, even when the update was skipped (torch warns; the skip is
        deliberate)."""
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="Detected call of `lr_scheduler.step\\(\\)` before"
            )
            self.scheduler.step()

    def sleep_engine(self) -> None:
        """Have the rollout engine free its GPU memory for the update, if it can (``sleep``;
        once per update: the first backward). Level :data:`ENGINE_SLEEP_LEVEL`."""
        sleep = getattr(self.engine, "sleep", None)
        if sleep is not None and not self.engine_asleep:
            sleep(ENGINE_SLEEP_LEVEL)
            self.engine_asleep = True

    def sync_engine(self) -> None:
        """Give a rollout engine that holds its own copy of the weights (vLLM) the new ones,
        woken first if it slept through the update."""
        if self.engine_asleep:
            self.engine.wake_up()
            self.engine_asleep = False
        sync = getattr(self.engine, "sync_weights", None)
        if sync is not None:
            sync(self.model)


def make_policy(
    name: str,
    model: torch.nn.Module,
    engine: Engine,
    settings: RLSettings,
    pad_token_id: int,
    autocast_dtype: torch.dtype | None = None,
) -> Policy:
    """A policy with AdamW (:func:`adamw_class`: how its steps land on 16-bit weights), a warmup
    scheduler, dropout off (as TRL), gradient checkpointing if ``settings`` asks for it, and, if
    ``beta``, a frozen copy of the model as the KL reference.
    ``autocast_dtype``: the forward's dtype when the weights are float32 masters
    (``train.master_dtype``)."""
    dropout_off(model)  # TRL's disable_dropout: sampling and scoring see one net
    enable_token_logprobs(model, settings.temperature)
    if settings.gradient_checkpointing:
        # non-reentrant: works with the packed forward's custom attention mask and with DDP;
        # it recomputes in training mode only, so generation keeps its KV cache
        enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.2x
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
    adamw, extra = adamw_class(settings.bf16_update, {p.dtype for p in model.parameters()})
    optimizer = adamw(
        model.parameters(),
        lr=settings.learning_rate,
        betas=settings.adam_betas,
        weight_decay=settings.weight_decay,
        **extra,
    )
    scheduler = get_scheduler(
        settings.lr_scheduler,
        optimizer,
        num_warmup_steps=settings.warmup_steps,
        num_training_steps=settings.model_steps(name) * settings.num_iterations,
    )
    ref = None
    if settings.beta != 0.0:
        ref = frozen_scorer(copy.deepcopy(model), settings.temperature)
    return Policy(
        name=name,
        model=model,
        engine=engine,
        optimizer=optimizer,
        scheduler=scheduler,
        ref_model=ref,
        pad_token_id=pad_token_id,
        autocast_dtype=autocast_dtype,
    )


# vLLM's sleep level for an engine through its policy's update: 2 drops the weights (level 1
# copies them to host memory) and the KV cache, since the sync after the update overwrites
# every weight anyway; TRL's colocate mode sleeps at 2 too
ENGINE_SLEEP_LEVEL = 2
SIXTEEN_BIT = (torch.bfloat16, torch.float16)
SR_EXTRA = "bf16-sr"  # the optional dependency that brings torchao (pyproject.toml)


def adamw_class(bf16_update: str, dtypes: set[torch.dtype]) -> tuple[type, dict[str, Any]]:
    """The AdamW that ``train.bf16_update`` asks for on weights of ``dtypes``, and the keywords
    it takes besides lr, betas and weight_decay (eps: torch's default, 1e-8).

    - ``plain``, or no 16-bit weight: torch's own AdamW, each step rounded to the weights'
      dtype (at lr 1e-6 most steps round away on bf16 weights: docs/method.md, precision);
    - ``kahan``: torch-optimi's AdamW with Kahan-compensated updates: a 16-bit buffer per
      weight keeps what rounding dropped and adds it back on the next step;
    - ``stochastic_rounding``: torchao's AdamW computed in float32 and rounded to bfloat16 up
      or down with the probability of its distance (no extra memory; random; bfloat16 only).

    Both libraries keep AdamW's moments in the weights' dtype, as torch's does, and take
    their step as torch's (decoupled weight decay, bias-corrected moments, eps outside the
    root)."""
    if bf16_update == "plain" or not dtypes & set(SIXTEEN_BIT):
        return torch.optim.AdamW, {}
    if bf16_update == "kahan":
        try:
            # lazy: optimi (torch-optimi): only kahan builds it; an environment made from an
            # explicit list (workflow/envs/agon.yaml, float32 toy world) need not hold it
            from optimi import AdamW
        except ImportError as e:
            raise ImportError(
                "train.bf16_update: kahan needs torch-optimi (an agon dependency): "
                "pip install 'torch-optimi>=0.3.3'"
            ) from e
        return AdamW, {"eps": 1e-8, "kahan_sum": True}
    if bf16_update == "stochastic_rounding":
        if torch.float16 in dtypes:
            raise ValueError(
                "train.bf16_update: stochastic_rounding rounds to bfloat16 only (torchao); "
                "these weights are float16: use kahan, or a bfloat16 family"
            )
        try:
            # lazy: torchao (the bf16-sr extra; seconds to import): only stochastic_rounding
            # builds it, and an install without the extra must still import this module
            from torchao.optim import _AdamW
        except ImportError as e:
            raise ImportError(
                "train.bf16_update: stochastic_rounding needs torchao, the optional "
                f"dependency agon[{SR_EXTRA}]: pip install 'agon[{SR_EXTRA}]'"
            ) from e
        return _AdamW, {"eps": 1e-8, "bf16_stochastic_round": True}
    raise ValueError(f"train.bf16_update: unknown value {bf16_update!r}")


def make_accelerator() -> Any:
    """An ``accelerate.Accelerator`` when launched with several processes, else None.

    One Accelerator prepares both policies (``config/accelerate/fsdp2.yaml`` shards each with
    FSDP2). Schedulers step once per optimizer step, not once per process. Without a GPU the
    processes train on the CPU over gloo (accelerate's MULTI_CPU), however they were launched
    (``torchrun --nproc_per_node N`` or ``accelerate launch --multi_gpu --num_processes N``).
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    accelerator = Accelerator(
        step_scheduler_with_optimizer=False, cpu=not torch.cuda.is_available()
    )
    check_fsdp_plugin(accelerator)
    asked = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if asked and distributed_info(accelerator)["distributed_type"] != "FSDP":
        # accelerate switches to FSDP only from a GPU-family backend, never from MULTI_CPU
        warnings.warn(
            "the accelerate config asks for FSDP, but accelerate runs these processes as "
            f"{distributed_info(accelerator)['distributed_type']} (FSDP needs GPUs): the models "
            "are replicated (DDP), not sharded",
            stacklevel=2,
        )
    return accelerator


def check_fsdp_plugin(accelerator: Any) -> None:
    """Refuse FSDP's own activation checkpointing (the accelerate config's
    ``fsdp_activation_checkpointing``) for the in-house trainers: ``train.gradient_checkpointing``
    is their one switch, so with both on every layer would be checkpointed twice, and its
    ``checkpoint_wrapper`` renames every weight (``_checkpoint_wrapped_module.``) that a vLLM
    engine's weight sync sends by name."""
    if distributed_info(accelerator)["distributed_type"] != "FSDP":
        return
    plugin = getattr(accelerator.state, "fsdp_plugin", None)
    if plugin is not None and getattr(plugin, "activation_checkpointing", False):
        raise ValueError(
            "the accelerate config sets fsdp_activation_checkpointing: true; the in-house "
            "trainers checkpoint activations through train.gradient_checkpointing (it would "
            "checkpoint each layer twice, and rename the weights the rollout engines load): set "
            "fsdp_activation_checkpointing: false (config/accelerate/fsdp2.yaml does) and "
            "train.gradient_checkpointing: true"
        )


def distribute(policy: Policy, accelerator: Any) -> None:
    """Wrap ``policy``'s model, optimizer and scheduler for ``accelerator`` (DDP or FSDP2)."""
    if accelerator is None:
        return
    policy.model, policy.optimizer, policy.scheduler = accelerator.prepare(
        policy.model, policy.optimizer, policy.scheduler
    )
    policy.accelerator = accelerator


def distributed_info(accelerator: Any) -> dict:
    """How many processes trained a run and how accelerate spread the models over them."""
    if accelerator is None:
        return {"num_processes": 1, "distributed_type": "NO"}
    kind = accelerator.distributed_type
    return {
        "num_processes": accelerator.num_processes,
        "distributed_type": getattr(kind, "value", str(kind)),
    }
