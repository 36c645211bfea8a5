"""`agon train`: fails fast on a bad config, and writes A/, B/, metrics.jsonl, summary.json."""

from __future__ import annotations

import json

import pytest

from agon.config import ConfigError
from agon.training import run as train_run
from tests.duel_helpers import tiny_config


@pytest.fixture
def no_model_loads(monkeypatch):
    """Any attempt to load a model fails the test: config errors must come first. Patched in
    every module that imports ``load_model`` by name too: patching ``hf`` alone would leave
    their own reference (and a module first imported under the patch would keep ``boom``)."""
    import importlib

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the config was checked")

    modules = [  # all imported before any is patched
        importlib.import_module(name)
        for name in (
            "agon.engines.hf",
            "agon.training.shell",
            "baselines.grpo.trainer",
            "baselines.opd_then_rl.trainer",
        )
    ]
    for module in modules:
        monkeypatch.setattr(module, "load_model", boom)


@pytest.mark.parametrize(
    "sections,needle",
    [
        ({"train": {"loss_type": "ppo"}}, "loss_type"),
        ({"agon": {"reward": {"scheme": "friendly"}}}, "scheme"),
        (
            {"agon": {"role_schedule": "both"}, "train": {"problems_per_step": 1}},
            "problems_per_step",
        ),
        ({"train": {"num_generations": 1}}, "num_generations"),
        ({"grpo": {"extra": {"nope": 1}}}, "nope"),
    ],
)
def test_bad_config_fails_before_any_model_loads(
    tmp_path, no_model_loads, sections, needle, capsys
):
    config = tiny_config(tmp_path, **sections)
    method = "grpo" if "grpo" in sections else "agon"
    with pytest.raises(ConfigError, match=needle):
        train_run.run(config, "tiny", "parity", method, 0, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unknown_family_and_cli_exit_code(tmp_path, no_model_loads, capsys):
    from agon.cli import main

    config = tiny_config(tmp_path)
    rc = main(
        [
            "train",
            "--config",
            str(config),
            "--family",
            "nope",
            "--task",
            "parity",
            "--method",
            "agon",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2 and "no family 'nope'" in capsys.readouterr().out


def test_grpo_method_trains_a_and_b_alone(tmp_path):
    config = tiny_config(tmp_path, train={"steps": 1, "checkpoint_every": 0})
    payload = train_run.run(config, "tiny", "parity", "grpo", 0, tmp_path / "out")
    out = tmp_path / "out"
    assert (out / "A" / "config.json").is_file() and (out / "B" / "tokenizer_config.json").is_file()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and "A/drafter/correct" in rows[0] and "B/drafter/correct" in rows[0]
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["method"] == "grpo"
        and summary["tokens_generated"] == payload["tokens_generated"] > 0
    )
    assert summary["provenance"]["config_hash"]
