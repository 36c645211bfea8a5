"""The task registry: a task is a name, imported lazily (the lm-eval habit).

``get_task("deepmath", path=..., hard_min_difficulty=7)`` builds a task from its config row's
``params``. A new task is one line in :data:`TASKS` (or :func:`register_task` at run time), built on
the same :class:`agon.registry.Registry` as trainers and system kinds.
"""

from __future__ import annotations

from collections.abc import Callable

from agon.registry import Registry
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

# name -> "module:ClassName"; other packages add tasks through the entry-point group agon.tasks
TASKS = Registry(
    "task",
    "agon.tasks",
    {
        "deepmath": "agon.tasks.deepmath:DeepMathTask",
        "arith": "agon.toy.tasks:ArithTask",
        "toycode": "agon.toy.toycode:ToyCodeTask",
        "taco": "agon.tasks.code.taco:TacoTask",
        "codecontests": "agon.tasks.code.codecontests:CodeContestsTask",
        "livecodebench": "agon.tasks.code.livecodebench:LiveCodeBenchTask",
        "humaneval": "agon.tasks.code.humaneval:HumanEvalTask",
        "reasoning_gym": "agon.tasks.reasoning_gym:ReasoningGymTask",
        "champ": "agon.tasks.champ:ChampTask",
        # random-weight models' reward spread: the tests, benchmarks and scale checks
        "parity": "agon.tasks.synthetic:ParityTask",
    },
)


def register_task(name: str, factory: Callable[..., Task]) -> None:
    """Register a task factory under ``name`` (overrides a built-in of the same name)."""
    TASKS.register(name, factory)


def available_tasks() -> list[str]:
    """Names that :func:`get_task` accepts."""
    return sorted(TASKS.names())


def get_task(name: str, **params) -> Task:
    """Build the task ``name`` with its config ``params``."""
    factory = TASKS.get(name)
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
