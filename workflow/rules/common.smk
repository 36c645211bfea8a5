# Helpers shared by every rules file: config validation, output layout, resources.
#
# The config is validated here, when the DAG is built, with the same schema and semantic
# checks as every `agon` CLI, so a bad family row fails before any job starts. Paths are
# built from one place (agon.results.Layout), which `agon report` also reads, so the
# workflow and the report cannot disagree about where a result lives. Table 1's columns and
# the methods that train their models come from one list too (agon.methods).

import json
import os
import re
from pathlib import Path

from agon.config import (
    CONTROL_DIRECTIONS,
    CONTROL_FAMILY,
    ConfigError,
    ablation_config,
    control_config,
    control_stage,
    deep_merge,
    kernel_env,
    seeded_bases,
    validate_config,
)
from agon.methods import (
    BUDGET_MATCHED,
    BUDGET_REFERENCE,
    COLUMNS,
    METHODS,
    RELATED,
    TABLE1_METHODS,
    TEACHER_METHODS,
    TRAINED_METHODS,
    columns_for_methods,
    eval_seeds,
    trained_methods_for,
)
from agon.packaged_models import PROVENANCE, packaged
from agon.regime import REGIME_SYSTEMS, regime_changes
from agon.results import Layout

try:
    validate_config(config)
except ConfigError as err:
    raise WorkflowError(f"{err}\nFix the config file (or the --config overrides) and rerun.")

OUT = config["out_dir"]
LAYOUT = Layout(OUT, config["figures_dir"])
FAMILIES = {row["name"]: row for row in config["families"]}
TASKS = {row["name"]: row for row in config["tasks"]}
SEEDS = [int(s) for s in config["seeds"]]
EVAL_SYSTEMS = columns_for_methods(config["methods"])
TRAIN_METHODS = trained_methods_for(EVAL_SYSTEMS)
ABLATIONS = config["ablations"]
VARIANTS = [v["name"] for v in ABLATIONS["variants"]]
TOY_FAMILIES = [name for name, row in FAMILIES.items() if row["toy"]]
# model folders the prepare_model rule builds from a row's `source` (a GGUF checkpoint)
PACKAGED = packaged(config)
TOY_TASKS = ("arith", "toycode")  # the task rows `agon toy pretrain` reads
ALL_METHODS = list(TABLE1_METHODS)  # table 1's (the schema's `methods`)

# Sections of the config each stage depends on. A job's config snapshot holds exactly these
# (plus its own family and task row), so editing one family's row, or a section a stage
# does not read, reruns nothing else. `resources` and `seeds` are never in a snapshot:
# resources do not change results, and each job gets its seed on the command line.
STAGE_SECTIONS = {
    # `regime`: the toy gates check its criteria after pretraining
    "pretrain": ["toy", "grading", *(["regime"] if "regime" in config else [])],
    "data": [],
    # a related method's own section (cliff, gar, ...) shapes its training only
    "train": ["grading", "eval", "train", "agon", "grpo", *(m for m in RELATED if m in config)],
    "eval": ["grading", "eval", "moa"],
}
# an ablation variant's one snapshot serves its training and its evaluation
STAGE_SECTIONS["ablation"] = list(dict.fromkeys(STAGE_SECTIONS["train"] + STAGE_SECTIONS["eval"]))
# results/regime.csv's stages: table 1's train and eval snapshots with the regime's changes
# (GRPO's steps fixed up front; the regime's split), agon.regime.regime_changes
REGIME_STAGES = {"regime_train": "train", "regime_eval": "eval"}


def _alternation(names):
    """A wildcard regex matching exactly one of ``names`` (config rows become wildcards)."""
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    family=_alternation(FAMILIES),
    task=_alternation(TASKS),
    method=_alternation(TRAINED_METHODS),
    system=_alternation(COLUMNS),
    stage=_alternation(["data", "train", "eval", *REGIME_STAGES]),
    variant=_alternation(VARIANTS) if VARIANTS else r"(?!)",
    seed=r"\d+",


def _check_toy_rows():
    """Toy families must point at the models the pretrain rule builds, or nothing builds them."""
    for name in TOY_FAMILIES:
        rows = [("model_a", LAYOUT.toy_model("A")), ("model_b", LAYOUT.toy_model("B"))]
        if "teacher" in FAMILIES[name]:
            rows.append(("teacher", LAYOUT.toy_model("teacher")))
        # LAYOUT.toy_model's default seed is the literal "{seed}": each training seed's pair
        for key, expected in rows:
            got = FAMILIES[name][key]["model"]
            if os.path.normpath(got) != os.path.normpath(expected):
                raise WorkflowError(
                    f"families (name {name!r}): field '{key}.model' is {got!r}, but a toy family's "
                    f"models are built by the pretrain rule at {expected!r} (out_dir={OUT!r}); "
                    f"set it to {expected!r}, or set toy: false to use an existing model."
                )


_check_toy_rows()


# Jobs run `python -m agon` with this checkout first on the path, so they use the code this
# workflow came with, in the ambient environment and in the rules' conda env (which holds the
# dependencies only, see workflow/envs/). Set in the environment jobs inherit, not in a rule's
# params or command, so moving the checkout does not look like a change that reruns jobs.
os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (workflow.basedir, os.getenv("PYTHONPATH")) if p))
# The config's cpu_kernels: every job's torch, MKL and oneDNN take one CPU kernel set (on x86-64),
# so a seeded table is the same on AVX2 and AVX512 machines (each summary's provenance says which)
os.environ.update(kernel_env(config))


def res(rule_name, key):
    """Resource ``key`` of ``rule_name`` from the config's ``resources`` section, or its default."""
    defaults = {"threads": 1, "gpus": 0, "mem_mb": 4000, "runtime": 60}
    return config["resources"].get(rule_name, {}).get(key, defaults[key])


# ---------------------------------------------------------------- config snapshots


def _canonical(obj):
    """``obj`` with every mapping's keys sorted: Snakemake compares params by their repr, so a
    config whose YAML merely lists keys in another order must give the same snapshot."""
    return json.loads(json.dumps(obj, sort_keys=True))


def snapshot(stage, family=None, task=None):
    """The config a job of ``stage`` runs with, key order normalised (see :func:`_snapshot`)."""
    return _canonical(_snapshot(stage, family, task))


def _snapshot(stage, family=None, task=None):
    """The config a job of ``stage`` runs with: its rows and the sections it reads.

    Written to a file by the ``config_snapshot`` rule with this dict as a param, so
    Snakemake reruns a snapshot (and everything downstream of it) only when its content
    changes.
    """
    if stage == "report":  # the report reads everything that shapes table 1
        return {k: v for k, v in config.items() if k != "resources"}
    if stage in REGIME_STAGES:
        base = REGIME_STAGES[stage]
        return deep_merge(_snapshot(base, family, task), regime_changes(config, base))
    # `methods` only shapes the DAG (which jobs exist); no job reads it, so every snapshot
    # carries the same full list and adding a method reruns nothing that exists.
    cfg = {"out_dir": OUT, "methods": ALL_METHODS}
    if stage == "pretrain":
        # the pretrain reads the toy section and the toy tasks' rows, not the family rows; all
        # toy rows name the same two models (_check_toy_rows), so one fixed row stands for them
        # and adding or editing a toy family does not retrain the base models
        cfg["families"] = [{"name": "toy", "toy": True, "model_a": {"model": LAYOUT.toy_model("A")},
                            "model_b": {"model": LAYOUT.toy_model("B")}}]  # seed{seed}: one per seed
        cfg["tasks"] = [row for row in config["tasks"] if row["name"] in TOY_TASKS] or config["tasks"]
    else:
        # the data split depends on the task row only
        cfg["families"] = [_model_names_only(family) if stage == "data" else FAMILIES[family]]
        cfg["tasks"] = [TASKS[task]]
    for section in STAGE_SECTIONS[stage]:
        cfg[section] = config[section]
    return cfg


def ablation_snapshot_params(wildcards):
    """Params of the ``ablation_config`` rule: the train + eval snapshot of (family, task),
    with the variant's agon changes applied."""
    cfg = ablation_config(config, wildcards.variant)
    snap = _snapshot("train", wildcards.family, wildcards.task)
    for section in STAGE_SECTIONS["ablation"]:
        snap[section] = cfg[section]
    return _canonical(snap)


def _model_names_only(family):
    """A family row cut to what names its models, for stages that read nothing else of it."""
    row = FAMILIES[family]
    return {"name": family, "toy": row["toy"], "model_a": {"model": row["model_a"]["model"]},
            "model_b": {"model": row["model_b"]["model"]}}


def snapshot_params(wildcards):
    """Params of the ``config_snapshot`` rule for one (family, task, stage)."""
    return snapshot(wildcards.stage, wildcards.family, wildcards.task)


# ---------------------------------------------------------------- inputs of each stage


def base_model_inputs(wildcards):
    """The base-model folders a (family, task) job needs as inputs: the pretrained toy models,
    and the prepared folders of rows that ship as GGUF checkpoints."""
    row = FAMILIES[wildcards.family]
    inputs = {"toy_models": LAYOUT.toy_report(wildcards.seed)} if row["toy"] else {}
    for key in ("model_a", "model_b"):
        if "source" in row[key]:
            inputs[f"prepared_{key}"] = os.path.join(
                os.path.normpath(row[key]["model"]), PROVENANCE
            )
    return inputs


def budget_matched(method):
    """Whether ``method``'s run waits for the reference run of its seed (train.budget)."""
    return method in BUDGET_MATCHED and config["train"]["budget"]["match"] != "steps"


def train_inputs(wildcards):
    """Inputs of one training run: its config snapshot, the data split, the base models, and
    for a budget-matched method the reference run whose per-model spend it matches."""
    inputs = {
        "config": LAYOUT.snapshot(wildcards.family, wildcards.task, "train"),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
    }
    teacher = FAMILIES[wildcards.family].get("teacher") or {}
    if wildcards.method in TEACHER_METHODS and FAMILIES[wildcards.family]["toy"]:
        inputs["teacher"] = LAYOUT.toy_teacher_report(wildcards.seed)  # built on demand
    elif wildcards.method in TEACHER_METHODS and "source" in teacher:  # a packaged teacher
        inputs["teacher"] = os.path.join(os.path.normpath(teacher["model"]), PROVENANCE)
    if budget_matched(wildcards.method):
        inputs["match"] = LAYOUT.train_summary(
            wildcards.family, wildcards.task, BUDGET_REFERENCE, wildcards.seed
        )
    return inputs


def ablation_inputs(wildcards):
    """Inputs of an ablation variant's training: its snapshot, the split, the base models."""
    return {
        "config": LAYOUT.ablation_snapshot(wildcards.family, wildcards.task, wildcards.variant),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
    }


def ablation_eval_inputs(wildcards):
    """Inputs of an ablation variant's evaluation: its training inputs and its run."""
    return {
        **ablation_inputs(wildcards),
        "run": LAYOUT.ablation_train_summary(
            wildcards.family, wildcards.task, wildcards.variant, wildcards.seed
        ),
    }


def eval_inputs(wildcards):
    """Inputs of one evaluation: the snapshot, the split, and the models the system runs."""
    spec = COLUMNS[wildcards.system]
    inputs = {
        "config": LAYOUT.snapshot(wildcards.family, wildcards.task, "eval"),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
    }
    if spec.train:
        inputs["run"] = LAYOUT.train_summary(wildcards.family, wildcards.task, spec.train, wildcards.seed)
    return inputs


def eval_model_flags(wildcards, train_dir=LAYOUT.train_dir):
    """`agon eval` model flags: trained systems name their model folders (in ``train_dir``'s
    run) and the family row (persona, chat-template kwargs) each was trained as; untrained
    systems name only the row (base_b: row b), so the CLI takes that row's base model with its
    persona."""
    spec = COLUMNS[wildcards.system]
    if not spec.train:
        return ["--model-row", spec.model.lower()] if spec.model else []
    run = train_dir(wildcards.family, wildcards.task, spec.train, wildcards.seed)
    if spec.model:
        return ["--model", f"{run}/{spec.model}", "--model-row", spec.model.lower()]
    return ["--drafter", f"{run}/{spec.drafter}", "--reader", f"{run}/{spec.reader}",
            "--drafter-row", spec.drafter.lower(), "--reader-row", spec.reader.lower()]


def train_command(wildcards, input):
    """The `agon train` arguments of one training run (the script adds `--threads`: the job's
    thread count depends on --cores, and must not look like a change of the command)."""
    match = ["--match-run", input.match] if "match" in input.keys() else []
    return ["train", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--method", wildcards.method, "--seed", wildcards.seed, *match,
            "--out", LAYOUT.train_dir(wildcards.family, wildcards.task, wildcards.method, wildcards.seed)]


def ablation_train_command(wildcards, input):
    """`agon train --method agon` with the variant's snapshot."""
    return ["train", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--method", BUDGET_REFERENCE, "--seed", wildcards.seed,
            "--out", LAYOUT.ablation_train_dir(wildcards.family, wildcards.task, wildcards.variant, wildcards.seed)]


def ablation_eval_command(wildcards, input):
    """`agon eval --system agon`: the variant's cascade, its A drafts, its B reads."""
    run = LAYOUT.ablation_train_dir(wildcards.family, wildcards.task, wildcards.variant, wildcards.seed)
    return ["eval", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--system", "agon", "--seed", wildcards.seed,
            "--drafter", f"{run}/A", "--reader", f"{run}/B", "--drafter-row", "a", "--reader-row", "b",
            "--no-progress",
            "--out", LAYOUT.ablation_eval_dir(wildcards.family, wildcards.task, wildcards.variant, wildcards.seed)]


def eval_command(wildcards, input):
    """The `agon eval` arguments of one evaluation (`--system` as `agon eval` names it)."""
    return ["eval", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--system", COLUMNS[wildcards.system].eval_system, "--seed", wildcards.seed,
            *eval_model_flags(wildcards), "--backend", config["eval"]["backend"], "--no-progress",
            "--out", LAYOUT.eval_dir(wildcards.family, wildcards.task, wildcards.system, wildcards.seed)]


def job_folder(wildcards, output):
    """The folder of a train / evaluate job: where its summary.json and resumable state live."""
    return os.path.dirname(output.summary)


def all_eval_summaries():
    """Every evaluation summary table 1 is built from (untrained systems: the first seed)."""
    return [
        LAYOUT.eval_summary(f, t, s, seed)
        for f in FAMILIES
        for t in TASKS
        for s in EVAL_SYSTEMS
        for seed in eval_seeds(s, SEEDS, seeded_bases(FAMILIES[f]))
    ]


def all_train_summaries():
    """Every training run's summary (the report reads their metrics.jsonl too)."""
    return [LAYOUT.train_summary(f, t, m, seed) for f in FAMILIES for t in TASKS for m in TRAIN_METHODS for seed in SEEDS]


def ablation_results():
    """Every ablation variant's training and evaluation summary (results/ablations.csv)."""
    return [
        path(f, t, v, seed)
        for f in FAMILIES
        for t in TASKS
        for v in VARIANTS
        for seed in ABLATIONS["seeds"]
        for path in (LAYOUT.ablation_train_summary, LAYOUT.ablation_eval_summary)
    ]


def related_systems():
    """The columns of results/related.csv (the config's related.methods)."""
    return columns_for_methods(config["related"]["methods"])


def related_results():
    """Every evaluation and training summary results/related.csv is built from."""
    systems = related_systems()
    evals = [LAYOUT.eval_summary(f, t, s, seed) for f in FAMILIES for t in TASKS for s in systems
             for seed in eval_seeds(s, SEEDS, seeded_bases(FAMILIES[f]))]
    runs = [LAYOUT.train_summary(f, t, m, seed) for f in FAMILIES for t in TASKS
            for m in trained_methods_for(systems) for seed in SEEDS]
    return evals + runs


def table_outputs():
    """The default target: table 1 (CSV, its provenance, Markdown) and the figures."""
    return [LAYOUT.table_files("table1").csv, LAYOUT.table_files("table1").provenance, LAYOUT.table_files("table1").md, *LAYOUT.figures(TRAIN_METHODS)]


# ---------------------------------------------------------------- output folders from outputs
# Derived from each job's own outputs (not rebuilt from the config), as the linter asks, so
# the folders stay right wherever the outputs are staged.


def pretrain_out(wildcards, output):
    """`agon toy pretrain --out`: the folder holding A/, B/ and report.json."""
    return os.path.dirname(output.report)


def pretrain_seed(wildcards):
    """`agon toy pretrain --seed`: training seed S's base models are pretrained with
    toy.seed + S (seed 0's pair is the one toy.seed alone made)."""
    return int(config["toy"]["seed"]) + int(wildcards.seed)


def figures_dir(wildcards, output):
    """Where `agon report` writes the figures: the folder of the first declared figure."""
    return os.path.dirname(output.figures[0])


# ---------------------------------------------------------------- the regime (results/regime.csv)
# table 1's baselines on the regime's split, GRPO at a budget fixed up front
# (workflow/rules/regime.smk; agon.regime)

REGIME_TRAINED = trained_methods_for(REGIME_SYSTEMS)


def regime_train_inputs(wildcards):
    """A regime GRPO run: its snapshot, the split, the base models (no reference run: its
    budget is fixed up front)."""
    return {
        "config": LAYOUT.snapshot(wildcards.family, wildcards.task, "regime_train"),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
    }


def regime_train_command(wildcards, input):
    """`agon train` of the regime's run of a method, without --match-run."""
    return ["train", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--method", wildcards.rmethod, "--seed", wildcards.seed,
            "--out", LAYOUT.regime_train_dir(wildcards.family, wildcards.task, wildcards.rmethod, wildcards.seed)]


def regime_eval_inputs(wildcards):
    """A regime evaluation: the regime's eval snapshot, the split, the base models, and for a
    trained system the regime's run."""
    inputs = {
        "config": LAYOUT.snapshot(wildcards.family, wildcards.task, "regime_eval"),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
    }
    train = COLUMNS[wildcards.system].train
    if train:
        inputs["run"] = LAYOUT.regime_train_summary(wildcards.family, wildcards.task, train, wildcards.seed)
    return inputs


def regime_eval_command(wildcards, input):
    """`agon eval` of a regime system, as table 1's evaluation of it with the regime's run."""
    return ["eval", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--system", COLUMNS[wildcards.system].eval_system, "--seed", wildcards.seed,
            *eval_model_flags(wildcards, LAYOUT.regime_train_dir), "--backend", config["eval"]["backend"],
            "--no-progress",
            "--out", LAYOUT.regime_eval_dir(wildcards.family, wildcards.task, wildcards.system, wildcards.seed)]


def regime_results():
    """Every summary results/regime.csv is built from: each regime system's evaluation at its
    seeds and each regime run."""
    evals = [LAYOUT.regime_eval_summary(f, t, s, seed) for f in FAMILIES for t in TASKS for s in REGIME_SYSTEMS
             for seed in eval_seeds(s, SEEDS, seeded_bases(FAMILIES[f]))]
    runs = [LAYOUT.regime_train_summary(f, t, m, seed) for f in FAMILIES for t in TASKS for m in REGIME_TRAINED
            for seed in SEEDS]
    return evals + runs


# ---------------------------------------------------------------- the positive control
# results/control.csv, control_pilot.csv, control_curriculum.csv (workflow/rules/control.smk):
# the config's `control` section, a world of its own (agon.config.control_config)

CONTROL = config["control"]
CONTROL_MEASURES = [f"{m}_{d}" for m in ("cascade", "robust") for d in CONTROL_DIRECTIONS]
CONTROL_STAGES = ["base", *CONTROL["schemes"], *(f"lr{i}" for i in range(len(CONTROL["pilot"]["learning_rates"])))]


# what the control's pretrain and evaluations read, so that a change to its training (the
# learning rate, say) neither retrains its base pair nor remeasures it
CONTROL_SNAPSHOT_KEEP = ["out_dir", "cpu_kernels", "families", "tasks", "methods", "grading"]
CONTROL_SNAPSHOT_SECTIONS = {"pretrain": ["toy"], "eval": ["eval"]}


def control_snapshot_params(wildcards):
    """An arm's config for one stage: ``pretrain`` or ``eval`` (only the sections those read),
    or a training stage's (a scheme, or the pilot's ``lr{i}``)."""
    stage = wildcards.cstage
    scheme, lr = control_stage(config, "base" if stage in CONTROL_SNAPSHOT_SECTIONS else stage)
    cfg = control_config(config, LAYOUT.control_models(wildcards.arm), scheme, wildcards.arm, lr)
    if stage in CONTROL_SNAPSHOT_SECTIONS:
        cfg = {k: cfg[k] for k in CONTROL_SNAPSHOT_KEEP + CONTROL_SNAPSHOT_SECTIONS[stage] if k in cfg}
    return _canonical(cfg)


def control_models_of(arm, stage, seed):
    """The model folders a control measure runs: the base pair, or a stage's trained pair."""
    if stage == "base":
        return f"{LAYOUT.control_models(arm)}/A", f"{LAYOUT.control_models(arm)}/B"
    run = LAYOUT.control_train_dir(arm, stage, seed)
    return f"{run}/A", f"{run}/B"


def control_eval_inputs(wildcards):
    """A control measure waits for its arm's snapshot and base pair and, for a stage, its run."""
    arm = wildcards.arm
    inputs = {"config": LAYOUT.control_snapshot(arm, "eval"), "models": f"{LAYOUT.control_models(arm)}/report.json"}
    if wildcards.scheme != "base":
        inputs["run"] = LAYOUT.control_train_summary(arm, wildcards.scheme, wildcards.seed)
    return inputs


def control_eval_command(wildcards, input):
    """`agon eval`: a direction's cascade (its drafter drafts, its reader reads), or that
    direction's reader on the fixed hidden-error drafts."""
    measure, direction = wildcards.measure.split("_")
    pair = dict(zip("ab", control_models_of(wildcards.arm, wildcards.scheme, wildcards.seed)))
    drafter, reader = CONTROL_DIRECTIONS[direction]
    models = (["--drafter", pair[drafter], "--reader", pair[reader], "--drafter-row", drafter, "--reader-row", reader]
              if measure == "cascade" else ["--model", pair[reader], "--model-row", reader])
    system = "agon" if measure == "cascade" else "robust_read"
    return ["eval", "--config", input.config, "--family", CONTROL_FAMILY, "--task", CONTROL["task"]["name"],
            "--system", system, "--seed", wildcards.seed, *models, "--no-progress",
            "--out", LAYOUT.control_eval_dir(wildcards.arm, wildcards.scheme, wildcards.measure, wildcards.seed)]


def control_train_command(wildcards, input):
    """`agon train --method agon` with the stage's config."""
    return ["train", "--config", input.config, "--family", CONTROL_FAMILY, "--task", CONTROL["task"]["name"],
            "--method", "agon", "--seed", wildcards.seed,
            "--out", LAYOUT.control_train_dir(wildcards.arm, wildcards.scheme, wildcards.seed)]


def control_results(arm, seeds, stages, measures=CONTROL_MEASURES, runs_only=()):
    """Every summary an arm's table is built from: the runs of each stage but ``base`` and the
    measures of each stage at each seed (``runs_only``: stages trained, never measured)."""
    runs = [LAYOUT.control_train_summary(arm, s, k) for s in [*stages, *runs_only] if s != "base" for k in seeds]
    evals = [LAYOUT.control_eval_summary(arm, s, m, k) for s in stages for m in measures for k in seeds]
    return runs + evals


def control_pilot_results():
    """The pilot: base, agon and independent at the pilot seed, and independent at each rate."""
    rates = [f"lr{i}" for i in range(len(CONTROL["pilot"]["learning_rates"]))]
    return control_results("drafter", [CONTROL["pilot"]["seed"]], ["base", "agon", "independent"],
                           [m for m in CONTROL_MEASURES if m.startswith("cascade")], rates)
