"""Mixture-of-Agents inference baseline (the `moa` column of table 1); see :mod:`baselines.moa.moa`."""

from baselines.moa.moa import AGGREGATE_AND_SYNTHESIZE, MixtureOfAgents, moa, synthesis_prompt

__all__ = ["AGGREGATE_AND_SYNTHESIZE", "MixtureOfAgents", "moa", "synthesis_prompt"]
