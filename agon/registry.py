"""Registries of trainers and system kinds: a name, an import path, imported on first use.

The library never imports a baseline: ``baselines/`` imports ``agon``, and ``agon`` finds each
baseline's trainer or system by its name here (tasks are a :class:`Registry` too:
:data:`agon.tasks.TASKS`). A new baseline is a folder under ``baselines/`` plus one line in
:data:`TRAINERS` or :data:`SYSTEM_KINDS`; a package outside this repository registers its own
through the entry-point groups ``agon.trainers`` and ``agon.systems``, with no change here.

- A **trainer** (``agon train --method NAME``) is a :class:`Trainer`: its settings class and
  a function that trains a family's two models and returns the run's summary payload.
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


@dataclass(frozen=True)
class Trainer:
    """One training method: how to read its settings and how to run it."""

    name: str
    settings: type  # a subclass of agon.training.settings.TrainSettings
    train: Callable[[dict, dict, str, Any, Path], dict]  # (config, family, task, settings, out)
    settings_overrides: tuple[tuple[str, Any], ...] = ()  # fixed fields, e.g. (("mode", "duel"),)

    def settings_from_config(self, config: dict, family: dict, seed: int) -> Any:
        """This trainer's settings for one family of a validated config."""
        return self.settings.from_config(config, family, seed=seed, **dict(self.settings_overrides))


class Registry:
    """Names to ``"module:attribute"`` paths, imported lazily; entry points add to it."""

    def __init__(self, kind: str, group: str, builtin: dict[str, str]):
        self.kind, self.group = kind, group
        self._paths = dict(builtin)
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
        "grpo": "baselines.grpo:TRAINER",  # each model alone with TRL's GRPOTrainer
        "agon": "agon.training.run:DUEL",  # the duel: both models together
        # the same duel, each model rewarded for its own correctness only (no contest term)
        "agon_independent": "agon.training.run:DUEL_INDEPENDENT",
        "cliff": "baselines.cliff:TRAINER",  # each model alone, first-mistake token advantages
        # each model alone: on-policy distillation from a teacher, then GRPO
        "opd_then_rl": "baselines.opd_then_rl:TRAINER",
        "gar": "baselines.gar:TRAINER",  # each model alone, + cosine of LM-head gradients
    },
)

SYSTEM_KINDS = Registry(
    "system kind",
    "agon.systems",
    {
        "single": "agon.systems:build_single",  # one model answers
        "cascade": "agon.systems:build_cascade",  # one drafts, the other reads and answers
        "moa": "baselines.moa:build_moa",  # Mixture-of-Agents: proposers, then an aggregator
    },
)
