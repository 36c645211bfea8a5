"""Competitive code: TACO, CodeContests, LiveCodeBench and HumanEval, graded in the sandbox.

One module per seam, so a data set can change without touching the grading it shares:

- :mod:`~agon.tasks.code.extract`: the program a completion submits (its last python block);
- :mod:`~agon.tasks.code.load`: rows from the hub or local files, and their fields decoded;
- :mod:`~agon.tasks.code.base`: :class:`CodeTask`, splits, limits, special judges, grading;
- :mod:`~agon.tasks.code.prompts`: the solve, reader and proposals prompts;
- :mod:`~agon.tasks.code.judges`: each official grader's comparison and prelude, one module
  per grader; :mod:`~agon.tasks.code.calls`: function-call tests judged by those rules;
- :mod:`~agon.tasks.code.limits`: per-problem limits from the data, the cap on tests;
  :mod:`~agon.tasks.code.grading`: one completion's sandbox run and its verdict;
- :mod:`~agon.tasks.code.taco`, :mod:`~agon.tasks.code.codecontests`,
  :mod:`~agon.tasks.code.livecodebench`, :mod:`~agon.tasks.code.humaneval`: one data set each
  (:mod:`~agon.tasks.code.taco_special`: TACO's special-judge list).

Where the source carries a difficulty or a rating, ``hard`` (and ``train_hard``) keep the
problems at or above a threshold; HumanEval has none, so its hard split is its test split.

The names below are re-exported so that ``from agon.tasks.code import ...`` keeps working for
callers written against the single module this package replaced.
"""

from __future__ import annotations

from agon.tasks.code.base import CodeTask
from agon.tasks.code.codecontests import PYTHON3, CodeContestsTask
from agon.tasks.code.extract import PYTHON_FENCES, THINK_END, THINK_START, extract_code
from agon.tasks.code.humaneval import HumanEvalTask, human_eval_file
from agon.tasks.code.livecodebench import LCB_DIFFICULTY, LiveCodeBenchTask
from agon.tasks.code.load import decode_lcb_tests, load_rows
from agon.tasks.code.prompts import CODE_READER, CODE_SOLVE_FUNCTION, CODE_SOLVE_STDIN
from agon.tasks.code.taco import TACO_DIFFICULTY, TacoTask

__all__ = [
    "CODE_READER",
    "CODE_SOLVE_FUNCTION",
    "CODE_SOLVE_STDIN",
    "LCB_DIFFICULTY",
    "PYTHON3",
    "PYTHON_FENCES",
    "TACO_DIFFICULTY",
    "THINK_END",
    "THINK_START",
    "CodeContestsTask",
    "CodeTask",
    "HumanEvalTask",
    "LiveCodeBenchTask",
    "TacoTask",
    "decode_lcb_tests",
    "extract_code",
    "human_eval_file",
    "load_rows",
]
