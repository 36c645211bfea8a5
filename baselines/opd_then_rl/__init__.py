"""The OPD-then-RL baseline: on-policy distillation from a teacher, then GRPO from the result.

Registered as the trainer ``opd_then_rl`` in :data:`agon.registry.TRAINERS`. The OPD step
(per-token reverse KL to the teacher on the student's own samples) is
:mod:`baselines.opd_then_rl.opd`, the RL step GRPO's (:func:`agon.rl.grpo_step`), the switch
point between them :mod:`baselines.opd_then_rl.switch`
and the two-phase trainer :mod:`baselines.opd_then_rl.trainer`; what the abstract fixes and what
is our reading is ``docs/method.md``, OPD-then-RL.
"""

from baselines.opd_then_rl.opd import Teacher, opd_advantages, opd_step
from baselines.opd_then_rl.switch import SwitchPoint, best_updates, validated_updates
from baselines.opd_then_rl.trainer import TRAINER, OPDThenRLSettings

__all__ = [
    "TRAINER",
    "OPDThenRLSettings",
    "SwitchPoint",
    "Teacher",
    "best_updates",
    "opd_advantages",
    "opd_step",
    "validated_updates",
]
