"""The report's figures: training curves and duel dynamics from the trainers' metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import make_config, write_synthetic

from agon.figures import hard_curve, win_rates
from agon.report import build_report
from agon.results import Layout


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
