"""A model's dimensions, and the parameters, KV cache and FLOPs they imply.

:class:`ModelDims` holds the text decoder's widths and layer kinds (full, sliding-window or
linear attention) and the extras of the paper's checkpoints (Qwen3.5's gated attention and
Gated DeltaNet, Gemma 4's per-layer embeddings, KV sharing and wider global heads); it comes
from a ``config.json`` or the published table (:mod:`agon.plan.published`). Parameters
are counted module by module as transformers 5 builds these models (checked against
``from_config`` models in ``tests/test_plan.py``); vision and audio towers are not counted.

FLOPs, with ``N_b`` the backbone's multiply-add parameters and ``N_h = vocab x hidden`` the
head's: one forward over ``T`` tokens, the head on ``k`` of them, is ``2 N_b T + 2 N_h k`` plus
attention (``4 x heads x head_dim`` per (token, attended token) pair, a sliding layer attending
to at most its window) and each DeltaNet layer's state (``4 x value heads x key dim x value
dim`` per token). Generation is one forward over prompt + completion with the head on the
completion; training is forward + backward = 3 forwards, gradient checkpointing one more of the
backbone, a reference model (``beta > 0``) one more, ``num_iterations > 1`` an old-logprob one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

FULL = "full_attention"
SLIDING = "sliding_attention"
LINEAR = "linear_attention"  # Qwen3.5's Gated DeltaNet: a fixed-size state, no KV cache
LAYER_KINDS = (FULL, SLIDING, LINEAR)
# module layouts param_breakdown knows; "generic": a Llama-style decoder (GQA, gated MLP)
ARCHITECTURES = ("qwen3", "qwen3_5", "gemma4", "generic")
# hidden-width RMSNorms per layer: pre-attention and pre-MLP (Gemma: post-norms too)
NORMS_PER_LAYER = {"qwen3": 2, "qwen3_5": 2, "gemma4": 4, "generic": 2}
LINEAR_STATE_BYTES = 4  # Gated DeltaNet's state is float32 (Qwen3.5's mamba_ssm_dtype)
FLOPS_PER_MAC = 2
BACKWARD_OVER_FORWARD = 2  # gradients for inputs and for weights
ATTENTION_FLOPS_PER_PAIR_PER_DIM = 4  # QK^T and AV
LINEAR_STATE_FLOPS = 4  # per token: the state's decay, rank-1 update and readout


class PlanError(ValueError):
    """Input the planner cannot plan with; every message names what is wrong and the fix."""


@dataclass(frozen=True)
class ModelDims:
    """The dimensions of one decoder-only language model (its text decoder).

    ``layer_types``: each layer's kind (empty: all full attention). Full-attention layers may
    have their own geometry (``global_head_dim``, ``global_kv_heads``: Gemma 4); the last
    ``num_kv_shared_layers`` layers reuse an earlier layer's keys and values (Gemma 4).
    """

    name: str
    architecture: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    layer_types: tuple[str, ...] = ()
    sliding_window: int | None = None
    global_head_dim: int | None = None  # full-attention layers' head width (None: head_dim)
    global_kv_heads: int | None = None  # full-attention layers' KV heads (None: num_kv_heads)
    attention_k_eq_v: bool = False  # full-attention layers reuse the keys as values (no v_proj)
    attn_output_gate: bool = False  # q_proj also emits a gate: twice its width (Qwen3.5)
    qk_norm: bool = True  # RMSNorm over head_dim on queries and keys
    num_kv_shared_layers: int = 0
    double_wide_mlp_shared: bool = False  # KV-shared layers' MLP is twice as wide (Gemma 4 E2B)
    linear_num_key_heads: int = 0  # Gated DeltaNet
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    per_layer_input_size: int = 0  # Gemma 4 per-layer embeddings (PLE) width per layer
    per_layer_vocab_size: int = 0
    checkpoint_dtype: str = "bfloat16"  # what the weights are stored in ("auto" resolves to it)
    source: str = ""  # where the numbers come from
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise PlanError(
                f"{self.name}: architecture {self.architecture!r} not in {ARCHITECTURES}"
            )
        for name in ("hidden_size", "intermediate_size", "num_layers", "num_heads",
                     "num_kv_heads", "head_dim", "vocab_size"):  # fmt: skip
            if int(getattr(self, name)) < 1:
                raise PlanError(f"{self.name}: {name} must be >= 1, got {getattr(self, name)}")
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise PlanError(
                f"{self.name}: layer_types has {len(self.layer_types)} entries for "
                f"{self.num_layers} layers; give one kind per layer or none"
            )
        if bad := sorted(set(self.layer_types) - set(LAYER_KINDS)):
            raise PlanError(f"{self.name}: unknown layer kinds {bad}; known: {LAYER_KINDS}")
        if LINEAR in self.layer_types and not (
            self.linear_num_key_heads and self.linear_num_value_heads and self.linear_key_head_dim
        ):
            raise PlanError(f"{self.name}: linear_attention layers need the linear_* dimensions")
        if not 0 <= self.num_kv_shared_layers < self.num_layers:
            raise PlanError(
                f"{self.name}: num_kv_shared_layers must be in [0, {self.num_layers}), "
                f"got {self.num_kv_shared_layers}"
            )

    def kinds(self) -> tuple[str, ...]:
        """Each layer's kind."""
        return self.layer_types or (FULL,) * self.num_layers

    def heads_of(self, kind: str) -> tuple[int, int]:
        """(kv heads, head dim) of an attention layer of ``kind``."""
        if kind == FULL:
            return self.global_kv_heads or self.num_kv_heads, self.global_head_dim or self.head_dim
        return self.num_kv_heads, self.head_dim

    def owns_kv(self, layer: int) -> bool:
        """Whether ``layer`` computes (and caches) keys and values of its own."""
        return layer < self.num_layers - self.num_kv_shared_layers

    def mlp_width(self, layer: int) -> int:
        wide = self.double_wide_mlp_shared and not self.owns_kv(layer)
        return self.intermediate_size * (2 if wide else 1)

    @property
    def linear_value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def linear_conv_dim(self) -> int:
        """Channels of the Gated DeltaNet's depthwise convolution (q, k and v together)."""
        return 2 * self.linear_num_key_heads * self.linear_key_head_dim + self.linear_value_dim

    @property
    def linear_state(self) -> int:
        """Elements of a Gated DeltaNet layer's state per sequence."""
        return self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim

    def with_layers(self, num_layers: int) -> ModelDims:
        """The same widths with ``num_layers`` layers (the layer-kind pattern repeated, KV
        sharing dropped): the shape of a shortened real-width test model."""
        kinds = self.kinds()
        pattern = tuple(kinds[i % len(kinds)] for i in range(num_layers))
        if self.layer_types and FULL in kinds and num_layers and pattern[-1] != FULL:
            pattern = (*pattern[:-1], FULL)  # Gemma 4 and Qwen3.5 end on a full layer
        return replace(
            self,
            num_layers=num_layers,
            layer_types=pattern if self.layer_types else (),
            num_kv_shared_layers=0,
            name=f"{self.name} ({num_layers} layers)",
        )


# ----------------------------------------------------------------------------- parameters


def _attention_params(d: ModelDims, layer: int, kind: str) -> tuple[int, int]:
    """(projection, norm) parameters of an attention layer."""
    kv_heads, hd = d.heads_of(kind)
    h = d.hidden_size
    q_width = d.num_heads * hd
    n = h * q_width * (2 if d.attn_output_gate else 1) + q_width * h  # q_proj, o_proj
    norms = hd if d.qk_norm else 0  # q_norm
    if d.owns_kv(layer):
        n += h * kv_heads * hd  # k_proj
        if not (kind == FULL and d.attention_k_eq_v):
            n += h * kv_heads * hd  # v_proj
        norms += hd if d.qk_norm else 0  # k_norm
    return n, norms


def _linear_attention_params(d: ModelDims) -> tuple[int, int]:
    """(projection and convolution, norm and gate-parameter) parameters of a DeltaNet layer."""
    h, nv = d.hidden_size, d.linear_num_value_heads
    proj = (
        h * d.linear_conv_dim  # in_proj_qkv
        + h * d.linear_value_dim  # in_proj_z (the output gate)
        + 2 * h * nv  # in_proj_b, in_proj_a
        + d.linear_conv_dim * d.linear_conv_kernel  # depthwise conv1d, no bias
        + d.linear_value_dim * h  # out_proj
    )
    return proj, 2 * nv + d.linear_value_head_dim  # dt_bias, A_log; the gated RMSNorm


def param_breakdown(d: ModelDims) -> dict[str, int]:
    """Parameters of ``d`` by component (``total`` included): ``norms`` holds every norm's
    weights (and a DeltaNet's gate parameters), the other components matrices (and the
    DeltaNet's convolution)."""
    h = d.hidden_size
    out = {
        "embedding": d.vocab_size * h,
        "per_layer_embedding": 0,
        "lm_head": 0 if d.tied_embeddings else d.vocab_size * h,
        "attention": 0,
        "linear_attention": 0,
        "mlp": 0,
        "norms": h,  # the final norm
        "per_layer_projections": 0,
    }
    ple = d.per_layer_input_size
    for layer, kind in enumerate(d.kinds()):
        if kind == LINEAR:
            proj, norms = _linear_attention_params(d)
            out["linear_attention"] += proj
        else:
            proj, norms = _attention_params(d, layer, kind)
            out["attention"] += proj
        out["norms"] += norms + NORMS_PER_LAYER[d.architecture] * h
        out["mlp"] += 3 * h * d.mlp_width(layer)  # gate, up, down
        if ple:  # per-layer input gate (h -> ple), projection (ple -> h) and its norm
            out["per_layer_projections"] += 2 * h * ple + h
    if ple:
        out["per_layer_embedding"] = (d.per_layer_vocab_size or d.vocab_size) * d.num_layers * ple
        out["per_layer_projections"] += d.num_layers * ple * h + ple  # model projection + norm
    out["total"] = sum(out.values())
    return out


def param_count(d: ModelDims) -> int:
    """Every parameter of ``d``'s text decoder (what is stored, trained and optimized)."""
    return param_breakdown(d)["total"]


def flop_params(d: ModelDims) -> dict[str, int]:
    """Parameters that cost a multiply-add per token: ``backbone`` (the decoder layers' and
    PLE's projections) and ``head`` (V x h, tied or not); lookups, norms and biases are free."""
    b = param_breakdown(d)
    backbone = b["attention"] + b["linear_attention"] + b["mlp"] + b["per_layer_projections"]
    return {"backbone": backbone, "head": d.vocab_size * d.hidden_size}


# ----------------------------------------------------------------------------- KV cache


def kv_bytes_per_token(d: ModelDims, dtype_bytes: float, context: int) -> float:
    """Mean KV-cache bytes per token of a ``context``-token sequence: K and V of every layer
    that caches its own, a sliding layer only its window."""
    if context <= 0:
        return 0.0
    total = 0.0
    for layer, kind in enumerate(d.kinds()):
        if kind == LINEAR or not d.owns_kv(layer):
            continue
        kv_heads, hd = d.heads_of(kind)
        kept = min(context, d.sliding_window) if kind == SLIDING and d.sliding_window else context
        total += 2 * kv_heads * hd * dtype_bytes * kept
    return total / context


def kv_cache_bytes(d: ModelDims, dtype_bytes: float, context: int, batch: int) -> float:
    """KV cache of ``batch`` sequences of ``context`` tokens, plus each Gated DeltaNet layer's
    fixed state (float32) and its convolution's last ``kernel - 1`` inputs."""
    per_seq = kv_bytes_per_token(d, dtype_bytes, context) * context
    if n_linear := sum(1 for k in d.kinds() if k == LINEAR):
        state = d.linear_state * LINEAR_STATE_BYTES
        conv = d.linear_conv_dim * max(d.linear_conv_kernel - 1, 0) * dtype_bytes
        per_seq += n_linear * (state + conv)
    return per_seq * batch


# ----------------------------------------------------------------------------- FLOPs


def context_sum(start: int, end: int, window: int | None = None) -> float:
    """Sum over positions ``i`` in ``[start, end)`` of ``min(i + 1, window)``: the tokens each
    attends to (causal; ``window`` None: no limit)."""
    if end <= start:
        return 0.0

    def full(a: int, b: int) -> float:  # sum of (i + 1) for i in [a, b)
        return (b * (b + 1) - a * (a + 1)) / 2.0

    if not window:
        return full(start, end)
    cut = max(start, min(end, window))  # positions before `cut` see fewer than `window` tokens
    return full(start, cut) + float(end - cut) * window


def forward_flops(d: ModelDims, prompt: int, completion: int, head_positions: int) -> float:
    """FLOPs of one forward over ``prompt + completion`` tokens, the head on ``head_positions``."""
    n = flop_params(d)
    tokens = prompt + completion
    total = FLOPS_PER_MAC * (n["backbone"] * tokens + n["head"] * head_positions)
    for kind in d.kinds():
        if kind == LINEAR:
            total += LINEAR_STATE_FLOPS * d.linear_state * tokens
            continue
        _, hd = d.heads_of(kind)
        pairs = context_sum(0, tokens, d.sliding_window if kind == SLIDING else None)
        total += ATTENTION_FLOPS_PER_PAIR_PER_DIM * d.num_heads * hd * pairs
    return total


def generation_flops(d: ModelDims, prompt: int, completion: int) -> float:
    """FLOPs of sampling ``completion`` tokens after ``prompt`` (prefill and decode)."""
    return forward_flops(d, prompt, completion, completion)


def prefill_flops(d: ModelDims, prompt: int) -> float:
    """FLOPs of the prefill alone (the head on the prompt's last position)."""
    return forward_flops(d, prompt, 0, 1)


def training_flops(
    d: ModelDims,
    prompt: int,
    completion: int,
    *,
    gradient_checkpointing: bool = False,
    reference_model: bool = False,
    num_iterations: int = 1,
) -> dict[str, float]:
    """FLOPs of training on one sequence (the completion in the loss), by part, and ``total``."""
    fwd = forward_flops(d, prompt, completion, completion)
    backbone_fwd = forward_flops(d, prompt, completion, 0)
    out = {
        "forward_backward": (1 + BACKWARD_OVER_FORWARD) * fwd * num_iterations,
        "recompute": backbone_fwd * num_iterations if gradient_checkpointing else 0.0,
        "reference": fwd if reference_model else 0.0,
        "old_logprobs": fwd if num_iterations > 1 else 0.0,
    }
    out["total"] = sum(out.values())
    return out
