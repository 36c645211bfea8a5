"""Procedural math from ``reasoning-gym``: any of its generators by name, seeded, graded by us.

reasoning-gym (``pip install agon[real]``) generates problems with reference answers offline
(``basic_arithmetic``: expressions of a few terms; ``gsm_symbolic``: GSM8K-derived templates with
a worked solution per problem; and about a hundred more). This task draws each split from its
own seed, so the splits are disjoint streams, and drops any question already drawn by an earlier
split (test first, then validation, then train), so nothing leaks into training.

**Difficulty.** ``levels`` is a list of generator settings from easy to hard (e.g.
``{min_terms: 2, max_terms: 2, min_digits: 1, max_digits: 1}``); every split draws its share
from each level. A problem's difficulty is, by ``difficulty``:

- ``level``: the index of the level it was drawn at (0 = easiest);
- ``cot_steps``: the number of computation lines (lines with ``=``) of the generator's worked
  solution (``gsm_symbolic``'s ``answer_cot``), for generators with one setting only
  (reasoning-gym 0.1.25 accepts only ``difficulty: 1.0`` for ``gsm_symbolic``).

The hard splits are ``difficulty >= hard_min_difficulty``: with the default levels of
``basic_arithmetic`` (4 levels) that is the two hardest levels (4-6 terms of 2-4 digits), with
``gsm_symbolic`` the problems of 4 or more computation steps.

**Grading.** Our math grader (math-verify on the final ``\\boxed{}``), never the generator's
own ``score_answer``: every task of the suite is graded the same way.
``tests/test_real_tasks.py`` checks that the two agree on the generator's reference answers
and on wrong ones.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from agon.provenance import package_versions
from agon.tasks.base import MathTask, Param, Problem, build_splits, content_sha256

DIFFICULTIES = ("level", "cot_steps")
# documented defaults: the generators the real-model tier uses
DEFAULT_LEVELS: dict[str, list[dict]] = {
    "basic_arithmetic": [
        {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
        {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
        {"min_terms": 3, "max_terms": 4, "min_digits": 2, "max_digits": 3},
        {"min_terms": 4, "max_terms": 6, "min_digits": 2, "max_digits": 4},
    ],
    "gsm_symbolic": [{}],
}
DEFAULT_DIFFICULTY = {"gsm_symbolic": "cot_steps"}
DEFAULT_HARD = {"basic_arithmetic": 2.0, "gsm_symbolic": 4.0}
_SPLIT_SALT = {"test": 0, "validation": 1, "train": 2}


def cot_steps(worked: str | None) -> int:
    """Computation lines of a worked solution: the lines with an ``=`` in them."""
    return sum("=" in line for line in (worked or "").splitlines())


def _shares(total: int, parts: int) -> list[int]:
    """``total`` split over ``parts`` as evenly as possible, the remainder to the first."""
    return [total // parts + (i < total % parts) for i in range(parts)]


class ReasoningGymTask(MathTask):
    """One reasoning-gym generator as a task with seeded, disjoint train/validation/test."""

    name = "reasoning_gym"
    version = "1"
    PARAMS: ClassVar[dict[str, Param]] = {
        "generator": Param("string", "basic_arithmetic", "a reasoning-gym data set's name"),
        "levels": Param(
            "array",
            None,
            "the generator's settings from easy to hard (null: DEFAULT_LEVELS, or one level of "
            "the generator's defaults)",
        ),
        "difficulty": Param(
            "string",
            None,
            "a problem's difficulty: its level's index, or its worked solution's computation "
            "lines (null: DEFAULT_DIFFICULTY, else level)",
            choices=DIFFICULTIES,
        ),
        "hard_min_difficulty": Param(
            "number", None, "the hard splits are difficulty >= this (null: DEFAULT_HARD, else 0)"
        ),
        "train_size": Param("integer", 2000, "train problems, before duplicates are dropped"),
        "validation_size": Param(
            "integer", 200, "validation problems, before duplicates are dropped"
        ),
        "test_size": Param("integer", 500, "test problems, before duplicates are dropped"),
        "seed": Param("integer", 0, "the seed each split's stream is drawn from"),
        **MathTask.PARAMS,
    }
    SIZE_PARAMS: ClassVar[dict[str, str]] = {"test": "test_size", "validation": "validation_size"}

    def __init__(
        self,
        generator: str = "basic_arithmetic",
        levels: list[dict] | None = None,
        difficulty: str | None = None,
        hard_min_difficulty: float | None = None,
        train_size: int = 2000,
        validation_size: int = 200,
        test_size: int = 500,
        seed: int = 0,
        grading_timeout_s: float = 5.0,
        grading_workers: int = 0,
    ):
        """Parameters: :attr:`PARAMS` (``difficulty``: see the module docstring)."""
        super().__init__(grading_timeout_s, grading_workers)
        self.generator = generator
        self.levels = [dict(x) for x in (levels or DEFAULT_LEVELS.get(generator, [{}]))]
        self.difficulty = difficulty or DEFAULT_DIFFICULTY.get(generator, "level")
        if self.difficulty not in DIFFICULTIES:
            raise ValueError(
                f"reasoning_gym: difficulty {self.difficulty!r}; expected one of {DIFFICULTIES}"
            )
        hard = (
            DEFAULT_HARD.get(generator, 0.0) if hard_min_difficulty is None else hard_min_difficulty
        )
        self.hard_min_difficulty = float(hard)
        self.sizes = {
            "train": int(train_size),
            "validation": int(validation_size),
            "test": int(test_size),
        }
        if min(self.sizes.values()) < 0:
            raise ValueError(f"reasoning_gym: split sizes must be >= 0, got {self.sizes}")
        self.seed = int(seed)
        self._splits: dict[str, list[Problem]] | None = None

    def _dataset(self, split: str, level: int, size: int) -> Any:
        try:
            # lazy: reasoning_gym: the optional extra `real`; its absence is reported
            import reasoning_gym
        except ImportError as err:
            raise ImportError(
                "the reasoning_gym task needs reasoning-gym: pip install 'agon[real]'"
            ) from err
        seed = self.seed * 1_000 + _SPLIT_SALT[split] * 100 + level
        try:
            return reasoning_gym.create_dataset(
                self.generator, seed=seed, size=size, **self.levels[level]
            )
        except (AssertionError, TypeError, ValueError, KeyError) as err:
            raise ValueError(
                f"reasoning_gym: generator {self.generator!r} with settings "
                f"{self.levels[level]} (level {level}) is not valid: {err!r}"
            ) from err

    def _difficulty(self, item: dict, level: int) -> float:
        if self.difficulty == "level":
            return float(level)
        return float(cot_steps((item.get("metadata") or {}).get("answer_cot")))

    def problem_of(self, item: dict, level: int) -> Problem:
        """One generated item (question, answer, metadata) drawn at ``level`` as a problem."""
        question = str(item["question"]).strip()
        meta = item.get("metadata") or {}
        return Problem(
            f"rg-{self.generator}-" + hashlib.sha1(question.encode()).hexdigest()[:12],
            question,
            str(item["answer"]).strip(),
            self._difficulty(item, level),
            {
                "level": level,
                "worked_solution": meta.get("answer_cot"),
                "source_index": meta.get("source_index"),
            },
        )

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is not None:
            return self._splits
        seen: set[str] = set()
        out: dict[str, list[Problem]] = {}
        for split in ("test", "validation", "train"):  # earlier splits win a duplicate
            problems = []
            for level, n in enumerate(_shares(self.sizes[split], len(self.levels))):
                if n == 0:
                    continue
                for item in self._dataset(split, level, n):
                    problem = self.problem_of(item, level)
                    if problem.id not in seen:
                        seen.add(problem.id)
                        problems.append(problem)
            out[split] = problems
        self._splits = build_splits(
            out["train"],
            out["validation"],
            out["test"],
            lambda p: p.difficulty >= self.hard_min_difficulty,
        )
        return self._splits

    def worked_solution(self, problem: Problem) -> str | None:
        """The generator's worked solution (``gsm_symbolic``'s ``answer_cot``; None for a
        generator without one), its GSM-style last line ``#### X`` written as the solve prompt
        asks, ``\\boxed{X}`` (appended when there is no such line)."""
        worked = problem.meta.get("worked_solution")
        if not isinstance(worked, str) or not worked.strip():
            return None
        body, _, final = worked.rstrip().rpartition("####")
        if body and final.strip():
            return body.rstrip() + f"\n\\boxed{{{final.strip()}}}"
        return worked.rstrip() + f"\n\\boxed{{{problem.answer}}}"

    def _manifest_extra(self) -> dict:

        rg_version = package_versions(["reasoning-gym"])["reasoning-gym"]
        return {
            "generator": self.generator,
            "levels": self.levels,
            "difficulty": self.difficulty,
            "hard_min_difficulty": self.hard_min_difficulty,
            "requested_sizes": self.sizes,
            "seed": self.seed,
            "reasoning_gym_version": rg_version,
            "content_sha256": content_sha256(self._load()),
        }
