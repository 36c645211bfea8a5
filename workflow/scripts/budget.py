"""The budget_report rule's entry point: `agon report --budget` on the workflow's config (no
logic here)."""

from agon.report.budget_curve import build_budget_report
from agon.report.write import report_job
from agon.results import Layout

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)
report_job(
    smk.log[0],
    smk.params.config,
    lambda cfg: build_budget_report(cfg, Layout(cfg["out_dir"], smk.params.figures_dir)),
)
