# One training run per (family, task, method, seed): the Agon duel, or GRPO (which trains
# model A and model B each alone, for the `grpo` and `grpo_cascade` columns).
#
# metrics.jsonl and checkpoints/ are deliberately not declared outputs: Snakemake deletes a
# job's outputs before it reruns, and a run killed mid-way must keep both to resume
# (`--rerun-incomplete`). workflow/scripts/train.py throws them away instead when the run's
# inputs changed since they were written, so a rerun for a new config never resumes stale state.


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
    conda:
        "../envs/agon.yaml"
    threads: res("train", "threads")
    resources:
        mem_mb=res("train", "mem_mb"),
        runtime=res("train", "runtime"),
        gpu=res("train", "gpus"),
    script:
        "../scripts/train.py"
