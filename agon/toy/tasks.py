"""The toy world's two tasks (``docs/method.md``): multi-step arithmetic mod 7, and toy programs.

Both are generated from a seed, so they need no download, and both are built for a model of
about 0.3M parameters trained from scratch in minutes: prompts are short, numbers are single
tokens, and the difficulty level is the number of operations.

``arith`` (a :class:`~agon.tasks.base.MathTask`, graded by math-verify on the boxed answer):
a start value and a chain of ``+ - *`` operations with operands 1..6, evaluated left to right
and reduced mod 7 after every step. ``4*3+2-5`` is solved as ``4*3=5 5+2=0 0-5=2 \\boxed{2}``.

``toycode`` (a code task: the answer is a Python program reading stdin, graded on hidden test
inputs): the prompt ``sum x*3+2-5`` asks for a program that reads a line of integers, maps
each ``x`` through the chain (mod 7 after every step), and prints the sum of the results mod
7. The gold program is one line per operation, answered as a fenced python block with no
chain of thought. Since the hidden inputs are never shown, copying the prompt (or printing a
constant) does not pass; only a program that computes the chain does.

Both tasks have levels 1..``levels`` (number of operations) and hard splits
(level >= ``hard_min_level``). The test split is drawn first from its own seed stream, the
validation split from another one, skipping every test question; the train split excludes
every test and validation question, so no held-out problem is ever trained on, and the SFT
stream of the base models skips them too (:meth:`ToySplits.heldout_questions`).

This module holds the chain both share, the splits and ``arith``; ``toycode`` is
:mod:`agon.toy.toycode`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

from agon.grading.math import extract_answer
from agon.grading.verdict import Verdict
from agon.tasks.base import MathTask, Messages, Param, Problem, build_splits
from agon.toy.chain import (
    ANSWERS,
    MOD,
    OPERANDS,
    OPS,
    answer_of,
    arith_answer,
    arith_solution,
    chain_text,
    first_error_style,
    gold_arith_steps,
    is_marked,
    parse_arith_steps,
    wrong_arith_steps,
)

# Reader prompts mark the draft as a rival's, possibly wrong (docs/method.md, the duel, step 1),
# in as few tokens as the tiny model can afford; the tokenizer merges these words into one or
# two tokens. The proposals prompt (a Mixture-of-Agents aggregator's) numbers several drafts.
ARITH_SOLVE = "solve: {question}"
ARITH_READ = "solve: {question}\nrival (may be wrong): {draft}"
ARITH_RIVAL = "\nrival {i} (may be wrong): {draft}"
CODE_SOLVE = "code: {question}"
CODE_READ = "code: {question}\nrival (may be wrong):\n{draft}"
CODE_RIVAL = "\nrival {i} (may be wrong):\n{draft}"


def _level_of(
    rng: random.Random, levels: int, hard_min_level: int, hard_fraction: float | None
) -> int:
    """A level 1..levels, uniform, or with ``hard_fraction`` of the mass on the hard levels."""
    if hard_fraction is None:
        return rng.randint(1, levels)
    if rng.random() < hard_fraction:
        return rng.randint(hard_min_level, levels)
    return rng.randint(1, max(1, hard_min_level - 1))


class ToySplits:
    """What both toy tasks share: seeded test and validation sets, a train set that excludes
    both, hard = the top levels, and the prompts (``SOLVE``, ``READ``, ``RIVAL``: short, since
    every prompt token costs the tiny model; a read marks the rival's draft as possibly wrong)."""

    name = ""
    SOLVE: ClassVar[str]
    READ: ClassVar[str]
    RIVAL: ClassVar[str]  # one numbered proposal of the proposals prompt
    # the split params both tasks take (each task's PARAMS adds its own)
    PARAMS: ClassVar[dict[str, Param]] = {
        "n_train": Param("integer", 5000, "train problems (may repeat each other)"),
        "n_test": Param("integer", 600, "test problems, distinct questions"),
        "levels": Param("integer", 6, "operations per problem: levels 1..levels"),
        "hard_min_level": Param("integer", 5, "the hard splits are level >= this"),
        "seed": Param("integer", 0, "the generator's seed"),
        "hard_fraction": Param(
            "number", None, "share of problems drawn from the hard levels (null: levels uniform)"
        ),
        "n_validation": Param("integer", 300, "validation problems, none of test's"),
    }
    SIZE_PARAMS: ClassVar[dict[str, str]] = {"test": "n_test", "validation": "n_validation"}

    def solve_prompt(self, problem: Problem) -> Messages:
        """``solve: 4*3+2-5`` (arith), ``code: sum x*3+2-5`` (toycode)."""
        return [{"role": "user", "content": self.SOLVE.format(question=problem.question)}]

    def reader_prompt(self, problem: Problem, draft: str) -> Messages:
        """The problem, then the rival's draft marked as possibly wrong."""
        content = self.READ.format(question=problem.question, draft=draft.strip())
        return [{"role": "user", "content": content}]

    def worked_solution(self, problem: Problem) -> str:
        """The gold solution (each task's ``solution``): ``arith``'s chain of thought and boxed
        answer, ``toycode``'s fenced program."""
        return self.solution(problem)

    def proposals_prompt(self, problem: Problem, proposals: Sequence[str]) -> Messages:
        """The problem, then each proposal numbered and marked as possibly wrong:
        ``solve: Q\\nrival 1 (may be wrong): d1\\nrival 2 (may be wrong): d2`` (toycode: each
        program on its own lines after its mark). One proposal is the ordinary reader prompt."""
        if not proposals:
            raise ValueError("proposals_prompt needs at least one proposal")
        if len(proposals) == 1:
            return self.reader_prompt(problem, proposals[0])
        content = self.SOLVE.format(question=problem.question) + "".join(
            self.RIVAL.format(i=i, draft=d.strip()) for i, d in enumerate(proposals, 1)
        )
        return [{"role": "user", "content": content}]

    def __init__(
        self,
        n_train: int,
        n_test: int,
        levels: int,
        hard_min_level: int,
        seed: int,
        hard_fraction: float | None,
        n_validation: int = 300,
    ):
        if not 1 <= hard_min_level <= levels:
            raise ValueError(
                f"{self.name}: hard_min_level must be in 1..levels={levels}, got {hard_min_level}"
            )
        if n_train < 0 or n_test < 1 or n_validation < 0:
            raise ValueError(
                f"{self.name}: need n_train >= 0, n_test >= 1 and n_validation >= 0, got "
                f"{n_train}, {n_test}, {n_validation}"
            )
        if hard_fraction is not None and not 0.0 <= hard_fraction <= 1.0:
            raise ValueError(
                f"{self.name}: hard_fraction must be in [0, 1] or null, got {hard_fraction}"
            )
        self.n_train, self.n_test, self.n_validation = int(n_train), int(n_test), int(n_validation)
        self.levels, self.hard_min_level = int(levels), int(hard_min_level)
        self.seed, self.hard_fraction = int(seed), hard_fraction
        self._splits: dict[str, list[Problem]] | None = None

    def sample(self, rng: random.Random, level: int) -> Problem:
        """One fresh problem of ``level`` drawn with ``rng`` (ids are content hashes)."""
        raise NotImplementedError

    def heldout_questions(self) -> frozenset[str]:
        """Questions of the test and validation splits: generators of training data (the train
        split, the SFT stream of the base models) must avoid them."""
        return frozenset(
            p.question for split in ("test", "validation") for p in self.problems(split)
        )

    def _level(self, rng: random.Random) -> int:
        return _level_of(rng, self.levels, self.hard_min_level, self.hard_fraction)

    def _draw_unique(self, rng: random.Random, n: int, seen: set[str]) -> list[Problem]:
        """Up to ``n`` problems with distinct questions not in ``seen`` (which gains them),
        giving up after ``50 * n`` draws (a small world may hold fewer)."""
        out: list[Problem] = []
        for _ in range(n * 50):
            if len(out) == n:
                break
            p = self.sample(rng, self._level(rng))
            if p.question not in seen:
                seen.add(p.question)
                out.append(p)
        return out

    def _load(self) -> dict[str, list[Problem]]:
        """Every split, generated once, deterministic in ``seed`` (``Task.problems`` reads it).

        Separate seed streams, drawn in this order: test (unique questions), validation (unique,
        none of test's), train (any question but a test or validation one; train problems may
        repeat each other). So changing ``n_train`` or ``n_validation`` never changes the test
        set, and changing ``n_train`` never changes the validation set."""
        if self._splits is None:
            seen: set[str] = set()
            test = self._draw_unique(
                random.Random(f"{self.name}-test-{self.seed}"), self.n_test, seen
            )
            validation = self._draw_unique(
                random.Random(f"{self.name}-validation-{self.seed}"), self.n_validation, seen
            )
            train_rng = random.Random(f"{self.name}-train-{self.seed}")
            train, tries = [], 0
            while len(train) < self.n_train:
                tries += 1
                if tries > 50 * self.n_train + 1000:
                    raise RuntimeError(
                        f"{self.name}: cannot draw {self.n_train} train problems disjoint from "
                        "the test and validation sets; lower n_train or raise levels"
                    )
                p = self.sample(train_rng, self._level(train_rng))
                if p.question not in seen:  # never a test or validation question
                    train.append(p)
            self._splits = build_splits(
                train, validation, test, lambda p: p.difficulty >= self.hard_min_level
            )
        return self._splits


class ArithTask(ToySplits, MathTask):
    """Multi-step arithmetic mod 7 with chain-of-thought solutions and a boxed answer."""

    name = "arith"
    SOLVE, READ, RIVAL = ARITH_SOLVE, ARITH_READ, ARITH_RIVAL
    version = "2"  # 2: a validation split, which the train split now excludes too
    PARAMS: ClassVar[dict[str, Param]] = {
        **ToySplits.PARAMS,
        **MathTask.PARAMS,
        "answer": Param(
            "string",
            "final",
            "the boxed answer: final (the last result; chance 1 in 7) or trace (every step's "
            "result in order, graded exactly; chance at most 1 in 7^levels' hard steps)",
            choices=ANSWERS,
        ),
    }

    def __init__(
        self,
        n_train: int = 5000,
        n_test: int = 600,
        levels: int = 6,
        hard_min_level: int = 5,
        seed: int = 0,
        hard_fraction: float | None = None,
        grading_timeout_s: float = 5.0,
        grading_workers: int = 0,
        n_validation: int = 300,
        answer: str = "final",
    ):
        """Parameters: :attr:`PARAMS`."""
        if answer not in ANSWERS:
            raise ValueError(f"arith answer must be one of {ANSWERS}, got {answer!r}")
        self.answer = answer
        MathTask.__init__(self, grading_timeout_s, grading_workers)
        ToySplits.__init__(
            self, n_train, n_test, levels, hard_min_level, seed, hard_fraction, n_validation
        )

    def sample(self, rng: random.Random, level: int) -> Problem:
        """A chain of ``level`` operations from a random start value."""
        start = rng.randrange(MOD)
        ops = [(rng.choice(OPS), rng.choice(OPERANDS)) for _ in range(level)]
        question = chain_text(ops, str(start))
        meta = {"start": start, "ops": ops}
        if self.answer != "final":  # what a final-answer world's problems were, unchanged
            meta["answer"] = self.answer
        return Problem(
            id=f"arith-{question}",
            question=question,
            answer=arith_answer(gold_arith_steps(start, ops), self.answer),
            difficulty=float(level),
            meta=meta,
        )

    @staticmethod
    def solution(problem: Problem) -> str:
        """The gold chain-of-thought solution."""
        steps = gold_arith_steps(problem.meta["start"], problem.meta["ops"])
        return arith_solution(steps, answer=answer_of(problem))

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """``final``: math-verify (:class:`MathTask`); ``trace``: the boxed answer must be the
        gold string exactly (a leading 0 is a step's result, not a number's padding)."""
        if self.answer == "final":
            return MathTask.grade(self, problems, completions)
        out = []
        for p, c in zip(problems, completions, strict=True):
            got = extract_answer(c)
            if got is None:
                out.append(Verdict(False, "no_answer"))
            else:
                out.append(Verdict(got == p.answer, "graded", got[:200]))
        return out

    def error_style(self, problem: Problem, completion: str) -> str | None:
        """The style of the first departure from the gold chain (:func:`first_error_style`),
        also when every step is right but the final answer is not the last result."""
        steps = parse_arith_steps(completion)
        marked = is_marked(completion)
        style = first_error_style(problem.meta["start"], problem.meta["ops"], steps, marked)
        if style is None and not completion.rstrip().endswith(f"\\boxed{{{problem.answer}}}"):
            return "visible" if marked else "other"
        return style

    def wrong_draft(self, problem: Problem, seed: int, style: str | None = None) -> str:
        """The gold solution with one step wrong (:func:`wrong_arith_steps`), ``hidden`` by
        default (unmarked: the error a reader that copies aligned steps is misled by)."""
        rng = random.Random(f"wrong-draft-{problem.id}-{seed}")
        steps = wrong_arith_steps(problem.meta["start"], problem.meta["ops"], rng)
        return arith_solution(steps, marked=style == "visible", answer=answer_of(problem))
