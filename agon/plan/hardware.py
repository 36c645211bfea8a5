"""GPU kinds, their bounds, and the efficiencies a job's time is divided by.

A decode step of ``B`` sequences reads every weight and each sequence's KV cache once: it takes
at least ``(weight bytes + B x KV bytes) / bandwidth`` (and ``B x FLOPs per token / peak``);
the prefill and training are bound by peak FLOPs. A job's time is its work over the bound
divided by an efficiency: measured tokens/s over the bound at the measurement's own model and
shape (:func:`write_measurement`, files in :data:`MEASUREMENTS_DIR`), carried to another size
or GPU kind by the ratio of the bounds; else assumed, and labelled "assumed, not measured". The
``cpu`` kind has no nominal bounds: only its own measurements, in units of 1 B/s and 1 FLOP/s.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agon.plan.dims import (
    ModelDims,
    PlanError,
    generation_flops,
    kv_cache_bytes,
    param_count,
    prefill_flops,
    training_flops,
)
from agon.plan.memory import dtype_bytes
from agon.provenance import atomic_write_text, git_commit, host

MEASUREMENT_FORMAT = 1
ENGINES = ("vllm", "hf")
# bench/throughput/README.md defines the format
MEASUREMENTS_DIR = Path(__file__).resolve().parents[2] / "bench" / "throughput"

# Without a measurement, assumed (not measured): vLLM's paged continuous batching reaches half
# the bandwidth bound, transformers' generate a quarter (a Python loop per token, padded rows);
# training and prefill 0.4 of peak bf16 FLOPs, a well-tuned training run's utilization.
ASSUMED_DECODE_EFFICIENCY = {"vllm": 0.5, "hf": 0.25}
ASSUMED_COMPUTE_EFFICIENCY = 0.4
ASSUMED = "assumed, not measured"
SAME_PARAMS_REL = 0.01  # a measured model "is" the job's model within this parameter difference
UNIT_BOUND = 1.0  # a kind without nominal bounds (cpu): its measurements' unit, which cancels
GIB = 2**30  # memory is counted in bytes and shown in GiB, the unit a GPU reports its own in


@dataclass(frozen=True)
class GpuKind:
    """A device kind: memory, bandwidth and dense bf16 peak (None: no nominal bound, ``cpu``).

    ``memory_bytes`` is CUDA's total (what ``gpu_memory_utilization`` is a share of), not the
    marketed size: nvidia-smi's total less what the driver keeps (0.5-0.9 GiB; the H200's is
    its 143,771 MiB less the H100's difference, not read off an H200)."""

    name: str
    memory_bytes: float | None
    bandwidth: float | None  # bytes/s
    peak_flops: float | None  # FLOP/s, dense bf16
    source: str


GPU_KINDS: dict[str, GpuKind] = {
    k.name: k
    for k in (
        GpuKind("h200", 150.0e9, 4.8e12, 989e12, "NVIDIA H200 SXM: 139.7 GiB, 4.8 TB/s, 989 TF"),
        GpuKind("h100", 85.0e9, 3.35e12, 989e12, "NVIDIA H100 SXM: 79.2 GiB, 3.35 TB/s, 989 TF"),
        GpuKind(
            "a100-80gb", 85.0e9, 2.0e12, 312e12, "NVIDIA A100 80GB: 79.2 GiB, 2.0 TB/s, 312 TF"
        ),
        GpuKind("cpu", None, None, None, "this machine's CPU: its own measurements only"),
    )
}
VLLM_MAX_NUM_SEQS = 256  # EngineArgs.max_num_seqs: vLLM's default cap on sequences in flight
# a vLLM share's room besides weights and KV (activations, CUDA graphs): assumed, not measured
VLLM_OVERHEAD_BYTES = 2 * GIB


def vllm_concurrency(
    d: ModelDims, share: float, device_bytes: float, dtype: str, prompt: float, completion: float
) -> tuple[float, float]:
    """(sequences in flight, KV room in bytes) of a vLLM engine holding ``share`` of the GPU:
    the room left by the weights and overhead over one sequence's KV at the mean context (at
    most :data:`VLLM_MAX_NUM_SEQS`; 0 when it holds no whole ``prompt + completion``)."""
    b = dtype_bytes(dtype, d.checkpoint_dtype)
    room = share * device_bytes - param_count(d) * b - VLLM_OVERHEAD_BYTES
    if room < kv_cache_bytes(d, b, max(int(prompt + completion), 1), 1):
        return 0.0, room
    per_seq = kv_cache_bytes(d, b, max(int(prompt + completion / 2), 1), 1)
    return float(max(1, min(VLLM_MAX_NUM_SEQS, room // per_seq))), room


def get_gpu_kind(name: str) -> GpuKind:
    if name not in GPU_KINDS:
        raise PlanError(
            f"unknown GPU kind {name!r}; known: {sorted(GPU_KINDS)} (add a row to "
            "agon.plan.hardware.GPU_KINDS with its memory, bandwidth and peak bf16 FLOP/s)"
        )
    return GPU_KINDS[name]


# ----------------------------------------------------------------------------- bounds


def generation_seconds(
    d: ModelDims,
    kind: GpuKind,
    *,
    sequences: float,
    prompt: float,
    completion: float,
    concurrency: float,
    dtype: str,
    decode_eff: float,
    compute_eff: float,
) -> float:
    """Seconds to sample ``sequences`` completions, ``concurrency`` at a time: decode steps at
    the larger of the two bounds over their efficiencies, plus the prefill."""
    if sequences <= 0 or completion <= 0:
        return 0.0
    b = dtype_bytes(dtype, d.checkpoint_dtype)
    concurrency = max(1.0, min(concurrency, sequences))
    context = max(int(prompt + completion / 2), 1)  # the mean context
    read = param_count(d) * b + kv_cache_bytes(d, b, context, 1) * concurrency
    step = read / (kind.bandwidth or UNIT_BOUND) / decode_eff  # cpu: in UNIT_BOUND
    prefill = 0.0
    if kind.peak_flops:
        one = prefill_flops(d, int(prompt))
        per_token = (generation_flops(d, int(prompt), int(completion)) - one) / completion
        step = max(step, concurrency * per_token / kind.peak_flops / compute_eff)
        prefill = sequences * one / (kind.peak_flops * compute_eff)
    return sequences * completion / concurrency * step + prefill


def training_seconds(flops: float, kind: GpuKind, eff: float) -> float:
    return flops / ((kind.peak_flops or UNIT_BOUND) * eff)


# ----------------------------------------------------------------------------- measurements


@dataclass(frozen=True)
class Measurement:
    """One measurement file (bench/throughput/README.md)."""

    path: str
    gpu_kind: str
    engine: str
    dtype: str
    dims: ModelDims
    params: int
    batch: int
    prompt_tokens: int
    new_tokens: int
    generation_tokens_per_s: float | None
    training_tokens_per_s: float | None
    gradient_checkpointing: bool
    date: str
    concurrency: float | None = None  # sequences in flight, as measured
    gpu_memory_utilization: float | None = None  # a vLLM engine's share of the GPU


REQUIRED = {"gpu_kind": str, "engine": str, "dtype": str, "batch": int, "prompt_tokens": int,
            "new_tokens": int, "date": str}  # fmt: skip
OPTIONAL = ("generation_tokens_per_s", "training_tokens_per_s", "concurrency",
            "gpu_memory_utilization")  # fmt: skip


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def write_measurement(
    directory: str | Path,
    *,
    gpu_kind: str,
    dims: ModelDims,
    engine: str,
    dtype: str,
    batch: int,
    prompt_tokens: int,
    new_tokens: int,
    generation_tokens_per_s: float | None = None,
    training_tokens_per_s: float | None = None,
    gradient_checkpointing: bool = False,
    micro_batch_size: int | None = None,
    concurrency: float | None = None,
    gpu_memory_utilization: float | None = None,
    date: str | None = None,
    commit: str | None = None,
    machine: dict[str, Any] | None = None,
) -> Path:
    """Write one measurement as ``DIR/<date>-<kind>-<model>-<engine>-b<batch>.json`` and return
    its path. The rates are completion tokens per second: sampled with ``batch`` sequences of
    ``prompt_tokens + new_tokens``, or trained on. A vLLM rate needs the ``concurrency`` it kept
    or its ``gpu_memory_utilization``: a job's own concurrency is cut to its KV room already,
    so the efficiency is taken at that concurrency. ``date``, ``commit`` and ``machine``
    default to today, this checkout's HEAD and :func:`agon.provenance.host`."""
    get_gpu_kind(gpu_kind)  # a known kind, or a clear error
    if engine not in ENGINES:
        raise PlanError(f"engine {engine!r}: expected one of {ENGINES}")
    rates = [r for r in (generation_tokens_per_s, training_tokens_per_s) if r is not None]
    if not rates or any(r <= 0 for r in rates):
        raise PlanError(
            "a measurement needs generation_tokens_per_s and/or training_tokens_per_s > 0"
        )
    dtype_bytes(dtype)  # a known dtype, or a clear error
    if engine == "vllm" and generation_tokens_per_s and not (concurrency or gpu_memory_utilization):
        raise PlanError(
            "a vLLM generation rate needs concurrency (sequences in flight) or "
            "gpu_memory_utilization (its KV room), or the KV limit counts twice"
        )
    date = date or _dt.date.today().isoformat()
    body = {
        "format": MEASUREMENT_FORMAT,
        "gpu_kind": gpu_kind,
        "engine": engine,
        "dtype": dtype,
        "model": {
            "name": dims.name,
            "architecture": dims.architecture,
            "params": param_count(dims),
            "dims": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(dims).items()},
        },
        "batch": int(batch),
        "prompt_tokens": int(prompt_tokens),
        "new_tokens": int(new_tokens),
        "generation_tokens_per_s": generation_tokens_per_s,
        "training_tokens_per_s": training_tokens_per_s,
        "gradient_checkpointing": bool(gradient_checkpointing),
        "micro_batch_size": micro_batch_size,
        "concurrency": concurrency,
        "gpu_memory_utilization": gpu_memory_utilization,
        "date": date,
        "git_commit": commit if commit is not None else git_commit().get("commit"),
        "provenance": {"gpu_kind": gpu_kind, "machine": machine or host()},
    }
    name = f"{date}-{gpu_kind}-{_slug(dims.name)}-{engine}-b{int(batch)}.json"
    return atomic_write_text(Path(directory) / name, json.dumps(body, indent=2) + "\n")


def _measurement(path: Path) -> Measurement:
    try:
        body = json.loads(path.read_text())
        model = body["model"]
        raw = dict(model["dims"])
        for key in ("layer_types", "notes"):
            raw[key] = tuple(raw.get(key) or ())
        given = {k: cast(body[k]) for k, cast in REQUIRED.items()}
        rest = {k: body.get(k) for k in OPTIONAL}
        rest["gradient_checkpointing"] = bool(body.get("gradient_checkpointing", False))
        return Measurement(
            str(path), dims=ModelDims(**raw), params=int(model["params"]), **given, **rest
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise PlanError(
            f"{path}: not a throughput measurement ({type(err).__name__}: {err}); "
            "see bench/throughput/README.md for the format, or remove the file"
        ) from None


def read_measurements(directory: str | Path | None = None) -> list[Measurement]:
    """Every ``*.json`` measurement in ``directory`` (default :data:`MEASUREMENTS_DIR`)."""
    folder = Path(directory) if directory is not None else MEASUREMENTS_DIR
    if not folder.is_dir():
        return []
    return [_measurement(p) for p in sorted(folder.glob("*.json"))]


# ----------------------------------------------------------------------------- efficiencies


@dataclass(frozen=True)
class Efficiency:
    """The efficiencies a job's times use, and how each was obtained."""

    decode: float  # of the bandwidth bound
    compute: float  # of peak FLOPs, in generation (prefill, compute-bound decode)
    train: float  # of peak FLOPs, in training
    generation_label: str
    training_label: str
    assumed: bool


def measured_concurrency(m: Measurement) -> float:
    """The sequences a measured engine kept in flight: as recorded, else for vLLM what its KV
    room held (:func:`vllm_concurrency`), else the batch."""
    kind = GPU_KINDS[m.gpu_kind]
    if m.concurrency:
        return float(min(m.batch, m.concurrency))
    if m.engine == "vllm" and m.gpu_memory_utilization and kind.memory_bytes:
        n, _ = vllm_concurrency(
            m.dims, m.gpu_memory_utilization, kind.memory_bytes, m.dtype, m.prompt_tokens,
            m.new_tokens,
        )  # fmt: skip
        return float(max(1.0, min(m.batch, n)))
    return float(m.batch)


def _measured_generation_eff(m: Measurement) -> float:
    """Measured tokens/s over the bound at the concurrency the engine had (not its batch)."""
    kind = GPU_KINDS[m.gpu_kind]
    bound = generation_seconds(
        m.dims, kind, sequences=m.batch, prompt=m.prompt_tokens, completion=m.new_tokens,
        concurrency=measured_concurrency(m), dtype=m.dtype, decode_eff=1.0, compute_eff=1.0,
    )  # fmt: skip
    return m.generation_tokens_per_s / (m.batch * m.new_tokens / bound)


def _measured_training_eff(m: Measurement) -> float:
    kind = GPU_KINDS[m.gpu_kind]
    per_token = training_flops(
        m.dims, m.prompt_tokens, m.new_tokens, gradient_checkpointing=m.gradient_checkpointing
    )["total"] / max(m.new_tokens, 1)
    return m.training_tokens_per_s * per_token / (kind.peak_flops or UNIT_BOUND)


def _why(m: Measurement, kind: str, dims: ModelDims, engine: str) -> str:
    """How a job differs from measurement ``m`` (what the extrapolation covers)."""
    diffs = []
    if m.gpu_kind != kind:
        diffs.append(f"another GPU kind ({m.gpu_kind}): by the ratio of {kind}'s bounds to its")
    if abs(m.params - param_count(dims)) > SAME_PARAMS_REL * param_count(dims):
        diffs.append(f"another size ({m.params / 1e9:.3g}B)")
    if m.engine != engine:
        diffs.append(f"another engine ({m.engine})")
    return "; ".join(diffs) or "the same model, its own batch and lengths"


def efficiency(
    kind: str, engine: str, dims: ModelDims, measurements: list[Measurement]
) -> Efficiency:
    """The efficiencies for ``dims`` on ``engine`` and GPU ``kind``: from the newest matching
    measurement on that kind, else on another kind with bounds (never from or to ``cpu``),
    else assumed; each label says which."""
    gk = get_gpu_kind(kind)
    same = [m for m in measurements if m.gpu_kind == kind]
    other = [
        m
        for m in measurements
        if m.gpu_kind != kind and gk.peak_flops and GPU_KINDS[m.gpu_kind].peak_flops
    ]

    def choose(rate: str) -> Measurement | None:  # the newest, same engine, then architecture
        for pool in (same, other):
            if found := [m for m in pool if getattr(m, rate)]:
                arch = dims.architecture
                return max(
                    found, key=lambda m: (m.engine == engine, m.dims.architecture == arch, m.date)
                )
        return None

    gen_m, train_m = choose("generation_tokens_per_s"), choose("training_tokens_per_s")
    if gen_m is not None:
        e = _measured_generation_eff(gen_m)
        decode = compute = e
        gen_label = (
            f"from measurement {Path(gen_m.path).name} (efficiency {e:.2f} of its bound), "
            f"extrapolated: {_why(gen_m, kind, dims, engine)}; decode scaled by the bandwidth "
            "bound, prefill by the FLOP bound"
        )
    elif gk.peak_flops is None:
        raise PlanError(
            f"no throughput measurement for GPU kind {kind!r} in the measurements folder, and "
            f"{kind!r} has no nominal bounds to assume an efficiency of; measure it "
            "(agon.plan.hardware.write_measurement) or plan for a GPU kind"
        )
    else:
        decode, compute = ASSUMED_DECODE_EFFICIENCY[engine], ASSUMED_COMPUTE_EFFICIENCY
        gen_label = (
            f"{ASSUMED}: {decode:g} of the bandwidth bound ({engine}), "
            f"{compute:g} of peak FLOPs for the prefill"
        )
    if train_m is not None:
        train = _measured_training_eff(train_m)
        train_label = (
            f"from measurement {Path(train_m.path).name} (efficiency {train:.2f} of peak), "
            f"extrapolated: {_why(train_m, kind, dims, engine)}; scaled by the FLOP bound"
        )
    elif gk.peak_flops is None:
        raise PlanError(
            f"no training measurement for GPU kind {kind!r}; measure it or plan for a GPU kind"
        )
    else:
        train = ASSUMED_COMPUTE_EFFICIENCY
        train_label = f"{ASSUMED}: {train:g} of peak FLOPs"
    assumed = gen_m is None or train_m is None
    return Efficiency(decode, compute, train, gen_label, train_label, assumed)
