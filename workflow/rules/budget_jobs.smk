# The budget curve's jobs (workflow/rules/budget.smk; agon.budget_curve): table 1's trained methods at
# each multiple of its training budget; what each job waits for, the `agon` command it runs,
# and the summaries results/budget.csv is built from. Scale 1 is table 1's own runs: its paths
# are table 1's (agon.results.Layout.budget_*), so no rule here makes them.

from agon.budget_curve import TRAINED as BUDGET_TRAINED, budget_changes, budget_section, budget_summaries

budget_section(config)  # its checks, when the DAG is built (a bad task or seed fails here)


def budget_snapshot_params(wildcards):
    """Params of the ``budget_config`` rule: table 1's train snapshot of (family, task) with
    the scale's steps (its evaluations read table 1's eval snapshot)."""
    snap = deep_merge(_snapshot("train", wildcards.family, wildcards.task), budget_changes(config, wildcards.scale))
    return _canonical(snap)


def budget_train_inputs(wildcards):
    """A budget run: its snapshot, the split, table 1's base models of its seed, and for a
    budget-matched method the agon run of the same scale and seed."""
    inputs = {
        "config": LAYOUT.budget_snapshot(wildcards.family, wildcards.task, wildcards.scale),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
    }
    if budget_matched(wildcards.bmethod):
        inputs["match"] = LAYOUT.budget_train_summary(
            wildcards.family, wildcards.task, wildcards.scale, BUDGET_REFERENCE, wildcards.seed
        )
    return inputs


def budget_train_command(wildcards, input):
    """`agon train` of one method at one scale (`--match-run`: GRPO, as table 1's)."""
    match = ["--match-run", input.match] if "match" in input.keys() else []
    return ["train", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--method", wildcards.bmethod, "--seed", wildcards.seed, *match,
            "--out", LAYOUT.budget_train_dir(wildcards.family, wildcards.task, wildcards.scale, wildcards.bmethod, wildcards.seed)]


def budget_eval_inputs(wildcards):
    """A budget evaluation: table 1's eval snapshot, the split, the base models, the run."""
    return {
        "config": LAYOUT.snapshot(wildcards.family, wildcards.task, "eval"),
        "split": LAYOUT.split(wildcards.family, wildcards.task),
        **base_model_inputs(wildcards),
        "run": LAYOUT.budget_train_summary(
            wildcards.family, wildcards.task, wildcards.scale, COLUMNS[wildcards.system].train, wildcards.seed
        ),
    }


def budget_eval_command(wildcards, input):
    """`agon eval` of one system at one scale, as table 1's evaluation of it with that run."""
    def train_dir(f, t, m, s):
        return LAYOUT.budget_train_dir(f, t, wildcards.scale, m, s)

    return ["eval", "--config", input.config, "--family", wildcards.family, "--task", wildcards.task,
            "--system", COLUMNS[wildcards.system].eval_system, "--seed", wildcards.seed,
            *eval_model_flags(wildcards, train_dir), "--backend", config["eval"]["backend"], "--no-progress",
            "--out", LAYOUT.budget_eval_dir(wildcards.family, wildcards.task, wildcards.scale, wildcards.system, wildcards.seed)]


def budget_results():
    """Every summary results/budget.csv is built from (agon.budget_curve.budget_summaries)."""
    evals, runs = budget_summaries(config, LAYOUT)
    return evals + runs
