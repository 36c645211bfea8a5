# Table 1 and the paper figures, gathered from every evaluation and training run; and
# results/related.csv, the methods published beside Agon (snakemake --cores all results/related.csv).


rule report:
    """`agon report`: results/table1.csv (+ provenance JSON), its Markdown, and figures/."""
    input:
        evals=all_eval_summaries(),
        runs=all_train_summaries(),
    output:
        # report(): what `snakemake --report results/report.html` shows, with its caption
        csv=report(LAYOUT.table_files("table1").csv, caption="../report/table1.rst", category="Table 1"),
        md=report(LAYOUT.table_files("table1").md, caption="../report/table1_md.rst", category="Table 1"),
        provenance=report(
            LAYOUT.table_files("table1").provenance, caption="../report/provenance.rst", category="Provenance"
        ),
        figures=[
            report(f, caption=f"../report/{Path(f).stem}.rst", category="Figures") if f.endswith(".png") else f
            for f in LAYOUT.figures(TRAIN_METHODS)
        ],
    log:
        LAYOUT.log("report"),
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
        "../scripts/report.py"


rule related_report:
    """`agon report --related`: results/related.csv (+ provenance JSON), its Markdown and the
    pass@1-against-compute figure (not part of the default target)."""
    input:
        related_results(),
    output:
        csv=LAYOUT.table_files("related").csv,
        md=LAYOUT.table_files("related").md,
        provenance=LAYOUT.table_files("related").provenance,
        figures=LAYOUT.related_figures(),
    log:
        LAYOUT.log("related_report"),
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
        "../scripts/related.py"
