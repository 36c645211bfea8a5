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
  GRPO on TRL). Its :class:`Method` row says what the workflow, the tables and the planner
  need to know of it before its code is imported: which table it belongs to, how its compute
  is matched, whether it needs a teacher, its colours, how it runs and what helper work it
  does beside sampling and training (:class:`Helper`). This is the one list of the methods:
  :mod:`agon.methods` builds the tables' columns from it, the config schema's method names
  and ``related.methods`` default come from it, the workflow reads its teacher and budget
  columns from it, and ``agon plan`` (:mod:`agon.plan.workload`) prices its runs from it.
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
RUNS = ("duel", "solo", "trl")
HELPER_KINDS = ("generate", "score")
HELPER_MODELS = ("self", "other", "teacher")
HELPER_OVER = ("samples", "wrong_samples", "anchors")
HELPER_PROMPTS = ("solve", "read")
HELPER_MEMORY = ("engine", "weights")


@dataclass(frozen=True)
class Helper:
    """Work a solo method does for each model beside sampling and training it, as ``agon plan``
    prices it (:func:`agon.plan.workload.solo_workload`). Plain data: every config key is a
    dotted path into the validated config (``"cliff.teacher"``), read with the schema's
    defaults filled in; :attr:`config_keys` lists the ones that parametrize it."""

    kind: str  # generate: the helper decodes a reply greedily; score: a no-grad forward
    what: str  # the plan's line: "{m}" the model trained, "{helper}" the helper's plan name
    # who runs it: self (the model trained), other (the family's other base model), teacher
    # (the family's teacher row)
    model: str = "self"
    # a config key that, when set, names its model instead (the plan's `<section>_teacher`)
    model_key: str | None = None
    # per step: samples (the model's P x G), wrong_samples (priced as all P x G, an upper
    # bound), anchors (one per problem: P)
    over: str = "samples"
    prompt: str = "solve"  # solve: the problem's prompt; read: a reader's, showing the sample
    # None: the sample's length; a config key: the token limit it runs to (null: the family's
    # max_new_tokens)
    completion: str | None = None
    first_steps: str | None = None  # a config key N: only the first N steps (at most the run's)
    when: tuple[str, Any] | None = None  # (config key, value): only when the key has the value
    # a generate helper's engine; None: the shell's (train.backend), train.rollout_batch_size
    # rows at once either way
    engine: str | None = None
    # held beside the policies: engine (weights and KV cache of one engine per model trained),
    # weights (one frozen copy both models share), None: nothing
    memory: str | None = None
    # a config key: float32 logits over a problem's group (its anchor and G samples, each at
    # the cap), that many vocabulary rows at a time (the job's `<method>_logits` transient)
    logits_chunk: str | None = None

    def __post_init__(self) -> None:
        for name, allowed in (
            ("kind", HELPER_KINDS),
            ("model", HELPER_MODELS),
            ("over", HELPER_OVER),
            ("prompt", HELPER_PROMPTS),
            ("memory", (*HELPER_MEMORY, None)),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"Helper {self.what!r}: {name} must be one of {allowed}")
        if self.engine is not None and self.kind != "generate":
            raise ValueError(f"Helper {self.what!r}: only a generate helper has an engine")

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The config keys that parametrize it."""
        keys = (self.model_key, self.completion, self.first_steps, self.logits_chunk)
        return tuple(k for k in (*keys, self.when and self.when[0]) if k)


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
    ``colors``: its columns' colours in the figures (model A's, model B's).

    What ``agon plan`` prices: ``runs``: ``duel`` (both models together: drafts and reads under
    the config's ``agon`` section), ``solo`` (each model alone, GRPO on the in-house shell's
    rollout engine) or ``trl`` (each model alone on TRL's GRPOTrainer, its ``grpo`` section).
    ``helpers``: a solo method's work beside sampling and training (:class:`Helper`); ``()``
    when it has none, None when the row does not say: then it is priced as GRPO and the plan
    says so."""

    path: str  # "module:attribute" of the trainer
    table: str | None = "related"
    budget: str = "matched"
    teacher: bool = False
    colors: tuple[str, str] = ("#555555", "#aaaaaa")
    runs: str = "solo"
    helpers: tuple[Helper, ...] | None = None

    def __post_init__(self) -> None:
        if self.table is not None and self.table not in TABLES:
            raise ValueError(f"Method {self.path}: table must be one of {TABLES} or None")
        if self.budget not in BUDGETS:
            raise ValueError(f"Method {self.path}: budget must be one of {BUDGETS}")
        if self.runs not in RUNS:
            raise ValueError(f"Method {self.path}: runs must be one of {RUNS}")
        if any(h.model == "teacher" for h in self.helpers or ()) and not self.teacher:
            raise ValueError(f"Method {self.path}: a helper runs the teacher row: teacher=True")


class ReadsSettings:
    """What every trainer does alike: read its ``settings`` class (a subclass of
    :class:`agon.training.settings.TrainSettings`) from a config, with its
    ``settings_overrides`` (fields the config has no key for) fixed."""

    settings: type
    settings_overrides: tuple[tuple[str, Any], ...]

    def settings_from_config(self, config: dict, family: dict, seed: int) -> Any:
        """This trainer's settings for one family of a validated config."""
        return self.settings.from_config(config, family, seed=seed, **dict(self.settings_overrides))


@dataclass(frozen=True)
class Trainer(ReadsSettings):
    """A trainer with a train function of its own (GRPO on TRL): how to read its settings and
    how to run it. In-house trainers are :class:`agon.training.shell.InHouseTrainer`."""

    name: str
    settings: type  # a subclass of agon.training.settings.TrainSettings
    train: Callable[[dict, dict, str, Any, Path], dict]  # (config, family, task, settings, out)
    # fixed fields, e.g. (("reward_scheme", "independent"),)
    settings_overrides: tuple[tuple[str, Any], ...] = ()


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


# Cliff: where the config says so, a model marks the first mistake of each wrong sample
# (greedily, through transformers; baselines/cliff: make_teachers builds one engine per model)
CLIFF_MARKS = Helper(
    "generate",
    "{helper} marks {m}'s samples (upper bound: all)",
    model="other",  # the family's other base model, with its persona ...
    model_key="cliff.teacher_model",  # ... or the model the config names
    over="wrong_samples",
    prompt="read",
    completion="cliff.teacher_max_new_tokens",
    when=("cliff.teacher", "model"),
    engine="hf",
    memory="engine",
)
# GAR: a no-grad forward over each problem's anchor and over every sample, for the LM-head
# gradients' cosines (float32 logits, gar.vocab_chunk vocabulary rows at a time)
GAR_ANCHORS = Helper(
    "score",
    "{m}'s anchors",
    over="anchors",
    completion="gar.anchor_max_tokens",
    logits_chunk="gar.vocab_chunk",
)
GAR_SAMPLES = Helper("score", "{m}'s samples again")
# OPD-then-RL: the teacher scores every sample of the first opd_steps steps (per-token log-probs)
OPD_SCORES = Helper(
    "score",
    "teacher scores {m}'s OPD samples",
    model="teacher",
    model_key="opd_then_rl.teacher",
    first_steps="opd_then_rl.opd_steps",
    memory="weights",
)

TRAINERS = Registry(
    "trainer",
    "agon.trainers",
    {
        # each model alone with TRL's GRPOTrainer, to the duel's spend per model
        "grpo": Method(
            "baselines.grpo:TRAINER",
            "table1",
            colors=("#1f77b4", "#9ecae1"),
            runs="trl",
            helpers=(),
        ),
        # the duel: both models together; the run every budget-matched method matches
        "agon": Method(
            "agon.duel:TRAINER", "table1", "reference", colors=("#d62728", "#f7b6d2"), runs="duel"
        ),
        # the same duel, each model rewarded for its own correctness only (no contest term)
        "agon_independent": Method(
            "agon.duel:INDEPENDENT", "table1", "same", colors=("#2ca02c", "#98df8a"), runs="duel"
        ),
        # the methods published beside Agon: each model alone, to the duel's spend per model
        "cliff": Method(  # first mistakes
            "baselines.cliff:TRAINER", colors=("#9467bd", "#c5b0d5"), helpers=(CLIFF_MARKS,)
        ),
        "opd_then_rl": Method(  # on-policy distillation from a teacher, then GRPO
            "baselines.opd_then_rl:TRAINER",
            teacher=True,
            colors=("#8c564b", "#c49c94"),
            helpers=(OPD_SCORES,),
        ),
        "gar": Method(  # LM-head cosines
            "baselines.gar:TRAINER",
            colors=("#17becf", "#9edae5"),
            helpers=(GAR_ANCHORS, GAR_SAMPLES),
        ),
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
