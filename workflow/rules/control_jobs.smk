# The positive control's jobs (workflow/rules/control.smk): results/control.csv,
# control_pilot.csv, control_curriculum.csv, from the config's `control` section, a world of its
# own (agon.config.control_config); its stages and measures, what each job waits for, the
# `agon` command it runs, and the summaries each of its tables is built from. Its snapshots
# are in snapshots.smk.

from agon.config import CONTROL_DIRECTIONS, CONTROL_FAMILY

CONTROL = config["control"]
CONTROL_MEASURES = [f"{m}_{d}" for m in ("cascade", "robust") for d in CONTROL_DIRECTIONS]
CONTROL_STAGES = ["base", *CONTROL["schemes"], *(f"lr{i}" for i in range(len(CONTROL["pilot"]["learning_rates"])))]


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
