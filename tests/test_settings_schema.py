"""Every trainer's settings take their defaults, choices and ranges from the config schema.

Each field of each registered trainer's settings class is a config key (``setting(...)``: its
default and rules are the schema's), a family row's key (``family_setting(...)``: its rules
are the row's), or says why it is neither (``not_config(...)``); the one check in
``TrainSettings.__post_init__`` refuses what the schema refuses, naming the key.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agon import duel
from agon.config import validate_config
from agon.registry import TRAINERS
from agon.training import settings as st
from baselines.cliff.advantages import CORRECT_MODES, UNLOCATED_MODES
from baselines.cliff.teacher import TEACHERS
from baselines.gar.gradients import COMPUTES, REDUCTIONS
from baselines.gar.reward import ANCHORS, APPLY_TO, COSINES, GRADIENTS, MISSING
from baselines.opd_then_rl.switch import SWITCHES

KINDS = (st.CONFIG_KEY, st.FAMILY_KEY, st.NOT_CONFIG)


def _settings_classes() -> list[type]:
    return list(dict.fromkeys(TRAINERS.get(name).settings for name in TRAINERS.names()))


CLASSES = _settings_classes()
FIELDS = [
    pytest.param(cls, f, id=f"{cls.__name__}.{f.name}")
    for cls in CLASSES
    for f in dataclasses.fields(cls)
]


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _schema_rules(node: dict) -> dict:
    """What the schema allows of a value, spelled as a field's metadata spells it."""
    rules = {k: node[k] for k in st.RULES if k in node}
    types = node.get("type")
    rules[st.NULLABLE] = (isinstance(types, list) and "null" in types) or None in node.get(
        "enum", ()
    )
    items = {k: v for k, v in (node.get("items") or {}).items() if k in st.RULES}
    return rules | ({"items": items} if items else {})


def _field_rules(f: dataclasses.Field) -> dict:
    return {k: v for k, v in f.metadata.items() if k in (*st.RULES, st.NULLABLE, "items")}


def test_every_trainer_has_settings_to_check():
    names = {cls.__name__ for cls in CLASSES}
    assert {"DuelSettings", "GRPOSettings", "CliffSettings", "GARSettings"} <= names
    assert "OPDThenRLSettings" in names


@pytest.mark.parametrize(("cls", "f"), FIELDS)
def test_each_field_is_a_config_key_a_family_key_or_says_why_not(cls, f):
    kinds = [k for k in KINDS if k in f.metadata]
    assert len(kinds) == 1, (
        f"{cls.__name__}.{f.name}: declare it setting('<section>.<key>'), family_setting(...) "
        f"or not_config(..., why=...); its metadata has {kinds or 'none of them'}"
    )
    if st.NOT_CONFIG in f.metadata:
        assert f.metadata[st.NOT_CONFIG].strip(), "not_config needs a reason"


@pytest.mark.parametrize(("cls", "f"), [p for p in FIELDS if st.CONFIG_KEY in p.values[1].metadata])
def test_a_config_field_is_its_key_with_the_schemas_default_and_rules(cls, f):
    key = f.metadata[st.CONFIG_KEY]
    section, _, rest = key.partition(".")
    # from_config reads the field from this key: in a section the class (or one it extends)
    # names, the field named as the key below it with _ for .
    sections = {"train", *(s for k in cls.__mro__ for s in getattr(k, "SECTIONS", ()))}
    assert section in sections, f"{key}: {cls.__name__} reads no {section!r}"
    assert rest.replace(".", "_") == f.name, f"{key} is read into {rest.replace('.', '_')!r}"
    node = st.schema_node(key)
    default = _default(f)
    assert default == node["default"] and type(default) is type(node["default"]), key
    assert _field_rules(f) == _schema_rules(node), key


@pytest.mark.parametrize(("cls", "f"), [p for p in FIELDS if st.FAMILY_KEY in p.values[1].metadata])
def test_a_family_field_has_the_family_rows_rules(cls, f):
    name = f.metadata[st.FAMILY_KEY]
    assert name == f.name and name in cls.FAMILY_KEYS
    node = st.schema_node(f"families.{name}")
    assert _field_rules(f) == _schema_rules(node), name
    if st.OWN_DEFAULT not in f.metadata:
        assert _default(f) == node["default"], name


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_family_keys_are_family_fields(cls):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in cls.FAMILY_KEYS:
        assert st.FAMILY_KEY in fields[name].metadata, name


def test_the_family_limit_keeps_its_own_default():
    """A family row always carries max_new_tokens (the schema's default 2048 fills it); the
    field's 256 is for settings made without a row (tests, benchmarks), and says so."""
    f = {f.name: f for f in dataclasses.fields(st.TrainSettings)}["max_new_tokens"]
    assert f.default == 256 and f.metadata[st.OWN_DEFAULT]


def _config() -> dict:
    return validate_config(
        {
            "families": [{"name": "f", "model_a": {"model": "x"}, "model_b": {"model": "y"}}],
            "tasks": [{"name": "parity"}],
            "methods": ["agon"],
        }
    )


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_default_config_gives_the_fields_defaults(cls):
    """What the config supplies when a key is left out is what the class has when it is."""
    cfg = _config()
    fam = cfg["families"][0]
    s = cls.from_config(cfg, fam)
    for f in dataclasses.fields(cls):
        expected = fam[f.name] if st.FAMILY_KEY in f.metadata else _default(f)
        assert getattr(s, f.name) == expected, f.name


def test_each_field_is_read_from_its_own_key_the_engines_and_servers_included():
    """The rollout engine's knobs (train.backend, its batch, vLLM's share) and agon.servers
    reach every trainer through its settings, nested keys too; and the rollout options are
    made of those settings."""
    from agon.engines.rollouts import RolloutOptions
    from baselines.cliff import CliffSettings

    cfg = _config()
    cfg["train"] |= {"backend": "vllm", "rollout_batch_size": 7, "vllm_gpu_memory_utilization": 0.5}
    cfg["train"]["budget"]["match"] = "steps"
    cfg["agon"]["servers"]["B"] = "http://b:8000"
    cfg["agon"]["reward"]["scheme"] = "zero_sum"
    fam = cfg["families"][0]
    duel_s, cliff_s = duel.DuelSettings.from_config(cfg, fam), CliffSettings.from_config(cfg, fam)
    for s in (duel_s, cliff_s, st.TrainSettings.from_config(cfg)):
        assert (s.backend, s.rollout_batch_size, s.vllm_gpu_memory_utilization) == ("vllm", 7, 0.5)
        assert s.budget_match == "steps"
    assert duel_s.servers == cliff_s.servers == {"A": None, "B": "http://b:8000"}
    assert duel_s.reward_scheme == "zero_sum"
    options = RolloutOptions.from_settings(st.RLSettings.from_config(cfg, fam))
    assert options == RolloutOptions.from_settings(cliff_s)
    assert (options.backend, options.batch_size, options.gpu_memory_utilization) == ("vllm", 7, 0.5)
    assert options.servers == {"A": None, "B": "http://b:8000"}
    with pytest.raises(ValueError, match=r"train\.backend must be one of \['hf', 'vllm'\]"):
        st.TrainSettings(backend="sglang")


def test_the_duels_settings_load_without_torch():
    """The planner and the workflow's regime read the duel's knobs: its settings class comes
    without the duel's step (torch)."""
    code = (
        "import json, sys\n"
        "from agon.training.settings import DuelSettings\n"
        "import agon.plan.planner, agon.regime\n"
        "print(json.dumps([m for m in ('torch', 'transformers', 'trl') if m in sys.modules]))\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip()) == []
    assert duel.DuelSettings is st.DuelSettings  # agon.duel's name for them


def test_a_mutable_default_is_each_instances_own():
    from baselines.grpo import GRPOSettings

    a, b = GRPOSettings(), GRPOSettings()
    a.report_to.append("wandb")
    a.extra["x"] = 1
    assert (b.report_to, b.extra) == ([], {})
    assert st.schema_node("train.report_to")["default"] == []  # the schema's copy untouched


# ------------------------------------------------------------------------------ the check


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"steps": 0}, "train.steps must be >= 1, got 0"),
        ({"num_generations": 1}, "train.num_generations must be >= 2, got 1"),
        ({"learning_rate": 0.0}, "train.learning_rate must be > 0, got 0.0"),
        ({"top_p": 1.5}, "train.top_p must be <= 1, got 1.5"),
        ({"budget_max_steps_factor": 0.5}, "train.budget.max_steps_factor (budget_max_steps_"),
        ({"eval_problems": 0}, "train.eval_problems must be >= 1, got 0"),
        ({"loss_type": "ppo"}, "train.loss_type must be one of ['dapo', 'dr_grpo', 'grpo']"),
        ({"master_dtype": "float16"}, "train.master_dtype must be one of [None, 'float32']"),
        ({"warmup_steps": "3"}, "train.warmup_steps must be a number, got '3'"),
        ({"gradient_checkpointing": None}, "train.gradient_checkpointing must not be null"),
        ({"max_new_tokens": 0}, "the family row's max_new_tokens must be >= 1, got 0"),
    ],
)
def test_a_value_the_schema_refuses_is_refused_by_its_key(kwargs, message):
    with pytest.raises(ValueError) as err:
        st.RLSettings(**kwargs)
    assert message in str(err.value)


def test_the_duels_keys_are_named_with_the_field():
    with pytest.raises(ValueError, match=r"agon\.reward\.scheme \(reward_scheme\) must be one of"):
        duel.DuelSettings(reward_scheme="friendly")
    with pytest.raises(ValueError, match=r"agon\.reward\.lam \(reward_lam\) must be >= 0"):
        duel.DuelSettings(reward_lam=-1.0)
    with pytest.raises(ValueError, match="draft_view must match"):
        duel.DuelSettings(draft_view="last_tokens:0")
    assert duel.DuelSettings(draft_view="last_tokens:16").draft_view == "last_tokens:16"
    # what the schema cannot say stays code
    with pytest.raises(ValueError, match="problems_per_step must be >= 2"):
        duel.DuelSettings(role_schedule="both", problems_per_step=1)


def test_null_where_the_schema_allows_it_and_array_items():
    from baselines.grpo import GRPOSettings

    s = st.RLSettings(epsilon_high=None, eval_problems=None, master_dtype=None)
    assert s.eps_high == s.epsilon
    assert GRPOSettings(report_to=["wandb"]).report_to == ["wandb"]
    with pytest.raises(ValueError, match=r"train\.report_to\[0\] must be one of"):
        GRPOSettings(report_to=["stdout"])
    with pytest.raises(ValueError, match="grpo.vllm_mode"):
        GRPOSettings(vllm_mode="remote")


def test_check_key_and_the_probes_check():
    st.check_key("train.eval_every", 0)
    st.check_eval_settings(3, None)
    with pytest.raises(ValueError, match="train.eval_every must be >= 0, got -1"):
        st.check_eval_settings(-1)
    with pytest.raises(KeyError, match="no key"):
        st.schema_node("train.no_such_key")


# ------------------------------------------------------------------------------ the choices


@pytest.mark.parametrize(
    ("values", "key"),
    [
        (st.LOSS_TYPES, "train.loss_type"),
        (st.SCALES, "train.scale_rewards"),
        (st.BASELINES, "agon.baseline"),
        (st.TRAIN_SPLITS, "train.split"),
        (st.EVAL_SPLITS, "train.eval_split"),
        (st.BUDGET_MATCHES, "train.budget.match"),
        (st.MASTER_DTYPES, "train.master_dtype"),
        (duel.REWARD_SCHEMES, "agon.reward.scheme"),
        (duel.READER_GROUPS, "agon.reader_group"),
        (duel.ROLE_SCHEDULES, "agon.role_schedule"),
        # the baselines' own lists, which their code dispatches on: the same values
        (CORRECT_MODES, "cliff.correct"),
        (UNLOCATED_MODES, "cliff.unlocated"),
        (TEACHERS, "cliff.teacher"),
        (REDUCTIONS, "gar.reduction"),
        (COMPUTES, "gar.compute"),
        (GRADIENTS, "gar.gradient"),
        (ANCHORS, "gar.anchor"),
        (MISSING, "gar.missing"),
        (COSINES, "gar.cosine"),
        (APPLY_TO, "gar.apply_to"),
        (SWITCHES, "opd_then_rl.switch"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_list_of_choices_is_the_schemas(values, key):
    assert sorted(map(str, values)) == sorted(map(str, st.choices(key)))


def test_the_schema_is_parsed_once():
    assert st.config_schema() is st.config_schema()
    node = copy.deepcopy(st.schema_node("train.steps"))
    assert node["default"] == 50
