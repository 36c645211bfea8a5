"""GRPO through TRL's GRPOTrainer, with the project's grader as the reward (table 1's ``grpo``)."""

from baselines.grpo.trainer import (
    GRPOSettings,
    completion_text,
    make_reward_fn,
    merge_metrics,
    prompt_dataset,
    train_grpo,
    train_pair,
)

__all__ = [
    "GRPOSettings",
    "completion_text",
    "make_reward_fn",
    "merge_metrics",
    "prompt_dataset",
    "train_grpo",
    "train_pair",
]
