"""The reduced toy DAG (config/smoke.yaml, the smoke run), run end to end with the real
commands, as a newcomer runs it: `snakemake --cores 2 --configfile config/smoke.yaml` (CI's
workflow check).

Everything is real but tiny: the toy pretrain (a 1-layer model, a few SFT steps), the data
split, GRPO and Agon training (2 steps each), every table-1 system evaluated on a few hard
problems, and the report. The numbers are near chance at this size; what is checked is
that every stage runs, table 1 and the figures come out, and reruns do only what changed.
About 45 s on 2 idle cores (2-4 minutes when they are shared), so it runs in the default
suite: this is CI's end-to-end check of the workflow.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_workflow import dry_run_jobs, snakemake, workdir_with

from agon.methods import COLUMNS, columns_for_methods

SMOKE = "config/smoke.yaml"
ROOT = Path(__file__).resolve().parents[1]
REDUCED = yaml.safe_load((ROOT / SMOKE).read_text())


def run(wd: Path, *args: str, timeout: int = 900):
    t0 = time.perf_counter()
    # --configfile last: it takes every word after it
    res = snakemake(wd, "--cores", "2", *args, "--configfile", SMOKE, timeout=timeout)
    return res, time.perf_counter() - t0


# Over the ~20 s that makes a test `slow`, and kept in the default suite on purpose: it is the
# end-to-end path (pretrain, split, both trainers, every system, the report) that CI must run.
def test_reduced_toy_dag_end_to_end(tmp_path):
    wd = workdir_with(tmp_path, REDUCED, name="smoke.yaml")
    res, wall = run(wd)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    print(f"\nreduced toy DAG: {wall:.1f}s wall")

    # the smoke run's outputs stay in its own folder, apart from the real results
    out, figures = wd / REDUCED["out_dir"], wd / REDUCED["figures_dir"]
    assert out != wd / "results" and not (wd / "results" / "table1.csv").exists()
    with open(out / "table1.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["family"], r["task"]) for r in rows] == [("toy", "arith")]
    systems = columns_for_methods(REDUCED["methods"])
    for s in systems:
        p = float(rows[0][f"{s}_pass@1"])
        assert (
            0.0 <= float(rows[0][f"{s}_pass@1_lo"]) <= p <= float(rows[0][f"{s}_pass@1_hi"]) <= 1.0
        )
        # the table recounts what the evaluation itself wrote
        summary = json.loads((out / f"toy/arith/eval/{s}/seed0/summary.json").read_text())
        assert p == pytest.approx(summary["pass@1"], abs=1e-9)
    for m in ("grpo", "agon", "agon_independent"):
        assert float(rows[0][f"{m}_train_tokens"]) > 0
        assert float(rows[0][f"{m}_train_wall_h"]) > 0
        run_dir = out / f"toy/arith/train/{m}/seed0"
        metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        steps = json.loads((run_dir / "summary.json").read_text())["steps"]
        # train.eval_every 1: both models probed before each update and after the last
        assert [
            r["step"] for r in metrics if "eval/hard_pass@1/A" in r and "eval/hard_pass@1/B" in r
        ] == list(range(steps + 1)), m
        assert steps == 2 or m == "grpo"
    # matched compute: GRPO ran each model to the agon run's tokens (within one step's worth)
    grpo = json.loads((out / "toy/arith/train/grpo/seed0/summary.json").read_text())
    agon = json.loads((out / "toy/arith/train/agon/seed0/summary.json").read_text())
    for name in ("A", "B"):
        assert grpo["budget"]["targets"][name] == agon[f"{name}/tokens_generated"]
        assert grpo[f"{name}/tokens_generated"] >= agon[f"{name}/tokens_generated"]
        assert float(rows[0][f"grpo_{name}_tokens_generated"]) == grpo[f"{name}/tokens_generated"]
    assert (out / "table1.md").read_text().count("| toy | arith |") >= 1
    assert json.loads((out / "table1.provenance.json").read_text())["provenance"]["config_hash"]
    for name in ("pass1_by_system", "training_curves", "duel_dynamics"):
        for ext in ("png", "pdf"):
            assert (figures / f"{name}.{ext}").stat().st_size > 5000
    # every rule wrote its log
    assert (out / "logs/pretrain/seed0.log").is_file() and (out / "logs/report.log").is_file()
    # the workflow's own report: table 1, the figures with their captions, the provenance
    res = snakemake(
        wd, "--report", f"{REDUCED['out_dir']}/report.html", "--configfile", SMOKE, timeout=300
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    page = (out / "report.html").read_text()
    for shown in ("Table 1", "table1.csv", "pass1_by_system", "two-level bootstrap", "Provenance"):
        assert shown in page, shown

    # docs/results.md from this run: table 1 under its commit, each of its jobs' wall time read
    # from the benchmark file its rule wrote; the tables this run did not make, not generated
    docs = subprocess.run(
        [sys.executable, "-m", "agon", "report", "--docs", "--config", SMOKE, "--out", "res.md"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert docs.returncode == 0, docs.stdout + docs.stderr
    page = (wd / "res.md").read_text()
    sidecar = json.loads((out / "table1.provenance.json").read_text())
    n_read = len({p for ps in sidecar["code_versions"].values() for p in ps})
    table1 = page.split("## Table 1\n", 1)[1].split("\n## ", 1)[0]
    assert f"commit: `{sidecar['provenance']['git']['commit'][:12]}`" in table1
    assert f"over the {n_read} jobs it read ({n_read} from Snakemake benchmark files)" in table1
    assert "| toy | arith |" in table1
    related = page.split("## Related methods\n", 1)[1].split("\n## ", 1)[0]
    assert "**not generated**" in related and f"{REDUCED['out_dir']}/related.csv" in related
    # what regenerating cost: every job this run benchmarked, pretraining included
    n_jobs = len(list((out / "benchmarks").rglob("*.tsv")))
    cost = page.split("## Regenerating everything\n", 1)[1]
    assert f"| `{REDUCED['out_dir']}` | {n_jobs} |" in cost, cost

    # a second run with nothing changed does nothing
    res, noop = run(wd)
    assert res.returncode == 0 and "Nothing to be done" in res.stdout + res.stderr
    print(f"no-op rerun: {noop:.1f}s wall")

    # changing the toy family's row reruns its jobs, not the pretrained base models
    cfg = yaml.safe_load((wd / SMOKE).read_text())
    cfg["families"][0]["max_new_tokens"] = 24
    (wd / "config" / "edited.yaml").write_text(yaml.safe_dump(cfg))
    jobs = dry_run_jobs(wd, "--configfile", "config/edited.yaml")
    rules = {j["rule"] for j in jobs}
    assert "pretrain" not in rules and {"train", "evaluate", "report"} <= rules

    # a new family row adds only its own jobs (and the report): the existing family is untouched
    cfg = yaml.safe_load((wd / SMOKE).read_text())
    cfg["families"].append({**cfg["families"][0], "name": "toy2"})
    (wd / "config" / "two.yaml").write_text(yaml.safe_dump(cfg))
    jobs = dry_run_jobs(wd, "--configfile", "config/two.yaml")
    outputs = [o for j in jobs for o in j["output"]]
    assert not any(o.startswith(f"{REDUCED['out_dir']}/toy/") for o in outputs), outputs
    assert sum(o.endswith("summary.json") and "/eval/" in o for o in outputs) == len(systems)
    assert {j["rule"] for j in jobs} == {
        "config_snapshot",
        "data_split",
        "train",
        "evaluate",
        "report",
        "all",
    }
    assert sum(COLUMNS[s].train is not None for s in systems) > 0
