# results/regime.csv: whether table 1's world sits in the paper's regime (agon/regime.py), read
# on its baselines alone: each base model, MoA, the untrained cascade A drafts -> B reads and
# GRPO, on the config's regime.split (validation_hard: never a test split), at every training
# seed, with table 1's metric (sampled pass@1, eval.n_samples per problem). Not part of the
# default target:
#
#   snakemake --cores all results/regime.csv
#
# This target is built, and results/regime.{csv,md,provenance.json} committed, before any `agon`
# run of a new world: git history then shows the world was fixed before the method was run on
# it. Nothing here waits for an `agon` run, so GRPO cannot be matched to one as table 1's is;
# it trains regime.grpo_steps steps (null: the duel's planned completions per model,
# agon.regime.planned_grpo_steps) with train.budget.match steps. The snapshots are table 1's
# train and eval snapshots with those changes (config_snapshot's stages regime_train and
# regime_eval); the base models and data split are table 1's own.

wildcard_constraints:
    rmethod=_alternation(REGIME_TRAINED) if REGIME_TRAINED else r"(?!)",


rule regime_train:
    """`agon train` of GRPO at the regime's fixed budget (no --match-run)."""
    input:
        unpack(regime_train_inputs),
    output:
        model_a=directory(f"{LAYOUT.regime_train_dir('{family}', '{task}', '{rmethod}', '{seed}')}/A"),
        model_b=directory(f"{LAYOUT.regime_train_dir('{family}', '{task}', '{rmethod}', '{seed}')}/B"),
        summary=LAYOUT.regime_train_summary("{family}", "{task}", "{rmethod}", "{seed}"),
    log:
        LAYOUT.log("regime/{family}/{task}/train/{rmethod}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("regime/{family}/{task}/train/{rmethod}/seed{seed}")
    params:
        folder=job_folder,
        state=["checkpoints", "metrics.jsonl"],
        command=regime_train_command,
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


rule regime_evaluate:
    """`agon eval` of one regime system at one seed on the regime's split."""
    input:
        unpack(regime_eval_inputs),
    output:
        summary=LAYOUT.regime_eval_summary("{family}", "{task}", "{system}", "{seed}"),
    log:
        LAYOUT.log("regime/{family}/{task}/eval/{system}/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("regime/{family}/{task}/eval/{system}/seed{seed}")
    params:
        folder=job_folder,
        state=["samples.jsonl"],
        command=regime_eval_command,
    conda:
        "../envs/agon.yaml"
    threads: res("evaluate", "threads")
    resources:
        mem_mb=res("evaluate", "mem_mb"),
        runtime=res("evaluate", "runtime"),
        gpu=res("evaluate", "gpus"),
    script:
        "../scripts/resumable.py"


rule regime_report:
    """`agon report --regime`: results/regime.csv (+ provenance JSON) and its Markdown."""
    input:
        regime_results(),
    output:
        csv=LAYOUT.table_files("regime").csv,
        md=LAYOUT.table_files("regime").md,
        provenance=LAYOUT.table_files("regime").provenance,
    log:
        LAYOUT.log("regime_report"),
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
        "../scripts/regime.py"
