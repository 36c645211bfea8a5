# One evaluation per (family, task, system, seed) on the config's eval split (table 1).


rule evaluate:
    """`agon eval`: per-sample samples.jsonl and a summary.json with pass@k and intervals."""
    input:
        unpack(eval_inputs),
    output:
        samples=LAYOUT.eval_samples("{family}", "{task}", "{system}", "{seed}"),
        summary=LAYOUT.eval_summary("{family}", "{task}", "{system}", "{seed}"),
    log:
        LAYOUT.log("eval/{family}/{task}/{system}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("eval/{family}/{task}/{system}/seed{seed}")
    params:
        out=eval_out,
        cli_system=eval_cli_system,
        models=eval_model_args,
    conda:
        "../envs/agon.yaml"
    threads: res("evaluate", "threads")
    resources:
        mem_mb=res("evaluate", "mem_mb"),
        runtime=res("evaluate", "runtime"),
        gpu=res("evaluate", "gpus"),
    shell:
        "OMP_NUM_THREADS={threads} python -m agon eval --config {input.config} --family {wildcards.family}"
        " --task {wildcards.task} --system {params.cli_system} --seed {wildcards.seed}"
        " {params.models} --out {params.out} --no-progress > {log} 2>&1"
