"""The task registry: a task is a name, imported lazily (the lm-eval habit).

``get_task("deepmath", path=..., hard_min_difficulty=7)`` builds a task from its config row's
``params``. A new task is one line in ``_REGISTRY`` (or :func:`register_task` at run time).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from agon.tasks.base import SPLITS, MathTask, Messages, Problem, Task, apply_draft_view

__all__ = [
    "SPLITS",
    "MathTask",
    "Messages",
    "Problem",
    "Task",
    "apply_draft_view",
    "available_tasks",
    "get_task",
    "register_task",
    "task_from_config",
]

# name -> "module:ClassName"
_REGISTRY: dict[str, str] = {
    "deepmath": "agon.tasks.deepmath:DeepMathTask",
    "arith": "agon.toy.tasks:ArithTask",
    "toycode": "agon.toy.toycode:ToyCodeTask",
    "taco": "agon.tasks.code.taco:TacoTask",
    "codecontests": "agon.tasks.code.codecontests:CodeContestsTask",
    "livecodebench": "agon.tasks.code.livecodebench:LiveCodeBenchTask",
    "humaneval": "agon.tasks.code.humaneval:HumanEvalTask",
}
_FACTORIES: dict[str, Callable[..., Task]] = {}


def register_task(name: str, factory: Callable[..., Task]) -> None:
    """Register a task factory under ``name`` (overrides a built-in of the same name)."""
    _FACTORIES[name] = factory


def available_tasks() -> list[str]:
    """Names that :func:`get_task` accepts."""
    return sorted(set(_REGISTRY) | set(_FACTORIES))


def get_task(name: str, **params) -> Task:
    """Build the task ``name`` with its config ``params``."""
    if name in _FACTORIES:
        return _FACTORIES[name](**params)
    if name not in _REGISTRY:
        raise KeyError(f"unknown task {name!r}; available: {available_tasks()}")
    module, cls = _REGISTRY[name].split(":")
    try:
        factory = getattr(importlib.import_module(module), cls)
    except (ModuleNotFoundError, AttributeError) as err:
        raise KeyError(
            f"task {name!r} is registered as {_REGISTRY[name]} but cannot be imported: {err}"
        ) from err
    try:
        return factory(**params)
    except TypeError as err:
        raise TypeError(f"task {name!r}: bad params {sorted(params)}: {err}") from err


def task_from_config(config: dict, name: str) -> Task:
    """Build task ``name`` from its config row, passing the ``grading`` settings it accepts
    (a task graded in a sandbox with limits of its own takes none)."""
    rows = [r for r in config.get("tasks") or [] if r.get("name") == name]
    row = rows[0] if rows else {"name": name, "params": {}}  # any registered task, unconfigured
    params = dict(row.get("params") or {})
    grading = {
        f"grading_{k}": v
        for k, v in config.get("grading", {}).items()
        if f"grading_{k}" not in params
    }
    try:
        return get_task(name, **params, **grading)
    except TypeError:  # a task without grading knobs
        return get_task(name, **params)
