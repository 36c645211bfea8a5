"""The GAR trainer: A and B each trained alone, GRPO with a gradient-alignment reward.

``agon train --method gar`` trains both models of a family for ``train.steps`` steps, each
alone on the same problems (P problems x G samples per model and step, as the duel's solo
mode), with the step of :mod:`baselines.gar.step`; the config's ``gar`` section is read into
:class:`GARSettings` (``docs/method.md``, GAR). The loop is the duel's,
:func:`agon.training.loop.train`, with :func:`~baselines.gar.step.gar_step` as its step:
problem stream, resume, checkpoints, probes, and its multi-process path (DDP; each process
rolls out, scores and trains on its share of a step's problems); the policies are built,
distributed and saved as the duel's (:mod:`agon.training.run`).

Outputs are those of every trainer (:mod:`agon.training.run`): ``OUT/A``, ``OUT/B``,
``OUT/metrics.jsonl`` (one row per step: the duel trainer's drafter keys per model, whose
reward is GAR's, plus ``{model}/gar/...``) and resumable checkpoints. The cosines' cost is
apart from the policies' samples (``tokens_generated`` counts the samples only): each row has
``{model}/gar/anchor_tokens`` and ``{model}/gar/rollout_tokens`` (tokens forwarded for the
anchors and forwarded again for the samples, every process's) and ``time/gar_s`` (inside
``time/rollout_s``; the step's ``time/cpu_s`` and ``time/gpu_s`` include it); ``summary.json``
adds their totals, ``{model}/gar_anchor_tokens``, ``{model}/gar_rollout_tokens``,
``{model}/gar_no_anchor`` (problems drawn without an anchor) and ``gar_time_s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from agon.registry import Trainer
from agon.training import metrics as mk
from agon.training.settings import DuelSettings
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
class GARSettings(DuelSettings):
    """The shared ``train`` settings, the family's ``max_new_tokens`` and the ``gar`` section.

    A subclass of the duel's settings so that :mod:`agon.duel`'s solo-mode functions take it
    as they are; ``mode`` is always ``solo`` and the ``agon`` section is not read.
    """

    mode: str = "solo"
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
    POSITIVE: ClassVar[tuple[str, ...]] = (*DuelSettings.POSITIVE, "vocab_chunk")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode != "solo":
            raise ValueError("gar trains each model alone: mode must be 'solo'")
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


def gar_totals(metrics_path: str | Path) -> dict[str, float]:
    """The cosines' cost over a run's ``metrics.jsonl`` (:data:`TOTALS`, :data:`TIME_TOTAL`),
    for ``summary.json``."""
    return mk.totals(mk.read_rows(metrics_path), TOTALS, {TIME_TOTAL: GAR_S})


def check_anchors(task, split: str) -> None:
    """Refuse a task none of whose training problems has a worked solution: GAR would be GRPO."""
    if not any(task.worked_solution(p) for p in task.problems(split)):
        raise ValueError(
            f"gar: no problem of task {task.name!r}'s {split} split has a worked solution to "
            "anchor on (deepmath: set the task's `solutions: true`; reasoning_gym: gsm_symbolic)"
        )


def train_pair(config: dict, fam: dict, task_name: str, s: GARSettings, out: Path) -> dict:
    """`agon train --method gar`: A and B each trained alone with GAR; the summary payload."""
    import torch

    from agon.tasks import task_from_config
    from agon.training.loop import train
    from agon.training.policy import distributed_info, make_accelerator
    from agon.training.run import family_policies, run_payload, save_policies

    task = task_from_config(config, task_name)
    try:
        check_anchors(task, s.split)
    except ValueError:
        task.close()
        raise
    torch.manual_seed(s.seed)
    accelerator = make_accelerator()
    if distributed_info(accelerator)["distributed_type"] == "FSDP":
        task.close()
        raise ValueError(
            "gar's hidden-state pass needs the whole model on every process: run it on one "
            "process or with DDP, not FSDP"
        )
    policies, tokenizers = family_policies(config, fam, s, accelerator)
    t0 = time.time()
    try:
        rows = train(task, policies, s, out, on_step=_print_step, step_fn=gar_step)
    finally:
        task.close()
    save_policies(policies, tokenizers, out, accelerator)
    return run_payload(out, rows, t0, accelerator, s) | gar_totals(out / "metrics.jsonl")


def _print_step(row: dict) -> None:
    keys = [
        *(mk.key(mk.ROLE_CORRECT, model=m, role="drafter") for m in mk.MODELS),
        *(f"{m}/gar/cosine" for m in mk.MODELS),
        mk.TOKENS,
    ]
    shown = " ".join(f"{k}={row[k]:.3g}" for k in keys if k in row)
    print(f"[gar train] step {row['step']}: {shown}", flush=True)


TRAINER = Trainer("gar", GARSettings, train_pair, settings_overrides=(("mode", "solo"),))
