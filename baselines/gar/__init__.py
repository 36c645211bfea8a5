"""The GAR baseline: GRPO whose reward adds the cosine of a sample's LM-head gradient with an
expert anchor's.

Registered as the trainer ``gar`` in :data:`agon.registry.TRAINERS`. The gradients and their
cosine are :mod:`baselines.gar.gradients`, the reward and the anchors
:mod:`baselines.gar.reward`, one step :mod:`baselines.gar.step` and the trainer
:mod:`baselines.gar.trainer`; what the abstract fixes and what is our reading is
``docs/method.md``, GAR.
"""

from baselines.gar.gradients import (
    Head,
    completion_hidden_states,
    explicit_gradient,
    problem_cosines,
)
from baselines.gar.reward import anchor_ids, gar_rewards, needs_cosine
from baselines.gar.trainer import TRAINER, GARSettings

__all__ = [
    "TRAINER",
    "GARSettings",
    "Head",
    "anchor_ids",
    "completion_hidden_states",
    "explicit_gradient",
    "gar_rewards",
    "needs_cosine",
    "problem_cosines",
]
