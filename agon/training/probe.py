"""The validation probe during training: the points of the report's training curves.

Both trainers, the duel's loop (:func:`agon.training.loop.train`) and the GRPO baseline
(:mod:`baselines.grpo`), call :func:`hard_pass1` at the steps :func:`is_eval_step` picks and
write what it returns into their ``metrics.jsonl`` row: ``eval/hard_pass@1/A`` (and ``/B``;
keys in :mod:`agon.training.metrics`), which the training-curves figure plots.

*Robustness.* On the same problems, where the task can write a wrong draft of each
(:meth:`agon.tasks.base.Task.wrong_draft`: a toy chain with one hidden error, a program with
one wrong line), each model also reads that fixed draft and answers: ``eval/robust_pass@1/A``
is the reader's pass@1 after a wrong draft, the same probe for every method, measured before
the first update and after the last (``docs/method.md``, what the toy world can show).

*When.* The row of step ``s`` holds the evaluation of the models **after s updates**, taken
before that step's rollout: ``s = 0`` (the base models), every ``train.eval_every`` steps, and
once more after the last update, in a row of its own (:func:`final_row`: ``step = steps``, no
training keys, ``tokens_generated`` 0). So a curve starts at the base model and ends at the
trained one, and the tokens generated before row ``s`` are exactly the tokens the evaluated
model was trained on.

*How.* Each model alone on the task's solve prompt, greedy (temperature 0), one completion per
problem, the family's ``max_new_tokens``, on the first ``train.eval_problems`` problems of the
split ``train.eval_split`` (default ``validation_hard``: the hard problems of the validation
split, never the test split table 1 reports, so the curves may be watched and tuned on without
touching test); graded by ``task.grade``; an answer that cannot be graded counts as wrong (as
in the report's pass@1). The metric keys keep their names (``eval/hard_pass@1/...``): under
the default they are the pass@1 on the hard problems of the validation split. This is a cheap
progress probe, not table 1's pass@1, which samples ``eval.n_samples`` completions at
``eval.temperature`` on ``eval.max_problems`` problems of ``eval.split``.

*Training is untouched.* The evaluation runs without gradients, with the models in eval mode
(their mode restored after) and inside a saved-and-restored RNG state (python, numpy, torch,
CUDA), so a run with evaluations draws the same random numbers as one without, and resumes
bit for bit (``tests/test_probe.py`` checks both).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from agon.engines.base import Engine, SamplingParams
from agon.tasks.base import WRONG_DRAFT_SEED, Problem, Task
from agon.training.metrics import (
    EVAL_S,
    HARD_PASS1,
    HARD_PROBLEMS,
    HARD_TOKENS,
    ROBUST_PASS1,
    ROBUST_PROBLEMS,
    STEP,
    TOKENS,
)
from agon.training.settings import EVAL_SPLITS, check_eval_settings


def is_eval_step(step: int, every: int) -> bool:
    """True when the models are evaluated before the update of ``step``: 0, every, 2*every, ...

    ``every == 0`` turns the evaluations off. The evaluation after the last update is
    :func:`final_row`'s, whatever ``every`` is (as long as it is not 0).
    """
    check_eval_settings(every)
    return every > 0 and step % every == 0


def hard_problems(task: Task, limit: int | None, split: str) -> list[Problem]:
    """The first ``limit`` problems of ``task``'s ``split`` (``train.eval_split``, one of
    ``validation_hard`` and ``validation``), all when ``limit`` is None."""
    check_eval_settings(0, limit)
    if split not in EVAL_SPLITS:
        raise ValueError(f"train.eval_split must be one of {EVAL_SPLITS}, got {split!r}")
    problems = task.problems(split)
    if limit is not None:
        problems = problems[:limit]
    if not problems:
        raise ValueError(
            f"task {task.name!r} has no {split!r} problems to evaluate on; set "
            "train.eval_every: 0 or another train.eval_split"
        )
    return problems


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Run the block and put every global RNG (python, numpy, torch, CUDA) back as it was."""
    py, npy = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)


@contextlib.contextmanager
def eval_mode(models: Sequence[torch.nn.Module]) -> Iterator[None]:
    """Models in eval mode (dropout off) for the block, each module's own mode restored after."""
    saved = [(m, m.training) for model in models for m in model.modules()]
    for model in models:
        model.eval()
    try:
        yield
    finally:
        for m, training in saved:
            m.training = training


def wrong_drafts(
    task: Task, problems: Sequence[Problem], seed: int = WRONG_DRAFT_SEED
) -> list[tuple[Problem, str]]:
    """The robustness probe: each problem with the task's fixed wrong draft of it
    (:meth:`agon.tasks.base.Task.wrong_draft`, the same for every method and run); empty for a
    task that writes none."""
    pairs = [(p, task.wrong_draft(p, seed)) for p in problems]
    return [(p, d) for p, d in pairs if d is not None]


def hard_pass1(
    engines: Mapping[str, Engine],
    task: Task,
    problems: Sequence[Problem],
    max_new_tokens: int,
    models: Sequence[torch.nn.Module] = (),
    wrong: Sequence[tuple[Problem, str]] = (),
) -> dict[str, float]:
    """Greedy pass@1 of each engine alone on ``problems``, and as a reader of the ``wrong``
    drafts (:func:`wrong_drafts`), as metrics-row entries.

    ``engines`` maps a model name ("A", "B") to the engine that generates with it; ``models``
    are the torch modules behind them (put in eval mode for the call). Returns
    ``eval/hard_pass@1/{name}`` in [0, 1] and ``eval/hard_tokens/{name}`` per engine,
    ``eval/hard_problems`` and ``time/eval_s``; with ``wrong`` drafts also
    ``eval/robust_pass@1/{name}`` (the reader right after a wrong draft) and
    ``eval/robust_problems``.
    """
    if not problems:
        raise ValueError("hard_pass1 needs at least one problem")
    t0 = time.perf_counter()
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0)
    prompts = [task.solve_prompt(p) for p in problems]
    reads = [task.reader_prompt(p, d) for p, d in wrong]
    out: dict[str, float] = {}
    with preserved_rng(), torch.no_grad(), eval_mode(models):
        for name, engine in engines.items():
            completions = [row[0] for row in engine.generate(prompts, n=1, sampling=sampling)]
            out[HARD_PASS1.format(model=name)] = _share_right(task, problems, completions)
            out[HARD_TOKENS.format(model=name)] = float(sum(len(c.token_ids) for c in completions))
            if reads:
                answers = [row[0] for row in engine.generate(reads, n=1, sampling=sampling)]
                out[ROBUST_PASS1.format(model=name)] = _share_right(
                    task, [p for p, _ in wrong], answers
                )
    out[HARD_PROBLEMS] = len(problems)
    if reads:
        out[ROBUST_PROBLEMS] = len(reads)
    out[EVAL_S] = time.perf_counter() - t0
    return out


def _share_right(task: Task, problems: Sequence[Problem], completions: Sequence[Any]) -> float:
    """The share of ``completions`` graded right (an ungradable one counts as wrong)."""
    verdicts = task.grade(list(problems), [c.text for c in completions])
    return sum(v.correct is True for v in verdicts) / len(problems)


def final_row(steps_done: int, evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """The row after the last update: ``step`` = updates done, no training, no tokens."""
    return {STEP: steps_done, TOKENS: 0, **evaluation}


def describe(evaluation: Mapping[str, Any]) -> str:
    """``A=0.42 B=0.38 (64 problems, 3.1s)`` for a log line."""
    scores = " ".join(
        f"{k.rsplit('/', 1)[1]}={v:.3f}"
        for k, v in evaluation.items()
        if k.startswith("eval/hard_pass@1/")
    )
    seconds = evaluation.get(EVAL_S, float("nan"))
    return f"{scores} ({evaluation.get(HARD_PROBLEMS)} problems, {seconds:.1f}s)"
