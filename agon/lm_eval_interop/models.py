"""agon's systems as lm-eval model types (``generate_until`` only).

A request's context becomes one user turn (or, with lm-eval's ``--apply_chat_template``, the
chat history lm-eval built, passed through unchanged), and each engine applies its model's own
chat template, persona and template kwargs, exactly as in ``agon eval``. The cascade's reader
gets a task-agnostic reader prompt (:data:`READER_TEMPLATE`): lm-eval tasks extract answers in
their own formats, so the reader is told to answer "in the format the task asks for" rather
than in ``\\boxed{}``. Requests are grouped by their generation kwargs and each group runs as
one batched system call; ``until`` stops both the drafts and the final answers.

Log-likelihood requests are refused: a cascade has no single likelihood to report.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM
from tqdm.auto import tqdm

from agon.engines import load_engine
from agon.engines.base import Engine, Messages, SamplingParams
from agon.registry import SYSTEM_KINDS
from agon.systems import SystemContext, cascade, single
from agon.tasks.base import Problem, Task

CHAT_MARKER = "<<agon-chat-json>>"  # prefix of a context that is a JSON list of chat messages
READER_TEMPLATE = (
    "{question}\n\n"
    "Below is a rival's attempt at this. It may be wrong. Check it critically, then give your "
    "own complete answer in the format the task asks for.\n\n"
    "<rival_attempt>\n{draft}\n</rival_attempt>"
)
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's own default when a task sets no max_gen_toks


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class _ContextTask(Task):
    """An adapter Task whose problems are lm-eval contexts (never graded here: lm-eval grades)."""

    name = "lm-eval"

    def problems(self, split: str) -> list[Problem]:
        raise NotImplementedError("lm-eval supplies the problems")

    def solve_prompt(self, problem: Problem) -> Messages:
        """The context as one user turn, or lm-eval's chat history when it built one."""
        if problem.question.startswith(CHAT_MARKER):
            return json.loads(problem.question[len(CHAT_MARKER) :])
        return [{"role": "user", "content": problem.question}]

    def reader_prompt(self, problem: Problem, draft: str) -> Messages:
        """The solve prompt with the rival's draft appended to its last user turn."""
        messages = [dict(m) for m in self.solve_prompt(problem)]
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[last]["content"] = READER_TEMPLATE.format(
            question=messages[last]["content"], draft=draft
        )
        return messages

    def grade(self, problems, completions):
        raise NotImplementedError("lm-eval grades with the task's own metric")


class _AgonLM(LM):
    """Shared machinery: engines from model args, batched generate_until."""

    def __init__(
        self,
        *,
        dtype: str = "auto",
        device: str | None = None,
        batch_size: Any = 64,
        backend: str = "hf",
        enable_thinking: Any = None,
        seed: Any = 0,
        max_prompt_tokens: Any = None,
        **unused: Any,
    ):
        super().__init__()
        # lm-eval passes device="cuda" by default, also on machines without one
        if device and str(device).startswith("cuda") and not torch.cuda.is_available():
            device = None
        self._dtype, self._device, self._backend = dtype, device, backend
        self._batch_size = (
            int(batch_size) if str(batch_size).isdigit() else 64
        )  # "auto" -> our default
        self._template_kwargs = (
            {} if enable_thinking is None else {"enable_thinking": _bool(enable_thinking)}
        )
        self._seed = int(seed)
        self._max_prompt_tokens = int(max_prompt_tokens) if max_prompt_tokens else None
        self._engines: dict[str, Engine] = {}
        self.system: Any = None

    def _engine(self, path: str, system_prompt: str | None = None) -> Engine:
        """One engine per distinct model path (a self-cascade shares one)."""
        key = f"{path}|{system_prompt}"
        if key not in self._engines:
            row = {
                "model": path,
                "system_prompt": system_prompt,
                "chat_template_kwargs": self._template_kwargs,
            }
            family = {"dtype": self._dtype, "max_prompt_tokens": self._max_prompt_tokens}
            kwargs: dict[str, Any] = {"batch_size": self._batch_size}
            if self._device and self._backend == "hf":
                kwargs["device"] = self._device
            self._engines[key] = load_engine(row, family, self._backend, **kwargs)
        return self._engines[key]

    # lm-eval's chat-template hooks: keep the messages, let each engine template them
    @property
    def tokenizer_name(self) -> str:
        return "agon-per-engine-chat-template"

    def chat_template(self, chat_template: bool | str = False) -> str:
        return "agon-per-engine-chat-template"

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        return CHAT_MARKER + json.dumps(chat_history)

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        """Answer each request with the system; requests sharing gen kwargs run as one batch."""

        groups: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault(json.dumps(req.args[1], sort_keys=True, default=str), []).append(i)
        answers: list[str | None] = [None] * len(requests)
        task = _ContextTask()
        bar = tqdm(
            total=len(requests), disable=disable_tqdm, desc=f"{self.system.name} generate_until"
        )
        for key, idx in groups.items():
            sampling = self._sampling(json.loads(key))
            problems = [Problem(id=str(i), question=requests[i].args[0], answer="") for i in idx]
            samples = self.system.run(task, problems, 1, sampling)
            for i, s in zip(idx, samples):
                answers[i] = s[0].completion
                self.cache_hook.add_partial("generate_until", requests[i].args, s[0].completion)
            bar.update(len(idx))
        bar.close()
        return answers  # type: ignore[return-value]

    def _sampling(self, gen_kwargs: dict) -> SamplingParams:
        """lm-eval generation kwargs as our SamplingParams (greedy unless do_sample)."""
        until = gen_kwargs.get("until") or []
        until = [until] if isinstance(until, str) else list(until)
        do_sample = _bool(gen_kwargs.get("do_sample", False))
        temperature = float(gen_kwargs.get("temperature", 1.0 if do_sample else 0.0))
        return SamplingParams(
            max_new_tokens=int(gen_kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS)),
            temperature=temperature if do_sample else 0.0,
            top_p=float(gen_kwargs.get("top_p", 1.0)) if do_sample else 1.0,
            stop=tuple(until),
            seed=self._seed,
        )

    def loglikelihood(
        self, requests: list[Instance], disable_tqdm: bool = False
    ) -> list[tuple[float, bool]]:
        raise NotImplementedError(
            f"{type(self).__name__} answers generate_until tasks only; a system of several models "
            "has no single likelihood"
        )

    def loglikelihood_rolling(
        self, requests: list[Instance], disable_tqdm: bool = False
    ) -> list[float]:
        raise NotImplementedError(
            f"{type(self).__name__} answers generate_until tasks only; a system of several models "
            "has no single likelihood"
        )

    def get_model_info(self) -> dict:
        return {"agon_system": self.system.name, "agon_models": sorted(self._engines)}


class AgonSingleLM(_AgonLM):
    """``agon-single``: one model (``model=PATH``; ``system_prompt=...`` optional)."""

    def __init__(self, model: str, system_prompt: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)

        self.system = single(self._engine(model, system_prompt))


class AgonCascadeLM(_AgonLM):
    """``agon-cascade``: ``drafter=PATH,reader=PATH``
    (``draft_view=full|answer_section|last_tokens:N``)."""

    def __init__(self, drafter: str, reader: str, draft_view: str = "full", **kwargs: Any):
        super().__init__(**kwargs)

        self.system = cascade(self._engine(drafter), self._engine(reader), draft_view)


class AgonMoALM(_AgonLM):
    """``agon-moa``: ``model_a=PATH,model_b=PATH`` (``layers``, ``proposers``, ``aggregator=a|b``).

    Built by the system kind ``moa`` (:data:`agon.registry.SYSTEM_KINDS`), with the paper's
    synthesis prompt."""

    def __init__(
        self,
        model_a: str,
        model_b: str,
        layers: Any = 1,
        proposers: Any = 4,
        aggregator: str = "a",
        **kwargs: Any,
    ):
        super().__init__(**kwargs)

        moa = {"layers": int(layers), "proposers": int(proposers), "aggregator": aggregator}
        family = {"model_a": {"model": model_a}, "model_b": {"model": model_b}}
        ctx = SystemContext(
            config={"moa": {**moa, "prompt": "synthesize"}},
            family=family,
            engine=lambda row, path: self._engine(path or family[f"model_{row}"]["model"]),
        )
        self.system, _ = SYSTEM_KINDS.get("moa")(ctx)
