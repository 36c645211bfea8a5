"""DeepMath-103K (zwhe99/DeepMath-103K): hard math with verifiable final answers.

Fields: question, final_answer, difficulty, topic, r1_solution_1..3. Loaded through `datasets`
from the hub id, or from a local jsonl / json / parquet file with the same fields (tests and
offline users). Only the columns the task uses are read (parquet, the hub's format, reads no
others at all): the three R1 solutions are most of the data set's bytes and are read only with
``solutions=True``. The hard splits are ``difficulty >= hard_min_difficulty``. The
train/validation/test split is a seeded shuffle of the source: the first ``test_size`` problems
of it are test, the next ``validation_size`` validation, the rest train (so the test split does
not depend on ``validation_size``); :meth:`DeepMathTask.split_manifest` records it with content
hashes so that a run can prove which problems it trained and tested on.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import ClassVar

from agon.tasks.base import MathTask, Param, Problem, build_splits

HUB_ID = "zwhe99/DeepMath-103K"
REQUIRED_FIELDS = ("question", "final_answer", "difficulty")
OPTIONAL_FIELDS = ("topic",)
SOLUTION_FIELDS = ("r1_solution_1", "r1_solution_2", "r1_solution_3")
_LOCAL_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def _problem_id(question: str) -> str:
    return "dm-" + hashlib.sha1(question.encode()).hexdigest()[:12]


def load_rows(source: str, revision: str | None = None, solutions: bool = False) -> list[dict]:
    """Rows of DeepMath-103K from a hub id or a local file, checked for the required fields,
    with the task's columns only (``solutions``: the R1 solutions too)."""
    # lazy: datasets, pyarrow (seconds to import): a task is built, and grades, without its data
    import datasets
    import pyarrow.parquet as pq

    wanted = REQUIRED_FIELDS + OPTIONAL_FIELDS + (SOLUTION_FIELDS if solutions else ())
    path = Path(source)
    if path.suffix in _LOCAL_FORMATS:
        if not path.is_file():
            raise FileNotFoundError(
                f"deepmath source {source!r} looks like a file but does not exist"
            )
        if path.suffix == ".parquet":
            have = pq.read_schema(path).names
            _check(source, have)
            columns = [c for c in wanted if c in have]
            ds = datasets.load_dataset(
                "parquet", data_files=str(path), split="train", columns=columns
            )
        else:  # json has no column pruning: parse, then drop what is not used
            ds = datasets.load_dataset("json", data_files=str(path), split="train")
            _check(source, ds.column_names)
            ds = ds.select_columns([c for c in wanted if c in ds.column_names])
    else:
        try:
            ds = datasets.load_dataset(
                source, split="train", revision=revision, columns=list(wanted)
            )
        except Exception as err:  # noqa: BLE001 - say which columns the source must have
            raise ValueError(
                f"deepmath source {source!r}: could not read columns {list(wanted)} ({err})"
            ) from err
    return ds.to_list()


def _check(source: str, have: list[str]) -> None:
    missing = [f for f in REQUIRED_FIELDS if f not in have]
    if missing:
        raise ValueError(f"deepmath source {source!r} lacks fields {missing}; has {have}")


class DeepMathTask(MathTask):
    """DeepMath-103K with a seeded train/validation/test split and difficulty-threshold hard
    splits."""

    name = "deepmath"
    version = "1"
    PARAMS: ClassVar[dict[str, Param]] = {
        "source": Param("string", HUB_ID, "hub id, or a local jsonl / json / parquet file"),
        "revision": Param("string", None, "the hub revision (null: the latest)"),
        "hard_min_difficulty": Param("number", 8.0, "the hard splits are difficulty >= this"),
        "test_size": Param("integer", 500, "problems held out for test (seeded)"),
        "max_train": Param("integer", None, "cap on training problems (null: all)"),
        "seed": Param("integer", 0, "the split's shuffle seed"),
        **MathTask.PARAMS,
        "validation_size": Param(
            "integer", 500, "problems held out for validation, after test's in the shuffle"
        ),
        "solutions": Param(
            "boolean", False, "read the three R1 solutions too (meta['r1_solutions'])"
        ),
    }
    SIZE_PARAMS: ClassVar[dict[str, str]] = {"test": "test_size", "validation": "validation_size"}

    def __init__(
        self,
        source: str = HUB_ID,
        revision: str | None = None,
        hard_min_difficulty: float = 8.0,
        test_size: int = 500,
        max_train: int | None = None,
        seed: int = 0,
        grading_timeout_s: float = 5.0,
        grading_workers: int = 0,
        validation_size: int = 500,
        solutions: bool = False,
    ):
        """Parameters: :attr:`PARAMS`. The test split is the first ``test_size`` problems of a
        seeded shuffle, validation the next ``validation_size``, train the rest (at most
        ``max_train``); nothing in the suite needs the R1 solutions, hence ``solutions``."""
        super().__init__(grading_timeout_s, grading_workers)
        self.source, self.revision = source, revision
        self.hard_min_difficulty = float(hard_min_difficulty)
        self.test_size, self.max_train, self.seed = int(test_size), max_train, int(seed)
        self.validation_size = int(validation_size)
        if self.validation_size < 0:
            raise ValueError(f"deepmath: validation_size must be >= 0, got {validation_size}")
        self.solutions = bool(solutions)
        self._splits: dict[str, list[Problem]] | None = None
        self._source_hash = ""

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is not None:
            return self._splits
        rows = load_rows(self.source, self.revision, self.solutions)
        digest = hashlib.sha256()
        problems, seen = [], set()
        for row in rows:
            q, a = str(row["question"]).strip(), str(row["final_answer"]).strip()
            digest.update(f"{q}\x00{a}\x00{row['difficulty']}\x01".encode())
            pid = _problem_id(q)
            if pid in seen:  # duplicated questions would leak between train and test
                continue
            seen.add(pid)
            meta = {"topic": row.get("topic")}
            if self.solutions:
                meta["r1_solutions"] = [row.get(f) for f in SOLUTION_FIELDS]
            problems.append(Problem(pid, q, a, float(row["difficulty"]), meta))
        self._source_hash = digest.hexdigest()
        held_out = self.test_size + self.validation_size
        if held_out >= len(problems):
            raise ValueError(
                f"deepmath: test_size={self.test_size} + validation_size={self.validation_size} "
                f"leave no training problems (source has {len(problems)})"
            )
        order = list(range(len(problems)))
        random.Random(self.seed).shuffle(order)
        test = [problems[i] for i in sorted(order[: self.test_size])]
        validation = [problems[i] for i in sorted(order[self.test_size : held_out])]
        train = [problems[i] for i in sorted(order[held_out:])]
        if self.max_train is not None:
            train = train[: self.max_train]
        self._splits = build_splits(
            train, validation, test, lambda p: p.difficulty >= self.hard_min_difficulty
        )
        return self._splits

    def worked_solution(self, problem: Problem) -> str | None:
        """The first non-blank of the problem's R1 solutions (None unless the task reads them:
        ``solutions: true``)."""
        for text in problem.meta.get("r1_solutions") or ():
            if isinstance(text, str) and text.strip():
                return text
        return None

    def _manifest_extra(self) -> dict:
        self._load()  # fills the source hash
        return {
            "source": self.source,
            "revision": self.revision,
            "seed": self.seed,
            "validation_size": self.validation_size,
            "hard_min_difficulty": self.hard_min_difficulty,
            "source_sha256": self._source_hash,
        }
