"""The systems table 1 evaluates: a model alone, and the drafter -> reader cascade.

A system turns problems into answers: ``system.run(task, problems, n, sampling)`` returns, for
each problem, ``n`` :class:`Sample` records holding the final prompt, any intermediate texts
(the cascade's draft, Mixture-of-Agents' proposals), the final completion and token counts.
Grading is the evaluator's job (:mod:`agon.evaluation`), so a system never sees the gold
answer.

- :func:`single`: the ordinary solve prompt to one engine.
- :func:`cascade`: the drafter answers the solve prompt; the reader then gets the task's reader
  prompt with the draft as the family's ``draft_view`` shows it, and the cascade's answer is
  the reader's (``docs/method.md``). Each of the ``n`` samples is an independent draft -> read
  chain.
- Mixture-of-Agents lives in :mod:`baselines.moa` and follows the same protocol.

Each kind is built from a :class:`SystemContext` by a function registered under its name in
:data:`agon.registry.SYSTEM_KINDS` (:func:`build_single`, :func:`build_cascade` here).

Seeds: each stage draws with its own seed (``seed + stage * STAGE_SEED_STRIDE``), so the
drafter's and the reader's samples are not correlated through the RNG stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agon.engines.base import Completion, Engine, Messages, SamplingParams
from agon.tasks.base import WRONG_DRAFT_SEED, Problem, Task, apply_draft_view


@dataclass
class Sample:
    """One end-to-end answer of a system to one problem.

    ``drafts`` are the texts earlier stages produced for this sample (cascade: the one draft
    as generated; MoA: every proposal, layer by layer), ``shown`` what of them the final stage's
    prompt contains. ``draft_tokens`` counts every token generated before the final stage.
    """

    prompt: Messages
    completion: str
    completion_tokens: int
    prompt_tokens: int
    finish_reason: str
    drafts: list[Any] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    draft_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Every token the system generated for this sample."""
        return self.completion_tokens + self.draft_tokens


class System(Protocol):
    """What the evaluator runs: a name, the engines it owns, and ``run``."""

    name: str

    def run(
        self, task: Task, problems: Sequence[Problem], n: int, sampling: SamplingParams
    ) -> list[list[Sample]]:
        """For each problem, ``n`` samples."""
        ...

    def close(self) -> None:
        """Release the engines."""
        ...


# stage seeds are this far apart, so they never meet the engine's per-batch offsets (+0, +1, ...)
STAGE_SEED_STRIDE = 1_000_003


def stage_sampling(sampling: SamplingParams, stage: int) -> SamplingParams:
    """``sampling`` with the seed offset for pipeline stage ``stage`` (unseeded stays unseeded)."""
    return (
        sampling
        if sampling.seed is None
        else replace(sampling, seed=sampling.seed + stage * STAGE_SEED_STRIDE)
    )


def _sample(prompt: Messages, c: Completion, **extra: Any) -> Sample:
    return Sample(
        prompt=prompt,
        completion=c.text,
        completion_tokens=len(c.token_ids),
        prompt_tokens=len(c.prompt_token_ids),
        finish_reason=c.finish_reason,
        **extra,
    )


@dataclass
class Single:
    """One model answers the solve prompt."""

    engine: Engine
    name: str = "single"

    def run(
        self, task: Task, problems: Sequence[Problem], n: int, sampling: SamplingParams
    ) -> list[list[Sample]]:
        """``n`` independent answers per problem."""
        prompts = [task.solve_prompt(p) for p in problems]
        outs = self.engine.generate(prompts, n=n, sampling=stage_sampling(sampling, 0))
        return [[_sample(prompt, c) for c in cs] for prompt, cs in zip(prompts, outs)]

    def close(self) -> None:
        """Close the engine."""
        self.engine.close()


@dataclass
class Cascade:
    """The drafter drafts, the reader reads the draft (through ``draft_view``) and answers."""

    drafter: Engine
    reader: Engine
    draft_view: str = "full"
    name: str = "cascade"

    def run(
        self, task: Task, problems: Sequence[Problem], n: int, sampling: SamplingParams
    ) -> list[list[Sample]]:
        """``n`` draft -> read chains per problem; the answer is the read."""
        drafts = self.drafter.generate(
            [task.solve_prompt(p) for p in problems], n=n, sampling=stage_sampling(sampling, 0)
        )
        tokenizer = getattr(self.drafter, "tokenizer", None)
        reader_prompts, shown = [], []
        for problem, cs in zip(problems, drafts):
            for c in cs:
                view = apply_draft_view(c.text, self.draft_view, tokenizer)
                shown.append(view)
                reader_prompts.append(task.reader_prompt(problem, view))
        reads = self.reader.generate(reader_prompts, n=1, sampling=stage_sampling(sampling, 1))
        out: list[list[Sample]] = []
        for i, cs in enumerate(drafts):
            row = []
            for j, draft in enumerate(cs):
                k = i * n + j
                row.append(
                    _sample(
                        reader_prompts[k],
                        reads[k][0],
                        drafts=[draft.text],
                        shown=[shown[k]],
                        draft_tokens=len(draft.token_ids),
                    )
                )
            out.append(row)
        return out

    def close(self) -> None:
        """Close both engines (once, if they are the same object)."""
        self.drafter.close()
        if self.reader is not self.drafter:
            self.reader.close()


@dataclass
class WrongDraftRead:
    """The reader alone against a fixed adversary: it reads each problem's fixed wrong draft
    (:meth:`agon.tasks.base.Task.wrong_draft`, the task's default style: a hidden error in the
    toy world's arith) and answers. Its pass@1 is the reader's robustness to wrong drafts,
    the same drafts for every method and run."""

    reader: Engine
    name: str = "robust_read"

    def run(
        self, task: Task, problems: Sequence[Problem], n: int, sampling: SamplingParams
    ) -> list[list[Sample]]:
        """``n`` reads of each problem's fixed wrong draft."""
        drafts = [task.wrong_draft(p, WRONG_DRAFT_SEED) for p in problems]
        missing = [p.id for p, d in zip(problems, drafts) if d is None]
        if missing:
            raise ValueError(
                f"task {task.name!r} writes no wrong draft for {missing[:3]}...: the robust_read "
                "system needs a task that can (the toy world's arith and toycode)"
            )
        prompts = [task.reader_prompt(p, d) for p, d in zip(problems, drafts)]
        outs = self.reader.generate(prompts, n=n, sampling=stage_sampling(sampling, 1))
        return [
            [_sample(prompt, c, drafts=[draft], shown=[draft]) for c in cs]
            for prompt, draft, cs in zip(prompts, drafts, outs)
        ]

    def close(self) -> None:
        """Close the engine."""
        self.reader.close()


def single(engine: Engine) -> Single:
    """The system ``single(model)``: one model alone."""
    return Single(engine)


def cascade(drafter_engine: Engine, reader_engine: Engine, draft_view: str = "full") -> Cascade:
    """The system ``cascade(drafter, reader)``: the reader sees the draft through ``draft_view``."""
    apply_draft_view("", draft_view)  # fail now on a bad view, not after the drafts are made
    return Cascade(drafter_engine, reader_engine, draft_view)


# ----------------------------------------------------------------------------- from a config


@dataclass
class SystemContext:
    """What a system kind is built from: the config, the family row, an engine for a row of
    the family (``engine("a", path)``: the row's persona and template, ``path`` or the row's
    own model), the model paths given (``model``, ``drafter``, ``reader``; None: the row's
    base model) and which row plays each part (``rows``)."""

    config: dict
    family: dict
    engine: Callable[[str, str | None], Engine]
    model: str | None = None
    drafter: str | None = None
    reader: str | None = None
    rows: dict[str, str] = field(default_factory=dict)

    def model_name(self, row: str, path: str | None) -> str:
        """The model a part runs: the path given, else the row's base model."""
        return path or self.family[f"model_{row}"]["model"]


def build_single(ctx: SystemContext) -> tuple[Single, dict]:
    """``single``: the model of row ``rows["model"]`` (or ``model``) alone."""
    row = ctx.rows["model"]
    identity = {"model": ctx.model_name(row, ctx.model), "row": row}
    return single(ctx.engine(row, ctx.model)), identity


def build_robust_read(ctx: SystemContext) -> tuple[WrongDraftRead, dict]:
    """``robust_read``: the model of row ``rows["model"]`` (or ``model``) reading each problem's
    fixed wrong draft."""
    row = ctx.rows["model"]
    identity = {"reader": ctx.model_name(row, ctx.model), "row": row, "drafts": "wrong_draft"}
    return WrongDraftRead(ctx.engine(row, ctx.model)), identity


def build_cascade(ctx: SystemContext) -> tuple[Cascade, dict]:
    """``cascade``: ``rows["drafter"]`` drafts, ``rows["reader"]`` reads through the family's
    ``draft_view``."""
    d, r = ctx.rows["drafter"], ctx.rows["reader"]
    view = ctx.family["draft_view"]
    system = cascade(ctx.engine(d, ctx.drafter), ctx.engine(r, ctx.reader), view)
    identity = {
        "drafter": ctx.model_name(d, ctx.drafter),
        "reader": ctx.model_name(r, ctx.reader),
        "rows": [d, r],
        "draft_view": view,
    }
    return system, identity
