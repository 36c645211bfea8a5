"""The plan of a config: per job its tokens, FLOPs, memory, hours and flags; totals per table.

:func:`plan` walks the DAG's jobs (:mod:`agon.plan.jobs`), builds each one's work
(:mod:`agon.plan.workload`) with the models' dimensions (:mod:`agon.plan.dims`), and prices it:
FLOPs (:mod:`agon.plan.flops`), memory on the fullest device and on the host
(:mod:`agon.plan.placement`), and time from the throughput model (:mod:`agon.plan.hardware`:
a measured efficiency when there is one, else an assumed one, and then every line that uses
it says "assumed, not measured"). A job's phases run one after another (one process drives
its models), and its GPU-hours are its wall time x the GPUs its ``resources`` row holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agon.config import ablation_config
from agon.methods import BUDGET_REFERENCE, COLUMNS
from agon.plan.context import JobPlan, PlanContext
from agon.plan.dims import ModelDims
from agon.plan.errors import PlanError
from agon.plan.expect import expect
from agon.plan.jobs import TABLES, Job, jobs_for, resources, target_name
from agon.plan.lengths import MeasuredLengths, read_lengths
from agon.plan.memory import Breakdown
from agon.plan.placement import (
    Memory,
    TrainShape,
    eval_memory,
    helper_memory,
    logits_transient,
    train_memory,
)
from agon.plan.pricing import SECONDS_PER_HOUR, check, price
from agon.plan.workload import (
    TRL_SECTION,
    TRL_VLLM_SHARE,
    Workload,
    duel_workload,
    eval_workload,
    method_row,
    solo_workload,
)

SIGNIFICANT_BITS = {"bfloat16": 8, "float16": 11}  # a 16-bit float's significand, implicit bit in


def precision_note(shape: TrainShape, learning_rate: float) -> str | None:
    """Where pure 16-bit weights lose AdamW's steps (``None`` with float32 masters or weights).

    AdamW's first steps are about the learning rate per weight. A weight |w| in [2^e, 2^(e+1))
    with a b-bit significand moves by a step only above half its unit in the last place,
    2^(e-b): every weight below 2^b x lr in size moves, none at or above 2^(b+1) x lr, and in
    between its binade decides. At lr 1e-6 in bfloat16 no weight above 5.1e-4 moves: about 98%
    of weights drawn like a 0.02-std initialization stay where they are.
    """
    bits = SIGNIFICANT_BITS.get(shape.dtype)
    if shape.master_dtype or bits is None:
        return None
    never, always = 2 ** (bits + 1) * learning_rate, 2**bits * learning_rate
    return (
        f"pure {shape.dtype} weights at lr {learning_rate:g}: AdamW's early steps "
        f"(about the learning rate) round away on every weight larger than {never:.2g} and move "
        f"only those below {always:.2g} for sure ({bits}-bit significand); "
        "train.master_dtype: float32 keeps every step"
    )


@dataclass
class Plan:
    """Every job's plan, which tables each belongs to, and what the plan assumed."""

    gpu: str
    target: str
    jobs: list[JobPlan]
    tables: dict[str, set[str]]  # the target's tables -> outputs of their jobs
    lengths_from: str | None

    def totals(self, table: str | None = None) -> dict[str, float]:
        """Sums over ``table``'s jobs (None: every job of the plan once)."""
        keep = [j for j in self.jobs if table is None or j.job.output in self.tables[table]]
        mem = [j.memory.per_device.total for j in keep if j.memory and j.resources["gpus"]]
        return {
            "jobs": len(keep),
            "gpu_hours": sum(j.gpu_hours for j in keep),
            "tokens_generated": sum(j.tokens_generated for j in keep),
            "tokens_helpers": sum(j.tokens_helpers for j in keep),
            "tokens_trained": sum(j.tokens_trained for j in keep),
            "flops_generation": sum(j.flops_generation for j in keep),
            "flops_training": sum(j.flops_training for j in keep),
            "peak_memory_per_gpu": max(mem, default=0.0),
            "flagged": sum(1 for j in keep if j.flags),
            "assumed_throughput": sum(1 for j in keep if j.assumed),
            "untimed": sum(1 for j in keep if j.seconds is None),
        }


def _duel_agon(config: dict, job: Job) -> dict:
    """The ``agon`` section a duel job runs with (an ablation variant's changes applied). A
    duel method's own settings (agon_independent's reward scheme) change no work: its drafts
    and reads follow the section's ``num_reads`` and ``role_schedule``."""
    if job.rule == "ablation_train":
        return ablation_config(config, job.variant)["agon"]
    return config["agon"]


def _reference(ctx: PlanContext, fam: dict, task: dict) -> dict:
    """The ``agon`` run's per-model spend on (family, task): what budget-matched runs match."""
    key = (fam["name"], task["name"])
    if key not in ctx.references:
        e = expect(fam, task["name"], ctx.lengths)
        ref = duel_workload(
            ctx.config, ctx.config["agon"], fam, task, e, ctx.lengths, BUDGET_REFERENCE
        )
        ctx.references[key] = ref.spend
    return ctx.references[key]


def _workload(ctx: PlanContext, job: Job) -> Workload:
    """The work of a train or evaluate job (agon.plan.workload)."""
    fam, task = ctx.families[job.family], ctx.tasks[job.task]
    e = expect(fam, task["name"], ctx.lengths)
    if job.rule in ("evaluate", "ablation_eval"):
        return eval_workload(ctx.config, fam, task, e, ctx.lengths, job.system)
    if job.rule == "ablation_train" or method_row(job.method).runs == "duel":
        return duel_workload(
            ctx.config, _duel_agon(ctx.config, job), fam, task, e, ctx.lengths, job.method
        )
    ref = _reference(ctx, fam, task) if ctx.config["train"]["budget"]["match"] != "steps" else None
    return solo_workload(ctx.config, fam, task, e, ctx.lengths, job.method, ref)


def _models(ctx: PlanContext, job: Job, w: Workload) -> dict[str, ModelDims]:
    """The dims of every model the job's work names (A, B, and its helpers)."""
    keys = {g.model for g in w.generations} | {t.model for t in w.trainings}
    keys |= {s.model for s in w.scorings} | {"A", "B"}
    return {k: ctx.dims(job.family, k, w.models.get(k)) for k in keys}


def _train_shape(ctx: PlanContext, job: Job, fam: dict, w: Workload) -> TrainShape:
    """What a training job's memory depends on: its micro-batch (TRL's for GRPO, which falls
    back to the whole step when micro_batch_size holds no whole group), its longest prompt,
    precision, checkpointing, reference model and rollout engine."""
    tr, grpo = ctx.config["train"], ctx.config.get(TRL_SECTION) or {}
    trl = method_row(job.method).runs == "trl"
    mb = tr["micro_batch_size"]
    if trl:  # baselines.grpo's batch_shape: divides the step's completions, holds whole groups
        total, g = tr["problems_per_step"] * tr["num_generations"], tr["num_generations"]
        mb = min(total, mb)
        while mb >= g and (total % mb or mb % g):
            mb -= 1
        mb = mb if mb >= g else total
    longest = max((t.prompt for t in w.trainings), default=0.0)
    engine = ("vllm" if grpo.get("use_vllm") else "hf") if trl else tr["backend"]
    share = (grpo.get("extra") or {}).get("vllm_gpu_memory_utilization", TRL_VLLM_SHARE)
    return TrainShape(
        dtype=fam["dtype"],
        master_dtype=tr.get("master_dtype"),
        micro_batch=int(mb),
        prompt=int(longest),
        completion=fam["max_new_tokens"],
        gradient_checkpointing=bool(tr.get("gradient_checkpointing", False)),
        reference_model=tr["beta"] > 0,
        engine=engine,
        rollout_rows=int(max((g.rows for g in w.generations), default=1)),
        rollout_context=int(longest + fam["max_new_tokens"]),
        vllm_share=float(share if trl else tr["vllm_gpu_memory_utilization"]),
    )


def _memory(
    ctx: PlanContext, job: Job, w: Workload, models: dict[str, ModelDims], shape: TrainShape | None
) -> Memory:
    """The job's memory (agon.plan.placement), the helpers' the workload holds included
    (Cliff's two teacher engines, OPD's teacher, GAR's float32 logit chunks)."""
    fam = ctx.families[job.family]
    gpus = resources(ctx.config, job)["gpus"]
    if shape is None:  # an evaluation
        col = COLUMNS[job.system]
        same = not col.train and fam["model_a"]["model"] == fam["model_b"]["model"]
        used = sorted({g.model for g in w.generations})
        distinct = used[:1] if same else used
        return eval_memory(
            models, distinct, w, fam["dtype"], gpus, fam["max_new_tokens"], ctx.kind.memory_bytes
        )
    helpers = [
        helper_memory(models[r.model], fam["dtype"], r.rows, r.context, r.generates)
        for r in w.residents
    ]
    extra = None
    for t in w.logits:
        b = logits_transient(t.name, t.tokens, t.vocab_chunk)
        extra = b if extra is None else extra.plus(b)
    device_bytes = ctx.kind.memory_bytes if gpus else None
    sequential = method_row(job.method).runs == "trl"  # TRL: one model at a time
    return train_memory(models, shape, gpus, device_bytes, sequential, helpers, extra)


def _job_plan(ctx: PlanContext, job: Job) -> JobPlan:
    """One job's plan: its work, memory, price and flags."""
    p = JobPlan(job, resources(ctx.config, job))
    if job.rule not in ("train", "evaluate", "ablation_train", "ablation_eval"):
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
    shape = None if job.rule in ("evaluate", "ablation_eval") else _train_shape(ctx, job, fam, w)
    p.notes += w.notes
    if shape is not None and (note := precision_note(shape, ctx.config["train"]["learning_rate"])):
        p.warnings.append(note)
    p.steps = dict(w.steps)
    p.memory = _memory(ctx, job, w, models, shape)
    price(ctx, job, w, models, p, shape)
    if p.seconds is not None and p.resources["gpus"]:
        p.gpu_hours = p.seconds / SECONDS_PER_HOUR * p.resources["gpus"]
    check(ctx, p)
    return p


def plan(
    config: dict,
    target: str = "all",
    gpu: str = "h200",
    lengths_from: str | Path | None = None,
    measurements_dir: str | Path | None = None,
) -> Plan:
    """The plan of a validated ``config`` for ``target`` on GPU kind ``gpu`` (see the module
    docstring); ``lengths_from``: an out_dir whose runs give measured lengths."""
    lengths = read_lengths(lengths_from) if lengths_from else MeasuredLengths()
    ctx = PlanContext(config, gpu, lengths, measurements_dir)
    jobs = jobs_for(config, target)
    name = target_name(target)
    tables = {
        t: {j.output for j in jobs_for(config, t)} for t in (TABLES if name == "all" else (name,))
    }
    return Plan(
        gpu, target, [_job_plan(ctx, j) for j in jobs], tables, lengths_from and str(lengths_from)
    )


def breakdown_gb(b: Breakdown) -> dict[str, float]:
    """A breakdown in GB (10^9 bytes), largest first (for printing)."""
    return {k: v / 1e9 for k, v in sorted(b.components.items(), key=lambda kv: -kv[1])}
