# long: one prepared GPU run read top to bottom: its plan, its five phases, their report
"""The paper's scale on one GPU: a full-depth random-weight pair, one duel step, one GRPO step,
and the transformers engine's decode rate against the memory-bandwidth bound.

Why: ``agon plan`` prices every GPU job from the bounds of ``agon.plan.hardware`` times an
efficiency that is *assumed* until a measurement exists (``bench/throughput/README.md``); and
whether one duel step of two 4B policies at 1,024 new tokens fits one GPU, and how its time
splits between rollout and update, is what the paper's runs hang on. This measures both on the
GPU the runs use, with the project's own code (:func:`agon.duel.duel_step`,
:func:`agon.rl.grpo_step`, TRL's GRPOTrainer through ``baselines.grpo``, and
:class:`agon.engines.hf.HFEngine`), on random weights (no download) at a paper checkpoint's
full dimensions (:func:`agon.random_models.build_wide_model`).

Phases, in order; each has its own time limit, and one that fails or runs out of time is
reported in the JSON and the next still runs:

1. ``build``: model A at full depth on the GPU, in the family's dtype (bf16): Qwen3-4B's
   dimensions, else Qwen3-1.7B's, the first whose planned memory (the largest of the phases
   below, by :func:`agon.plan.estimate_step_memory` and
   :func:`agon.plan.estimate_generation_memory`) fits the GPU's free memory;
2. ``decode_b64``, ``decode_b256``: :class:`HFEngine` sampling 64 and 256 rows of a ~512-token
   prompt for 512 new tokens: tokens/s, and the ratio to the bound the planner computes for the
   same model and shape (:func:`agon.plan.hardware.generation_seconds` at efficiency 1: every
   weight and the KV cache read once per decode step at the kind's bandwidth, the prefill at its
   peak FLOPs), which is the efficiency the planner will derive from the measurement;
3. ``duel``: model B built, both made policies as the trainer makes them
   (:func:`agon.training.policy.make_policy`: AdamW, gradient checkpointing where the settings
   have it), one :func:`agon.duel.duel_step` of 4 problems x 4 drafts x 2 reads at 1,024 new
   tokens: rollout and update seconds, peak memory against the planner's estimate. On a GPU
   with vLLM installed (``--engine auto``, or ``vllm``) each policy samples from the trainer's
   colocated vLLM engine (:func:`agon.engines.rollouts.rollout_engine`: a process of its own
   pinned to the GPU the one-GPU placement gives it, asleep through its policy's update, its
   weights staged after it; built from dummy weights, the policy's sent by a first sync, as a
   resumed run's are), and the GPU's peak memory, every process's (polled), is checked against
   what ``agon plan`` puts on that GPU (:func:`agon.plan.memory.train_memory` under
   :func:`agon.engines.placement.place`);
4. ``grpo``: one :func:`agon.rl.grpo_step` of model A alone at the same shape: its training
   rate (completion tokens trained on per second) is written for the planner;
5. ``trl_grpo``: the policies freed, a fresh model A, one step of TRL's GRPOTrainer built as
   the GRPO baseline builds it (:meth:`baselines.grpo.GRPOSettings.grpo_config`).

Every phase's peak is ``torch.cuda.max_memory_allocated`` after a reset. Generation runs to its
length: :class:`HFEngine` stops a row only at the tokenizer's or the model's eos
(``min_new_tokens`` pinned to 0, no stop strings here), and a random model draws a given id
about once in 150k; the JSON counts the rows that ended early in every phase, and a batch decodes
until its last row ends. A draft re-tokenizes to several times its sampled length (a filler id
decodes to `` w<id>``, which the tiny BPE spells out), so the reader prompt is capped as the
trainer caps it (``max_prompt_tokens``, the draft's tail kept): at the bare reader prompt plus
1,024 tokens, the shape a real model's reader prompt has.

Settings the trainer may or may not have (read with :func:`dataclasses.fields`):
``gradient_checkpointing`` is passed as True and ``master_dtype`` left at its default; the JSON
says which were settings, their values, and whether the model reports checkpointing on.

Usage (a JSON summary on stdout, progress on stderr):

    python -m bench.bench_paper_scale                   # a GPU: writes bench/throughput/*.json
    python -m bench.bench_paper_scale --gpu-kind h100   # another kind (it must name the GPU)
    python -m bench.bench_paper_scale --smoke           # CPU, toy scale (2 layers, hidden 64,
                                                        # 16 new tokens, batch 4): writes nothing
    python -m bench.bench_paper_scale --smoke --out DIR # ... and its measurements (kind cpu) there
    python -m bench.bench_paper_scale --engine hf       # a GPU, the duel on transformers only

On an H200 it is expected to take 4-7 minutes (the rollouts dominate: transformers ``generate``
of a 36-layer model runs at roughly 30-60 ms per decode step, 1,024 steps per generation call,
three calls in the duel and GRPO phases and one in TRL's; with vLLM the duel's two engines take
a minute or two to start instead); the phases' limits and the budget keep it under
:data:`BUDGET_S` (a phase the budget cannot fit is skipped and said so). Without a GPU,
``run()`` (``python -m bench``) runs the smoke mode. None of this has run on a GPU yet.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import importlib.util
import json
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from agon import duel, rl
from agon.duel import DuelSettings
from agon.engines import SamplingParams
from agon.engines.hf import HFEngine
from agon.engines.placement import place
from agon.engines.rollouts import RolloutOptions, rollout_engine
from agon.plan import (
    GPU_KINDS,
    PUBLISHED,
    ModelDims,
    estimate_generation_memory,
    estimate_step_memory,
    kv_cache_bytes,
    param_count,
    write_measurement,
)
from agon.plan.dims import PlanError
from agon.plan.hardware import MEASUREMENTS_DIR, efficiency, generation_seconds, read_measurements
from agon.plan.memory import TrainShape, dtype_bytes, train_memory
from agon.random_models import build_model_from_dims
from agon.tasks.synthetic import ParityTask
from agon.training import metrics as mk
from agon.training.policy import Policy, make_policy
from agon.training.settings import RLSettings
from agon.training.shell import master_precision
from baselines.grpo import GRPOSettings, make_reward_fn, prompt_dataset


@dataclass(frozen=True)
class Scale:
    """What one run measures at: the paper's on a GPU, or the smoke test's on a CPU."""

    candidates: tuple[str, ...]  # PUBLISHED checkpoints, the largest first
    toy: dict[str, int] | None  # dimensions replacing the first candidate's (the smoke test)
    dtype: str  # the family's dtype
    new_tokens: int  # completions of the duel and GRPO steps
    problems: int  # P
    generations: int  # G
    reads: int  # K
    # the reader prompt's template and problem, planned before the tokenizer counts them (a
    # reader prompt holds them and up to new_tokens of the draft's tail)
    reader_allowance: int
    decode_prompt: int  # the decode phases' prompt length
    decode_new: int  # and their new tokens
    decode_batches: tuple[int, ...]
    micro_batches: tuple[int, ...]  # tried largest first: the first whose plan fits
    limits: dict[str, float]  # seconds per phase
    budget_s: float  # the whole run


PHASES = ("build", "decode", "duel", "grpo", "trl_grpo")
BUDGET_S = 540.0  # nine minutes of phases: under ten with the imports and the start
PAPER = Scale(
    candidates=("Qwen/Qwen3-4B", "Qwen/Qwen3-1.7B"),
    toy=None,
    dtype="bfloat16",
    new_tokens=1024,
    problems=4,
    generations=4,
    reads=2,  # config/paper.yaml's K: a read's group is the K reads of one draft
    reader_allowance=256,
    decode_prompt=512,
    decode_new=512,
    decode_batches=(64, 256),
    micro_batches=(8, 4, 2, 1),
    # the duel's two generation calls of 1,024 steps dominate (with vLLM, its two engines'
    # start); each decode batch is one call
    limits={"build": 90.0, "decode": 120.0, "duel": 300.0, "grpo": 120.0, "trl_grpo": 150.0},
    budget_s=BUDGET_S,
)
# a paper architecture at toy size: the same code path on a CPU in seconds
TOY_DIMS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_layers": 2,
    "num_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 16,
    "vocab_size": 1024,
}
SMOKE = Scale(
    candidates=("Qwen/Qwen3-4B",),
    toy=TOY_DIMS,
    dtype="float32",
    new_tokens=16,
    problems=2,
    generations=4,  # a group of 4 has reward spread under parity far more often than one of 2
    reads=2,
    reader_allowance=128,
    decode_prompt=32,
    decode_new=16,
    decode_batches=(4,),
    micro_batches=(4,),
    limits={"build": 30.0, "decode": 30.0, "duel": 30.0, "grpo": 30.0, "trl_grpo": 60.0},
    budget_s=120.0,
)

DEFAULT_KIND = "h200"
MEMORY_MARGIN = 0.9  # plan to use at most this share of the GPU's free memory
MIN_PHASE_S = 5.0  # a phase with less time left than this is skipped, not started
LEARNING_RATE = 1e-6  # one step of random weights: the rate only has to be a number
WARMUP_TOKENS = 8  # a short generation first: CUDA kernels and cuBLAS handles warmed up
PROMPT_TEXT = "Count the words of this sentence and add them up carefully. "
PROMPT_FIT_ROUNDS = 8  # rounds of lengthening a prompt towards its token count
TRACEBACK_CHARS = 2000  # of a failed phase's traceback, kept in the JSON
GIB = 2**30
NO_THINKING = {"enable_thinking": False}  # the Qwen template's short answer mode
CHECKPOINTING_ATTRS = ("is_activation_checkpointing", "is_gradient_checkpointing")
ENGINES = ("auto", "hf", "vllm")  # --engine: the duel's rollout engine (auto: vLLM if installed)
VLLM_SHARE = 0.2  # each colocated engine's share of the GPU: config/paper.yaml's
DEVICE_POLL_S = 0.05  # how often the GPU's free memory is read during the vLLM duel
WITHIN_PLAN = 1.10  # a measured GPU peak up to this times the planned one agrees with the plan
HEADLINE = (  # what python -m bench tabulates of each phase
    "gpu_peak_gib",
    "planned_gpu_gib",
    "tokens_per_s",
    "measured_over_bound",
    "rollout_s",
    "update_s",
    "training_tokens_per_s",
    "step_s",
    "peak_gib",
)


class PhaseTimeout(Exception):
    """A phase ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`PhaseTimeout` in the main thread after ``seconds`` (SIGALRM; transformers'
    generate and the training loop are Python between kernels, so the signal lands within a
    step). No limit off the main thread, nor where another handler owns SIGALRM (a test
    runner's timeout): the budget's check between phases still holds."""
    owned = signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    if threading.current_thread() is not threading.main_thread() or owned:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise PhaseTimeout(f"ran past its limit of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Run:
    """What the phases share: the scale, the device, the models and policies, the results."""

    scale: Scale
    device: torch.device
    gpu_kind: str  # whose bounds the rates are compared with
    measured_kind: str  # what the written measurements say they were measured on
    out: Path | None  # where measurements are written (None: nowhere)
    work: Path
    deadline: float
    engine: str = "hf"  # the duel's rollout engine: hf, or vllm (colocated, as the trainer's)
    free_bytes: float | None = None  # the GPU's free memory before anything was built
    dims: ModelDims | None = None
    model_a: Any = None
    tokenizer: Any = None
    policies: dict[str, Policy] = field(default_factory=dict)
    checkpointing: bool = False  # whether the trained models report checkpointing on
    reader_prompt: int = 0  # the readers' max_prompt_tokens: template, problem, a draft's tail
    micro_batch: int = 1
    phases: dict[str, dict] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)

    @property
    def on_gpu(self) -> bool:
        """Whether the run measures a GPU."""
        return self.device.type == "cuda"


# ----------------------------------------------------------------------------- settings


def trainer_settings() -> dict[str, Any]:
    """What this run asks of the trainer's settings, where they exist: gradient checkpointing
    on; the precision left at its default (``master_dtype``)."""
    names = {f.name for f in dataclasses.fields(DuelSettings)}
    return {"gradient_checkpointing": True} if "gradient_checkpointing" in names else {}


def settings_report(s: RLSettings, model: Any = None) -> dict[str, Any]:
    """Which precision and checkpointing settings the trainer has and their values; given a
    model, whether it reports checkpointing on (what the trainer made of the setting)."""
    names = {f.name for f in dataclasses.fields(type(s))}
    out = {
        key: getattr(s, key) if key in names else "not a setting"
        for key in ("gradient_checkpointing", "master_dtype")
    }
    if model is not None:
        attr = next((a for a in CHECKPOINTING_ATTRS if hasattr(type(model), a)), None)
        out["model_reports_checkpointing"] = bool(attr and getattr(model, attr))
    return out


def precision(s: RLSettings, dtype: str) -> tuple[str, torch.dtype | None]:
    """The weights' dtype and the autocast dtype (None: none) as the trainer derives them."""
    return master_precision(s, dtype) if hasattr(s, "master_dtype") else (dtype, None)


# ----------------------------------------------------------------------------- planning


def model_dims(scale: Scale, name: str) -> ModelDims:
    """The dimensions built for candidate ``name``: its own, or the toy ones."""
    d = PUBLISHED[name]
    if scale.toy is None:
        return d
    toy = replace(d, **scale.toy, name=f"{d.name} (toy scale)")
    return toy.with_layers(toy.num_layers)


def planned_reader_prompt(scale: Scale) -> int:
    """The reader prompt's length as planned before the tokenizer counts the template."""
    return scale.new_tokens + scale.reader_allowance


def step_estimate(
    d: ModelDims, scale: Scale, mb: int, checkpointing: bool, master: Any, reader_prompt: int
) -> Any:
    """The planner's memory of one update micro-batch of ``mb`` reads (the longest rows)."""
    return estimate_step_memory(
        d,
        micro_batch=mb,
        prompt_tokens=reader_prompt,
        completion_tokens=scale.new_tokens,
        dtype=scale.dtype,
        master_dtype=master,
        gradient_checkpointing=checkpointing,
    )


def resident(step: Any) -> float:
    """What a trained model holds between its updates: weights and AdamW's moments."""
    c = step.components
    return c["weights"] + c.get("optimizer_states", 0.0)


def planned_bytes(
    d: ModelDims, scale: Scale, mb: int, checkpointing: bool, master: Any, reader_prompt: int
) -> dict[str, float]:
    """The planner's peak of each phase: decoding with model A alone; the duel's rollout with
    both models and their moments; the duel's update (one model's step, the other resident),
    reads of ``reader_prompt`` + new tokens being the longest rows."""
    step = step_estimate(d, scale, mb, checkpointing, master, reader_prompt)
    rows = scale.problems * scale.generations * scale.reads
    rollout = estimate_generation_memory(
        d,
        batch=rows,
        context=reader_prompt + scale.new_tokens,
        dtype=scale.dtype,
        include_weights=False,
    )
    decode = estimate_generation_memory(
        d,
        batch=max(scale.decode_batches),
        context=scale.decode_prompt + scale.decode_new,
        dtype=scale.dtype,
    )
    return {
        "decode": decode.total,
        "rollout": rollout.total + 2 * resident(step),
        "update": step.total + resident(step),
    }


def choose_model(scale: Scale, free: float | None, master: Any) -> tuple[ModelDims, dict]:
    """The first candidate whose plan fits ``free`` bytes at micro-batch 1 without
    checkpointing (the least a step can need whatever the trainer does); the last one if none
    does (its failure is then the measurement)."""
    plans = {}
    for name in scale.candidates:
        d = model_dims(scale, name)
        need = max(planned_bytes(d, scale, 1, False, master, planned_reader_prompt(scale)).values())
        plans[name] = need / GIB
        if free is None or need <= MEMORY_MARGIN * free:
            return d, {"planned_gib": plans, "free_gib": None if free is None else free / GIB}
    return d, {"planned_gib": plans, "free_gib": free / GIB, "fits": False}


def choose_micro_batch(run: Run, master: Any) -> int:
    """The largest micro-batch whose planned update fits, given whether checkpointing is on."""
    for mb in run.scale.micro_batches:
        plan = planned_bytes(run.dims, run.scale, mb, run.checkpointing, master, run.reader_prompt)
        need = max(plan.values())
        if run.free_bytes is None or need <= MEMORY_MARGIN * run.free_bytes:
            return mb
    return run.scale.micro_batches[-1]


# ----------------------------------------------------------------------------- the phases


def peak_bytes(run: Run) -> int | None:
    """The phase's peak of allocated GPU memory (None on a CPU: not measured there)."""
    return int(torch.cuda.max_memory_allocated()) if run.on_gpu else None


def sync(run: Run) -> None:
    """Wait for the GPU, so that a wall time covers the work."""
    if run.on_gpu:
        torch.cuda.synchronize()


def build(run: Run, seed: int) -> tuple[Any, Any]:
    """A random model of ``run.dims`` and its tokenizer, on the run's device."""
    s = RLSettings(**trainer_settings())
    weights, _ = precision(s, run.scale.dtype)
    return build_model_from_dims(
        run.dims, run.work / f"model-{seed}", seed=seed, dtype=weights, device=str(run.device)
    )


def phase_build(run: Run) -> dict:
    """Choose the model by the planner's memory against the free memory; build model A."""
    master = getattr(RLSettings(), "master_dtype", None)
    run.dims, choice = choose_model(run.scale, run.free_bytes, master)
    run.model_a, run.tokenizer = build(run, seed=0)
    sync(run)
    return {
        "model": run.dims.name,
        "params": param_count(run.dims),
        "layers": run.dims.num_layers,
        "vocab": run.dims.vocab_size,
        "dtype": run.scale.dtype,
        **choice,
    }


def fitted_prompt(engine: HFEngine, tokens: int) -> list[dict]:
    """A user message whose rendered prompt is about ``tokens`` tokens long."""
    chars = tokens
    text = PROMPT_TEXT * (1 + tokens // len(PROMPT_TEXT) * 4)
    for _ in range(PROMPT_FIT_ROUNDS):
        n = len(engine.encode([{"role": "user", "content": text[:chars]}]))
        if n == tokens:
            break
        chars = max(1, chars + tokens - n)
    return [{"role": "user", "content": text[:chars]}]


def decode_bound(run: Run, batch: int, prompt: int, new: int) -> dict[str, float]:
    """The planner's bound for this shape on ``run.gpu_kind``: tokens/s at efficiency 1, and
    the bytes a decode step reads at the mean context (weights once, every row's KV cache)."""
    kind = GPU_KINDS[run.gpu_kind]
    seconds = generation_seconds(
        run.dims,
        kind,
        sequences=batch,
        prompt=prompt,
        completion=new,
        concurrency=batch,
        dtype=run.scale.dtype,
        decode_eff=1.0,
        compute_eff=1.0,
    )
    b = dtype_bytes(run.scale.dtype)
    context = int(prompt + new / 2)
    read = param_count(run.dims) * b + kv_cache_bytes(run.dims, b, context, batch)
    return {"bound_tokens_per_s": batch * new / seconds, "bytes_per_decode_step": read}


def phase_decode(run: Run, batch: int) -> dict:
    """HFEngine sampling ``batch`` rows of one prompt: tokens/s against the bound; written."""
    if run.model_a is None:
        raise RuntimeError("model A was not built")
    scale = run.scale
    _, autocast = precision(RLSettings(**trainer_settings()), scale.dtype)
    engine = HFEngine(run.model_a, run.tokenizer, batch_size=batch, autocast_dtype=autocast)
    prompt = fitted_prompt(engine, scale.decode_prompt)
    prompt_tokens = len(engine.encode(prompt))
    engine.generate([prompt], n=batch, sampling=SamplingParams(max_new_tokens=WARMUP_TOKENS))
    sync(run)
    if run.on_gpu:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    out = engine.generate(
        [prompt], n=batch, sampling=SamplingParams(max_new_tokens=scale.decode_new, seed=1)
    )
    sync(run)
    seconds = time.perf_counter() - t0
    rows = out[0]
    tokens = sum(len(c.token_ids) for c in rows)
    rate = tokens / seconds
    bound = decode_bound(run, batch, prompt_tokens, scale.decode_new)
    planned = estimate_generation_memory(
        run.dims, batch=batch, context=prompt_tokens + scale.decode_new, dtype=scale.dtype
    )
    if run.out is not None:
        path = write_measurement(
            run.out,
            gpu_kind=run.measured_kind,
            dims=run.dims,
            engine="hf",
            dtype=scale.dtype,
            batch=batch,
            prompt_tokens=prompt_tokens,
            new_tokens=scale.decode_new,
            generation_tokens_per_s=rate,
        )
        run.written.append(str(path))
    return {
        "batch": batch,
        "prompt_tokens": prompt_tokens,
        "new_tokens": scale.decode_new,
        "seconds": seconds,
        "tokens": tokens,
        "rows_ended_early": sum(c.finish_reason != "length" for c in rows),
        "tokens_per_s": rate,
        **bound,
        "measured_over_bound": rate / bound["bound_tokens_per_s"],
        "planned_peak_gib": planned.total / GIB,
    }


def duel_settings(run: Run) -> DuelSettings:
    """The duel's settings at the run's shape (the trainer's defaults otherwise)."""
    s = run.scale
    return DuelSettings(
        problems_per_step=s.problems,
        num_generations=s.generations,
        num_reads=s.reads,
        max_new_tokens=s.new_tokens,
        micro_batch_size=run.micro_batch,
        learning_rate=LEARNING_RATE,
        **trainer_settings(),
    )


def make_policies(run: Run, s: DuelSettings, task: ParityTask, problems: list) -> None:
    """Policies A (model A) and B (a second model), made as the trainer makes them; their
    reader prompts capped at the longest bare reader prompt plus ``new_tokens``; each engine
    the run's (:func:`vllm_engine`, or the live model)."""
    _, autocast = precision(s, run.scale.dtype)
    model_b, tok_b = build(run, seed=1)
    rows = run.scale.problems * run.scale.generations * run.scale.reads
    counter = HFEngine(run.model_a, run.tokenizer, chat_template_kwargs=NO_THINKING)
    bare = max(len(counter.encode(task.reader_prompt(p, ""))) for p in problems)
    run.reader_prompt = bare + run.scale.new_tokens  # the draft's tail fills the rest
    for name, model, tok in (("A", run.model_a, run.tokenizer), ("B", model_b, tok_b)):
        live = HFEngine(
            model,
            tok,
            chat_template_kwargs=NO_THINKING,
            batch_size=rows,
            max_prompt_tokens=run.reader_prompt,
            autocast_dtype=autocast,
        )
        engine = (
            vllm_engine(run, name, model, tok, autocast, rows) if run.engine == "vllm" else live
        )
        run.policies[name] = make_policy(
            name, model, engine, s, live.pad_id, autocast_dtype=autocast
        )
    run.checkpointing = settings_report(s, run.model_a)["model_reports_checkpointing"]


def vllm_engine(run: Run, name: str, model: Any, tok: Any, autocast: Any, rows: int) -> Any:
    """Policy ``name``'s colocated vLLM engine as the trainer builds it
    (:func:`agon.engines.rollouts.rollout_engine`, on the part the one-GPU duel placement
    gives it), from dummy weights: the model folders hold no weights, the first sync sends the
    policy's."""
    row = {"model": str(run.work / f"model-{0 if name == 'A' else 1}")}
    row["chat_template_kwargs"] = NO_THINKING
    fam = {
        "model_a": row, "model_b": row, "dtype": run.scale.dtype,
        "max_prompt_tokens": run.reader_prompt,
    }  # fmt: skip
    options = RolloutOptions(
        backend="vllm",
        batch_size=rows,
        gpu_memory_utilization=VLLM_SHARE,
        llm_kwargs={"load_format": "dummy"},
    )
    part = place("duel", "vllm", 1).part(f"{name}.engine")
    return rollout_engine(options, fam, name, model, tok, autocast, part)


@contextlib.contextmanager
def device_peak(run: Run) -> Iterator[dict]:
    """The GPU's peak used memory over the block, every process's (the engines' too): its
    total less the least free memory read, every :data:`DEVICE_POLL_S` (None on a CPU)."""
    out: dict[str, float | None] = {"peak_bytes": None}
    if not run.on_gpu:
        yield out
        return
    least = [float(torch.cuda.mem_get_info()[0])]
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(DEVICE_POLL_S):
            least[0] = min(least[0], float(torch.cuda.mem_get_info()[0]))

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join()
        free, total = torch.cuda.mem_get_info()
        out["peak_bytes"] = float(total) - min(least[0], float(free))


def planned_gpu_bytes(run: Run, s: DuelSettings, micro_batch: int) -> float:
    """What ``agon plan`` puts on GPU 0 for this duel on one GPU at ``micro_batch``: both
    policies, their engines' shares (asleep through their updates), graphs, CUDA contexts."""
    rows = run.scale.problems * run.scale.generations * run.scale.reads
    shape = TrainShape(
        dtype=run.scale.dtype,
        master_dtype=getattr(s, "master_dtype", None),
        micro_batch=micro_batch,
        prompt=run.reader_prompt,
        completion=run.scale.new_tokens,
        gradient_checkpointing=run.checkpointing,
        reference_model=False,
        engine=run.engine,
        rollout_rows=rows,
        rollout_context=run.reader_prompt + run.scale.new_tokens,
        vllm_share=VLLM_SHARE,
        bf16_update=str(getattr(s, "bf16_update", None) or "plain"),
        engine_sleeps=True,
    )
    total = float(torch.cuda.mem_get_info()[1])
    where = place("duel", run.engine, 1)
    memory = train_memory({"A": run.dims, "B": run.dims}, shape, where, total, [])
    return memory.devices["GPU 0"].total


def fit_micro_batch(run: Run, s: DuelSettings) -> int:
    """With vLLM engines on the GPU: the largest micro-batch whose planned GPU (engines
    included) fits the GPU's memory, else the smallest."""
    total = float(torch.cuda.mem_get_info()[1])
    for mb in run.scale.micro_batches:
        if planned_gpu_bytes(run, s, mb) <= MEMORY_MARGIN * total:
            return mb
    return run.scale.micro_batches[-1]


def step_report(run: Run, row: dict, names: tuple[str, ...], roles: tuple[str, ...]) -> dict:
    """A step's times, token counts, lengths and update flags from its metrics row."""
    out: dict[str, Any] = {
        "rollout_s": row[mk.ROLLOUT_S],
        "update_s": row[mk.UPDATE_S],
        "tokens_generated": row[mk.TOKENS],
    }
    for n in names:
        for role in roles:
            length = row.get(mk.key(mk.ROLE_LENGTH, model=n, role=role))
            if length is not None:
                out[f"{n}/{role}/mean_length"] = length
                truncated = row[mk.key(mk.ROLE_TRUNCATED, model=n, role=role)]
                out[f"{n}/{role}/rows_ended_early_share"] = 1.0 - truncated
        for key in ("trained_tokens", "zero_advantage", "skipped", "loss"):
            if f"{n}/{key}" in row:
                out[f"{n}/{key}"] = row[f"{n}/{key}"]
    return out


def phase_duel(run: Run) -> dict:
    """Model B built, both policies made, one duel step: times, memory, its plan."""
    if run.model_a is None:
        raise RuntimeError("model A was not built")
    s = duel_settings(run)
    task = ParityTask()
    problems = (task.problems("train") * run.scale.problems)[: run.scale.problems]
    with device_peak(run) as gpu:
        t0 = time.perf_counter()
        make_policies(run, s, task, problems)
        built_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for policy in run.policies.values():  # the policy's weights into its engine (vLLM)
            policy.sync_engine()
        sync_s = time.perf_counter() - t0
        master = getattr(s, "master_dtype", None)
        vllm = run.engine == "vllm"
        run.micro_batch = fit_micro_batch(run, s) if vllm else choose_micro_batch(run, master)
        s = replace(s, micro_batch_size=run.micro_batch)
        row = duel.duel_step(task, run.policies, problems, s, step=0)
        sync(run)
    plan = planned_bytes(
        run.dims, run.scale, run.micro_batch, run.checkpointing, master, run.reader_prompt
    )
    cut = sum(row.get(mk.key(mk.DRAFTS_CUT, model=n), 0.0) for n in run.policies)
    out = {
        "engine": run.engine,
        "settings": settings_report(s, run.model_a),
        "micro_batch": run.micro_batch,
        "reader_max_prompt_tokens": run.reader_prompt,
        **step_report(run, row, ("A", "B"), ("drafter", "reader")),
        "drafts_cut": cut,
        "planned_rollout_peak_gib": plan["rollout"] / GIB,
        "planned_update_peak_gib": plan["update"] / GIB,
    }
    if run.engine == "vllm":
        planned, measured = planned_gpu_bytes(run, s, run.micro_batch), gpu["peak_bytes"]
        out |= {
            "engines_built_s": built_s,
            "first_sync_s": sync_s,
            "gpu_peak_gib": measured / GIB,
            "planned_gpu_gib": planned / GIB,
            "gpu_peak_within_plan": measured <= WITHIN_PLAN * planned,
        }
    return out


def phase_grpo(run: Run) -> dict:
    """One GRPO step of policy A alone (B resident): times, memory; its training rate written."""
    if "A" not in run.policies:
        raise RuntimeError("the duel phase made no policies")
    s = duel_settings(run)
    solo = RLSettings(**{f.name: getattr(s, f.name) for f in dataclasses.fields(RLSettings)})
    task = ParityTask()
    problems = (task.problems("train") * run.scale.problems)[: run.scale.problems]
    row = rl.grpo_step(task, {"A": run.policies["A"]}, problems, solo, step=1)
    sync(run)
    report = step_report(run, row, ("A",), ("drafter",))
    trained = row.get("A/trained_tokens", 0.0)
    rate = trained / row[mk.UPDATE_S] if row[mk.UPDATE_S] > 0 else None
    # the prompts as the engine renders them (a vLLM engine's process renders with the same
    # template; the live model's engine counts here)
    counter = HFEngine(run.policies["A"].model, run.tokenizer, chat_template_kwargs=NO_THINKING)
    prompt = sum(len(counter.encode(task.solve_prompt(p))) for p in problems) // len(problems)
    if run.out is not None and rate and not row.get("A/zero_advantage"):
        path = write_measurement(
            run.out,
            gpu_kind=run.measured_kind,
            dims=run.dims,
            engine="hf",
            dtype=run.scale.dtype,
            batch=len(problems) * run.scale.generations,
            prompt_tokens=prompt,
            new_tokens=run.scale.new_tokens,
            training_tokens_per_s=rate,
            gradient_checkpointing=run.checkpointing,
            micro_batch_size=run.micro_batch,
        )
        run.written.append(str(path))
    master = getattr(s, "master_dtype", None)
    step = estimate_step_memory(
        run.dims,
        micro_batch=run.micro_batch,
        prompt_tokens=prompt,
        completion_tokens=run.scale.new_tokens,
        dtype=run.scale.dtype,
        master_dtype=master,
        gradient_checkpointing=run.checkpointing,
    )
    return {
        **report,
        "prompt_tokens": prompt,
        "training_tokens_per_s": rate,
        "planned_update_peak_gib": (step.total + resident(step)) / GIB,
    }


def free_policies(run: Run) -> None:
    """Drop both policies and model A (their weights, moments and engines; a vLLM engine's
    process stopped)."""
    for policy in run.policies.values():
        close = getattr(policy.engine, "close", None)
        if close is not None:
            close()
    run.policies.clear()
    run.model_a = None
    gc.collect()
    if run.on_gpu:
        torch.cuda.empty_cache()


def phase_trl_grpo(run: Run) -> dict:
    """One step of TRL's GRPOTrainer on a fresh model A, configured and built as the GRPO
    baseline builds it (its micro-batches without signal skip their backward: the JSON's
    ``zero_advantage`` says whether this step's did)."""
    # lazy: trl (baselines.grpo.zero_advantage imports it): only this phase needs it, which
    # runs last and may be cut
    from baselines.grpo.zero_advantage import SkipZeroAdvantageGRPOTrainer

    if run.dims is None:
        raise RuntimeError("no model was chosen")
    free_policies(run)
    if run.on_gpu:
        torch.cuda.reset_peak_memory_stats()
    model, tok = build(run, seed=0)
    scale = run.scale
    s = GRPOSettings(
        steps=1,
        problems_per_step=scale.problems,
        num_generations=scale.generations,
        max_new_tokens=scale.new_tokens,
        micro_batch_size=max(run.micro_batch, scale.generations),  # whole groups
        learning_rate=LEARNING_RATE,
        checkpoint_every=0,
        **trainer_settings(),
    )
    bf16 = scale.dtype == "bfloat16" and run.on_gpu
    args = s.grpo_config(run.work / "trl", bf16=bf16, chat_template_kwargs=NO_THINKING)
    task = ParityTask()
    trainer = SkipZeroAdvantageGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_fn(task, task.problems("train"))],
        args=args,
        train_dataset=prompt_dataset(task),
        processing_class=tok,
    )
    t0 = time.perf_counter()
    trainer.train()
    sync(run)
    logged = trainer.state.log_history[0] if trainer.state.log_history else {}
    return {
        "step_s": time.perf_counter() - t0,
        "per_device_batch": args.per_device_train_batch_size,
        "gradient_accumulation": args.gradient_accumulation_steps,
        "gradient_checkpointing": args.gradient_checkpointing,
        "bf16": bf16,
        **{
            k: logged[k]
            for k in (
                "completions/mean_length",
                "completions/clipped_ratio",
                "step_time",
                "zero_advantage",
            )
            if k in logged
        },
    }


# ----------------------------------------------------------------------------- the run


def run_phase(run: Run, name: str, limit: float, fn: Callable[[Run], dict]) -> None:
    """Run one phase under its time limit (what is left of the budget if less), recording its
    result, or its error and the tail of its traceback, and its wall time and peak memory."""
    left = run.deadline - time.monotonic()
    if left < MIN_PHASE_S:
        run.phases[name] = {"ok": False, "skipped": f"{left:.0f} s of the budget left"}
        return
    print(f"[paper_scale] {name} (limit {min(limit, left):.0f} s) ...", file=sys.stderr, flush=True)
    gc.collect()
    if run.on_gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    try:
        # stdout is the JSON summary's: what the libraries print (TRL's logs) goes to stderr
        with time_limit(min(limit, left)), contextlib.redirect_stdout(sys.stderr):
            result = {"ok": True, **fn(run)}
    except Exception as err:  # one phase's failure (OOM, timeout, a bug) must not end the run
        result = {
            "ok": False,
            "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc()[-TRACEBACK_CHARS:],
        }
    result["wall_s"] = time.perf_counter() - t0
    peak = peak_bytes(run)
    result["peak_gib"] = None if peak is None else peak / GIB
    run.phases[name] = result
    print(f"[paper_scale] {name}: {'ok' if result['ok'] else result.get('error')}", file=sys.stderr)


def planner_reads_back(run: Run) -> dict | None:
    """What the planner now derives from the written measurements for this model."""
    if run.out is None or not run.written or run.dims is None:
        return None
    try:
        eff = efficiency(run.measured_kind, "hf", run.dims, read_measurements(run.out))
    except PlanError as err:  # e.g. a kind without nominal bounds and no training measurement
        return {"error": str(err)}
    return {
        "decode_efficiency": eff.decode,
        "train_efficiency": eff.train,
        "generation": eff.generation_label,
        "training": eff.training_label,
    }


def duel_engine(asked: str, on_gpu: bool) -> str:
    """The duel's rollout engine: ``hf`` or ``vllm`` as asked, ``auto`` vLLM on a GPU where it
    is installed; vLLM asked for without a GPU or without vLLM is an error."""
    installed = importlib.util.find_spec("vllm") is not None
    if asked == "vllm" and not (on_gpu and installed):
        raise ValueError("--engine vllm needs a GPU and vLLM (pip install 'agon[gpu]')")
    if asked == "auto":
        return "vllm" if on_gpu and installed else "hf"
    return asked


def measure(scale: Scale, gpu_kind: str, out: Path | None, engine: str = "auto") -> dict:
    """Every phase at ``scale``; the JSON summary."""
    device = torch.device("cuda" if torch.cuda.is_available() and scale.toy is None else "cpu")
    with tempfile.TemporaryDirectory() as work:
        run = Run(
            scale=scale,
            device=device,
            gpu_kind=gpu_kind,
            measured_kind=gpu_kind if device.type == "cuda" else "cpu",
            out=out,
            work=Path(work),
            deadline=time.monotonic() + scale.budget_s,
            engine=duel_engine(engine, device.type == "cuda"),
            free_bytes=float(torch.cuda.mem_get_info()[0]) if device.type == "cuda" else None,
        )
        run_phase(run, "build", scale.limits["build"], phase_build)
        for batch in scale.decode_batches:
            run_phase(
                run,
                f"decode_b{batch}",
                scale.limits["decode"],
                lambda r, b=batch: phase_decode(r, b),
            )
        run_phase(run, "duel", scale.limits["duel"], phase_duel)
        run_phase(run, "grpo", scale.limits["grpo"], phase_grpo)
        run_phase(run, "trl_grpo", scale.limits["trl_grpo"], phase_trl_grpo)
        free_policies(run)
        name = torch.cuda.get_device_name() if run.on_gpu else "cpu"
        return {
            "mode": "gpu" if run.on_gpu else "smoke",
            "device": name,
            "gpu_kind": gpu_kind,
            "kind_matches_device": not run.on_gpu or names_kind(gpu_kind, name),
            "measured_kind": run.measured_kind,
            "duel_engine": run.engine,
            "trainer_settings": settings_report(DuelSettings(**trainer_settings())),
            "torch": torch.__version__,
            "phases": run.phases,
            "written": run.written,
            "planner_reads_back": planner_reads_back(run),
            "ok": all(p["ok"] for p in run.phases.values()),
        }


def names_kind(kind: str, device_name: str) -> bool:
    """Whether a GPU called ``device_name`` ("NVIDIA H200") is of ``kind`` (``h200``)."""
    return kind.split("-")[0] in device_name.lower()


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench.bench_paper_scale", description=__doc__)
    p.add_argument("--smoke", action="store_true", help="CPU, toy scale: the same code path")
    gpus = sorted(k for k, v in GPU_KINDS.items() if v.bandwidth)
    p.add_argument("--gpu-kind", default=DEFAULT_KIND, choices=gpus, help="whose bounds apply")
    p.add_argument(
        "--engine",
        default="auto",
        choices=ENGINES,
        help="the duel's rollout engine (auto: the colocated vLLM on a GPU where it is installed)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where measurements go (a GPU run: bench/throughput; a smoke run: nowhere)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run, print the JSON summary; 0 when every phase passed, 1 when one failed, 2 when the
    run was refused (no GPU, a GPU not of the kind named, or a smoke run asked to write into
    bench/throughput)."""
    args = parse(argv)
    out = args.out
    if not args.smoke:
        if not torch.cuda.is_available():
            refusal = "no GPU: a GPU measurement needs one (--smoke runs on a CPU)"
            print(json.dumps({"ok": False, "refused": refusal}))
            return 2
        if not names_kind(args.gpu_kind, torch.cuda.get_device_name()):
            refusal = (
                f"this GPU ({torch.cuda.get_device_name()}) is not of kind {args.gpu_kind!r}: "
                "its measurements would be filed under the wrong kind; pass --gpu-kind"
            )
            print(json.dumps({"ok": False, "refused": refusal}))
            return 2
        out = MEASUREMENTS_DIR if out is None else out
    elif out is not None and out.resolve() == MEASUREMENTS_DIR.resolve():
        print(
            json.dumps({"ok": False, "refused": "a smoke run never writes into bench/throughput"})
        )
        return 2
    try:
        summary = measure(SMOKE if args.smoke else PAPER, args.gpu_kind, out, args.engine)
    except ValueError as err:  # an engine this machine cannot run
        print(json.dumps({"ok": False, "refused": str(err)}))
        return 2
    print(json.dumps(summary, indent=2, default=str))
    return 0 if summary["ok"] else 1


def flat_metrics(summary: dict) -> dict[str, float]:
    """The summary's headline numbers as ``paper_scale.<phase>.<key>`` (``python -m bench``'s
    table and bench/results.json; the JSON summary has the rest)."""
    out = {}
    for phase, result in summary["phases"].items():
        for key in HEADLINE:
            value = result.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"paper_scale.{phase}.{key}"] = float(value)
    return out


def run() -> dict[str, float]:
    """``python -m bench``: the GPU run when there is a GPU (writing bench/throughput when the
    GPU is of a known kind), else the smoke run (writing nothing)."""
    gpu = torch.cuda.is_available()
    name = torch.cuda.get_device_name() if gpu else ""
    known = [k for k, v in GPU_KINDS.items() if v.bandwidth and names_kind(k, name)]
    kind = known[0] if known else DEFAULT_KIND
    out = MEASUREMENTS_DIR if gpu and known else None
    summary = measure(PAPER if gpu else SMOKE, kind, out)
    if not summary["ok"]:
        raise RuntimeError(json.dumps({k: v for k, v in summary["phases"].items() if not v["ok"]}))
    return flat_metrics(summary)


if __name__ == "__main__":
    sys.exit(main())
