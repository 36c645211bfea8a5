"""A job's price: tokens, FLOPs and seconds of its phases, and the flags of what will not fit.

Generation phases are timed on their engine (a colocated vLLM keeps as many sequences in flight
as its share's KV cache holds, at most :data:`VLLM_MAX_NUM_SEQS`; transformers decodes its
batch's rows together), training-side work (updates, recomputation, reference and teacher
forwards) at the FLOP bound; phases add up, one after another.
"""

from __future__ import annotations

from agon.plan.context import JobPlan, PlanContext
from agon.plan.dims import ModelDims, kv_cache_bytes, param_count
from agon.plan.errors import PlanError
from agon.plan.flops import forward_flops, generation_flops, training_flops
from agon.plan.hardware import ASSUMED, generation_seconds, get_gpu_kind, training_seconds
from agon.plan.jobs import Job
from agon.plan.memory import dtype_bytes
from agon.plan.placement import TrainShape
from agon.plan.workload import Workload

# vLLM's default cap on sequences in flight (EngineArgs.max_num_seqs); its KV share may hold fewer
VLLM_MAX_NUM_SEQS = 256
# what a vLLM engine keeps inside its share besides weights and KV cache (its forward's
# activations, CUDA graphs): an assumption, not a measurement
VLLM_OVERHEAD_BYTES = 2 * 2**30
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_MINUTE = 60.0  # resources' runtime is in minutes
BYTES_PER_MB = 1e6  # Snakemake's mem_mb is in megabytes (10^6 bytes)


def _vllm_concurrency(
    ctx: PlanContext,
    d: ModelDims,
    share: float,
    dtype: str,
    prompt: float,
    completion: float,
    flags: list[str],
    who: str,
) -> float:
    """Sequences a colocated vLLM engine keeps in flight: its share less weights and overhead,
    over one sequence's KV at the mean context (and at most :data:`VLLM_MAX_NUM_SEQS`)."""
    mem = ctx.kind.memory_bytes or 0.0
    b = dtype_bytes(dtype, d.checkpoint_dtype)
    room = share * mem - param_count(d) * b - VLLM_OVERHEAD_BYTES
    longest = int(prompt + completion)
    if room < kv_cache_bytes(d, b, max(longest, 1), 1):
        flags.append(
            f"{who}: vLLM's share ({share:g} x {mem / 1e9:.0f} GB) leaves {room / 1e9:.1f} GB "
            f"for KV cache, under one {longest}-token sequence: raise "
            "vllm_gpu_memory_utilization or use a smaller model"
        )
        return 1.0
    per_seq = kv_cache_bytes(d, b, max(int(prompt + completion / 2), 1), 1)
    return float(max(1, min(VLLM_MAX_NUM_SEQS, room // per_seq)))


def price(
    ctx: PlanContext,
    job: Job,
    w: Workload,
    models: dict[str, ModelDims],
    p: JobPlan,
    shape: TrainShape | None,
) -> None:
    """Tokens, FLOPs and seconds of the job's phases into ``p``."""
    tr = ctx.config["train"]
    dtype = ctx.families[job.family]["dtype"]
    device = ctx.kind.name if p.resources["gpus"] else "cpu"
    seconds: float | None = 0.0
    for g in w.generations:
        d = models[g.model]
        flops = g.sequences * generation_flops(d, int(g.prompt), int(g.completion))
        p.flops_generation += flops
        if g.helper:
            p.tokens_helpers += g.sequences * g.completion
        else:
            p.tokens_generated += g.sequences * g.completion
        p.lengths.append(f"{g.what}: {g.completion:.0f} tokens ({g.source})")
        rows = float(g.rows)
        if g.engine == "vllm" and p.resources["gpus"]:
            share = shape.vllm_share if shape else tr["vllm_gpu_memory_utilization"]
            rows = _vllm_concurrency(ctx, d, share, dtype, g.prompt, g.completion, p.flags, g.what)
        try:
            eff = ctx.efficiency(device, g.engine, d)
        except PlanError as err:  # no measurement for a kind without bounds (the CPU)
            p.notes.append(f"no time estimate: {err}")
            seconds = None
            continue
        s = generation_seconds(
            d,
            ctx.kind if device != "cpu" else get_gpu_kind("cpu"),
            sequences=g.sequences,
            prompt=g.prompt,
            completion=g.completion,
            concurrency=rows,
            dtype=dtype,
            decode_eff=eff.decode,
            compute_eff=eff.compute,
        )
        seconds = None if seconds is None else seconds + s
        p.throughput.append(f"{g.what}: {eff.generation_label}")
        p.assumed |= ASSUMED in eff.generation_label
        p.phases.append({"phase": g.what, "kind": "generate", "flops": flops, "seconds": s})
    gc = shape.gradient_checkpointing if shape else False
    engine = shape.engine if shape else "hf"
    for t in w.trainings:
        d = models[t.model]
        f = (
            training_flops(
                d,
                int(t.prompt),
                int(t.completion),
                gradient_checkpointing=gc,
                reference_model=tr["beta"] > 0,
                num_iterations=tr["num_iterations"],
            )["total"]
            * t.sequences
        )
        p.tokens_trained += t.sequences * t.completion
        seconds = _train_time(ctx, device, engine, t.what, d, f, seconds, p)
    for sc in w.scorings:
        d = models[sc.model]
        f = sc.sequences * forward_flops(d, int(sc.prompt), int(sc.completion), int(sc.completion))
        seconds = _train_time(ctx, device, engine, sc.what, d, f, seconds, p)
    p.seconds = seconds


def _train_time(
    ctx: PlanContext,
    device: str,
    engine: str,
    what: str,
    d: ModelDims,
    flops: float,
    seconds: float | None,
    p: JobPlan,
) -> float | None:
    """Add ``flops`` of training-side work to ``p``; return the job's seconds so far."""
    p.flops_training += flops
    try:
        eff = ctx.efficiency(device, engine, d)
    except PlanError as err:
        p.notes.append(f"no time estimate: {err}")
        return None
    s = training_seconds(flops, ctx.kind if device != "cpu" else get_gpu_kind("cpu"), eff.train)
    p.throughput.append(f"{what}: {eff.training_label}")
    p.assumed |= ASSUMED in eff.training_label
    p.phases.append({"phase": what, "kind": "train", "flops": flops, "seconds": s})
    return None if seconds is None else seconds + s


def check(ctx: PlanContext, p: JobPlan) -> None:
    """Flags: memory over what the job's resources give, time over its runtime, risks."""
    res, mem = p.resources, p.memory
    if mem is not None and res["gpus"] and ctx.kind.memory_bytes:
        if mem.per_device.total > ctx.kind.memory_bytes:
            top = sorted(mem.per_device.components.items(), key=lambda kv: -kv[1])[:3]
            parts = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in top)
            p.flags.append(
                f"memory: {mem.per_device.total / 1e9:.1f} GB on a GPU > {ctx.kind.name}'s "
                f"{ctx.kind.memory_bytes / 1e9:.0f} GB ({mem.placement}; largest: {parts} GB)"
            )
    if mem is not None and mem.host > res["mem_mb"] * BYTES_PER_MB:
        p.flags.append(
            f"host memory: {mem.host / 1e9:.1f} GB > resources.{p.job.resources_row}.mem_mb "
            f"{res['mem_mb']} MB"
        )
    if p.seconds and p.seconds > res["runtime"] * SECONDS_PER_MINUTE:
        why = " (assumed throughput)" if p.assumed else ""
        p.flags.append(
            f"runtime: ~{p.seconds / SECONDS_PER_HOUR:.1f} h > resources.{p.job.resources_row}"
            f".runtime {res['runtime']} min{why}: the scheduler would stop it"
        )
    p.flags += [n.removeprefix("risk: ") for n in p.notes if n.startswith("risk: ")]
