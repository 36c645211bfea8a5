"""Loaders and scoring for agon's lm-eval task YAMLs (referenced as ``!function utils.*``).

The data come from agon's own task classes, so lm-eval sees the same problems ``agon eval``
does: ``agon_arith`` is the toy arithmetic task's hard split, ``agon_deepmath_hard`` DeepMath's
hard split (``--metadata '{"source": "local.jsonl"}'`` points it at a local file of the real
schema; the default is the hub data set). Scoring is agon's math grader (math-verify in a
worker pool with a hard timeout), so lm-eval's ``acc`` equals ``agon eval``'s verdicts.
"""

from __future__ import annotations

import atexit
import inspect
from typing import Any

import datasets

from agon.grading.math import MathGrader
from agon.tasks import TASKS

_GRADER = None


def _dataset(task_name: str, split: str, **kwargs: Any):
    """The split as a DatasetDict; of lm-eval's metadata (which also carries the model args and
    the task version) only the task constructor's own parameters are passed on."""
    cls = TASKS.get(task_name)  # the task class, from agon's one task registry
    accepted = inspect.signature(cls.__init__).parameters
    task = cls(**{k: v for k, v in kwargs.items() if k in accepted and k != "self"})
    try:
        # the prompt is the task's own solve prompt (one user turn), so both harnesses ask alike
        rows = [
            {
                "id": p.id,
                "prompt": task.solve_prompt(p)[-1]["content"],
                "answer": p.answer,
                "difficulty": p.difficulty,
            }
            for p in task.problems(split)
        ]
    finally:
        task.close()
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def load_arith(**kwargs: Any):
    """The arith task's hard split (its generator params may come through ``--metadata``)."""
    return _dataset("arith", "hard", **kwargs)


def load_deepmath_hard(**kwargs: Any):
    """DeepMath's hard split (``source``, ``hard_min_difficulty``, ... through ``--metadata``)."""
    return _dataset("deepmath", "hard", **kwargs)


def process_results(doc: dict, results: list[str]) -> dict[str, float]:
    """``acc``: 1 when agon's math grader judges the completion's boxed answer correct."""
    global _GRADER
    if _GRADER is None:
        _GRADER = MathGrader(workers=1)
        atexit.register(_GRADER.close)
    verdict = _GRADER.grade([doc["answer"]], [results[0]])[0]
    return {"acc": float(verdict.correct is True)}
