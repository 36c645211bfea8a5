"""The common code task: prompts, splits and grading in the sandbox, shared by every data set.

A completion is graded by its last fenced python block
(:func:`~agon.tasks.code.extract.extract_code`): all hidden tests must pass in
:mod:`agon.sandbox` (``docs/method.md``). Stdin/stdout tests compare whitespace-separated
tokens; function-call tests (HumanEval ``check``, LiveCodeBench ``functional``, TACO
``fn_name``) run through a harness program in the same sandbox, one run per problem
(:mod:`agon.sandbox.harness`). A problem's ``answer`` is its test spec as JSON; ``meta`` holds
the same spec parsed. Solutions run with the standard library only (see
:mod:`agon.sandbox`).

The data sets differ only in how rows become problems, so a subclass supplies
``_problems_of`` (or ``_train_test``) and inherits the rest. The validation split is carved
from the source's train split (seeded), so the test split is the source's own.

Departures from the sources' own judges, on purpose: per-problem time and memory limits in
the data (CodeContests ``time_limit``, TACO ``time_limit``) are not used; every run gets the
task's ``grading_timeout_s`` / ``memory_mb`` (Python is judged the same everywhere). No
special checkers (problems with several right answers may be graded wrong).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Sequence

from agon.grading.verdict import Verdict
from agon.tasks.base import Messages, Problem, Task, build_splits, numbered_attempts
from agon.tasks.code.extract import extract_code

CODE_SOLVE_STDIN = (
    "{question}\n\n"
    "Write a Python 3 program that reads the input from standard input and prints the answer "
    "to standard output. Put the complete program in one ```python code block at the end."
)
CODE_SOLVE_FUNCTION = (
    "{question}\n\n"
    "Complete this Python 3 code. Put the complete code in one ```python code block at the end."
    "\n\n```python\n{starter}\n```"
)
CODE_READER = (
    "{prompt}\n\n"
    "Below is a rival's attempt at this problem. It may be wrong. Check it critically, then "
    "solve the problem yourself and put your complete program in one ```python code block at "
    "the end.\n\n<rival_attempt>\n{draft}\n</rival_attempt>"
)
CODE_PROPOSALS = (
    "{prompt}\n\n"
    "Below are {n} attempts at this problem by rivals. Any of them may be wrong, and they may "
    "disagree. Check each critically, keep what is right, then solve the problem yourself and "
    "put your complete program in one ```python code block at the end.\n\n{attempts}"
)


class CodeTask(Task):
    """A code task: problems with tests, graded in a lazily started :class:`SandboxPool`."""

    kind = "code"
    hub_id = ""

    def __init__(
        self,
        source: str | None = None,
        data_files: dict[str, str] | None = None,
        revision: str | None = None,
        hard_min_difficulty: float | None = None,
        max_train: int | None = None,
        max_test: int | None = None,
        max_tests: int | None = None,
        grading_timeout_s: float = 5.0,
        grading_workers: int = 0,
        memory_mb: int = 512,
        site_packages: bool = False,
        validation_size: int = 0,
        seed: int = 0,
    ) -> None:
        """``source``: hub id (default: the task's). ``data_files``: local override,
        ``{"train": path, "test": path}`` in the source's schema. ``hard_min_difficulty``:
        hard = difficulty >= this (None: the task's default). ``max_train`` / ``max_test``:
        caps on problems (None: all). ``max_tests``: cap on tests per problem, in source order
        (None: all; every test must pass). ``grading_timeout_s`` / ``memory_mb``: limits per
        sandboxed run. ``grading_workers``: concurrent runs (0: one per core).
        ``site_packages``: solutions may import installed packages (default: stdlib only).
        ``validation_size``: problems carved from the source's train split (before
        ``max_train`` caps what is left) into the validation split; 0 means 10% of it, at most
        500 (so a source with fewer than 10 train problems has an empty validation split).
        ``seed``: which problems are carved (a seeded draw)."""
        self.source = source or self.hub_id
        self.data_files = dict(data_files) if data_files else None
        self.revision = revision
        if hard_min_difficulty is not None:
            self.hard_min_difficulty = float(hard_min_difficulty)
        self.max_train, self.max_test, self.max_tests = max_train, max_test, max_tests
        self.grading_timeout_s, self.grading_workers, self.memory_mb = (
            float(grading_timeout_s),
            int(grading_workers),
            int(memory_mb),
        )
        self.site_packages = bool(site_packages)
        if validation_size < 0:
            raise ValueError(f"{self.name}: validation_size must be >= 0, got {validation_size}")
        self.validation_size, self.seed = int(validation_size), int(seed)
        self._splits: dict[str, list[Problem]] | None = None
        self._pool = None

    hard_min_difficulty: float | None = None

    # subclasses: rows of a source split -> problems
    def _problems_of(self, split: str) -> list[Problem]:
        raise NotImplementedError

    def _train_test(self) -> tuple[list[Problem], list[Problem]]:
        return self._problems_of("train"), self._problems_of("test")

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is None:
            train, test = self._train_test()
            train, validation = self._carve_validation(train, test)
            if self.max_train is not None:
                train = train[: self.max_train]
            if self.max_test is not None:
                test = test[: self.max_test]

            def is_hard(p: Problem) -> bool:
                if self.hard_min_difficulty is None:
                    return True
                return p.difficulty is not None and p.difficulty >= self.hard_min_difficulty

            self._splits = build_splits(train, validation, test, is_hard)
        return self._splits

    def _carve_validation(
        self, train: list[Problem], test: list[Problem]
    ) -> tuple[list[Problem], list[Problem]]:
        """(train, validation): ``validation_size`` problems (0: 10% of train, at most 500)
        drawn from train with a seeded draw, by id, never one whose id is in test (a source
        may list a problem in both; which then stays in train, as the source has it)."""
        test_ids = {p.id for p in test}
        candidates = list(dict.fromkeys(p.id for p in train if p.id not in test_ids))
        n_val = self.validation_size or min(500, len(train) // 10, len(candidates))
        if n_val > len(candidates):
            raise ValueError(
                f"{self.name}: validation_size={n_val} exceeds the {len(candidates)} train "
                "problems that are not in test"
            )
        rng = random.Random(f"{self.name}-validation-{self.seed}")
        carved = set(rng.sample(candidates, n_val))
        validation, seen = [], set()
        for p in train:
            if p.id in carved and p.id not in seen:
                seen.add(p.id)
                validation.append(p)
        return [p for p in train if p.id not in carved], validation

    def _manifest_extra(self) -> dict:
        content = hashlib.sha256()  # the problems' text and tests, not only their ids
        splits = self._load()
        for p in splits["train"] + splits["validation"] + splits["test"]:
            content.update(f"{p.id}\x00{p.question}\x00{p.answer}\x01".encode())
        return {
            "source": self.source,
            "data_files": self.data_files,
            "revision": self.revision,
            "hard_min_difficulty": self.hard_min_difficulty,
            "validation_size": len(splits["validation"]),
            "seed": self.seed,
            "problems_sha256": content.hexdigest(),
        }

    def _cap(self, tests: list) -> list:
        return tests if self.max_tests is None else tests[: self.max_tests]

    # --- prompts -------------------------------------------------------------------------

    def solve_prompt(self, problem: Problem) -> Messages:
        """Solve: stdin/stdout program, or complete the starter code for call-style problems."""
        starter = problem.meta.get("starter_code") or ""
        if problem.meta.get("mode") == "stdin" or not starter.strip():
            content = CODE_SOLVE_STDIN.format(question=problem.question)
        else:
            content = CODE_SOLVE_FUNCTION.format(
                question=problem.question, starter=starter.rstrip()
            )
        return [{"role": "user", "content": content}]

    def reader_prompt(self, problem: Problem, draft: str) -> Messages:
        """The solve prompt, then the rival's draft marked as possibly wrong."""
        prompt = self.solve_prompt(problem)[0]["content"]
        return [{"role": "user", "content": CODE_READER.format(prompt=prompt, draft=draft)}]

    def proposals_prompt(self, problem: Problem, proposals: Sequence[str]) -> Messages:
        """The solve prompt, then the rivals' attempts numbered, each possibly wrong (one
        attempt: the reader prompt)."""
        if not proposals:
            raise ValueError("proposals_prompt needs at least one proposal")
        if len(proposals) == 1:
            return self.reader_prompt(problem, proposals[0])
        content = CODE_PROPOSALS.format(
            prompt=self.solve_prompt(problem)[0]["content"],
            n=len(proposals),
            attempts=numbered_attempts(proposals),
        )
        return [{"role": "user", "content": content}]

    # --- grading -------------------------------------------------------------------------

    def program_and_tests(self, problem: Problem, code: str) -> tuple[str, list[tuple[str, str]]]:
        """What the sandbox runs for ``code`` on ``problem``, and its (stdin, stdout) tests."""
        from agon.sandbox import call_program, check_program

        meta = problem.meta
        mode = meta["mode"]
        if mode == "stdin":
            return code, [tuple(t) for t in meta["tests"]]
        if mode == "call":
            return call_program(
                code,
                meta["fn_name"],
                [tuple(c) for c in meta["calls"]],
                unwrap_single=meta.get("unwrap_single", False),
            )
        if mode == "check":
            return check_program(code, meta["check"], meta["entry_point"])
        raise ValueError(f"problem {problem.id}: unknown test mode {mode!r}")

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """All tests must pass; no python block is ``no_code`` (wrong), never an exception."""
        if len(problems) != len(completions):
            raise ValueError(f"{len(problems)} problems for {len(completions)} completions")
        from agon.sandbox import SandboxPool

        if self._pool is None:
            self._pool = SandboxPool(self.grading_workers, site_packages=self.site_packages)
        codes = [extract_code(str(c)) for c in completions]
        programs: list[str | None] = []
        tests: list[list[tuple[str, str]]] = []
        for p, code in zip(problems, codes):
            if code is None:
                programs.append(None)
                tests.append([])
                continue
            prog, ts = self.program_and_tests(p, self.solution_source(p, code))
            programs.append(prog)
            tests.append(ts)
        verdicts = self._pool.grade(programs, tests, self.grading_timeout_s, self.memory_mb)
        return [dataclasses.replace(v, extracted=c) for v, c in zip(verdicts, codes)]

    def solution_source(self, problem: Problem, code: str) -> str:
        """The code that is run for an extracted block (HumanEval prepends its prompt)."""
        return code

    def close(self) -> None:
        """Stop the sandbox pool, if one was started; safe to call twice."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _problem(pid: str, question: str, difficulty: float | None, meta: dict) -> Problem:
    spec = {
        k: meta[k]
        for k in ("mode", "tests", "fn_name", "calls", "check", "entry_point")
        if k in meta
    }
    return Problem(pid, question, json.dumps(spec), difficulty, meta)
