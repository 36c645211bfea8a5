# One training run per (family, task, method, seed): the Agon duel, or GRPO (which trains
# model A and model B each alone, for the `grpo` and `grpo_cascade` columns).
# metrics.jsonl and checkpoints/ are the run's resumable state, not declared outputs: see
# workflow/scripts/resumable.py.


rule train:
    """`agon train`: final model folders A/ and B/, per-step metrics.jsonl, summary.json."""
    input:
        unpack(train_inputs),
    output:
        model_a=directory(LAYOUT.train_model("{family}", "{task}", "{method}", "{seed}", "A")),
        model_b=directory(LAYOUT.train_model("{family}", "{task}", "{method}", "{seed}", "B")),
        summary=LAYOUT.train_summary("{family}", "{task}", "{method}", "{seed}"),
    log:
        LAYOUT.log("train/{family}/{task}/{method}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("train/{family}/{task}/{method}/seed{seed}")
    params:
        folder=job_folder,
        state=["checkpoints", "metrics.jsonl"],
        command=train_command,
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
