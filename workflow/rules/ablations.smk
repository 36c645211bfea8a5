# results/ablations.csv: the Agon variants the config's `ablations` section lists, each trained
# from the same base models with the same steps as `agon` and its cascade (A drafts, B reads)
# evaluated like table 1's. Not part of the default target:
#
#   snakemake --cores all results/ablations.csv


rule ablation_config:
    """One variant's training config for one (family, task): table 1's train snapshot with its
    agon changes applied (its evaluation reads table 1's eval snapshot); rewritten only when
    its content changes."""
    output:
        LAYOUT.ablation_snapshot("{family}", "{task}", "{variant}"),
    params:
        config=ablation_snapshot_params,
    log:
        LAYOUT.log("config/{family}/{task}/ablation/{variant}"),
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


rule ablation_train:
    """`agon train --method agon` with the variant's config."""
    input:
        unpack(ablation_inputs),
    output:
        model_a=directory(LAYOUT.ablation_train_model("{family}", "{task}", "{variant}", "{seed}", "A")),
        model_b=directory(LAYOUT.ablation_train_model("{family}", "{task}", "{variant}", "{seed}", "B")),
        summary=LAYOUT.ablation_train_summary("{family}", "{task}", "{variant}", "{seed}"),
    log:
        LAYOUT.log("ablations/{family}/{task}/{variant}/train/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("ablations/{family}/{task}/{variant}/train/seed{seed}")
    params:
        folder=job_folder,
        state=["checkpoints", "metrics.jsonl"],
        command=ablation_train_command,
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


rule ablation_eval:
    """`agon eval --system agon` on the variant's two trained models."""
    input:
        unpack(ablation_eval_inputs),
    output:
        summary=LAYOUT.ablation_eval_summary("{family}", "{task}", "{variant}", "{seed}"),
    log:
        LAYOUT.log("ablations/{family}/{task}/{variant}/eval/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("ablations/{family}/{task}/{variant}/eval/seed{seed}")
    params:
        folder=job_folder,
        state=["samples.jsonl"],
        command=ablation_eval_command,
    conda:
        "../envs/agon.yaml"
    threads: res("evaluate", "threads")
    resources:
        mem_mb=res("evaluate", "mem_mb"),
        runtime=res("evaluate", "runtime"),
        gpu=res("evaluate", "gpus"),
    script:
        "../scripts/resumable.py"


rule ablations_report:
    """`agon report --ablations`: results/ablations.csv (+ provenance JSON) and its Markdown."""
    input:
        ablation_results(),
    output:
        csv=LAYOUT.table_files("ablations").csv,
        md=LAYOUT.table_files("ablations").md,
        provenance=LAYOUT.table_files("ablations").provenance,
    log:
        LAYOUT.log("ablations_report"),
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
        "../scripts/ablations.py"
