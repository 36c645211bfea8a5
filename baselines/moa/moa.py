"""Mixture-of-Agents (Wang et al., 2024, "Mixture-of-Agents Enhances Large Language Model
Capabilities") over the two base models of a family: the `moa` column of table 1.

Layer 1: ``proposers`` proposals to the ordinary solve prompt, drawn alternately from model A
and model B (proposer i uses A when i is even). Layers 2..``layers``: each proposer answers
again with the previous layer's proposals given through the paper's aggregate-and-synthesize
prompt. Finally the aggregator (A or B, ``moa.aggregator``) reads the last layer's proposals
with the same prompt and gives the answer that is graded.

Departures from the paper, on purpose: the paper's proposers are six different open models;
here there are two (the same two the cascade uses), alternating, so MoA spends its extra
compute on the same models as the cascade. Each of the ``n`` evaluation samples is an
independent MoA run (its own proposals). The synthesis prompt is the paper's (its Table 1),
given as the system turn, with the task's solve prompt as the user turn, as in the paper's
reference implementation. ``prompt: reader`` instead shows the proposals through the task's
proposals prompt (:meth:`agon.tasks.base.Task.proposals_prompt`: its reader prompt with the
proposals numbered as several rival attempts, each possibly wrong): for models too small to
follow the paper's long instruction or to fit it in their context, such as the toy world's,
whose base models are trained on that prompt with two proposals (``docs/method.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agon.engines.base import Completion, Engine, Messages, PromptTooLongError, SamplingParams
from agon.systems import Sample, SystemContext, stage_sampling
from agon.tasks.base import Problem, Task

AGGREGATE_AND_SYNTHESIZE = (
    "You have been provided with a set of responses from various open-source models to the latest "
    "user query. Your task is to synthesize these responses into a single, high-quality response. "
    "It is crucial to critically evaluate the information provided in these responses, recognizing "
    "that some of it may be biased or incorrect. Your response should not simply replicate the "
    "given answers but should offer a refined, accurate, and comprehensive reply to the "
    "instruction. Ensure your response is well-structured, coherent, and adheres to the highest "
    "standards of accuracy and reliability.\n\n"
    "Responses from models:"
)


def synthesis_prompt(solve_prompt: Messages, proposals: Sequence[str]) -> Messages:
    """The aggregate-and-synthesize prompt: the numbered proposals as the system turn, then the
    query."""
    listed = "\n".join(f"{i + 1}. {p}" for i, p in enumerate(proposals))
    return [{"role": "system", "content": f"{AGGREGATE_AND_SYNTHESIZE}\n{listed}"}, *solve_prompt]


@dataclass
class MixtureOfAgents:
    """MoA with ``layers`` proposer layers of ``proposers`` proposals each, then one aggregator."""

    model_a: Engine
    model_b: Engine
    layers: int = 1
    proposers: int = 4
    aggregator: str = "a"
    prompt: str = "synthesize"  # "synthesize" (the paper's) or "reader" (the proposals prompt)
    name: str = "moa"

    def __post_init__(self) -> None:
        if self.layers < 1:
            raise ValueError(f"moa.layers must be >= 1, got {self.layers}")
        if self.proposers < 1:
            raise ValueError(f"moa.proposers must be >= 1, got {self.proposers}")
        if self.aggregator not in ("a", "b"):
            raise ValueError(f"moa.aggregator must be 'a' or 'b', got {self.aggregator!r}")
        if self.prompt not in ("synthesize", "reader"):
            raise ValueError(f"moa.prompt must be 'synthesize' or 'reader', got {self.prompt!r}")

    def _proposer(self, i: int) -> Engine:
        return self.model_a if i % 2 == 0 else self.model_b

    def run(
        self, task: Task, problems: Sequence[Problem], n: int, sampling: SamplingParams
    ) -> list[list[Sample]]:
        """``n`` independent MoA runs per problem; the answer is the aggregator's."""
        # one "chain" per (problem, sample); chains of all problems are batched per proposer
        chains = [p for p in problems for _ in range(n)]
        solve = [task.solve_prompt(p) for p in chains]

        def build(chain: int, proposals: list[str]) -> Messages:
            if self.prompt == "reader":
                return task.proposals_prompt(chains[chain], proposals)
            return synthesis_prompt(solve[chain], proposals)

        def show(chain: int, proposals: list[str], reader: Engine) -> Messages:
            # several long proposals may not fit the reader's prompt limit together: each keeps
            # an equal tail (where its answer is), as a reader prompt keeps a draft's
            return fit_proposals(lambda props: build(chain, props), proposals, reader)

        previous: list[list[str]] | None = None  # per chain, the last layer's proposals
        history: list[list[list[str]]] = [[] for _ in solve]  # per chain, per layer, proposals
        draft_tokens = [0] * len(solve)
        stage = 0
        for _ in range(self.layers):
            layer: list[list[str]] = [[] for _ in solve]
            for i in range(self.proposers):
                prompts = (
                    solve
                    if previous is None
                    else [show(c, prev, self._proposer(i)) for c, prev in enumerate(previous)]
                )
                outs = self._proposer(i).generate(
                    prompts, n=1, sampling=stage_sampling(sampling, stage)
                )
                stage += 1
                for c, (chain, out) in enumerate(zip(layer, outs)):
                    chain.append(out[0].text)
                    draft_tokens[c] += len(out[0].token_ids)
            for h, props in zip(history, layer):
                h.append(props)
            previous = layer
        aggregator = self.model_a if self.aggregator == "a" else self.model_b
        final_prompts = [show(c, prev, aggregator) for c, prev in enumerate(previous or [])]
        finals: list[list[Completion]] = aggregator.generate(
            final_prompts, n=1, sampling=stage_sampling(sampling, stage)
        )
        samples = [
            Sample(
                prompt=prompt,
                completion=out[0].text,
                completion_tokens=len(out[0].token_ids),
                prompt_tokens=len(out[0].prompt_token_ids),
                finish_reason=out[0].finish_reason,
                drafts=hist,
                shown=hist[-1],
                draft_tokens=dt,
            )
            for prompt, out, hist, dt in zip(final_prompts, finals, history, draft_tokens)
        ]
        return [samples[i * n : (i + 1) * n] for i in range(len(problems))]

    def close(self) -> None:
        """Close both engines (once, if they are the same object)."""
        self.model_a.close()
        if self.model_b is not self.model_a:
            self.model_b.close()


def fit_proposals(
    build: Callable[[list[str]], Messages], proposals: list[str], engine: Engine
) -> Messages:
    """``build(proposals)``, or ``build`` of each proposal's tail, the same number of characters
    for every proposal and as many as fit ``engine``'s prompt limit (an engine with no
    ``encode`` or no limit is trusted to fit it). Raises PromptTooLongError when even empty
    proposals do not fit."""
    encode = getattr(engine, "encode", None)
    if encode is None or getattr(engine, "max_prompt_tokens", None) is None:
        return build(proposals)

    def cut(n: int) -> list[str]:
        return [p[len(p) - n :] if n else "" for p in proposals]

    def fits(n: int) -> bool:
        try:
            encode(build(cut(n)))
            return True
        except PromptTooLongError:
            return False

    longest = max((len(p) for p in proposals), default=0)
    if fits(longest):
        return build(proposals)
    if not fits(0):
        raise PromptTooLongError("the proposals prompt is too long even with empty proposals")
    lo, hi = 0, longest  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return build(cut(lo))


def moa(
    model_a: Engine,
    model_b: Engine,
    layers: int = 1,
    proposers: int = 4,
    aggregator: str = "a",
    prompt: str = "synthesize",
) -> MixtureOfAgents:
    """The Mixture-of-Agents system over models A and B (config section ``moa``)."""
    return MixtureOfAgents(
        model_a, model_b, layers=layers, proposers=proposers, aggregator=aggregator, prompt=prompt
    )


def build_moa(ctx: SystemContext) -> tuple[MixtureOfAgents, dict]:
    """The system kind ``moa`` from a config: model A (or ``drafter``) and model B (or
    ``reader``) with the config's ``moa`` section."""
    m = ctx.config["moa"]
    system = moa(
        ctx.engine("a", ctx.drafter),
        ctx.engine("b", ctx.reader),
        layers=m["layers"],
        proposers=m["proposers"],
        aggregator=m["aggregator"],
        prompt=m["prompt"],
    )
    identity = {
        "a": ctx.model_name("a", ctx.drafter),
        "b": ctx.model_name("b", ctx.reader),
        "moa": m,
    }
    return system, identity
