"""TRL's logs of every GRPO step as the duel trainer's ``metrics.jsonl`` rows.

TRL's keys go under ``NAME/trl/``, with the duel trainer's names added (``A/drafter/correct``,
``A/entropy``, ...), so the report plots both methods from one schema; the same callback probes
the model at the duel trainer's steps and stops a run that has spent its matched budget.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from transformers import TrainerCallback

from agon.training import logbook
from agon.training import metrics as mk
from agon.training.budget import Budget, spent
from agon.training.cost import StepCost
from agon.training.probe import final_row, is_eval_step
from baselines.grpo.data import REWARD_NAME

ZERO_ADVANTAGE_LOG = "zero_advantage"  # baselines.grpo.zero_advantage's TRL log key


def _aliases(name: str, logs: dict, completions_per_step: int) -> dict:
    """TRL's logs of one step under the duel trainer's metric keys (one schema for the report:
    a GRPO sample is a draft)."""
    get = logs.get

    def role(template: str) -> str:
        return mk.key(template, model=name, role="drafter")

    out = {
        role(mk.ROLE_CORRECT): get(f"rewards/{REWARD_NAME}/mean"),
        role(mk.ROLE_REWARD): get("reward"),
        role(mk.ROLE_ZERO_SPREAD): get("frac_reward_zero_std"),
        role(mk.ROLE_LENGTH): get("completions/mean_length"),
        role(mk.ROLE_TRUNCATED): get("completions/clipped_ratio"),
        f"{name}/entropy": get("entropy"),
        f"{name}/kl": get("kl"),
        f"{name}/grad_norm": get("grad_norm"),
        f"{name}/loss": get("loss"),
        f"{name}/lr": get("learning_rate"),
        # the share of the step's micro-batches that had no signal and ran no backward
        mk.key(mk.ZERO_ADVANTAGE, model=name): get(ZERO_ADVANTAGE_LOG),
    }
    if get("completions/mean_length") is not None:
        tokens = float(get("completions/mean_length")) * completions_per_step
        out[role(mk.ROLE_TOKENS)] = tokens
        out[mk.key(mk.TRAINED_TOKENS, model=name)] = tokens  # every completion is in the loss
        out[role(mk.ROLE_COMPLETIONS)] = float(completions_per_step)
    return {k: v for k, v in out.items() if v is not None}


def _metrics_callback(
    path: Path,
    name: str,
    completions_per_step: int,
    evaluate: Callable[[Any], dict] | None = None,
    eval_every: int = 0,
    budget: Budget | None = None,
):
    """The callback that writes ``metrics.jsonl``; with ``evaluate`` (model -> metrics) and
    ``eval_every`` > 0 it also probes the model at the duel trainer's steps
    (:mod:`agon.training.probe`); with a ``budget`` (tokens or samples) it stops training after
    the first step at which the model has spent its target (:mod:`agon.training.budget`)."""

    class JsonlMetrics(TrainerCallback):
        """Append each logged step to ``path`` as JSON (TRL's keys under NAME/trl/, plus aliases).

        Row ``s`` is the log of the update that takes the model from ``s`` to ``s + 1`` updates
        (``global_step - 1`` when TRL logs it); its probe, of the model after ``s`` updates, is
        taken when that step begins, before its rollout, and written with its log.
        """

        def __init__(self) -> None:
            self.pending: dict[int, dict] = {}  # step -> its probe, until the step's log
            self.cost = StepCost()
            # what this model spent before a resume (the file holds only steps before it)
            self.spent = (
                spent(logbook.read_rows(path), name, budget.match)
                if budget is not None and budget.match != "steps"
                else 0.0
            )

        def on_step_begin(self, args, state, control, model=None, **kwargs):
            if evaluate is not None and is_eval_step(state.global_step, eval_every):
                self.pending = {state.global_step: evaluate(model)}
            self.cost.start()  # after the probe: training work only

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "train_runtime" in logs:  # the end-of-training summary is not a step
                return
            row = {mk.STEP: state.global_step - 1, **_aliases(name, logs, completions_per_step)}
            row.update(
                {f"{name}/trl/{k}": v for k, v in logs.items() if isinstance(v, (int, float))}
            )
            cpu_s, gpu_s = _sum_over_ranks(*self.cost.stop())
            row.update(
                {mk.CPU_S: cpu_s, mk.GPU_S: gpu_s, mk.key(mk.MODEL_CPU_S, model=name): cpu_s}
            )
            row.update(self.pending.pop(row[mk.STEP], {}))
            self._write(row)
            if budget is not None and budget.match != "steps":
                self.spent += spent([row], name, budget.match)
                if self.spent >= budget.target(name):
                    control.should_training_stop = True

        def on_train_end(self, args, state, control, model=None, **kwargs):
            # the trained model; a resume truncates this row with the rest and writes it again
            if evaluate is not None and eval_every:
                self._write(final_row(state.global_step, evaluate(model)))

        def _write(self, row: dict) -> None:
            if _rank() != 0:  # TRL's logged values are already over every process
                return
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")

    return JsonlMetrics()


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _sum_over_ranks(*values: float) -> tuple[float, ...]:
    """``values`` summed over every training process (each one's CPU seconds are its own)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return tuple(float(x) for x in t)
