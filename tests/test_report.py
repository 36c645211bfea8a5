"""`agon report` on synthetic results written by the test in the layout the workflow uses.

Every expected number is recomputed here from the synthetic samples and summaries the test
wrote, never hard-coded: pass@1 over seeds and problems and its two-level interval, the per-seed
values, the ratios and differences, the compute columns, the figures' files.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from report_helpers import (
    ALL_METHODS,
    RATES,
    make_config,
    rate_matrix,
    read_csv,
    write_synthetic,
)

from agon.config import config_hash
from agon.methods import (
    COLUMNS,
    GAINS,
    RELATED,
    columns_for_methods,
    eval_seeds,
    trained_methods_for,
)
from agon.report.compare import RNG, SeedRates, difference_columns, ratio_columns
from agon.report.compute import BUDGET_TOLERANCE, MODEL_COMPUTE
from agon.report.render import COMPARISONS
from agon.report.table1 import build_report, comparison_columns
from agon.results import Layout, problem_counts
from agon.stats import minimal_detectable_effect, percentile_interval, two_level_bootstrap


def _mean(xs):
    return sum(xs) / len(xs)


def _paired_interval(mats, n_boot, rng, combine):
    # systems at the same training seeds are paired seed by seed too (agon.report.compare)
    shared = len({np.atleast_2d(m).shape[0] for m in mats}) == 1
    reps = two_level_bootstrap(mats, n_boot=n_boot, seed=rng, shared_seeds=shared)
    with np.errstate(divide="ignore", invalid="ignore"):
        return percentile_interval(combine(*reps))


def test_table_pass1_over_seeds_and_problems_recounted_from_samples(tmp_path):
    cfg = make_config(tmp_path / "results", families=("fam1", "fam2"), seeds=(0, 1, 2))
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    truth = write_synthetic(cfg, layout)
    written = build_report(cfg, layout)
    n_boot = cfg["eval"]["bootstrap"]
    systems = columns_for_methods(cfg["methods"])

    rows = read_csv(layout.table_files("table1").csv)
    assert [(r["family"], r["task"]) for r in rows] == [("fam1", "arith"), ("fam2", "arith")]
    for r in rows:
        x = {s: rate_matrix(truth[(r["family"], r["task"], s)]) for s in systems}
        expected = {s: float(x[s].mean()) for s in systems}
        for s in systems:
            seeds = eval_seeds(s, cfg["seeds"])
            assert x[s].shape[0] == len(seeds)  # untrained: the first seed only
            assert float(r[f"{s}_pass@1"]) == pytest.approx(expected[s], abs=1e-9)
            assert int(r[f"{s}_n_seeds"]) == len(seeds)
            for k, per_seed in zip(seeds, x[s]):
                assert float(r[f"{s}_pass@1_seed{k}"]) == pytest.approx(per_seed.mean())
            assert all(f"{s}_pass@1_seed{k}" not in r for k in cfg["seeds"] if k not in seeds)
            reps = two_level_bootstrap([x[s]], n_boot=n_boot, seed=RNG["pass@1"])[0]
            lo, hi = percentile_interval(reps)
            assert float(r[f"{s}_pass@1_lo"]) == pytest.approx(lo)
            assert float(r[f"{s}_pass@1_hi"]) == pytest.approx(hi)
            assert float(r[f"{s}_pass@1_se"]) == pytest.approx(reps.std(ddof=1))
            assert r[f"{s}_source"] == "samples"

        for den in ("grpo", "grpo_b", "grpo_cascade"):
            key = f"agon_over_{den}"
            assert float(r[key]) == pytest.approx(expected["agon"] / expected[den], rel=1e-9)
            lo, hi = _paired_interval([x["agon"], x[den]], n_boot, RNG[key], lambda a, b: a / b)
            assert (float(r[f"{key}_lo"]), float(r[f"{key}_hi"])) == pytest.approx((lo, hi))
            assert (r[f"{key}_note"] != "") == (lo <= 1 <= hi)
        # over the stronger GRPO model: the larger mean, and per replicate the larger replicate
        key = "agon_over_max_grpo"
        top = max(expected["grpo"], expected["grpo_b"])
        assert float(r[key]) == pytest.approx(expected["agon"] / top, rel=1e-9)
        lo, hi = _paired_interval(
            [x["agon"], x["grpo"], x["grpo_b"]],
            n_boot,
            RNG[key],
            lambda a, g, b: a / np.maximum(g, b),
        )
        assert (float(r[f"{key}_lo"]), float(r[f"{key}_hi"])) == pytest.approx((lo, hi))
        assert (r[f"{key}_note"] != "") == (lo <= 1 <= hi)

        key = "agon_minus_agon_independent"
        assert float(r[key]) == pytest.approx(
            expected["agon"] - expected["agon_independent"], abs=1e-9
        )
        lo, hi = _paired_interval(
            [x["agon"], x["agon_independent"]], n_boot, RNG[key], lambda a, b: a - b
        )
        assert (float(r[f"{key}_lo"]), float(r[f"{key}_hi"])) == pytest.approx((lo, hi))
        assert (r[f"{key}_note"] != "") == (lo <= 0 <= hi)

        moa_gain = expected["moa"] - expected["base"]
        if r["agon_gain_over_moa_gain"] == "":  # MoA's gain not positive, or its interval holds 0
            assert "not defined" in r["agon_gain_over_moa_gain_note"]
        else:
            gain = (expected["agon"] - expected["base"]) / moa_gain
            assert float(r["agon_gain_over_moa_gain"]) == pytest.approx(gain, rel=1e-6)
            lo, hi = (float(r[f"agon_gain_over_moa_gain_{k}"]) for k in ("lo", "hi"))
            assert (r["agon_gain_over_moa_gain_note"] != "") == (lo <= 1 <= hi)
        # each model alone against its own base: A's trained columns vs base, B's vs base_b
        for _, base, trained_systems in GAINS:
            for s in (x for x in trained_systems if x in expected):
                assert float(r[f"{s}_gain"]) == pytest.approx(
                    expected[s] - expected[base], abs=1e-9
                )
                lo, hi = _paired_interval([x[s], x[base]], n_boot, RNG["gain"], np.subtract)
                assert float(r[f"{s}_gain_lo"]) == pytest.approx(lo)
                assert float(r[f"{s}_gain_hi"]) == pytest.approx(hi)

        # evaluation compute: mean over the seeds each system was evaluated at
        for s in systems:
            evs = [
                json.loads(Path(layout.eval_summary(r["family"], r["task"], s, k)).read_text())
                for k in eval_seeds(s, cfg["seeds"])
            ]
            assert float(r[f"{s}_eval_tokens"]) == pytest.approx(
                _mean([e["total_generated_tokens"] for e in evs])
            )
            assert float(r[f"{s}_eval_wall_h"]) == pytest.approx(
                _mean([e["session_wall_s"] for e in evs]) / 3600
            )

    md = Path(layout.table_files("table1").md).read_text()
    assert md.splitlines()[0].endswith("[95% interval over training seeds and problems]")
    table, rest = md.split("## Comparisons")
    comparisons, rest = rest.split("## Each model alone")
    gains, rest = rest.split("## Per training seed")
    per_seed, rest = rest.split("## Training compute")
    compute, evals = rest.split("## Evaluation compute")
    evals, regime = evals.split("## Regime")  # the regime section: tests/test_regime.py
    assert "| fam1 | arith | base_A |" in regime
    first = rows[0]
    assert table.count("| fam1 | arith |") == 1  # the systems' pass@1 only
    assert f"{100 * float(first['agon_pass@1']):.1f} [" in table
    # the comparisons below it, a line each, in the CSV's order (each ratio's right after
    # agon / grpo's), each with its value
    lines = [ln for ln in comparisons.splitlines() if ln.startswith("| fam1 | arith |")]
    shown = [(key, title, kind) for key, title, kind in COMPARISONS if key in first]
    assert [ln.split(" | ")[2] for ln in lines] == [title for _, title, _ in shown]
    assert [key for key, _, _ in shown[:4]] == [
        "agon_over_grpo",
        "agon_over_grpo_b",
        "agon_over_max_grpo",
        "agon_over_grpo_cascade",
    ]
    for (key, _, kind), line in zip(shown, lines):
        scale, digits = (1, 0.005) if kind == "ratio" else (100, 0.05)  # as the cell rounds
        cell = float(line.split(" | ")[3].split(" [")[0])
        assert cell == pytest.approx(scale * float(first[key]), abs=digits + 1e-9)
    assert gains.count("| fam1 | arith | A |") == 1 and gains.count("| fam1 | arith | B |") == 1
    assert (
        f"{100 * float(first['grpo_b_pass@1']):.1f}; {100 * float(first['grpo_b_gain']):+.1f} ["
        in gains
    )
    trained_systems = [s for s in systems if COLUMNS[s].train]
    assert per_seed.count("| fam1 | arith |") == len(trained_systems)
    agon_line = next(ln for ln in per_seed.splitlines() if ln.startswith("| fam1 | arith | agon |"))
    for k in cfg["seeds"]:
        assert f"| {100 * float(first[f'agon_pass@1_seed{k}']):.1f} |" in agon_line
    assert evals.count("| fam1 | arith |") == len(systems)

    prov = json.loads(Path(layout.table_files("table1").provenance).read_text())
    assert prov["provenance"]["config_hash"] == config_hash(cfg)
    assert prov["rows"] == 2
    # every evaluation the table read, untrained systems at the first seed only
    assert len(prov["inputs"]) == 2 * sum(len(eval_seeds(s, cfg["seeds"])) for s in systems)

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


def test_training_compute_columns_from_the_run_summaries(tmp_path):
    """Per trained method and model the means over seeds of the summaries' keys, GRPO's budget
    against Agon, and the Markdown's training compute table showing both spent the same."""
    cfg = make_config(
        tmp_path / "results", seeds=(0, 1), methods=["base", "grpo", "agon", "agon_independent"]
    )
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=6)
    build_report(cfg, layout)
    r = read_csv(layout.table_files("table1").csv)[0]
    trained = trained_methods_for(columns_for_methods(cfg["methods"]))
    runs = {
        m: [
            json.loads(Path(layout.train_summary("fam1", "arith", m, s)).read_text())
            for s in cfg["seeds"]
        ]
        for m in trained
    }
    for m, sums in runs.items():
        for model in ("A", "B"):
            for k in MODEL_COMPUTE:
                if all(f"{model}/{k}" in s for s in sums):
                    assert float(r[f"{m}_{model}_{k}"]) == pytest.approx(
                        _mean([s[f"{model}/{k}"] for s in sums])
                    )
                else:  # the duel records CPU seconds per run, not per model
                    assert r[f"{m}_{model}_{k}"] == ""
        for k in ("cpu_s", "gpu_s"):
            assert float(r[f"{m}_{k}"]) == pytest.approx(_mean([s[k] for s in sums]))
        assert float(r[f"{m}_train_tokens"]) == pytest.approx(
            _mean([s["tokens_generated"] for s in sums])
        )
        assert float(r[f"{m}_train_wall_h"]) == pytest.approx(
            _mean([s["wall_s"] for s in sums]) / 3600
        )
    assert r["budget_match"] == "tokens"
    for model in ("A", "B"):
        budgets = [s["budget"] for s in runs["grpo"]]
        assert float(r[f"grpo_{model}_budget_rel_diff"]) == pytest.approx(
            _mean([b[f"{model}/relative_difference"] for b in budgets])
        )
        assert r[f"grpo_{model}_budget_hit_step_cap"] == "False"
        assert r[f"grpo_{model}_budget_note"] == ""  # within the tolerance
        for m in ("grpo", "agon_independent"):
            mine = _mean([s[f"{model}/tokens_generated"] for s in runs[m]])
            theirs = _mean([s[f"{model}/tokens_generated"] for s in runs["agon"]])
            assert float(r[f"{m}_{model}_tokens_vs_agon"]) == pytest.approx(mine / theirs - 1)
    assert "agon_A_budget_rel_diff" not in r and "agon_A_tokens_vs_agon" not in r

    compute = Path(layout.table_files("table1").md).read_text().split("## Training compute")[1]
    compute = compute.split("## Evaluation compute")[0]
    assert compute.count("| fam1 | arith |") == 3 * len(trained)  # A, B and the run
    grpo_a = next(ln for ln in compute.splitlines() if ln.startswith("| fam1 | arith | grpo | A |"))
    assert f"tokens: {100 * float(r['grpo_A_budget_rel_diff']):+.1f}%" in grpo_a
    assert f"{100 * float(r['grpo_A_tokens_vs_agon']):+.1f}%" in grpo_a
    assert "not matched" not in compute


@pytest.mark.parametrize(
    ("miss", "capped"), [({("A", 1): 3 * BUDGET_TOLERANCE}, False), ({("B", 0): -0.2}, True)]
)
def test_a_missed_budget_is_said_in_the_table(tmp_path, miss, capped):
    cfg = make_config(tmp_path / "results", seeds=(0, 1), methods=["base", "grpo", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5, budget_miss=miss)
    build_report(cfg, layout)
    r = read_csv(layout.table_files("table1").csv)[0]
    ((model, seed),) = miss
    other = "B" if model == "A" else "A"
    note = r[f"grpo_{model}_budget_note"]
    assert note.startswith("not matched") and f"{100 * miss[(model, seed)]:+.1f}%" in note
    assert ("step cap" in note) == capped
    assert r[f"grpo_{model}_budget_hit_step_cap"] == str(capped)
    assert r[f"grpo_{other}_budget_note"] == ""
    md = Path(layout.table_files("table1").md).read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith(f"| fam1 | arith | grpo | {model} |"))
    assert "*not matched* (note" in line
    assert f"grpo model {model} budget: {note}" in md


def test_summaries_of_older_code_leave_cells_empty(tmp_path):
    """Training summaries without the per-model keys or a budget: empty cells, no error."""
    cfg = make_config(tmp_path / "results", seeds=(0, 1), methods=["base", "grpo", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5, old_summaries=True)
    build_report(cfg, layout)
    r = read_csv(layout.table_files("table1").csv)[0]
    for m in ("grpo", "agon"):
        sums = [
            json.loads(Path(layout.train_summary("fam1", "arith", m, s)).read_text())
            for s in cfg["seeds"]
        ]
        assert float(r[f"{m}_train_tokens"]) == pytest.approx(
            _mean([s["tokens_generated"] for s in sums])
        )
        for k in ("cpu_s", "gpu_s", *(f"{x}_{k}" for x in ("A", "B") for k in MODEL_COMPUTE)):
            assert r[f"{m}_{k}"] == ""
    assert r["budget_match"] == "" and r["grpo_A_budget_rel_diff"] == ""
    assert r["grpo_A_tokens_vs_agon"] == ""
    assert "none recorded" in Path(layout.table_files("table1").md).read_text()


def test_not_meaningful_numbers_are_said_so(tmp_path, monkeypatch):
    """A ratio over a system at 0 is not defined; a difference of two systems with the same
    samples has every bootstrap replicate at 0, so neither its interval nor its MDE means
    anything: the CSV has a note and no interval or MDE, the Markdown says it in the cell."""
    import report_helpers

    monkeypatch.setitem(report_helpers.RATES, "grpo", 0.0)
    cfg = make_config(
        tmp_path / "results", seeds=(0,), methods=["base", "grpo", "agon", "agon_independent"]
    )
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=6)
    src = Path(layout.eval_samples("fam1", "arith", "agon", 0))
    shutil.copy(src, layout.eval_samples("fam1", "arith", "agon_independent", 0))
    build_report(cfg, layout)
    r = read_csv(layout.table_files("table1").csv)[0]
    assert float(r["grpo_pass@1"]) == 0.0
    assert r["agon_over_grpo"] == "" and r["agon_over_grpo_lo"] == ""
    assert r["agon_over_grpo_note"].startswith("not defined: grpo's pass@1 is 0")
    key = "agon_minus_agon_independent"
    assert float(r[key]) == 0.0 and r[f"{key}_lo"] == r[f"{key}_hi"] == r[f"{key}_mde"] == ""
    assert r[f"{key}_note"].startswith("not meaningful: every bootstrap replicate is +0 points")
    md = Path(layout.table_files("table1").md).read_text()
    table = md.split("## Comparisons")[1].split("## ")[0]
    line = next(ln for ln in table.splitlines() if ln.startswith("| fam1 | arith | agon / grpo |"))
    assert line.endswith("| n/a *not defined* (note 1) |")
    line = next(ln for ln in table.splitlines() if "| agon - agon_independent (points) |" in ln)
    assert "| +0.0 *not meaningful* (note " in line
    n = line.rsplit("(note ", 1)[1].split(")")[0]
    assert f"\n{n}. fam1/arith, agon - agon_independent (points): {r[f'{key}_note']}" in table


def test_ratio_and_difference_columns_from_replicates():
    """Hand-made replicates: an interval at the value, one holding 1 or 0, and a denominator
    whose own interval holds 0 (the ratio's interval is then unbounded and left empty)."""
    p = {"a": 0.6, "b": 0.3}
    num, den = np.full(100, 0.6), np.linspace(0.2, 0.4, 100)
    out = ratio_columns("r", "a", "b", p, np.vstack([num, den]))
    assert out["r"] == pytest.approx(2.0) and out["r_note"] == ""
    assert (out["r_lo"], out["r_hi"]) == pytest.approx(percentile_interval(num / den))
    out = ratio_columns("r", "a", "b", p, np.vstack([den, den[::-1]]))
    assert out["r_note"].startswith("no effect shown: the 95% interval holds 1; not detectable")
    # replicates all one value (two systems alike, problem by problem): no interval, no MDE
    for out in (
        ratio_columns("r", "a", "b", p, np.vstack([den, den])),
        difference_columns("r", "a", "b", p, np.vstack([den, den]), "gain"),
    ):
        assert out["r_note"].startswith("not meaningful: every bootstrap replicate is")
        assert out["r_lo"] is None and out["r_hi"] is None and out["r_mde"] is None
    at_zero = np.r_[np.zeros(10), np.linspace(0.1, 0.4, 90)]  # over 2.5% of replicates at 0
    out = ratio_columns("r", "a", "b", p, np.vstack([num, at_zero]))
    assert out["r"] == pytest.approx(2.0) and out["r_lo"] is None and out["r_hi"] is None
    assert out["r_note"].startswith("interval unbounded: b's 95% interval")
    out = difference_columns("d", "a", "b", p, np.vstack([num, den]), "gain")
    assert out["d"] == pytest.approx(0.3) and out["d_note"] == ""
    out = difference_columns("d", "a", "b", p, np.vstack([den, den[::-1]]), "gain")
    assert out["d_note"].startswith("no gain shown: the 95% interval holds 0; not detectable")


def test_the_max_denominator_is_the_stronger_grpo_model_on_each_replicate():
    """agon / max(grpo, grpo_b) with GRPO's two models close, so that each is the stronger on
    some bootstrap replicates: every replicate divides by the larger of the two replicates (not
    by one model's throughout), the point estimate by the larger of the two means; agon / grpo
    and agon / grpo_b keep their own draws."""
    ids = [f"p{i}" for i in range(60)]
    rng = random.Random(3)

    def series(rate):
        return SeedRates({k: {i: float(rng.random() < rate) for i in ids} for k in range(3)})

    rates = {"agon": series(0.6), "grpo": series(0.36), "grpo_b": series(0.38)}
    mats = {s: v.matrix(sorted(ids)) for s, v in rates.items()}
    p = {s: float(m.mean()) for s, m in mats.items()}
    n_boot = 400
    out = comparison_columns(p, rates, n_boot)
    key = "agon_over_max_grpo"
    assert out[key] == pytest.approx(p["agon"] / max(p["grpo"], p["grpo_b"]))
    agon, grpo, grpo_b = two_level_bootstrap(
        [mats[s] for s in ("agon", "grpo", "grpo_b")],
        n_boot=n_boot,
        seed=RNG[key],
        shared_seeds=True,
    )
    assert 0.1 < np.mean(grpo > grpo_b) < 0.9  # the fixture: each model the stronger at times
    larger = agon / np.maximum(grpo, grpo_b)
    assert (out[f"{key}_lo"], out[f"{key}_hi"]) == percentile_interval(larger)
    assert out[f"{key}_mde"] == pytest.approx(minimal_detectable_effect(larger))
    for one in (grpo, grpo_b):  # neither model's replicates throughout
        assert (out[f"{key}_lo"], out[f"{key}_hi"]) != percentile_interval(agon / one)
    for den in ("grpo", "grpo_b"):
        a, d = two_level_bootstrap(
            [mats["agon"], mats[den]],
            n_boot=n_boot,
            seed=RNG[f"agon_over_{den}"],
            shared_seeds=True,
        )
        interval = (out[f"agon_over_{den}_lo"], out[f"agon_over_{den}_hi"])
        assert interval == percentile_interval(a / d)
    # the larger mean, whichever model has it
    swapped = {**p, "grpo": p["grpo_b"] + 0.1}
    assert comparison_columns(swapped, rates, n_boot)[key] == pytest.approx(
        p["agon"] / swapped["grpo"]
    )


def test_benchmark_file_is_preferred_for_wall_time(tmp_path):
    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5)
    bench = Path(layout.benchmark("train/fam1/arith/agon/seed0"))
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\n1800.0\t0:30:00\t100\n")
    build_report(cfg, layout)
    row = read_csv(layout.table_files("table1").csv)[0]
    assert float(row["agon_train_wall_h"]) == pytest.approx(0.5)
    assert "grpo_pass@1" not in row and "agon_over_grpo" not in row  # grpo not in methods
    assert "moa_pass@1" not in row and "budget_match" not in row


def test_falls_back_to_summaries_when_samples_lack_ids(tmp_path):
    cfg = make_config(tmp_path / "results", seeds=(0, 1), methods=["base", "grpo"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5, with_ids=False)
    build_report(cfg, layout)
    row = read_csv(layout.table_files("table1").csv)[0]
    for s in ("base", "grpo"):
        seeds = eval_seeds(s, cfg["seeds"])
        sums = [
            json.loads(Path(layout.eval_summary("fam1", "arith", s, k)).read_text()) for k in seeds
        ]
        assert row[f"{s}_source"] == "summary"
        assert float(row[f"{s}_pass@1"]) == pytest.approx(_mean([x["pass@1"] for x in sums]))
        for k, x in zip(seeds, sums):
            assert float(row[f"{s}_pass@1_seed{k}"]) == pytest.approx(x["pass@1"])
    # a comparison needs per-problem results: the number without an interval, and why
    assert float(row["grpo_gain"]) == pytest.approx(
        float(row["grpo_pass@1"]) - float(row["base_pass@1"])
    )
    assert row["grpo_gain_lo"] == "" and row["grpo_gain_note"].startswith("no interval")


def test_cli_writes_table_and_figures(tmp_path):
    from agon.cli import main

    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "grpo", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figs"))
    write_synthetic(cfg, layout, n_problems=6)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg | {"resources": {"train": {"threads": 3}}}))
    assert main(["report", "--config", str(path), "--figures", str(tmp_path / "figs")]) == 0
    assert len(read_csv(layout.table_files("table1").csv)) == 1
    assert (tmp_path / "figs" / "duel_dynamics.pdf").is_file()
    # resources do not change results, so they are not part of the table's config hash
    prov = json.loads(Path(layout.table_files("table1").provenance).read_text())
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


def test_seeds_evaluated_on_different_problems_are_intersected():
    rates = SeedRates({0: {"p1": 1.0, "p2": 0.0, "p3": 0.5}, 1: {"p2": 1.0, "p3": 0.0}})
    assert rates.ids() == {"p2", "p3"}
    assert rates.matrix(["p2", "p3"]).tolist() == [[0.0, 0.5], [1.0, 0.0]]


def test_systems_follow_methods():
    assert columns_for_methods(["agon_single", "base"]) == [
        "base",
        "base_b",
        "agon_single",
        "agon_single_b",
    ]
    table1 = [c for c in COLUMNS if COLUMNS[c].method not in RELATED]
    assert columns_for_methods(ALL_METHODS) == table1
    related = columns_for_methods(["grpo", *RELATED])
    assert related[2:] == [c for m in RELATED for c in (m, f"{m}_b", f"{m}_cascade")]
    assert set(RATES) == set(COLUMNS)
    with pytest.raises(ValueError, match="unknown"):
        columns_for_methods(["base", "nope"])


def test_report_flags_results_of_mixed_code(tmp_path):
    """Table 1 says when its runs were made by different code, and names the files in the
    provenance sidecar; with one code version it says so too."""
    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "grpo"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figs"))
    write_synthetic(cfg, layout, n_problems=6)
    build_report(cfg, layout)
    assert "is not recorded" in Path(layout.table_files("table1").md).read_text()

    def stamp(path: Path, fingerprint: str) -> None:
        body = json.loads(path.read_text())
        body["provenance"] = {"code": {"source_sha256": fingerprint}}
        path.write_text(json.dumps(body))

    stale = Path(layout.train_summary("fam1", "arith", "grpo", 0))
    for p in Path(cfg["out_dir"]).rglob("summary.json"):
        stamp(p, "1" * 64)
    build_report(cfg, layout)
    assert (
        "made by the same code (source 111111111111)"
        in Path(layout.table_files("table1").md).read_text()
    )
    stamp(stale, "0" * 64)
    build_report(cfg, layout)
    assert "mixed code versions" in Path(layout.table_files("table1").md).read_text()
    versions = json.loads(Path(layout.table_files("table1").provenance).read_text())[
        "code_versions"
    ]
    assert versions["0" * 64] == [str(stale)] and len(versions) == 2


def test_report_names_the_machines_its_results_were_computed_on(tmp_path):
    """A seeded run reproduces on the same kind of machine only: table 1 names the kind (CPU
    model, torch's CPU kernels, GPUs) and says when its files come from several."""
    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "grpo"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figs"))
    write_synthetic(cfg, layout, n_problems=6)
    build_report(cfg, layout)
    assert (
        "machines these results were computed on are not recorded"
        in Path(layout.table_files("table1").md).read_text()
    )

    def stamp(path: Path, host: dict) -> None:
        body = json.loads(path.read_text())
        body["provenance"] = {"host": {"cpu_model": "AMD EPYC", "cpus": 2, **host}}
        path.write_text(json.dumps(body))

    for p in Path(cfg["out_dir"]).rglob("summary.json"):
        stamp(p, {"cpu_capability": "AVX2"})
    build_report(cfg, layout)
    md = Path(layout.table_files("table1").md).read_text()
    assert "one kind of machine (AMD EPYC, torch CPU kernels AVX2)" in md
    other = Path(layout.train_summary("fam1", "arith", "grpo", 0))
    stamp(other, {"cpu_capability": "AVX512", "gpus": ["NVIDIA H200"]})
    build_report(cfg, layout)
    assert "results from 2 kinds of machine" in Path(layout.table_files("table1").md).read_text()
    kinds = json.loads(Path(layout.table_files("table1").provenance).read_text())["machines"]
    assert kinds["AMD EPYC, torch CPU kernels AVX512, GPUs NVIDIA H200"] == [str(other)]
    assert len(kinds["AMD EPYC, torch CPU kernels AVX2"]) == sum(map(len, kinds.values())) - 1


@pytest.mark.parametrize(
    ("moa", "agon", "defined", "holds_one"),
    [
        (0.2, 0.7, False, None),
        (0.31, 0.7, False, None),
        (0.5, 0.9, True, False),
        (0.6, 0.6, True, True),
    ],
)
def test_moa_ratio_is_defined_only_for_a_clear_moa_gain(moa, agon, defined, holds_one):
    """(agon-base)/(moa-base) is a number only when MoA's gain is positive and its paired
    interval stays above 0; otherwise the table says why it is not defined. A defined ratio
    whose interval holds 1 says that Agon's gain is not shown larger than MoA's."""
    from agon.report.table1 import moa_gain_ratio

    ids = [f"p{i}" for i in range(200)]
    rng = random.Random(0)

    def series(rate, n_seeds=1):
        return SeedRates({k: {i: float(rng.random() < rate) for i in ids} for k in range(n_seeds)})

    rates = {"base": series(0.3), "moa": series(moa), "agon": series(agon, n_seeds=3)}
    p = {k: float(v.matrix(ids).mean()) for k, v in rates.items()}
    out = moa_gain_ratio(p, rates, n_boot=500)
    if defined:
        assert out["agon_gain_over_moa_gain"] == pytest.approx(
            (p["agon"] - p["base"]) / (p["moa"] - p["base"])
        )
        reps = two_level_bootstrap(
            [rates[s].matrix(sorted(ids)) for s in ("agon", "moa", "base")],
            n_boot=500,
            seed=RNG["moa"],
        )
        lo, hi = percentile_interval((reps[0] - reps[2]) / (reps[1] - reps[2]))
        assert (out["agon_gain_over_moa_gain_lo"], out["agon_gain_over_moa_gain_hi"]) == (lo, hi)
        assert (lo <= 1 <= hi) == holds_one
        assert (out["agon_gain_over_moa_gain_note"] != "") == holds_one
        if holds_one:
            assert "not shown larger than MoA's" in out["agon_gain_over_moa_gain_note"]
    else:
        assert out["agon_gain_over_moa_gain"] is None
        assert out["agon_gain_over_moa_gain_note"].startswith("not defined: MoA's gain")


def test_each_cascade_is_read_against_its_reader_alone_on_the_same_problems():
    """`{cascade}_minus_reader`: the cascade's pass@1 minus its reader's alone (B, trained as
    in the cascade), paired on the problems; the reading section shows it with the take-up and
    luck of the audit, and says so where a system had no right answer."""
    from agon.report.mechanism import reading_markdown
    from agon.report.table1 import CASCADE_READERS

    rng = np.random.default_rng(0)
    ids = [f"p{i}" for i in range(60)]

    def rates(rate):
        return SeedRates({k: {i: float(rng.random() < rate) for i in ids} for k in range(3)})

    r = {"agon": rates(0.5), "agon_single_b": rates(0.2), "base_cascade": rates(0.1)}
    r["base_b"] = r["base_cascade"]  # a reader that never departs from its own answer
    p = {k: float(v.matrix(ids).mean()) for k, v in r.items()}
    out = comparison_columns(p, r, 200)
    assert out["agon_minus_reader"] == pytest.approx(p["agon"] - p["agon_single_b"])
    assert out["agon_minus_reader_lo"] > 0  # a 30-point gain, shown
    assert out["base_cascade_minus_reader"] == 0
    assert out["base_cascade_minus_reader_note"].startswith("not meaningful")
    assert "grpo_cascade_minus_reader" not in out  # its systems are not in p
    row = {"family": "toy", "task": "arith", **out}
    row |= {"agon_audit_habit_steps": 40, "agon_audit_habit_steps_taken": 10}
    row |= {"agon_audit_right": 20, "agon_audit_right_with_wrong_work": 1, "agon_oracle": 0.45}
    row |= {"agon_drafts_unanswered": 0.125, "agon_drafts_unanswered_seed0": 0.25}
    row |= {"agon_drafts_unanswered_seed1": 0.0}
    row |= {"base_b_audit_habit_steps": 0, "base_b_audit_habit_steps_taken": 0}
    row |= {"base_b_audit_right": 0, "base_b_audit_right_with_wrong_work": 0}
    md = "\n".join(reading_markdown([row], ["base_b", "agon"], CASCADE_READERS))
    lo, hi = (100 * out[f"agon_minus_reader_{x}"] for x in ("lo", "hi"))
    gain = f"{100 * out['agon_minus_reader']:+.1f} [{lo:+.1f}, {hi:+.1f}]"
    assert "| toy | arith | agon | 25.0 [" in md and f"(40) | {gain} | 45.0 | 5.0 (1/20) |" in md
    assert "| 5.0 (1/20) | 12.5 (25.0, 0.0) |" in md  # the unanswered drafts, each seed's
    assert "| toy | arith | base_b |  |  |  | no right answer |  |" in md
    assert reading_markdown([{"family": "toy", "task": "arith"}], ["agon"], CASCADE_READERS) == []
