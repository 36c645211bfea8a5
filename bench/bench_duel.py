"""Duel trainer step costs, measured side by side in one process on the same tiny model.

- ``duel.step_over_two_solo``: one duel step (A drafts G per problem, B reads each draft
  once, K = 1) over two solo GRPO steps with the same P and G, i.e. the same number of
  completions, per generated token (random models stop at random lengths). The second solo
  step samples from reader prompts: for each problem, the reader prompt around one of A's real
  drafts (the one of median prompt length among that problem's G), so both sides process the
  same prompt tokens and the ratio measures what the duel itself adds: reader-prompt building,
  two policies, bookkeeping. (A random model's draft re-tokenizes to more tokens than it was
  sampled as, so a stand-in draft of the sampled length would undercount the reader's prompt.)
- ``duel.step_over_two_solo_raw``: the same with plain solve prompts on both solo steps; the
  extra is then mostly the reader's longer prompts (the draft is in them), which the method
  needs and which no implementation can avoid.
- ``solo.step_over_trl``: our solo step (= GRPO) over TRL GRPOTrainer's step on the same
  model, batch (P problems x G samples), generation length and reward function, median step
  times after a warm-up step.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from agon import duel, rl
from agon.random_models import tiny_policies
from agon.tasks.synthetic import ParityTask
from agon.training.settings import RLSettings
from baselines.grpo import make_reward_fn

TARGETS = {"duel.step_over_two_solo": ("<=", 1.10), "solo.step_over_trl": ("<=", 1.0)}

P, G, MAX_NEW, STEPS, LR = (
    8,
    8,
    24,
    5,
    1e-3,
)  # problems, samples per problem, tokens, timed steps, learning rate
THREADS = 1  # torch threads for every measured side


def _policies(root: Path, names, seeds, settings):
    return tiny_policies("qwen3", root, settings, names=names, seeds=seeds)


def _time_steps(fn, n: int) -> list[tuple[float, float]]:
    """(seconds, tokens generated) of ``n`` calls after one warm-up call."""
    fn(-1)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        tokens = fn(i)
        out.append((time.perf_counter() - t0, tokens))
    return out


def _trl_step_times(model_path: Path, work: Path, n: int) -> list[float]:
    """Median-able per-step wall times of TRL's GRPOTrainer (P x G completions per step)."""
    task = ParityTask()
    problems = task.problems("train")
    ds = Dataset.from_list(
        [{"prompt": task.solve_prompt(p), "problem_id": p.id} for p in problems] * 20
    )
    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    args = GRPOConfig(
        output_dir=str(work),
        max_steps=n + 1,
        per_device_train_batch_size=P * G,
        num_generations=G,
        max_completion_length=MAX_NEW,
        learning_rate=LR,
        loss_type="dapo",
        beta=0.0,
        top_k=0,
        disable_dropout=True,
        gradient_checkpointing=False,
        bf16=False,
        use_cpu=True,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        temperature=1.0,
    )
    stamps: list[float] = []

    class Stamp(TrainerCallback):
        def on_step_begin(self, *a, **k):
            stamps.append(time.perf_counter())

        def on_step_end(self, *a, **k):
            stamps.append(time.perf_counter())

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[make_reward_fn(task, problems)],
        args=args,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[Stamp()],
    )
    trainer.train()
    steps = [stamps[i + 1] - stamps[i] for i in range(0, len(stamps) - 1, 2)]
    return steps[1:]  # drop the warm-up step


class _ReaderShaped:
    """The test task with each problem's solve prompt replaced by a reader prompt around a
    fixed draft (``drafts[problem.id]``)."""

    def __init__(self, task, drafts: dict[str, str]):
        self.task, self.drafts = task, drafts

    def __getattr__(self, name):
        return getattr(self.task, name)

    def solve_prompt(self, problem):
        return self.task.reader_prompt(problem, self.drafts[problem.id])


def _median_drafts(task, problems, roll, engine) -> dict[str, str]:
    """For each problem, the draft (of a real duel rollout) whose reader prompt has the median
    token count among that problem's drafts."""
    out = {}
    for problem, row in zip(problems, roll.drafts):
        ranked = sorted(row, key=lambda d: len(engine.encode(task.reader_prompt(problem, d.text))))
        out[problem.id] = ranked[len(ranked) // 2].text
    return out


def run() -> dict[str, float]:
    # one thread: on a shared, oversubscribed machine multi-threaded kernels spin and the
    # timings swing by 10x; both sides of each ratio run under the same setting
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    task = ParityTask()
    problems = (task.problems("train") * 4)[:P]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        duel_s = duel.DuelSettings(
            problems_per_step=P,
            num_generations=G,
            num_reads=1,
            max_new_tokens=MAX_NEW,
            learning_rate=LR,
        )
        solo_s = RLSettings(
            problems_per_step=P,
            num_generations=G,
            max_new_tokens=MAX_NEW,
            learning_rate=LR,
        )
        pair = _policies(root, ["A", "B"], [0, 1], duel_s)
        solo_a = _policies(root, ["A"], [0], solo_s)
        solo_b = _policies(root, ["B"], [1], solo_s)
        duel.duel_step(task, pair, problems, duel_s, step=0)  # warm-up
        roll = duel.rollout(task, pair["A"], pair["B"], problems, duel_s, step=0, salt=0)
        shaped = _ReaderShaped(task, _median_drafts(task, problems, roll, solo_b["B"].engine))

        def duel_step(i):
            return duel.duel_step(task, pair, problems, duel_s, step=i + 1)["tokens_generated"]

        def two_solo(i, second_task=shaped):
            # the duel's two generations and two updates, as two independent GRPO steps
            a = rl.grpo_step(task, solo_a, problems, solo_s, step=i + 1)["tokens_generated"]
            b = rl.grpo_step(second_task, {"B": solo_b["B"]}, problems, solo_s, step=i + 1)[
                "tokens_generated"
            ]
            return a + b

        def two_solo_raw(i):
            return two_solo(i, second_task=task)

        def one_solo(i):
            return rl.grpo_step(task, solo_a, problems, solo_s, step=i + 100)["tokens_generated"]

        # interleave the measured blocks so machine noise hits both sides alike
        d1, s1, r1 = (
            _time_steps(duel_step, STEPS),
            _time_steps(two_solo, STEPS),
            _time_steps(two_solo_raw, STEPS),
        )
        d2, s2, r2 = (
            _time_steps(duel_step, STEPS),
            _time_steps(two_solo, STEPS),
            _time_steps(two_solo_raw, STEPS),
        )

        def per_tok(rows):
            return statistics.median(t / max(k, 1) for t, k in rows)

        duel_ratio = per_tok(d1 + d2) / per_tok(s1 + s2)
        duel_raw = per_tok(d1 + d2) / per_tok(r1 + r2)

        ours1 = [t for t, _ in _time_steps(one_solo, STEPS)]
        trl = _trl_step_times(root / "qwen3-0", root / "trl", STEPS)
        ours2 = [t for t, _ in _time_steps(one_solo, STEPS)]
        ours = statistics.median(ours1 + ours2)
    return {
        "duel.step_over_two_solo": duel_ratio,
        "duel.step_over_two_solo_raw": duel_raw,
        "duel.step_s": statistics.median(t for t, _ in d1 + d2),
        "duel.two_solo_s": statistics.median(t for t, _ in s1 + s2),
        "duel.tokens_per_step": statistics.median(k for _, k in d1 + d2),
        "duel.two_solo_tokens": statistics.median(k for _, k in s1 + s2),
        "solo.step_over_trl": ours / statistics.median(trl),
        "solo.step_s": ours,
        "solo.trl_step_s": statistics.median(trl),
    }
