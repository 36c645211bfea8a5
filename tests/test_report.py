"""`agon report` on synthetic results written by the test in the layout the workflow uses.

Every expected number is recomputed here from the synthetic samples the test wrote, never
hard-coded: pooled pass@1, the headline ratios, the compute columns, the figures' files.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
import yaml

from agon.config import config_hash, validate_config
from agon.figures import hard_curve, win_rates
from agon.methods import COLUMNS, columns_for_methods
from agon.report import build_report
from agon.results import Layout, problem_counts

ALL_METHODS = [
    "base",
    "base_cascade",
    "moa",
    "grpo",
    "grpo_cascade",
    "agon",
    "agon_rev",
    "agon_single",
]
# true success rates of the synthetic systems (the ordering of the paper's claim)
RATES = {
    "base": 0.3,
    "base_b": 0.25,
    "base_cascade": 0.35,
    "moa": 0.34,
    "grpo": 0.4,
    "grpo_b": 0.3,
    "grpo_cascade": 0.45,
    "agon": 0.7,
    "agon_rev": 0.65,
    "agon_single": 0.5,
    "agon_single_b": 0.45,
}


def make_config(
    out_dir: Path, families=("fam1",), tasks=("arith",), seeds=(0, 1), methods=ALL_METHODS
) -> dict:
    cfg = {
        "out_dir": str(out_dir),
        "seeds": list(seeds),
        "families": [
            {"name": f, "model_a": {"model": "a"}, "model_b": {"model": "b"}} for f in families
        ],
        "tasks": [{"name": t, "params": {}} for t in tasks],
        "methods": list(methods),
        "eval": {"n_samples": 4, "k": [1], "bootstrap": 200},
    }
    return validate_config(cfg)


def write_synthetic(
    cfg: dict, layout: Layout, n_problems: int = 30, rng_seed: int = 0, with_ids: bool = True
) -> dict:
    """Write samples.jsonl / summary.json per eval and metrics.jsonl / summary.json per run.

    Returns {(family, task, system): {problem_id: [correct, ...]}} pooled over seeds."""
    rng = random.Random(rng_seed)
    truth: dict = {}
    n = cfg["eval"]["n_samples"]
    systems = columns_for_methods(cfg["methods"])
    for fam in cfg["families"]:
        for task in cfg["tasks"]:
            f, t = fam["name"], task["name"]
            for s in systems:
                for seed in cfg["seeds"]:
                    d = Path(layout.eval_dir(f, t, s, seed))
                    d.mkdir(parents=True, exist_ok=True)
                    lines, n_correct = [], 0
                    for i in range(n_problems):
                        for j in range(n):
                            # correct: True / False / None (ungraded, counts as a failure)
                            u = rng.random()
                            c = None if u > 0.98 else (rng.random() < RATES[s])
                            truth.setdefault((f, t, s), {}).setdefault(f"p{i}", []).append(
                                c is True
                            )
                            n_correct += c is True
                            row = {"correct": c, "total_tokens": 10 + j}
                            if with_ids:
                                row["problem_id"] = f"p{i}"
                            lines.append(json.dumps(row))
                    (d / "samples.jsonl").write_text("\n".join(lines) + "\n")
                    p1 = n_correct / (n_problems * n)
                    summary = {
                        "pass@1": p1,
                        "pass@1_se": 0.01,
                        "pass@1_lo": p1 - 0.05,
                        "pass@1_hi": p1 + 0.05,
                        "n_problems": n_problems,
                        "total_generated_tokens": 1000 + seed,
                        "session_wall_s": 36.0,
                    }
                    (d / "summary.json").write_text(json.dumps(summary))
            for m in ("grpo", "agon"):
                if not any(COLUMNS[s].train == m for s in systems):
                    continue
                for seed in cfg["seeds"]:
                    d = Path(layout.train_dir(f, t, m, seed))
                    d.mkdir(parents=True, exist_ok=True)
                    rows = []
                    for step in range(10):
                        row = {"step": step, "tokens_generated": 100}
                        if step % 3 == 0:
                            slope = 0.03 if m == "agon" else 0.015
                            row["eval/hard_pass@1/A"] = 0.3 + slope * step
                            row["eval/hard_pass@1/B"] = 0.25 + slope * step
                        if m == "agon":
                            dr, rd = ("A", "B") if step % 2 == 0 else ("B", "A")
                            row[f"{dr}->{rd}/duel/drafter_wins"] = 0.2
                            row[f"{dr}->{rd}/duel/reader_wins"] = 0.5
                            row[f"{dr}->{rd}/duel/ties"] = 0.3
                        rows.append(json.dumps(row))
                    (d / "metrics.jsonl").write_text("\n".join(rows) + "\n")
                    (d / "summary.json").write_text(
                        json.dumps({"tokens_generated": 1000 * (seed + 1), "wall_s": 7200.0})
                    )
    return truth


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


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


def test_win_rates_from_direction_outcomes():
    rows = [
        {
            "step": 0,
            "A->B/duel/drafter_wins": 0.25,
            "A->B/duel/reader_wins": 0.5,
            "A->B/duel/ties": 0.25,
        },
        {
            "step": 1,
            "B->A/duel/drafter_wins": 0.1,
            "B->A/duel/reader_wins": 0.6,
            "B->A/duel/ties": 0.3,
        },
        {"step": 2, "A->B/duel/drafter_wins": float("nan"), "A->B/duel/reader_wins": float("nan")},
        # role_schedule both: two directions in one step, averaged per model
        {
            "step": 3,
            "A->B/duel/drafter_wins": 0.2,
            "A->B/duel/reader_wins": 0.4,
            "B->A/duel/drafter_wins": 0.3,
            "B->A/duel/reader_wins": 0.6,
        },
    ]
    assert win_rates(rows, "A") == (
        [0.0, 1.0, 3.0],
        [0.25, 0.6, pytest.approx((0.2 + 0.6) / 2)],
    )
    assert win_rates(rows, "B") == (
        [0.0, 1.0, 3.0],
        [0.5, 0.1, pytest.approx((0.4 + 0.3) / 2)],
    )
    assert win_rates(rows, "ties") == ([0.0, 1.0], [0.25, 0.3])


def test_hard_curve_uses_cumulative_tokens_at_eval_steps():
    rows = [{"step": i, "tokens_generated": 10 * (i + 1)} for i in range(5)]
    rows[0]["eval/hard_pass@1/A"] = 0.2
    rows[3]["eval/hard_pass@1/A"] = 0.4
    steps, toks, ys = hard_curve(rows, "A")
    assert steps == [0.0, 3.0] and ys == [0.2, 0.4]
    # an evaluation on row s scores the model after s updates: the tokens of the rows before it
    assert toks == [0.0, 10.0 + 20 + 30]
    assert hard_curve(rows, "B") == ([], [], [])


def trainer_rows(steps: int, every: int, tokens: int, rate: float) -> list[dict]:
    """metrics.jsonl rows as the trainers write them with train.eval_every (agon.training.probe):
    evaluations before the updates of steps 0, every, ... and a last row after the final update."""
    rows = []
    for s in range(steps):
        row = {
            "step": s,
            "tokens_generated": tokens,
            "A/drafter/correct": 0.9,
            "B/drafter/correct": 0.9,
        }
        if s % every == 0:
            row.update(
                {
                    "eval/hard_pass@1/A": rate * s,
                    "eval/hard_pass@1/B": rate * s / 2,
                    "time/eval_s": 0.1,
                }
            )
        rows.append(row)
    rows.append(
        {
            "step": steps,
            "tokens_generated": 0,
            "eval/hard_pass@1/A": rate * steps,
            "eval/hard_pass@1/B": rate * steps / 2,
        }
    )
    return rows


def test_training_curves_plot_the_trainers_hard_split_evaluations(tmp_path, monkeypatch):
    """The figure draws the logged hard-split points (not training correctness), against step and
    tokens."""
    from agon import figures

    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "grpo", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5)
    runs = {"agon": trainer_rows(10, 5, 300, 0.04), "grpo": trainer_rows(10, 5, 100, 0.02)}
    for m, rows in runs.items():
        Path(layout.train_metrics("fam1", "arith", m, 0)).write_text(
            "\n".join(json.dumps(r) for r in rows) + "\n"
        )
    drawn = {}
    save = figures._save

    def keep(fig, figures_dir, name, meta):
        drawn[name] = fig
        return save(fig, figures_dir, name, meta)

    monkeypatch.setattr(figures, "_save", keep)
    build_report(cfg, layout)
    fig = drawn["training_curves"]
    assert "hard-split pass@1 during training" in fig.legends[0].get_title().get_text()
    ax_step, ax_tok = fig.axes[:2]
    for m, color in (("agon", figures.COLORS["agon"]), ("grpo", figures.COLORS["grpo"])):
        tokens = runs[m][0]["tokens_generated"]
        for model, ls in (("A", "-"), ("B", "--")):
            steps, toks, ys = hard_curve(runs[m], model)
            assert steps == [0.0, 5.0, 10.0] and toks == [0.0, 5.0 * tokens, 10.0 * tokens]
            line = next(
                ln
                for ln in ax_step.get_lines()
                if ln.get_color() == color and ln.get_linestyle() == ls
            )
            assert list(line.get_xdata()) == steps and list(line.get_ydata()) == pytest.approx(
                [100 * y for y in ys]
            )
            line = next(
                ln
                for ln in ax_tok.get_lines()
                if ln.get_color() == color and ln.get_linestyle() == ls
            )
            assert list(line.get_xdata()) == toks


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


def test_training_curves_fall_back_to_training_correctness(tmp_path):
    """Without hard-split evaluations in metrics.jsonl the figure still has curves (labelled)."""
    from agon.figures import train_curve

    rows = [{"step": i, "tokens_generated": 5, "A/drafter/correct": i / 10} for i in range(10)]
    steps, toks, ys = train_curve(rows, "A", smooth=2)
    assert steps == [float(i) for i in range(10)] and toks[-1] == 50.0
    assert ys[3] == pytest.approx((0.2 + 0.3) / 2)
    cfg = make_config(tmp_path / "results", seeds=(0,), methods=["base", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    write_synthetic(cfg, layout, n_problems=5)
    Path(layout.train_metrics("fam1", "arith", "agon", 0)).write_text(
        "\n".join(json.dumps(r) for r in rows) + "\n"
    )
    written = build_report(cfg, layout)
    assert (Path(layout.figures_dir) / "training_curves.png").stat().st_size > 10_000
    assert len(written["figures"]) == 6


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
