"""The Engine interface every system and trainer generates through.

A prompt is a list of chat messages; the engine applies the model's chat template with the
family row's ``chat_template_kwargs`` and prepends its ``system_prompt``. ``generate`` returns,
for each prompt, ``n`` :class:`Completion` records with token ids and per-token logprobs of the
sampled tokens (under the sampling distribution's logits before temperature scaling is NOT
assumed: see each backend's docstring).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``temperature == 0`` is greedy; ``seed`` makes sampling reproducible."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass
class Completion:
    """One sampled completion of one prompt."""

    text: str
    token_ids: list[int]
    logprobs: list[float] | None
    prompt_token_ids: list[int] = field(default_factory=list)
    finish_reason: str = "length"  # "stop" (eos or stop string) or "length"


class Engine(ABC):
    """Generates completions for chat prompts with one model."""

    @abstractmethod
    def generate(self, prompts: Sequence[Messages], n: int = 1, sampling: SamplingParams | None = None) -> list[list[Completion]]:
        """For each prompt, ``n`` completions (outer list: prompts, inner: samples)."""

    def close(self) -> None:
        """Release the model and any worker resources."""
