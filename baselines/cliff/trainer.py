"""The Cliff trainer: A and B each trained alone, GRPO with a first-mistake token advantage.

``agon train --method cliff`` trains both models of a family for ``train.steps`` steps, each
alone on the same problems (P problems x G samples per model and step, as GRPO's
:func:`agon.rl.grpo_step`), with the step of :mod:`baselines.cliff.step`; the config's ``cliff``
section is read into :class:`CliffSettings` (``docs/method.md``, Cliff). :data:`TRAINER` is
the registry's entry: the settings, the step, the teachers it binds, and its summary extras;
the shell of every in-house trainer (:mod:`agon.training.shell`) runs it: problem stream,
resume, checkpoints, probes, and its multi-process path (launched with ``torchrun`` or
``accelerate launch``, each process rolls out and trains on its share of a step's problems).

Outputs are those of every trainer (:mod:`agon.training.shell`): ``OUT/A``, ``OUT/B``,
``OUT/metrics.jsonl`` (one row per step: the drafter keys per model, plus
``{model}/cliff/...``) and resumable checkpoints under ``OUT/checkpoints/``. The teacher's cost
is apart from the policies' (``tokens_generated`` counts the policies' samples only): with a
model teacher each row has ``{model}/cliff/teacher_tokens`` (tokens the teacher generated to
mark that model's samples, every process's) and every row ``time/teacher_s`` (inside
``time/rollout_s``); ``summary.json`` adds their totals, ``{model}/teacher_tokens`` (0 for the
oracle, which generates nothing) and ``teacher_time_s``.

A model teacher is a frozen model loaded whole by every process, on that process's device (not
sharded with the policies: each process holds one more full model per teacher) and asked, greedy,
about the wrong samples of its own share of the batch only.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from agon.engines import load_engine
from agon.tasks.base import Task
from agon.training import metrics as mk
from agon.training.loop import StepFn
from agon.training.settings import RLSettings, setting
from agon.training.shell import InHouseTrainer, Run
from baselines.cliff.step import KEYS, cliff_step
from baselines.cliff.steps import has_oracle
from baselines.cliff.teacher import ModelTeacher, OracleTeacher


@dataclass
class CliffSettings(RLSettings):
    """The shared ``train`` settings, the family's ``max_new_tokens`` and the ``cliff`` section."""

    weight: float = setting("cliff.weight")  # w: +w before the first mistake, -w from it on
    correct: str = setting("cliff.correct")  # prefix_all | none: a correct sample's term
    unlocated: str = setting("cliff.unlocated")  # outcome_only | negative: a wrong sample unmarked
    teacher: str = setting("cliff.teacher")  # oracle (toy tasks) | model
    teacher_model: str | None = setting("cliff.teacher_model")  # None: the other base model
    teacher_max_new_tokens: int | None = setting("cliff.teacher_max_new_tokens")  # None: family's

    SECTIONS: ClassVar[tuple[str, ...]] = ("cliff",)
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens",)


def make_teachers(config: dict, fam: dict, s: CliffSettings) -> dict[str, Any]:
    """Each model's teacher: the oracle, or a frozen model (``cliff.teacher_model``, else the
    family's *other* base model, with its persona: B's base marks A's samples and A's B's),
    generating through transformers."""
    if s.teacher == "oracle":
        return {"A": OracleTeacher(), "B": OracleTeacher()}
    batch = s.rollout_batch_size
    limit = s.teacher_max_new_tokens or s.max_new_tokens
    if s.teacher_model:
        engine = load_engine({"model": s.teacher_model}, fam, "hf", batch_size=batch)
        shared = ModelTeacher(engine, limit)
        return {"A": shared, "B": shared}
    return {
        name: ModelTeacher(load_engine(fam[f"model_{other}"], fam, "hf", batch_size=batch), limit)
        for name, other in (("A", "b"), ("B", "a"))
    }


def check(config: dict, fam: dict, task: Task, s: CliffSettings, accelerator: Any) -> None:
    """Refuse the oracle teacher on a task that has none (only the toy tasks do)."""
    if s.teacher == "oracle" and not has_oracle(task):
        raise ValueError(
            f"cliff.teacher oracle needs a toy task (arith or toycode), not {task.name!r}; "
            "set cliff.teacher: model"
        )


@contextlib.contextmanager
def with_teachers(run: Run, step: StepFn) -> Iterator[StepFn]:
    """The step with each model's teacher bound (built after the accelerator, so on this
    process's device); a model teacher's engine is closed when the loop ends."""
    teachers = make_teachers(run.config, run.family, run.settings)
    try:
        yield functools.partial(step, teachers=teachers)
    finally:
        for engine in {id(t): t.engine for t in teachers.values() if hasattr(t, "engine")}.values():
            engine.close()


TRAINER = InHouseTrainer(
    "cliff",
    CliffSettings,
    cliff_step,
    check=check,
    bind=with_teachers,
    keys=KEYS,
    progress=(
        mk.ROLE_CORRECT.replace("{role}", "drafter"),
        "{model}/cliff/located",
        mk.TOKENS,
    ),
)
