"""The training loop of every in-house trainer: problem stream, resume, checkpoints, metrics
rows, probes.

:func:`train` runs a trainer's step function (the duel's :func:`agon.duel.duel_step`, GRPO's
:func:`agon.rl.grpo_step`, a baseline's) for ``settings.steps`` steps and does the plumbing
around it: problems in a seeded order that is part of a checkpoint (each process
takes ``batch[rank::world]`` of a step's problems and lists them in ``shares/rank-R.jsonl``),
a complete checkpoint every ``checkpoint_every`` steps (:mod:`agon.training.checkpoint`), one
JSON row per step in ``metrics.jsonl`` (keys: :mod:`agon.training.metrics`), and the
validation probe of each model alone (:mod:`agon.training.probe`) on its steps. A run killed
at any point restarts from its last complete checkpoint and reproduces the uninterrupted run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from accelerate.utils import gather_object

from agon.tasks.base import Problem, Task
from agon.training import checkpoint as ckpt
from agon.training import probe
from agon.training.budget import active_models
from agon.training.budget import from_settings as budget_of
from agon.training.cost import measured
from agon.training.logbook import combine_ranks, read_rows
from agon.training.metrics import CPU_S, GPU_S, STEP, Declared
from agon.training.policy import Policy
from agon.training.settings import RLSettings

log = logging.getLogger("agon.train")

# One training step of every policy: (task, policies, problems, settings, step, keys, n_total)
# -> the step's metrics row (agon.rl's signature; keys: agon.training.metrics)
StepFn = Callable[..., dict]


class ProblemStream:
    """Problems in a seeded order, reshuffled each epoch; its position is part of a checkpoint."""

    def __init__(self, problems: Sequence[Problem], seed: int):
        if not problems:
            raise ValueError("no training problems: the task's train split is empty")
        self.problems, self.seed = list(problems), seed
        self.epoch, self.pos = 0, 0

    def _order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.problems))

    def take(self, n: int) -> list[Problem]:
        """The next ``n`` problems (crossing into the next epoch's order when needed)."""
        out = []
        order = self._order()
        while len(out) < n:
            if self.pos >= len(order):
                self.epoch, self.pos = self.epoch + 1, 0
                order = self._order()
            out.append(self.problems[order[self.pos]])
            self.pos += 1
        return out

    def state_dict(self) -> dict:
        """The stream's position, for a checkpoint."""
        return {"epoch": self.epoch, "pos": self.pos, "seed": self.seed, "n": len(self.problems)}

    def load_state_dict(self, state: dict) -> None:
        """Resume at a checkpoint's position (refused for other problems or another seed)."""
        if state["n"] != len(self.problems) or state["seed"] != self.seed:
            raise ValueError(
                f"checkpoint data position is for {state['n']} problems / seed {state['seed']}, "
                f"this run has {len(self.problems)} / {self.seed}"
            )
        self.epoch, self.pos = state["epoch"], state["pos"]


def train(
    task: Task,
    policies: dict[str, Policy],
    s: RLSettings,
    out_dir: str | Path,
    step_fn: StepFn,
    on_step: Callable[[dict], None] | None = None,
    declared: Declared | None = None,
) -> list[dict]:
    """Train ``policies`` for ``s.steps`` steps on ``task``'s train split, resuming if possible.

    Writes ``out_dir/metrics.jsonl`` (one JSON row per step) and ``out_dir/checkpoints/``.
    A run killed at any point restarts from its last complete checkpoint; the metrics of steps
    after it are dropped and recomputed, so the file never has a step twice.

    With ``s.eval_every`` > 0, each policy is also probed alone on ``train.eval_split`` before the
    update of step 0, every ``eval_every`` steps and after the last update; the scores go into
    the rows (the last one into a row ``step = s.steps`` of its own, not in the returned
    list). The probes do not touch the training RNG.

    ``step_fn`` is one training step (:data:`StepFn`): a method that changes only the step (a
    baseline's advantages, say) keeps this loop's resume, checkpoints, probes, process shares
    and metrics. ``declared``: the metrics keys it may write (:data:`agon.training.metrics.KEYS`
    and the trainer's own); a row with a key none declares is refused before it is written.

    Matched compute (``s.budget_targets``, set by ``agon train --match-run`` for a trainer
    in :data:`agon.methods.BUDGET_MATCHED`): the loop runs each model until it has spent its
    target (:mod:`agon.training.budget`) or taken its most steps, handing ``step_fn`` only the
    models still training; it ends when none is. The spend so far is read from the metrics rows,
    which a checkpoint's resume keeps.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = out_dir / "metrics.jsonl"
    stream = ProblemStream(task.problems(s.split), s.seed)
    torch.manual_seed(s.seed)
    acc = next(iter(policies.values())).accelerator
    start = 0
    last = ckpt.latest_checkpoint(out_dir / "checkpoints")
    if last is not None:
        state = ckpt.load_checkpoint(last, policies, accelerator=acc)
        for policy in policies.values():  # an engine with its own weights (vLLM) samples these
            policy.sync_engine()
        stream.load_state_dict(state["data"])
        start = state["step"]
        log.info("resumed from %s at step %d", last, start)
    if acc is None or acc.is_main_process:
        ckpt.truncate_jsonl(metrics_path, keep=lambda row: row.get(STEP, -1) < start)
    rank, world = (acc.process_index, acc.num_processes) if acc is not None else (0, 1)
    if s.problems_per_step < world:
        raise ValueError(
            f"problems_per_step {s.problems_per_step} < {world} processes: every process needs "
            "at least one problem per step"
        )
    shares_path = out_dir / "shares" / f"rank-{rank}.jsonl"
    shares_path.parent.mkdir(exist_ok=True)
    ckpt.truncate_jsonl(shares_path, keep=lambda row: row.get(STEP, -1) < start)
    eval_set = probe.hard_problems(task, s.eval_problems, s.eval_split) if s.eval_every else []
    wrong = probe.wrong_drafts(task, eval_set)  # the readers' robustness probe (if the task can)
    keys_known = declared or Declared()

    def evaluate(updates: int) -> dict[str, float]:
        # every rank probes the whole set: sharded (FSDP) models need every rank in each forward
        m = probe.hard_pass1(
            {n: p.engine for n, p in policies.items()},
            task,
            eval_set,
            s.max_new_tokens,
            models=[p.model for p in policies.values()],
            wrong=wrong,
        )
        log.info("%s pass@1 after %d updates: %s", s.eval_split, updates, probe.describe(m))
        return m

    def write(row: dict) -> dict:
        missing = keys_known.undeclared(row)
        if missing:
            raise KeyError(
                f"metrics keys {missing} are not declared: declare each with how processes "
                "combine it (agon.training.metrics.Key), in KEYS or in the trainer's `keys`"
            )
        if world > 1:  # the step's row over every rank's share of the batch
            row = combine_ranks(gather_object([row]), keys_known)
        if rank == 0:
            with open(metrics_path, "a") as f:
                f.write(json.dumps(row, allow_nan=True) + "\n")
        return row

    budget = budget_of(s)
    if budget is not None and s.TOGETHER:
        raise ValueError("a compute budget applies to a trainer whose models train alone")
    # what the models spent before this run's first step (the rows a resume keeps)
    spent_rows = [r for r in read_rows(metrics_path) if r.get(STEP, -1) < start]
    last_step = max((s.model_steps(n) for n in policies), default=s.steps)
    rows = []
    done = start
    for step in range(start, last_step):
        training = active_models(budget, policies, spent_rows + rows, s)
        if not training:
            break
        # every rank draws the same P problems and rolls out its share; groups live inside a
        # problem, so advantages need no communication; a problem's samples are seeded by its
        # place in the batch (keys) and the loss normalizers count every rank's tokens, so the
        # ranks together take the step one process would
        batch = stream.take(s.problems_per_step)
        keys = list(range(len(batch)))[rank::world]
        problems = [batch[k] for k in keys]
        with open(shares_path, "a") as f:  # which problems this rank trained on
            f.write(
                json.dumps(
                    {STEP: step, "rank": rank, "world": world, "problems": [p.id for p in problems]}
                )
                + "\n"
            )
        # the probe scores the models before this step's update
        evaluation = evaluate(step) if probe.is_eval_step(step, s.eval_every) else {}
        with measured() as cost:
            step_policies = {n: policies[n] for n in training}
            row = step_fn(task, step_policies, problems, s, step, keys, len(batch))
        row |= {CPU_S: cost["cpu_s"], GPU_S: cost["gpu_s"]} | evaluation
        row = write(row)
        rows.append(row)
        if on_step:
            on_step(row)
        done = step + 1
        last = done == last_step or not active_models(budget, policies, spent_rows + rows, s)
        if (s.checkpoint_every and done % s.checkpoint_every == 0) or last:
            ckpt.save_checkpoint(
                out_dir / "checkpoints",
                done,
                policies,
                data=stream.state_dict(),
                keep=s.keep_checkpoints,
                accelerator=acc,
            )
    if s.eval_every:  # the trained models; a resume drops this row with the others, writes it again
        write(probe.final_row(done, evaluate(done)))
    return rows
