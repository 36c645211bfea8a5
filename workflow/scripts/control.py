"""The control reports' entry point: `agon report --control TABLE` on the workflow's config (no
logic here)."""

from agon.report.control import build_control_report
from agon.report.write import report_job
from agon.results import Layout

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)
report_job(
    smk.log[0],
    smk.params.config,
    lambda cfg: build_control_report(cfg, Layout(cfg["out_dir"]), smk.params.table),
)
