# One training run per (family, task, method, seed): the Agon duel, or GRPO (which trains
# model A and model B each alone, for the `grpo` and `grpo_cascade` columns).


rule train:
    """`agon train`: final model folders A/ and B/, per-step metrics.jsonl, summary.json."""
    input:
        unpack(train_inputs),
    output:
        model_a=directory(LAYOUT.train_model("{family}", "{task}", "{method}", "{seed}", "A")),
        model_b=directory(LAYOUT.train_model("{family}", "{task}", "{method}", "{seed}", "B")),
        metrics=LAYOUT.train_metrics("{family}", "{task}", "{method}", "{seed}"),
        summary=LAYOUT.train_summary("{family}", "{task}", "{method}", "{seed}"),
    log:
        LAYOUT.log("train/{family}/{task}/{method}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("train/{family}/{task}/{method}/seed{seed}")
    params:
        out=train_out,
        agon=AGON,
    conda:
        "../envs/agon.yaml"
    threads: res("train", "threads")
    resources:
        mem_mb=res("train", "mem_mb"),
        runtime=res("train", "runtime"),
        gpu=res("train", "gpus"),
    shell:
        "OMP_NUM_THREADS={threads} {params.agon} train --config {input.config} --family {wildcards.family}"
        " --task {wildcards.task} --method {wildcards.method} --seed {wildcards.seed}"
        " --out {params.out} > {log} 2>&1"
