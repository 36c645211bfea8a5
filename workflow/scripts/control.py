"""The control reports' entry point: `agon report --control TABLE` on the workflow's config (no
logic here)."""

import logging
import sys

from agon.report.control import build_control_report
from agon.results import Layout

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)

with open(smk.log[0], "w") as log:
    sys.stdout = sys.stderr = log
    logging.basicConfig(stream=log, level=logging.WARNING)
    cfg = dict(smk.params.config)
    written = build_control_report(cfg, Layout(cfg["out_dir"]), smk.params.table)
    for kind, paths in written.items():
        for p in paths:
            print(f"wrote {kind}: {p}")
