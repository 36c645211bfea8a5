"""Hard-split pass@1 during training: the points of the report's training curves.

Both trainers, the duel trainer (:func:`agon.duel.train`) and the GRPO baseline
(:mod:`baselines.grpo`), call :func:`hard_pass1` at the steps :func:`is_eval_step` picks and
write what it returns into their ``metrics.jsonl`` row: ``eval/hard_pass@1/A`` (and ``/B``), the
key :data:`agon.results.METRIC_KEYS` reads for the training-curves figure.

*When.* The row of step ``s`` holds the evaluation of the models **after s updates**, taken
before that step's rollout: ``s = 0`` (the base models), every ``train.eval_every`` steps, and
once more after the last update, in a row of its own (:func:`final_row`: ``step = steps``, no
training keys, ``tokens_generated`` 0). So a curve starts at the base model and ends at the
trained one, and the tokens generated before row ``s`` are exactly the tokens the evaluated
model was trained on.

*How.* Each model alone on the task's solve prompt, greedy (temperature 0), one completion per
problem, the family's ``max_new_tokens``, on the first ``train.eval_problems`` problems of the
``hard`` split; graded by ``task.grade``; an answer that cannot be graded counts as wrong (as
in the report's pass@1). This is a cheap progress probe, not table 1's pass@1, which samples
``eval.n_samples`` completions at ``eval.temperature`` on ``eval.max_problems`` problems.

*Training is untouched.* The evaluation runs without gradients, with the models in eval mode
(their mode restored after) and inside a saved-and-restored RNG state (python, numpy, torch,
CUDA), so a run with evaluations draws the same random numbers as one without, and resumes
bit for bit (``tests/test_train_eval.py`` checks both).
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
from agon.tasks.base import Problem, Task

HARD_SPLIT = "hard"
KEY = "eval/hard_pass@1/{model}"  # what agon.results.METRIC_KEYS["hard_pass1"] reads
TOKENS_KEY = "eval/hard_tokens/{model}"  # tokens the evaluation generated (not training tokens)
PROBLEMS_KEY = "eval/hard_problems"  # how many hard problems were evaluated
SECONDS_KEY = (
    "time/eval_s"  # wall time of the evaluation (time/ keys are not part of a resume's check)
)
ROW_KEYS = (
    "step",
    "tokens_generated",
    SECONDS_KEY,
)  # the keys an evaluation-only row has besides eval/*


def check_settings(every: int, limit: int | None = None) -> None:
    """Refuse a bad ``train.eval_every`` / ``train.eval_problems`` (both trainers' settings call this)."""
    if every < 0:
        raise ValueError(f"train.eval_every must be >= 0 (0 = no evaluations), got {every}")
    if limit is not None and limit < 1:
        raise ValueError(f"train.eval_problems must be >= 1 or null (all), got {limit}")


def is_eval_step(step: int, every: int) -> bool:
    """True when the models are evaluated before the update of ``step``: 0, every, 2*every, ...

    ``every == 0`` turns the evaluations off. The evaluation after the last update is
    :func:`final_row`'s, whatever ``every`` is (as long as it is not 0).
    """
    check_settings(every)
    return every > 0 and step % every == 0


def hard_problems(task: Task, limit: int | None) -> list[Problem]:
    """The first ``limit`` problems of ``task``'s hard split (all when ``limit`` is None)."""
    check_settings(0, limit)
    problems = task.problems(HARD_SPLIT)
    if limit is not None:
        problems = problems[:limit]
    if not problems:
        raise ValueError(
            f"task {task.name!r} has no {HARD_SPLIT!r} problems to evaluate on; set train.eval_every: 0"
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


def hard_pass1(
    engines: Mapping[str, Engine],
    task: Task,
    problems: Sequence[Problem],
    max_new_tokens: int,
    models: Sequence[torch.nn.Module] = (),
) -> dict[str, float]:
    """Greedy pass@1 of each engine alone on ``problems``, as metrics-row entries.

    ``engines`` maps a model name ("A", "B") to the engine that generates with it; ``models``
    are the torch modules behind them (put in eval mode for the call). Returns
    ``eval/hard_pass@1/{name}`` in [0, 1] and ``eval/hard_tokens/{name}`` per engine,
    ``eval/hard_problems`` and ``time/eval_s``.
    """
    if not problems:
        raise ValueError("hard_pass1 needs at least one problem")
    t0 = time.perf_counter()
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0)
    prompts = [task.solve_prompt(p) for p in problems]
    out: dict[str, float] = {}
    with preserved_rng(), torch.no_grad(), eval_mode(models):
        for name, engine in engines.items():
            completions = [row[0] for row in engine.generate(prompts, n=1, sampling=sampling)]
            verdicts = task.grade(list(problems), [c.text for c in completions])
            out[KEY.format(model=name)] = sum(v.correct is True for v in verdicts) / len(problems)
            out[TOKENS_KEY.format(model=name)] = float(sum(len(c.token_ids) for c in completions))
    out[PROBLEMS_KEY] = len(problems)
    out[SECONDS_KEY] = time.perf_counter() - t0
    return out


def final_row(steps_done: int, evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """The row after the last update: ``step`` = updates done, no training, no tokens."""
    return {"step": steps_done, "tokens_generated": 0, **evaluation}


def is_eval_only(row: Mapping[str, Any]) -> bool:
    """True for a :func:`final_row` (a row with no training step in it)."""
    return any(k.startswith("eval/") for k in row) and all(
        k in ROW_KEYS or k.startswith("eval/") for k in row
    )


def describe(evaluation: Mapping[str, Any]) -> str:
    """``A=0.42 B=0.38 (64 problems, 3.1s)`` for a log line."""
    scores = " ".join(
        f"{k.rsplit('/', 1)[1]}={v:.3f}"
        for k, v in evaluation.items()
        if k.startswith("eval/hard_pass@1/")
    )
    return f"{scores} ({evaluation.get(PROBLEMS_KEY)} problems, {evaluation.get(SECONDS_KEY, float('nan')):.1f}s)"
