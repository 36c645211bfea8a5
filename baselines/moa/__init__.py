"""Mixture-of-Agents inference baseline (the `moa` column of table 1); see :mod:`baselines.moa.moa`.

Registered as the system kind ``moa`` in :data:`agon.registry.SYSTEM_KINDS`.
"""

from baselines.moa.moa import (
    AGGREGATE_AND_SYNTHESIZE,
    MixtureOfAgents,
    build_moa,
    moa,
    synthesis_prompt,
)

__all__ = ["AGGREGATE_AND_SYNTHESIZE", "MixtureOfAgents", "build_moa", "moa", "synthesis_prompt"]
