"""Random-weight models of the paper's architectures, built locally in seconds, no hub.

Each model is a transformers config of the architecture (``qwen3``, ``qwen3_5_text``: hybrid
linear attention, ``gemma4_text``: per-layer embeddings) shrunk to a few thousand parameters,
saved with a small local BPE tokenizer whose chat template has the shape of that family's real
template (Qwen3's ``<|im_start|>`` turns with ``enable_thinking``, Gemma 4's ``<|turn>`` turns);
:func:`tiny_policies` makes trainable policies of them. The tests and the benchmarks build
their models here.

The paper's Qwen3.5 and Gemma 4 checkpoints are image-text models (``qwen3_5``, ``gemma4``:
:data:`VLM_ARCHS`): the trainer loads their text model (``AutoModelForCausalLM``), vLLM builds the
whole checkpoint's architecture, whose weight names differ. A tiny checkpoint of that form, with a
one-layer vision tower, is what tests that name mapping. vLLM's CPU kernels refuse some tiny
shapes (heads of 8 dimensions; a causal convolution of width 2 in Qwen3.5's linear attention):
``vllm=True`` builds the same models in shapes they take (:data:`VLLM_SHAPE`).

The weights are random, so outputs are gibberish; what they exercise is the plumbing (batching,
padding, caches, templates, stop strings, log-probs, a training step), not answers. A task that
gives such models reward spread is :class:`agon.tasks.synthetic.ParityTask`.

:func:`build_wide_model` is the other end: a paper checkpoint's architecture at its real width
(hidden size, heads, MLP, the 150k-262k vocabulary, tied embeddings) from the planner's table of
published dimensions (:data:`agon.plan.published.PUBLISHED`), cut to a few layers, with random
weights and a tokenizer as wide as the vocabulary (:func:`build_wide_tokenizer`): what the
real-width tests and the paper-scale benchmark train and measure, built without a download.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoTokenizer,
    Gemma4Config,
    Gemma4TextConfig,
    Gemma4VisionConfig,
    PreTrainedTokenizerFast,
    Qwen3_5Config,
    Qwen3_5TextConfig,
    Qwen3_5VisionConfig,
    Qwen3Config,
)

from agon.engines.hf import DTYPES, HFEngine, load_model
from agon.plan.dims import ModelDims
from agon.plan.published import PUBLISHED, transformers_config
from agon.training.policy import Policy, make_policy
from agon.training.settings import RLSettings

ARCHS = ("qwen3", "qwen3_5_text", "gemma4_text")
# the image-text checkpoints the paper's Qwen3.5 and Gemma 4 ship as, by their text model's arch
VLM_ARCHS = {"qwen3_5": "qwen3_5_text", "gemma4": "gemma4_text"}
# the shapes a tiny model takes for vLLM's CPU kernels: its attention takes heads of 32 to 512
# dimensions, its causal convolution (Qwen3.5's linear attention) a width of 4
TINY_SHAPE = {"head_dim": 8, "conv_width": 2}
VLLM_SHAPE = {"head_dim": 64, "conv_width": 4}

# chat templates of each family's shape (jinja, as shipped in tokenizer_config)
_QWEN_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)
_GEMMA4_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{- '<|turn>' + role + '\\n' + message['content'] + '<turn|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}{%- endif -%}"
)

# special tokens per family: (bos, eos, pad, extra specials, chat template)
_FAMILY_TOKENS = {
    "qwen": (
        None,
        "<|im_end|>",
        "<|endoftext|>",
        ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"],
        _QWEN_TEMPLATE,
    ),
    "gemma": (
        "<bos>",
        "<turn|>",
        "<pad>",
        ["<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>"],
        _GEMMA4_TEMPLATE,
    ),
}

# what the BPE is trained on: enough text for prompts of arithmetic tasks and chat roles
_CORPUS = [
    "Solve the problem. Put your final answer in \\boxed{}.",
    (
        "Below is a rival's attempt at this problem. It may be wrong. Check it critically, then "
        "solve the problem yourself and put your final answer in \\boxed{}."
    ),
    "<rival_attempt> </rival_attempt> user assistant model system You are a helpful assistant.",
    "What is 1 + 2 * 3 - 4 = 5 6 7 8 9 0 10 11 12 13 ? The answer is \\boxed{7}.",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 "
    ".,;:!?()[]{}<>+-*/=_'\"\\|#%&^~`@$",
]
TINY_VOCAB = 320  # BPE vocabulary size: byte alphabet (256) + a few merges + specials


def build_tiny_tokenizer(family: str, path: str | Path):
    """Train a tiny byte-level BPE and save it as a ``PreTrainedTokenizerFast`` with a chat
    template."""
    bos, eos, pad, specials, template = _FAMILY_TOKENS[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        additional_special_tokens=[
            s for s in specials if s not in (bos, eos, pad, "<think>", "</think>")
        ],
    )
    # as in Qwen3's real tokenizer, the thinking markers are added tokens but not special ones
    fast.add_tokens([s for s in specials if s in ("<think>", "</think>")])
    fast.chat_template = template
    fast.save_pretrained(path)
    return fast


def tiny_config(arch: str, vocab_size: int, tok, vllm: bool = False) -> object:
    """A shrunken config of ``arch`` (one of :data:`ARCHS` or :data:`VLM_ARCHS`) with the
    tokenizer's special ids; every width a multiple of the head size (8: hidden size 32), in
    shapes vLLM's CPU kernels take if ``vllm`` (:data:`VLLM_SHAPE`)."""
    if arch in VLM_ARCHS:
        return _tiny_vlm_config(arch, tiny_config(VLM_ARCHS[arch], vocab_size, tok, vllm))
    shape = VLLM_SHAPE if vllm else TINY_SHAPE
    head_dim, conv_width = shape["head_dim"], shape["conv_width"]
    ids = {
        "pad_token_id": tok.pad_token_id,
        "eos_token_id": tok.eos_token_id,
        "bos_token_id": tok.bos_token_id,
    }
    common = dict(
        vocab_size=vocab_size,
        hidden_size=4 * head_dim,
        intermediate_size=8 * head_dim,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=512,
        **ids,
    )
    if arch == "qwen3":
        return Qwen3Config(num_hidden_layers=2, tie_word_embeddings=True, **common)
    if arch == "qwen3_5_text":
        # one gated-delta-net (linear attention) layer and one full-attention layer: the hybrid
        return Qwen3_5TextConfig(
            num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            linear_conv_kernel_dim=conv_width,
            linear_key_head_dim=head_dim,
            linear_value_head_dim=head_dim,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            tie_word_embeddings=True,
            **common,
        )
    if arch == "gemma4_text":
        # per-layer input embeddings shrunk to the tiny vocabulary (262k by default)
        return Gemma4TextConfig(
            num_hidden_layers=2,
            layer_types=["sliding_attention", "full_attention"],
            sliding_window=16,
            vocab_size_per_layer_input=vocab_size,
            hidden_size_per_layer_input=head_dim,
            global_head_dim=head_dim,
            final_logit_softcapping=30.0,
            **common,
        )
    raise ValueError(
        f"unknown tiny architecture {arch!r}; expected one of {ARCHS + tuple(VLM_ARCHS)}"
    )


def _tiny_vlm_config(arch: str, text: Any) -> object:
    """The image-text checkpoint config of ``arch`` around the tiny ``text`` config: a vision
    tower of one layer, its special ids the text config's (the tiny BPE has no image tokens;
    no test sends an image)."""
    pad = text.pad_token_id
    width = dict(hidden_size=text.hidden_size, intermediate_size=text.intermediate_size)
    if arch == "qwen3_5":
        vision = Qwen3_5VisionConfig(
            depth=1,
            num_heads=2,
            out_hidden_size=text.hidden_size,
            num_position_embeddings=64,
            **width,
        )
        tokens = ("image_token_id", "video_token_id", "vision_start_token_id")
        tokens += ("vision_end_token_id",)
        return Qwen3_5Config(
            text_config=text.to_dict(),
            vision_config=vision.to_dict(),
            tie_word_embeddings=text.tie_word_embeddings,
            **dict.fromkeys(tokens, pad),
        )
    vision = Gemma4VisionConfig(
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=text.head_dim,
        position_embedding_size=64,
        **width,
    )
    tokens = ("boi_token_id", "eoi_token_id", "image_token_id", "video_token_id", "boa_token_id")
    return Gemma4Config(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        audio_config=None,
        eoa_token_index=pad,
        audio_token_id=pad,
        **dict.fromkeys(tokens, pad),
    )


def build_tiny_model(arch: str, path: str | Path, seed: int = 0, vllm: bool = False) -> Path:
    """Build a tiny random-weight ``arch`` model plus tokenizer at ``path`` and return the path.

    ``arch`` is a transformers ``model_type``: ``qwen3``, ``qwen3_5_text`` (hybrid linear
    attention) or ``gemma4_text`` (per-layer embeddings), or the image-text checkpoint
    ``qwen3_5`` or ``gemma4`` (:data:`VLM_ARCHS`); in shapes vLLM's CPU kernels take if
    ``vllm`` (:func:`tiny_config`). Reuses ``path`` if already
    built.
    """
    path = Path(path)
    if (path / "config.json").is_file() and (path / "tokenizer_config.json").is_file():
        return path
    family = "gemma" if arch.startswith("gemma") else "qwen"
    tok = build_tiny_tokenizer(family, path)
    config = tiny_config(arch, len(tok), tok, vllm)
    torch.manual_seed(seed)
    # an image-text checkpoint is saved whole, under the names the published one has
    auto = AutoModelForImageTextToText if arch in VLM_ARCHS else AutoModelForCausalLM
    model = auto.from_config(config, dtype=torch.float32)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    return path


def tiny_policies(
    arch: str,
    root: str | Path,
    settings: RLSettings,
    names: Sequence[str] = ("A", "B"),
    seeds: Sequence[int] = (0, 1),
) -> dict[str, Policy]:
    """Policies on tiny random ``arch`` models (one model per name, built under ``root``), each
    with its own HFEngine; the models are loaded on the CPU as the trainers load them
    (:func:`agon.engines.hf.load_model`: no Hub kernels, which a GPU would otherwise fetch at
    ``train()``)."""
    policies = {}
    for name, seed in zip(names, seeds):
        path = build_tiny_model(arch, Path(root) / f"{arch}-{seed}", seed=seed)
        tok = AutoTokenizer.from_pretrained(path)
        model = load_model(path, dtype="float32", device="cpu")
        engine = HFEngine(model, tok, batch_size=64)
        policies[name] = make_policy(name, model, engine, settings, pad_token_id=engine.pad_id)
    return policies


# the byte-level form of a leading space: every filler token decodes to " w<id>", so a random
# model's samples read as words (a reader prompt shows them) rather than as nothing
_FILLER = "\u0120w{}"


def build_wide_tokenizer(family: str, path: str | Path, vocab_size: int):
    """The tiny BPE of :func:`build_tiny_tokenizer` (its merges, specials and chat template),
    its vocabulary filled up to ``vocab_size`` entries: every id a real-width model samples
    decodes (to `` w<id>``), while text still encodes to the tiny BPE's few hundred ids. Saved
    at ``path`` and returned."""
    tiny = build_tiny_tokenizer(family, path)
    state = json.loads(tiny.backend_tokenizer.to_str())
    vocab: dict[str, int] = state["model"]["vocab"]
    taken = max(max(vocab.values()), *(t["id"] for t in state["added_tokens"])) + 1
    if vocab_size < taken:
        raise ValueError(f"vocab_size {vocab_size} is below the tiny tokenizer's {taken} ids")
    for i in range(taken, vocab_size):
        vocab[_FILLER.format(i)] = i
    bos, eos, pad, specials, template = _FAMILY_TOKENS[family]
    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)),
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        additional_special_tokens=[
            s for s in specials if s not in (bos, eos, pad, "<think>", "</think>")
        ],
    )
    fast.add_tokens([s for s in specials if s in ("<think>", "</think>")])  # already in: no-op
    fast.chat_template = template
    if len(fast) != vocab_size:
        raise RuntimeError(f"wide tokenizer has {len(fast)} ids, expected {vocab_size}")
    fast.save_pretrained(path)
    return fast


def build_wide_model(
    name: str,
    layers: int | None,
    path: str | Path,
    *,
    seed: int = 0,
    dtype: str = "float32",
    device: str = "cpu",
) -> tuple[Any, Any]:
    """A random-weight model of the published checkpoint ``name`` (a key of
    :data:`agon.plan.published.PUBLISHED`) at its real width with ``layers`` decoder layers
    (:meth:`agon.plan.dims.ModelDims.with_layers`; None: the checkpoint's own depth and layout),
    and its wide tokenizer; returns ``(model, tokenizer)`` (:func:`build_model_from_dims`)."""
    if name not in PUBLISHED:
        raise ValueError(f"unknown checkpoint {name!r}; expected one of {sorted(PUBLISHED)}")
    dims = PUBLISHED[name] if layers is None else PUBLISHED[name].with_layers(layers)
    return build_model_from_dims(dims, path, seed=seed, dtype=dtype, device=device)


def build_model_from_dims(
    dims: ModelDims,
    path: str | Path,
    *,
    seed: int = 0,
    dtype: str = "float32",
    device: str = "cpu",
) -> tuple[Any, Any]:
    """A random-weight model of ``dims`` (a paper checkpoint's, or any shape of its
    architecture) and a tokenizer as wide as its vocabulary (:func:`build_wide_tokenizer`);
    returns ``(model, tokenizer)``.

    The tokenizer and ``config.json`` are written to ``path`` (so
    :func:`agon.plan.published.load_dims` reads the same dimensions back); the weights are not:
    at real width they are gigabytes, and the caller holds the model. ``dtype`` is a
    :data:`agon.engines.hf.DTYPES` name; the model is built on ``device`` (a GPU skips the
    copy from the CPU)."""
    path = Path(path)
    family = "gemma" if dims.architecture == "gemma4" else "qwen"
    tok = build_wide_tokenizer(family, path, dims.vocab_size)
    config = transformers_config(
        dims,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype])
    model.config.save_pretrained(path)  # after the build: it records the dtype
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model, tok
