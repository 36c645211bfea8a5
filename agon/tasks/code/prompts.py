"""The prompts of a code task: solve, read a rival's draft, read several rivals' attempts.

Kept apart from :mod:`agon.tasks.code.base` (data, limits, grading) because every code data
set shares them unchanged; HumanEval alone words its solve prompt differently.
"""

from __future__ import annotations

from collections.abc import Sequence

from agon.tasks.base import Messages, Problem, numbered_attempts

CODE_SOLVE_STDIN = (
    "{question}\n\n"
    "Write a Python 3 program that reads the input from standard input and prints the answer "
    "to standard output. Put the complete program in one ```python code block at the end."
)
CODE_SOLVE_FUNCTION = (
    "{question}\n\n"
    "Complete this Python 3 code. Put the complete code in one ```python code block at the end."
    "\n\n```python\n{starter}\n```"
)
CODE_READER = (
    "{prompt}\n\n"
    "Below is a rival's attempt at this problem. It may be wrong. Check it critically, then "
    "solve the problem yourself and put your complete program in one ```python code block at "
    "the end.\n\n<rival_attempt>\n{draft}\n</rival_attempt>"
)
CODE_PROPOSALS = (
    "{prompt}\n\n"
    "Below are {n} attempts at this problem by rivals. Any of them may be wrong, and they may "
    "disagree. Check each critically, keep what is right, then solve the problem yourself and "
    "put your complete program in one ```python code block at the end.\n\n{attempts}"
)


class CodePrompts:
    """The prompts of :class:`~agon.tasks.code.base.CodeTask`: a stdin program, or the
    completion of the starter code for call-style problems."""

    def solve_prompt(self, problem: Problem) -> Messages:
        """Solve: stdin/stdout program, or complete the starter code for call-style problems."""
        starter = problem.meta.get("starter_code") or ""
        if problem.meta.get("mode") == "stdin" or not starter.strip():
            content = CODE_SOLVE_STDIN.format(question=problem.question)
        else:
            content = CODE_SOLVE_FUNCTION.format(
                question=problem.question, starter=starter.rstrip()
            )
        return [{"role": "user", "content": content}]

    def reader_prompt(self, problem: Problem, draft: str) -> Messages:
        """The solve prompt, then the rival's draft marked as possibly wrong."""
        prompt = self.solve_prompt(problem)[0]["content"]
        return [{"role": "user", "content": CODE_READER.format(prompt=prompt, draft=draft)}]

    def proposals_prompt(self, problem: Problem, proposals: Sequence[str]) -> Messages:
        """The solve prompt, then the rivals' attempts numbered, each possibly wrong (one
        attempt: the reader prompt)."""
        if not proposals:
            raise ValueError("proposals_prompt needs at least one proposal")
        if len(proposals) == 1:
            return self.reader_prompt(problem, proposals[0])
        content = CODE_PROPOSALS.format(
            prompt=self.solve_prompt(problem)[0]["content"],
            n=len(proposals),
            attempts=numbered_attempts(proposals),
        )
        return [{"role": "user", "content": content}]
