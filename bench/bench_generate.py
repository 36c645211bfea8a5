"""Generation throughput: the transformers engine at batch 64 against batch 1, same model, one run.

The model is a toy-sized Qwen3 (the toy world's shape, DESIGN.md §5: hidden 96, 3 layers, 4
heads, 2 kv heads) with random weights and the tiny test tokenizer, so the benchmark needs
nothing built beforehand (``AGON_BENCH_MODEL=DIR`` measures a trained toy model instead, on the arith task's hard
prompts; it stops at its own eos, so rows end at different lengths). 64 arithmetic prompts of mixed lengths are decoded greedily twice:
one generate call with ``batch_size=64``, and with ``batch_size=1`` (64 sequential decodes).
Both runs must give identical outputs (left padding and the KV cache change nothing), else the
benchmark fails; the metric is tokens/s at 64 over tokens/s at 1, each from the fastest of
``ROUNDS`` repeats (robust to other jobs on a shared machine).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"generate.batch64_over_batch1": (">=", 20.0)}

# the toy world's model shape (DESIGN.md §5)
TOY_SHAPE = dict(hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=24)
N_PROMPTS = 64
MAX_NEW_TOKENS = 48  # the toy family's max_new_tokens (config/config.yaml)
ROUNDS = 2  # repeats of each measurement; the fastest is kept
INIT_RANGE = 0.2  # peakier random logits than the default 0.02, so greedy has few near-ties


def _build(path: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tiny_models import build_tiny_tokenizer

    tok = build_tiny_tokenizer("qwen", path)
    config = Qwen3Config(vocab_size=len(tok), max_position_embeddings=512, tie_word_embeddings=True, initializer_range=INIT_RANGE,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **TOY_SHAPE)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(path)
    return path


def _task_prompts() -> list[list[dict]]:
    """Solve prompts of the toy arith task's hard split: what a trained toy model expects."""
    from agon.tasks import get_task

    task = get_task("arith")
    try:
        return [task.solve_prompt(p) for p in task.problems("hard")[:N_PROMPTS]]
    finally:
        task.close()


def _prompts() -> list[list[dict]]:
    rng = random.Random(0)
    out = []
    for _ in range(N_PROMPTS):
        steps = " ".join(f"{rng.choice('+-*')} {rng.randint(1, 6)}" for _ in range(rng.randint(1, 6)))
        out.append([{"role": "user", "content": f"Compute mod 7: {rng.randint(1, 6)} {steps}\n\nSolve the problem. Put your final answer in \\boxed{{}}."}])
    return out


def run() -> dict[str, float]:
    import torch

    from agon.engines import SamplingParams
    from agon.engines.hf import HFEngine

    # torch's default threads (all cores) for both runs: batch 64 uses them, batch 1 cannot,
    # which is the point of batching; AGON_BENCH_THREADS pins a count for comparisons
    if os.environ.get("AGON_BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["AGON_BENCH_THREADS"]))
    greedy = SamplingParams(max_new_tokens=MAX_NEW_TOKENS, temperature=0)
    trained = os.environ.get("AGON_BENCH_MODEL")
    prompts = _task_prompts() if trained else _prompts()
    with tempfile.TemporaryDirectory() as tmp:
        # AGON_BENCH_MODEL: a trained model folder instead (e.g. the toy world's base model A)
        path = trained or _build(Path(tmp) / "toy_qwen3")
        engine = HFEngine(path, dtype="float32", device="cpu", batch_size=N_PROMPTS)
        engine.generate(prompts[:2], sampling=greedy)  # warm-up: first-call allocations
        # best of ROUNDS: on a shared machine the fastest repeat is the least disturbed one;
        # batch 1 takes the fastest repeat of each prompt's own decode
        engine.batch_size = N_PROMPTS
        best64, out64 = float("inf"), None
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            out64 = engine.generate(prompts, sampling=greedy)
            best64 = min(best64, time.perf_counter() - t0)
        engine.batch_size = 1
        best1 = [float("inf")] * N_PROMPTS
        out1: list = [None] * N_PROMPTS
        for _ in range(ROUNDS):
            for i, p in enumerate(prompts):
                t0 = time.perf_counter()
                out1[i] = engine.generate([p], sampling=greedy)[0]
                best1[i] = min(best1[i], time.perf_counter() - t0)
        tokens64 = sum(len(cs[0].token_ids) for cs in out64)
        tokens1 = sum(len(cs[0].token_ids) for cs in out1)
        timings = {N_PROMPTS: tokens64 / best64, 1: tokens1 / sum(best1)}
        outputs = {N_PROMPTS: [cs[0].token_ids for cs in out64], 1: [cs[0].token_ids for cs in out1]}
    same = sum(a == b for a, b in zip(outputs[N_PROMPTS], outputs[1]))
    if same != N_PROMPTS:
        raise AssertionError(f"greedy outputs differ between batch {N_PROMPTS} and batch 1 for {N_PROMPTS - same} of {N_PROMPTS} prompts")
    return {
        "generate.batch64_tokens_per_s": timings[N_PROMPTS],
        "generate.batch1_tokens_per_s": timings[1],
        "generate.batch64_over_batch1": timings[N_PROMPTS] / timings[1],
        "generate.greedy_identical_fraction": same / N_PROMPTS,
        "generate.threads": float(torch.get_num_threads()),
    }
