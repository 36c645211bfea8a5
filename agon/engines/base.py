"""The Engine interface every system and trainer generates through.

A prompt is a list of chat messages; the engine applies the model's chat template with the
family row's ``chat_template_kwargs`` and prepends its ``system_prompt``. ``generate`` returns,
for each prompt, ``n`` :class:`Completion` records with token ids and per-token logprobs of the
sampled tokens. Which distribution the logprobs are taken under is ``SamplingParams.logprobs``:
``"raw"`` (default) is the model's own distribution (log-softmax of the logits, before
temperature and top-p, as vLLM's default ``raw_logprobs``), ``"processed"`` the distribution
actually sampled from (after temperature and top-p).

Both backends share :func:`render_prompt`, so a prompt is tokenized identically whichever
engine serves it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Messages = list[dict[str, str]]
LOGPROB_MODES = ("raw", "processed")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``temperature == 0`` is greedy; ``seed`` makes sampling reproducible.

    ``prompt_seeds`` (one per prompt of a ``generate`` call) seeds each prompt's samples on
    their own: prompt ``i``'s ``n`` samples then depend on ``prompt_seeds[i]`` and on nothing
    else in the call, so a batch split over processes, or batched differently, draws the same
    samples (``seed`` is then unused). The duel seeds every problem this way, which is what
    lets a run on several processes reproduce the one-process run.

    ``stop`` strings end a completion; the text excludes the stop string (as vLLM does), the
    token ids keep the tokens generated up to it. ``logprobs`` is ``"raw"`` or ``"processed"``
    (see the module docstring).
    """

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: str = "raw"
    prompt_seeds: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(
                f"SamplingParams.max_new_tokens must be >= 1, got {self.max_new_tokens}"
            )
        if self.temperature < 0:
            raise ValueError(
                f"SamplingParams.temperature must be >= 0 (0 = greedy), got {self.temperature}"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.logprobs not in LOGPROB_MODES:
            raise ValueError(
                f"SamplingParams.logprobs must be one of {LOGPROB_MODES}, got {self.logprobs!r}"
            )
        if self.prompt_seeds is not None:
            object.__setattr__(self, "prompt_seeds", tuple(int(x) for x in self.prompt_seeds))
        if isinstance(self.stop, str):  # a lone string would be iterated character by character
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def greedy(self) -> bool:
        """True when decoding is argmax (temperature 0)."""
        return self.temperature == 0

    def seeds_for(self, n_prompts: int) -> tuple[int, ...] | None:
        """``prompt_seeds``, checked to have one seed per prompt (None when not set)."""
        if self.prompt_seeds is not None and len(self.prompt_seeds) != n_prompts:
            raise ValueError(
                f"SamplingParams.prompt_seeds has {len(self.prompt_seeds)} seeds for "
                f"{n_prompts} prompts; give one per prompt"
            )
        return self.prompt_seeds


@dataclass
class Completion:
    """One sampled completion of one prompt."""

    text: str
    token_ids: list[int]
    logprobs: list[float] | None
    prompt_token_ids: list[int] = field(default_factory=list)
    finish_reason: str = "length"  # "stop" (eos or stop string) or "length"


class PromptTooLongError(ValueError):
    """A rendered prompt is longer than the family's ``max_prompt_tokens`` (rejected, not
    truncated)."""


def with_system_prompt(messages: Messages, system_prompt: str | None) -> Messages:
    """``messages`` with the persona ``system_prompt`` first (merged into a system turn)."""
    messages = [dict(m) for m in messages]
    if not system_prompt:
        return messages
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = f"{system_prompt}\n\n{messages[0]['content']}"
        return messages
    return [{"role": "system", "content": system_prompt}, *messages]


def strip_special_tokens(text: str, tokenizer: Any) -> str:
    """``text`` without the tokenizer's special-token strings (turn markers, bos/eos, pad).

    Message contents are untrusted: a rival's draft that contains ``<|im_end|><|im_start|>system``
    would otherwise be parsed into real turn boundaries of the reader's prompt. Only the chat
    template may introduce special tokens. Added tokens that are not special (Qwen3's
    ``<think>``/``</think>``) are kept.
    """
    for tok in sorted(getattr(tokenizer, "all_special_tokens", []) or [], key=len, reverse=True):
        if tok and tok in text:
            text = text.replace(tok, "")
    return text


def render_prompt(
    tokenizer: Any,
    messages: Messages,
    system_prompt: str | None = None,
    chat_template_kwargs: dict | None = None,
    max_prompt_tokens: int | None = None,
) -> list[int]:
    """Token ids of ``messages`` under the tokenizer's chat template, ready for generation.

    The template adds the generation prompt and its own special tokens (BOS where the family
    has one), so the text is encoded without adding more; special-token strings inside the
    messages are removed first (:func:`strip_special_tokens`). A tokenizer without a chat template
    is an error, since a raw concatenation would silently change what the model sees.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat template; "
            "use an instruct/chat checkpoint or set tokenizer.chat_template"
        )
    messages = [{**m, "content": strip_special_tokens(m["content"], tokenizer)} for m in messages]
    text = tokenizer.apply_chat_template(
        with_system_prompt(messages, system_prompt),
        tokenize=False,
        add_generation_prompt=True,
        **(chat_template_kwargs or {}),
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
        raise PromptTooLongError(
            f"prompt has {len(ids)} tokens, over max_prompt_tokens={max_prompt_tokens}; "
            "raise the family's max_prompt_tokens or shorten the prompt (e.g. a draft_view of "
            "last_tokens:N)"
        )
    return list(ids)


def fit_tail(build: Callable[[str], Messages], text: str, engine: Any) -> tuple[Messages, bool]:
    """``build(text)``, or ``build`` of the longest tail of ``text`` whose prompt fits ``engine``.

    For a prompt that quotes a long text (a reader prompt quoting a draft): the tail is kept,
    since that is where an answer is. The bool says the text was cut. Engines without an
    ``encode`` or without a prompt limit are trusted to fit it; a prompt that does not fit
    even with no text raises :class:`PromptTooLongError`.
    """
    messages = build(text)
    encode = getattr(engine, "encode", None)
    if encode is None or getattr(engine, "max_prompt_tokens", 0) is None:  # no limit
        return messages, False

    def fits(n_chars: int) -> bool:
        try:
            encode(build(text[len(text) - n_chars :] if n_chars else ""))
            return True
        except PromptTooLongError:
            return False

    if fits(len(text)):
        return messages, False
    if not fits(0):
        raise PromptTooLongError("the prompt is too long even without the quoted text")
    lo, hi = 0, len(text)  # binary search for the longest tail that fits: fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return build(text[len(text) - lo :] if lo else ""), True


class Engine(ABC):
    """Generates completions for chat prompts with one model."""

    tokenizer: Any = None

    @abstractmethod
    def generate(
        self, prompts: Sequence[Messages], n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        """For each prompt, ``n`` completions (outer list: prompts, inner: samples)."""

    def close(self) -> None:  # noqa: B027 - optional: an engine with nothing to release
        """Release the model and any worker resources."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TemplatedEngine(Engine):
    """An engine that renders its own prompts: the tokenizer's chat template with one policy's
    persona (``system_prompt``), template kwargs and prompt limit, the same for every backend,
    so a prompt is the same token ids whichever engine samples it."""

    # set by set_template, which every subclass calls in its __init__
    tokenizer: Any
    system_prompt: str | None
    chat_template_kwargs: dict
    max_prompt_tokens: int | None

    def set_template(
        self,
        tokenizer: Any,
        system_prompt: str | None = None,
        chat_template_kwargs: dict | None = None,
        max_prompt_tokens: int | None = None,
    ) -> None:
        """Set what :meth:`encode` renders with."""
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.max_prompt_tokens = max_prompt_tokens

    def encode(self, messages: Messages) -> list[int]:
        """The prompt token ids of ``messages`` (template, persona and kwargs applied)."""
        return render_prompt(
            self.tokenizer,
            messages,
            self.system_prompt,
            self.chat_template_kwargs,
            self.max_prompt_tokens,
        )
