"""The toy world's code task, ``toycode``: a program that maps each input through a chain mod 7.

The prompt ``sum x*3+2-5`` asks for a program that reads a line of integers, maps each ``x``
through the chain (mod 7 after every step), and prints the sum of the results mod 7. The gold
program is one line per operation, answered as a fenced python block, graded on hidden test
inputs in :mod:`agon.sandbox`; copying the prompt or printing a constant does not pass. The
chain, levels and splits are those of :mod:`agon.toy.tasks`.

The task's ``answer`` says what the program prints, as arith's says what it boxes: ``final``
(the sum alone) or ``trace`` (each line also prints its result, `` x=(x*3)%7;print(x)``, then
the sum). A final answer cannot tell apart two programs that compute the same map: in a run of
additions, a ``+`` written one too high and a later ``-`` written one too high cancel, and
every hidden test passes (on the hard levels, three in four of a habit writer's right
programs had a wrong line). A trace checks every line on every input, so a right program is
right line by line.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import ClassVar

from agon.grading.verdict import Verdict
from agon.sandbox import SandboxPool
from agon.tasks.base import Param, Problem, Task
from agon.tasks.code import extract_code
from agon.toy.chain import ANSWERS, MOD, OPERANDS, OPS, answer_of, apply_op, chain_text, misread
from agon.toy.tasks import CODE_READ, CODE_RIVAL, CODE_SOLVE, ToySplits

CODE_HEAD = "s=0\nfor x in map(int,input().split()):\n"
CODE_TAIL = " s=(s+x)%7\nprint(s)"
TRACE = ";print(x)"  # what a trace program's operation line ends with
_CODE_LINE = re.compile(r"^ x=\(x([-+*])(\d+)\)%7(?:;print\(x\))?$")


SUBTRACT_STYLES = ("minus", "complement")  # how a writer writes a subtraction line (code_line)


def code_line(op: str, k: int, subtract: str = "minus", answer: str = "final") -> str:
    """The program line of one operation: `` x=(x*3)%7``. ``subtract``: how a subtraction is
    written, ``minus`` (`` x=(x-4)%7``, the operand copied) or ``complement`` (`` x=(x+3)%7``,
    adding ``7 - k``: a value looked up, as an arith step's result is, not a copied token).
    ``answer``: ``trace`` ends the line with :data:`TRACE`, printing its result."""
    end = TRACE if answer == "trace" else ""
    if op == "-" and subtract == "complement":
        return f" x=(x+{MOD - k})%7{end}"
    return f" x=(x{op}{k})%7{end}"


def same_line(written: tuple[str, int] | None, op: str, k: int) -> bool:
    """Whether a parsed program line (:func:`parse_code_lines`) applies ``op k`` mod 7, in
    either way of writing a subtraction (:func:`code_line`)."""

    def canonical(o: str, n: int) -> tuple[str, int]:
        return ("+", -n % MOD) if o == "-" else (o, n % MOD)

    return written is not None and canonical(*written) == canonical(op, k)


def code_program(lines: Sequence[str]) -> str:
    """A whole answer: the fixed head, one line per operation, the fold, in a python fence."""
    body = CODE_HEAD + "".join(line + "\n" for line in lines) + CODE_TAIL
    return f"```python\n{body}\n```"


def parse_code_lines(program: str) -> list[tuple[str, int] | None]:
    """The operation of each line between the loop head and the fold (None: not an op line),
    whether or not it prints its result (:data:`TRACE`)."""
    out = []
    for line in program.splitlines():
        if line.startswith(" x="):
            m = _CODE_LINE.match(line)
            out.append((m.group(1), int(m.group(2))) if m else None)
    return out


def reference_output(ops: Sequence[tuple[str, int]], stdin: str, answer: str = "final") -> str:
    """What the gold program prints for ``stdin`` (computed here, never by running code):
    ``final``, the sum; ``trace``, every line's result for every input, then the sum."""
    total, printed = 0, []
    for tok in stdin.split():
        x = int(tok)
        for op, k in ops:
            x = apply_op(x, op, k)
            printed.append(str(x))
        total = (total + x) % MOD
    return "\n".join([*printed, str(total)]) if answer == "trace" else str(total)


class ToyCodeTask(ToySplits, Task):
    """Write a Python program that maps each input integer through a chain mod 7 and sums."""

    name = "toycode"
    SOLVE, READ, RIVAL = CODE_SOLVE, CODE_READ, CODE_RIVAL
    kind = "code"
    version = "2"  # 2: a validation split, which the train split now excludes too
    PARAMS: ClassVar[dict[str, Param]] = {
        **ToySplits.PARAMS,
        "answer": Param(
            "string",
            "final",
            "what the program prints: final (the sum; programs that compute the same map pass "
            "alike) or trace (each line's result too, so every line is checked)",
            choices=ANSWERS,
        ),
        "n_tests": Param("integer", 4, "hidden tests per problem"),
        "input_len": Param("array", (3, 6), "(min, max) integers per test input"),
        "input_max": Param("integer", 30, "test inputs are integers 0..this"),
        "grading_timeout_s": Param(
            "number", 5.0, "per-program wall-clock limit (config: grading.timeout_s)"
        ),
        "grading_workers": Param(
            "integer", 0, "sandbox workers, 0: one per core (config: grading.workers)"
        ),
        "memory_mb": Param("integer", 512, "address-space cap of a graded program"),
    }

    def __init__(
        self,
        n_train: int = 5000,
        n_test: int = 600,
        levels: int = 6,
        hard_min_level: int = 5,
        seed: int = 0,
        hard_fraction: float | None = None,
        n_tests: int = 4,
        input_len: tuple[int, int] = (3, 6),
        input_max: int = 30,
        grading_timeout_s: float = 5.0,
        grading_workers: int = 0,
        memory_mb: int = 512,
        n_validation: int = 300,
        answer: str = "final",
    ):
        """Parameters: :attr:`PARAMS` (the split params as :class:`ArithTask`'s)."""
        if answer not in ANSWERS:
            raise ValueError(f"toycode answer must be one of {ANSWERS}, got {answer!r}")
        self.answer = answer
        ToySplits.__init__(
            self, n_train, n_test, levels, hard_min_level, seed, hard_fraction, n_validation
        )
        if n_tests < 1 or not 1 <= input_len[0] <= input_len[1] or input_max < 1:
            raise ValueError(
                f"toycode: bad test settings n_tests={n_tests}, input_len={input_len}, "
                f"input_max={input_max}"
            )
        self.n_tests, self.input_len, self.input_max = (
            int(n_tests),
            tuple(input_len),
            int(input_max),
        )
        self.grading_timeout_s, self.grading_workers, self.memory_mb = (
            float(grading_timeout_s),
            int(grading_workers),
            int(memory_mb),
        )
        self._pool = None

    def sample(self, rng: random.Random, level: int) -> Problem:
        """A chain of ``level`` operations and ``n_tests`` hidden inputs with expected outputs."""
        ops = [(rng.choice(OPS), rng.choice(OPERANDS)) for _ in range(level)]
        question = "sum " + chain_text(ops, "x")
        tests = []
        for _ in range(self.n_tests):
            stdin = (
                " ".join(
                    str(rng.randint(0, self.input_max)) for _ in range(rng.randint(*self.input_len))
                )
                + "\n"
            )
            tests.append((stdin, reference_output(ops, stdin, self.answer)))
        meta = {"ops": ops, "tests": tests}
        if self.answer != "final":  # what a final-answer world's problems were, unchanged
            meta["answer"] = self.answer
        return Problem(
            id=f"toycode-{question[4:]}",
            question=question,
            answer=json.dumps(tests),
            difficulty=float(level),
            meta=meta,
        )

    @staticmethod
    def solution(problem: Problem) -> str:
        """The gold program."""
        answer = answer_of(problem)
        return code_program([code_line(op, k, answer=answer) for op, k in problem.meta["ops"]])

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """All hidden tests must pass in :mod:`agon.sandbox`; no python block is ``no_answer``.

        The program is extracted by :func:`agon.tasks.code.extract_code` (the last fenced
        python block), as for every code task.
        """
        if len(problems) != len(completions):
            raise ValueError(f"{len(problems)} problems for {len(completions)} completions")

        codes = [extract_code(str(c)) for c in completions]
        tests = [[tuple(t) for t in json.loads(p.answer)] for p in problems]
        todo = [i for i, c in enumerate(codes) if c is not None and c.strip()]
        verdicts: list[Verdict] = [
            Verdict(False, "no_answer", None, 0.0, "no fenced python block")
        ] * len(codes)
        if todo:
            if self._pool is None:
                self._pool = SandboxPool(self.grading_workers)
            graded = self._pool.grade(
                [codes[i] for i in todo],
                [tests[i] for i in todo],
                self.grading_timeout_s,
                self.memory_mb,
            )
            for i, v in zip(todo, graded):
                verdicts[i] = v
        return verdicts

    def wrong_draft(self, problem: Problem, seed: int, style: str | None = None) -> str:
        """The gold program with one line's operand misread (a wrong draft a reader can repair
        line by line, or copy)."""
        rng = random.Random(f"wrong-draft-{problem.id}-{seed}")
        ops = list(problem.meta["ops"])
        i = rng.randrange(len(ops))
        ops[i] = (ops[i][0], misread(ops[i][1]))
        return code_program([code_line(op, k, answer=answer_of(problem)) for op, k in ops])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self._pool = None
