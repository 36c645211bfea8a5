"""The registry is the one list of the methods: a trainer added there with its row reaches the
tables' columns, the figures' colours, the budget and teacher lists the workflow reads, the
config schema's method names and ``related.methods`` default, and the planner, with no other
change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agon.registry import TRAINERS, Helper, Method

ROOT = Path(__file__).resolve().parents[1]

# run before anything reads the registry: agon.methods builds its lists when first imported
PROBE = """
import json
from agon import registry
registry.TRAINERS.rows["fake"] = registry.Method(
    "baselines.cliff:TRAINER", teacher=True, colors=("#123456", "#654321")
)
registry.TRAINERS.register("fake", "baselines.cliff:TRAINER")
from agon import methods
from agon.config import config_schema, load_config
from agon.plan.planner import plan

schema = config_schema()["properties"]
config = load_config("config/config.yaml")
fake_jobs = [j for j in plan(config, "results/related.csv").jobs if j.job.method == "fake"]
print(json.dumps({
    "related_default": config["related"]["methods"],
    "fake_notes": [n for j in fake_jobs if j.job.rule == "train" for n in j.notes],
    "related": list(methods.RELATED),
    "matched": list(methods.BUDGET_MATCHED),
    "teacher": list(methods.TEACHER_METHODS),
    "trained": list(methods.TRAINED_METHODS),
    "columns": {c: methods.COLUMNS[c].color for c in ("fake", "fake_b", "fake_cascade")},
    "gains_a": list(methods.GAINS[0][2]),
    "related_enum": schema["related"]["properties"]["methods"]["items"]["enum"],
    "table1_enum": schema["methods"]["items"]["enum"],
    "trainer": registry.TRAINERS.names(),
}))
"""


def test_a_method_added_to_the_registry_reaches_every_consumer():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert "fake" in seen["related"] and "fake" in seen["matched"] and "fake" in seen["teacher"]
    assert "fake" in seen["trained"] and "fake" in seen["gains_a"] and "fake" in seen["trainer"]
    assert seen["columns"] == {"fake": "#123456", "fake_b": "#654321", "fake_cascade": "#123456"}
    assert "fake" in seen["related_enum"] and "fake" not in seen["table1_enum"]
    # config/config.yaml leaves related.methods out: the default lists every related row
    assert seen["related_default"] == [
        "base", "base_cascade", "grpo", "grpo_cascade", "agon", "cliff", "opd_then_rl", "gar",
        "fake",
    ]  # fmt: skip
    # its row declares no helper work: the planner prices it as GRPO and says so
    assert "no helper work declared for fake: priced as GRPO" in seen["fake_notes"]


def test_related_methods_default_is_the_registrys():
    """Neither the schema file nor the toy config types the related table's method list."""
    from agon.config import config_schema
    from agon.methods import RELATED, RELATED_DEFAULT

    raw = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert "default" not in raw["properties"]["related"]["properties"]["methods"]
    assert (
        "methods" not in (yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["related"])
    )
    default = config_schema()["properties"]["related"]["properties"]["methods"]["default"]
    assert default == list(RELATED_DEFAULT) and default[-len(RELATED) :] == list(RELATED)


def test_every_solo_row_declares_how_the_planner_prices_it():
    """The built-in rows say how they run and what helpers they have (None would be priced as
    GRPO with a note); the helpers name only the config keys of the method's own section."""
    for name, row in TRAINERS.rows.items():
        assert row.runs == "duel" or row.helpers is not None, name
        for h in row.helpers or ():
            assert all(k.split(".")[0] == name for k in h.config_keys), (name, h.config_keys)
        if any(h.model == "teacher" for h in row.helpers or ()):
            assert row.teacher, name


def test_rows_refuse_what_the_planner_cannot_price():
    with pytest.raises(ValueError, match="runs must be one of"):
        Method("x:Y", runs="ray")
    with pytest.raises(ValueError, match="kind must be one of"):
        Helper("think", "{m} thinks")
    with pytest.raises(ValueError, match="over must be one of"):
        Helper("score", "{m}", over="problems")
    with pytest.raises(ValueError, match="only a generate helper has an engine"):
        Helper("score", "{m}", engine="vllm")
    with pytest.raises(ValueError, match="teacher=True"):
        Method("x:Y", helpers=(Helper("score", "teacher scores {m}", model="teacher"),))


def test_the_workflow_reads_the_teacher_and_budget_lists_from_the_registry():
    """No rule or helper keeps its own list of methods (they import agon.methods)."""
    text = "\n".join(p.read_text() for p in (ROOT / "workflow").rglob("*.smk"))
    text += (ROOT / "Snakefile").read_text()
    for name in ("cliff", "opd_then_rl", "gar"):
        assert f'"{name}"' not in text and f"'{name}'" not in text, name
    assert "TEACHER_METHODS" in text
