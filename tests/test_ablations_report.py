"""`agon report --ablations` on synthetic ablation results in the workflow's layout.

Every expected number is recomputed from what the test wrote: each variant's cascade pass@1
over seeds and problems with its two-level interval, the per-seed values, the paired
difference from the reference variant, and the compute read from the training summaries.
"""

from __future__ import annotations

import json
import runpy
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml
from report_helpers import make_config, rate_matrix, read_csv, write_synthetic_ablations

from agon.config import config_hash
from agon.report.ablations import build_ablations_report, changes_text
from agon.report.compare import RNG
from agon.report.compute import MODEL_COMPUTE
from agon.results import Layout
from agon.stats import percentile_interval, two_level_bootstrap

VARIANTS = [
    {"name": "agon.draft", "agon": {"reward": {"scheme": "agon"}, "reader_group": "draft"}},
    {
        "name": "zero_sum.problem",
        "agon": {"reward": {"scheme": "zero_sum"}, "reader_group": "problem"},
    },
    {"name": "plain"},
]
TRUE_RATES = {"agon.draft": 0.6, "zero_sum.problem": 0.7, "plain": 0.55}


def _config(tmp_path, reference=None, seeds=(0, 1)):
    ablations = {"seeds": list(seeds), "variants": VARIANTS}
    if reference is not None:
        ablations["reference"] = reference
    return make_config(
        tmp_path / "results",
        families=("fam1",),
        tasks=("arith", "toycode"),
        seeds=(0,),
        methods=["base"],
        ablations=ablations,
    )


def test_ablations_table_recounted_from_samples(tmp_path):
    cfg = _config(tmp_path, reference="zero_sum.problem")
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    truth = write_synthetic_ablations(cfg, layout, TRUE_RATES)
    written = build_ablations_report(cfg, layout)
    n_boot = cfg["eval"]["bootstrap"]
    seeds = cfg["ablations"]["seeds"]
    ref = "zero_sum.problem"

    rows = read_csv(layout.table_files("ablations").csv)
    assert [(r["family"], r["task"], r["variant"]) for r in rows] == [
        ("fam1", t, v["name"]) for t in ("arith", "toycode") for v in VARIANTS
    ]
    for r in rows:
        f, t, v = r["family"], r["task"], r["variant"]
        x = rate_matrix(truth[(f, t, v)])
        assert r["changes"] == changes_text(
            next(a for a in VARIANTS if a["name"] == v).get("agon") or {}
        )
        assert float(r["pass@1"]) == pytest.approx(x.mean(), abs=1e-9)
        assert int(r["n_seeds"]) == len(seeds)
        for k, per_seed in zip(seeds, x):
            assert float(r[f"pass@1_seed{k}"]) == pytest.approx(per_seed.mean())
        reps = two_level_bootstrap([x], n_boot=n_boot, seed=RNG["pass@1"])[0]
        assert (float(r["pass@1_lo"]), float(r["pass@1_hi"])) == pytest.approx(
            percentile_interval(reps)
        )
        assert float(r["pass@1_se"]) == pytest.approx(reps.std(ddof=1))
        assert r["reference"] == ref
        if v == ref:
            assert (
                r["minus_reference"] == "" and r["minus_reference_note"] == "the reference variant"
            )
        else:
            x_ref = rate_matrix(truth[(f, t, ref)])
            assert float(r["minus_reference"]) == pytest.approx(x.mean() - x_ref.mean(), abs=1e-9)
            both = two_level_bootstrap(
                [x, x_ref], n_boot=n_boot, seed=RNG["ablation"], shared_seeds=True
            )
            lo, hi = percentile_interval(both[0] - both[1])
            assert (
                float(r["minus_reference_lo"]),
                float(r["minus_reference_hi"]),
            ) == pytest.approx((lo, hi))
            holds_0 = r["minus_reference_note"].startswith("no difference shown")
            assert holds_0 == (lo <= 0 <= hi)
        sums = [
            json.loads(Path(layout.ablation_train_summary(f, t, v, s)).read_text()) for s in seeds
        ]
        for model in ("A", "B"):
            for k in MODEL_COMPUTE:
                expected = [s.get(f"{model}/{k}") for s in sums]
                if None in expected:  # the duel records CPU seconds per run
                    assert r[f"{model}_{k}"] == ""
                else:
                    assert float(r[f"{model}_{k}"]) == pytest.approx(np.mean(expected))
        for k in ("cpu_s", "gpu_s"):
            assert float(r[k]) == pytest.approx(np.mean([s[k] for s in sums]))

    assert rows[0]["changes"] == "reward.scheme=agon reader_group=draft"
    assert rows[2]["changes"] == "(none)"

    md = Path(layout.table_files("ablations").md).read_text()
    assert "[95% interval over training seeds and problems]" in md.splitlines()[0]
    assert f"`{ref}`" in md and "| fam1 | arith | zero_sum.problem |" in md
    line = next(ln for ln in md.splitlines() if ln.startswith("| fam1 | arith | agon.draft |"))
    first = rows[0]
    assert "`reward.scheme=agon reader_group=draft`" in line
    assert f"{100 * float(first['pass@1']):.1f} [" in line
    assert f"{100 * float(first['minus_reference']):+.1f} [" in line
    assert "is not recorded" in md  # the code note, as table 1's

    # the provenance sidecar: written last, lists the inputs, the code versions
    assert [p.name for p in written["provenance"]] == ["ablations.provenance.json"]
    prov = json.loads(Path(layout.table_files("ablations").provenance).read_text())
    assert prov["provenance"]["config_hash"] == config_hash(cfg)
    assert prov["rows"] == len(rows) and prov["reference"] == ref
    expected_inputs = {
        layout.ablation_eval_summary("fam1", t, v["name"], s)
        for t in ("arith", "toycode")
        for v in VARIANTS
        for s in seeds
    }
    assert set(prov["inputs"]) == expected_inputs and len(prov["runs"]) == len(expected_inputs)
    assert set(prov["code_versions"]) == {"unknown"}


def test_one_training_seed_is_said_in_every_difference(tmp_path):
    """With one training run per variant the paired interval covers the problems only; each
    difference says so, whatever its interval, and several seeds drop the caveat."""
    from agon.report.ablations import SINGLE_SEED

    for seeds, said in (((0,), True), ((0, 1), False)):
        cfg = _config(tmp_path / str(len(seeds)), seeds=seeds)
        layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
        write_synthetic_ablations(cfg, layout, TRUE_RATES)
        build_ablations_report(cfg, layout)
        rows = [
            r for r in read_csv(layout.table_files("ablations").csv) if r["variant"] != "agon.draft"
        ]
        assert rows and all((SINGLE_SEED in r["minus_reference_note"]) == said for r in rows)
        if said:
            md = Path(layout.table_files("ablations").md).read_text()
            assert "*one training seed*" in md or "one training seed" in md


def test_reference_defaults_to_the_first_variant_and_must_exist(tmp_path):
    cfg = _config(tmp_path, seeds=(0,))
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic_ablations(cfg, layout, TRUE_RATES, n_problems=5)
    build_ablations_report(cfg, layout)
    rows = read_csv(layout.table_files("ablations").csv)
    assert {r["reference"] for r in rows} == {VARIANTS[0]["name"]}
    cfg["ablations"]["reference"] = "nope"
    with pytest.raises(ValueError, match="not a variant"):
        build_ablations_report(cfg, layout)
    cfg["ablations"]["variants"] = []
    with pytest.raises(ValueError, match="no ablations.variants"):
        build_ablations_report(cfg, layout)


def test_cli_and_workflow_script_write_the_ablations_table(tmp_path):
    from agon.cli import main

    cfg = _config(tmp_path, seeds=(0,))
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic_ablations(cfg, layout, TRUE_RATES, n_problems=5)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["report", "--config", str(path), "--ablations"]) == 0
    assert len(read_csv(layout.table_files("ablations").csv)) == 2 * len(VARIANTS)
    assert not Path(
        layout.table_files("table1").csv
    ).exists()  # table 1 is not built by --ablations

    Path(layout.table_files("ablations").provenance).unlink()
    log = tmp_path / "ablations.log"
    smk = types.SimpleNamespace(params=types.SimpleNamespace(config=cfg), log=[str(log)])
    script = Path(__file__).parents[1] / "workflow" / "scripts" / "ablations.py"
    out, err = sys.stdout, sys.stderr
    try:
        runpy.run_path(str(script), init_globals={"snakemake": smk})
    finally:
        sys.stdout, sys.stderr = out, err
    assert Path(layout.table_files("ablations").provenance).is_file()
    assert "wrote provenance" in log.read_text()
