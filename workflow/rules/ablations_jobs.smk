# The ablations' jobs (workflow/rules/ablations.smk): each variant's training and evaluation,
# what each waits for, the `agon` command it runs, and the summaries results/ablations.csv is
# built from.

from agon.methods import BUDGET_REFERENCE


def ablation_inputs(wildcards):
    """Inputs of an ablation variant's training: its snapshot, the split, the base models."""
    return {
        "config": LAYOUT.ablation_snapshot(wildcards.family, wildcards.task, wildcards.variant),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
    }


def ablation_eval_inputs(wildcards):
    """Inputs of an ablation variant's evaluation: table 1's eval snapshot (a variant changes
    only its training), the split, the base models and its run."""
    return {
        "config": LAYOUT.snapshot(wildcards.family, wildcards.task, "eval"),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
        "run": LAYOUT.ablation_train_summary(
            wildcards.family, wildcards.task, wildcards.variant, wildcards.seed
        ),
    }


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
