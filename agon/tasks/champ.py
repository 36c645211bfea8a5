"""CHAMP (``champ-dataset``): 270 competition math problems with answers and worked solutions.

An evaluation-only set (``pip install agon[real]``): ``test`` holds the chosen problems and is
also ``hard`` (the source has no difficulty); ``train`` and ``validation`` are empty. By
``answers``:

- ``numeric`` (default): the 85 problems of v0 whose answer is a plain number (an integer, a
  decimal or a fraction, e.g. ``239``, ``-1``, ``7125``), which math-verify grades without
  ambiguity;
- ``all``: every problem, graded by math-verify on the answer as written (answers such as
  ``1 and 19`` or ``No`` then score only when the model writes what math-verify parses alike,
  so pass@1 on ``all`` understates the models).
"""

from __future__ import annotations

import re
from typing import ClassVar

from agon.provenance import package_versions
from agon.tasks.base import MathTask, Param, Problem, build_splits, content_sha256

ANSWER_SETS = ("numeric", "all")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?(/\d+)?$")


def is_numeric(answer: str) -> bool:
    """A plain number: an integer, a decimal or a fraction (thousands commas allowed)."""
    return bool(_NUMBER.match(answer.strip().replace(",", "")))


class ChampTask(MathTask):
    """CHAMP v0 from the ``champ-dataset`` package, as a test set."""

    name = "champ"
    version = "1"
    PARAMS: ClassVar[dict[str, Param]] = {
        "answers": Param(
            "string",
            "numeric",
            "which problems: those with a plain number as answer, or all",
            choices=ANSWER_SETS,
        ),
        "dataset_version": Param("string", "v0", "the champ-dataset version to load"),
        **MathTask.PARAMS,
    }

    def __init__(
        self,
        answers: str = "numeric",
        dataset_version: str = "v0",
        grading_timeout_s: float = 5.0,
        grading_workers: int = 0,
    ):
        """Parameters: :attr:`PARAMS` (``answers``: see the module docstring)."""
        super().__init__(grading_timeout_s, grading_workers)
        if answers not in ANSWER_SETS:
            raise ValueError(f"champ: answers {answers!r}; expected one of {ANSWER_SETS}")
        self.answers, self.dataset_version = answers, dataset_version
        self._splits: dict[str, list[Problem]] | None = None

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is not None:
            return self._splits
        try:
            # lazy: champ_dataset: the optional extra `real`; its absence is reported
            import champ_dataset
        except ImportError as err:
            raise ImportError(
                "the champ task needs champ-dataset: pip install 'agon[real]'"
            ) from err
        test = []
        for p in champ_dataset.load(self.dataset_version).problems.values():
            answer = str(p.answer).strip()
            if self.answers == "numeric" and not is_numeric(answer):
                continue
            worked = "\n".join(step.text for step in p.solution.steps) if p.solution else None
            test.append(
                Problem(
                    f"champ-{p.identifier}",
                    str(p.text).strip(),
                    answer.replace(",", "") if is_numeric(answer) else answer,
                    None,
                    {"category": p.category, "worked_solution": worked},
                )
            )
        self._splits = build_splits([], [], test, lambda p: True)
        return self._splits

    def _manifest_extra(self) -> dict:

        package = package_versions(["champ-dataset"])["champ-dataset"]
        return {
            "source": f"champ-dataset {package} ({self.dataset_version})",
            "answers": self.answers,
            "content_sha256": content_sha256(self._load()),
        }
