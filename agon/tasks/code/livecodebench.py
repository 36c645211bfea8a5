"""LiveCodeBench (livecodebench/code_generation_lite): stdin and functional tests, by release.

Kept apart because the source is a test set only (train comes from a date cut, the benchmark's
own guard against contamination), is published as one jsonl file per release, selected by a
loading script that ``datasets`` no longer runs (:func:`lcb_release_files` reproduces its
mapping), and packs its private tests (see :func:`agon.tasks.code.load.decode_lcb_tests`).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from agon.tasks.base import Param, Problem
from agon.tasks.code.base import CodeTask, _problem
from agon.tasks.code.judges import livecodebench as lcb_judge
from agon.tasks.code.load import _as_json, decode_lcb_tests, load_json_files

LCB_DIFFICULTY = {"easy": 1.0, "medium": 2.0, "hard": 3.0}
LCB_RELEASES = 6
"""Files of the hub data set: ``test.jsonl`` (release v1), then ``test2.jsonl`` ... one per
later release."""
LCB_COLUMNS = (
    "question_title",
    "question_content",
    "platform",
    "question_id",
    "contest_id",
    "contest_date",
    "starter_code",
    "difficulty",
    "public_test_cases",
    "private_test_cases",
    "metadata",
)
"""The data set's columns, all strings (the loading script's ``Features``)."""


def _file(i: int) -> str:
    return "test.jsonl" if i == 1 else f"test{i}.jsonl"


def lcb_release_files(tag: str) -> list[str]:
    """The files a version tag reads, as the hub's loading script ``code_generation_lite.py``
    maps them (``ALLOWED_FILES``): ``release_vN`` all files up to release N (cumulative),
    ``release_latest`` all of them, ``vN`` release N's file alone, ``vN_vM`` (N < M) releases
    N to M."""
    lo = hi = 0
    if tag == "release_latest":
        lo, hi = 1, LCB_RELEASES
    elif m := re.fullmatch(r"release_v(\d+)", tag):
        lo, hi = 1, int(m[1])
    elif m := re.fullmatch(r"v(\d+)", tag):
        lo = hi = int(m[1])
    elif (m := re.fullmatch(r"v(\d+)_v(\d+)", tag)) and int(m[1]) < int(m[2]):
        lo, hi = int(m[1]), int(m[2])
    if 1 <= lo <= hi <= LCB_RELEASES:
        return [_file(i) for i in range(lo, hi + 1)]
    raise ValueError(
        f"unknown LiveCodeBench version tag {tag!r}: expected release_v1..release_v"
        f"{LCB_RELEASES}, release_latest, vN or vN_vM (N < M <= {LCB_RELEASES})"
    )


def _date(value: Any) -> datetime:
    return datetime.fromisoformat(str(value).replace(" ", "T"))


class LiveCodeBenchTask(CodeTask):
    """LiveCodeBench (livecodebench/code_generation_lite): stdin and functional tests.

    ``release`` picks the files (:func:`lcb_release_files`); ``start_date`` / ``end_date``
    (``YYYY-MM-DD``) keep problems with ``start_date <= contest_date <= end_date`` as
    LiveCodeBench's ``load_code_generation_dataset`` does (both read as midnight). The source
    is a test set; ``test_after`` (ISO date) splits what is kept into train (before) and test
    (on or after); without it every problem is test. ``hard``: difficulty ``hard``. A
    problem with ``metadata.func_name`` is functional (``get_evaluation_sample``): it calls
    ``Solution().<func_name>`` (or a module-level function) with one JSON argument per input
    line and compares with the JSON output.
    """

    name = "livecodebench"
    version = "2"
    hub_id = "livecodebench/code_generation_lite"
    judge = lcb_judge.JUDGE
    hard_min_difficulty = 3.0
    PARAMS: ClassVar[dict[str, Param]] = {
        **CodeTask.PARAMS,
        "release": Param("string", "release_v6", "the release's version tag (lcb_release_files)"),
        "data_dir": Param("string", None, "a local folder of the release's files (null: the hub)"),
        "start_date": Param("string", None, "keep problems of contests on or after YYYY-MM-DD"),
        "end_date": Param("string", None, "keep problems of contests on or before YYYY-MM-DD"),
        "test_after": Param(
            "string", None, "ISO date: train before it, test from it (null: all test)"
        ),
    }

    def __init__(
        self,
        release: str = "release_v6",
        data_dir: str | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
        test_after: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Parameters: :attr:`PARAMS` (``kwargs``: :class:`CodeTask`'s;
        ``data_files={"test": path}`` reads one file instead of the release's)."""
        super().__init__(**kwargs)
        self.release, self.data_dir = release, data_dir
        self.files = lcb_release_files(release)
        self.start_date = datetime.strptime(start_date, "%Y-%m-%d") if start_date else None
        self.end_date = datetime.strptime(end_date, "%Y-%m-%d") if end_date else None
        self.test_after = _date(test_after) if test_after else None

    def release_paths(self) -> list[str]:
        """Where the release's files are read from: ``data_files["test"]``, the files in
        ``data_dir``, or the hub (``hf://datasets/<source>[@revision]/<file>``)."""
        if self.data_files is not None:
            return [self.data_files["test"]] if "test" in self.data_files else []
        if self.data_dir is not None:
            return [str(Path(self.data_dir) / f) for f in self.files]
        at = f"@{self.revision}" if self.revision else ""
        return [f"hf://datasets/{self.source}{at}/{f}" for f in self.files]

    def _rows(self, split: str) -> list[dict]:
        paths = self.release_paths() if split == "test" else []
        rows = load_json_files(paths, LCB_COLUMNS) if paths else []
        return [
            r
            for r in rows
            if (self.start_date is None or self.start_date <= _date(r["contest_date"]))
            and (self.end_date is None or _date(r["contest_date"]) <= self.end_date)
        ]

    def _source_splits(self) -> tuple[list[Problem], None, list[Problem]]:
        problems = self._problems_of("test")
        if self.test_after is None:
            return [], None, problems
        train = [p for p in problems if _date(p.meta["contest_date"]) < self.test_after]
        test = [p for p in problems if _date(p.meta["contest_date"]) >= self.test_after]
        return train, None, test

    def _manifest_extra(self) -> dict:
        window = (self.start_date, self.end_date, self.test_after)
        start, end, test_after = (d.isoformat() if d else None for d in window)
        return {
            **super()._manifest_extra(),
            "release": self.release,
            "data_dir": self.data_dir,
            "start_date": start,
            "end_date": end,
            "test_after": test_after,
        }

    def problem_from_row(self, row: dict, split: str, index: int) -> Problem | None:
        """A LiveCodeBench row: public then private tests; functional when the metadata
        names a function, each input line parsed as JSON (``grade_call_based``)."""
        pid = f"lcb-{row['question_id']}"
        public = decode_lcb_tests(row["public_test_cases"])
        private = decode_lcb_tests(row["private_test_cases"])
        if not public and not private:
            return None
        meta: dict[str, Any] = {
            "starter_code": row.get("starter_code") or "",
            "platform": row.get("platform"),
            "contest_date": str(row.get("contest_date") or ""),
        }
        fn = (_as_json(row.get("metadata")) or {}).get("func_name")
        if fn:
            try:
                calls = [
                    ([json.loads(line) for line in c["input"].split("\n")], json.loads(c["output"]))
                    for c in public + private
                ]
            except ValueError as err:
                raise ValueError(
                    f"livecodebench {pid}: a functional test is not JSON: {err}"
                ) from err
            meta.update(
                mode="call",
                fn_name=fn,
                calls=self._cap(pid, calls[: len(public)], calls[len(public) :]),
            )
        else:
            tests = [(c["input"], c["output"]) for c in public + private]
            meta.update(
                mode="stdin", tests=self._cap(pid, tests[: len(public)], tests[len(public) :])
            )
        return _problem(
            pid,
            str(row["question_content"]),
            LCB_DIFFICULTY.get(str(row["difficulty"]).lower()),
            meta,
        )
