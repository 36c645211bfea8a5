"""The Cliff baseline: GRPO whose advantage changes sign at each wrong sample's first mistake.

Registered as the trainer ``cliff`` in :data:`agon.registry.TRAINERS`. The per-token
advantages are :mod:`baselines.cliff.advantages`, where a step and a mistake are in a
completion :mod:`baselines.cliff.steps`, the teachers :mod:`baselines.cliff.teacher`, one
step :mod:`baselines.cliff.step` and the trainer :mod:`baselines.cliff.trainer`; what the
abstract fixes and what is our reading is ``docs/method.md``, Cliff.
"""

from baselines.cliff.advantages import padded_token_advantages, token_advantages
from baselines.cliff.steps import char_to_token, oracle_mistake, task_steps
from baselines.cliff.teacher import ModelTeacher, OracleTeacher, parse_teacher_reply
from baselines.cliff.trainer import TRAINER, CliffSettings

__all__ = [
    "TRAINER",
    "CliffSettings",
    "ModelTeacher",
    "OracleTeacher",
    "char_to_token",
    "oracle_mistake",
    "padded_token_advantages",
    "parse_teacher_reply",
    "task_steps",
    "token_advantages",
]
