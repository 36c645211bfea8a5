"""The task registry: a task is a name, imported lazily (the lm-eval habit).

``get_task("deepmath", source=..., hard_min_difficulty=7)`` builds a task from its config row's
``params``. A new task is one class plus one line in :data:`TASKS` (or :func:`register_task` at
run time), built on the same :class:`agon.registry.Registry` as trainers and system kinds: the
class declares its params (:attr:`Task.PARAMS`, which :func:`check_task_params` checks a config
row against, and whose ``grading_*`` entries say which ``grading`` settings it takes) and its
split sizes (:meth:`Task.expected_split_sizes`, which ``agon plan`` reads). A registered factory
that is not a task class declares nothing: its params are its own to check, and it is given no
``grading`` settings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agon.registry import Registry
from agon.tasks.base import (
    EXPECTED_SPLITS,
    GRADING_PREFIX,
    SPLITS,
    MathTask,
    Messages,
    Param,
    Problem,
    Task,
    TaskParamsError,
    apply_draft_view,
    params_problems,
)

__all__ = [
    "SPLITS",
    "MathTask",
    "Messages",
    "Param",
    "Problem",
    "Task",
    "TaskParamsError",
    "apply_draft_view",
    "available_tasks",
    "check_task_params",
    "expected_split_sizes",
    "get_task",
    "register_task",
    "task_from_config",
    "task_params",
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


def task_params(name: str) -> dict[str, Param] | None:
    """The params task ``name`` declares (:attr:`Task.PARAMS` of its class, imported now if it
    was not yet), or None for a registered factory that declares none."""
    declared = getattr(TASKS.get(name), "PARAMS", None)
    return dict(declared) if isinstance(declared, dict) else None


def check_task_params(name: str, params: dict[str, Any]) -> None:
    """Check a config row's ``params`` for task ``name`` against its declaration.

    Raises :class:`TaskParamsError` (a ValueError) naming the task and, for each refused key,
    what it takes: ``params.max_ops: not a parameter; expected one of [...]``, ``params.n_test:
    expected an integer, got 'x'``. A factory that declares nothing is not checked here (its
    own constructor is the judge). KeyError for an unregistered name."""
    declared = task_params(name)
    if declared is None:
        return
    problems = params_problems(declared, params)
    if problems:
        raise TaskParamsError(name, problems)


def expected_split_sizes(name: str, params: dict[str, Any]) -> dict[str, int | None]:
    """How many problems task ``name``'s ``test``, ``validation`` and ``hard`` splits will hold
    with ``params``, without loading data (:meth:`Task.expected_split_sizes`; None: unknown, as
    is every split of a factory that is not a task class)."""
    sizes = getattr(TASKS.get(name), "expected_split_sizes", None)
    return sizes(params) if callable(sizes) else dict.fromkeys(EXPECTED_SPLITS)


def get_task(name: str, **params) -> Task:
    """Build the task ``name`` with its config ``params``, checked first
    (:func:`check_task_params`)."""
    check_task_params(name, params)
    factory = TASKS.get(name)
    try:
        return factory(**params)
    except TypeError as err:
        raise TypeError(f"task {name!r}: bad params {sorted(params)}: {err}") from err


def task_from_config(config: dict, name: str) -> Task:
    """Build task ``name`` from its config row, with the config's ``grading`` settings that it
    declares (:attr:`Task.PARAMS`' ``grading_<key>`` entries; a row's own ``grading_<key>``
    param wins over ``grading.<key>``). A task that declares none (graded in a sandbox with
    limits of its own, or a factory) is given none.

    Raises :class:`TaskParamsError` naming the config key of a value its declaration refuses
    (``params.<key>`` or ``grading.<key>``)."""
    rows = [r for r in config.get("tasks") or [] if r.get("name") == name]
    row = rows[0] if rows else {"name": name, "params": {}}  # any registered task, unconfigured
    params = dict(row.get("params") or {})
    declared = task_params(name) or {}
    grading, problems = {}, []
    for key, value in (config.get("grading") or {}).items():
        param = declared.get(GRADING_PREFIX + key)
        if param is None or GRADING_PREFIX + key in params:
            continue
        if (problem := param.problem(value)) is not None:
            problems.append(f"grading.{key}: {problem}")
        grading[GRADING_PREFIX + key] = value
    if problems:
        raise TaskParamsError(name, problems + params_problems(declared, params))
    return get_task(name, **params, **grading)
