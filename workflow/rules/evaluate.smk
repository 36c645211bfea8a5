# One evaluation per (family, task, system, seed) on the config's eval split (table 1).
# samples.jsonl is the evaluation's resumable state, written next to summary.json but not a
# declared output: see workflow/scripts/resumable.py.


rule evaluate:
    """`agon eval`: per-sample samples.jsonl and a summary.json with pass@k and intervals."""
    input:
        unpack(eval_inputs),
    output:
        summary=LAYOUT.eval_summary("{family}", "{task}", "{system}", "{seed}"),
    log:
        LAYOUT.log("eval/{family}/{task}/{system}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("eval/{family}/{task}/{system}/seed{seed}")
    params:
        folder=job_folder,
        state=["samples.jsonl"],
        command=eval_command,
    conda:
        "../envs/agon.yaml"
    threads: res("evaluate", "threads")
    resources:
        mem_mb=res("evaluate", "mem_mb"),
        runtime=res("evaluate", "runtime"),
        gpu=res("evaluate", "gpus"),
    script:
        "../scripts/resumable.py"
