"""The regime_report rule's entry point: `agon report --regime` on the workflow's config (no
logic here)."""

import logging
import sys

from agon.report.regime import build_regime_report
from agon.results import Layout

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)

with open(smk.log[0], "w") as log:
    sys.stdout = sys.stderr = log
    logging.basicConfig(stream=log, level=logging.WARNING)
    cfg = dict(smk.params.config)
    written = build_regime_report(cfg, Layout(cfg["out_dir"]))
    for kind, paths in written.items():
        for p in paths:
            print(f"wrote {kind}: {p}")
