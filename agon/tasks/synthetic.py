"""A synthetic task for random-weight models: checks of plumbing and scale, not of skill.

:class:`ParityTask` (``parity`` in the task registry) grades a completion correct when its
length in characters is even: meaningless, but it gives random-weight models groups with reward
spread (so a training step has a gradient), it is deterministic and instant, and it needs no
grading pool. The tests, the benchmarks and the scale checks (random weights at a paper
architecture's real width) train on it.
"""

from __future__ import annotations

from collections.abc import Sequence

from agon.grading.verdict import Verdict
from agon.tasks.base import Problem, Task

PARITY_PROBLEMS = 6  # problems per split: enough for a few steps of a few problems each


class ParityTask(Task):
    """Six problems per split; a completion is "correct" when its length is even."""

    name = "parity"
    kind = "math"

    def problems(self, split: str) -> list[Problem]:
        """The same six sums in every split (the answer is never read)."""
        return [
            Problem(id=f"{split}-{i}", question=f"What is {i} + {i + 1}?", answer=str(2 * i + 1))
            for i in range(PARITY_PROBLEMS)
        ]

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """Correct when the completion's length in characters is even."""
        return [
            Verdict(
                correct=len(text) % 2 == 0,
                status="correct" if len(text) % 2 == 0 else "wrong",
                extracted=None,
                seconds=0.0,
                detail="",
            )
            for text in completions
        ]
