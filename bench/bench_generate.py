"""Generation throughput: the transformers engine at batch 64 against batch 1, same model, one run.

The model is the toy world's base model A when it has been built (``agon toy pretrain``, the
path in ``config/config.yaml``), or any model folder given as ``AGON_BENCH_MODEL=DIR``; both
are measured on 64 solve prompts of the arith task's hard split and stop at their own eos.
Without one, a stand-in is built: a toy-shaped Qwen3 (docs/method.md, the toy world: hidden
96, 3 layers, 4 heads, 2 kv heads) with random weights and the tiny test tokenizer, on
synthetic prompts; it rarely emits eos, so every row decodes the full 48 tokens.

The 64 prompts are decoded greedily with ``batch_size=64`` (one call) and with ``batch_size=1``
(64 sequential calls). Both must give identical outputs (left padding and the KV cache change
nothing), else the benchmark fails; the metric is tokens/s at 64 over tokens/s at 1, each from
the fastest of ``ROUNDS_64`` / ``ROUNDS_1`` repeats. One torch thread by default, as the
workflow runs toy jobs (``OMP_NUM_THREADS={threads}``, 1): on a shared 2-core machine,
multi-threaded kernels collapse under oversubscription and the ratio measures the neighbours;
``AGON_BENCH_THREADS`` overrides.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

import torch
import yaml
from transformers import AutoModelForCausalLM, Qwen3Config

from agon.config import family_for_seed
from agon.engines import SamplingParams
from agon.engines.hf import HFEngine
from agon.random_models import build_tiny_tokenizer
from agon.tasks import get_task

TARGETS = {"generate.batch64_over_batch1": (">=", 20.0)}

# the toy world's model shape (docs/method.md, the toy world)
TOY_SHAPE = dict(
    hidden_size=96,
    intermediate_size=192,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=24,
)
N_PROMPTS = 64
MAX_NEW_TOKENS = 48  # the toy family's max_new_tokens (config/config.yaml)
# repeats of each measurement, the fastest kept: batch 64 is one short call, cheap to repeat;
# batch 1 is 64 calls, and each prompt keeps its own fastest
ROUNDS_64 = 5
ROUNDS_1 = 2
INIT_RANGE = 0.2  # peakier random logits than the default 0.02, so greedy has few near-ties


def _build(path: Path) -> Path:
    tok = build_tiny_tokenizer("qwen", path)
    config = Qwen3Config(
        vocab_size=len(tok),
        max_position_embeddings=512,
        tie_word_embeddings=True,
        initializer_range=INIT_RANGE,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        **TOY_SHAPE,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(path)
    return path


def _toy_model() -> str | None:
    """The toy family's model A from the default config (seed 0's pair), if it has been built."""

    config = Path(__file__).resolve().parents[1] / "config" / "config.yaml"
    try:
        rows = yaml.safe_load(config.read_text())["families"]
        row = family_for_seed(next(r for r in rows if r.get("toy")), 0)
        path = config.parents[1] / row["model_a"]["model"]
    except (OSError, KeyError, StopIteration, TypeError):
        return None
    return str(path) if (path / "config.json").is_file() else None


def _task_prompts() -> list[list[dict]]:
    """Solve prompts of the toy arith task's hard split: what a trained toy model expects."""

    task = get_task("arith")
    try:
        return [task.solve_prompt(p) for p in task.problems("hard")[:N_PROMPTS]]
    finally:
        task.close()


def _prompts() -> list[list[dict]]:
    rng = random.Random(0)
    out = []
    for _ in range(N_PROMPTS):
        steps = " ".join(
            f"{rng.choice('+-*')} {rng.randint(1, 6)}" for _ in range(rng.randint(1, 6))
        )
        out.append(
            [
                {
                    "role": "user",
                    "content": f"Compute mod 7: {rng.randint(1, 6)} {steps}\n\n"
                    "Solve the problem. Put your final answer in \\boxed{}.",
                }
            ]
        )
    return out


def run() -> dict[str, float]:
    torch.set_num_threads(int(os.environ.get("AGON_BENCH_THREADS", "1")))
    greedy = SamplingParams(max_new_tokens=MAX_NEW_TOKENS, temperature=0)
    trained = os.environ.get("AGON_BENCH_MODEL") or _toy_model()
    prompts = _task_prompts() if trained else _prompts()
    with tempfile.TemporaryDirectory() as tmp:
        path = trained or _build(Path(tmp) / "toy_qwen3")
        engine = HFEngine(path, dtype="float32", device="cpu", batch_size=N_PROMPTS)
        engine.generate(prompts[:2], sampling=greedy)  # warm-up: first-call allocations
        # best of several repeats: on a shared machine the fastest repeat is the least disturbed
        # one;
        # batch 1 takes the fastest repeat of each prompt's own decode
        engine.batch_size = N_PROMPTS
        best64, out64 = float("inf"), None
        for _ in range(ROUNDS_64):
            t0 = time.perf_counter()
            out64 = engine.generate(prompts, sampling=greedy)
            best64 = min(best64, time.perf_counter() - t0)
        engine.batch_size = 1
        best1 = [float("inf")] * N_PROMPTS
        out1: list = [None] * N_PROMPTS
        for _ in range(ROUNDS_1):
            for i, p in enumerate(prompts):
                t0 = time.perf_counter()
                out1[i] = engine.generate([p], sampling=greedy)[0]
                best1[i] = min(best1[i], time.perf_counter() - t0)
        tokens64 = sum(len(cs[0].token_ids) for cs in out64)
        tokens1 = sum(len(cs[0].token_ids) for cs in out1)
        timings = {N_PROMPTS: tokens64 / best64, 1: tokens1 / sum(best1)}
        outputs = {
            N_PROMPTS: [cs[0].token_ids for cs in out64],
            1: [cs[0].token_ids for cs in out1],
        }
    same = sum(a == b for a, b in zip(outputs[N_PROMPTS], outputs[1]))
    if same != N_PROMPTS:
        raise AssertionError(
            f"greedy outputs differ between batch {N_PROMPTS} and batch 1 for {N_PROMPTS - same} "
            f"of {N_PROMPTS} prompts"
        )
    return {
        "generate.batch64_tokens_per_s": timings[N_PROMPTS],
        "generate.batch1_tokens_per_s": timings[1],
        "generate.batch64_over_batch1": timings[N_PROMPTS] / timings[1],
        "generate.greedy_identical_fraction": same / N_PROMPTS,
        "generate.threads": float(torch.get_num_threads()),
        "generate.trained_toy_model": float(bool(trained)),  # 0: the random stand-in
    }
