# results/control.csv: the toy world's positive control (the config's `control` section). One
# pair of base models whose habitual arith error is written visible or hidden at equal rates,
# with readers that anchor on hidden errors; every reward scheme trained at every seed; three
# measures of each trained pair and of the base pair: the cascade, the drafter's hidden-error
# share (from the cascade's drafts) and the reader against fixed hidden-error drafts. Not part
# of the default target:
#
#   snakemake --cores all results/control.csv

CONTROL = config["control"]
CONTROL_MEASURES = {"cascade": "agon", "robust": "robust_read"}  # measure -> `agon eval --system`


wildcard_constraints:
    scheme=_alternation(["base", *CONTROL["schemes"]]),
    measure=_alternation(CONTROL_MEASURES),
    cstage=_alternation(["base", *CONTROL["schemes"]]),


def control_snapshot_params(wildcards):
    """The control's config for one stage: ``base`` (its pretrain and its evaluations) or a
    scheme (that scheme's training runs)."""
    scheme = None if wildcards.cstage == "base" else wildcards.cstage
    return _canonical(control_config(config, LAYOUT.control_models(), scheme))


def control_models_of(scheme, seed):
    """The model folders a control measure runs: the base pair, or a scheme's trained pair."""
    if scheme == "base":
        return f"{LAYOUT.control_models()}/A", f"{LAYOUT.control_models()}/B"
    run = LAYOUT.control_train_dir(scheme, seed)
    return f"{run}/A", f"{run}/B"


def control_eval_inputs(wildcards):
    """A control measure waits for its snapshot, the base pair and, for a scheme, its run."""
    inputs = {"config": LAYOUT.control_snapshot("base"), "models": f"{LAYOUT.control_models()}/report.json"}
    if wildcards.scheme != "base":
        inputs["run"] = LAYOUT.control_train_summary(wildcards.scheme, wildcards.seed)
    return inputs


def control_eval_command(wildcards, input):
    """`agon eval`: the pair's cascade (A drafts, B reads), or B reading the fixed wrong drafts."""
    a, b = control_models_of(wildcards.scheme, wildcards.seed)
    models = (["--drafter", a, "--reader", b, "--drafter-row", "a", "--reader-row", "b"]
              if wildcards.measure == "cascade" else ["--model", b, "--model-row", "b"])
    return ["eval", "--config", input.config, "--family", CONTROL_FAMILY, "--task", CONTROL["task"],
            "--system", CONTROL_MEASURES[wildcards.measure], "--seed", wildcards.seed, *models,
            "--no-progress", "--out", LAYOUT.control_eval_dir(wildcards.scheme, wildcards.measure, wildcards.seed)]


def control_train_command(wildcards, input):
    """`agon train --method agon` with the scheme's config."""
    return ["train", "--config", input.config, "--family", CONTROL_FAMILY, "--task", CONTROL["task"],
            "--method", "agon", "--seed", wildcards.seed,
            "--out", LAYOUT.control_train_dir(wildcards.scheme, wildcards.seed)]


def control_results():
    """Every summary results/control.csv is built from."""
    seeds = CONTROL["seeds"]
    runs = [LAYOUT.control_train_summary(s, seed) for s in CONTROL["schemes"] for seed in seeds]
    evals = [LAYOUT.control_eval_summary(s, m, seed) for s in ["base", *CONTROL["schemes"]]
             for m in CONTROL_MEASURES for seed in seeds]
    return runs + evals


rule control_config:
    """The control's config: ``base`` (pretrain, evaluations) or one scheme's (its runs)."""
    output:
        LAYOUT.control_snapshot("{cstage}"),
    params:
        config=control_snapshot_params,
    log:
        LAYOUT.log("control/config/{cstage}"),
    conda:
        "../envs/agon.yaml"
    threads: 1
    resources:
        mem_mb=res("snapshot", "mem_mb"),
        runtime=res("snapshot", "runtime"),
        gpu=0,
    localrule: True
    script:
        "../scripts/write_config.py"


rule control_pretrain:
    """`agon toy pretrain` of the control world: A and B with visible and hidden errors."""
    input:
        config=LAYOUT.control_snapshot("base"),
    output:
        model_a=directory(f"{LAYOUT.control_models()}/A"),
        model_b=directory(f"{LAYOUT.control_models()}/B"),
        report=f"{LAYOUT.control_models()}/report.json",
    log:
        LAYOUT.log("control/pretrain"),
    benchmark:
        LAYOUT.benchmark("control/pretrain")
    params:
        out=pretrain_out,
    conda:
        "../envs/agon.yaml"
    threads: res("pretrain", "threads")
    resources:
        mem_mb=res("pretrain", "mem_mb"),
        runtime=res("pretrain", "runtime"),
        gpu=res("pretrain", "gpus"),
    shell:
        "OMP_NUM_THREADS={threads} python -m agon toy pretrain --config {input.config} --out {params.out}"
        " > {log} 2>&1"


rule control_train:
    """One scheme's duel at one seed, from the control's base pair."""
    input:
        config=LAYOUT.control_snapshot("{scheme}"),
        models=f"{LAYOUT.control_models()}/report.json",
    output:
        model_a=directory(f"{LAYOUT.control_train_dir('{scheme}', '{seed}')}/A"),
        model_b=directory(f"{LAYOUT.control_train_dir('{scheme}', '{seed}')}/B"),
        summary=LAYOUT.control_train_summary("{scheme}", "{seed}"),
    log:
        LAYOUT.log("control/train/{scheme}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("control/train/{scheme}/seed{seed}")
    params:
        folder=job_folder,
        state=["checkpoints", "metrics.jsonl"],
        command=control_train_command,
        threads_flag="--threads",
    conda:
        "../envs/agon.yaml"
    threads: res("train", "threads")
    resources:
        mem_mb=res("train", "mem_mb"),
        runtime=res("train", "runtime"),
        gpu=res("train", "gpus"),
    script:
        "../scripts/resumable.py"


rule control_eval:
    """One measure of a pair: its cascade, or its reader against the fixed wrong drafts."""
    input:
        unpack(control_eval_inputs),
    output:
        summary=LAYOUT.control_eval_summary("{scheme}", "{measure}", "{seed}"),
    log:
        LAYOUT.log("control/eval/{scheme}/{measure}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("control/eval/{scheme}/{measure}/seed{seed}")
    params:
        folder=job_folder,
        state=["samples.jsonl"],
        command=control_eval_command,
    conda:
        "../envs/agon.yaml"
    threads: res("evaluate", "threads")
    resources:
        mem_mb=res("evaluate", "mem_mb"),
        runtime=res("evaluate", "runtime"),
        gpu=res("evaluate", "gpus"),
    script:
        "../scripts/resumable.py"


rule control_report:
    """`agon report --control`: results/control.csv (+ provenance JSON) and its Markdown."""
    input:
        control_results(),
    output:
        csv=LAYOUT.table_files("control").csv,
        md=LAYOUT.table_files("control").md,
        provenance=LAYOUT.table_files("control").provenance,
    log:
        LAYOUT.log("control_report"),
    params:
        config=snapshot("report"),
    conda:
        "../envs/agon.yaml"
    threads: res("report", "threads")
    resources:
        mem_mb=res("report", "mem_mb"),
        runtime=res("report", "runtime"),
        gpu=res("report", "gpus"),
    script:
        "../scripts/control.py"
