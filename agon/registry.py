"""Registries of trainers and system kinds: a name, an import path, imported on first use.

The library never imports a baseline: ``baselines/`` imports ``agon``, and ``agon`` finds each
baseline's trainer or system by its name here (tasks are a :class:`Registry` too:
:data:`agon.tasks.TASKS`). A new baseline is a folder under ``baselines/`` plus one entry in
:data:`TRAINERS` or :data:`SYSTEM_KINDS`; a package outside this repository registers its own
through the entry-point groups ``agon.trainers`` and ``agon.systems``, with no change here.

- A **trainer** (``agon train --method NAME``) is an object with a ``settings`` class, a
  ``settings_from_config`` method and a ``train(config, family, task, settings, out)`` method
  that trains a family's two models and returns the run's summary payload: an
  :class:`agon.training.shell.InHouseTrainer` (settings plus a step, run by the one shell of
  the in-house trainers) or a :class:`Trainer` (settings plus a train function of its own:
  GRPO on TRL). Its :class:`Method` row says what the workflow and the tables need to know of
  it before its code is imported: which table it belongs to, how its compute is matched,
  whether it needs a teacher, its colours. This is the one list of the methods:
  :mod:`agon.methods` builds the tables' columns from it, the config schema's method names
  come from it, the workflow reads its teacher and budget columns from it.
- A **system kind** (``agon eval --system NAME``) is a function ``build(ctx) -> (system,
  identity)`` from a :class:`agon.systems.SystemContext` (config, family row, the engines and
  model paths given) to a runnable system and a dict that says what it runs (for the run id).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

TABLES = ("table1", "related")
BUDGETS = ("reference", "matched", "same")


@dataclass(frozen=True)
class Method:
    """A trainer's registry row: where it lives, and what the workflow and the tables know of
    it without importing it.

    ``table``: ``table1`` (its columns are table 1's own, :data:`agon.methods.COLUMNS`) or
    ``related`` (``results/related.csv``: model A alone, B alone, the A -> B cascade), None for
    a trainer no table shows. ``budget``: ``reference`` (the run others match), ``matched``
    (each model runs until it spent what it spent in the reference run of its seed,
    ``train.budget``), ``same`` (the reference's steps, rollouts and updates by construction).
    ``teacher``: it learns from the family's ``teacher`` row, which the workflow builds first.
    ``colors``: its columns' colours in the figures (model A's, model B's)."""

    path: str  # "module:attribute" of the trainer
    table: str | None = "related"
    budget: str = "matched"
    teacher: bool = False
    colors: tuple[str, str] = ("#555555", "#aaaaaa")

    def __post_init__(self) -> None:
        if self.table is not None and self.table not in TABLES:
            raise ValueError(f"Method {self.path}: table must be one of {TABLES} or None")
        if self.budget not in BUDGETS:
            raise ValueError(f"Method {self.path}: budget must be one of {BUDGETS}")


@dataclass(frozen=True)
class Trainer:
    """A trainer with a train function of its own (GRPO on TRL): how to read its settings and
    how to run it. In-house trainers are :class:`agon.training.shell.InHouseTrainer`."""

    name: str
    settings: type  # a subclass of agon.training.settings.TrainSettings
    train: Callable[[dict, dict, str, Any, Path], dict]  # (config, family, task, settings, out)
    settings_overrides: tuple[tuple[str, Any], ...] = ()  # fixed fields, e.g. (("mode", "duel"),)

    def settings_from_config(self, config: dict, family: dict, seed: int) -> Any:
        """This trainer's settings for one family of a validated config."""
        return self.settings.from_config(config, family, seed=seed, **dict(self.settings_overrides))


class Registry:
    """Names to ``"module:attribute"`` paths, imported lazily; entry points add to it.

    A built-in entry is a path, or a :class:`Method` row (trainers) that carries its path."""

    def __init__(self, kind: str, group: str, builtin: dict[str, str | Method]):
        self.kind, self.group = kind, group
        self.rows = {k: v for k, v in builtin.items() if isinstance(v, Method)}
        self._paths = {k: v.path if isinstance(v, Method) else v for k, v in builtin.items()}
        self._objects: dict[str, Any] = {}
        self._scanned = False

    def _scan(self) -> None:
        """Add the entry points of installed packages (once; built-in names win)."""
        if self._scanned:
            return
        self._scanned = True
        for ep in entry_points(group=self.group):
            self._paths.setdefault(ep.name, ep.value)

    def register(self, name: str, target: Any) -> None:
        """Register ``target`` (an object, or a ``"module:attribute"`` path) under ``name``."""
        if isinstance(target, str):
            self._paths[name] = target
            self._objects.pop(name, None)
        else:
            self._objects[name] = target

    def names(self) -> list[str]:
        """Every registered name, built-ins first in their order."""
        self._scan()
        return list(dict.fromkeys([*self._paths, *self._objects]))

    def get(self, name: str) -> Any:
        """The object registered as ``name``, imported now if it was not yet."""
        if name in self._objects:
            return self._objects[name]
        self._scan()
        if name not in self._paths:
            raise KeyError(f"unknown {self.kind} {name!r}; registered: {self.names()}")
        module, _, attr = self._paths[name].partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise KeyError(
                f"{self.kind} {name!r} is registered as {self._paths[name]} but cannot be "
                f"imported: {err}"
            ) from err
        self._objects[name] = obj
        return obj


TRAINERS = Registry(
    "trainer",
    "agon.trainers",
    {
        # each model alone with TRL's GRPOTrainer, to the duel's spend per model
        "grpo": Method("baselines.grpo:TRAINER", "table1", colors=("#1f77b4", "#9ecae1")),
        # the duel: both models together; the run every budget-matched method matches
        "agon": Method("agon.duel:TRAINER", "table1", "reference", colors=("#d62728", "#f7b6d2")),
        # the same duel, each model rewarded for its own correctness only (no contest term)
        "agon_independent": Method(
            "agon.duel:INDEPENDENT", "table1", "same", colors=("#2ca02c", "#98df8a")
        ),
        # the methods published beside Agon: each model alone, to the duel's spend per model
        "cliff": Method("baselines.cliff:TRAINER", colors=("#9467bd", "#c5b0d5")),  # first mistakes
        "opd_then_rl": Method(  # on-policy distillation from a teacher, then GRPO
            "baselines.opd_then_rl:TRAINER", teacher=True, colors=("#8c564b", "#c49c94")
        ),
        "gar": Method("baselines.gar:TRAINER", colors=("#17becf", "#9edae5")),  # LM-head cosines
    },
)

SYSTEM_KINDS = Registry(
    "system kind",
    "agon.systems",
    {
        "single": "agon.systems:build_single",  # one model answers
        "cascade": "agon.systems:build_cascade",  # one drafts, the other reads and answers
        # one model reads each problem's fixed wrong draft: its robustness (results/control.csv)
        "robust_read": "agon.systems:build_robust_read",
        "moa": "baselines.moa:build_moa",  # Mixture-of-Agents: proposers, then an aggregator
    },
)
