"""Training settings: one dataclass per trainer, one name per knob, the config's own keys.

:class:`TrainSettings` holds what every trainer shares: the config's ``train`` section (the
field names *are* its keys), the family's generation limit and the run's seed; the GRPO
baseline's settings extend it with the ``grpo`` section (:mod:`baselines.grpo`, on TRL).
:class:`RLSettings` adds what the in-house policy-gradient core and its rollout engines read
(:mod:`agon.rl`, :mod:`agon.engines.rollouts`); every in-house trainer's settings extend it:
the duel's (:class:`DuelSettings`, the ``agon`` section, nested keys joined with ``_``:
``agon.reward.scheme`` is ``reward_scheme``) and those of Cliff, GAR and OPD-then-RL (each with
its own section). :meth:`TrainSettings.from_config` fills any subclass the same way, each field
from its own key, so a knob added to the schema and to a settings class needs no mapping code.

These classes are every ``train.*`` and ``agon.*`` knob's one way in, for the trainers and for
``agon plan`` alike: nothing else reads those sections' keys from a config dict
(``tests/test_knob_paths.py``). The duel's settings live here, not beside its step in
:mod:`agon.duel` (which re-exports them), because the planner and the workflow's regime read
the duel's knobs and must not import torch; this module knows the duel's knobs, never its code.

The config schema is each knob's one home: a field declared ``setting("train.steps")`` takes
its default, its choices and its range from the schema's ``train.steps``, and one check
(:meth:`TrainSettings.__post_init__`) refuses a value outside them, naming the config key. A
field the config sections do not hold says where it comes from instead: the family row
(:func:`family_setting`, its range from the schema's family row) or elsewhere
(:func:`not_config`: the command line, a reference run, the code). What the schema cannot say
(one setting against another) stays code, in each class's ``__post_init__``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import numbers
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from agon.config import config_schema, config_value

# what a field's metadata says of it: the config key it is (or the family row's key), or why
# it is neither; and the schema's rules for its values
CONFIG_KEY = "config_key"  # "train.steps", "agon.reward.scheme"
FAMILY_KEY = "family_key"  # "max_new_tokens": a family row's key of that name
NOT_CONFIG = "not_config"  # why the field is no config key (where its value comes from)
OWN_DEFAULT = "own_default"  # a family_setting whose default is not the schema's: why
NULLABLE = "nullable"  # the schema allows null (None)
RULES = ("enum", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "pattern")


def schema_node(key: str) -> dict:
    """The schema of config key ``key``: ``"train.steps"``, ``"agon.reward.scheme"``;
    ``"families.max_new_tokens"`` is a family row's (an array's items are walked through)."""
    node = config_schema()
    for part in key.split("."):
        if "properties" not in node and "items" in node:
            node = node["items"]
        try:
            node = node["properties"][part]
        except KeyError:
            raise KeyError(f"the config schema has no key {key!r}") from None
    return node


def rules_of(node: dict) -> dict[str, Any]:
    """What the schema allows of a value (:data:`RULES`, :data:`NULLABLE`, an array's
    ``items``), as a field's metadata holds it."""
    out: dict[str, Any] = {k: copy.deepcopy(node[k]) for k in RULES if k in node}
    types = node.get("type")
    out[NULLABLE] = (isinstance(types, list) and "null" in types) or None in node.get("enum", ())
    if isinstance(node.get("items"), dict):
        items = {k: copy.deepcopy(node["items"][k]) for k in RULES if k in node["items"]}
        if items:
            out["items"] = items
    return out


def choices(key: str) -> tuple:
    """The values config key ``key`` may take (its schema's ``enum``), in the schema's order."""
    return tuple(schema_node(key)["enum"])


def _field(default: Any, metadata: dict[str, Any]) -> Any:
    """A dataclass field with ``default`` (a fresh copy for each instance where it is a list,
    dict or set, which a dataclass may not share)."""
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(
            default_factory=functools.partial(copy.deepcopy, default), metadata=metadata
        )
    return dataclasses.field(default=default, metadata=metadata)


def setting(key: str) -> Any:
    """A field that is config key ``key`` (``"train.steps"``): its default, choices and range
    are the schema's. The field's name is the key below its section, ``.`` as ``_``."""
    node = schema_node(key)
    if "default" not in node:
        raise KeyError(f"config key {key!r} has no default in the schema")
    return _field(node["default"], {CONFIG_KEY: key, **rules_of(node)})


def family_setting(name: str, default: Any = dataclasses.MISSING, why: str = "") -> Any:
    """A field read from the family row's key ``name`` (:attr:`TrainSettings.FAMILY_KEYS`),
    with that key's range; its default is the schema's, or ``default`` (``why``: the reason),
    used only where settings are made without a family row."""
    node = schema_node(f"families.{name}")
    meta: dict[str, Any] = {FAMILY_KEY: name, **rules_of(node)}
    if default is dataclasses.MISSING:
        default = node["default"]
    else:
        meta[OWN_DEFAULT] = why or "its own default"
    return _field(default, meta)


def not_config(default: Any = None, *, why: str) -> Any:
    """A field that is no config key: ``why`` says where its value comes from."""
    return _field(default, {NOT_CONFIG: why})


def label(key: str, name: str | None = None) -> str:
    """How an error names a setting: its config key, and the field's name where that is not
    the key below its section (a nested key: ``agon.reward.scheme (reward_scheme)``)."""
    return key if name is None or key.partition(".")[2] == name else f"{key} ({name})"


def check_value(where: str, value: Any, rules: Any) -> None:
    """Refuse ``value`` where the schema's ``rules`` (a field's metadata) do not allow it; the
    message names ``where`` (the config key)."""
    if value is None:
        if not rules.get(NULLABLE, False):
            raise ValueError(f"{where} must not be null")
        return
    if "enum" in rules and value not in rules["enum"]:
        raise ValueError(f"{where} must be one of {list(rules['enum'])}, got {value!r}")
    bounds = (
        ("minimum", ">=", lambda v, b: v >= b),
        ("exclusiveMinimum", ">", lambda v, b: v > b),
        ("maximum", "<=", lambda v, b: v <= b),
        ("exclusiveMaximum", "<", lambda v, b: v < b),
    )
    for rule, sign, holds in bounds:
        if rule not in rules:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{where} must be a number, got {value!r}")
        if not holds(value, rules[rule]):
            raise ValueError(f"{where} must be {sign} {rules[rule]}, got {value}")
    if "pattern" in rules and not re.search(rules["pattern"], str(value)):
        raise ValueError(f"{where} must match {rules['pattern']!r}, got {value!r}")
    for i, item in enumerate(value if "items" in rules else ()):
        check_value(f"{where}[{i}]", item, {NULLABLE: False, **rules["items"]})


def check_key(key: str, value: Any) -> None:
    """Refuse ``value`` for config key ``key`` where its schema does not allow it."""
    check_value(key, value, rules_of(schema_node(key)))


# the choices of settings other modules check values against (the schema's, in its order)
LOSS_TYPES = choices("train.loss_type")
SCALES = choices("train.scale_rewards")
BASELINES = choices("agon.baseline")  # agon.baseline: what an advantage subtracts
TRAIN_SPLITS = choices("train.split")
EVAL_SPLITS = choices("train.eval_split")  # what the training-time probe may read
BUDGET_MATCHES = choices("train.budget.match")
MASTER_DTYPES = choices("train.master_dtype")  # the family's dtype (None), or fp32 masters


def check_eval_settings(every: int, limit: int | None = None) -> None:
    """Refuse a bad ``train.eval_every`` / ``train.eval_problems``."""
    check_key("train.eval_every", every)
    check_key("train.eval_problems", limit)


@dataclass
class TrainSettings:
    """What both trainers share: the config's ``train`` section, by its own key names."""

    steps: int = setting("train.steps")  # optimizer steps per model
    problems_per_step: int = setting("train.problems_per_step")  # P problems per step
    split: str = setting("train.split")  # where training problems come from
    num_generations: int = setting("train.num_generations")  # G: samples (drafts) per problem
    learning_rate: float = setting("train.learning_rate")
    weight_decay: float = setting("train.weight_decay")
    lr_scheduler: str = setting("train.lr_scheduler")  # any transformers.get_scheduler name
    warmup_steps: int = setting("train.warmup_steps")
    max_grad_norm: float = setting("train.max_grad_norm")  # clip; the pre-clip norm is logged
    loss_type: str = setting("train.loss_type")  # dapo | dr_grpo | grpo (TRL's names)
    beta: float = setting("train.beta")  # KL weight to a frozen reference (0: none is kept)
    kl_ratio_correction: bool = setting("train.kl_ratio_correction")  # use_bias_correction_kl
    epsilon: float = setting("train.epsilon")  # lower clip of the ratio
    epsilon_high: float | None = setting("train.epsilon_high")  # upper clip (None: = epsilon)
    num_iterations: int = setting("train.num_iterations")  # mu; >1 makes the clipping bite
    scale_rewards: str = setting("train.scale_rewards")  # what the advantage is divided by
    temperature: float = setting("train.temperature")  # rollout sampling temperature
    top_p: float = setting("train.top_p")
    micro_batch_size: int = setting("train.micro_batch_size")  # rows per forward/backward
    gradient_checkpointing: bool = setting("train.gradient_checkpointing")
    # None: weights, gradients and AdamW's moments in the family's dtype (pure bf16 on a GPU);
    # float32: fp32 master weights and moments, forward and backward autocast to the family's dtype
    master_dtype: str | None = setting("train.master_dtype")
    # how AdamW's step lands on 16-bit weights (master_dtype None): plain rounding, kahan
    # (torch-optimi's compensated sum), stochastic_rounding (torchao); float32 weights: plain
    bf16_update: str = setting("train.bf16_update")
    # the rollout engine: transformers generate (hf) or vLLM; the in-house trainers sample on
    # it, GRPO's probes and Cliff's model teacher generate through transformers at this batch
    backend: str = setting("train.backend")  # hf | vllm
    rollout_batch_size: int = setting("train.rollout_batch_size")  # rows per generate call
    vllm_gpu_memory_utilization: float = setting("train.vllm_gpu_memory_utilization")  # per engine
    checkpoint_every: int = setting("train.checkpoint_every")  # 0: only at the end
    keep_checkpoints: int = setting("train.keep_checkpoints")  # complete checkpoints kept
    eval_every: int = setting("train.eval_every")  # steps between greedy probes; 0: none
    eval_problems: int | None = setting("train.eval_problems")  # first N of eval_split (None: all)
    eval_split: str = setting("train.eval_split")  # what the probe (agon.training.probe) reads
    # the family row's generation limit; a row always has one, this default is for settings
    # made without a row (tests, benchmarks)
    max_new_tokens: int = family_setting(
        "max_new_tokens", 256, why="settings made without a family row: tests, benchmarks"
    )
    seed: int = not_config(0, why="the run's seed: the command line's --seed")
    # matched compute (agon.training.budget): read by trainers that match a reference run's
    # spend (the GRPO baseline); the duel is the reference and runs `steps` steps
    budget_match: str = setting("train.budget.match")  # tokens | samples | steps
    budget_max_steps_factor: float = setting("train.budget.max_steps_factor")  # cap / steps
    budget_targets: dict | None = not_config(
        None, why="per model, from the reference run (agon train --match-run)"
    )
    budget_reference: str = not_config("", why="the reference run's summary.json (--match-run)")

    # the config sections besides `train` whose keys the class's own fields are (each field is
    # read from its own key; a class also reads the sections of the classes it extends)
    SECTIONS: ClassVar[tuple[str, ...]] = ()
    # family-row keys read into settings of the same name
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens",)

    def __post_init__(self) -> None:
        """Every field the schema has rules for is checked against them (one setting against
        another: in a subclass's ``__post_init__``, after this one)."""
        for f in dataclasses.fields(self):
            if CONFIG_KEY in f.metadata:
                where = label(f.metadata[CONFIG_KEY], f.name)
            elif FAMILY_KEY in f.metadata:
                where = f"the family row's {f.metadata[FAMILY_KEY]}"
            else:
                continue
            check_value(where, getattr(self, f.name), f.metadata)

    @property
    def max_steps(self) -> int:
        """The most optimizer steps a budget-matched trainer may take."""
        return max(self.steps, math.ceil(self.budget_max_steps_factor * self.steps))

    def model_steps(self, name: str) -> int:
        """The optimizer steps model ``name`` may take (TRL's ``max_steps``; the training loop's
        cap and the scheduler's horizon): ``steps`` without a budget, the reference's steps under
        ``budget.match: steps``, else the cap (the budget stops the model earlier)."""
        if self.budget_targets is None:
            return self.steps
        if self.budget_match == "steps":
            return int(self.budget_targets[name])
        return self.max_steps

    @property
    def eps_high(self) -> float:
        """The upper clip of the importance ratio."""
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    @classmethod
    def from_config(cls, config: dict, family: dict | None = None, seed: int = 0, **fixed: Any):
        """Settings from a validated config and a family row: each field from its own config
        key (``setting("agon.reward.scheme")`` reads ``config["agon"]["reward"]["scheme"]``),
        each of :attr:`FAMILY_KEYS` from ``family``; a key the config leaves out or sets null
        keeps the field's default. Keys no field names are not this trainer's (``grpo.*`` for
        the duel); ``fixed`` sets fields a trainer fixes (``reward_scheme`` of
        ``agon_independent``).
        """
        fields = dataclasses.fields(cls)
        values = {
            f.name: config_value(config, f.metadata[CONFIG_KEY])
            for f in fields
            if CONFIG_KEY in f.metadata
        }
        if family is not None:
            values.update({k: family.get(k) for k in cls.FAMILY_KEYS})
        values.update(fixed, seed=seed)
        names = {f.name for f in fields}
        return cls(**{k: v for k, v in values.items() if k in names and v is not None})

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values (for a run's summary)."""
        return dataclasses.asdict(self)


@dataclass
class RLSettings(TrainSettings):
    """The in-house trainers' settings: the shared ones plus what :mod:`agon.rl` reads."""

    adam_betas: tuple[float, float] = not_config(
        (0.9, 0.999), why="AdamW's betas, TRL's and torch's defaults; no config key sets them"
    )
    # score sequences packed several per row (agon.packing), not padded
    packing: bool = setting("train.packing")
    # backend vllm, server mode: the URL of each policy's `trl vllm-serve` (None: colocated);
    # in the `agon` section, but every in-house trainer samples there
    servers_A: str | None = setting("agon.servers.A")
    servers_B: str | None = setting("agon.servers.B")

    SECTIONS: ClassVar[tuple[str, ...]] = ("agon",)  # agon.servers
    # whether the trainer's models train together in every step (the duel): a compute budget,
    # which stops each model on its own, applies only to trainers whose models train alone
    TOGETHER: ClassVar[bool] = False

    @property
    def servers(self) -> dict[str, str | None]:
        """Each policy's vLLM server URL (None: colocated vLLM), by policy name."""
        return {"A": self.servers_A, "B": self.servers_B}


@dataclass
class DuelSettings(RLSettings):
    """The duel trainer's settings (:mod:`agon.duel`): the shared ones plus the config's
    ``agon`` section (nested keys joined with ``_``: ``agon.reward.scheme`` is
    ``reward_scheme``)."""

    num_reads: int = setting("agon.num_reads")  # K: reads per draft
    role_schedule: str = setting("agon.role_schedule")  # alternate | both
    train_roles: list[str] = setting("agon.train_roles")  # the roles whose completions update
    reward_scheme: str = setting("agon.reward.scheme")  # agon | zero_sum | independent | ...
    reward_lam: float = setting("agon.reward.lam")  # weight of the agon scheme's win/loss term
    # draft: K reads of one draft; problem: all G*K reads of a problem
    reader_group: str = setting("agon.reader_group")
    baseline: str = setting("agon.baseline")  # what an advantage subtracts: group | batch | none
    # extra reward for a read that is right after a wrong draft: c_read * (1 - c_draft) * this
    # (0: none; the reading in which the reader is paid for robustness; docs/method.md)
    reward_reader_robustness: float = setting("agon.reward.reader_robustness")
    draft_view: str = family_setting("draft_view")  # the family row's view of a draft

    SECTIONS: ClassVar[tuple[str, ...]] = ("agon",)
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens", "draft_view")
    TOGETHER: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.role_schedule == "both" and self.problems_per_step < 2:
            raise ValueError(
                "role_schedule 'both' splits the problems in two: problems_per_step must be >= 2"
            )
