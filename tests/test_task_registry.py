"""A task is one class plus one registry line: its declared params, its expected split sizes, the
grading settings it takes, and the usage docs' list of tasks, all checked against the registry."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from agon.config import load_config
from agon.tasks import (
    TASKS,
    TaskParamsError,
    available_tasks,
    check_task_params,
    expected_split_sizes,
    task_from_config,
    task_params,
)
from agon.tasks.synthetic import ParityTask

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "config").glob("*.yaml"))


def constructor_params(cls: type) -> dict[str, inspect.Parameter]:
    """The keyword parameters ``cls(...)`` accepts: its ``__init__``'s and, through a
    ``**kwargs`` it passes on to its base (every task here does), the base's."""
    out: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if klass is object:
            break
        if "__init__" not in klass.__dict__:
            continue
        params = list(inspect.signature(klass.__dict__["__init__"]).parameters.values())[1:]
        named = [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        out.update({p.name: p for p in named if p.name not in out})
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return out


def config_task_rows() -> list[tuple[str, dict]]:
    """(where, row) of every task row of the shipped configs: ``tasks`` and the control's."""
    rows = []
    for path in CONFIGS:
        config = load_config(path)
        rows += [(f"{path.name} tasks[{i}]", r) for i, r in enumerate(config["tasks"])]
        control = (config.get("control") or {}).get("task")
        if control:
            rows.append((f"{path.name} control.task", control))
    return rows


# ----------------------------------------------------------------------------- declared params


@pytest.mark.parametrize("name", available_tasks())
def test_every_task_declares_exactly_what_its_constructor_takes(name):
    cls = TASKS.get(name)
    declared, accepted = cls.PARAMS, constructor_params(cls)
    assert sorted(declared) == sorted(accepted), name
    for key, param in declared.items():
        assert param.default == accepted[key].default, (name, key)
        assert param.help.strip(), (name, key)


def test_check_task_params_names_the_key_and_what_is_allowed():
    with pytest.raises(TaskParamsError) as err:
        check_task_params("arith", {"max_ops": 3})
    assert isinstance(err.value, ValueError)
    message = str(err.value)
    assert message.startswith("task 'arith': params.max_ops: not a parameter; expected one of [")
    assert "'n_test'" in message and "'grading_timeout_s'" in message

    with pytest.raises(ValueError) as err:
        check_task_params("arith", {"n_test": "x"})
    # the config check prefixes its row to each problem
    row = f"tasks[1] (name 'arith'): {err.value.problems[0]}"
    assert row == "tasks[1] (name 'arith'): params.n_test: expected an integer, got 'x'"

    # every refused key of a row, in the row's order
    with pytest.raises(TaskParamsError) as err:
        check_task_params("toycode", {"n_test": None, "seed": True, "input_len": 3})
    assert err.value.problems == [
        "params.n_test: expected an integer, got None",
        "params.seed: expected an integer, got True",  # a bool is not a number
        "params.input_len: expected a list, got 3",
    ]
    with pytest.raises(TaskParamsError, match=r"params\.special_judge: expected one of \['excl"):
        check_task_params("taco", {"special_judge": "maybe"})
    with pytest.raises(
        TaskParamsError, match=r"params\.hard_min_difficulty: expected a number, got 'hard'"
    ):
        check_task_params("deepmath", {"hard_min_difficulty": "hard"})


def test_check_task_params_accepts_what_the_constructors_accept():
    check_task_params("arith", {"hard_fraction": None, "n_test": 5})  # null where the default is
    check_task_params("humaneval", {"grading_timeout_s": 10, "test_size": 40})  # an int number
    check_task_params("reasoning_gym", {"levels": [{"min_terms": 2}], "difficulty": "cot_steps"})
    check_task_params("toycode", {"input_len": [2, 4]})  # YAML gives a list
    check_task_params("parity", {})
    with pytest.raises(TaskParamsError, match=r"params\.n: not a parameter; expected one of \[\]"):
        check_task_params("parity", {"n": 1})
    with pytest.raises(KeyError, match="unknown task"):
        check_task_params("no-such-task", {})


def test_a_factory_that_declares_nothing_is_not_checked(monkeypatch):
    monkeypatch.setitem(TASKS._objects, "made", lambda **params: ParityTask())
    assert task_params("made") is None
    check_task_params("made", {"anything": "x"})  # its own constructor is the judge


@pytest.mark.parametrize(("where", "row"), config_task_rows(), ids=lambda x: str(x)[:40])
def test_every_shipped_config_task_row_passes_the_check(where, row):
    check_task_params(row["name"], row.get("params") or {})


# ----------------------------------------------------------------------------- split sizes

# the table and the constructor-default lookup `agon plan` used before each task class said its
# own sizes (agon/plan/workload.py), copied here as the reference the classes must reproduce
OLD_TEST_SPLIT_SIZES = {"codecontests": 165, "humaneval": 164, "taco": 1000}
OLD_VALIDATION_SPLIT_SIZES = {"codecontests": 117}
OLD_TEST_SIZE_PARAMS = ("max_test", "test_size", "n_test")
OLD_VALIDATION_SIZE_PARAMS = ("validation_size", "n_validation")


def _old_task_default(task: str, names: tuple[str, ...]) -> int | None:
    try:
        params = inspect.signature(TASKS.get(task).__init__).parameters
    except (KeyError, ValueError, TypeError):
        return None
    for name in names:
        if name in params and isinstance(params[name].default, int):
            return params[name].default
    return None


def _old_size(task: str, params: dict, test_side: bool) -> int | None:
    names = OLD_TEST_SIZE_PARAMS if test_side else OLD_VALIDATION_SIZE_PARAMS
    table = OLD_TEST_SPLIT_SIZES if test_side else OLD_VALIDATION_SPLIT_SIZES
    given = next((params[k] for k in names if params.get(k)), None)
    return given or table.get(task) or _old_task_default(task, names) or None


def _param_sets(name: str) -> list[dict]:
    """No params, each shipped config's row for the task, and each size param set alone."""
    sets = [{}] + [dict(r.get("params") or {}) for _, r in config_task_rows() if r["name"] == name]
    declared = task_params(name) or {}
    sizes = OLD_TEST_SIZE_PARAMS + OLD_VALIDATION_SIZE_PARAMS
    return sets + [{k: 7} for k in sizes if k in declared]


@pytest.mark.parametrize("name", available_tasks())
def test_expected_split_sizes_give_what_the_plan_table_gave(name):
    sets = _param_sets(name)
    for params in sets:
        new = expected_split_sizes(name, params)
        assert set(new) == {"test", "validation", "hard"}
        # the planner reads hard where a task knows it, else test as its upper bound
        hard = new["hard"] if new["hard"] is not None else new["test"]
        assert hard == new["test"] == _old_size(name, params, True), (name, params)
        assert new["validation"] == _old_size(name, params, False), (name, params)
    assert len(sets) > 1 or not any(_old_size(name, {}, side) for side in (True, False))


def test_expected_split_sizes_where_the_table_was_wrong():
    """A size param of 0 is 0 (the table fell back to the default), a cap above the published
    size keeps the published size, and HumanEval's hard split is its test split."""
    assert expected_split_sizes("arith", {"n_validation": 0})["validation"] == 0
    assert expected_split_sizes("deepmath", {"test_size": 0})["test"] == 0
    assert expected_split_sizes("taco", {"max_test": 5000})["test"] == 1000
    assert expected_split_sizes("codecontests", {"validation_size": 0})["validation"] == 117
    sizes = expected_split_sizes("humaneval", {"test_size": 40, "max_test": 30})
    assert sizes == {"test": 30, "validation": None, "hard": 30}
    assert expected_split_sizes("humaneval", {"hard_min_difficulty": 1.0})["hard"] is None
    unknown = dict.fromkeys(("test", "validation", "hard"))
    assert expected_split_sizes("livecodebench", {}) == unknown


def test_expected_split_sizes_load_no_data(monkeypatch):
    def no_data(*args, **kwargs):
        raise AssertionError("expected_split_sizes read data")

    for name in available_tasks():
        cls = TASKS.get(name)
        for attr in ("_load", "problems", "__init__"):
            if hasattr(cls, attr):
                monkeypatch.setattr(cls, attr, no_data)
    for name in available_tasks():
        expected_split_sizes(name, {})


# ----------------------------------------------------------------------------- grading settings


def _config(name: str, params: dict | None = None, **grading) -> dict:
    return {"tasks": [{"name": name, "params": params or {}}], "grading": grading}


def test_task_from_config_passes_the_declared_grading_settings():
    task = task_from_config(_config("arith", timeout_s=7.5, workers=1), "arith")
    assert (task.grading_timeout_s, task.grading_workers) == (7.5, 1)
    # a row's own grading_<key> param wins over grading.<key>
    config = _config("toycode", {"grading_timeout_s": 2.0}, timeout_s=9.0)
    task = task_from_config(config, "toycode")
    assert task.grading_timeout_s == 2.0


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("arith", "slow", "grading.timeout_s: expected a number, got 'slow'"),
        # toycode's float(None) raised a TypeError that built the task again without it
        ("toycode", None, "grading.timeout_s: expected a number, got None"),
    ],
)
def test_a_bad_grading_value_is_refused_naming_its_config_key(name, value, expected):
    with pytest.raises(TaskParamsError) as err:
        task_from_config(_config(name, timeout_s=value, workers=1), name)
    assert str(err.value) == f"task {name!r}: {expected}"


def test_a_bad_grading_param_names_the_params_key():
    with pytest.raises(TaskParamsError, match=r"params\.grading_workers: expected an integer"):
        task_from_config(_config("arith", {"grading_workers": "two"}, timeout_s=5.0), "arith")


def test_a_task_without_grading_knobs_is_built_once_without_them(monkeypatch):
    calls: list[dict] = []

    class Counted(ParityTask):
        """A task with no params whose constructor passes what it is given on to its base."""

        def __init__(self, **params):
            calls.append(params)
            super().__init__(**params)

    monkeypatch.setitem(TASKS._objects, "counted", Counted)
    task = task_from_config(_config("counted", timeout_s=5.0, workers=0), "counted")
    assert isinstance(task, Counted) and calls == [{}]

    made: list[dict] = []
    monkeypatch.setitem(TASKS._objects, "made", lambda **p: made.append(p) or ParityTask())
    task_from_config(_config("made", timeout_s=5.0), "made")
    assert made == [{}]  # a factory declares no grading settings: it is given none


# ----------------------------------------------------------------------------- the usage docs


def test_usage_docs_list_every_registered_task():
    text = (ROOT / "docs" / "usage.md").read_text()
    section = text.split("## Tasks and grading", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- `([a-z_]+)`: \S", section, flags=re.M)
    # the project's own tasks: other tests register tasks of theirs in this process
    own = [n for n in available_tasks() if TASKS.get(n).__module__.startswith("agon.")]
    assert sorted(listed) == sorted(own), "docs/usage.md's task list and agon.tasks.TASKS"
