# long: the memory model in one reading: a step's, generation's, each device's under the placement.
"""Memory of one training step, and of generation, for any :class:`~agon.plan.dims.ModelDims`.

:func:`estimate_step_memory` answers "what does one optimizer step of this model hold on its
device", for any dims (a paper checkpoint, or the same widths with 1-2 layers as a CPU test
builds them), batch, lengths and precision, as a breakdown by component (bytes):

- ``weights``, ``gradients``, ``optimizer_states`` (AdamW's two moments): in the model dtype
  today (pure bf16: 2 + 2 + 4 bytes per parameter); with ``master_dtype="float32"`` the
  weights, gradients and moments are float32 (4 + 4 + 8) and the forward runs under bf16
  autocast, whose weight cache holds a bf16 copy of every weight during forward and backward
  (``autocast_weight_copies``, 2 per parameter);
- ``reference_model``: a frozen copy in the model dtype when ``beta > 0``;
- ``activations`` of one micro-batch (``micro_batch`` sequences of prompt + completion
  tokens; packed rows hold the same tokens without padding): every layer's saved tensors
  (:func:`layer_activation_bytes`) without gradient checkpointing; with it, each layer's
  input plus one layer's saved tensors, recomputed during the backward;
- ``logits_chunk``: the fused log-prob head's tile (TRL's kernel: at most
  :data:`HEAD_TOKEN_TILE` completion tokens x :data:`HEAD_VOCAB_TILE` vocabulary entries in
  the compute dtype; the full tokens x vocab logits never exist), and ``head_gradient``: its
  backward's float32 accumulators (vocab x hidden for the head's weight, tokens x hidden for the
  hidden states).

Attention is taken to be a memory-efficient kernel (SDPA / flash): no tokens x tokens scores
are kept. The activation count follows what transformers' modules save
(:func:`layer_activation_bytes`); measured against the tensors autograd keeps for 1-2 layer
real-width Qwen3, Qwen3.5 and Gemma 4 models (bf16, SDPA, CPU) it is within about 15 per cent
(``tests/test_plan.py``). Fused kernels (Liger, flash-linear-attention) keep less.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agon.engines.placement import Part, Placement
from agon.plan.dims import LINEAR, ModelDims, PlanError, kv_cache_bytes, param_count

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# TRL 1.16's fused LM head (trl/kernels/chunked_logprob.py): tiles of TOKEN_CHUNK_SIZE tokens
# x _CHUNKED_LOGPROB_CHUNK_SIZE vocabulary entries, the only logits that exist at once
HEAD_TOKEN_TILE = 4096
HEAD_VOCAB_TILE = 32768
FP32_BYTES = 4  # norms' upcast inputs, the head's backward accumulators, the sampler's logits
# float32 value-width tensors that transformers' torch reference chunked delta rule keeps per
# token (what runs without flash-linear-attention's kernels), fitted to its saved tensors at
# Qwen3.5-4B's widths (tests/test_plan.py checks the layer's total); fused kernels keep less
DELTANET_FP32_COPIES = 19
ADAM_MOMENTS = 2  # AdamW keeps exp_avg and exp_avg_sq per parameter, in the parameter's dtype
# train.bf16_update: kahan keeps one 16-bit compensation buffer per weight (stochastic
# rounding and plain updates keep nothing more)
BF16_UPDATE_BYTES = {"plain": 0, "kahan": 2, "stochastic_rounding": 0}


def dtype_bytes(dtype: str, default: str = "bfloat16") -> int:
    """Bytes per element of a config dtype name (``auto``: the checkpoint's, ``default``)."""
    name = default if dtype in (None, "auto") else dtype
    if name not in DTYPE_BYTES:
        raise PlanError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


@dataclass(frozen=True)
class Breakdown:
    """Bytes by component, and what they assume."""

    components: dict[str, float]
    assumptions: tuple[str, ...] = field(default=())

    @property
    def total(self) -> float:
        """Every component together."""
        return float(sum(self.components.values()))

    def plus(self, other: Breakdown, prefix: str = "") -> Breakdown:
        """Both breakdowns together (``other``'s components renamed with ``prefix``)."""
        comps = dict(self.components)
        for k, v in other.components.items():
            comps[prefix + k] = comps.get(prefix + k, 0.0) + v
        return Breakdown(comps, tuple(dict.fromkeys(self.assumptions + other.assumptions)))


def _norm_bytes(width: int, act: int) -> int:
    """What an RMSNorm over ``width`` keeps per token: its float32 input (the norm's backward),
    the normalized value (the weight's gradient) and its output (the next op's input)."""
    return FP32_BYTES * width + 2 * act * width


def layer_activation_bytes(d: ModelDims, layer: int, kind: str, act: int) -> int:
    """Bytes autograd keeps per token for one decoder layer as transformers' modules run it
    (``act`` bytes per activation): each RMSNorm (:func:`_norm_bytes`; q/k norms over the
    query and key widths), v, the attention output twice (the kernel's and o_proj's input),
    Qwen3.5's output gate, the MLP's gate, up, activation and product; Gemma's post-norms,
    value norm and per-layer-embedding gate; a Gated DeltaNet's projections, convolution and
    the float32 intermediates of the chunked delta rule (:data:`DELTANET_FP32_COPIES`)."""
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
    """Saved activations of one forward over ``tokens`` tokens (see the module docstring), the
    final norm included."""
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
    trainable: bool = True,
    bf16_update: str = "plain",
) -> Breakdown:
    """What one optimizer step of ``d`` holds on its device, by component (bytes).

    ``micro_batch`` sequences of ``prompt_tokens + completion_tokens`` go through each
    forward/backward; the log-prob head scores the completion tokens only. ``dtype`` is the
    model's (the family row's, ``auto`` read as bf16); ``master_dtype`` the dtype of the
    weights the optimizer updates (None: the model dtype; ``float32``: fp32 master weights and
    moments with ``dtype`` autocast). ``trainable=False`` leaves out gradients, optimizer and
    backward buffers (a frozen model scoring tokens). ``bf16_update`` (``train.bf16_update``):
    how 16-bit weights take AdamW's update; ``kahan`` adds its compensation buffer
    (``kahan_buffer``, :data:`BF16_UPDATE_BYTES` per parameter) to 16-bit weights.
    """
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
    notes = [f"{d.name}: {n / 1e9:.3g}B parameters"]
    if master != compute:
        comps["autocast_weight_copies"] = float(n * compute)
        notes.append(f"{master_dtype} master weights and AdamW moments, {dtype} autocast")
    if trainable:
        comps["gradients"] = float(n * master)
        comps["optimizer_states"] = float(ADAM_MOMENTS * n * master)
        if master == 2 and BF16_UPDATE_BYTES.get(bf16_update):
            comps["kahan_buffer"] = float(n * BF16_UPDATE_BYTES[bf16_update])
    if reference_model:
        comps["reference_model"] = float(n * compute)
    comps["activations"] = activation_bytes(
        d, tokens, compute, gradient_checkpointing and trainable
    )
    comps["logits_chunk"] = float(
        min(scored, HEAD_TOKEN_TILE) * min(d.vocab_size, HEAD_VOCAB_TILE) * compute
    )
    if trainable:
        comps["head_gradient"] = float(
            (d.vocab_size * d.hidden_size + scored * d.hidden_size) * FP32_BYTES
        )
    notes.append(
        f"micro-batch {micro_batch} x ({prompt_tokens} + {completion_tokens}) tokens, "
        f"gradient checkpointing {'on' if gradient_checkpointing and trainable else 'off'}"
    )
    return Breakdown(comps, tuple(notes))


def estimate_generation_memory(
    d: ModelDims,
    *,
    batch: int,
    context: int,
    dtype: str = "bfloat16",
    include_weights: bool = True,
) -> Breakdown:
    """What transformers ``generate`` holds for ``batch`` rows decoded to ``context`` tokens
    (prompt + new, rows padded to the longest): the weights (unless they are already counted,
    a trained model's), the KV cache at its largest, and the sampler's float32 logits of the
    last position of every row."""
    b = dtype_bytes(dtype, d.checkpoint_dtype)
    comps: dict[str, float] = {}
    if include_weights:
        comps["weights"] = float(param_count(d) * b)
    comps["kv_cache"] = kv_cache_bytes(d, b, context, batch)
    comps["sampling_logits"] = float(batch * d.vocab_size * FP32_BYTES)
    return Breakdown(comps, (f"generate: {batch} rows x {context} tokens",))


def vllm_reserved(share: float, device_bytes: float) -> Breakdown:
    """A colocated vLLM engine's reservation: ``gpu_memory_utilization`` x the GPU's memory,
    taken at start and held (its own copy of the weights and its KV cache live inside it)."""
    return Breakdown(
        {"vllm_reserved": float(share * device_bytes)},
        (f"vLLM reserves {share:g} of the GPU's memory per colocated engine",),
    )


# ----------------------------------------------------------------------------- placed memory
#
# A job's memory is the sum of what agon.engines.placement.place puts on each device. Weights,
# optimizer moments, a reference model and a vLLM engine's share stay for the whole run; the
# gradients, activations and head buffers of an update, and the KV cache of a transformers
# rollout, come and go, and rollouts and updates alternate, so a device holds the persistent
# part plus the larger transient one. GRPO on TRL holds one model at a time (a phase each).

# Host memory of one process besides model weights: a Python process with torch and
# transformers imported holds about a gigabyte resident (an assumption, not a measurement;
# the toy world's jobs run within their 4000 MB)
HOST_PROCESS_BYTES = 2**30
PERSISTENT = (
    "weights", "optimizer_states", "kahan_buffer", "reference_model", "vllm_reserved",
    "helper_weights",
)  # fmt: skip
OPTIMIZER = ("optimizer_states", "kahan_buffer")  # the optimizer part's components
SHARDED = ("weights", "gradients", *OPTIMIZER, "reference_model", "autocast_weight_copies")
# `trl vllm-serve`'s default --gpu_memory_utilization: a server's share of its own GPU
SERVER_SHARE = 0.9


@dataclass
class Device:
    """One device's memory: what it always holds, and the transient sets it alternates."""

    persistent: Breakdown = field(default_factory=lambda: Breakdown({}))
    transients: list[Breakdown] = field(default_factory=list)

    def add(self, b: Breakdown, prefix: str = "") -> None:
        """Split ``b`` into persistent components and one transient set."""
        keep = {k: v for k, v in b.components.items() if k in PERSISTENT}
        rest = {prefix + k: v for k, v in b.components.items() if k not in PERSISTENT}
        self.persistent = self.persistent.plus(Breakdown(keep, b.assumptions), prefix)
        if rest:
            self.transients.append(Breakdown(rest))

    def peak(self) -> Breakdown:
        """The persistent part plus the largest transient set."""
        worst = max(self.transients, key=lambda b: b.total, default=Breakdown({}))
        return self.persistent.plus(worst)


@dataclass(frozen=True)
class Memory:
    """A job's memory: each device's peak (``GPU 0``, ``server A``, ``CPU``), the host's, the
    placement it follows and what each part holds."""

    devices: dict[str, Breakdown]
    host: float
    placement: Placement
    placed: tuple[tuple[Part, list[Breakdown]], ...]

    @property
    def per_device(self) -> Breakdown:
        """The fullest device's breakdown."""
        return max(self.devices.values(), key=lambda b: b.total)


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
    bf16_update: str = "plain"


def device_name(part: Part) -> str:
    """The device a part's memory counts on."""
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
    """What ``part`` holds: a policy its weights, gradients, reference model and an update's
    transients; an optimizer AdamW's moments (and a Kahan buffer), ``1 / shards`` of the
    sharded ones; a vLLM engine or server its share of its GPU; a live engine the KV cache of
    a rollout; the helpers their weights and engines (each its own breakdown: their
    transients alternate)."""
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
    return [Breakdown(mine, step.assumptions)]


def placed_memory(
    placement: Placement,
    parts: dict[tuple[str, int], list[Breakdown]],
    extra_transient: Breakdown | None = None,
) -> dict[str, Breakdown]:
    """Each device's peak: the sum of what the placement puts on it (``parts``: each part's
    breakdowns, by name and rank), phase by phase (the larger phase wins); ``extra_transient``
    joins every transient set of a device that holds a policy."""
    phases = sorted({p.phase for p in placement.parts if p.phase}) or [None]
    peaks: dict[str, Breakdown] = {}
    for phase in phases:
        devices: dict[str, Device] = {}
        for p in placement.parts:
            if p.phase not in (None, phase):
                continue
            prefix = "" if p.kind == "helpers" else f"{p.model}."
            for b in parts[p.name, p.rank]:
                devices.setdefault(device_name(p), Device()).add(b, prefix)
        for name, dev in devices.items():
            holds_policy = any(
                device_name(p) == name and p.kind == "policy" for p in placement.parts
            )
            if extra_transient is not None and holds_policy:
                dev.transients = [t.plus(extra_transient) for t in dev.transients]
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
    """A training job's memory under ``placement`` (:func:`agon.engines.placement.place`),
    ``helpers`` (teachers) where it puts them; the host holds each process, the weights of
    every model (a model's state dict is staged through host memory when its folder is saved)
    and, per engine in a process of its own, the policy's staged weights; on the CPU,
    everything."""
    cap = device_bytes or 0.0
    parts = {
        (p.name, p.rank): part_memory(p, models.get(p.model), s, cap, helpers)
        for p in placement.parts
    }
    devices = placed_memory(placement, parts, extra_transient)
    bytes_of = {
        m: param_count(d) * dtype_bytes(s.dtype, d.checkpoint_dtype) for m, d in models.items()
    }
    weights = sum(bytes_of.values())
    staged = sum(
        bytes_of[p.model]
        for p in placement.parts
        if p.kind == "engine" and p.engine == "vllm" and placement.gpus and p.phase is None
    )
    host = placement.processes * (HOST_PROCESS_BYTES + weights) + staged
    host += sum(h.components.get("helper_weights", 0.0) for h in helpers)
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
    device_bytes: float | None = None,
    share: float = 0.45,
) -> Memory:
    """An evaluation's memory under ``placement`` (:func:`agon.engines.placement.place_eval`:
    one engine per distinct model; an untrained pair of one checkpoint with two personas is
    loaded once and serves both): on vLLM each engine holds ``share`` of the GPU, its weights
    and paged KV cache inside it; on transformers each model's weights, and the KV cache of
    its largest generate call (its rows at the prompt + ``max_new``)."""
    engines = [p.model for p in placement.parts]
    parts = {}
    for p in placement.parts:
        d = loaded[p.model]
        if p.engine == "vllm":
            parts[p.name, p.rank] = [vllm_reserved(share, device_bytes or 0.0)]
            continue
        calls = [
            g for g in generations if (g.model if g.model in engines else engines[0]) == p.model
        ]
        kv = [
            estimate_generation_memory(
                d,
                batch=int(min(g.rows, g.sequences)),
                context=int(g.prompt + max_new),
                dtype=dtype,
                include_weights=False,
            )  # fmt: skip
            for g in calls
        ]
        weights = Breakdown(
            {"weights": float(param_count(d) * dtype_bytes(dtype, d.checkpoint_dtype))}
        )
        parts[p.name, p.rank] = [
            weights.plus(max(kv, key=lambda b: b.total, default=Breakdown({})))
        ]
    devices = placed_memory(placement, parts)
    host = HOST_PROCESS_BYTES + sum(
        param_count(loaded[m]) * dtype_bytes(dtype, loaded[m].checkpoint_dtype) for m in engines
    )
    if not placement.gpus:
        host += sum(b.total for b in devices.values())
    placed = tuple((p, parts[p.name, p.rank]) for p in placement.parts)
    return Memory(devices, host, placement, placed)


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


def logits_transient(name: str, tokens: float, vocab_chunk: int) -> Breakdown:
    """A helper's chunked float32 logits (GAR's cosines, ``gar.vocab_chunk``): at most
    ``tokens`` x ``vocab_chunk`` of them at once, as component ``name``."""
    return Breakdown({name: float(tokens * vocab_chunk * FP32_BYTES)})
