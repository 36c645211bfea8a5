# long: the throughput model in one reading: GPU kinds and their bounds, measurements, efficiencies.
"""GPU kinds, their bounds, and the throughput table: measured, then extrapolated, else assumed.

**Bounds.** Decoding is bound by memory bandwidth: each decode step of ``B`` concurrent
sequences reads every weight once and each sequence's KV cache, so a step takes at least
``(weight bytes + B x KV bytes at the mean context) / bandwidth`` (and at least
``B x FLOPs per token / peak``, which binds only at large ``B``). The prefill and training are
bound by peak FLOPs (:mod:`agon.plan.dims`). A job's time is its work over the bound, divided
by an *efficiency* (the share of the bound reached).

**Efficiencies.** From a measurement when there is one (:data:`MEASUREMENTS_DIR`, one JSON file
per measurement, written by :func:`write_measurement`): efficiency = measured tokens/s over the
bound at the measurement's own model and shape. It is then applied to the bound of the job's
model and shape on the GPU kind asked: another size or shape scales decode by the bandwidth
bound and training by the FLOP bound; a measurement on another GPU kind carries over by the
ratio of the two kinds' bounds. With no measurement the efficiency is an assumption
(:data:`ASSUMED_DECODE_EFFICIENCY`, :data:`ASSUMED_COMPUTE_EFFICIENCY`), and every line that uses
it says "assumed, not measured". The ``cpu`` kind has no nominal bounds: only its own
measurements, scaled by the ratio of bytes read per decode step and of FLOPs per trained token.
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
# where measurements live, beside the package (bench/throughput/README.md defines the format)
MEASUREMENTS_DIR = Path(__file__).resolve().parents[2] / "bench" / "throughput"

# Assumptions, used only without a measurement, and labelled "assumed, not measured" wherever
# used. Decode: vLLM's continuous batching with paged attention is taken to reach half the
# bandwidth bound; transformers' generate a quarter (a Python loop per token, padded rows).
# Compute: 0.4 of peak dense bf16 FLOPs for training and prefill, a typical model-FLOPs
# utilization of well-tuned training. Neither is a measurement of this code.
ASSUMED_DECODE_EFFICIENCY = {"vllm": 0.5, "hf": 0.25}
ASSUMED_COMPUTE_EFFICIENCY = 0.4
ASSUMED = "assumed, not measured"
SAME_PARAMS_REL = 0.01  # a measured model "is" the job's model within this parameter difference
# A kind without nominal bounds (cpu) is priced in units of 1 B/s and 1 FLOP/s: its own
# measurement's efficiency is then relative to that unit, which cancels in the estimate
UNIT_BOUND = 1.0


GIB = 2**30  # memory is counted in bytes and shown in GiB, the unit a GPU reports its own in


@dataclass(frozen=True)
class GpuKind:
    """A device kind: memory, bandwidth and dense bf16 peak (None: no nominal bound, ``cpu``).

    ``memory_bytes`` is what the device reports as its total (CUDA's total memory, what vLLM's
    ``gpu_memory_utilization`` is a share of), not the marketed size: an H200 sold as 141 GB
    shows 143,771 MiB in nvidia-smi and about 139.7 GiB (150.0e9 bytes) to CUDA, an H100 80GB
    81,559 MiB and about 79.2 GiB (85.0e9), an A100 80GB 81,920 MiB and 79.15 GiB (85.0e9):
    nvidia-smi's total less what the driver keeps (about 0.5 to 0.9 GiB; the H200's figure is
    nvidia-smi's less the H100's difference, not read off an H200)."""

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
# vLLM's default cap on sequences in flight (EngineArgs.max_num_seqs); its KV room may hold fewer
VLLM_MAX_NUM_SEQS = 256
# what a vLLM engine keeps inside its share besides weights and KV cache (its forward's
# activations, CUDA graphs): an assumption, not a measurement
VLLM_OVERHEAD_BYTES = 2 * GIB


def vllm_concurrency(
    d: ModelDims, share: float, device_bytes: float, dtype: str, prompt: float, completion: float
) -> tuple[float, float]:
    """(sequences in flight, KV room in bytes) of a vLLM engine holding ``share`` of a
    ``device_bytes`` GPU: the room its share leaves after the weights and
    :data:`VLLM_OVERHEAD_BYTES`, over one sequence's KV at the mean context (at most
    :data:`VLLM_MAX_NUM_SEQS`; 0 when the room holds no sequence of ``prompt + completion``)."""
    b = dtype_bytes(dtype, d.checkpoint_dtype)
    room = share * device_bytes - param_count(d) * b - VLLM_OVERHEAD_BYTES
    if room < kv_cache_bytes(d, b, max(int(prompt + completion), 1), 1):
        return 0.0, room
    per_seq = kv_cache_bytes(d, b, max(int(prompt + completion / 2), 1), 1)
    return float(max(1, min(VLLM_MAX_NUM_SEQS, room // per_seq))), room


def get_gpu_kind(name: str) -> GpuKind:
    """The GPU kind called ``name``; a clear error naming the known ones otherwise."""
    if name not in GPU_KINDS:
        raise PlanError(
            f"unknown GPU kind {name!r}; known: {sorted(GPU_KINDS)} (add a row to "
            "agon.plan.hardware.GPU_KINDS with its memory, bandwidth and peak bf16 FLOP/s)"
        )
    return GPU_KINDS[name]


# ----------------------------------------------------------------------------- bounds


def _decode_step_seconds(
    d: ModelDims, kind: GpuKind, concurrency: float, prompt: float, completion: float, b: int
) -> tuple[float, float]:
    """(bandwidth-bound, FLOP-bound) seconds of one decode step of ``concurrency`` sequences at
    their mean context. Without a nominal bound (``cpu``) the bandwidth is :data:`UNIT_BOUND`
    and the FLOP term is left out: a measurement's efficiency then absorbs the unit."""
    context = int(prompt + completion / 2)
    read = param_count(d) * b + kv_cache_bytes(d, b, max(context, 1), 1) * concurrency
    bw = kind.bandwidth or UNIT_BOUND
    if completion <= 0:
        return 0.0, 0.0
    per_token = generation_flops(d, int(prompt), int(completion)) - prefill_flops(d, int(prompt))
    per_token /= completion
    flop_s = concurrency * per_token / kind.peak_flops if kind.peak_flops else 0.0
    return read / bw, flop_s


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
    """Seconds to sample ``sequences`` completions of ``completion`` tokens after ``prompt``
    tokens, ``concurrency`` at a time: decode steps at the larger of the bandwidth and FLOP
    bounds over their efficiencies, plus the prefill at the FLOP bound."""
    if sequences <= 0 or completion <= 0:
        return 0.0
    b = dtype_bytes(dtype, d.checkpoint_dtype)
    concurrency = max(1.0, min(concurrency, sequences))
    bw_s, flop_s = _decode_step_seconds(d, kind, concurrency, prompt, completion, b)
    step = max(bw_s / decode_eff, flop_s / compute_eff if flop_s else 0.0)
    steps = sequences * completion / concurrency
    prefill = 0.0
    if kind.peak_flops:
        prefill = sequences * prefill_flops(d, int(prompt)) / (kind.peak_flops * compute_eff)
    return steps * step + prefill


def training_seconds(flops: float, kind: GpuKind, eff: float) -> float:
    """Seconds for ``flops`` of training at ``eff`` of the kind's peak (``cpu``: the unit)."""
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


# a measurement file's fields: those it must have (with their types), and those it may
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
    """Write one throughput measurement as ``DIR/<date>-<kind>-<model>-<engine>-b<batch>.json``
    (atomically) and return its path. ``generation_tokens_per_s``: completion tokens sampled
    per second with ``batch`` sequences in flight, each ``prompt_tokens`` + ``new_tokens``;
    ``training_tokens_per_s``: completion tokens trained on per second (forward + backward of
    such sequences). A vLLM generation rate needs the sequences vLLM kept in flight
    (``concurrency``) or its ``gpu_memory_utilization`` (the KV room it had): its efficiency is
    taken over the bound at that concurrency, since a job's own concurrency is cut to its KV
    room already and the limit must not count twice. ``date`` (ISO, default today),
    ``commit`` (default this checkout's HEAD) and ``machine`` (default
    :func:`agon.provenance.host`) go in the provenance."""
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
    """Every measurement file (``*.json``) in ``directory`` (default :data:`MEASUREMENTS_DIR`)."""
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


def _pick(measured: list[Measurement], engine: str, dims: ModelDims) -> Measurement | None:
    """The newest measurement, preferring the same engine, then the same architecture."""
    if not measured:
        return None

    def rank(m: Measurement) -> tuple:
        return (m.engine == engine, m.dims.architecture == dims.architecture, m.date)

    return max(measured, key=rank)


def measured_concurrency(m: Measurement) -> float:
    """The sequences a measured engine kept in flight: as recorded, else for vLLM as many as
    its share's KV room held (:func:`vllm_concurrency`, the rule a job's concurrency follows),
    else the batch (transformers decodes its batch's rows together)."""
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
    """Measured tokens/s over the bound at the concurrency the engine had (not the batch asked
    for: a KV-limited engine's lower rate is its concurrency, not its efficiency)."""
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
    measurement on that kind, else on another kind with nominal bounds (not from or to ``cpu``),
    else assumed. Each label says which, and by what rule."""
    gk = get_gpu_kind(kind)
    same = [m for m in measurements if m.gpu_kind == kind]
    other = [
        m
        for m in measurements
        if m.gpu_kind != kind and gk.peak_flops and GPU_KINDS[m.gpu_kind].peak_flops
    ]

    def choose(pred) -> Measurement | None:
        return _pick([m for m in same if pred(m)], engine, dims) or _pick(
            [m for m in other if pred(m)], engine, dims
        )

    gen_m = choose(lambda m: m.generation_tokens_per_s)
    train_m = choose(lambda m: m.training_tokens_per_s)
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
