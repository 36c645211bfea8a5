"""GAR's step cost over the plain GRPO step, side by side in one process on the same toy batch.

- ``gar.step_over_grpo_step``: one GAR step (:func:`baselines.gar.step.gar_step`: rollout,
  grading, the extra hidden-state forward over the anchors and the samples, the cosines, the
  update) over one GRPO step (:func:`agon.rl.grpo_step`) of the same
  tiny model on the same P toy ``arith`` problems x G samples: the median, over repeats, of
  the ratio of two steps taken back to back (in alternating order). The learning rate is 0,
  so both sides keep the same weights and draw the very same samples at every repeat (the
  update still runs in full). The abstract reports under 9% (a ratio under 1.09).
- ``gar.step_s``, ``gar.grpo_step_s``: the median step seconds; ``gar.cosine_s``: the median
  seconds of GAR's extra work (``time/gar_s``); ``gar.forward_tokens_per_step``: the tokens
  that work forwards (anchors and samples, with their prompts) against
  ``gar.tokens_per_step``, the tokens sampled.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

from agon import rl
from agon.random_models import tiny_policies
from agon.toy.tasks import ArithTask
from agon.training.settings import RLSettings
from baselines.gar import GARSettings
from baselines.gar.step import GAR_S, gar_step

TARGETS = {"gar.step_over_grpo_step": ("<=", 1.09)}

P, G, MAX_NEW, REPEATS = 8, 8, 24, 8  # problems, samples per problem, tokens, timed pairs
THREADS = 1  # torch threads for both sides


def run() -> dict[str, float]:
    # one thread: on a shared, oversubscribed machine multi-threaded kernels spin and the
    # timings swing; both sides run under the same setting
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    task = ArithTask(n_train=200, n_test=1, n_validation=0, levels=4, hard_min_level=3)
    task.grading_workers = 1
    problems = task.problems("train")[:P]
    # the weights must not move between timed steps (both sides time the same model): the
    # schema wants a learning rate above 0, and at 1e-30 AdamW's steps round away in float32
    kw = dict(problems_per_step=P, num_generations=G, max_new_tokens=MAX_NEW, learning_rate=1e-30)
    gar_s = GARSettings(**kw)
    grpo_s = RLSettings(**kw)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            gar_pol = tiny_policies("qwen3", root, gar_s, names=["A"], seeds=[0])
            grpo_pol = tiny_policies("qwen3", root, grpo_s, names=["A"], seeds=[0])

            def timed(fn):
                t0 = time.perf_counter()
                row = fn()
                return time.perf_counter() - t0, row

            def gar(i):
                return timed(lambda: gar_step(task, gar_pol, problems, gar_s, step=i))

            def grpo(i):
                return timed(lambda: rl.grpo_step(task, grpo_pol, problems, grpo_s, step=i))

            gar(0), grpo(0)  # warm-up: the grading pool, first-call costs
            ratios, t_gar, t_grpo, cos_s, rows = [], [], [], [], []
            for i in range(1, REPEATS + 1):
                if i % 2:  # alternate which side goes first
                    (tg, row), (tp, _) = gar(i), grpo(i)
                else:
                    (tp, _), (tg, row) = grpo(i), gar(i)
                ratios.append(tg / tp)
                t_gar.append(tg)
                t_grpo.append(tp)
                cos_s.append(row[GAR_S])
                rows.append(row)
    finally:
        task.close()
    forwarded = [r["A/gar/anchor_tokens"] + r["A/gar/rollout_tokens"] for r in rows]
    return {
        "gar.step_over_grpo_step": statistics.median(ratios),
        "gar.step_s": statistics.median(t_gar),
        "gar.grpo_step_s": statistics.median(t_grpo),
        "gar.cosine_s": statistics.median(cos_s),
        "gar.forward_tokens_per_step": statistics.median(forwarded),
        "gar.tokens_per_step": statistics.median(r["tokens_generated"] for r in rows),
    }
