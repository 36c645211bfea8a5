"""The GAR trainer: A and B each trained alone, GRPO with a gradient-alignment reward.

``agon train --method gar`` trains both models of a family for ``train.steps`` steps, each
alone on the same problems (P problems x G samples per model and step, as GRPO's
:func:`agon.rl.grpo_step`), with the step of :mod:`baselines.gar.step`; the config's ``gar``
section is read into :class:`GARSettings` (``docs/method.md``, GAR). :data:`TRAINER` is the
registry's entry (the settings, the step, the checks, the summary extras), run by the shell of
every in-house trainer (:mod:`agon.training.shell`): problem stream, resume, checkpoints,
probes, and its multi-process path (DDP; each process rolls out, scores and trains on its share
of a step's problems).

Outputs are those of every trainer (:mod:`agon.training.shell`): ``OUT/A``, ``OUT/B``,
``OUT/metrics.jsonl`` (one row per step: the drafter keys per model, whose reward is GAR's,
plus ``{model}/gar/...``) and resumable checkpoints. The cosines' cost is apart from the
policies' samples (``tokens_generated`` counts the samples only): each row has
``{model}/gar/anchor_tokens`` and ``{model}/gar/rollout_tokens`` (tokens forwarded for the
anchors and forwarded again for the samples, every process's) and ``time/gar_s`` (inside
``time/rollout_s``; the step's ``time/cpu_s`` and ``time/gpu_s`` include it); ``summary.json``
adds their totals, ``{model}/gar_anchor_tokens``, ``{model}/gar_rollout_tokens``,
``{model}/gar_no_anchor`` (problems drawn without an anchor) and ``gar_time_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agon.tasks.base import Task
from agon.training import metrics as mk
from agon.training.policy import distributed_info
from agon.training.settings import RLSettings
from agon.training.shell import InHouseTrainer
from baselines.gar.gradients import COMPUTES, REDUCTIONS
from baselines.gar.reward import ANCHORS, APPLY_TO, COSINES, GRADIENTS, MISSING
from baselines.gar.step import ANCHOR_TOKENS, GAR_S, NO_ANCHOR, ROLLOUT_TOKENS, gar_step

# summary.json: a model's totals over the run, and the cosines' seconds
TOTALS = {
    "{model}/gar_anchor_tokens": ANCHOR_TOKENS,
    "{model}/gar_rollout_tokens": ROLLOUT_TOKENS,
    "{model}/gar_no_anchor": NO_ANCHOR,
}
TIME_TOTAL = "gar_time_s"


@dataclass
class GARSettings(RLSettings):
    """The shared ``train`` settings, the family's ``max_new_tokens`` and the ``gar`` section."""

    weight: float = 0.5  # w: reward = correct + w * f(cosine)
    gradient: str = "lm_head"  # lm_head: the gradient at the output projection
    reduction: str = "sum"  # sum | token_mean: a sequence's gradient, or its tokens' mean cosine
    anchor: str = "worked_solution"  # worked_solution: the task's expert solution
    anchor_max_tokens: int | None = None  # None: the family's max_new_tokens
    missing: str = "outcome_only"  # outcome_only | drop: a problem without an anchor
    cosine: str = "clipped"  # clipped (to [0, 1]) | signed
    apply_to: str = "all"  # all | wrong: which samples get the term
    compute: str = "auto"  # auto | explicit | gram: how the inner products are computed
    vocab_chunk: int = 8192  # vocabulary rows per chunk of logits

    SECTIONS: ClassVar[tuple[str, ...]] = ("gar",)
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens",)
    POSITIVE: ClassVar[tuple[str, ...]] = (*RLSettings.POSITIVE, "vocab_chunk")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.weight >= 0:
            raise ValueError(f"gar.weight must be >= 0, got {self.weight}")
        if self.anchor_max_tokens is not None and self.anchor_max_tokens < 1:
            raise ValueError(f"gar.anchor_max_tokens must be >= 1, got {self.anchor_max_tokens}")

    def _choices(self) -> dict[str, tuple]:
        return {
            **super()._choices(),
            "gradient": GRADIENTS,
            "reduction": REDUCTIONS,
            "anchor": ANCHORS,
            "missing": MISSING,
            "cosine": COSINES,
            "apply_to": APPLY_TO,
            "compute": COMPUTES,
        }


def gar_totals(out: Path, rows: list[dict]) -> dict[str, float]:
    """The cosines' cost over a run's metrics ``rows`` (:data:`TOTALS`, :data:`TIME_TOTAL`),
    for ``summary.json``."""
    return mk.totals(rows, TOTALS, {TIME_TOTAL: GAR_S})


def check(config: dict, fam: dict, task: Task, s: GARSettings, accelerator: Any) -> None:
    """Refuse a task none of whose training problems has a worked solution (GAR would be
    GRPO), and sharded models (the hidden-state pass needs the whole model on every process)."""
    if not any(task.worked_solution(p) for p in task.problems(s.split)):
        raise ValueError(
            f"gar: no problem of task {task.name!r}'s {s.split} split has a worked solution to "
            "anchor on (deepmath: set the task's `solutions: true`; reasoning_gym: gsm_symbolic)"
        )
    if distributed_info(accelerator)["distributed_type"] == "FSDP":
        raise ValueError(
            "gar's hidden-state pass needs the whole model on every process: run it on one "
            "process or with DDP, not FSDP"
        )


TRAINER = InHouseTrainer(
    "gar",
    GARSettings,
    gar_step,
    check=check,
    extras=gar_totals,
    progress=(mk.ROLE_CORRECT.replace("{role}", "drafter"), "{model}/gar/cosine", mk.TOKENS),
)
