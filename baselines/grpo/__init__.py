"""GRPO through TRL's GRPOTrainer, with the project's grader as the reward (table 1's ``grpo``).

Registered as the trainer ``grpo`` in :data:`agon.registry.TRAINERS`.
"""

from baselines.grpo.data import completion_text, make_reward_fn, prompt_dataset
from baselines.grpo.trainer import TRAINER, GRPOSettings, train_grpo, train_pair

__all__ = [
    "TRAINER",
    "GRPOSettings",
    "completion_text",
    "make_reward_fn",
    "prompt_dataset",
    "train_grpo",
    "train_pair",
]
