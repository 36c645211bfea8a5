"""What a toy world's habits alone allow: its baselines read before anything is trained
(``agon toy habits``). A writer that makes exactly a model's habits and no other slips, as the
SFT data writes them (:mod:`agon.toy.sft_data`), is scored on a split's problems; the trained
base models land close to it, since they learn the habits' rates.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from agon.toy.chain import answer_of, arith_answer
from agon.toy.mistake import Mistake
from agon.toy.sft_data import written_arith_steps, written_code_lines
from agon.toy.toycode import reference_output


def habits_pass(task, problems, mistake: Mistake, n: int, seed: int = 0) -> dict[str, float]:
    """Pass@1 on ``problems`` of a writer that makes exactly ``mistake``'s errors and no other,
    as :func:`written_arith_steps` / :func:`written_code_lines` write them (``task``: an arith or
    toycode task object; toycode's answer is checked on its hidden tests by computing what the
    written lines print). Three readings:

    - ``sampled``: each habit at its rate, ``n`` draws per problem (table 1's metric);
    - ``greedy``: a rate of 0.5 or more always written, below it never (what greedy decoding
      of a model that learned the rates exactly writes);
    - ``ceiling``: only the habits written every time (rate 1) kept: what training that removed
      every habit sampling sometimes gets right could reach.

    The trained base models land near these (their own slips come on top): a world's regime can
    be read off before pretraining (``agon toy habits``)."""

    def only(m: Mistake, rate) -> Mistake:
        # each habit at its new rates, written as it was (writes kept), no style drawn
        kept = [
            replace(h, arith_rate=rate(h.arith_rate), code_rate=rate(h.code_rate), also=())
            for h in (m, *m.also)
        ]
        return replace(kept[0], hidden_share=1.0, also=tuple(kept[1:]))

    writers = {
        "sampled": (mistake, n),
        "greedy": (only(mistake, lambda r: float(r >= 0.5)), 1),
        "ceiling": (only(mistake, lambda r: float(r >= 1.0)), n),
    }
    rng, out = random.Random(seed), {}
    for name, (writer, draws) in writers.items():
        right = 0
        for p in problems:
            for _ in range(draws):
                right += writes_right(p, rng, writer)
        out[name] = right / (len(problems) * draws)
    return out


def writes_right(problem, rng: random.Random, writer: Mistake, keep: Sequence = ()) -> bool:
    """Whether ``writer`` answers ``problem`` right, writing it with its habits as the SFT data
    does (``keep``: drafts whose right aligned steps or lines it keeps, the steps parsed as
    :class:`agon.toy.chain.ArithStep` lists, the lines as (op, operand) lists); toycode's
    answer is checked on its hidden tests by computing what the written lines print."""
    ops = problem.meta["ops"]
    if "tests" in problem.meta:
        lines = written_code_lines(ops, rng, writer, keep=keep)
        answer = answer_of(problem)
        return all(reference_output(lines, i, answer) == o for i, o in problem.meta["tests"])
    steps = written_arith_steps(problem.meta["start"], ops, rng, writer, keep=keep)
    return arith_answer(steps, answer_of(problem)) == problem.answer
