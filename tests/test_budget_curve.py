"""The budget curve (agon.budget_curve, `agon report --budget`, results/budget.csv): its
section's checks, its paths (scale 1 is table 1's own runs) and its report recomputed from
synthetic evaluations (its jobs: tests/test_workflow.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from report_helpers import _write_eval, make_config, rate_matrix, read_csv, train_summary

from agon.budget_curve import SYSTEMS, TRAINED, budget_changes, budget_section
from agon.report.budget_curve import build_budget_report
from agon.results import Layout

RATES = {
    "agon": 0.4,
    "agon_single_b": 0.3,
    "agon_independent": 0.35,
    "grpo": 0.3,
    "grpo_b": 0.32,
    "grpo_cascade": 0.33,
}


def _config(tmp_path, **budget):
    cfg = make_config(tmp_path / "results", tasks=("arith", "toycode"), seeds=(0, 1, 2))
    cfg["budget"] = {"scales": [1, 4], "seeds": [0, 1], "tasks": ["arith"], **budget}
    return cfg


def _give_drafts(samples: Path, every: int) -> None:
    """Each sample of ``samples`` reads one draft; every ``every``-th (0: none) has no boxed
    answer."""
    rows = [json.loads(ln) for ln in samples.read_text().splitlines()]
    for i, r in enumerate(rows):
        bad = every and i % every == 0
        r["drafts"] = ["1+2=3 3*4=5 ***+*5" if bad else "1+2=3 3*4=5 \\boxed{35}"]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_section_is_checked_against_the_config():
    cfg = {"tasks": [{"name": "arith"}], "seeds": [0, 1], "train": {"steps": 40}}
    assert budget_section(cfg | {"budget": {}}) == {
        "scales": [1],
        "seeds": [0, 1],
        "tasks": ["arith"],
    }
    assert budget_section(cfg | {"budget": {"scales": [16, 1, 4]}})["scales"] == [1, 4, 16]
    with pytest.raises(ValueError, match="toycode"):
        budget_section(cfg | {"budget": {"tasks": ["toycode"]}})
    with pytest.raises(ValueError, match=r"\[5\]"):
        budget_section(cfg | {"budget": {"seeds": [0, 5]}})
    with pytest.raises(ValueError, match="distinct"):
        budget_section(cfg | {"budget": {"scales": [4, 4]}})
    assert budget_changes(cfg, 4) == {"train": {"steps": 160}}


def test_scale_one_is_table_ones_own_runs_and_every_other_has_its_folders():
    lay = Layout("out")
    assert lay.budget_train_summary("toy", "arith", 1, "agon", 2) == lay.train_summary(
        "toy", "arith", "agon", 2
    )
    assert lay.budget_eval_samples("toy", "arith", "1", "grpo", 0) == lay.eval_samples(
        "toy", "arith", "grpo", 0
    )
    x4 = lay.budget_eval_summary("toy", "arith", 4, "grpo", 0)
    assert x4 == "out/toy/arith/budget/x4/eval/grpo/seed0/summary.json"


def test_the_report_reads_each_scale_and_the_audit(tmp_path):
    cfg = _config(tmp_path)
    lay = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    rng, truth = random.Random(0), {}
    for scale in (1, 4):
        for s in SYSTEMS:
            for seed in (0, 1):
                d = Path(lay.budget_eval_dir("fam1", "arith", scale, s, seed))
                rate = RATES[s] + (0.1 if scale == 4 and s == "agon" else 0.0)
                truth.setdefault((scale, s), {})[seed] = _write_eval(
                    d, rng, rate, 20, 4, True, seed
                )
                summary = json.loads((d / "summary.json").read_text())
                summary["audit"] = {
                    "habit_steps": 10 * scale,
                    "habit_steps_taken": 3 + seed,
                    "right": 8,
                    "right_with_wrong_work": 1,
                    "reads": 20,
                    "oracle_right": 9,
                }
                (d / "summary.json").write_text(json.dumps(summary))
                if s in ("agon", "agon_independent"):  # a cascade reads one draft a sample
                    garbled = scale == 4 and s == "agon" and seed == 0
                    _give_drafts(d / "samples.jsonl", every=2 if garbled else 0)
        for m in TRAINED:
            for seed in (0, 1):
                run = Path(lay.budget_train_summary("fam1", "arith", scale, m, seed))
                run.parent.mkdir(parents=True, exist_ok=True)
                run.write_text(json.dumps(train_summary(rng, False, seed)))
    written = build_budget_report(cfg, lay)
    rows = read_csv(lay.table_files("budget").csv)
    steps = cfg["train"]["steps"]
    assert [(r["task"], r["scale"], r["steps"]) for r in rows] == [
        ("arith", "1", str(steps)),
        ("arith", "4", str(4 * steps)),
    ]
    for r in rows:
        scale = int(r["scale"])
        for s in SYSTEMS:
            assert float(r[f"{s}_pass@1"]) == pytest.approx(rate_matrix(truth[(scale, s)]).mean())
        agon, reader = (
            rate_matrix(truth[(scale, "agon")]),
            rate_matrix(truth[(scale, "agon_single_b")]),
        )
        assert float(r["agon_minus_reader"]) == pytest.approx(agon.mean() - reader.mean())
        assert float(r["agon_take_up"]) == pytest.approx((3 + 4) / (2 * 10 * scale))
        assert float(r["agon_luck"]) == pytest.approx(2 / 16)
        assert r["agon_over_max_grpo"] != ""
        # agon's drafter at x4, seed 0, wrote every other draft without a boxed answer
        garbled = 0.5 if scale == 4 else 0.0
        assert float(r["agon_drafts_unanswered_seed0"]) == pytest.approx(garbled)
        assert float(r["agon_drafts_unanswered"]) == pytest.approx(garbled / 2)
        assert float(r["agon_independent_drafts_unanswered"]) == 0.0
        assert r["agon_drafts_n"] == str(2 * 20 * 4) and "grpo_drafts_n" not in r
    md = Path(lay.table_files("budget").md).read_text()
    assert f"| fam1 | arith | x4 | {4 * steps} |" in md and "take-up agon" in md
    reading = md.split("## What reading did")[1]
    x4 = next(ln for ln in reading.splitlines() if ln.startswith("| fam1 | arith | x4 |"))
    assert "| 25.0 (50.0, 0.0) | 0.0 (0.0, 0.0) |" in x4
    assert [p.name for p in written["figures"]] == ["budget.png", "budget.pdf"]
    assert all(p.stat().st_size > 0 for p in written["figures"])
    prov = json.loads(Path(lay.table_files("budget").provenance).read_text())
    assert prov["budget"]["scales"] == [1, 4] and len(prov["runs"]) == 2 * len(TRAINED) * 2
