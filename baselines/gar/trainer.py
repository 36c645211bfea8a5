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
from typing import Any, ClassVar

from agon.tasks.base import Task
from agon.training import metrics as mk
from agon.training.policy import distributed_info
from agon.training.settings import RLSettings, setting
from agon.training.shell import InHouseTrainer
from baselines.gar.step import KEYS, gar_step


@dataclass
class GARSettings(RLSettings):
    """The shared ``train`` settings, the family's ``max_new_tokens`` and the ``gar`` section."""

    weight: float = setting("gar.weight")  # w: reward = correct + w * f(cosine)
    gradient: str = setting("gar.gradient")  # lm_head: the gradient at the output projection
    reduction: str = setting("gar.reduction")  # sum | token_mean: the sequence's, or per token
    anchor: str = setting("gar.anchor")  # worked_solution: the task's expert solution
    anchor_max_tokens: int | None = setting("gar.anchor_max_tokens")  # None: family's limit
    missing: str = setting("gar.missing")  # outcome_only | drop: a problem without an anchor
    cosine: str = setting("gar.cosine")  # clipped (to [0, 1]) | signed
    apply_to: str = setting("gar.apply_to")  # all | wrong: which samples get the term
    compute: str = setting("gar.compute")  # auto | explicit | gram: how inner products are made
    vocab_chunk: int = setting("gar.vocab_chunk")  # vocabulary rows per chunk of logits

    SECTIONS: ClassVar[tuple[str, ...]] = ("gar",)
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens",)


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
    keys=KEYS,
    progress=(mk.ROLE_CORRECT.replace("{role}", "drafter"), "{model}/gar/cosine", mk.TOKENS),
)
