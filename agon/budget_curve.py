"""The budget curve (``results/budget.csv``): table 1's trained systems at several multiples of
its training budget, to tell a method that needs more steps from one that does not work.

Each scale ``s`` of the config's ``budget.scales`` trains ``agon``, ``agon_independent`` and
GRPO (token-matched to the ``agon`` run of the same scale and seed, as table 1's is) for ``s x
train.steps`` steps from table 1's base models, and evaluates the systems of :data:`SYSTEMS`
as table 1 does (its eval snapshot, its split). Scale 1 is table 1's own runs and evaluations,
reused; every other scale has folders of its own (:meth:`agon.results.Layout.budget_train_dir`).
The mechanism is read beside pass@1: each cascade's take-up of right draft steps on its
reader's always-wrong habits and its luck (:mod:`agon.toy.audit`), and the cascade minus its
reader alone on the same problems.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from agon.methods import trained_methods_for
from agon.training.settings import TrainSettings

# what each scale evaluates: the cascades and, for cascade minus reader, the readers alone
SYSTEMS = ("agon", "agon_single_b", "agon_independent", "grpo", "grpo_b", "grpo_cascade")
TRAINED = tuple(trained_methods_for(SYSTEMS))  # agon, agon_independent, grpo


def budget_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's ``budget`` section with its tasks checked against the task rows (every
    row where it names none)."""
    section = dict(config.get("budget") or {})
    names = [t["name"] for t in config["tasks"]]
    tasks = section.get("tasks") or names
    unknown = [t for t in tasks if t not in names]
    if unknown:
        raise ValueError(f"budget.tasks names {unknown}, which are not task rows ({names})")
    scales = [int(s) for s in section.get("scales") or [1]]
    if len(set(scales)) != len(scales) or min(scales) < 1:
        raise ValueError(f"budget.scales must be distinct whole multiples >= 1, got {scales}")
    seeds = [int(s) for s in section.get("seeds") or config["seeds"]]
    missing = [s for s in seeds if s not in [int(x) for x in config["seeds"]]]
    if missing:
        # a scale-1 point is table 1's run of that seed, and every scale starts from its bases
        raise ValueError(f"budget.seeds {missing} are not among the config's seeds")
    return {"scales": sorted(scales), "seeds": seeds, "tasks": list(tasks)}


def budget_changes(config: Mapping[str, Any], scale: int) -> dict[str, Any]:
    """What a scale's training changes of table 1's train snapshot: ``scale x train.steps``
    (GRPO's step cap, ``max_steps_factor x steps``, scales with it)."""
    return {"train": {"steps": int(scale) * table1_steps(config)}}


def table1_steps(config: Mapping[str, Any]) -> int:
    """Table 1's optimizer steps per model (``train.steps``), which each scale multiplies."""
    return int(TrainSettings.from_config(config).steps)


def budget_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` cut to what the budget report reads: its tasks, seeds (so table 1's readers
    of a config, :func:`agon.report.compare.systems_rows`, read the budget's runs)."""
    b = budget_section(config)
    out = copy.deepcopy(dict(config))
    out["tasks"] = [t for t in config["tasks"] if t["name"] in b["tasks"]]
    out["seeds"] = b["seeds"]
    return out


def budget_summaries(config: Mapping[str, Any], layout: Any) -> tuple[list[str], list[str]]:
    """Every summary the budget table reads (the workflow's inputs, the report's provenance):
    each system's evaluation and each method's run at every scale and seed of the section
    (``layout``: an :class:`agon.results.Layout`)."""
    b = budget_section(config)
    keys = [(f["name"], t) for f in config["families"] for t in b["tasks"]]

    def every(path_of, names):
        return [
            path_of(f, t, x, n, k)
            for f, t in keys
            for x in b["scales"]
            for n in names
            for k in b["seeds"]
        ]

    return every(layout.budget_eval_summary, SYSTEMS), every(layout.budget_train_summary, TRAINED)
