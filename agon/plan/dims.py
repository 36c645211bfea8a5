"""A model's dimensions, and the parameters, FLOP-parameters and KV cache they imply.

:class:`ModelDims` holds what the planner needs of an architecture: the decoder's widths, its
layer kinds (full, sliding-window or linear attention), and the few extras of the paper's
checkpoints (Qwen3.5's gated attention and Gated DeltaNet layers, Gemma 4's per-layer
embeddings, KV sharing and wider global heads). It is built from a transformers config or a
``config.json`` (:mod:`agon.plan.hf_config`), or taken from the table of published checkpoints
(:mod:`agon.plan.published`); nothing is downloaded.

Parameter counts are computed from the dimensions, module by module, as transformers 5 builds
these models (checked against ``from_config`` models in ``tests/test_plan.py``): embeddings,
attention, MLP, norms, the LM head when it is not tied. Only the text decoder is counted: a
vision or audio tower that a checkpoint also ships is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

FULL = "full_attention"
SLIDING = "sliding_attention"
LINEAR = "linear_attention"  # Qwen3.5's Gated DeltaNet: a fixed-size state, no KV cache
LAYER_KINDS = (FULL, SLIDING, LINEAR)

# architectures whose module layout :func:`param_breakdown` knows; anything else is counted as
# a Llama-style decoder (GQA attention, gated MLP, two norms per layer), which "generic" names
ARCHITECTURES = ("qwen3", "qwen3_5", "gemma4", "generic")
# RMSNorm weight vectors of width hidden_size per decoder layer: pre-attention and pre-MLP,
# and Gemma's post-attention and post-MLP norms too
NORMS_PER_LAYER = {"qwen3": 2, "qwen3_5": 2, "gemma4": 4, "generic": 2}
# Gated DeltaNet's recurrent state is kept in float32 (Qwen3.5's config: mamba_ssm_dtype)
LINEAR_STATE_BYTES = 4


class PlanError(ValueError):
    """Input the planner cannot plan with (a config, a GPU kind, a model, a measurement file);
    every message names what is wrong and how to fix it."""


class DimsError(PlanError):
    """Dimensions that cannot be built or are inconsistent; the message says which field."""


@dataclass(frozen=True)
class ModelDims:
    """The dimensions of one decoder-only language model (its text decoder).

    ``layer_types`` names each layer's kind (:data:`LAYER_KINDS`; empty: all full attention).
    Full-attention layers may have their own geometry (``global_head_dim``,
    ``global_kv_heads``: Gemma 4); ``num_kv_shared_layers`` last layers reuse an earlier
    layer's keys and values and have no K/V projections or cache of their own (Gemma 4).
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
            raise DimsError(
                f"{self.name}: architecture {self.architecture!r} not in {ARCHITECTURES}"
            )
        for name in ("hidden_size", "intermediate_size", "num_layers", "num_heads"):
            if int(getattr(self, name)) < 1:
                raise DimsError(f"{self.name}: {name} must be >= 1, got {getattr(self, name)}")
        for name in ("num_kv_heads", "head_dim", "vocab_size"):
            if int(getattr(self, name)) < 1:
                raise DimsError(f"{self.name}: {name} must be >= 1, got {getattr(self, name)}")
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise DimsError(
                f"{self.name}: layer_types has {len(self.layer_types)} entries for "
                f"{self.num_layers} layers; give one kind per layer or none"
            )
        bad = sorted(set(self.layer_types) - set(LAYER_KINDS))
        if bad:
            raise DimsError(f"{self.name}: unknown layer kinds {bad}; known: {LAYER_KINDS}")
        if LINEAR in self.layer_types and not (
            self.linear_num_key_heads and self.linear_num_value_heads and self.linear_key_head_dim
        ):
            raise DimsError(f"{self.name}: linear_attention layers need the linear_* dimensions")
        if not 0 <= self.num_kv_shared_layers < self.num_layers:
            raise DimsError(
                f"{self.name}: num_kv_shared_layers must be in [0, {self.num_layers}), "
                f"got {self.num_kv_shared_layers}"
            )

    # ------------------------------------------------------------------ per-layer geometry

    def kinds(self) -> tuple[str, ...]:
        """Each layer's kind."""
        return self.layer_types or (FULL,) * self.num_layers

    def heads_of(self, kind: str) -> tuple[int, int]:
        """(kv heads, head dim) of an attention layer of ``kind``."""
        if kind == FULL:
            return (
                self.global_kv_heads or self.num_kv_heads,
                self.global_head_dim or self.head_dim,
            )
        return self.num_kv_heads, self.head_dim

    def owns_kv(self, layer: int) -> bool:
        """Whether layer ``layer`` computes (and caches) keys and values of its own."""
        return layer < self.num_layers - self.num_kv_shared_layers

    def mlp_width(self, layer: int) -> int:
        """The MLP's intermediate width at ``layer``."""
        wide = self.double_wide_mlp_shared and not self.owns_kv(layer)
        return self.intermediate_size * (2 if wide else 1)

    @property
    def linear_key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def linear_conv_dim(self) -> int:
        """Channels of the Gated DeltaNet's depthwise convolution (q, k and v together)."""
        return 2 * self.linear_key_dim + self.linear_value_dim

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
    """Parameters of ``d`` by component (``total`` included), as transformers builds it:
    ``norms`` holds every norm's weights (and a DeltaNet's two per-head gate parameters), the
    projection components only matrices (and the DeltaNet's convolution)."""
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
        out["norms"] += norms
        out["mlp"] += 3 * h * d.mlp_width(layer)  # gate, up, down
        out["norms"] += NORMS_PER_LAYER[d.architecture] * h
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
    """Parameters that cost a multiply-add per token: ``backbone`` (every projection, MLP and
    convolution of the decoder layers, and PLE's projections) and ``head`` (the LM head's V x h,
    tied or not). Embedding tables are looked up, not multiplied; norms and biases are ignored
    (a few per cent of a token's FLOPs at most)."""
    b = param_breakdown(d)
    backbone = b["attention"] + b["linear_attention"] + b["mlp"] + b["per_layer_projections"]
    return {"backbone": backbone, "head": d.vocab_size * d.hidden_size}


# ----------------------------------------------------------------------------- KV cache


def kv_bytes_per_token(d: ModelDims, dtype_bytes: float, context: int) -> float:
    """Mean KV-cache bytes per cached token of a sequence ``context`` tokens long: 2 (K and V)
    x kv heads x head dim x bytes, summed over the layers that cache their own keys; a sliding
    layer keeps only its window (``min(context, window)`` of the ``context`` tokens)."""
    if context <= 0:
        return 0.0
    total = 0.0
    for layer, kind in enumerate(d.kinds()):
        if kind == LINEAR or not d.owns_kv(layer):
            continue
        kv_heads, hd = d.heads_of(kind)
        kept = context
        if kind == SLIDING and d.sliding_window:
            kept = min(context, d.sliding_window)
        total += 2 * kv_heads * hd * dtype_bytes * kept
    return total / context


def kv_cache_bytes(d: ModelDims, dtype_bytes: float, context: int, batch: int) -> float:
    """KV cache (and Gated DeltaNet state) of ``batch`` sequences of ``context`` tokens:
    ``2 x layers x kv_heads x head_dim x context x batch x bytes`` for plain full attention,
    with the windows, shared layers and wider global heads of :func:`kv_bytes_per_token`, plus
    each linear layer's fixed state (value heads x key dim x value dim in float32, and the
    convolution's last ``kernel - 1`` inputs)."""
    per_seq = kv_bytes_per_token(d, dtype_bytes, context) * context
    n_linear = sum(1 for k in d.kinds() if k == LINEAR)
    if n_linear:
        state = (
            d.linear_num_value_heads
            * d.linear_key_head_dim
            * d.linear_value_head_dim
            * LINEAR_STATE_BYTES
        )
        conv = d.linear_conv_dim * max(d.linear_conv_kernel - 1, 0) * dtype_bytes
        per_seq += n_linear * (state + conv)
    return per_seq * batch
