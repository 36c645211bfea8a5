# results/control.csv: the toy world's positive control (the config's `control` section). One
# pair of base models whose habitual arith error is written visible or hidden at equal rates,
# with readers that anchor on hidden errors; every reward scheme trained at every seed; three
# measures of each trained pair and of the base pair: the cascade, the drafter's hidden-error
# share (from the cascade's drafts) and the reader against fixed hidden-error drafts. Not part
# of the default target:
#
#   snakemake --cores all results/control.csv

wildcard_constraints:
    scheme=_alternation(["base", *CONTROL["schemes"]]),
    measure=_alternation(CONTROL_MEASURES),
    cstage=_alternation(["base", *CONTROL["schemes"]]),


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
