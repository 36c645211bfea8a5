"""The OPD-then-RL trainer: each model distilled on-policy from a teacher, then trained by GRPO.

``agon train --method opd_then_rl`` trains both models of a family, each alone on the same
problems (P problems x G samples per model and step), in two phases (:data:`TRAINER`'s
:class:`~agon.training.shell.Phase` rows), each a loop of the shell of every in-house trainer
(:mod:`agon.training.shell`: problem stream, resume, checkpoints, probes, process shares,
metrics rows; the policies built, distributed and saved as every trainer's):

1. **OPD** (``OUT/opd``): ``opd_then_rl.opd_steps`` steps of
   :func:`~baselines.opd_then_rl.opd.opd_step` (per-token reverse KL to the teacher on the
   student's own samples) at ``opd_then_rl.opd_learning_rate``; the switch point is chosen as
   ``opd_then_rl.switch`` says (:mod:`baselines.opd_then_rl.switch`) and written to
   ``OUT/opd/switch.json``.
2. **RL** (``OUT/rl``): GRPO (:func:`agon.rl.grpo_step`) from each model's chosen OPD
   checkpoint, with a fresh optimizer and schedule, for the
   rest of the budget: ``train.steps - opd_steps`` steps, or under a compute budget
   (``train.budget``, ``agon train --match-run``) until the model's spend over *both* phases
   reaches the reference's, within ``budget.max_steps_factor x train.steps`` steps over both.
   The RL phase draws its problems and samples with a seed of its own (:func:`rl_seed`), so it
   does not replay the OPD phase's problems in the same order.

Outputs are those of every trainer: ``OUT/A``, ``OUT/B`` (after RL), ``OUT/metrics.jsonl`` (the
OPD rows, then the RL rows with their steps moved on by ``opd_steps``) and ``summary.json``. The
teacher's cost is apart from the policies' (``tokens_generated`` counts the students' samples
only): each OPD row has ``{model}/opd/teacher_tokens`` (prompt + completion tokens the
teacher read to score that model's samples, every process's) and ``time/teacher_s``;
``summary.json`` adds their totals, ``{model}/teacher_tokens`` and ``teacher_time_s``,
and ``opd_switch``: each model's switch point, its validation scores and the validation's own
cost. A killed run resumes in the phase it was in.

The teacher is a frozen model loaded whole by every process on its device (not sharded with the
policies), used in the OPD phase only and released before the RL phase.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agon.engines.hf import load_model, load_tokenizer
from agon.provenance import atomic_write_text
from agon.rl import grpo_step
from agon.tasks.base import Task
from agon.training import checkpoint as ckpt
from agon.training import logbook
from agon.training import metrics as mk
from agon.training.budget import spent
from agon.training.loop import StepFn
from agon.training.settings import RLSettings, not_config, setting
from agon.training.shell import InHouseTrainer, Phase, Run
from baselines.opd_then_rl.opd import REVERSE_KL, TEACHER_S, TEACHER_TOKENS, Teacher, opd_step
from baselines.opd_then_rl.switch import KEYS as SWITCH_KEYS
from baselines.opd_then_rl.switch import VALIDATION_S, VALIDATION_TOKENS, SwitchPoint

SWITCH_FILE = "switch.json"  # OUT/opd/switch.json: the switch points, once the OPD phase is done
# the metrics keys of the OPD phase's rows: the teacher's (whole-batch values on every
# process; its tokens and seconds add up in summary.json as Cliff's do) and the validation's
KEYS = (
    mk.Key(REVERSE_KL, "same"),
    mk.Key(TEACHER_TOKENS, "same", total="{model}/teacher_tokens"),
    mk.Key(TEACHER_S, "same", total="teacher_time_s"),
    *SWITCH_KEYS,
)


@dataclass
class OPDThenRLSettings(RLSettings):
    """The shared ``train`` settings, the family's ``max_new_tokens`` and the ``opd_then_rl``
    section (``docs/method.md``, OPD-then-RL)."""

    teacher: str | None = setting("opd_then_rl.teacher")  # None: the family's `teacher` row
    opd_steps: int = setting("opd_then_rl.opd_steps")  # all taken; RL gets the rest of the budget
    switch: str = setting("opd_then_rl.switch")  # best_validation | fixed
    validate_every: int = setting("opd_then_rl.validate_every")  # OPD updates between them
    validation_split: str = setting("opd_then_rl.validation_split")  # validation | _hard
    validation_problems: int | None = setting("opd_then_rl.validation_problems")  # None: all
    opd_learning_rate: float | None = setting("opd_then_rl.opd_learning_rate")  # None: train's
    iw_opd_gamma: float = setting("opd_then_rl.iw_opd_gamma")  # 0: the plain reverse KL

    SECTIONS: ClassVar[tuple[str, ...]] = ("opd_then_rl",)
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.opd_steps >= self.steps:
            raise ValueError(
                f"opd_then_rl.opd_steps ({self.opd_steps}) must be < train.steps ({self.steps}): "
                "the RL phase takes the steps OPD leaves"
            )


@dataclass
class PhaseSettings(RLSettings):
    """One phase's loop settings: the shared ones with the phase's steps, learning rate, seed
    and budget; ``step_cap`` (the RL phase under a compute budget) is its most steps."""

    step_cap: int | None = not_config(None, why="the RL phase's cap under a compute budget")

    @property
    def max_steps(self) -> int:
        return self.step_cap if self.step_cap is not None else super().max_steps


def _phase(s: OPDThenRLSettings, **changes: Any) -> PhaseSettings:
    shared = {f.name: getattr(s, f.name) for f in dataclasses.fields(RLSettings)}
    return PhaseSettings(**(shared | changes))


def rl_seed(seed: int) -> int:
    """The RL phase's seed (problem order and samples), derived from the run's and far from
    the small seeds runs use, so one run's RL phase does not replay another run's OPD phase."""
    return (seed * 1_000_003 + 500_009) % (2**31 - 1)


def opd_settings(s: OPDThenRLSettings) -> PhaseSettings:
    """The OPD phase: ``opd_steps`` steps at the OPD learning rate, never budget-stopped."""
    return _phase(
        s,
        steps=s.opd_steps,
        learning_rate=s.opd_learning_rate or s.learning_rate,
        budget_targets=None,
        budget_reference="",
    )


def rl_settings(s: OPDThenRLSettings, opd_rows: list[dict]) -> PhaseSettings:
    """The RL phase: the steps OPD left; under a compute budget, each model's target less what
    it spent in the OPD phase (``opd_rows``), and the step cap less the OPD steps."""
    changes: dict[str, Any] = {"steps": s.steps - s.opd_steps, "seed": rl_seed(s.seed)}
    if s.budget_targets is not None:
        changes["budget_targets"] = {
            name: max(0.0, float(target) - spent(opd_rows, name, s.budget_match))
            for name, target in s.budget_targets.items()
        }
        changes["step_cap"] = max(s.max_steps - s.opd_steps, 1)
    return _phase(s, **changes)


def teacher_row(fam: dict, s: OPDThenRLSettings) -> dict:
    """The teacher's model row: ``opd_then_rl.teacher``, else the family's ``teacher`` row."""
    if s.teacher:
        return {"model": s.teacher}
    row = fam.get("teacher")
    if not row:
        raise ValueError(
            f"opd_then_rl needs a teacher: set opd_then_rl.teacher, or give family "
            f"{fam.get('name')!r} a `teacher:` row (a model, as model_a)"
        )
    if row.get("system_prompt") or row.get("chat_template_kwargs"):
        raise ValueError(
            f"family {fam.get('name')!r}: the teacher scores the student's own tokens (the prompt "
            "as the student saw it), so its system_prompt / chat_template_kwargs would never be "
            "used; remove them from the teacher row"
        )
    return row


def load_teacher(
    fam: dict, s: OPDThenRLSettings, tokenizers: dict[str, Any], accelerator: Any
) -> Teacher:
    """The frozen teacher on this process's device, after checking it shares every student's
    tokenizer (OPD compares log-probs token by token)."""
    row = teacher_row(fam, s)
    tok = load_tokenizer(row["model"], revision=row.get("revision"))
    for name, student in tokenizers.items():
        if student.get_vocab() != tok.get_vocab():
            raise ValueError(
                f"teacher {row['model']!r} does not share model {name}'s tokenizer: on-policy "
                "distillation compares their log-probs token by token"
            )
    model = load_model(row["model"], dtype=fam["dtype"], revision=row.get("revision"))
    if accelerator is not None:
        model.to(accelerator.device)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return Teacher(model, s.temperature, pad, s.packing, s.micro_batch_size)


def opd_phase_step(
    task: Any,
    policies: dict,
    problems: list,
    s: Any,
    step: int,
    keys: Any = None,
    n_total: int | None = None,
    *,
    teacher: Teacher,
    point: SwitchPoint,
    gamma: float,
) -> dict[str, float]:
    """The OPD phase's step: the base models' validation (step 0), one OPD step, and the
    validation or candidate save due after it (:class:`~baselines.opd_then_rl.switch.
    SwitchPoint`)."""
    extra = point.validate(task, policies, 0) if step == 0 and 0 in point.due else {}
    row = opd_step(task, policies, problems, s, step, keys, n_total, teacher=teacher, gamma=gamma)
    for k, v in point.after_update(task, policies, step + 1).items():
        extra[k] = extra[k] + v if k in extra else v  # seconds and tokens of two validations add
    return row | extra


def validation_problems(task: Task, s: OPDThenRLSettings) -> list:
    """The problems the switch point is chosen on (none for ``switch: fixed``)."""
    if s.switch != "best_validation":
        return []
    return task.problems(s.validation_split)[: s.validation_problems]


@contextlib.contextmanager
def distilling(run: Run, step: StepFn) -> Iterator[StepFn]:
    """Phase 1's step with the teacher and the switch point bound (resumed from the rows a
    checkpoint keeps); when the loop is done, the switch points chosen into
    ``OUT/opd/switch.json``."""
    s, out, acc = run.settings, run.out, run.accelerator
    problems = validation_problems(run.task, s)
    teacher = load_teacher(run.family, s, run.tokenizers, acc)
    point = SwitchPoint(
        s.switch,
        out / "candidates",
        s.opd_steps,
        s.validate_every,
        problems,
        s.max_new_tokens,
        run.tokenizers,
        acc,
    )
    last = ckpt.latest_checkpoint(out / "checkpoints")
    start = int(last.name.split("-")[1]) if last is not None else 0
    rows = logbook.read_rows(out / "metrics.jsonl")
    point.resume((r for r in rows if r[mk.STEP] < start), run.policies)
    try:
        yield functools.partial(step, teacher=teacher, point=point, gamma=s.iw_opd_gamma)
    finally:
        teacher.close()
    chosen = point.choose(logbook.read_rows(out / "metrics.jsonl"), run.policies)
    payload = {
        "switch": s.switch,
        "opd_steps": s.opd_steps,
        "validate_every": s.validate_every if problems else None,
        "validation_split": s.validation_split if problems else None,
        "validation_problems": len(problems),
        "rl_seed": rl_seed(s.seed),
        "models": chosen,
    }
    if acc is None or acc.is_main_process:
        atomic_write_text(out / SWITCH_FILE, json.dumps(payload, indent=2) + "\n")


def read_switch(out: Path) -> dict:
    """The switch points phase 1 chose (``OUT/opd/switch.json``)."""
    return json.loads((out / "opd" / SWITCH_FILE).read_text())


def start_family(fam: dict, switch: dict) -> dict:
    """The family row the RL phase starts from: each model's chosen OPD checkpoint (keeping its
    persona and template kwargs), or its base model when the switch chose 0 updates."""
    out = copy.deepcopy(fam)
    for name, chosen in switch["models"].items():
        if chosen["path"]:
            row = out[f"model_{name.lower()}"]
            row["model"], row["revision"] = chosen["path"], None
    return out


def validation_totals(rows: list[dict]) -> dict[str, Any]:
    """What choosing the switch point cost: tokens each model generated, and seconds."""
    tokens = {
        m: float(sum(r.get(mk.key(VALIDATION_TOKENS, model=m), 0) or 0 for r in rows))
        for m in mk.MODELS
    }
    return {"validation_tokens": tokens, "validation_s": sum(r.get(VALIDATION_S, 0) for r in rows)}


def check(config: dict, fam: dict, task: Task, s: OPDThenRLSettings, accelerator: Any) -> None:
    """Refuse a run with no teacher, or with no validation problems to choose the switch on,
    before any model loads."""
    teacher_row(fam, s)
    if s.switch == "best_validation" and not validation_problems(task, s):
        raise ValueError(
            f"opd_then_rl.switch best_validation: task {task.name!r} has no "
            f"{s.validation_split!r} problems; set another opd_then_rl.validation_split, or "
            "switch: fixed"
        )


def summary_extras(out: Path, rows: list[dict]) -> dict[str, Any]:
    """``opd_switch``: each model's switch point, its validation scores and the validation's
    own cost (the teacher's cost is its keys' totals)."""
    return {"opd_switch": read_switch(out) | validation_totals(rows)}


TRAINER = InHouseTrainer(
    "opd_then_rl",
    OPDThenRLSettings,
    check=check,
    keys=KEYS,
    extras=summary_extras,
    progress=(
        mk.ROLE_CORRECT.replace("{role}", "drafter"),
        "{model}/opd/reverse_kl",
        "{model}/opd/validation_pass@1",
        mk.TOKENS,
    ),
    phases=(
        Phase(
            "opd",
            opd_phase_step,
            settings=lambda s, out: opd_settings(s),
            bind=distilling,
            done=lambda out: (out / SWITCH_FILE).is_file(),
        ),
        Phase(
            "rl",
            grpo_step,
            settings=lambda s, out: rl_settings(
                s, logbook.read_rows(out / "opd" / "metrics.jsonl")
            ),
            family=lambda fam, out: start_family(fam, read_switch(out)),
        ),
    ),
)
