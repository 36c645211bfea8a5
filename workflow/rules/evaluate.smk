# One evaluation per (family, task, system, seed) on the config's eval split (table 1).


rule evaluate:
    """`agon eval`: per-sample samples.jsonl and a summary.json with pass@k and intervals."""
    input:
        unpack(eval_inputs),
    output:
        samples=LAYOUT.eval_dir("{family}", "{task}", "{system}", "{seed}") + "/samples.jsonl",
        summary=LAYOUT.eval_summary("{family}", "{task}", "{system}", "{seed}"),
    log:
        LAYOUT.log("eval/{family}/{task}/{system}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("eval/{family}/{task}/{system}/seed{seed}")
    params:
        out=LAYOUT.eval_dir("{family}", "{task}", "{system}", "{seed}"),
        cli_system=eval_cli_system,
        models=eval_model_args,
    threads: res("evaluate", "threads")
    resources:
        mem_mb=res("evaluate", "mem_mb"),
        runtime=res("evaluate", "runtime"),
        gpu=res("evaluate", "gpus"),
    shell:
        "OMP_NUM_THREADS={threads} agon eval --config {input.config} --family {wildcards.family}"
        " --task {wildcards.task} --system {params.cli_system} --seed {wildcards.seed}"
        " {params.models} --out {params.out} > {log} 2>&1"
