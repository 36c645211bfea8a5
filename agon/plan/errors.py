"""The planner's one error type: every message names what is wrong and how to fix it."""

from __future__ import annotations


class PlanError(ValueError):
    """Input the planner cannot plan with (a config, a GPU kind, a model, a measurement file)."""
