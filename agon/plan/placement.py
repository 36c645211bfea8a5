"""Where a job's models sit, and the memory each device (and the host) must hold.

**Placement assumed.** A duel-shaped job (the duel, and the in-house solo trainers of Cliff,
GAR and OPD-then-RL, which hold both policies at once) puts one policy per GPU when its
``resources.train.gpus`` is 2 or more: policy A, its optimizer and its rollout engine on the
first GPU, B's on the second, helpers (a Cliff or OPD teacher) on the first. With one GPU
both policies share it (the in-house trainer places policy A on ``cuda:0`` and B on ``cuda:1``
when its process sees two GPUs: :func:`agon.training.shell.policy_device`). GRPO on TRL trains
A, then B, one model on one GPU (the workflow launches one
process). An evaluation loads each distinct model of its system on one GPU. A job with
``gpus: 0`` runs on the CPU: everything is host memory.

**Phases.** Weights, optimizer moments and a reference model stay for the whole run; the
gradients, activations and head buffers of an update, and the KV cache of a transformers
rollout, come and go, and rollouts and updates alternate, so a device holds the persistent
part plus the larger transient one. A colocated vLLM engine holds its reserved share
(``train.vllm_gpu_memory_utilization``; TRL's for GRPO) from start to end.

**Host.** :data:`HOST_PROCESS_BYTES` (assumed) for the process, plus the weights of every model
the job holds (a model's state dict is staged through host memory when its folder is saved);
on the CPU, everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agon.evaluation.from_config import EVAL_VLLM_SHARE
from agon.plan.dims import ModelDims, param_count
from agon.plan.memory import (
    Breakdown,
    dtype_bytes,
    estimate_generation_memory,
    estimate_step_memory,
    vllm_reserved,
)
from agon.plan.workload import Workload

# Host memory of one job's process besides model weights: a Python process with torch and
# transformers imported holds about a gigabyte resident (an assumption, not a measurement;
# the toy world's jobs run within their 4000 MB)
HOST_PROCESS_BYTES = 2**30
PERSISTENT = ("weights", "optimizer_states", "reference_model", "vllm_reserved", "helper_weights")
FP32_BYTES = 4


@dataclass
class Device:
    """One device's memory: what it always holds, and the transient sets it alternates."""

    name: str
    persistent: Breakdown = field(default_factory=lambda: Breakdown({}))
    transients: list[Breakdown] = field(default_factory=list)

    def add(self, b: Breakdown, prefix: str = "") -> None:
        """Split ``b`` into persistent components and one transient set."""
        keep = {k: v for k, v in b.components.items() if k in PERSISTENT}
        rest = {k: v for k, v in b.components.items() if k not in PERSISTENT}
        self.persistent = self.persistent.plus(Breakdown(keep, b.assumptions), prefix)
        if rest:
            self.transients.append(Breakdown({prefix + k: v for k, v in rest.items()}))

    def peak(self) -> Breakdown:
        """The persistent part plus the largest transient set."""
        worst = max(self.transients, key=lambda b: b.total, default=Breakdown({}))
        return self.persistent.plus(worst)


@dataclass(frozen=True)
class Memory:
    """A job's memory: the fullest device's breakdown, the host's, and the placement."""

    per_device: Breakdown
    devices: int
    host: float
    placement: str


@dataclass(frozen=True)
class TrainShape:
    """What a training job's memory depends on beyond the dims (from the config)."""

    dtype: str
    master_dtype: str | None
    micro_batch: int
    prompt: int  # the longest prompt its micro-batches hold
    completion: int
    gradient_checkpointing: bool
    reference_model: bool
    engine: str
    rollout_rows: int
    rollout_context: int
    vllm_share: float


def _rollout(d: ModelDims, s: TrainShape, device_bytes: float) -> Breakdown:
    if s.engine == "vllm":
        return vllm_reserved(s.vllm_share, device_bytes)
    return estimate_generation_memory(
        d, batch=s.rollout_rows, context=s.rollout_context, dtype=s.dtype, include_weights=False
    )


def _step(d: ModelDims, s: TrainShape) -> Breakdown:
    return estimate_step_memory(
        d,
        micro_batch=s.micro_batch,
        prompt_tokens=s.prompt,
        completion_tokens=s.completion,
        dtype=s.dtype,
        master_dtype=s.master_dtype,
        gradient_checkpointing=s.gradient_checkpointing,
        reference_model=s.reference_model,
    )


def helper_memory(d: ModelDims, dtype: str, rows: int, context: int, generates: bool) -> Breakdown:
    """A frozen helper model (a teacher): its weights, and its KV cache when it generates."""
    b = Breakdown(
        {"helper_weights": float(param_count(d) * dtype_bytes(dtype, d.checkpoint_dtype))}
    )
    if generates:
        gen = estimate_generation_memory(
            d, batch=rows, context=context, dtype=dtype, include_weights=False
        )
        b = b.plus(gen, "helper_")
    return b


def train_memory(
    models: dict[str, ModelDims],
    s: TrainShape,
    gpus: int,
    device_bytes: float | None,
    sequential: bool,
    helpers: list[Breakdown],
    extra_transient: Breakdown | None = None,
) -> Memory:
    """Memory of a training job over A and B (``sequential``: one model at a time, TRL's GRPO),
    with ``helpers`` (teachers) on the first device."""
    cap = device_bytes or 0.0
    names = ("A", "B")
    if sequential:
        dev = Device("gpu0" if gpus else "cpu")
        for m in names:  # one model at a time: each its own persistent set, the larger wins
            one = Device("gpu0")
            one.add(_step(models[m], s))
            one.add(_rollout(models[m], s, cap))
            if one.peak().total > dev.peak().total:
                dev = one
        devs = [dev]
        where = "one GPU" if gpus else "the CPU"
        placement = f"one model at a time on {where} (TRL, one process)"
    elif gpus >= 2:
        devs = [Device(f"gpu{i}") for i in range(2)]
        for dev, m in zip(devs, names):
            dev.add(_step(models[m], s), f"{m}.")
            dev.add(_rollout(models[m], s, cap), f"{m}.")
        placement = "one policy per GPU (A and its engine on GPU 0, B on GPU 1)"
    else:
        devs = [Device("gpu0" if gpus else "cpu")]
        for m in names:
            devs[0].add(_step(models[m], s), f"{m}.")
            devs[0].add(_rollout(models[m], s, cap), f"{m}.")
        placement = "both policies on one GPU" if gpus else "both policies on the CPU"
    for h in helpers:
        devs[0].add(h)
    if extra_transient is not None:
        for dev in devs:
            dev.transients = [t.plus(extra_transient) for t in dev.transients]
    fullest = max((d.peak() for d in devs), key=lambda b: b.total)
    weights = sum(
        param_count(d) * dtype_bytes(s.dtype, d.checkpoint_dtype) for d in models.values()
    )
    host = (
        HOST_PROCESS_BYTES + weights + sum(h.components.get("helper_weights", 0.0) for h in helpers)
    )
    if not gpus:
        host += fullest.total
    return Memory(fullest, len(devs), host, placement)


def eval_memory(
    loaded: dict[str, ModelDims],
    distinct: list[str],
    w: Workload,
    dtype: str,
    gpus: int,
    max_new: int,
    device_bytes: float | None = None,
) -> Memory:
    """Memory of an evaluation: the ``distinct`` models of the system (an untrained pair of one
    checkpoint with two personas is loaded once) on one device, and the KV cache of the largest
    generate call (its rows at the longest prompt + ``max_new``); on vLLM, each model's engine
    holds its share of the GPU (:data:`agon.evaluation.from_config.EVAL_VLLM_SHARE`), its
    weights and paged KV cache inside it."""
    if gpus and device_bytes and any(g.engine == "vllm" for g in w.generations):
        dev = Device("gpu0")
        for key in distinct:
            dev.add(vllm_reserved(EVAL_VLLM_SHARE, device_bytes), f"{key}.")
        peak = dev.peak()
        host = HOST_PROCESS_BYTES + sum(
            param_count(loaded[k]) * dtype_bytes(dtype, loaded[k].checkpoint_dtype)
            for k in distinct
        )
        return Memory(peak, 1, host, "each model's vLLM engine on one device, its share reserved")
    dev = Device("gpu0" if gpus else "cpu")
    for key in distinct:
        d = loaded[key]
        dev.add(
            Breakdown({"weights": float(param_count(d) * dtype_bytes(dtype, d.checkpoint_dtype))}),
            f"{key}.",
        )
    for g in w.generations:
        d = loaded[g.model]
        gen = estimate_generation_memory(
            d,
            batch=int(min(g.rows, g.sequences)),
            context=int(g.prompt + max_new),
            dtype=dtype,
            include_weights=False,
        )
        dev.add(gen, f"{g.model}.")
    peak = dev.peak()
    host = HOST_PROCESS_BYTES + dev.persistent.total + (peak.total if not gpus else 0.0)
    return Memory(peak, 1, host, "every model of the system on one device (transformers generate)")


def logits_transient(name: str, tokens: float, vocab_chunk: int) -> Breakdown:
    """A helper's chunked float32 logits (GAR's cosines, ``gar.vocab_chunk``): at most
    ``tokens`` x ``vocab_chunk`` of them at once, as component ``name``."""
    return Breakdown({name: float(tokens * vocab_chunk * FP32_BYTES)})
