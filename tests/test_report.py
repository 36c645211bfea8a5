"""`agon report` on synthetic results written by the test in the layout the workflow uses.

Every expected number is recomputed here from the synthetic samples the test wrote, never
hard-coded: pooled pass@1, the headline ratios, the compute columns, the figures' files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from report_helpers import ALL_METHODS, make_config, read_csv, write_synthetic

from agon.config import config_hash
from agon.methods import COLUMNS, columns_for_methods
from agon.report import build_report
from agon.results import Layout, problem_counts


def test_table_pass1_ratios_and_compute_recounted_from_samples(tmp_path):
    cfg = make_config(tmp_path / "results", families=("fam1", "fam2"), tasks=("arith", "toycode"))
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    truth = write_synthetic(cfg, layout)
    written = build_report(cfg, layout)

    rows = read_csv(layout.table_csv())
    assert [(r["family"], r["task"]) for r in rows] == [
        (f, t) for f in ("fam1", "fam2") for t in ("arith", "toycode")
    ]
    for r in rows:
        expected = {}
        for s in columns_for_methods(cfg["methods"]):
            per_problem = truth[(r["family"], r["task"], s)]
            # pooled over both seeds: mean over problems of each problem's success fraction
            expected[s] = sum(sum(v) / len(v) for v in per_problem.values()) / len(per_problem)
            assert float(r[f"{s}_pass@1"]) == pytest.approx(expected[s], abs=1e-9)
            assert float(r[f"{s}_pass@1_lo"]) <= expected[s] <= float(r[f"{s}_pass@1_hi"])
            assert float(r[f"{s}_pass@1_se"]) > 0
            assert r[f"{s}_source"] == "samples"
        assert float(r["agon_over_grpo"]) == pytest.approx(
            expected["agon"] / expected["grpo"], rel=1e-6
        )
        assert float(r["agon_over_grpo_cascade"]) == pytest.approx(
            expected["agon"] / expected["grpo_cascade"], rel=1e-6
        )
        moa_gain = expected["moa"] - expected["base"]
        if r["agon_gain_over_moa_gain_note"]:  # MoA's gain not positive, or its interval holds 0
            assert (
                r["agon_gain_over_moa_gain"] == ""
                and "not defined" in r["agon_gain_over_moa_gain_note"]
            )
        else:
            gain = (expected["agon"] - expected["base"]) / moa_gain
            assert float(r["agon_gain_over_moa_gain"]) == pytest.approx(gain, rel=1e-6)
        assert (
            float(r["agon_over_grpo_lo"])
            <= float(r["agon_over_grpo"])
            <= float(r["agon_over_grpo_hi"])
        )
        # each model alone against its own base: A's trained columns vs base, B's vs base_b
        for trained, base in (
            ("grpo", "base"),
            ("agon_single", "base"),
            ("grpo_b", "base_b"),
            ("agon_single_b", "base_b"),
        ):
            assert float(r[f"{trained}_gain"]) == pytest.approx(
                expected[trained] - expected[base], abs=1e-9
            )
            assert (
                float(r[f"{trained}_gain_lo"])
                <= float(r[f"{trained}_gain"])
                <= float(r[f"{trained}_gain_hi"])
            )
        # compute: mean per seed of the runs' summaries (no benchmark files here)
        assert float(r["agon_train_tokens"]) == pytest.approx((1000 + 2000) / 2)
        assert float(r["grpo_train_wall_h"]) == pytest.approx(2.0)
        assert float(r["moa_eval_tokens"]) == pytest.approx(1000.5)
        assert float(r["moa_eval_wall_h"]) == pytest.approx(0.01)

    md = Path(layout.table_md()).read_text()
    table, compute = md.split("## Compute")
    table, gains = table.split("## Each model alone")
    assert table.count("| fam1 | arith |") == 1 and "agon / grpo" in table
    assert gains.count("| fam1 | arith | A |") == 1 and gains.count("| fam1 | arith | B |") == 1
    b = rows[0]
    assert f"{100 * float(b['grpo_b_pass@1']):.1f}; {100 * float(b['grpo_b_gain']):+.1f} [" in gains
    assert compute.count("| fam1 | arith |") == len(columns_for_methods(cfg["methods"]))
    first = rows[0]
    assert f"{100 * float(first['agon_pass@1']):.1f}" in md

    prov = json.loads(Path(layout.table_provenance()).read_text())
    assert prov["provenance"]["config_hash"] == config_hash(cfg)
    assert prov["rows"] == 4

    figs = {p.name for p in written["figures"]}
    assert figs == {
        f"{n}.{e}"
        for n in ("pass1_by_system", "training_curves", "duel_dynamics")
        for e in ("png", "pdf")
    }
    for p in written["figures"]:
        head = p.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if p.suffix == ".png" else head.startswith(b"%PDF")
    # no temp files left behind by the atomic writes
    assert not list(Path(layout.figures_dir).glob(".*")) and not list(
        Path(cfg["out_dir"]).glob(".*tmp")
    )


def test_benchmark_file_is_preferred_for_wall_time(tmp_path):
    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5)
    bench = Path(layout.benchmark("train/fam1/arith/agon/seed0"))
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\n1800.0\t0:30:00\t100\n")
    build_report(cfg, layout)
    row = read_csv(layout.table_csv())[0]
    assert float(row["agon_train_wall_h"]) == pytest.approx(0.5)
    assert "grpo_pass@1" not in row and "agon_over_grpo" not in row  # grpo not in methods
    assert "moa_pass@1" not in row


def test_falls_back_to_summaries_when_samples_lack_ids(tmp_path):
    cfg = make_config(tmp_path / "results", seeds=(0, 1), methods=["base"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5, with_ids=False)
    written = build_report(cfg, layout)
    row = read_csv(layout.table_csv())[0]
    sums = [
        json.loads(Path(layout.eval_summary("fam1", "arith", "base", s)).read_text())
        for s in (0, 1)
    ]
    assert row["base_source"] == "summary"
    assert float(row["base_pass@1"]) == pytest.approx(sum(s["pass@1"] for s in sums) / 2)
    # no trained method: only the pass@1 figure
    assert {p.stem for p in written["figures"]} == {"pass1_by_system"}


def test_cli_writes_table_and_figures(tmp_path, monkeypatch):
    from agon.cli import main

    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "grpo", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figs"))
    write_synthetic(cfg, layout, n_problems=6)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg | {"resources": {"train": {"threads": 3}}}))
    assert main(["report", "--config", str(path), "--figures", str(tmp_path / "figs")]) == 0
    assert len(read_csv(layout.table_csv())) == 1
    assert (tmp_path / "figs" / "duel_dynamics.pdf").is_file()
    # resources do not change results, so they are not part of the table's config hash
    prov = json.loads(Path(layout.table_provenance()).read_text())
    assert prov["provenance"]["config_hash"] == config_hash(
        {k: v for k, v in cfg.items() if k != "resources"}
    )


def test_missing_result_names_the_file(tmp_path):
    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base"])
    with pytest.raises(FileNotFoundError, match="eval/base/seed0"):
        build_report(cfg, Layout(cfg["out_dir"], str(tmp_path / "figs")))


def test_problem_counts_skips_torn_tail_and_rejects_unparseable(tmp_path):
    p = tmp_path / "samples.jsonl"
    p.write_text(
        '{"problem_id": "x", "correct": true}\n{"problem_id": "x", "correct": null}\n'
        '{"problem_id": "y", "corr'
    )
    assert problem_counts([p]) == {"x": (2, 1)}
    q = tmp_path / "noids.jsonl"
    q.write_text('{"correct": true}\n')
    assert problem_counts([q]) is None


def test_systems_follow_methods():
    assert columns_for_methods(["agon_single", "base"]) == [
        "base",
        "base_b",
        "agon_single",
        "agon_single_b",
    ]
    assert columns_for_methods(ALL_METHODS) == list(COLUMNS)
    with pytest.raises(ValueError, match="unknown"):
        columns_for_methods(["base", "nope"])


def test_report_flags_results_of_mixed_code(tmp_path):
    """Table 1 says when its runs were made by different code, and names the files in the
    provenance sidecar; with one code version it says so too."""
    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "grpo"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figs"))
    write_synthetic(cfg, layout, n_problems=6)
    build_report(cfg, layout)
    assert "is not recorded" in Path(layout.table_md()).read_text()

    def stamp(path: Path, fingerprint: str) -> None:
        body = json.loads(path.read_text())
        body["provenance"] = {"code": {"source_sha256": fingerprint}}
        path.write_text(json.dumps(body))

    stale = Path(layout.train_summary("fam1", "arith", "grpo", 0))
    for p in Path(cfg["out_dir"]).rglob("summary.json"):
        stamp(p, "1" * 64)
    build_report(cfg, layout)
    assert "made by the same code (source 111111111111)" in Path(layout.table_md()).read_text()
    stamp(stale, "0" * 64)
    build_report(cfg, layout)
    assert "mixed code versions" in Path(layout.table_md()).read_text()
    versions = json.loads(Path(layout.table_provenance()).read_text())["code_versions"]
    assert versions["0" * 64] == [str(stale)] and len(versions) == 2


@pytest.mark.parametrize(("moa", "defined"), [(0.2, False), (0.31, False), (0.6, True)])
def test_moa_ratio_is_defined_only_for_a_clear_moa_gain(moa, defined):
    """(agon-base)/(moa-base) is a number only when MoA's gain is positive and its paired
    interval stays above 0; otherwise the table says why it is not defined."""
    from agon.report import moa_gain_ratio

    ids = [f"p{i}" for i in range(200)]
    rng = random.Random(0)

    def series(rate):
        return {i: float(rng.random() < rate) for i in ids}

    per = {"base": series(0.3), "moa": series(moa), "agon": series(0.7)}
    p = {k: sum(v.values()) / len(v) for k, v in per.items()}
    out = moa_gain_ratio(p, per, n_boot=500)
    if defined:
        assert out["agon_gain_over_moa_gain"] == pytest.approx(
            (p["agon"] - p["base"]) / (p["moa"] - p["base"])
        )
        assert out["agon_gain_over_moa_gain_lo"] < out["agon_gain_over_moa_gain_hi"]
        assert out["agon_gain_over_moa_gain_note"] == ""
    else:
        assert out["agon_gain_over_moa_gain"] is None
        assert out["agon_gain_over_moa_gain_note"].startswith("not defined: MoA's gain")
