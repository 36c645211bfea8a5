"""Test doubles: a tiny math task and a scripted engine, so tests of systems and evaluation
depend on neither the toy world nor a trained model. The tiny random models themselves are
:mod:`agon.random_models`."""

from __future__ import annotations

import random

from agon.engines.base import Completion
from agon.tasks import MathTask, Problem


def tiny_sum_task(n_problems: int = 6, seed: int = 0):
    """A :class:`agon.tasks.MathTask` of ``n_problems`` "What is a + b?" problems (every split)."""

    class TinySumTask(MathTask):
        name = "tinysum"
        version = "1"

        def __init__(self, grading_timeout_s: float = 5.0, grading_workers: int = 1):
            super().__init__(grading_timeout_s, grading_workers)
            rng = random.Random(seed)
            pairs = [(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(n_problems)]
            self._problems = [
                Problem(
                    id=f"sum-{i}", question=f"What is {a} + {b}?", answer=str(a + b), difficulty=1.0
                )
                for i, (a, b) in enumerate(pairs)
            ]

        def problems(self, split: str):
            return list(self._problems)

    return TinySumTask()


class ScriptedEngine:
    """An :class:`agon.engines.base.Engine` whose answer is ``reply(prompt_text, sample_index)``.

    Token ids are one id per whitespace word, logprobs all 0; ``calls`` records every prompt.
    """

    def __init__(self, reply, tokenizer=None):
        self.reply = reply
        self.tokenizer = tokenizer
        self.calls: list[list[dict]] = []

    def generate(self, prompts, n=1, sampling=None):
        out = []
        for p in prompts:
            self.calls.append(p)
            text = "\n".join(m["content"] for m in p)
            row = []
            for j in range(n):
                reply = self.reply(text, j)
                ids = list(range(len(reply.split())))
                row.append(
                    Completion(
                        text=reply,
                        token_ids=ids,
                        logprobs=[0.0] * len(ids),
                        prompt_token_ids=list(range(len(text.split()))),
                        finish_reason="stop",
                    )
                )
            out.append(row)
        return out

    def close(self) -> None:
        pass
