"""Matched compute (train.budget): GRPO trains each model to the spend of the agon run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agon.config import ConfigError, load_config
from agon.training import logbook
from agon.training import run as train_run
from agon.training.budget import Budget, spent
from agon.training.cost import cpu_seconds, gpus_in_use, measured
from baselines.grpo import GRPOSettings
from tests.duel_helpers import tiny_config


def _rows():
    """Two duel steps (A drafts then reads) and a probe-only row."""
    return [
        {"step": 0, "A/drafter/tokens": 10.0, "A/drafter/completions": 4.0, "A/lr": 1e-3,
         "B/reader/tokens": 30.0, "B/reader/completions": 8.0, "B/lr": 1e-3},
        {"step": 1, "B/drafter/tokens": 12.0, "B/drafter/completions": 4.0, "B/lr": 1e-3,
         "A/reader/tokens": 20.0, "A/reader/completions": 8.0, "A/skipped": 1.0},
        {"step": 2, "eval/hard_pass@1/A": 0.5, "eval/hard_pass@1/B": 0.4},
    ]  # fmt: skip


def test_spent_counts_each_models_own_completions_in_both_roles():
    rows = _rows()
    assert spent(rows, "A", "tokens") == 30.0 and spent(rows, "B", "tokens") == 42.0
    assert spent(rows, "A", "samples") == 12.0 and spent(rows, "B", "samples") == 12.0
    # a skipped update is still a step taken; the probe-only row is not
    assert spent(rows, "A", "steps") == 2.0 and spent(rows, "B", "steps") == 2.0


def test_summary_and_budget_reference_agree(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    summary = logbook.summarize_metrics(path)
    for name in ("A", "B"):
        for match, key in (("tokens", "tokens_generated"), ("samples", "completions")):
            assert summary[f"{name}/{key}"] == spent(_rows(), name, match)
        assert summary[f"{name}/steps"] == 2
    assert summary["A/tokens_trained"] == 0.0  # no trained_tokens logged in these rows
    ref = tmp_path / "summary.json"
    ref.write_text(json.dumps(summary))
    budget = Budget.from_reference(ref, "tokens")
    assert dict(budget.targets) == {"A": 30.0, "B": 42.0}
    ref.write_text(json.dumps({"A/steps": 3}))
    with pytest.raises(ValueError, match="B/steps"):
        Budget.from_reference(ref, "steps")


def test_grpo_needs_the_reference_run_unless_matched_by_steps(tmp_path):
    config = tiny_config(tmp_path, train={"budget": {"match": "tokens"}})
    with pytest.raises(ConfigError, match="--match-run"):
        train_run.prepare(config, "tiny", "parity", "grpo", 0)
    with pytest.raises(ConfigError, match="does not match a budget"):
        train_run.prepare(config, "tiny", "parity", "agon", 0, match_run="x.json")
    steps = tiny_config(tmp_path, train={"budget": {"match": "steps"}})
    _, _, s = train_run.prepare(steps, "tiny", "parity", "grpo", 0)
    assert s.model_steps("A") == s.steps == 2


def test_step_cap_and_scheduler_horizon(tmp_path):
    cfg = load_config(tiny_config(tmp_path, train={"budget": {"max_steps_factor": 2.5}}))
    s = GRPOSettings.from_config(cfg, cfg["families"][0])
    assert s.max_steps == 5
    s.budget_match, s.budget_targets = "tokens", {"A": 100.0, "B": 50.0}
    assert s.model_steps("A") == 5  # the callback stops it at the target
    s.budget_match, s.budget_targets = "steps", {"A": 7.0, "B": 2.0}
    assert (s.model_steps("A"), s.model_steps("B")) == (7, 2)
    assert s.grpo_config(tmp_path / "o", max_steps=7).max_steps == 7


@pytest.mark.parametrize("match", ["samples", "tokens"])
def test_grpo_trains_each_model_to_the_agon_runs_spend(tmp_path, match):
    config = tiny_config(tmp_path, train={"budget": {"match": match}, "checkpoint_every": 0})
    ref = train_run.run(config, "tiny", "parity", "agon", 0, tmp_path / "agon")
    out = tmp_path / "grpo"
    summary = train_run.run(
        config,
        "tiny",
        "parity",
        "grpo",
        0,
        out,
        match_run=tmp_path / "agon" / "summary.json",
    )
    rows = logbook.read_rows(out / "metrics.jsonl")
    per_step = 2 * 4  # problems_per_step x num_generations completions per GRPO step
    for name in ("A", "B"):
        target = ref[f"{name}/completions" if match == "samples" else f"{name}/tokens_generated"]
        got = summary["budget"][f"{name}/spent"]
        assert got == spent(rows, name, match) and got >= target
        last = [r for r in rows if f"{name}/lr" in r][-1]
        step_spend = per_step if match == "samples" else last[f"{name}/drafter/tokens"]
        assert got - step_spend < target  # it stopped after the first step that reached it
        assert not summary["budget"][f"{name}/hit_step_cap"]
        # each Agon model drafted and read: GRPO needs more than the duel's 2 steps to match
        assert summary[f"{name}/steps"] > ref[f"{name}/steps"] == 2
    if match == "samples":
        assert summary["A/completions"] == ref["A/completions"] == 24  # 8 drafts + 16 reads
    assert summary["cpu_s"] > 0 and summary["A/cpu_s"] > 0
    assert (summary["gpu_s"] > 0) == (gpus_in_use() > 0)  # GPU seconds: wall x GPUs held


def test_cpu_seconds_count_the_processes_under_this_one():
    burn = "sum(i * i for i in range(3_000_000))"
    before = cpu_seconds()
    with measured() as cost:
        subprocess.run([sys.executable, "-c", burn], check=True)
    assert cost["cpu_s"] > 0.05 and (cost["gpu_s"] > 0) == (gpus_in_use() > 0)
    assert cpu_seconds() - before >= cost["cpu_s"]
