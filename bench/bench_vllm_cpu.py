"""Generation on a CPU: vLLM (its CPU build, in an engine process as the trainers run it)
against the transformers engine, same model, same prompts, one run.

The model is the real tier's model A (SmolLM2-135M-Instruct, ``config/real-cpu.yaml``) when a
prepared copy is on this machine: the folder ``AGON_BENCH_REAL_MODEL=DIR`` names, else the one
``agon model prepare`` left in the user's cache (nothing is fetched). Without one, a random
Qwen3 at real width (:func:`agon.random_models.build_wide_model`: Qwen3-0.6B's hidden size,
heads and 151,936-token vocabulary, cut to ``WIDE_LAYERS`` layers) stands in; it rarely emits
eos, so every row decodes all ``MAX_NEW_TOKENS`` tokens.

Both engines decode the ``N_PROMPTS`` solve prompts of the arith task's hard split greedily in
float32, in one call each: :class:`agon.engines.hf.HFEngine` (transformers ``generate``) at
batch ``N_PROMPTS``, and :class:`agon.engines.vllm.VLLMEngine` in an
:class:`agon.engines.process.EngineProcess`. After a warm-up call each, the two alternate
``ROUNDS`` times and each keeps its fastest; the engine's start (tens of seconds) is reported
apart, not in the rate.

Metrics (tokens/s: generated tokens, eos included, over the fastest repeat's seconds):

- ``vllm_cpu.vllm_over_hf``: vLLM's rate over the transformers engine's (target >= 4);
- ``vllm_cpu.greedy_identical_fraction``: the share of prompts whose greedy tokens agree
  (float32 on both sides, but other kernels: near-ties may differ; reported, no target);
- the two rates, vLLM's start seconds, the mean new tokens, whether the real model ran.

vLLM pins its own transformers and torch, so it lives in an environment of its own
(``.ci/run``'s ``.venv-vllm``): run ``python -m bench vllm_cpu`` there. Where vLLM is not
installed the benchmark measures nothing and says so. Both engines use the machine's cores
(vLLM binds its threads to them); ``AGON_BENCH_THREADS=N`` gives each N.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time
from pathlib import Path

import torch

from agon.config import load_config
from agon.engines import SamplingParams
from agon.engines.hf import HFEngine, load_tokenizer
from agon.engines.process import EngineProcess
from agon.engines.vllm import STAGED_WEIGHTS
from agon.packaged_models import cache_dir
from agon.random_models import build_wide_model
from agon.tasks import get_task

TARGETS = {"vllm_cpu.vllm_over_hf": (">=", 4.0)}

N_PROMPTS = 16
MAX_NEW_TOKENS = 64
ROUNDS = 2  # alternated repeats of each engine, the fastest kept
WIDE = "Qwen/Qwen3-0.6B"  # the stand-in's width (agon.plan.published)
WIDE_LAYERS = 4
MODEL_ENV = "AGON_BENCH_REAL_MODEL"
REAL_CONFIG = Path(__file__).resolve().parents[1] / "config" / "real-cpu.yaml"
KV_CACHE_GIB = "2"  # VLLM_CPU_KVCACHE_SPACE: 16 rows of a few hundred tokens need far less


def real_model() -> Path | None:
    """The real tier's model A if a prepared copy is here: ``$AGON_BENCH_REAL_MODEL``, the
    config's folder, or the user's cache (never fetched)."""
    given = os.environ.get(MODEL_ENV)
    if given:
        return Path(given)
    row = load_config(REAL_CONFIG)["families"][0]["model_a"]
    for path in (REAL_CONFIG.parents[1] / row["model"], cache_dir() / Path(row["model"]).name):
        if (path / "config.json").is_file():
            return path
    return None


def wide_model(path: Path) -> Path:
    """The random real-width Qwen3, saved at ``path`` (vLLM loads from a folder)."""
    model, tok = build_wide_model(WIDE, WIDE_LAYERS, path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def task_prompts() -> list[list[dict]]:
    """Solve prompts of the arith task's hard split."""
    task = get_task("arith")
    try:
        return [task.solve_prompt(p) for p in task.problems("hard")[:N_PROMPTS]]
    finally:
        task.close()


def vllm_engine(path: Path, threads: int | None) -> EngineProcess:
    """vLLM on ``path`` in an engine process, as :func:`agon.engines.rollouts.rollout_engine`
    builds one (float32 here, as the transformers engine)."""
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB}
    if threads is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{threads - 1}"
    kwargs = dict(
        model=str(path),
        dtype="float32",
        max_model_len=1024,
        worker_extension_cls=STAGED_WEIGHTS,
    )
    return EngineProcess(
        "agon.engines.vllm:VLLMEngine",
        kwargs,
        env,
        name="bench",
        tokenizer=load_tokenizer(path),
        dtype=torch.float32,
    )


def run() -> dict[str, float]:
    if importlib.util.find_spec("vllm") is None:
        print("[bench] vllm_cpu: vLLM is not installed here; run it in .ci/run's .venv-vllm")
        return {}
    threads = int(os.environ["AGON_BENCH_THREADS"]) if "AGON_BENCH_THREADS" in os.environ else None
    if threads is not None:
        torch.set_num_threads(threads)
    greedy = SamplingParams(max_new_tokens=MAX_NEW_TOKENS, temperature=0)
    prompts = task_prompts()
    real = real_model()
    with tempfile.TemporaryDirectory() as tmp:
        path = real or wide_model(Path(tmp) / "wide-qwen3")
        hf = HFEngine(path, dtype="float32", device="cpu", batch_size=N_PROMPTS)
        t0 = time.perf_counter()
        vllm = vllm_engine(path, threads)
        start_s = time.perf_counter() - t0
        try:
            engines = {"hf": hf, "vllm": vllm}
            for engine in engines.values():  # warm-up: first-call allocations, kernels
                engine.generate(prompts[:2], sampling=greedy)
            best = dict.fromkeys(engines, float("inf"))
            outs: dict[str, list[list[int]]] = {}
            for _ in range(ROUNDS):  # alternated: a slow spell of a shared machine hits both
                for name, engine in engines.items():
                    t0 = time.perf_counter()
                    out = engine.generate(prompts, sampling=greedy)
                    best[name] = min(best[name], time.perf_counter() - t0)
                    outs[name] = [cs[0].token_ids for cs in out]
        finally:
            vllm.close()
    rate = {name: sum(len(x) for x in outs[name]) / best[name] for name in outs}
    same = sum(a == b for a, b in zip(outs["vllm"], outs["hf"])) / N_PROMPTS
    return {
        "vllm_cpu.vllm_tokens_per_s": rate["vllm"],
        "vllm_cpu.hf_tokens_per_s": rate["hf"],
        "vllm_cpu.vllm_over_hf": rate["vllm"] / rate["hf"],
        "vllm_cpu.greedy_identical_fraction": same,
        "vllm_cpu.vllm_start_s": start_s,
        "vllm_cpu.mean_new_tokens": sum(len(x) for x in outs["vllm"]) / N_PROMPTS,
        "vllm_cpu.real_model": float(real is not None),  # 0: the random real-width stand-in
        "vllm_cpu.threads": float(torch.get_num_threads()),
    }
