"""Grading: verdicts for model answers. Math through math-verify in a pool that cannot hang."""

from agon.grading.verdict import Verdict

__all__ = ["Verdict"]
