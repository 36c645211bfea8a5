# long: one class, the code task every data set inherits: its declared params, splits, grading
"""The common code task: prompts, splits, limits, special judges and grading in the sandbox.

A completion is graded by its last fenced python block
(:func:`~agon.tasks.code.extract.extract_code`): every hidden test must pass in
:mod:`agon.sandbox` (``docs/method.md``, code tasks). Each data set grades as its official
grader does (:mod:`agon.tasks.code.judges`): the grader's prelude before the program, its
comparison of outputs (``strict``: exact whitespace tokens instead), function-call tests through
a harness that applies its comparison of return values (:mod:`agon.tasks.code.calls`), and the
problem's own time and memory limits where the data states them
(:mod:`agon.tasks.code.limits`). A problem's ``answer`` is its test spec as JSON; ``meta`` holds
the same spec parsed. Solutions run with the standard library only (see :mod:`agon.sandbox`).

Problems whose answers need a checker (``meta["special_judge"]``: TACO's list, CodeContests
statements that accept any valid answer) are left out of every split by default and counted
(:meth:`CodeTask.special_judge_summary`); ``special_judge: exact`` keeps them and says in each
verdict that exact match was used, ``checker`` keeps those whose kind determines a checker.

The data sets differ only in how rows become problems, so a subclass supplies
``problem_from_row`` and where its rows come from, and inherits the rest. Unless the source
has a validation split of its own, validation is carved from the source's train split (seeded),
so the test split is the source's own.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from typing import Any, ClassVar

from agon.grading.verdict import Verdict
from agon.sandbox import SandboxPool, check_program
from agon.tasks.base import Param, Problem, Task, build_splits, content_sha256
from agon.tasks.code.calls import call_harness
from agon.tasks.code.extract import extract_code
from agon.tasks.code.grading import Run, finish
from agon.tasks.code.judges import Compare, Judge
from agon.tasks.code.judges.checkers import CHECKERS
from agon.tasks.code.limits import INTERPRETER_MB, cap_tests
from agon.tasks.code.prompts import CodePrompts

SPECIAL_JUDGE_MODES = ("exclude", "exact", "checker")
"""``special_judge``: what a code task does with problems that need a checker."""


class CodeTask(CodePrompts, Task):
    """A code task: problems with tests, graded in a lazily started :class:`SandboxPool`."""

    kind = "code"
    hub_id = ""
    judge: Judge | None = None  # the official grader's semantics (None: exact tokens)
    hard_min_difficulty: float | None = None
    # the sizes the source publishes for its "test" and "validation" splits (before problems
    # without tests or with special judges are left out): upper bounds of what a task keeps
    PUBLISHED_SIZES: ClassVar[dict[str, int]] = {}
    PARAMS: ClassVar[dict[str, Param]] = {
        "source": Param("string", None, "hub id (null: the task's own)"),
        "data_files": Param(
            "object", None, "local files instead, {split: path} in the source's schema"
        ),
        "revision": Param("string", None, "the hub revision (null: the latest)"),
        "hard_min_difficulty": Param(
            "number", None, "hard = difficulty >= this (null: the task's default)"
        ),
        "max_train": Param("integer", None, "cap on train problems (null: all)"),
        "max_test": Param("integer", None, "cap on test problems (null: all)"),
        "max_tests": Param(
            "integer",
            None,
            "cap on tests per problem: public first, then a seeded sample (null: all; every "
            "test kept must pass)",
        ),
        "grading_timeout_s": Param(
            "number",
            5.0,
            "time limit per test where the data state none (config: grading.timeout_s)",
        ),
        "grading_workers": Param(
            "integer", 0, "concurrent runs, 0: one per core (config: grading.workers)"
        ),
        "memory_mb": Param("integer", 512, "memory limit per test where the data state none"),
        "site_packages": Param(
            "boolean", False, "solutions may import installed packages (default: stdlib only)"
        ),
        "validation_size": Param(
            "integer",
            0,
            "problems carved from the source's train split (before max_train) into validation; "
            "0: 10% of it, at most 500",
        ),
        "seed": Param("integer", 0, "which problems are carved, and which tests max_tests keeps"),
        "strict": Param(
            "boolean",
            False,
            "compare stdin outputs as exact whitespace tokens instead of the official grader's "
            "rule (function-call results keep the grader's rule: equality of values)",
        ),
        "time_limit_factor": Param(
            "number",
            2.0,
            "multiplies the data's own time limits (the judges' are CPU time on their machines, "
            "ours wall clock on a machine grading many programs at once)",
        ),
        "memory_limit_factor": Param(
            "number", 1.0, "multiplies the data's own memory limits (plus INTERPRETER_MB)"
        ),
        "special_judge": Param(
            "string",
            "exclude",
            "what to do with problems that need a checker (the module docstring)",
            choices=SPECIAL_JUDGE_MODES,
        ),
    }

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
        strict: bool = False,
        time_limit_factor: float = 2.0,
        memory_limit_factor: float = 1.0,
        special_judge: str = "exclude",
    ) -> None:
        """Parameters: :attr:`PARAMS`. Limits: the data's own where they state them, times the
        factors (:mod:`agon.tasks.code.limits`), else ``grading_timeout_s`` / ``memory_mb``."""
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
        self.strict = bool(strict)
        if time_limit_factor <= 0 or memory_limit_factor <= 0:
            raise ValueError(f"{self.name}: limit factors must be > 0")
        self.time_limit_factor = float(time_limit_factor)
        self.memory_limit_factor = float(memory_limit_factor)
        if special_judge not in SPECIAL_JUDGE_MODES:
            raise ValueError(
                f"{self.name}: special_judge must be one of {SPECIAL_JUDGE_MODES}, "
                f"got {special_judge!r}"
            )
        self.special_judge = special_judge
        self._special: dict[str, dict[str, int]] = {}
        self._splits: dict[str, list[Problem]] | None = None
        self._pool = None

    @classmethod
    def expected_split_sizes(cls, params: dict[str, Any]) -> dict[str, int | None]:
        """``test``: the source's published size (:attr:`PUBLISHED_SIZES`), ``max_test`` caps
        it (unknown without either); ``validation``: ``validation_size`` where it is > 0, else
        the source's own validation split's published size, else unknown (a share of train);
        ``hard``: unknown (a threshold on the data's difficulty)."""
        test = cls.PUBLISHED_SIZES.get("test")
        cap = params.get("max_test")
        if cap is not None:
            test = cap if test is None else min(cap, test)
        validation = params.get("validation_size") or cls.PUBLISHED_SIZES.get("validation")
        return {"test": test, "validation": validation, "hard": None}

    # --- loading -------------------------------------------------------------------------

    def problem_from_row(self, row: dict, split: str, index: int) -> Problem | None:
        """The problem of one source row (``index``: its position in the source split), or
        None when it has no tests. The one conversion, shared by loading and ``agon grade``."""
        raise NotImplementedError

    def _rows(self, split: str) -> list[dict]:
        """The rows of a source split."""
        raise NotImplementedError

    def problems_from_rows(self, rows: Sequence[dict], split: str) -> list[Problem | None]:
        """:meth:`problem_from_row` of each row, in order (None for a row without tests)."""
        return [self.problem_from_row(row, split, i) for i, row in enumerate(rows)]

    def _problems_of(self, split: str) -> list[Problem]:
        """The gradable problems of a source split, special judges handled (and counted)."""
        problems = [p for p in self.problems_from_rows(self._rows(split), split) if p]
        flagged = [p for p in problems if p.meta.get("special_judge")]
        kept = [p for p in problems if self._admits(p)]
        self._special[split] = {"flagged": len(flagged), "excluded": len(problems) - len(kept)}
        return kept

    def _admits(self, problem: Problem) -> bool:
        """Whether a problem stays in its split under ``special_judge``."""
        flagged = problem.meta.get("special_judge")
        return not flagged or self.special_judge == "exact" or self._checker(problem) is not None

    def _checker(self, problem: Problem) -> Compare | None:
        """The checker a special-judge problem is graded by under ``special_judge: checker``
        (stdin problems of a kind that determines one), else None."""
        meta = problem.meta
        if self.special_judge != "checker" or not meta.get("special_judge"):
            return None
        return CHECKERS.get(meta.get("special_judge_kind")) if meta["mode"] == "stdin" else None

    def _source_splits(self) -> tuple[list[Problem], list[Problem] | None, list[Problem]]:
        """(train, validation or None to carve it from train, test) from the source."""
        return self._problems_of("train"), None, self._problems_of("test")

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is None:
            train, validation, test = self._source_splits()
            if validation is None:
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

    def special_judge_summary(self) -> dict:
        """What happened to problems that need a checker: the mode, and per source split how
        many were flagged and how many left out (what an evaluation summary reports)."""
        self._load()
        return {
            "mode": self.special_judge,
            "flagged": {k: v["flagged"] for k, v in self._special.items()},
            "excluded": {k: v["excluded"] for k, v in self._special.items()},
        }

    def evaluation_notes(self) -> dict:
        """The special-judge summary: how many problems were flagged and left out."""
        return {"special_judge": self.special_judge_summary()}

    def _manifest_extra(self) -> dict:
        splits = self._load()
        return {
            "source": self.source,
            "data_files": self.data_files,
            "revision": self.revision,
            "hard_min_difficulty": self.hard_min_difficulty,
            "validation_size": len(splits["validation"]),
            "seed": self.seed,
            "judge": self.judge.name if self.judge else None,
            "strict": self.strict,
            "max_tests": self.max_tests,
            "time_limit_factor": self.time_limit_factor,
            "memory_limit_factor": self.memory_limit_factor,
            "special_judge": self.special_judge_summary(),
            # the problems' text and tests, not only their ids
            "problems_sha256": content_sha256(
                {k: splits[k] for k in ("train", "validation", "test")}
            ),
        }

    def _cap(self, pid: str, *groups: Sequence) -> list:
        """The tests a problem keeps under ``max_tests`` (groups in priority order)."""
        return cap_tests(groups, self.max_tests, f"{self.name}-tests-{self.seed}-{pid}")

    # --- grading -------------------------------------------------------------------------

    def worked_solution(self, problem: Problem) -> str | None:
        """The data's reference program (CodeContests' first Python 3 solution, TACO's first,
        HumanEval's canonical body under its prompt) as the fenced block a solve prompt asks
        for; None where the data has none. GAR anchors on it."""
        solution = problem.meta.get("solution")
        if not solution:
            return None
        if problem.meta.get("mode") == "check" and problem.meta.get("prompt"):
            solution = problem.meta["prompt"] + solution  # a body completes its signature
        return f"```python\n{solution.rstrip()}\n```"

    def limits(self, problem: Problem) -> tuple[float, int]:
        """(seconds, MiB) per test: the data's limits times the factors (memory plus the
        interpreter's share), else ``grading_timeout_s`` / ``memory_mb``."""
        seconds = problem.meta.get("time_limit_s")
        mib = problem.meta.get("memory_limit_mb")
        return (
            seconds * self.time_limit_factor if seconds else self.grading_timeout_s,
            math.ceil(mib * self.memory_limit_factor) + INTERPRETER_MB if mib else self.memory_mb,
        )

    def _compare(self, problem: Problem) -> tuple[Compare | None, str | None]:
        """The stdin comparison for ``problem``, and the note its verdict carries when it is
        a special-judge problem (which judge graded it)."""
        kind = problem.meta.get("special_judge_kind")
        checker = self._checker(problem)
        if checker is not None:
            return checker, f"special judge ({kind}): graded by its checker"
        note = None
        if problem.meta.get("special_judge"):
            note = f"special judge ({kind}): graded by exact match, not a checker"
        if self.strict or self.judge is None:
            return None, note
        return self.judge.stdin_match, note

    def grading_run(self, problem: Problem, code: str) -> Run:
        """What the sandbox runs for the extracted ``code`` on ``problem``."""
        meta = problem.meta
        mode = meta["mode"]
        timeout_s, memory_mb = self.limits(problem)
        if mode == "check":
            program, tests = check_program(code, meta["check"], meta["entry_point"])
            return Run(program, tests, timeout_s, memory_mb, mode=mode)
        source = self.judge.prelude(code, mode) if self.judge else code
        compare, note = self._compare(problem)
        if mode == "call":
            calls = meta["calls"]
            program, tests = call_harness(source, meta["fn_name"], calls, self.judge.call_check)
            # the official runners give each call the per-test limit; here they share one run
            return Run(
                program,
                tests,
                timeout_s * len(calls),
                memory_mb,
                n_tests=len(calls),
                mode=mode,
                note=note,
            )
        if mode != "stdin":
            raise ValueError(f"problem {problem.id}: unknown test mode {mode!r}")
        files = (meta.get("input_file"), meta.get("output_file"))
        return Run(
            source,
            [tuple(t) for t in meta["tests"]],
            timeout_s,
            memory_mb,
            compare,
            files if any(files) else None,
            note=note,
        )

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """All tests must pass; no python block is ``no_code`` (wrong), never an exception."""
        if len(problems) != len(completions):
            raise ValueError(f"{len(problems)} problems for {len(completions)} completions")
        codes = [extract_code(str(c)) for c in completions]
        runs = [
            None if code is None else self.grading_run(p, self.solution_source(p, code))
            for p, code in zip(problems, codes)
        ]
        verdicts = self._retry(runs, self._run(runs))
        return [finish(v, r, c) for v, r, c in zip(verdicts, runs, codes)]

    def grade_rows(
        self, rows: Sequence[dict], completions: Sequence[str], split: str = "test"
    ) -> list[tuple[str | None, Verdict]]:
        """(problem id, verdict) for source rows (in the source's schema, ``split`` and their
        order as in the source) and a completion each: the loader's conversion, then
        :meth:`grade`, so a row is graded as evaluation grades it. A row without tests is a
        ``sandbox_error`` (nothing to grade against)."""
        problems = self.problems_from_rows(rows, split)
        gradable = [i for i, p in enumerate(problems) if p is not None]
        verdicts = self.grade([problems[i] for i in gradable], [completions[i] for i in gradable])
        out: list[tuple[str | None, Verdict]] = [
            (None, Verdict(None, "sandbox_error", detail="the row has no tests"))
        ] * len(rows)
        for i, v in zip(gradable, verdicts):
            out[i] = (problems[i].id, v)
        return out

    def _run(self, runs: Sequence[Run | None]) -> list[Verdict]:

        if self._pool is None:
            self._pool = SandboxPool(self.grading_workers, site_packages=self.site_packages)
        return self._pool.grade(
            [r.program if r else None for r in runs],
            [r.tests if r else [] for r in runs],
            [r.timeout_s if r else self.grading_timeout_s for r in runs],
            [r.memory_mb if r else self.memory_mb for r in runs],
            compare=[r.compare if r else None for r in runs],
            io=[r.io if r else None for r in runs],
        )

    def _retry(self, runs: Sequence[Run | None], verdicts: list[Verdict]) -> list[Verdict]:
        """Verdicts after any second run the official grader makes (TACO's file fallback)."""
        return verdicts

    def solution_source(self, problem: Problem, code: str) -> str:
        """The code that is run for an extracted block (HumanEval prepends its prompt)."""
        return code

    def close(self) -> None:
        """Stop the sandbox pool, if one was started; safe to call twice."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


SPEC_KEYS = (
    "mode",
    "tests",
    "fn_name",
    "calls",
    "check",
    "entry_point",
    "time_limit_s",
    "memory_limit_mb",
    "input_file",
    "output_file",
    "special_judge",
    "special_judge_kind",
)
"""The meta keys that decide a problem's grade: its ``answer`` (and content hash) holds them."""


def _problem(pid: str, question: str, difficulty: float | None, meta: dict) -> Problem:
    spec = {k: meta[k] for k in SPEC_KEYS if meta.get(k) not in (None, "", False)}
    return Problem(pid, question, json.dumps(spec), difficulty, meta)
