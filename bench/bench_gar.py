"""GAR's step cost over the plain GRPO step, side by side in one process on the same toy batch.

- ``gar.step_over_grpo_step``: one GAR step (:func:`baselines.gar.step.gar_step`: rollout,
  grading, the anchors' forward, the cosines, the update) over one GRPO step
  (:func:`agon.rl.grpo_step`) of one policy on the same P toy ``arith`` problems x G samples:
  the median, over repeats, of the ratio of two steps taken back to back (in alternating
  order). The learning rate is 0, so the weights stay put and both sides draw the very same
  samples at every repeat (the update still runs in full). The abstract reports under 9% (a
  ratio under 1.09).
- Both sides must train: a random model never solves ``arith``, so every GRPO group would have
  one reward, its advantages would all be 0 and its update would skip its forward and backward
  (:func:`agon.rl.update`), while GAR's cosines spread its rewards and it trains: the ratio
  would set a full GAR step against a GRPO step without its update (1.94 on the results page
  before this was seen). So both sides grade with the task's own verifier (its cost) and then
  count as right the samples whose text has an even CRC-32 (:class:`SomeRight`): about half,
  the same samples on both sides, as a model that solves some problems would.
  ``gar.zero_advantage_steps`` and ``gar.grpo_zero_advantage_steps`` count the timed steps
  whose update was skipped (target 0).
- ``gar.step_over_grpo_step_min`` / ``_max``: the spread of the repeats' ratios (the machine's
  noise); ``gar.step_over_grpo_step_cpu``: the median ratio of the two steps' CPU seconds in
  this process (the grading workers' left out, the same on both sides), which a shared
  machine's time slicing does not inflate as it does wall seconds.
- ``gar.step_s``, ``gar.grpo_step_s``: the median step seconds (``gar.grpo_rollout_s``,
  ``gar.grpo_update_s``: the GRPO step's two parts); ``gar.cosine_s``: the median seconds of
  GAR's extra work (``time/gar_s``); ``gar.forward_tokens_per_step``: the tokens that work
  forwards (the anchors with their prompts, and any sample forwarded again: none where the
  rollout recorded the samples' hidden states) against ``gar.tokens_per_step``, the tokens
  sampled.

The policy is the tests' tiny qwen3 (hidden 32, 2 layers, 320 ids). ``AGON_BENCH_GAR_WIDTH``
names a published checkpoint (:data:`agon.plan.PUBLISHED`, e.g. ``Qwen/Qwen3-4B``) to measure
at its real width instead (:func:`agon.random_models.build_wide_model`: random weights, the
family's bfloat16, ``AGON_BENCH_GAR_LAYERS`` decoder layers, default 1), on a smaller batch
(:data:`WIDE`); ``python -m bench.bench_gar`` prints that run's metrics. ``docs/method.md``,
GAR, reads both.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import torch

from agon import rl
from agon.engines.hf import HFEngine
from agon.grading.verdict import Verdict
from agon.random_models import build_wide_model, tiny_policies
from agon.tasks.base import Problem, Task
from agon.toy.tasks import ArithTask
from agon.training.policy import Policy, make_policy
from agon.training.settings import RLSettings
from baselines.gar import GARSettings
from baselines.gar.step import GAR_S, gar_step

TARGETS = {
    "gar.step_over_grpo_step": ("<=", 1.09),
    "gar.zero_advantage_steps": ("<=", 0),
    "gar.grpo_zero_advantage_steps": ("<=", 0),
}

# problems, samples per problem, tokens, timed pairs: the toy batch, and the real-width one
TOY = (8, 8, 24, 16)
WIDE = (2, 4, 16, 3)
THREADS = 1  # torch threads for both sides


class SomeRight:
    """``task`` whose grade runs its own verifier, then marks right the completions whose text
    has an even CRC-32 (undecided ones stay undecided): a random model's samples, of which none
    is right, graded as if some were, so that GRPO's groups have a spread and its update runs."""

    def __init__(self, task: Task):
        self.task = task

    def __getattr__(self, name):
        return getattr(self.task, name)

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """The verifier's verdicts (and its cost), right where the CRC-32 is even."""
        verdicts = self.task.grade(problems, completions)
        return [
            v if v.correct is None else dataclasses.replace(v, correct=_even(text))
            for v, text in zip(verdicts, completions)
        ]


def _even(text: str) -> bool:
    return zlib.crc32(text.encode()) % 2 == 0


def _policy(root: Path, s: RLSettings, width: str | None, layers: int) -> dict[str, Policy]:
    """The one policy both sides step: the tiny qwen3, or ``width``'s real width."""
    if width is None:
        return tiny_policies("qwen3", root, s, names=["A"], seeds=[0])
    model, tok = build_wide_model(width, layers, root / "wide", dtype="bfloat16")
    engine = HFEngine(model, tok, batch_size=64)
    return {"A": make_policy("A", model, engine, s, pad_token_id=engine.pad_id)}


def run() -> dict[str, float]:
    # one thread: on a shared, oversubscribed machine multi-threaded kernels spin and the
    # timings swing; both sides run under the same setting
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    width = os.environ.get("AGON_BENCH_GAR_WIDTH") or None
    layers = int(os.environ.get("AGON_BENCH_GAR_LAYERS", "1"))
    P, G, max_new, repeats = WIDE if width else TOY
    arith = ArithTask(n_train=200, n_test=1, n_validation=0, levels=4, hard_min_level=3)
    arith.grading_workers = 1
    task = SomeRight(arith)
    problems = arith.problems("train")[:P]
    # the weights must not move between timed steps (both sides time the same model): the
    # schema wants a learning rate above 0, and at 1e-30 AdamW's steps round away
    kw = dict(problems_per_step=P, num_generations=G, max_new_tokens=max_new, learning_rate=1e-30)
    gar_s = GARSettings(**kw)
    grpo_s = RLSettings(**kw)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            policy = _policy(Path(tmp), gar_s, width, layers)
            cpu: list[float] = []  # this process's CPU seconds of each timed step, in order

            def timed(fn):
                t0, c0 = time.perf_counter(), time.process_time()
                row = fn()
                cpu.append(time.process_time() - c0)
                return time.perf_counter() - t0, row

            def gar(i):
                return timed(lambda: gar_step(task, policy, problems, gar_s, step=i))

            def grpo(i):
                return timed(lambda: rl.grpo_step(task, policy, problems, grpo_s, step=i))

            gar(0), grpo(0)  # warm-up: the grading pool, first-call costs
            ratios, cpu_ratios, t_gar, t_grpo, rows, grpo_rows = [], [], [], [], [], []
            for i in range(1, repeats + 1):
                cpu.clear()
                if i % 2:  # alternate which side goes first
                    (tg, row), (tp, grpo_row) = gar(i), grpo(i)
                    cpu_ratios.append(cpu[0] / cpu[1])
                else:
                    (tp, grpo_row), (tg, row) = grpo(i), gar(i)
                    cpu_ratios.append(cpu[1] / cpu[0])
                ratios.append(tg / tp)
                t_gar.append(tg)
                t_grpo.append(tp)
                rows.append(row)
                grpo_rows.append(grpo_row)
    finally:
        arith.close()
    forwarded = [r["A/gar/anchor_tokens"] + r["A/gar/rollout_tokens"] for r in rows]
    return {
        "gar.step_over_grpo_step": statistics.median(ratios),
        "gar.step_over_grpo_step_min": min(ratios),
        "gar.step_over_grpo_step_max": max(ratios),
        "gar.step_over_grpo_step_cpu": statistics.median(cpu_ratios),
        "gar.step_s": statistics.median(t_gar),
        "gar.grpo_step_s": statistics.median(t_grpo),
        "gar.grpo_rollout_s": statistics.median(r["time/rollout_s"] for r in grpo_rows),
        "gar.grpo_update_s": statistics.median(r["time/update_s"] for r in grpo_rows),
        "gar.cosine_s": statistics.median(r[GAR_S] for r in rows),
        "gar.forward_tokens_per_step": statistics.median(forwarded),
        "gar.tokens_per_step": statistics.median(r["tokens_generated"] for r in rows),
        "gar.zero_advantage_steps": float(sum(r["A/zero_advantage"] == 1.0 for r in rows)),
        "gar.grpo_zero_advantage_steps": float(
            sum(r["A/zero_advantage"] == 1.0 for r in grpo_rows)
        ),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2, sort_keys=True))
