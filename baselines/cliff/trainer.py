"""The Cliff trainer: A and B each trained alone, GRPO with a first-mistake token advantage.

``agon train --method cliff`` trains both models of a family for ``train.steps`` steps, each
alone on the same problems (P problems x G samples per model and step, as the duel's solo
mode), with the step of :mod:`baselines.cliff.step`; the config's ``cliff`` section is read
into :class:`CliffSettings` (``docs/method.md``, Cliff). The loop is the duel's,
:func:`agon.training.loop.train`, with :func:`~baselines.cliff.step.cliff_step` (its teachers
bound) as its step: problem stream, resume, checkpoints, probes, and its multi-process path
(launched with ``torchrun`` or ``accelerate launch``, each process rolls out and trains on its
share of a step's problems); the policies are built, distributed and saved as the duel's
(:mod:`agon.training.run`).

Outputs are those of every trainer (:mod:`agon.training.run`): ``OUT/A``, ``OUT/B``,
``OUT/metrics.jsonl`` (one row per step: the duel trainer's drafter keys per model, plus
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

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agon.registry import Trainer
from agon.training import metrics as mk
from agon.training.settings import DuelSettings
from baselines.cliff.advantages import CORRECT_MODES, UNLOCATED_MODES
from baselines.cliff.step import TEACHER_S, TEACHER_TOKENS, cliff_step
from baselines.cliff.teacher import TEACHERS, ModelTeacher, OracleTeacher

TEACHER_TOKENS_TOTAL = "{model}/teacher_tokens"  # summary.json: a model's teacher tokens, summed
TEACHER_TIME_TOTAL = "teacher_time_s"  # summary.json: the teacher's seconds, summed


@dataclass
class CliffSettings(DuelSettings):
    """The shared ``train`` settings, the family's ``max_new_tokens`` and the ``cliff`` section.

    A subclass of the duel's settings so that :mod:`agon.duel`'s solo-mode functions take it
    as they are; ``mode`` is always ``solo`` and the ``agon`` section is not read.
    """

    mode: str = "solo"
    weight: float = 0.5  # w: +w before the first mistake, -w from it on
    correct: str = "prefix_all"  # prefix_all | none: a correct sample's term
    unlocated: str = "outcome_only"  # outcome_only | negative: a wrong sample with no mark
    teacher: str = "oracle"  # oracle (toy tasks) | model
    teacher_model: str | None = None  # hub id / path; None: the family's other base model
    teacher_max_new_tokens: int | None = None  # None: the family's max_new_tokens

    SECTIONS: ClassVar[tuple[str, ...]] = ("cliff",)
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode != "solo":
            raise ValueError("cliff trains each model alone: mode must be 'solo'")
        if not self.weight >= 0:
            raise ValueError(f"cliff.weight must be >= 0, got {self.weight}")
        if self.teacher_max_new_tokens is not None and self.teacher_max_new_tokens < 1:
            raise ValueError(
                f"cliff.teacher_max_new_tokens must be >= 1, got {self.teacher_max_new_tokens}"
            )

    def _choices(self) -> dict[str, tuple]:
        return {
            **super()._choices(),
            "correct": CORRECT_MODES,
            "unlocated": UNLOCATED_MODES,
            "teacher": TEACHERS,
        }


def make_teachers(config: dict, fam: dict, s: CliffSettings) -> dict[str, Any]:
    """Each model's teacher: the oracle, or a frozen model (``cliff.teacher_model``, else the
    family's *other* base model, with its persona: B's base marks A's samples and A's B's),
    generating through transformers."""
    if s.teacher == "oracle":
        return {"A": OracleTeacher(), "B": OracleTeacher()}
    from agon.engines import load_engine

    batch = config["train"]["rollout_batch_size"]
    limit = s.teacher_max_new_tokens or s.max_new_tokens
    if s.teacher_model:
        engine = load_engine({"model": s.teacher_model}, fam, "hf", batch_size=batch)
        shared = ModelTeacher(engine, limit)
        return {"A": shared, "B": shared}
    return {
        name: ModelTeacher(load_engine(fam[f"model_{other}"], fam, "hf", batch_size=batch), limit)
        for name, other in (("A", "b"), ("B", "a"))
    }


def teacher_totals(metrics_path: str | Path) -> dict[str, float]:
    """The teacher's cost over a run's ``metrics.jsonl``: ``{model}/teacher_tokens`` per model
    and ``teacher_time_s``, for ``summary.json``."""
    return mk.totals(
        mk.read_rows(metrics_path),
        {TEACHER_TOKENS_TOTAL: TEACHER_TOKENS},
        {TEACHER_TIME_TOTAL: TEACHER_S},
    )


def train_pair(config: dict, fam: dict, task_name: str, s: CliffSettings, out: Path) -> dict:
    """`agon train --method cliff`: A and B each trained alone with Cliff; the summary payload."""
    import torch

    from agon.tasks import task_from_config
    from agon.training.loop import train
    from agon.training.policy import make_accelerator
    from agon.training.run import family_policies, run_payload, save_policies
    from baselines.cliff.steps import has_oracle

    task = task_from_config(config, task_name)
    if s.teacher == "oracle" and not has_oracle(task):
        task.close()
        raise ValueError(
            f"cliff.teacher oracle needs a toy task (arith or toycode), not {task_name!r}; "
            "set cliff.teacher: model"
        )
    torch.manual_seed(s.seed)
    accelerator = make_accelerator()
    policies, tokenizers = family_policies(config, fam, s, accelerator)
    teachers = make_teachers(config, fam, s)  # after the accelerator: on this process's device
    step_fn = functools.partial(cliff_step, teachers=teachers)
    t0 = time.time()
    try:
        rows = train(task, policies, s, out, on_step=_print_step, step_fn=step_fn)
    finally:
        task.close()
        for engine in {id(t): t.engine for t in teachers.values() if hasattr(t, "engine")}.values():
            engine.close()
    save_policies(policies, tokenizers, out, accelerator)
    return run_payload(out, rows, t0, accelerator, s) | teacher_totals(out / "metrics.jsonl")


def _print_step(row: dict) -> None:
    keys = [
        *(mk.key(mk.ROLE_CORRECT, model=m, role="drafter") for m in mk.MODELS),
        *(f"{m}/cliff/located" for m in mk.MODELS),
        mk.TOKENS,
    ]
    shown = " ".join(f"{k}={row[k]:.3g}" for k in keys if k in row)
    print(f"[cliff train] step {row['step']}: {shown}", flush=True)


TRAINER = Trainer("cliff", CliffSettings, train_pair, settings_overrides=(("mode", "solo"),))
