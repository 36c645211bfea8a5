"""Duel trainer step costs, measured side by side in one process on the same tiny model.

- ``duel.step_over_two_solo``: one duel step (A drafts G per problem, B reads each draft
  K = 2 times, ``reader_group: draft``) over two solo GRPO steps that generate and train on the
  same completions, per generated token (random models stop at random lengths). The first solo
  step is A alone: P problems x G samples, as the drafter. The second is B alone on P x G reader
  prompts, each around one of A's real drafts (of one duel rollout), K samples each: the
  reader's prompts, batch and groups of K. So both sides process the same prompt tokens and
  the ratio measures what the duel itself adds: reader-prompt building, two policies,
  bookkeeping. (A random model's draft re-tokenizes to more tokens than it was sampled as, so a
  stand-in draft of the sampled length would undercount the reader's prompt.) The three
  sides (duel, two solo, two solo raw) are timed one step of each in turn, 2 x STEPS each.
  K = 2, not 1: with one read per draft every read group has one member, the reader's
  advantages are all 0 and its update skips its forward and backward (``agon.rl.update``), so
  a K = 1 duel step trains the drafter only against two solo steps that both train.
  ``duel.{drafter,reader}_trained_tokens`` (median over the timed steps, from the update's
  ``{model}/trained_tokens`` of the model in that role) and
  ``duel.{drafter,reader}_zero_advantage_steps`` (timed steps whose ``{model}/zero_advantage``
  was 1; the target is 0) say that both sides trained; ``duel.solo_*`` the same of the two
  solo steps.
- ``duel.step_over_two_solo_raw``: the same with plain solve prompts on both solo steps (the
  second still P x G prompts x K samples); the extra is then mostly the reader's longer
  prompts (the draft is in them), which the method needs and which no implementation can avoid.
- ``solo.step_over_trl``: our solo step (= GRPO) over TRL GRPOTrainer's step on the same
  model, batch (P problems x G samples), generation length and reward function, median step
  times after a warm-up step; the median of ``TRL_RUNS`` runs, each its own TRL trainer between
  two blocks of our steps, with the runs' spread (``_min``, ``_max``). TRL's side is the GRPO
  baseline's as the product builds it: its settings (:class:`baselines.grpo.GRPOSettings`, the
  same values as our side's :class:`~agon.training.settings.RLSettings`) turned into TRL's
  ``GRPOConfig`` by :meth:`~baselines.grpo.GRPOSettings.grpo_config`, and its trainer class
  (:class:`~baselines.grpo.zero_advantage.SkipZeroAdvantageGRPOTrainer`). ``solo.rollout_s`` /
  ``solo.update_s`` split our step, ``solo.trl_generate_s`` / ``solo.trl_rest_s`` TRL's (its
  ``generate`` call, and the rest of its step: log-probabilities, loss, backward, optimizer).
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from agon import duel, rl
from agon.random_models import tiny_policies
from agon.tasks.base import Problem
from agon.tasks.synthetic import ParityTask
from agon.training.settings import RLSettings
from baselines.grpo import GRPOSettings, make_reward_fn
from baselines.grpo.zero_advantage import SkipZeroAdvantageGRPOTrainer

TARGETS = {
    "duel.step_over_two_solo": ("<=", 1.10),
    "duel.drafter_zero_advantage_steps": ("<=", 0),
    "duel.reader_zero_advantage_steps": ("<=", 0),
    "solo.step_over_trl": ("<=", 1.0),
}

P, G, K, MAX_NEW, STEPS, LR = (
    8,
    8,
    2,
    24,
    5,
    1e-3,
)  # problems, drafts per problem, reads per draft, tokens, timed steps (a block), learning rate
TRL_RUNS = 5  # solo.step_over_trl: runs (one TRL trainer each) of which the median is reported
THREADS = 1  # torch threads for every measured side


def _policies(root: Path, names, seeds, settings):
    return tiny_policies("qwen3", root, settings, names=names, seeds=seeds)


def _time_steps(fn, n: int) -> list[tuple[float, dict[str, float]]]:
    """(seconds, what ``fn`` reports: ``tokens`` generated and more) of ``n`` calls after one
    warm-up call."""
    return _time_interleaved([fn], n)[0]


def _time_interleaved(fns, n: int) -> list[list[tuple[float, dict[str, float]]]]:
    """:func:`_time_steps` of every one of ``fns``, their calls taken in turn (one of each,
    then the next round), so that a shared machine's load, which drifts over seconds, weighs
    on every side alike."""
    for fn in fns:
        fn(-1)
    out: list[list[tuple[float, dict[str, float]]]] = [[] for _ in fns]
    for i in range(n):
        for fn, rows in zip(fns, out):
            t0 = time.perf_counter()
            info = fn(i)
            rows.append((time.perf_counter() - t0, info))
    return out


def trl_settings(n: int) -> GRPOSettings:
    """The GRPO baseline's settings of a TRL run of ``n`` timed steps after a warm-up step: the
    solo side's values (:func:`settings`), no checkpoint (our steps save none)."""
    _, solo_s, _ = settings()
    theirs = {f.name for f in dataclasses.fields(GRPOSettings) if f.init}
    shared = {
        f.name: getattr(solo_s, f.name)
        for f in dataclasses.fields(solo_s)
        if f.init and f.name in theirs
    }
    return GRPOSettings(**{**shared, "steps": n + 1, "checkpoint_every": 0})


def _trl_step_times(model_path: Path, work: Path, n: int) -> list[tuple[float, float]]:
    """(wall seconds, seconds in ``generate``) of each of ``n`` steps of TRL's GRPOTrainer
    (P x G completions per step) after a warm-up step, configured and built as the GRPO
    baseline builds it (:func:`baselines.grpo.train_grpo`)."""
    task = ParityTask()
    problems = task.problems("train")
    ds = Dataset.from_list(
        [{"prompt": task.solve_prompt(p), "problem_id": p.id} for p in problems] * 20
    )
    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    args = trl_settings(n).grpo_config(work)
    stamps: list[float] = []
    generating: list[float] = []  # seconds in generate, summed per step
    generate = model.generate

    def timed_generate(*a, **k):
        t0 = time.perf_counter()
        try:
            return generate(*a, **k)
        finally:
            generating[-1] += time.perf_counter() - t0

    model.generate = timed_generate  # TRL unwraps to this very object on one CPU process

    class Stamp(TrainerCallback):
        def on_step_begin(self, *a, **k):
            stamps.append(time.perf_counter())
            generating.append(0.0)

        def on_step_end(self, *a, **k):
            stamps.append(time.perf_counter())

    trainer = SkipZeroAdvantageGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_fn(task, problems)],
        args=args,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[Stamp()],
    )
    trainer.train()
    steps = [stamps[i + 1] - stamps[i] for i in range(0, len(stamps) - 1, 2)]
    return list(zip(steps, generating))[1:]  # drop the warm-up step


class _ReaderShaped:
    """The test task with each problem's solve prompt replaced by a reader prompt around a
    fixed draft (``drafts[problem.id]``)."""

    def __init__(self, task, drafts: dict[str, str]):
        self.task, self.drafts = task, drafts

    def __getattr__(self, name):
        return getattr(self.task, name)

    def solve_prompt(self, problem):
        return self.task.reader_prompt(problem, self.drafts[problem.id])


def _read_problems(problems, roll):
    """One problem per draft of a real duel rollout (P x G, problem-major, as the duel orders
    its reads), and each one's draft: the reader's prompts as a solo step's problems."""
    out, drafts = [], {}
    for j, (problem, row) in enumerate(zip(problems, roll.drafts)):
        for g, d in enumerate(row):
            pid = f"{problem.id}#{j}.{g}"
            out.append(Problem(id=pid, question=problem.question, answer=problem.answer))
            drafts[pid] = d.text
    return out, drafts


def _median(xs) -> float:
    return float(statistics.median(xs))


def settings() -> tuple[duel.DuelSettings, RLSettings, RLSettings]:
    """The timed duel's settings, the first solo step's (the drafter's side: P x G) and the
    second's (the reader's side: P x G prompts, K samples each, groups of K as the duel's)."""
    duel_s = duel.DuelSettings(
        problems_per_step=P,
        num_generations=G,
        num_reads=K,
        reader_group="draft",
        max_new_tokens=MAX_NEW,
        learning_rate=LR,
    )
    solo_s = RLSettings(
        problems_per_step=P, num_generations=G, max_new_tokens=MAX_NEW, learning_rate=LR
    )
    read_s = RLSettings(
        problems_per_step=P * G, num_generations=K, max_new_tokens=MAX_NEW, learning_rate=LR
    )
    return duel_s, solo_s, read_s


def run() -> dict[str, float]:
    # one thread: on a shared, oversubscribed machine multi-threaded kernels spin and the
    # timings swing by 10x; both sides of each ratio run under the same setting
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    task = ParityTask()
    problems = (task.problems("train") * 4)[:P]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        return {**duel_costs(task, problems, root), **solo_over_trl(task, problems, root)}


def duel_costs(task, problems: list[Problem], root: Path) -> dict[str, float]:
    """The ``duel.*`` metrics: a duel step against two solo steps of its shape."""
    duel_s, solo_s, read_s = settings()
    pair = _policies(root, ["A", "B"], [0, 1], duel_s)
    solo_a = _policies(root, ["A"], [0], solo_s)
    solo_b = _policies(root, ["B"], [1], read_s)
    duel.duel_step(task, pair, problems, duel_s, step=0)  # warm-up
    roll = duel.rollout(task, pair["A"], pair["B"], problems, duel_s, step=0, salt=0)
    read_problems, drafts = _read_problems(problems, roll)
    shaped = _ReaderShaped(task, drafts)

    def duel_step(i):
        row = duel.duel_step(task, pair, problems, duel_s, step=i + 1)
        [(_, d, r, _)] = duel.directions(i + 1, duel_s, list(pair), list(range(P)), P)
        return {
            "tokens": row["tokens_generated"],
            "drafter_trained": row[f"{d}/trained_tokens"],
            "reader_trained": row[f"{r}/trained_tokens"],
            "drafter_zero": row[f"{d}/zero_advantage"],
            "reader_zero": row[f"{r}/zero_advantage"],
        }

    def two_solo(i, second_task=shaped):
        # the duel's two generations and two updates, as two independent GRPO steps
        a = rl.grpo_step(task, solo_a, problems, solo_s, step=i + 1)
        b = rl.grpo_step(second_task, {"B": solo_b["B"]}, read_problems, read_s, step=i + 1)
        return {
            "tokens": a["tokens_generated"] + b["tokens_generated"],
            "drafter_trained": a["A/trained_tokens"],
            "reader_trained": b["B/trained_tokens"],
            "drafter_zero": a["A/zero_advantage"],
            "reader_zero": b["B/zero_advantage"],
        }

    def two_solo_raw(i):
        return two_solo(i, second_task=task)

    # one step of each side in turn, so machine noise hits every side alike
    duels, solos, raws = _time_interleaved([duel_step, two_solo, two_solo_raw], 2 * STEPS)

    def per_tok(rows):
        return _median(t / max(info["tokens"], 1) for t, info in rows)

    return {
        "duel.reads_per_draft": float(K),
        "duel.step_over_two_solo": per_tok(duels) / per_tok(solos),
        "duel.step_over_two_solo_raw": per_tok(duels) / per_tok(raws),
        "duel.step_s": _median(t for t, _ in duels),
        "duel.two_solo_s": _median(t for t, _ in solos),
        "duel.tokens_per_step": _med(duels, "tokens"),
        "duel.two_solo_tokens": _med(solos, "tokens"),
        "duel.drafter_trained_tokens": _med(duels, "drafter_trained"),
        "duel.reader_trained_tokens": _med(duels, "reader_trained"),
        "duel.drafter_zero_advantage_steps": _count(duels, "drafter_zero"),
        "duel.reader_zero_advantage_steps": _count(duels, "reader_zero"),
        "duel.solo_drafter_trained_tokens": _med(solos, "drafter_trained"),
        "duel.solo_reader_trained_tokens": _med(solos, "reader_trained"),
        "duel.solo_zero_advantage_steps": _count(solos + raws, "drafter_zero")
        + _count(solos + raws, "reader_zero"),
        "duel.timed_steps": float(len(duels)),
    }


def solo_over_trl(task, problems: list[Problem], root: Path) -> dict[str, float]:
    """The ``solo.*`` metrics: our solo step against TRL GRPOTrainer's, ``TRL_RUNS`` runs, each
    a TRL trainer between two blocks of our steps."""
    _, solo_s, _ = settings()
    solo_a = _policies(root, ["A"], [0], solo_s)

    def one_solo(i):
        row = rl.grpo_step(task, solo_a, problems, solo_s, step=i + 100)
        return {
            "tokens": row["tokens_generated"],
            "rollout_s": row["time/rollout_s"],
            "update_s": row["time/update_s"],
            "zero": row["A/zero_advantage"],
        }

    ratios, ours_all, trl_all = [], [], []
    for run_i in range(TRL_RUNS):
        ours = _time_steps(one_solo, STEPS)
        trl = _trl_step_times(root / "qwen3-0", root / f"trl{run_i}", STEPS)
        ours += _time_steps(one_solo, STEPS)
        ratios.append(_median(t for t, _ in ours) / _median(t for t, _ in trl))
        ours_all += ours
        trl_all += trl
    return {
        "solo.step_over_trl": _median(ratios),
        "solo.step_over_trl_min": min(ratios),
        "solo.step_over_trl_max": max(ratios),
        "solo.step_over_trl_runs": float(len(ratios)),
        "solo.step_s": _median(t for t, _ in ours_all),
        "solo.rollout_s": _med(ours_all, "rollout_s"),
        "solo.update_s": _med(ours_all, "update_s"),
        "solo.zero_advantage_steps": _count(ours_all, "zero"),
        "solo.trl_step_s": _median(t for t, _ in trl_all),
        "solo.trl_generate_s": _median(g for _, g in trl_all),
        "solo.trl_rest_s": _median(t - g for t, g in trl_all),
    }


def _med(rows, key) -> float:
    return _median(info[key] for _, info in rows)


def _count(rows, key) -> float:
    return float(sum(info[key] == 1.0 for _, info in rows))
