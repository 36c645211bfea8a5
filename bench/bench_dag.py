"""The workflow's overhead: a rerun with nothing to do, and building the paper's DAG.

``dag.noop_rerun_s``: wall seconds of `snakemake --cores 1` on a finished reduced toy run
(config/smoke.yaml, methods cut to `base` so the setup run is short), i.e.
what a user pays to learn that everything is up to date. ``dag.paper_dry_run_s``: a dry run
of config/paper.yaml (the full DAG, no GPU). Both include Snakemake's own start-up.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"dag.noop_rerun_s": ("<=", 15.0)}


def _snakemake(workdir: Path, *args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(workdir),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=workdir,
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(
            f"snakemake {' '.join(args)} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        )
    return wall, res.stdout + res.stderr


def run() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench_dag_") as tmp:
        wd = Path(tmp)
        (wd / "config").mkdir()
        cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
        cfg["methods"] = ["base"]
        (wd / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
        shutil.copy(REPO / "config" / "paper.yaml", wd / "config" / "paper.yaml")
        _snakemake(wd, "--cores", "2")  # setup: the real (reduced) run
        noop, log = _snakemake(wd, "--cores", "1")
        if "Nothing to be done" not in log:  # e.g. the code changed under the setup run
            raise RuntimeError(
                f"the rerun was not a no-op, so its time is not the metric:\n{log[-3000:]}"
            )
        paper, _ = _snakemake(wd, "-n", "--configfile", "config/paper.yaml")
    return {"dag.noop_rerun_s": noop, "dag.paper_dry_run_s": paper}
