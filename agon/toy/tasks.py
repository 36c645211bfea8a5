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
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from agon.tasks.base import MathTask, Messages, Param, Problem, build_splits

MOD = 7  # the modulus; mod 13 stayed at chance for the 0.3M model (docs/method.md)
OPS = ("+", "-", "*")
OPERANDS = tuple(range(1, MOD))  # 0 is left out: `x*0` would erase the whole chain before it

# Reader prompts mark the draft as a rival's, possibly wrong (docs/method.md, the duel, step 1),
# in as few tokens as the tiny model can afford; the tokenizer merges these words into one or
# two tokens. The proposals prompt (a Mixture-of-Agents aggregator's) numbers several drafts.
ARITH_SOLVE = "solve: {question}"
ARITH_READ = "solve: {question}\nrival (may be wrong): {draft}"
ARITH_RIVAL = "\nrival {i} (may be wrong): {draft}"
CODE_SOLVE = "code: {question}"
CODE_READ = "code: {question}\nrival (may be wrong):\n{draft}"
CODE_RIVAL = "\nrival {i} (may be wrong):\n{draft}"


def apply_op(a: int, op: str, b: int) -> int:
    """``a op b`` reduced mod 7."""
    if op == "+":
        return (a + b) % MOD
    if op == "-":
        return (a - b) % MOD
    if op == "*":
        return (a * b) % MOD
    raise ValueError(f"unknown operation {op!r}; expected one of {OPS}")


def misread(k: int) -> int:
    """The operand a model with a characteristic mistake reads instead of ``k`` (always another
    operand; :class:`agon.toy.sft_data.Mistake`)."""
    return k % len(OPERANDS) + 1


def chain_text(steps: Sequence[tuple[str, int]], head: str) -> str:
    """``head`` followed by the operations: ``4*3+2`` for head ``4``, ``x*3+2`` for head ``x``."""
    return head + "".join(f"{op}{k}" for op, k in steps)


def parse_chain(text: str) -> tuple[str, list[tuple[str, int]]]:
    """Inverse of :func:`chain_text`: the head and the operations of ``4*3+2``."""
    m = re.fullmatch(r"(x|\d)((?:[-+*]\d)+)", text)
    if not m:
        raise ValueError(f"not an operation chain: {text!r}")
    return m.group(1), [(op, int(k)) for op, k in re.findall(r"([-+*])(\d)", m.group(2))]


# ---------------------------------------------------------------------------------------
# arith


@dataclass(frozen=True)
class ArithStep:
    """One written step ``lhs op rhs = result`` of a solution (``result`` may be wrong)."""

    lhs: int
    op: str
    rhs: int
    result: int

    @property
    def correct(self) -> bool:
        return apply_op(self.lhs, self.op, self.rhs) == self.result

    def text(self) -> str:
        return f"{self.lhs}{self.op}{self.rhs}={self.result}"


MARK = "~"  # opens a solution written in the visible style (the positive control's world)


def arith_solution(steps: Sequence[ArithStep], marked: bool = False) -> str:
    """The chain-of-thought text of a solution: ``4*3=5 5+2=0 \\boxed{0}``; ``marked``: opened
    with :data:`MARK` (``~ 4*3=5 ...``), the writer's sign that its work is unchecked, which a
    reader takes as a reason to recompute it (:func:`agon.toy.sft_data.written_arith_steps`)."""
    final = steps[-1].result if steps else 0
    text = " ".join(s.text() for s in steps) + f" \\boxed{{{final}}}"
    return f"{MARK} {text}" if marked else text


def is_marked(text: str) -> bool:
    """Whether a completion opens with :data:`MARK` (the visible style)."""
    return text.lstrip().startswith(MARK)


def parse_arith_steps(text: str) -> list[ArithStep]:
    """The ``a op b = c`` steps written in a completion (for per-operation error rates)."""
    return [
        ArithStep(int(a), op, int(b), int(c))
        for a, op, b, c in re.findall(r"(\d+)([-+*])(\d+)=(\d+)", text)
    ]


def first_error_style(
    start: int, ops: Sequence[tuple[str, int]], written: Sequence[ArithStep], marked: bool = False
) -> str | None:
    """How a written chain first departs from the gold one. The style is the mark
    (:data:`MARK`): ``visible`` for any departure in a marked solution; in an unmarked one,
    ``hidden`` when the first departing step has the question's inputs and a wrong result
    (only recomputing finds it) and ``other`` for any other departure (an operand not the
    question's, a step missing or out of order, a wrong final answer after right steps).
    None when every step is right."""
    value = start
    for i, (op, k) in enumerate(ops):
        if i >= len(written):
            break
        step = written[i]
        if step.lhs != value or step.op != op or step.rhs != k:
            break
        if step.result != apply_op(value, op, k):
            return "visible" if marked else "hidden"
        value = step.result
    else:
        return None
    return "visible" if marked else "other"


def wrong_arith_steps(
    start: int, ops: Sequence[tuple[str, int]], rng: random.Random
) -> list[ArithStep]:
    """The gold chain with one step written wrong, continued from its value: the right operand
    and the misread one's result. The step is one where the misread changes the result (not
    ``0*k``); a chain with none (every step multiplies 0) gets a result of one more. The final
    answer is then wrong too: ``+ -`` keep a difference mod 7 and ``*`` by 1..6 cannot erase
    one (7 is prime)."""
    gold = gold_arith_steps(start, ops)
    wrong = [
        i
        for i, (step, (op, k)) in enumerate(zip(gold, ops))
        if apply_op(step.lhs, op, misread(k)) != step.result
    ]
    i = rng.choice(wrong) if wrong else rng.randrange(len(ops))
    out, value = [], start
    for j, (op, k) in enumerate(ops):
        right = apply_op(value, op, k)
        if j != i:
            out.append(ArithStep(value, op, k, right))
        elif not wrong:
            out.append(ArithStep(value, op, k, (right + 1) % MOD))
        else:
            out.append(ArithStep(value, op, k, apply_op(value, op, misread(k))))
        value = out[-1].result
    return out


def gold_arith_steps(start: int, ops: Sequence[tuple[str, int]]) -> list[ArithStep]:
    """The correct steps of a chain."""
    out, value = [], start
    for op, k in ops:
        result = apply_op(value, op, k)
        out.append(ArithStep(value, op, k, result))
        value = result
    return out


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
    PARAMS: ClassVar[dict[str, Param]] = {**ToySplits.PARAMS, **MathTask.PARAMS}

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
    ):
        """Parameters: :attr:`PARAMS`."""
        MathTask.__init__(self, grading_timeout_s, grading_workers)
        ToySplits.__init__(
            self, n_train, n_test, levels, hard_min_level, seed, hard_fraction, n_validation
        )

    def sample(self, rng: random.Random, level: int) -> Problem:
        """A chain of ``level`` operations from a random start value."""
        start = rng.randrange(MOD)
        ops = [(rng.choice(OPS), rng.choice(OPERANDS)) for _ in range(level)]
        question = chain_text(ops, str(start))
        answer = gold_arith_steps(start, ops)[-1].result
        return Problem(
            id=f"arith-{question}",
            question=question,
            answer=str(answer),
            difficulty=float(level),
            meta={"start": start, "ops": ops},
        )

    @staticmethod
    def solution(problem: Problem) -> str:
        """The gold chain-of-thought solution."""
        return arith_solution(gold_arith_steps(problem.meta["start"], problem.meta["ops"]))

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
        return arith_solution(steps, marked=style == "visible")
