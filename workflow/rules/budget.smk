# results/budget.csv: table 1's trained methods (agon, agon_independent, GRPO token-matched to
# agon) at each multiple of its training budget (the config's budget section; agon.budget_curve),
# each from table 1's base models, their systems evaluated as table 1's, with the take-up of
# right draft steps beside pass@1. Scale 1 is table 1's own runs and evaluations. Not part of
# the default target:
#
#   snakemake --cores all results/budget.csv

wildcard_constraints:
    scale=r"\d+",
    bmethod=_alternation(BUDGET_TRAINED),


rule budget_config:
    """One scale's training config for one (family, task): table 1's train snapshot with
    ``scale x train.steps``; rewritten only when its content changes."""
    output:
        LAYOUT.budget_snapshot("{family}", "{task}", "{scale}"),
    params:
        config=budget_snapshot_params,
    log:
        LAYOUT.log("config/{family}/{task}/budget/x{scale}"),
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


rule budget_train:
    """`agon train` of one method at one scale (GRPO waits for agon's run of that scale)."""
    input:
        unpack(budget_train_inputs),
    output:
        model_a=directory(f"{LAYOUT.budget_train_dir('{family}', '{task}', '{scale}', '{bmethod}', '{seed}')}/A"),
        model_b=directory(f"{LAYOUT.budget_train_dir('{family}', '{task}', '{scale}', '{bmethod}', '{seed}')}/B"),
        summary=LAYOUT.budget_train_summary("{family}", "{task}", "{scale}", "{bmethod}", "{seed}"),
    log:
        LAYOUT.log("budget/{family}/{task}/x{scale}/train/{bmethod}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("budget/{family}/{task}/x{scale}/train/{bmethod}/seed{seed}")
    params:
        folder=job_folder,
        state=["checkpoints", "metrics.jsonl"],
        command=budget_train_command,
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


rule budget_evaluate:
    """`agon eval` of one system at one scale on table 1's split."""
    input:
        unpack(budget_eval_inputs),
    output:
        summary=LAYOUT.budget_eval_summary("{family}", "{task}", "{scale}", "{system}", "{seed}"),
    log:
        LAYOUT.log("budget/{family}/{task}/x{scale}/eval/{system}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("budget/{family}/{task}/x{scale}/eval/{system}/seed{seed}")
    params:
        folder=job_folder,
        state=["samples.jsonl"],
        command=budget_eval_command,
    conda:
        "../envs/agon.yaml"
    threads: res("evaluate", "threads")
    resources:
        mem_mb=res("evaluate", "mem_mb"),
        runtime=res("evaluate", "runtime"),
        gpu=res("evaluate", "gpus"),
    script:
        "../scripts/resumable.py"


rule budget_report:
    """`agon report --budget`: results/budget.csv (+ provenance JSON), its Markdown, the figure."""
    input:
        budget_results(),
    output:
        csv=report(LAYOUT.table_files("budget").csv, caption="../report/budget.rst", category="Budget"),
        md=LAYOUT.table_files("budget").md,
        provenance=LAYOUT.table_files("budget").provenance,
        figures=[
            report(f, caption="../report/budget_figure.rst", category="Budget") if f.endswith(".png") else f
            for f in LAYOUT.budget_figures()
        ],
    log:
        LAYOUT.log("budget_report"),
    params:
        config=snapshot("report"),
        figures_dir=figures_dir,
    conda:
        "../envs/agon.yaml"
    threads: res("report", "threads")
    resources:
        mem_mb=res("report", "mem_mb"),
        runtime=res("report", "runtime"),
        gpu=res("report", "gpus"),
    script:
        "../scripts/budget.py"
