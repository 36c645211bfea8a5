"""One shell for every in-house trainer: a trainer is its settings plus its step.

An :class:`InHouseTrainer` is a registry entry (:data:`agon.registry.TRAINERS`): its name, its
settings class (a :class:`~agon.training.settings.RLSettings`) and its step function (one
training step of every policy, :mod:`agon.rl`'s signature), with what it adds, if anything:
checks before a model loads, a context that binds the step's helpers (a teacher) and releases
them, summary extras, the metrics its progress line shows. :meth:`InHouseTrainer.train` does
what every trainer does around its step, in this order: the seed, the task, the accelerator
(several processes), the policies (model, rollout engine, optimizer; :func:`family_policies`),
the loop (:func:`agon.training.loop.train`: problem stream, resume, checkpoints, probes,
metrics rows), the final models (:func:`save_policies`) and the summary payload
(:func:`run_payload` plus the trainer's extras).

A trainer of several phases (OPD-then-RL: distillation, then RL) lists them as
:class:`Phase` rows: each is a loop of its own in ``OUT/<phase>/``, from the models and settings
the phase before left; the run's ``metrics.jsonl`` is the phases' rows one after the other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agon.engines.hf import load_model, load_tokenizer, resolve_dtype
from agon.engines.placement import Placement, place
from agon.engines.rollouts import RolloutOptions, rollout_engine
from agon.provenance import atomic_write_text
from agon.registry import ReadsSettings
from agon.tasks import task_from_config
from agon.tasks.base import Task
from agon.toy.audit import model_habits
from agon.training import logbook
from agon.training import metrics as mk
from agon.training.budget import from_settings
from agon.training.budget import report as budget_report
from agon.training.checkpoint import save_model
from agon.training.loop import StepFn, train
from agon.training.policy import Policy, distribute, distributed_info, make_accelerator, make_policy
from agon.training.settings import RLSettings, TrainSettings

# ----------------------------------------------------------------------------- the pieces


def family_policies(
    config: dict, fam: dict, settings: RLSettings, accelerator: Any
) -> tuple[dict[str, Policy], dict[str, Any]]:
    """Policies A and B from the family row (model, rollout engine, optimizer), each
    distributed over ``accelerator``'s processes with its own optimizer; and their tokenizers.
    Each policy and its engine go where :func:`agon.engines.placement.place` puts them
    (:func:`placement`), the placement ``agon plan`` prices. Under ``train.master_dtype:
    float32`` the weights load in float32 and the forward, the backward and generation
    autocast to the family's dtype."""
    options = RolloutOptions.from_settings(settings)
    weights, autocast = master_precision(settings, fam["dtype"])
    where = placement(options, accelerator)
    rank = accelerator.local_process_index if where.processes > 1 else 0
    policies, tokenizers = {}, {}
    for name in mk.MODELS:
        row = fam[f"model_{name.lower()}"]
        tok = load_tokenizer(row["model"], revision=row.get("revision"))
        device = where.part(f"{name}.policy", rank).device if accelerator is None else None
        model = load_model(row["model"], dtype=weights, revision=row.get("revision"), device=device)
        part = where.part(f"{name}.engine", rank)
        engine = rollout_engine(options, fam, name, model, tok, autocast, part)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        policy = make_policy(name, model, engine, settings, pad, autocast_dtype=autocast)
        if fam.get("toy"):
            policy.habits = model_habits(row["model"])
        distribute(policy, accelerator)  # shard / replicate each model with its own optimizer
        policies[name] = policy
        tokenizers[name] = tok
    return policies, tokenizers


def placement(options: RolloutOptions, accelerator: Any) -> Placement:
    """Where this run's parts sit (:func:`agon.engines.placement.place`): on the GPUs this
    process sees; under accelerate, one process per GPU of the node, each rank's parts on its
    own GPU (its share of each model under FSDP). The in-house trainers all hold both
    policies, so the duel's placement is every one's."""
    gpus = torch.cuda.device_count()
    processes = 1
    if accelerator is not None:
        processes = gpus or accelerator.num_processes  # one per GPU of the node; CPU: all
    sharded = distributed_info(accelerator)["distributed_type"] == "FSDP"
    return place(
        "duel",
        options.backend,
        gpus,
        servers=options.servers,
        processes=processes,
        sharded=sharded,
    )


def policy_device(index: int, accelerator: Any) -> str | None:
    """Where policy ``index`` (A: 0, B: 1) lives in one process (:func:`placement`): on a GPU
    of its own when the process sees two or more (a train job's ``resources.train.gpus: 2``),
    else on the default device (one GPU, or the CPU). Under accelerate each process holds its
    share of both, on the device accelerate gives it."""
    if accelerator is not None:
        return None
    options = RolloutOptions()
    return placement(options, None).part(f"{mk.MODELS[index]}.policy").device


def master_precision(settings: TrainSettings, dtype: str) -> tuple[str, torch.dtype | None]:
    """The dtype the weights load in, and the one the compute autocasts to (None: none):
    the family's ``dtype`` for both by default; float32 masters computing in ``dtype`` under
    ``train.master_dtype: float32`` (no autocast when ``dtype`` is float32 itself)."""
    if settings.master_dtype is None or dtype == settings.master_dtype:
        return dtype, None
    if dtype == "auto":
        raise ValueError(
            "train.master_dtype float32 autocasts to the family's dtype: set the family's "
            "dtype (bfloat16, float16) instead of auto"
        )
    return settings.master_dtype, resolve_dtype(dtype)


def save_policies(
    policies: dict[str, Policy], tokenizers: dict[str, Any], out: Path, accelerator: Any
) -> None:
    """Each policy's final model into ``OUT/<name>``; under several processes every rank calls
    this, the full weights are gathered (FSDP2 shards them) and saved once."""
    for name, pol in policies.items():
        save_final(pol.model, tokenizers[name], out / name, accelerator)


def save_final(model: Any, tokenizer: Any, path: Path, accelerator: Any = None) -> None:
    """A trained model's final folder. Under several processes (``accelerator`` given) every
    rank calls this: the full weights are gathered (FSDP2 shards them) and rank 0 alone writes
    the folder, the others waiting for it; two ranks writing one folder would race."""
    if accelerator is None:
        save_model(model, tokenizer, path)
        return
    state = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        save_model(accelerator.unwrap_model(model), tokenizer, path, state_dict=state)
    accelerator.wait_for_everyone()


def close_policies(policies: dict[str, Policy], accelerator: Any) -> None:
    """Release a phase's policies before the next phase loads its own: rollout engines closed,
    accelerate's prepared models forgotten (checkpoints save what is prepared)."""
    for policy in policies.values():
        close = getattr(policy.engine, "close", None)
        if close is not None:
            close()
    if accelerator is not None:
        accelerator.wait_for_everyone()
        accelerator.free_memory()


def run_summary(out: Path, settings: TrainSettings) -> dict:
    """The totals of a finished run's ``OUT/metrics.jsonl`` (every trainer's, GRPO on TRL's
    too); with a compute budget in ``settings``, what each model spent against it
    (``budget``)."""
    summary = logbook.summarize_metrics(out / "metrics.jsonl")
    budget = from_settings(settings)
    if budget is not None:
        caps = {name: settings.model_steps(name) for name in budget.targets}
        summary["budget"] = budget_report(budget, logbook.read_rows(out / "metrics.jsonl"), caps)
    return summary


def run_payload(
    out: Path, steps_this_run: int, t0: float, accelerator: Any, settings: RLSettings
) -> dict:
    """The summary payload of an in-house run: :func:`run_summary`, this run's wall seconds
    and steps, and its processes."""
    return run_summary(out, settings) | {
        "wall_s_this_run": time.time() - t0,
        "steps_this_run": steps_this_run,
        "distributed": distributed_info(accelerator),
    }


def progress_printer(label: str, keys: Sequence[str]) -> Callable[[dict], None]:
    """A step's progress line, ``[label] step N: key=value ...``, of the ``keys`` a row has
    (templates with ``{model}`` are shown for A and B)."""
    shown_keys = [k.format(model=m) for k in keys for m in (mk.MODELS if "{model}" in k else [0])]

    def show(row: dict) -> None:
        shown = " ".join(f"{k}={row[k]:.3g}" for k in shown_keys if k in row)
        print(f"[{label}] step {row[mk.STEP]}: {shown}", flush=True)

    return show


# ----------------------------------------------------------------------------- a trainer


@dataclass
class Run:
    """What a trainer's hooks see of a run: its config rows, its task, its settings and, once
    a loop's policies are built, those; ``out`` and ``loop_settings`` are the loop's (a phase's
    folder and settings, for a trainer of several phases)."""

    config: dict
    family: dict
    task: Task
    settings: RLSettings
    out: Path
    accelerator: Any = None
    policies: dict[str, Policy] = field(default_factory=dict)
    tokenizers: dict[str, Any] = field(default_factory=dict)
    loop_settings: RLSettings | None = None


@contextlib.contextmanager
def plain_step(run: Run, step: StepFn) -> Iterator[StepFn]:
    """A step that needs nothing bound: the step itself."""
    yield step


@dataclass(frozen=True)
class Phase:
    """One loop of a trainer of several phases, in ``OUT/<name>/``.

    ``settings(run_settings, out)`` gives the phase's settings (steps, learning rate, seed,
    budget left by the phases before); ``family(row, out)`` the family row its models start
    from; ``bind`` its step's helpers, as :attr:`InHouseTrainer.bind`; ``done(out)`` tells a
    phase a killed run had finished, which a rerun skips."""

    name: str
    step: StepFn
    settings: Callable[[RLSettings, Path], RLSettings]
    family: Callable[[dict, Path], dict] = lambda fam, out: fam
    bind: Callable[[Run, StepFn], contextlib.AbstractContextManager[StepFn]] = plain_step
    done: Callable[[Path], bool] = lambda out: False


@dataclass(frozen=True)
class InHouseTrainer(ReadsSettings):
    """A trainer run by the shell: its settings class and its step, and what it adds.

    - ``check(config, family, task, settings, accelerator)``: refuse a run before any model
      loads (raise ValueError naming the setting);
    - ``bind(run, step)``: a context manager that yields the step with its helpers bound (a
      teacher, say) and releases them when the loop ends;
    - ``keys``: the metrics keys of its own (:class:`agon.training.metrics.Key`: how
      processes combine each, and the ``summary.json`` total it adds up to, if any), besides
      :data:`agon.training.metrics.KEYS`; a row with a key neither declares is refused;
    - ``extras(out, rows)``: summary keys of the trainer's own that are not a declared key's
      total (its switch point, say), from the run's metrics rows;
    - ``progress``: the metrics keys of its progress line;
    - ``phases``: several loops one after the other (``step`` and ``bind`` unused).
    """

    name: str
    settings: type[RLSettings]
    step: StepFn | None = None
    settings_overrides: tuple[tuple[str, Any], ...] = ()
    check: Callable[[dict, dict, Task, Any, Any], None] | None = None
    bind: Callable[[Run, StepFn], contextlib.AbstractContextManager[StepFn]] = plain_step
    keys: tuple[mk.Key, ...] = ()
    extras: Callable[[Path, list[dict]], dict] | None = None
    progress: tuple[str, ...] = ()
    phases: tuple[Phase, ...] = ()

    @property
    def declared(self) -> mk.Declared:
        """Every metrics key this trainer's rows may hold."""
        return mk.Declared(self.keys)

    def train(self, config: dict, fam: dict, task_name: str, s: RLSettings, out: Path) -> dict:
        """Train the family's two models: the seed, the task, the accelerator, the policies,
        the loop (each phase's), the final models and the summary payload."""
        task = task_from_config(config, task_name)
        try:
            torch.manual_seed(s.seed)
            accelerator = make_accelerator()
            if self.check is not None:
                self.check(config, fam, task, s, accelerator)
            run = Run(config, fam, task, s, Path(out), accelerator)
            t0 = time.time()
            steps = self._loops(run)
        finally:
            task.close()
        save_policies(run.policies, run.tokenizers, run.out, accelerator)
        # the last phase's engines (vLLM processes, their staged weights) end with the run, not
        # at interpreter exit; on a crash the engines' own exit handlers close them
        close_policies(run.policies, accelerator)
        if self.phases:
            _merge_phases(run.out, self.phases, s, accelerator)
        rows = logbook.read_rows(run.out / "metrics.jsonl")
        extras = self.extras(run.out, rows) if self.extras is not None else {}
        totals = logbook.declared_totals(rows, self.declared)
        return run_payload(run.out, steps, t0, accelerator, s) | totals | extras

    def _loops(self, run: Run) -> int:
        """Run the trainer's loop, or each phase's; the steps this run took."""
        phases = self.phases or (
            Phase("train", self.step, lambda s, out: s, bind=self.bind),  # type: ignore[arg-type]
        )
        steps = 0
        for phase in phases:
            out = run.out / phase.name if self.phases else run.out
            if phase.done(out):
                continue
            settings = phase.settings(run.settings, run.out)
            if run.policies:  # the phase before, done: free it before this one loads models
                close_policies(run.policies, run.accelerator)
                run.policies, run.tokenizers = {}, {}
                gc.collect()
            run.policies, run.tokenizers = family_policies(
                run.config, phase.family(run.family, run.out), settings, run.accelerator
            )
            label = f"{self.name} {phase.name}"
            phase_run = dataclasses.replace(run, out=out, loop_settings=settings)
            with phase.bind(phase_run, phase.step) as step_fn:
                rows = train(
                    run.task,
                    run.policies,
                    settings,
                    out,
                    step_fn,
                    on_step=progress_printer(label, self.progress),
                    declared=self.declared,
                )
            steps += len(rows)
        return steps


def _merge_phases(out: Path, phases: Sequence[Phase], s: RLSettings, accelerator: Any) -> None:
    """The run's ``metrics.jsonl``: each phase's rows after the phase before's, steps moved on
    by the steps those took."""
    merged, offset = [], 0
    for phase in phases:
        rows = logbook.read_rows(out / phase.name / "metrics.jsonl")
        merged += [r | {mk.STEP: r[mk.STEP] + offset} for r in rows]
        offset += phase.settings(s, out).steps
    if accelerator is None or accelerator.is_main_process:
        atomic_write_text(out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in merged))
    if accelerator is not None:
        accelerator.wait_for_everyone()
