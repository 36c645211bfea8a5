"""The jobs of the workflow's DAG for a target, derived from the config with the functions
``workflow/rules/*_jobs.smk`` use, so they are the jobs ``snakemake -n`` lists
(``tests/test_plan.py`` compares them); the config-snapshot jobs are left out.

A job longer than its runtime row (:func:`chunks`) is stopped at its limit, resubmitted by the
SLURM profile's ``retries`` and resumes from its last checkpoint: each restart costs a start,
loading its checkpoint and models, each vLLM engine's warm-up, and the work since the last
checkpoint; a chunk that reaches no checkpoint never moves the job on.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from agon.config import seeded_bases
from agon.methods import (
    BUDGET_MATCHED,
    BUDGET_REFERENCE,
    TEACHER_METHODS,
    TRAINED_METHODS,
    columns_for_methods,
    eval_seeds,
    trained_methods_for,
)
from agon.plan.dims import PlanError
from agon.results import Layout
from agon.training.settings import TrainSettings

# the SLURM profile the workflow's README runs the paper with; its `retries` bound the restarts
SLURM_PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "slurm" / "config.yaml"
# a restart, assumed (not measured): a process start, reading at 1 GB/s from shared storage, and
# a vLLM engine's warm-up (memory profiling, KV allocation, CUDA graphs)
ASSUMED_START_S = 120.0
ASSUMED_LOAD_BYTES_PER_S = 1e9
ASSUMED_VLLM_WARMUP_S = 120.0

TABLES = ("table1", "related", "ablations")
TARGETS = (*TABLES, "all")
# the `resources` row each rule takes (workflow/rules/*.smk)
RESOURCE_ROWS = {
    "pretrain": "pretrain",
    "pretrain_teacher": "pretrain",
    "prepare_model": "prepare_model",
    "data_split": "data",
    "train": "train",
    "ablation_train": "train",
    "evaluate": "evaluate",
    "ablation_eval": "evaluate",
    "report": "report",
    "related_report": "report",
    "ablations_report": "report",
}
# the workflow's defaults for a resources key a config leaves out (common.smk: res)
RESOURCE_DEFAULTS = {"threads": 1, "gpus": 0, "mem_mb": 4000, "runtime": 60}


@dataclass(frozen=True)
class Job:
    """One job of the DAG: its rule, its main output (its identity) and its wildcards."""

    rule: str
    output: str
    family: str | None = None
    task: str | None = None
    method: str | None = None  # the trained method (train), "agon" for an ablation variant
    system: str | None = None  # the evaluated column (evaluate; "agon" for an ablation's eval)
    variant: str | None = None
    seed: int | None = None

    @property
    def resources_row(self) -> str:
        return RESOURCE_ROWS[self.rule]

    @property
    def label(self) -> str:
        """A short human name: rule and wildcards."""
        parts = [self.family, self.task, self.variant, self.method or self.system]
        seed = f"seed{self.seed}" if self.seed is not None else None
        return " ".join(p for p in (self.rule, *parts, seed) if p)


def resources(config: dict, job: Job) -> dict[str, int]:
    """The job's resources, as the workflow reads them."""
    row = (config.get("resources") or {}).get(job.resources_row, {})
    return {k: int(row.get(k, v)) for k, v in RESOURCE_DEFAULTS.items()}


def target_name(target: str) -> str:
    """``results/table1.csv`` (any out_dir), ``table1.csv`` or ``table1`` -> ``table1``;
    ``all`` stays; anything else is an error naming the choices."""
    stem = os.path.basename(target).removesuffix(".csv")
    if stem not in TARGETS:
        raise PlanError(
            f"unknown target {target!r}; expected results/table1.csv, results/related.csv, "
            "results/ablations.csv or all"
        )
    return stem


def _train_methods(config: dict, systems: list[str]) -> list[str]:
    """The trained methods ``systems`` need, and the run budget-matched ones match, in order."""
    methods = set(trained_methods_for(systems))
    if TrainSettings.from_config(config).budget_match != "steps" and methods & set(BUDGET_MATCHED):
        methods.add(BUDGET_REFERENCE)
    return [m for m in TRAINED_METHODS if m in methods]


def pretrain_seeds(config: dict) -> list[int]:
    """The seeds the toy base models are pretrained for: every training seed."""
    seeds = [*config["seeds"], *((config.get("ablations") or {}).get("seeds") or [])]
    return sorted({int(s) for s in seeds})


def _base_jobs(config: dict, layout: Layout, methods: list[str]) -> list[Job]:
    """What every table's runs stand on: toy models, packaged checkpoints, data splits."""
    fams = config["families"]
    jobs = []
    if any(f["toy"] for f in fams):  # a pair of base models per training seed
        for seed in pretrain_seeds(config):
            jobs.append(Job("pretrain", layout.toy_report(seed), seed=seed))
            if set(methods) & set(TEACHER_METHODS):
                jobs.append(Job("pretrain_teacher", layout.toy_teacher_report(seed), seed=seed))
    rows = [f[k] for f in fams for k in ("model_a", "model_b")]
    if set(methods) & set(TEACHER_METHODS):
        rows += [f["teacher"] for f in fams if "teacher" in f and not f["toy"]]
    folders = dict.fromkeys(os.path.normpath(r["model"]) for r in rows if "source" in r)
    jobs += [Job("prepare_model", folder) for folder in folders]
    jobs += [
        Job("data_split", layout.split(f["name"], t["name"]), f["name"], t["name"])
        for f in fams
        for t in config["tasks"]
    ]
    return jobs


def _runs(config: dict, layout: Layout, systems: list[str], report: str) -> list[Job]:
    """Training runs and evaluations of ``systems``, and the report job ``report``."""
    seeds = [int(s) for s in config["seeds"]]
    methods = _train_methods(config, systems)
    jobs = _base_jobs(config, layout, methods)
    for f in config["families"]:
        for t in config["tasks"]:
            fam, task = f["name"], t["name"]
            jobs += [
                Job("train", layout.train_summary(fam, task, m, s), fam, task, method=m, seed=s)
                for m in methods
                for s in seeds
            ]
            jobs += [
                Job("evaluate", layout.eval_summary(fam, task, c, s), fam, task, system=c, seed=s)
                for c in systems
                for s in eval_seeds(c, seeds, seeded_bases(f))
            ]
    jobs.append(Job(report, f"{layout.out_dir}/{report.removesuffix('_report')}.csv"))
    return jobs


def _ablations(config: dict, layout: Layout) -> list[Job]:
    """Each ablation variant's duel and its cascade's evaluation, per (family, task, seed)."""
    variants = [v["name"] for v in config["ablations"]["variants"]]
    seeds = [int(s) for s in config["ablations"]["seeds"]]
    jobs = _base_jobs(config, layout, [BUDGET_REFERENCE])
    for f in config["families"]:
        for t in config["tasks"]:
            fam, task = f["name"], t["name"]
            for v in variants:
                for s in seeds:
                    train = layout.ablation_train_summary(fam, task, v, s)
                    ev = layout.ablation_eval_summary(fam, task, v, s)
                    jobs.append(
                        Job("ablation_train", train, fam, task, BUDGET_REFERENCE, None, v, s)
                    )
                    jobs.append(Job("ablation_eval", ev, fam, task, None, "agon", v, s))
    jobs.append(Job("ablations_report", f"{layout.out_dir}/ablations.csv"))
    return jobs


def jobs_for(config: dict, target: str) -> list[Job]:
    """Every job of the DAG for ``target`` (:func:`target_name`), each once, in DAG order;
    ``all`` is the union of the three tables' DAGs (shared runs once)."""
    name = target_name(target)
    layout = Layout(config["out_dir"], config.get("figures_dir", "figures"))
    builders = {
        "table1": lambda: _runs(config, layout, columns_for_methods(config["methods"]), "report"),
        "related": lambda: _runs(
            config, layout, columns_for_methods(config["related"]["methods"]), "related_report"
        ),
        "ablations": lambda: _ablations(config, layout),
    }
    names = TABLES if name == "all" else (name,)
    jobs: dict[str, Job] = {}
    for n in names:
        for job in builders[n]():
            jobs.setdefault(job.output, job)
    return list(jobs.values())


def profile_retries(path: Path = SLURM_PROFILE) -> int | None:
    """The ``retries`` of the SLURM profile (None: no profile file here)."""
    try:
        return int((yaml.safe_load(path.read_text()) or {}).get("retries", 0))
    except OSError:
        return None


@dataclass(frozen=True)
class Chunks:
    """How a job longer than its runtime completes: ``count`` submissions (0: never), each
    restart ``restart`` seconds, ``redone`` seconds repeated; ``extra``: all that adds."""

    count: int
    interval: float  # seconds between the job's checkpoints
    restart: float
    redone: float
    extra: float


def chunks(seconds: float, runtime_s: float, interval: float, restart: float) -> Chunks:
    """How a job of ``seconds`` completes under ``runtime_s``, checkpointing every ``interval``
    (``inf``: never): each chunk loses its start and the work after its last checkpoint; only
    restarts are priced."""
    usable = runtime_s - restart
    per = math.floor(usable / interval) * interval if math.isfinite(interval) else 0.0
    if per <= 0:
        return Chunks(0, interval, restart, 0.0, 0.0)
    count = math.ceil(seconds / per)
    redone = (count - 1) * (usable - per)
    return Chunks(count, interval, restart, redone, (count - 1) * restart + redone)
