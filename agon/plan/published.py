"""Published dimensions of the paper's checkpoints, for planning without a download.

Each row is what the model's ``config.json`` / card states (text decoder only), its source in a
comment, with the total the authors publish (``PUBLISHED_PARAMS``, checked in
``tests/test_plan.py`` within ``PARAMS_TOLERANCE``, and field by field against the vendored
``tests/fixtures/published_configs``: for now transcriptions of these rows). A ``config.json``
in a local folder or the Hugging Face cache always wins (:func:`agon.plan.hf_config.load_dims`).
Left out: vision and audio towers, and Qwen3.5's multi-token-prediction layer. Gemma 4 E4B's
per-layer embeddings count as weights (stored, trained, optimized) but cost no FLOPs.
"""

from __future__ import annotations

from agon.plan.dims import FULL, LINEAR, SLIDING, ModelDims

QWEN3_VOCAB = 151936  # Qwen3 config.json: vocab_size
QWEN3_5_VOCAB = 248320  # Qwen3.5 model cards: "Token Embedding: 248320 (Padded)"
GEMMA4_VOCAB = 262144  # Gemma 4 configs (transformers Gemma4TextConfig default; gemma.cpp)

# published totals are rounded (4.0B, 27B, "8B with embeddings"); and Gemma 4's totals include
# the vision and audio towers this table leaves out (a few hundred million parameters)
PARAMS_TOLERANCE = 0.10


def _qwen3(name: str, hidden: int, inter: int, layers: int, heads: int, tied: bool) -> ModelDims:
    """A Qwen3 dense checkpoint: GQA with 8 KV heads of 128, q/k norms, SwiGLU MLP."""
    return ModelDims(
        name=name,
        architecture="qwen3",
        hidden_size=hidden,
        intermediate_size=inter,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=8,
        head_dim=128,
        vocab_size=QWEN3_VOCAB,
        tied_embeddings=tied,
        source="Qwen3 config.json / model card (huggingface.co/" + name + ")",
    )


def _qwen3_5(
    name: str, hidden: int, inter: int, blocks: int, q_heads: int, v_heads: int, tied: bool
) -> ModelDims:
    """A Qwen3.5 dense checkpoint: ``blocks`` x (3 Gated DeltaNet + 1 gated attention layers);
    attention: 4 KV heads of 256; DeltaNet: 16 QK and ``v_heads`` V heads of 128, kernel 4."""
    return ModelDims(
        name=name,
        architecture="qwen3_5",
        hidden_size=hidden,
        intermediate_size=inter,
        num_layers=4 * blocks,
        num_heads=q_heads,
        num_kv_heads=4,
        head_dim=256,
        vocab_size=QWEN3_5_VOCAB,
        tied_embeddings=tied,
        layer_types=(LINEAR, LINEAR, LINEAR, FULL) * blocks,
        attn_output_gate=True,
        linear_num_key_heads=16,
        linear_num_value_heads=v_heads,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel=4,
        source="Qwen3.5 model card, 'Model Overview' (huggingface.co/" + name + ")",
    )


def _gemma4_pattern(layers: int) -> tuple[str, ...]:
    """Gemma 4's 5:1 pattern: every sixth layer (index 5, 11, ...) is full attention."""
    return tuple(FULL if i % 6 == 5 else SLIDING for i in range(layers))


PUBLISHED: dict[str, ModelDims] = {
    d.name: d
    for d in (
        # Qwen3 model cards: "Number of Layers", "Attention Heads (GQA): 16/32 for Q and 8 for
        # KV"; widths, head_dim 128, vocab and tie_word_embeddings from each config.json
        # (0.6B: hidden 1024 / MLP 3072; 1.7B: 2048 / 6144; 4B: 2560 / 9728; 8B: 4096 / 12288)
        _qwen3("Qwen/Qwen3-0.6B", 1024, 3072, 28, 16, tied=True),
        _qwen3("Qwen/Qwen3-1.7B", 2048, 6144, 28, 16, tied=True),
        _qwen3("Qwen/Qwen3-4B", 2560, 9728, 36, 32, tied=True),
        # the 2507 instruct release keeps Qwen3-4B's architecture (its card: 4.0B, 36 layers,
        # 32 Q / 8 KV heads); only the context length changes
        _qwen3("Qwen/Qwen3-4B-Instruct-2507", 2560, 9728, 36, 32, tied=True),
        _qwen3("Qwen/Qwen3-8B", 4096, 12288, 36, 32, tied=False),
        # Qwen3.5-4B card: hidden 2560, 32 layers = 8 x (3 DeltaNet + 1 attention), DeltaNet
        # 32 V / 16 QK heads of 128, attention 16 Q / 4 KV heads of 256, FFN 9216, "LM Output:
        # 248320 (Tied to token embedding)"
        _qwen3_5("Qwen/Qwen3.5-4B", 2560, 9216, 8, q_heads=16, v_heads=32, tied=True),
        # Qwen3.5-27B card: hidden 5120, 64 layers = 16 x (3 + 1), DeltaNet 48 V / 16 QK heads
        # of 128, attention 24 Q / 4 KV heads of 256, FFN 17408, LM output 248320 (not tied;
        # the slime model script passes --untie-embeddings-and-output-weights)
        _qwen3_5("Qwen/Qwen3.5-27B", 5120, 17408, 16, q_heads=24, v_heads=48, tied=False),
        # Gemma 4 E4B: gemma.cpp's ConfigGemma4_E4B_LM (google/gemma.cpp gemma/configs.cc):
        # model_dim 2560, 42 layers, FFN 10240, 8 heads, 2 KV heads, qkv_dim 256 on sliding
        # and 512 on global layers (every 6th), window 512, PLE dim 256, vocab 262144, layers
        # 24-41 reuse earlier KV; NVIDIA Megatron-Bridge's Gemma 4 E4B recipe agrees (42
        # layers, 2560, 10240, 8 heads, 2 KV heads, global head_dim 512, KV shared across
        # the last 18 layers, PLE vocab 262144 x 256). Published: 4.5B effective, 8B with
        # per-layer embeddings (Google's Gemma 4 docs), vision and audio towers included.
        ModelDims(
            name="google/gemma-4-E4B-it",
            architecture="gemma4",
            hidden_size=2560,
            intermediate_size=10240,
            num_layers=42,
            num_heads=8,
            num_kv_heads=2,
            head_dim=256,
            vocab_size=GEMMA4_VOCAB,
            tied_embeddings=True,
            layer_types=_gemma4_pattern(42),
            sliding_window=512,
            global_head_dim=512,
            num_kv_shared_layers=18,
            per_layer_input_size=256,
            per_layer_vocab_size=GEMMA4_VOCAB,
            source="gemma.cpp configs.cc ConfigGemma4_E4B_LM; Megatron-Bridge Gemma 4 E4B recipe",
        ),
        # Gemma 4 31B: slime's scripts/models/gemma4-31B.sh (THUDM/slime): 60 layers, hidden
        # 5376, FFN 21504, 32 heads, 16 KV heads of 256 (the sliding layers), vocab 262144;
        # the full layers (every 6th) from the Core AI conversion's card
        # (mlboydaisuke/Gemma-4-31B-CoreAI): global_head_dim 512, num_global_key_value_heads
        # 4 with attention_k_eq_v, tied embeddings, no PLE and no KV sharing; sliding window
        # 1024 (third-party model pages; it changes only the KV cache). Published: 30.7B.
        ModelDims(
            name="google/gemma-4-31B-it",
            architecture="gemma4",
            hidden_size=5376,
            intermediate_size=21504,
            num_layers=60,
            num_heads=32,
            num_kv_heads=16,
            head_dim=256,
            vocab_size=GEMMA4_VOCAB,
            tied_embeddings=True,
            layer_types=_gemma4_pattern(60),
            sliding_window=1024,
            global_head_dim=512,
            global_kv_heads=4,
            attention_k_eq_v=True,
            source="slime gemma4-31B.sh; Gemma-4-31B Core AI card (full-attention layers)",
            notes=(
                "sliding-layer KV heads and MLP width from a training framework's script, "
                "not Google's card; sliding window from third-party pages",
            ),
        ),
    )
}

# the totals each card publishes (parameters of the language model, as the card rounds them)
PUBLISHED_PARAMS: dict[str, float] = {
    "Qwen/Qwen3-0.6B": 0.6e9,  # card: "Number of Parameters: 0.6B" (0.44B non-embedding)
    "Qwen/Qwen3-1.7B": 1.7e9,  # card: 1.7B (1.4B non-embedding)
    "Qwen/Qwen3-4B": 4.0e9,  # card: 4.0B (3.6B non-embedding)
    "Qwen/Qwen3-4B-Instruct-2507": 4.0e9,  # card: 4.0B (3.6B non-embedding)
    "Qwen/Qwen3-8B": 8.2e9,  # card: 8.2B (6.95B non-embedding)
    "Qwen/Qwen3.5-4B": 4e9,  # card: "Number of Parameters: 4B"
    "Qwen/Qwen3.5-27B": 27e9,  # card: "Number of Parameters: 27B"
    "google/gemma-4-E4B-it": 8e9,  # "4.5B effective (8B with Per-Layer Embeddings)"
    "google/gemma-4-31B-it": 30.7e9,  # "30.7B parameters"
}
