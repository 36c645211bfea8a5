"""Training settings: one dataclass per trainer, one name per knob, the config's own keys.

:class:`TrainSettings` holds what every trainer shares: the config's ``train`` section (the
field names *are* its keys), the family's generation limit and the run's seed; the GRPO
baseline's settings extend it with the ``grpo`` section (:mod:`baselines.grpo`, on TRL).
:class:`RLSettings` adds what the in-house policy-gradient core reads (:mod:`agon.rl`); every
in-house trainer's settings extend it: the duel's (:class:`DuelSettings`, with the ``agon``
section, nested keys flattened with ``_``: ``agon.reward.scheme`` is ``reward_scheme``) and
those of Cliff, GAR and OPD-then-RL (each with its own section).
:meth:`TrainSettings.from_config` fills any subclass the same way, so a knob added to the
schema and to a settings class needs no mapping code.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

REWARD_SCHEMES = ("agon", "zero_sum", "independent", "cooperative")
LOSS_TYPES = ("dapo", "dr_grpo", "grpo")
SCALES = ("group", "batch", "none")
READER_GROUPS = ("draft", "problem")
BASELINES = ("group", "batch", "none")  # agon.baseline: what an advantage subtracts
ROLE_SCHEDULES = ("alternate", "both")
TRAIN_SPLITS = ("train", "train_hard")
EVAL_SPLITS = ("validation_hard", "validation")  # what the training-time probe may read
BUDGET_MATCHES = ("tokens", "samples", "steps")
MASTER_DTYPES = (None, "float32")  # train.master_dtype: the family's dtype, or fp32 masters


def check_eval_settings(every: int, limit: int | None = None) -> None:
    """Refuse a bad ``train.eval_every`` / ``train.eval_problems``."""
    if every < 0:
        raise ValueError(f"train.eval_every must be >= 0 (0 = no evaluations), got {every}")
    if limit is not None and limit < 1:
        raise ValueError(f"train.eval_problems must be >= 1 or null (all), got {limit}")


def _flatten(section: dict, prefix: str = "") -> dict[str, Any]:
    """``{"reward": {"scheme": "agon"}}`` -> ``{"reward_scheme": "agon"}``."""
    out: dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict) and key != "extra":  # grpo.extra is one knob: a dict
            out.update(_flatten(value, f"{prefix}{key}_"))
        else:
            out[f"{prefix}{key}"] = value
    return out


@dataclass
class TrainSettings:
    """What both trainers share: the config's ``train`` section, by its own key names."""

    steps: int = 50  # optimizer steps per model
    problems_per_step: int = 8  # P problems per step
    split: str = "train"  # train | train_hard: where training problems come from
    num_generations: int = 8  # G: samples (duel: drafts) per problem
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    lr_scheduler: str = "constant_with_warmup"  # any transformers.get_scheduler name
    warmup_steps: int = 0
    max_grad_norm: float = 1.0  # clip; the pre-clip norm is logged
    loss_type: str = "dapo"  # dapo | dr_grpo | grpo (TRL's names)
    beta: float = 0.0  # KL weight to a frozen reference (0: no reference model is kept)
    kl_ratio_correction: bool = True  # KL term times the ratio (TRL's use_bias_correction_kl)
    epsilon: float = 0.2  # lower clip of the ratio
    epsilon_high: float | None = None  # upper clip (None: = epsilon)
    num_iterations: int = 1  # gradient steps per rollout (mu); >1 makes the clipping bite
    scale_rewards: str = "group"  # group | batch | none: what the advantage is divided by
    temperature: float = 1.0  # rollout sampling temperature
    top_p: float = 1.0
    micro_batch_size: int = 64  # rows per forward/backward (gradient accumulation in a step)
    gradient_checkpointing: bool = False  # recompute activations in the backward: memory for time
    # None: weights, gradients and AdamW's moments in the family's dtype (pure bf16 on a GPU);
    # float32: fp32 master weights and moments, forward and backward autocast to the family's dtype
    master_dtype: str | None = None
    checkpoint_every: int = 10  # steps between checkpoints (0: only at the end)
    keep_checkpoints: int = 2  # complete checkpoints kept on disk
    eval_every: int = 0  # steps between greedy probes (agon.training.probe); 0: none
    eval_problems: int | None = None  # the first N problems of eval_split in them (None: all)
    eval_split: str = "validation_hard"  # validation_hard | validation: what the probe reads
    max_new_tokens: int = 256  # the family row's generation limit
    seed: int = 0  # the run's seed (from the command line, not the config)
    # matched compute (agon.training.budget): read by trainers that match a reference run's
    # spend (the GRPO baseline); the duel is the reference and runs `steps` steps
    budget_match: str = "tokens"  # tokens | samples | steps
    budget_max_steps_factor: float = 3.0  # step cap (and scheduler horizon) / steps
    budget_targets: dict | None = None  # per model, from `agon train --match-run`
    budget_reference: str = ""  # the reference run's summary.json

    # config sections read besides `train`, in order (later sections override earlier ones)
    SECTIONS: ClassVar[tuple[str, ...]] = ()
    # family-row keys read into settings of the same name
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens",)
    POSITIVE: ClassVar[tuple[str, ...]] = (
        "steps",
        "problems_per_step",
        "num_generations",
        "num_iterations",
        "micro_batch_size",
        "max_new_tokens",
    )

    def __post_init__(self) -> None:
        for name, allowed in self._choices().items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"train setting {name}={value!r}: expected one of {allowed}")
        for name in self.POSITIVE:
            if getattr(self, name) < 1:
                raise ValueError(f"train setting {name} must be >= 1, got {getattr(self, name)}")
        check_eval_settings(self.eval_every, self.eval_problems)

    def _choices(self) -> dict[str, tuple]:
        """Settings that must be one of a fixed set (subclasses add theirs)."""
        return {
            "split": TRAIN_SPLITS,
            "eval_split": EVAL_SPLITS,
            "scale_rewards": SCALES,
            "loss_type": LOSS_TYPES,
            "budget_match": BUDGET_MATCHES,
            "master_dtype": MASTER_DTYPES,
        }

    @property
    def max_steps(self) -> int:
        """The most optimizer steps a budget-matched trainer may take."""
        return max(self.steps, math.ceil(self.budget_max_steps_factor * self.steps))

    def model_steps(self, name: str) -> int:
        """The optimizer steps model ``name`` may take (TRL's ``max_steps``; the training loop's
        cap and the scheduler's horizon): ``steps`` without a budget, the reference's steps under
        ``budget.match: steps``, else the cap (the budget stops the model earlier)."""
        if self.budget_targets is None:
            return self.steps
        if self.budget_match == "steps":
            return int(self.budget_targets[name])
        return self.max_steps

    @property
    def eps_high(self) -> float:
        """The upper clip of the importance ratio."""
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    @classmethod
    def from_config(cls, config: dict, family: dict | None = None, seed: int = 0, **fixed: Any):
        """Settings from a validated config's ``train`` (+ :attr:`SECTIONS`) and a family row.

        Keys of those sections that are not fields of ``cls`` are not this trainer's (e.g.
        ``train.backend``); ``fixed`` sets fields the config has no key for (``mode``).
        """
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for section in ("train", *cls.SECTIONS):
            values.update(_flatten(dict(config.get(section) or {})))
        if family is not None:
            values.update({k: family.get(k) for k in cls.FAMILY_KEYS})
        values.update(fixed, seed=seed)
        return cls(**{k: v for k, v in values.items() if k in names and v is not None})

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values (for a run's summary)."""
        return dataclasses.asdict(self)


@dataclass
class RLSettings(TrainSettings):
    """The in-house trainers' settings: the shared ones plus what :mod:`agon.rl` reads."""

    adam_betas: tuple[float, float] = (0.9, 0.999)  # AdamW's (TRL's and torch's defaults)
    packing: bool = True  # score sequences packed several per row (agon.packing), not padded

    # whether the trainer's models train together in every step (the duel): a compute budget,
    # which stops each model on its own, applies only to trainers whose models train alone
    TOGETHER: ClassVar[bool] = False


@dataclass
class DuelSettings(RLSettings):
    """The duel trainer's settings: the shared ones plus the config's ``agon`` section."""

    num_reads: int = 2  # K: reads per draft
    role_schedule: str = "alternate"  # alternate | both
    reward_scheme: str = "agon"  # agon | zero_sum | independent | cooperative
    reward_lam: float = 1.0  # weight of the win bonus / loss penalty in the agon scheme
    reader_group: str = "draft"  # draft: K reads of one draft; problem: all G*K reads of a problem
    baseline: str = "group"  # what an advantage subtracts: group mean | batch mean | none
    # extra reward for a read that is right after a wrong draft: c_read * (1 - c_draft) * this
    # (0: none; the reading in which the reader is paid for robustness; docs/method.md)
    reward_reader_robustness: float = 0.0
    draft_view: str = "full"  # the family row's view of a draft in the reader prompt

    SECTIONS: ClassVar[tuple[str, ...]] = ("agon",)
    FAMILY_KEYS: ClassVar[tuple[str, ...]] = ("max_new_tokens", "draft_view")
    POSITIVE: ClassVar[tuple[str, ...]] = (*TrainSettings.POSITIVE, "num_reads")
    TOGETHER: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.role_schedule == "both" and self.problems_per_step < 2:
            raise ValueError(
                "role_schedule 'both' splits the problems in two: problems_per_step must be >= 2"
            )

    def _choices(self) -> dict[str, tuple]:
        return {
            **super()._choices(),
            "role_schedule": ROLE_SCHEDULES,
            "reward_scheme": REWARD_SCHEMES,
            "reader_group": READER_GROUPS,
            "baseline": BASELINES,
        }
