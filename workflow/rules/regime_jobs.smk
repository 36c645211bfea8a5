# The regime's jobs (workflow/rules/regime.smk; agon.regime): table 1's baselines on the
# regime's split, GRPO at a budget fixed up front; what each job waits for, the `agon` command
# it runs, and the summaries results/regime.csv is built from.

from agon.config import seeded_bases
from agon.methods import COLUMNS, eval_seeds, trained_methods_for
from agon.regime import REGIME_SYSTEMS

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
