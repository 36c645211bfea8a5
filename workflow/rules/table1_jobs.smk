# Table 1's jobs (workflow/rules/pretrain.smk, train.smk, evaluate.smk, report.smk) and the
# related methods', which run through the same train and evaluate rules: what each job waits
# for (inputs), the `agon` command it runs, and the summaries each table is built from.

from agon.config import seeded_bases
from agon.methods import (
    BUDGET_MATCHED,
    BUDGET_REFERENCE,
    COLUMNS,
    TEACHER_METHODS,
    columns_for_methods,
    eval_seeds,
    trained_methods_for,
)
from agon.packaged_models import PROVENANCE
from agon.training.settings import TrainSettings


def pretrain_seed(wildcards):
    """`agon toy pretrain --seed`: training seed S's base models are pretrained with
    toy.seed + S (seed 0's pair is the one toy.seed alone made)."""
    return int(config["toy"]["seed"]) + int(wildcards.seed)


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
    return method in BUDGET_MATCHED and TrainSettings.from_config(config).budget_match != "steps"


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


def eval_command(wildcards, input):
    """The `agon eval` arguments of one evaluation (`--system` as `agon eval` names it)."""
    return ["eval", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--system", COLUMNS[wildcards.system].eval_system, "--seed", wildcards.seed,
            *eval_model_flags(wildcards), "--backend", config["eval"]["backend"], "--no-progress",
            "--out", LAYOUT.eval_dir(wildcards.family, wildcards.task, wildcards.system, wildcards.seed)]


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
