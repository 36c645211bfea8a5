# The toy world's positive control (the config's `control` section, a world of its own). Arm 1,
# results/control.csv: one base pair whose habitual arith error is written hidden or visible
# (the solution marked) at equal rates, with readers that anchor on hidden errors; the readers
# frozen, each model drafts every step; every reward scheme trained at every seed; both directions measured:
# each cascade (its drafter's hidden-error share from its drafts) and each reader against fixed
# hidden-error drafts. results/control_pilot.csv: the pilot seed (the learning rate's choice and
# the expected effect the rule reads). results/control_curriculum.csv: arm 2, exploratory.
# None is part of the default target:
#
#   snakemake --cores all results/control_pilot.csv results/control.csv

wildcard_constraints:
    arm=_alternation(["drafter", "curriculum"]),
    scheme=_alternation(CONTROL_STAGES),
    measure=_alternation(CONTROL_MEASURES),
    cstage=_alternation(["pretrain", "eval", *CONTROL_STAGES]),


rule control_config:
    """An arm's config: ``pretrain``, ``eval`` (only what those read) or a training stage's."""
    output:
        LAYOUT.control_snapshot("{arm}", "{cstage}"),
    params:
        config=control_snapshot_params,
    log:
        LAYOUT.log("control/{arm}/config/{cstage}"),
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
    """`agon toy pretrain` of an arm's world: A and B with visible and hidden errors."""
    input:
        config=LAYOUT.control_snapshot("{arm}", "pretrain"),
    output:
        model_a=directory(f"{LAYOUT.control_models('{arm}')}/A"),
        model_b=directory(f"{LAYOUT.control_models('{arm}')}/B"),
        report=f"{LAYOUT.control_models('{arm}')}/report.json",
    log:
        LAYOUT.log("control/{arm}/pretrain"),
    benchmark:
        LAYOUT.benchmark("control/{arm}/pretrain")
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
    """One stage's duel at one seed, from its arm's base pair."""
    input:
        config=LAYOUT.control_snapshot("{arm}", "{scheme}"),
        models=f"{LAYOUT.control_models('{arm}')}/report.json",
    output:
        model_a=directory(f"{LAYOUT.control_train_dir('{arm}', '{scheme}', '{seed}')}/A"),
        model_b=directory(f"{LAYOUT.control_train_dir('{arm}', '{scheme}', '{seed}')}/B"),
        summary=LAYOUT.control_train_summary("{arm}", "{scheme}", "{seed}"),
    log:
        LAYOUT.log("control/{arm}/train/{scheme}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("control/{arm}/train/{scheme}/seed{seed}")
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
    """One measure of a pair: a direction's cascade, or its reader against the fixed drafts."""
    input:
        unpack(control_eval_inputs),
    output:
        summary=LAYOUT.control_eval_summary("{arm}", "{scheme}", "{measure}", "{seed}"),
    log:
        LAYOUT.log("control/{arm}/eval/{scheme}/{measure}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("control/{arm}/eval/{scheme}/{measure}/seed{seed}")
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
    """`agon report --control control`: results/control.csv (+ provenance JSON) and its
    Markdown. The verdict's rule reads the pilot's effect from results/control_pilot.csv, which
    is committed and not an input: the pilot is run before, on its own, and never rebuilt by
    this target."""
    input:
        control_results("drafter", CONTROL["seeds"], ["base", *CONTROL["schemes"]]),
    output:
        csv=LAYOUT.table_files("control").csv,
        md=LAYOUT.table_files("control").md,
        provenance=LAYOUT.table_files("control").provenance,
    log:
        LAYOUT.log("control_report"),
    params:
        config=snapshot("report"),
        table="control",
    conda:
        "../envs/agon.yaml"
    threads: res("report", "threads")
    resources:
        mem_mb=res("report", "mem_mb"),
        runtime=res("report", "runtime"),
        gpu=res("report", "gpus"),
    script:
        "../scripts/control.py"


use rule control_report as control_pilot_report with:
    input:
        control_pilot_results(),
    output:
        csv=LAYOUT.table_files("control_pilot").csv,
        md=LAYOUT.table_files("control_pilot").md,
        provenance=LAYOUT.table_files("control_pilot").provenance,
    log:
        LAYOUT.log("control_pilot_report"),
    params:
        config=snapshot("report"),
        table="control_pilot",


use rule control_report as control_curriculum_report with:
    input:
        control_results("curriculum", CONTROL["curriculum"]["seeds"], ["base", *CONTROL["schemes"]]),
    output:
        csv=LAYOUT.table_files("control_curriculum").csv,
        md=LAYOUT.table_files("control_curriculum").md,
        provenance=LAYOUT.table_files("control_curriculum").provenance,
    log:
        LAYOUT.log("control_curriculum_report"),
    params:
        config=snapshot("report"),
        table="control_curriculum",
