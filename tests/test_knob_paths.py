"""Every ``train.*`` and ``agon.*`` knob takes one path: its settings field.

The config schema's ``train`` and ``agon`` sections are walked leaf by leaf: each key is a field
of a settings class (``setting("train.backend")``, :mod:`agon.training.settings`), which
:meth:`~agon.training.settings.TrainSettings.from_config` reads; the trainers and ``agon plan``
read the field. The source of ``agon/`` and ``baselines/`` is then read (``ast``) for a key of
those sections taken from a config dict instead: ``config["train"]["backend"]``,
``(config.get("agon") or {}).get("servers")``, ``tr = config["train"]`` then ``tr["steps"]``, or
a dotted ``"train.steps"`` handed to a lookup (``config_value``).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from agon.registry import TRAINERS
from agon.training import settings as st

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("train", "agon")
SCANNED = ("agon", "baselines")

# leaf keys of those sections that are no settings field, each with why (none today: a key that
# only shapes the DAG, read by the workflow and never by a trainer, would go here)
NOT_SETTINGS: dict[str, str] = {}

# where a key of those sections may be read from a dict, each with why
RAW_READERS = {
    # the one reader: each field from its own key (TrainSettings.from_config)
    "agon/training/settings.py": "the settings themselves",
    # `toy.train` is the toy pretraining's own section (its steps, lr, packing), not `train`
    "agon/toy/": "toy.train, another section",
    # the control's Markdown describes the world it trained (its steps, rate, schedule, roles)
    # from the control's config; it starts no trainer and prices nothing
    "agon/report/control_reading.py": "a report's description of the control's config",
}

# calls that name a key to declare or check it, not to read its value from a config
DECLARERS = {"setting", "family_setting", "check_key", "schema_node", "choices", "label"}


def _section_keys() -> dict[str, set[str]]:
    props = st.config_schema()["properties"]
    return {s: set(props[s]["properties"]) for s in SECTIONS}


def _leaves(node: dict, prefix: str) -> list[str]:
    """The dotted keys below ``node`` that hold a value (an object's keys walked through)."""
    if "properties" not in node:
        return [prefix]
    return [k for name, sub in node["properties"].items() for k in _leaves(sub, f"{prefix}.{name}")]


def _settings_classes() -> list[type]:
    registered = [TRAINERS.get(name).settings for name in TRAINERS.names()]
    return list(dict.fromkeys([st.TrainSettings, st.RLSettings, st.DuelSettings, *registered]))


def _str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def raw_reads(source: str, keys: dict[str, set[str]]) -> list[tuple[int, str]]:
    """(line, ``section.key``) of each read of a ``keys`` section's key from a dict in
    ``source``: a subscript or ``.get`` of the section (``x["train"]``, ``x.get("agon")``, with
    ``or {}``, or a name bound to one), or a dotted key handed to a call other than a
    declaration (:data:`DECLARERS`)."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # a name bound to a section anywhere in the module -> section

    def section(node: ast.AST) -> str | None:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            return section(node.values[0])
        if isinstance(node, ast.NamedExpr):
            return section(node.value)
        if isinstance(node, ast.Subscript) and _str(node.slice) in keys:
            return _str(node.slice)
        if _is_get(node) and _str(node.args[0]) in keys:
            return _str(node.args[0])
        return aliases.get(node.id) if isinstance(node, ast.Name) else None

    def bind(target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name) and (found := section(value)):
            aliases[target.id] = found
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for t, v in zip(target.elts, value.elts):
                bind(t, v)

    for _ in range(2):  # twice: a name bound to a name bound to a section
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                bind(node.target, node.value)
    hits = set()
    for node in ast.walk(tree):
        read = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            read = (section(node.value), _str(node.slice))
        elif _is_get(node):
            read = (section(node.func.value), _str(node.args[0]))
        if read and read[0] and read[1] in keys[read[0]]:
            hits.add((node.lineno, f"{read[0]}.{read[1]}"))
        if isinstance(node, ast.Call) and _called(node) not in DECLARERS:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                dotted = re.fullmatch(r"(\w+)\.(\w+)(\.\w+)*", _str(arg) or "")
                if dotted and dotted[2] in keys.get(dotted[1], ()):
                    hits.add((arg.lineno, dotted[0]))
    return sorted(hits)


def _is_get(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
    )


def _called(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


# ------------------------------------------------------------------------------------ the tests


@pytest.mark.parametrize("section", SECTIONS)
def test_every_key_of_the_section_is_a_settings_field(section):
    fields = {
        f.metadata[st.CONFIG_KEY]
        for cls in _settings_classes()
        for f in dataclasses.fields(cls)
        if st.CONFIG_KEY in f.metadata
    }
    leaves = _leaves(st.schema_node(section), section)
    assert len(leaves) > 5, leaves
    missing = [k for k in leaves if k not in fields and k not in NOT_SETTINGS]
    assert not missing, (
        f"{missing}: declare each a settings field (setting({missing[0]!r}) in the class of the "
        "trainers that read it), or list it in NOT_SETTINGS with why"
    )
    assert set(NOT_SETTINGS) <= set(leaves) - fields, "NOT_SETTINGS lists a key that is a field"


def test_no_module_reads_a_train_or_agon_key_from_the_config():
    keys = _section_keys()
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if any(rel.startswith(where) for where in RAW_READERS):
                continue
            found += [f"{rel}:{line}: {key}" for line, key in raw_reads(path.read_text(), keys)]
    assert not found, (
        "read from the config dict instead of the settings (TrainSettings.from_config, "
        "DuelSettings for the duel's agon.*; a new knob: a field with setting('<key>')):\n  "
        + "\n  ".join(found)
    )


def test_every_allowed_reader_exists():
    for where in RAW_READERS:
        assert (ROOT / where).exists(), where


def test_the_scan_sees_each_way_of_reading_a_key():
    source = """
def f(config, ctx, job):
    a = config["train"]["backend"]
    b = config.get("train", {}).get("steps")
    c = (config.get("agon") or {}).get("servers") or {}
    tr, grpo = ctx.config["train"], ctx.config.get("grpo")
    d = tr["rollout_batch_size"] + tr.get("num_generations", 8)
    if (ag := config["agon"])["num_reads"]:
        pass
    e = config_value(config, "train.budget.match")
    # not reads: a write, another section, a declaration, a message, a non-key
    config["train"]["learning_rate"] = 1.0
    g = grpo["use_vllm"] + config["toy"]["train"]["threads"]
    h = setting("train.steps"), check_key("train.eval_every", 0)
    raise ValueError("train.backend is vllm but vLLM is missing")
    return config["train"]["no_such_key"], ag
"""
    assert raw_reads(source, _section_keys()) == [
        (3, "train.backend"),
        (4, "train.steps"),
        (5, "agon.servers"),
        (7, "train.num_generations"),
        (7, "train.rollout_batch_size"),
        (8, "agon.num_reads"),
        (10, "train.budget.match"),
    ]
