# long: one step's memory by component, then each device's under a placement: what sleeps, each
# process's CUDA context, the staged weights on the host
"""Memory of a training step and of generation for any :class:`~agon.plan.dims.ModelDims`, and
of each device under a job's placement.

:func:`estimate_step_memory`: what one optimizer step holds (bytes by component): weights,
gradients and AdamW's two moments in the master dtype (``float32`` masters add autocast's bf16
weight cache), a frozen reference model, one micro-batch's saved activations (every layer's, or
with gradient checkpointing each layer's input and one layer's), the fused log-prob head's
logits tile (TRL's kernel: the full tokens x vocab logits never exist) and its backward's
float32 accumulators. Attention is a memory-efficient kernel (no tokens x tokens scores); the
activation count follows what transformers' modules save, within about 15 per cent of what
autograd keeps for 1-2 layer real-width models (``tests/test_plan.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agon.engines.placement import Part, Placement
from agon.plan.dims import LINEAR, ModelDims, PlanError, kv_cache_bytes, param_count

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# TRL 1.16's fused LM head (trl/kernels/chunked_logprob.py): tokens x vocabulary tiles
HEAD_TOKEN_TILE = 4096
HEAD_VOCAB_TILE = 32768
FP32_BYTES = 4
# float32 value-width tensors transformers' torch chunked delta rule keeps per token, fitted at
# Qwen3.5-4B's widths (tests/test_plan.py); flash-linear-attention's kernels keep less
DELTANET_FP32_COPIES = 19
ADAM_MOMENTS = 2  # exp_avg and exp_avg_sq, in the parameter's dtype
# train.bf16_update: kahan keeps a 16-bit compensation buffer per weight
BF16_UPDATE_BYTES = {"plain": 0, "kahan": 2, "stochastic_rounding": 0}


def dtype_bytes(dtype: str, default: str = "bfloat16") -> int:
    """Bytes per element of a config dtype name (``auto``: the checkpoint's, ``default``)."""
    name = default if dtype in (None, "auto") else dtype
    if name not in DTYPE_BYTES:
        raise PlanError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


def weight_bytes(d: ModelDims, dtype: str) -> int:
    """``d``'s weights in the config dtype ``dtype``."""
    return param_count(d) * dtype_bytes(dtype, d.checkpoint_dtype)


@dataclass(frozen=True)
class Breakdown:
    """Bytes by component."""

    components: dict[str, float]

    @property
    def total(self) -> float:
        return float(sum(self.components.values()))

    def plus(self, other: Breakdown, prefix: str = "") -> Breakdown:
        """Both breakdowns together (``other``'s components renamed with ``prefix``)."""
        comps = dict(self.components)
        for k, v in other.components.items():
            comps[prefix + k] = comps.get(prefix + k, 0.0) + v
        return Breakdown(comps)


def _norm_bytes(width: int, act: int) -> int:
    """What an RMSNorm keeps per token: its float32 input, the normalized value, its output."""
    return FP32_BYTES * width + 2 * act * width


def layer_activation_bytes(d: ModelDims, layer: int, kind: str, act: int) -> int:
    """Bytes autograd keeps per token for one decoder layer as transformers runs it (``act``
    bytes per activation)."""
    h = d.hidden_size
    n = _norm_bytes(h, act)  # the input norm
    if kind == LINEAR:
        n += act * (2 * d.linear_conv_dim + 3 * d.linear_value_dim + 2 * d.linear_num_value_heads)
        n += FP32_BYTES * DELTANET_FP32_COPIES * d.linear_value_dim
    else:
        kv_heads, hd = d.heads_of(kind)
        q, kv = d.num_heads * hd, kv_heads * hd
        n += _norm_bytes(q, act) if d.qk_norm else act * q
        if d.owns_kv(layer):
            n += _norm_bytes(kv, act) if d.qk_norm else act * kv  # k
            n += _norm_bytes(kv, act) if d.architecture == "gemma4" else act * kv  # v
        n += 2 * act * q * (2 if d.attn_output_gate else 1)  # output (and gate) twice
    n += _norm_bytes(h, act) + 4 * act * d.mlp_width(layer)  # MLP norm; gate, up, act, product
    if d.architecture == "gemma4":
        n += 2 * _norm_bytes(h, act)  # post-attention and post-MLP norms
    if d.per_layer_input_size:
        n += _norm_bytes(h, act) + act * (h + 3 * d.per_layer_input_size)  # PLE gate and norm
    return n


def activation_bytes(d: ModelDims, tokens: float, act: int, gradient_checkpointing: bool) -> float:
    """Saved activations of one forward over ``tokens`` tokens, the final norm included."""
    per_layer = [layer_activation_bytes(d, i, k, act) for i, k in enumerate(d.kinds())]
    if gradient_checkpointing:
        kept = d.num_layers * d.hidden_size * act + max(per_layer)
    else:
        kept = sum(per_layer)
    return float(kept + _norm_bytes(d.hidden_size, act)) * tokens


def estimate_step_memory(
    d: ModelDims,
    *,
    micro_batch: int,
    prompt_tokens: int,
    completion_tokens: int,
    dtype: str = "bfloat16",
    master_dtype: str | None = None,
    gradient_checkpointing: bool = False,
    reference_model: bool = False,
    bf16_update: str = "plain",
) -> Breakdown:
    """What one optimizer step of ``d`` holds on its device, by component (bytes): a
    micro-batch of ``micro_batch`` sequences, the head on their completions; ``master_dtype``:
    the optimizer's weights (None: ``dtype``); ``bf16_update``: ``train.bf16_update`` (kahan
    adds its buffer to 16-bit weights)."""
    if micro_batch < 1 or prompt_tokens < 0 or completion_tokens < 0:
        raise PlanError(
            f"micro_batch must be >= 1 and token counts >= 0, got micro_batch={micro_batch}, "
            f"prompt_tokens={prompt_tokens}, completion_tokens={completion_tokens}"
        )
    n = param_count(d)
    compute = dtype_bytes(dtype, d.checkpoint_dtype)
    master = dtype_bytes(master_dtype, d.checkpoint_dtype) if master_dtype else compute
    tokens = micro_batch * (prompt_tokens + completion_tokens)
    scored = micro_batch * completion_tokens
    comps: dict[str, float] = {"weights": float(n * master)}
    if master != compute:
        comps["autocast_weight_copies"] = float(n * compute)
    comps["gradients"] = float(n * master)
    comps["optimizer_states"] = float(ADAM_MOMENTS * n * master)
    if master == 2 and BF16_UPDATE_BYTES.get(bf16_update):
        comps["kahan_buffer"] = float(n * BF16_UPDATE_BYTES[bf16_update])
    if reference_model:
        comps["reference_model"] = float(n * compute)
    comps["activations"] = activation_bytes(d, tokens, compute, gradient_checkpointing)
    comps["logits_chunk"] = float(
        min(scored, HEAD_TOKEN_TILE) * min(d.vocab_size, HEAD_VOCAB_TILE) * compute
    )
    comps["head_gradient"] = float(
        (d.vocab_size * d.hidden_size + scored * d.hidden_size) * FP32_BYTES
    )
    return Breakdown(comps)


def estimate_generation_memory(
    d: ModelDims,
    *,
    batch: int,
    context: int,
    dtype: str = "bfloat16",
    include_weights: bool = True,
) -> Breakdown:
    """What transformers ``generate`` holds for ``batch`` rows padded to ``context`` tokens:
    the weights (unless counted already), the KV cache and the sampler's float32 logits."""
    b = dtype_bytes(dtype, d.checkpoint_dtype)
    comps: dict[str, float] = {}
    if include_weights:
        comps["weights"] = float(param_count(d) * b)
    comps["kv_cache"] = kv_cache_bytes(d, b, context, batch)
    comps["sampling_logits"] = float(batch * d.vocab_size * FP32_BYTES)
    return Breakdown(comps)


def vllm_reserved(share: float, device_bytes: float) -> Breakdown:
    """A vLLM engine's reservation (its weights and KV cache inside), held from its start
    (released while it sleeps), and its CUDA graphs beside it (kept while it sleeps)."""
    return Breakdown(
        {"vllm_reserved": float(share * device_bytes), "vllm_cuda_graphs": ASSUMED_CUDA_GRAPH_BYTES}
    )


# ----------------------------------------------------------------------------- placed memory
#
# A device holds the sum of what agon.engines.placement.place puts on it: the persistent part
# (weights, moments, reference model, a vLLM share and its CUDA graphs, each process's CUDA
# context) plus the larger of the sets that alternate: an update's gradients and activations
# (while that policy's own vLLM engine sleeps, if engines sleep), a transformers rollout's KV
# cache, every sleeping engine's share awake for the rollout. GRPO on TRL on one GPU holds one
# model at a time (a phase each).

# a process with torch and transformers imported, besides weights: assumed, not measured
HOST_PROCESS_BYTES = 2**30
# what no share counts, assumed (not measured here): a CUDA context per process on each GPU it
# uses (~500 MiB is the common figure for a CUDA 12/13 context with cuBLAS loaded), and a vLLM
# engine's CUDA graphs, which vLLM's worker reports beside the share it was given ("... and N
# GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=...`
# to fit into requested memory": vllm/v1/worker/gpu_worker.py) and keeps while it sleeps
# (docs.vllm.ai, sleep mode: weights and KV cache released); reported values run from 0.1 to a
# few GiB with the capture sizes, 1 GiB taken for a 4B model at the default sizes
ASSUMED_CUDA_CONTEXT_BYTES = 500.0 * 2**20
ASSUMED_CUDA_GRAPH_BYTES = float(2**30)
PERSISTENT = (
    "weights", "optimizer_states", "kahan_buffer", "reference_model", "vllm_reserved",
    "vllm_cuda_graphs", "helper_weights", "cuda_context",
)  # fmt: skip
SLEEPS = "vllm_reserved"  # what a sleeping engine releases (weights and KV cache, level 2)
ASSUMED_NOTE = (  # agon plan says it once
    f"memory, assumed: a CUDA context of {ASSUMED_CUDA_CONTEXT_BYTES / 2**20:.0f} MiB per "
    f"process on each GPU it uses; {ASSUMED_CUDA_GRAPH_BYTES / 2**30:g} GiB of CUDA graphs per "
    "vLLM engine, beside its share (vLLM's worker reports them apart) and kept while it sleeps; "
    "the in-house trainers' vLLM engines sleep through their own policy's update (their share "
    "released), TRL's where grpo.extra.vllm_enable_sleep_mode says; the host holds a staged "
    "copy of a policy's weights per colocated engine, and one more while one is rewritten"
)
OPTIMIZER = ("optimizer_states", "kahan_buffer")  # the optimizer part's components
SHARDED = ("weights", "gradients", *OPTIMIZER, "reference_model", "autocast_weight_copies")
# `trl vllm-serve`'s default --gpu_memory_utilization: a server's share of its own GPU
SERVER_SHARE = 0.9


@dataclass
class Device:
    """One device's memory: what it always holds, the transient sets it alternates (each with
    the model whose update it is, if it is one), and the shares of the engines that sleep
    through their own policy's update (by model)."""

    persistent: Breakdown = field(default_factory=lambda: Breakdown({}))
    transients: list[tuple[str | None, Breakdown]] = field(default_factory=list)
    sleeping: dict[str, Breakdown] = field(default_factory=dict)

    def add(
        self, b: Breakdown, prefix: str = "", update_of: str | None = None, sleeps: bool = False
    ) -> None:
        """Add what a part holds: ``update_of``, the model whose update its transient set is
        (a policy's) or whose update its share sleeps through (an engine's, ``sleeps``)."""
        comps = dict(b.components)
        if sleeps and SLEEPS in comps:
            model, share = update_of or "", Breakdown({prefix + SLEEPS: comps.pop(SLEEPS)})
            self.sleeping[model] = self.sleeping.get(model, Breakdown({})).plus(share)
        keep = {k: v for k, v in comps.items() if k in PERSISTENT}
        rest = {prefix + k: v for k, v in comps.items() if k not in PERSISTENT}
        self.persistent = self.persistent.plus(Breakdown(keep), prefix)
        if rest:
            self.transients.append((None if sleeps else update_of, Breakdown(rest)))

    def peak(self) -> Breakdown:
        """The persistent part plus the largest alternating set: each transient set with the
        sleeping engines awake beside it (all but its own model's during an update), or the
        sleeping engines alone (a vLLM rollout)."""
        awake = Breakdown({})
        for b in self.sleeping.values():
            awake = awake.plus(b)
        sets = [awake]
        for owner, t in self.transients:
            beside = Breakdown({})
            for m, b in self.sleeping.items():
                if m != owner:
                    beside = beside.plus(b)
            sets.append(t.plus(beside))
        worst = max(sets, key=lambda b: b.total)
        return self.persistent.plus(worst)


@dataclass(frozen=True)
class Memory:
    """A job's memory: each device's peak (``GPU 0``, ``server A``, ``CPU``), the host's, the
    placement and what each part holds."""

    devices: dict[str, Breakdown]
    host: float
    placement: Placement
    placed: tuple[tuple[Part, list[Breakdown]], ...]

    @property
    def per_device(self) -> Breakdown:  # the fullest device's
        return max(self.devices.values(), key=lambda b: b.total)


@dataclass(frozen=True)
class TrainShape:
    """What a training job's memory depends on beyond the dims."""

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
    bf16_update: str = "plain"
    engine_sleeps: bool = False  # its vLLM engines sleep through their policy's update


def device_name(part: Part) -> str:
    if part.kind == "server":
        return f"server {part.model}"
    return "CPU" if part.gpu is None else f"GPU {part.gpu}"


def part_memory(
    part: Part,
    d: ModelDims | None,
    s: TrainShape,
    device_bytes: float,
    helpers: list[Breakdown],
) -> list[Breakdown]:
    """What ``part`` holds (the sharded components ``1 / shards`` of them); the helpers each
    their own breakdown, since their transients alternate."""
    if part.kind == "helpers":
        return list(helpers)
    if part.kind == "server":
        return [vllm_reserved(SERVER_SHARE, device_bytes)]
    if part.kind == "engine" and part.engine != "live":
        return [vllm_reserved(s.vllm_share, device_bytes)]
    if part.kind == "engine":
        gen = estimate_generation_memory(
            d, batch=s.rollout_rows, context=s.rollout_context, dtype=s.dtype, include_weights=False
        )
        return [gen]
    step = estimate_step_memory(
        d, micro_batch=s.micro_batch, prompt_tokens=s.prompt, completion_tokens=s.completion,
        dtype=s.dtype, master_dtype=s.master_dtype, gradient_checkpointing=s.gradient_checkpointing,
        reference_model=s.reference_model, bf16_update=s.bf16_update,
    )  # fmt: skip
    mine = {
        k: v for k, v in step.components.items() if (k in OPTIMIZER) == (part.kind == "optimizer")
    }
    mine = {k: v / part.shards if k in SHARDED else v for k, v in mine.items()}
    return [Breakdown(mine)]


def placed_memory(
    placement: Placement,
    parts: dict[tuple[str, int], list[Breakdown]],
    extra_transient: Breakdown | None = None,
    engines_sleep: bool = False,
) -> dict[str, Breakdown]:
    """Each device's peak over the phases: the sum of the ``parts`` (by name and rank) the
    placement puts on it, and a CUDA context per process on each GPU (or server) it uses;
    ``extra_transient`` joins each transient set beside a policy; ``engines_sleep``: each
    colocated vLLM engine releases its share while its own policy updates."""
    phases = sorted({p.phase for p in placement.parts if p.phase}) or [None]
    peaks: dict[str, Breakdown] = {}
    for phase in phases:
        devices: dict[str, Device] = {}
        processes: dict[str, set[tuple[int, str]]] = {}
        for p in placement.parts:
            if p.phase not in (None, phase):
                continue
            prefix = "" if p.kind == "helpers" else f"{p.model}."
            name = device_name(p)
            if name != "CPU":
                processes.setdefault(name, set()).add((p.rank, p.process))
            update = p.model if p.kind == "policy" else None
            sleeps = engines_sleep and p.kind == "engine" and p.engine == "vllm"
            for b in parts[p.name, p.rank]:
                devices.setdefault(name, Device()).add(
                    b, prefix, update_of=p.model if sleeps else update, sleeps=sleeps
                )
        for name, dev in devices.items():
            holds_policy = any(
                device_name(p) == name and p.kind == "policy" for p in placement.parts
            )
            if extra_transient is not None and holds_policy:
                dev.transients = [(m, t.plus(extra_transient)) for m, t in dev.transients]
            if name in processes:
                n = len(processes[name])
                dev.add(Breakdown({"cuda_context": n * ASSUMED_CUDA_CONTEXT_BYTES}))
            peak = dev.peak()
            if name not in peaks or peak.total > peaks[name].total:
                peaks[name] = peak
    return dict(sorted(peaks.items()))


def train_memory(
    models: dict[str, ModelDims],
    s: TrainShape,
    placement: Placement,
    device_bytes: float | None,
    helpers: list[Breakdown],
    extra_transient: Breakdown | None = None,
) -> Memory:
    """A training job's memory under ``placement`` (:func:`agon.engines.placement.place`); the
    host holds each process with every model's weights (a state dict is staged through it when
    saved; a TRL model's process of its own, its own model's) and, per engine in a process of
    its own, the policy's staged weights, one of them twice while it is rewritten (the new file
    is written whole before it replaces the old)."""
    cap = device_bytes or 0.0
    parts = {
        (p.name, p.rank): part_memory(p, models.get(p.model), s, cap, helpers)
        for p in placement.parts
    }
    bytes_of = {m: weight_bytes(d, s.dtype) for m, d in models.items()}
    staged = [
        bytes_of[p.model]
        for p in placement.parts
        if p.kind == "engine" and p.engine == "vllm" and placement.gpus and p.process != p.model
        and p.phase is None
    ]  # fmt: skip
    apart = {p.model for p in placement.parts if p.process == p.model}
    if apart:  # the launching process loads no model; each model's process loads its own
        host = HOST_PROCESS_BYTES + sum(HOST_PROCESS_BYTES + bytes_of[m] for m in apart)
    else:
        host = placement.processes * (HOST_PROCESS_BYTES + sum(bytes_of.values()))
    host += sum(staged) + max(staged, default=0.0)
    host += sum(h.components.get("helper_weights", 0.0) for h in helpers)
    return _memory(placement, parts, host, extra_transient, s.engine_sleeps)


def _memory(
    placement: Placement,
    parts: dict,
    host: float,
    extra: Breakdown | None = None,
    engines_sleep: bool = False,
) -> Memory:
    """The :class:`Memory` of ``parts`` placed; on the CPU the host holds everything too."""
    devices = placed_memory(placement, parts, extra, engines_sleep)
    if not placement.gpus:
        host += sum(b.total for b in devices.values())
    placed = tuple((p, parts[p.name, p.rank]) for p in placement.parts)
    return Memory(devices, host, placement, placed)


def eval_memory(
    loaded: dict[str, ModelDims],
    placement: Placement,
    generations: list,
    dtype: str,
    max_new: int,
    device_bytes: float | None,
    share: float,
) -> Memory:
    """An evaluation's memory under ``placement`` (:func:`agon.engines.placement.place_eval`:
    one engine per distinct model): a vLLM engine holds ``share`` of the GPU; transformers
    each model's weights and the KV cache of its largest generate call."""
    engines = [p.model for p in placement.parts]
    parts = {}
    for p in placement.parts:
        d = loaded[p.model]
        if p.engine == "vllm":
            parts[p.name, p.rank] = [vllm_reserved(share, device_bytes or 0.0)]
            continue
        kv = [
            estimate_generation_memory(
                d,
                batch=int(min(g.rows, g.sequences)),
                context=int(g.prompt + max_new),
                dtype=dtype,
                include_weights=False,
            )  # fmt: skip
            for g in generations
            if (g.model if g.model in engines else engines[0]) == p.model
        ]
        weights = Breakdown({"weights": float(weight_bytes(d, dtype))})
        parts[p.name, p.rank] = [
            weights.plus(max(kv, key=lambda b: b.total, default=Breakdown({})))
        ]
    host = HOST_PROCESS_BYTES + sum(weight_bytes(loaded[m], dtype) for m in engines)
    return _memory(placement, parts, host)


def helper_memory(d: ModelDims, dtype: str, rows: int, context: int, generates: bool) -> Breakdown:
    """A frozen helper model (a teacher): its weights, and its KV cache when it generates."""
    b = Breakdown({"helper_weights": float(weight_bytes(d, dtype))})
    if generates:
        gen = estimate_generation_memory(
            d, batch=rows, context=context, dtype=dtype, include_weights=False
        )
        b = b.plus(gen, "helper_")
    return b


def logits_transient(name: str, tokens: float, vocab_chunk: int) -> Breakdown:
    """A helper's chunked float32 logits (GAR's cosines): ``tokens`` x ``vocab_chunk`` at once."""
    return Breakdown({name: float(tokens * vocab_chunk * FP32_BYTES)})
