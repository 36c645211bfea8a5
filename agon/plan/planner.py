# long: a job's plan top to bottom (work, placement, memory, time, restarts, flags) and its context
"""The plan of a config: per job its tokens, FLOPs, memory, hours and flags; totals per table.

For each job of the DAG (:mod:`agon.plan.jobs`): its work (:mod:`agon.plan.workload`), its
parts placed where the trainer puts them (:mod:`agon.engines.placement`), their memory
(:mod:`agon.plan.memory`) and time. Generation phases are timed on their engine (vLLM keeps
what its share's KV room holds in flight, transformers its batch), training-side work at the
FLOP bound (:mod:`agon.plan.hardware`); phases add up. A job longer than its runtime completes
in chunks and pays for its restarts (:func:`agon.plan.jobs.chunks`). A job *holds* its
``resources`` GPUs (and a server's GPU each) for its wall time and *uses* those its placement
puts something on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import agon.plan.hardware as hw
import agon.plan.jobs as dag
import agon.plan.memory as mm
import agon.plan.workload as wl
from agon.config import ablation_config
from agon.engines.placement import Placement, place, place_eval
from agon.evaluation.from_config import EVAL_VLLM_SHARE
from agon.methods import BUDGET_REFERENCE, COLUMNS
from agon.plan.dims import (
    ModelDims,
    PlanError,
    forward_flops,
    generation_flops,
    kv_cache_bytes,
    training_flops,
)
from agon.plan.published import dims_from_config, load_dims
from agon.training.settings import DuelSettings, RLSettings, TrainSettings

SIGNIFICANT_BITS = {"bfloat16": 8, "float16": 11}  # a 16-bit float's significand, implicit bit in
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_MINUTE = 60.0  # resources' runtime is in minutes
BYTES_PER_MB = 1e6  # Snakemake's mem_mb is in megabytes (10^6 bytes)
PRICED = ("train", "evaluate", "ablation_train", "ablation_eval")
EVALS = ("evaluate", "ablation_eval")
RESTORED = ("weights", "optimizer_states", "kahan_buffer")  # what a checkpoint gives back


def precision_note(shape: mm.TrainShape, learning_rate: float) -> str | None:
    """Where pure 16-bit weights lose AdamW's steps (None where masters, weights or
    ``train.bf16_update`` keep them). A step of about lr moves a weight in [2^e, 2^(e+1)) with a
    b-bit significand only above half its last place, 2^(e-b): every weight below 2^b x lr
    moves, none from 2^(b+1) x lr up (in bfloat16 at lr 1e-6: none above 5.1e-4)."""
    bits = SIGNIFICANT_BITS.get(shape.dtype)
    if shape.master_dtype or bits is None or getattr(shape, "bf16_update", "plain") != "plain":
        return None
    never, always = 2 ** (bits + 1) * learning_rate, 2**bits * learning_rate
    return (
        f"pure {shape.dtype} weights at lr {learning_rate:g}: AdamW's early steps "
        f"(about the learning rate) round away on every weight larger than {never:.2g} and move "
        f"only those below {always:.2g} for sure ({bits}-bit significand); "
        "train.master_dtype: float32 or train.bf16_update: kahan | stochastic_rounding keeps "
        "every step"
    )


@dataclass
class JobPlan:
    """One job's plan."""

    job: dag.Job
    resources: dict[str, int]
    tokens_generated: float = 0.0  # the policies' samples (rollouts, evaluation answers)
    tokens_helpers: float = 0.0  # probes' and teachers' generated tokens, counted apart
    tokens_trained: float = 0.0
    flops_generation: float = 0.0
    flops_training: float = 0.0
    memory: mm.Memory | None = None
    seconds: float | None = 0.0
    gpus_held: int = 0  # the resources row's GPUs, and a server's GPU each
    gpus_used: int = 0  # those the placement puts something on
    lengths: list[str] = field(default_factory=list)
    throughput: list[str] = field(default_factory=list)
    assumed: bool = False
    concurrency: dict[str, float] = field(default_factory=dict)  # phase -> sequences in flight
    kv_room: dict[str, float] = field(default_factory=dict)  # engine -> bytes of KV room
    chunks: dag.Chunks | None = None
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # said once for the plan
    steps: dict[str, float] = field(default_factory=dict)
    phases: list[dict] = field(default_factory=list)

    @property
    def gpu_hours(self) -> float:
        return (self.seconds or 0.0) / SECONDS_PER_HOUR * self.gpus_held

    @property
    def gpu_hours_used(self) -> float:
        return (self.seconds or 0.0) / SECONDS_PER_HOUR * self.gpus_used


class PlanContext:
    """What the jobs of one plan share: config, GPU kind, lengths, measurements, dims."""

    def __init__(
        self,
        config: dict,
        gpu: str,
        lengths: wl.MeasuredLengths,
        measurements_dir: str | Path | None,
        fsdp: bool = False,
    ) -> None:
        self.config = config
        self.kind = hw.get_gpu_kind(gpu)
        self.lengths = lengths
        self.measurements = hw.read_measurements(measurements_dir)
        self.families = {f["name"]: f for f in config["families"]}
        self.tasks = {t["name"]: t for t in config["tasks"]}
        self.references: dict[tuple[str, str], dict] = {}
        self.fsdp = fsdp
        self.retries = dag.profile_retries()

    @cache  # noqa: B019 (one context per plan call; the cache dies with it)
    def dims(self, family: str, key: str, model: str | None = None) -> ModelDims:
        """Dims of a family's model ``key`` (A, B or teacher), or of ``model``, a helper's model
        the config names (agon.registry.Helper's ``model_key``)."""
        fam = self.families[family]
        row: dict = {}
        if model:
            pass  # named by the config
        elif key in ("A", "B"):
            row = fam[f"model_{key.lower()}"]
            model = row["model"]
        elif key == "teacher":
            row = fam.get("teacher") or {}
            model = row.get("model")
            if not model:
                raise PlanError(
                    f"families (name {family!r}): a method's helper runs the family's teacher "
                    "(agon.registry.Helper), and the family has no teacher row"
                )
        else:
            raise PlanError(f"families (name {family!r}): no model {key!r} (A, B or teacher)")
        built = (Path(model) / "config.json").is_file()
        if fam["toy"] and not built:
            return self.toy_dims(model)
        if "source" in row and not built:
            raise PlanError(
                f"model {model!r} is built from its GGUF checkpoint (the row's source) by the "
                "prepare_model rule; prepare it first (agon model prepare), then plan"
            )
        return load_dims(model, revision=row.get("revision"))

    def toy_dims(self, name: str) -> ModelDims:
        """A toy model not built yet: its shape from the config's ``toy`` section."""
        toy = self.config["toy"]
        m = dict(toy["model"])
        head_dim = m["hidden_size"] // m["num_attention_heads"]
        return dims_from_config(
            {**m, "model_type": "qwen3", "vocab_size": toy["tokenizer"]["vocab_size"],
             "head_dim": head_dim, "tie_word_embeddings": True, "dtype": "float32"},
            name=name,
            source="the config's toy.model section (built by agon toy pretrain)",
        )  # fmt: skip

    @cache  # noqa: B019 (as above: one context per plan call)
    def settings(self, family: str, runs: str, variant: str | None) -> TrainSettings:
        """The settings a training run of ``family`` reads its ``train.*`` and ``agon.*`` knobs
        from, made once per (family, how it runs, ablation variant: its ``agon`` changes; None:
        the config's own)."""
        config = self.config if variant is None else ablation_config(self.config, variant)
        return wl.run_settings(config, self.families[family], runs)

    @cache  # noqa: B019 (as above: one context per plan call)
    def efficiency(self, kind: str, engine: str, dims: ModelDims) -> hw.Efficiency:
        return hw.efficiency(kind, engine, dims, self.measurements)


@dataclass
class Plan:
    """Every job's plan, which tables each belongs to, and what the plan assumed."""

    gpu: str
    target: str
    jobs: list[JobPlan]
    tables: dict[str, set[str]]  # the target's tables -> outputs of their jobs
    lengths_from: str | None
    fsdp: bool = False

    def totals(self, table: str | None = None) -> dict[str, float]:
        """Sums over ``table``'s jobs (None: every job of the plan once)."""
        keep = [j for j in self.jobs if table is None or j.job.output in self.tables[table]]
        mem = [b.total for j in keep if j.memory and j.gpus_held for b in j.memory.devices.values()]
        return {
            "jobs": len(keep),
            "gpu_hours": sum(j.gpu_hours for j in keep),
            "gpu_hours_used": sum(j.gpu_hours_used for j in keep),
            "tokens_generated": sum(j.tokens_generated for j in keep),
            "tokens_helpers": sum(j.tokens_helpers for j in keep),
            "tokens_trained": sum(j.tokens_trained for j in keep),
            "flops_generation": sum(j.flops_generation for j in keep),
            "flops_training": sum(j.flops_training for j in keep),
            "peak_memory_per_gpu": max(mem, default=0.0),
            "flagged": sum(1 for j in keep if j.flags),
            "chunked": sum(1 for j in keep if j.chunks),
            "assumed_throughput": sum(1 for j in keep if j.assumed),
            "untimed": sum(1 for j in keep if j.seconds is None),
        }


# ----------------------------------------------------------------------------- a job's work


def _reference(ctx: PlanContext, e: wl.Expect) -> dict:
    """The ``agon`` run's per-model spend on (family, task): what budget-matched runs match."""
    key = (e.family, e.task["name"])
    if key not in ctx.references:
        s = ctx.settings(e.family, "duel", None)
        ref = wl.duel_workload(ctx.config, s, e, BUDGET_REFERENCE)
        ctx.references[key] = ref.spend
    return ctx.references[key]


def _runs(job: dag.Job) -> str:
    """How a training job runs (agon.registry.RUNS); an ablation variant is a duel."""
    return "duel" if job.rule == "ablation_train" else wl.method_row(job.method).runs


def _settings(ctx: PlanContext, job: dag.Job) -> TrainSettings:
    """A training job's settings (an ablation variant's with its ``agon`` changes)."""
    variant = job.variant if job.rule == "ablation_train" else None
    return ctx.settings(job.family, _runs(job), variant)


def _workload(ctx: PlanContext, job: dag.Job) -> wl.Workload:
    e = wl.expect(ctx.families[job.family], ctx.tasks[job.task], ctx.lengths)
    if job.rule in EVALS:
        return wl.eval_workload(ctx.config, e, job.system)
    s = _settings(ctx, job)
    if isinstance(s, DuelSettings):
        return wl.duel_workload(ctx.config, s, e, job.method)
    ref = _reference(ctx, e) if s.budget_match != "steps" else None
    return wl.solo_workload(ctx.config, s, e, job.method, ref)


def _models(ctx: PlanContext, job: dag.Job, w: wl.Workload) -> dict[str, ModelDims]:
    keys = {g.model for g in w.generations} | {t.model for t in w.trainings}
    keys |= {s.model for s in w.scorings} | {"A", "B"}
    # sorted: the first unknown model is the one a "not planned" flag names, on every run
    return {k: ctx.dims(job.family, k, w.models.get(k)) for k in sorted(keys)}


def _train_shape(ctx: PlanContext, job: dag.Job, fam: dict, w: wl.Workload) -> mm.TrainShape:
    """What a training job's memory depends on (for GRPO, TRL's micro-batch: the whole step
    when micro_batch_size holds no whole group)."""
    s, grpo = _settings(ctx, job), ctx.config.get(wl.TRL_SECTION) or {}
    runs = _runs(job)
    trl = runs == "trl"
    mb = s.micro_batch_size
    if trl:  # baselines.grpo's batch_shape: divides the step's completions, holds whole groups
        total, g = s.problems_per_step * s.num_generations, s.num_generations
        mb = min(total, mb)
        while mb >= g and (total % mb or mb % g):
            mb -= 1
        mb = mb if mb >= g else total
    longest = max((t.prompt for t in w.trainings), default=0.0)
    extra = grpo.get("extra") or {}
    share = extra.get("vllm_gpu_memory_utilization", wl.TRL_VLLM_SHARE)
    # the in-house trainers' engines sleep through their policy's update (Policy.backward);
    # TRL's where its GRPOConfig asks (vllm_enable_sleep_mode, off by default)
    sleeps = bool(extra.get("vllm_enable_sleep_mode", False)) if trl else True
    return mm.TrainShape(
        dtype=fam["dtype"],
        master_dtype=s.master_dtype,
        micro_batch=int(mb),
        prompt=int(longest),
        completion=fam["max_new_tokens"],
        gradient_checkpointing=bool(s.gradient_checkpointing),
        reference_model=s.beta > 0,
        engine=wl.rollout(ctx.config, s, runs)[0],
        rollout_rows=int(max((g.rows for g in w.generations), default=1)),
        rollout_context=int(longest + fam["max_new_tokens"]),
        vllm_share=float(share if trl else s.vllm_gpu_memory_utilization),
        bf16_update=str(s.bf16_update or "plain"),
        engine_sleeps=sleeps,
    )


def _placement(
    ctx: PlanContext, job: dag.Job, w: wl.Workload, shape: mm.TrainShape | None
) -> Placement:
    """Where the job's parts sit, as the trainer or evaluation builds them."""
    fam, gpus = ctx.families[job.family], dag.resources(ctx.config, job)["gpus"]
    if shape is None:
        col = COLUMNS[job.system]
        same = not col.train and fam["model_a"]["model"] == fam["model_b"]["model"]
        used = sorted({g.model for g in w.generations})
        return place_eval(used[:1] if same else used, ctx.config["eval"].get("backend", "hf"), gpus)
    runs, grpo, s = _runs(job), ctx.config.get(wl.TRL_SECTION) or {}, _settings(ctx, job)
    if isinstance(s, RLSettings):  # an in-house trainer: agon.servers
        servers = s.servers
    else:  # TRL's GRPOTrainer: its own server, if any
        url = grpo.get("vllm_server_base_url") if grpo.get("vllm_mode") == "server" else None
        servers = {"A": url, "B": url}
    processes = gpus if (ctx.fsdp and gpus >= 2) else 1
    return place(
        runs, shape.engine, gpus, servers=servers, processes=processes,
        sharded=processes > 1, helpers=bool(w.residents),
    )  # fmt: skip


def _memory(
    ctx: PlanContext,
    job: dag.Job,
    w: wl.Workload,
    models: dict[str, ModelDims],
    shape: mm.TrainShape | None,
) -> mm.Memory:
    """The job's memory under its placement, the workload's helpers included."""
    fam = ctx.families[job.family]
    where = _placement(ctx, job, w, shape)
    cap = ctx.kind.memory_bytes if where.gpus else None
    if shape is None:
        return mm.eval_memory(
            models, where, w.generations, fam["dtype"], fam["max_new_tokens"], cap, EVAL_VLLM_SHARE
        )
    helpers = [
        mm.helper_memory(models[r.model], fam["dtype"], r.rows, r.context, r.generates)
        for r in w.residents
    ]
    extra = None
    for t in w.logits:
        b = mm.logits_transient(t.name, t.tokens, t.vocab_chunk)
        extra = b if extra is None else extra.plus(b)
    return mm.train_memory(models, shape, where, cap, helpers, extra)


# ----------------------------------------------------------------------------- its time


def price(
    ctx: PlanContext,
    job: dag.Job,
    w: wl.Workload,
    models: dict[str, ModelDims],
    p: JobPlan,
    shape: mm.TrainShape | None,
) -> None:
    """Tokens, FLOPs and seconds of the job's phases into ``p``."""
    dtype = ctx.families[job.family]["dtype"]
    device = ctx.kind.name if p.resources["gpus"] else "cpu"
    kind = ctx.kind if device != "cpu" else hw.get_gpu_kind("cpu")
    seconds: float | None = 0.0
    # models trained at once in processes of their own (TRL's GRPO on two GPUs): each model's
    # work adds up on its own, and the job takes its slower model's time
    apart = p.memory is not None and p.memory.placement.at_once
    per_model: dict[str, float] = {}
    for g in w.generations:
        d = models[g.model]
        flops = g.sequences * generation_flops(d, int(g.prompt), int(g.completion))
        p.flops_generation += flops
        if g.helper:
            p.tokens_helpers += g.sequences * g.completion
        else:
            p.tokens_generated += g.sequences * g.completion
        p.lengths.append(f"{g.what}: {g.completion:.0f} tokens ({g.source})")
        rows = float(g.rows)
        b = mm.dtype_bytes(dtype, d.checkpoint_dtype)
        room = kv_cache_bytes(d, b, int(g.prompt + g.completion), int(rows))
        if g.engine == "vllm" and p.resources["gpus"]:
            share = shape.vllm_share if shape else EVAL_VLLM_SHARE
            rows, room = hw.vllm_concurrency(
                d, share, ctx.kind.memory_bytes or 0.0, dtype, g.prompt, g.completion
            )
            if not rows and not ctx.kind.memory_bytes:
                p.flags.append(f"{g.what}: vLLM runs on a GPU; {ctx.kind.name} has no GPU memory")
                rows = 1.0
            elif not rows:
                longest = int(g.prompt + g.completion)
                cap = ctx.kind.memory_bytes / hw.GIB
                p.flags.append(
                    f"{g.what}: vLLM's share ({share:g} x {cap:.1f} GiB) "
                    f"leaves {room / hw.GIB:.1f} GiB for KV cache, under one {longest}-token "
                    "sequence: raise vllm_gpu_memory_utilization or use a smaller model"
                )
                rows = 1.0
        if not g.helper:
            p.concurrency[g.what] = rows
            p.kv_room[g.model] = max(p.kv_room.get(g.model, 0.0), room)
        if (eff := _efficiency(ctx, p, device, g.engine, d)) is None:
            seconds = None
            continue
        s = hw.generation_seconds(
            d, kind, sequences=g.sequences, prompt=g.prompt, completion=g.completion,
            concurrency=rows, dtype=dtype, decode_eff=eff.decode, compute_eff=eff.compute,
        )  # fmt: skip
        seconds = None if seconds is None else seconds + s
        per_model[g.model] = per_model.get(g.model, 0.0) + s
        _phase(p, g.what, "generate", flops, s, eff.generation_label)
    gc = shape.gradient_checkpointing if shape else False
    engine = shape.engine if shape else "hf"
    work = []  # training-side (what, dims, FLOPs): updates, then no-grad forwards
    for t in w.trainings:  # only a training job's: its settings give the KL and iterations
        ts = _settings(ctx, job)
        f = training_flops(
            models[t.model], int(t.prompt), int(t.completion), gradient_checkpointing=gc,
            reference_model=ts.beta > 0, num_iterations=ts.num_iterations,
        )["total"] * t.sequences  # fmt: skip
        p.tokens_trained += t.sequences * t.completion
        work.append((t.what, t.model, models[t.model], f))
    for sc in w.scorings:
        d = models[sc.model]
        f = sc.sequences * forward_flops(d, int(sc.prompt), int(sc.completion), int(sc.completion))
        work.append((sc.what, sc.model, d, f))
    for what, model, d, f in work:
        p.flops_training += f
        if (eff := _efficiency(ctx, p, device, engine, d)) is None:
            seconds = None
            continue
        s = hw.training_seconds(f, kind, eff.train)
        seconds = None if seconds is None else seconds + s
        per_model[model] = per_model.get(model, 0.0) + s
        _phase(p, what, "train", f, s, eff.training_label)
    p.seconds = max(per_model.values()) if apart and seconds is not None else seconds


def _efficiency(ctx: PlanContext, p: JobPlan, device: str, engine: str, d: ModelDims):
    """The efficiencies of a phase, or None (said in ``p``'s notes) where none can be had: no
    measurement for a kind without bounds (the CPU)."""
    try:
        return ctx.efficiency(device, engine, d)
    except PlanError as err:
        p.notes.append(f"no time estimate: {err}")
        return None


def _phase(p: JobPlan, what: str, kind: str, flops: float, seconds: float, label: str) -> None:
    p.throughput.append(f"{what}: {label}")
    p.assumed |= hw.ASSUMED in label
    p.phases.append({"phase": what, "kind": kind, "flops": flops, "seconds": seconds})


def _restart_seconds(p: JobPlan, models: dict[str, ModelDims], dtype: str) -> float:
    """A restart: a process start, its checkpoint and models read back, and each vLLM engine's
    warm-up (assumed constants: agon.plan.jobs)."""
    loaded = vllm = 0.0
    for part, held in p.memory.placed:
        comps = [c for b in held for c in b.components.items()]
        if part.kind in ("policy", "optimizer"):
            loaded += sum(v for k, v in comps if k in RESTORED)
        elif part.kind in ("engine", "helpers") and part.engine != "live":
            d = models.get(part.model)
            if d is not None:
                loaded += mm.weight_bytes(d, dtype)
            loaded += sum(v for k, v in comps if k == "helper_weights")
            vllm += part.engine == "vllm"
    return (
        dag.ASSUMED_START_S
        + loaded / dag.ASSUMED_LOAD_BYTES_PER_S
        + vllm * dag.ASSUMED_VLLM_WARMUP_S
    )


def _complete(ctx: PlanContext, p: JobPlan, w: wl.Workload, models: dict[str, ModelDims]) -> None:
    """A job longer than its runtime row: how it completes, restarts and redone work added."""
    limit = p.resources["runtime"] * SECONDS_PER_MINUTE
    if not p.seconds or p.seconds <= limit or p.memory is None:
        return
    if p.job.rule in EVALS:
        samples = max((g.sequences for g in w.generations), default=1.0)
        interval = p.seconds * ctx.config["eval"]["batch_size"] / samples
    else:
        every = _settings(ctx, p.job).checkpoint_every
        one_by_one = _runs(p.job) == "trl" and not p.memory.placement.at_once  # A, then B
        steps = sum(p.steps.values()) if one_by_one else max(p.steps.values())
        interval = p.seconds / steps * every if every else math.inf
    restart = _restart_seconds(p, models, ctx.families[p.job.family]["dtype"])
    p.chunks = dag.chunks(p.seconds, limit, interval, restart)
    p.seconds += p.chunks.extra


# ----------------------------------------------------------------------------- its flags


def check(ctx: PlanContext, p: JobPlan) -> None:
    """Flags: memory over a GPU or what the job's resources give, time over its runtime (and
    how it completes), risks."""
    res, mem, row = p.resources, p.memory, p.job.resources_row
    cap = ctx.kind.memory_bytes
    if mem is not None and res["gpus"] and cap:
        for name, b in mem.devices.items():
            if b.total > cap:
                top = sorted(b.components.items(), key=lambda kv: -kv[1])[:3]
                parts = ", ".join(f"{k} {v / hw.GIB:.1f}" for k, v in top)
                p.flags.append(
                    f"memory: {name} holds {b.total / hw.GIB:.1f} GiB > {ctx.kind.name}'s "
                    f"{cap / hw.GIB:.1f} GiB ({mem.placement.how}; largest: {parts} GiB)"
                )
    if mem is not None and mem.host > res["mem_mb"] * BYTES_PER_MB:
        p.flags.append(
            f"host memory: {mem.host / hw.GIB:.1f} GiB > resources.{row}.mem_mb {res['mem_mb']} MB"
        )
    c = p.chunks
    if c is not None:
        why = " (assumed throughput)" if p.assumed else ""
        hours = f"~{p.seconds / SECONDS_PER_HOUR:.1f} h{why} > resources.{row}.runtime "
        hours += f"{res['runtime']} min"
        if not c.count:
            p.flags.append(
                f"runtime: {hours}, and it never completes: a checkpoint every "
                f"{c.interval / SECONDS_PER_HOUR:.1f} h (train.checkpoint_every) leaves no "
                f"checkpoint in a {res['runtime']}-minute run after its "
                f"{c.restart / 60:.0f}-minute restart; checkpoint more often or raise the runtime"
            )
        else:
            said = (
                f"runtime: {hours}: completes in {c.count} runs ({c.count - 1} restarts of "
                f"~{c.restart / 60:.0f} min each, loading and warming up: assumed; "
                f"{c.redone / SECONDS_PER_HOUR:.1f} h redone since the last checkpoints), "
                "priced in its hours"
            )
            if ctx.retries is None or c.count - 1 > ctx.retries:
                have = "no profiles/slurm" if ctx.retries is None else f"retries: {ctx.retries}"
                p.flags.append(
                    f"{said}; the SLURM profile's {have}: run with --retries {c.count - 1}"
                )
            else:
                p.notes.append(said)
    p.flags += [n.removeprefix("risk: ") for n in p.notes if n.startswith("risk: ")]


# ----------------------------------------------------------------------------- the plan


def _job_plan(ctx: PlanContext, job: dag.Job) -> JobPlan:
    """One job's plan: its work, placement, memory, price, how it completes and its flags."""
    p = JobPlan(job, dag.resources(ctx.config, job))
    if job.rule not in PRICED:
        p.notes.append("no model compute planned (data, toy pretraining, reports: CPU minutes)")
        return p
    w = _workload(ctx, job)
    try:
        models = _models(ctx, job, w)
    except PlanError as err:  # a model whose dims are unknown: this job only, said plainly
        p.seconds = None
        p.flags.append(f"not planned: {err}")
        return p
    fam = ctx.families[job.family]
    shape = None if job.rule in EVALS else _train_shape(ctx, job, fam, w)
    p.notes += w.notes
    if shape is not None and (note := precision_note(shape, _settings(ctx, job).learning_rate)):
        p.warnings.append(note)
    p.steps = dict(w.steps)
    p.memory = _memory(ctx, job, w, models, shape)
    if p.resources["gpus"]:
        where = p.memory.placement
        p.gpus_held = p.resources["gpus"] + where.server_gpus
        p.gpus_used = len(where.used) + where.server_gpus
    price(ctx, job, w, models, p, shape)
    if (ranks := p.memory.placement.processes) > 1 and p.seconds:  # each rank: 1/ranks of a step
        p.seconds /= ranks
        p.notes.append(f"{ranks} ranks share each step's problems (communication not priced)")
    _complete(ctx, p, w, models)
    check(ctx, p)
    return p


def plan(
    config: dict,
    target: str = "all",
    gpu: str = "h200",
    lengths_from: str | Path | None = None,
    measurements_dir: str | Path | None = None,
    fsdp: bool = False,
) -> Plan:
    """The plan of a validated ``config`` for ``target`` on GPU kind ``gpu`` (see the module
    docstring); ``lengths_from``: an out_dir whose runs give measured lengths; ``fsdp``: price
    the training jobs as launched by accelerate with FSDP2, one process per GPU of their row."""
    lengths = wl.read_lengths(lengths_from) if lengths_from else wl.MeasuredLengths()
    ctx = PlanContext(config, gpu, lengths, measurements_dir, fsdp)
    jobs = dag.jobs_for(config, target)
    name = dag.target_name(target)
    tables = {
        t: {j.output for j in dag.jobs_for(config, t)}
        for t in (dag.TABLES if name == "all" else (name,))
    }
    return Plan(
        gpu,
        target,
        [_job_plan(ctx, j) for j in jobs],
        tables,
        lengths_from and str(lengths_from),
        fsdp,
    )
