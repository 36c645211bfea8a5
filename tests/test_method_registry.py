"""The registry is the one list of the methods: a trainer added there with its row reaches the
tables' columns, the figures' colours, the budget and teacher lists the workflow reads, and the
config schema's method names, with no other change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
from agon.config import _schema

schema = _schema()["properties"]
print(json.dumps({
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


def test_the_workflow_reads_the_teacher_and_budget_lists_from_the_registry():
    """No rule or helper keeps its own list of methods (they import agon.methods)."""
    text = "\n".join(p.read_text() for p in (ROOT / "workflow").rglob("*.smk"))
    text += (ROOT / "Snakefile").read_text()
    for name in ("cliff", "opd_then_rl", "gar"):
        assert f'"{name}"' not in text and f"'{name}'" not in text, name
    assert "TEACHER_METHODS" in text
