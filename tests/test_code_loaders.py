"""Code loaders on local files of the real schemas: LiveCodeBench by release tag from a local
copy of the hub's files (and the hub paths it would read), its date window, TACO's limits and
special-judge flags, CodeContests' limits and files. No network, no sandbox."""

from __future__ import annotations

import json
from pathlib import Path

from agon.tasks.code import CodeContestsTask, LiveCodeBenchTask, TacoTask

FIX = Path(__file__).parent / "fixtures" / "code"
LCB_ROWS = (FIX / "livecodebench_conformance.jsonl").read_text().splitlines()


def _lcb_dir(tmp_path: Path) -> Path:
    """The fixture's rows as two release files: v1 (test.jsonl) and v2 (test2.jsonl)."""
    (tmp_path / "test.jsonl").write_text("\n".join(LCB_ROWS[:3]) + "\n")
    (tmp_path / "test2.jsonl").write_text("\n".join(LCB_ROWS[3:]) + "\n")
    return tmp_path


def _ids(task, split="test"):
    return [p.id for p in task.problems(split)]


def test_lcb_reads_a_release_from_local_files(tmp_path):
    d = str(_lcb_dir(tmp_path))
    v1 = LiveCodeBenchTask(release="release_v1", data_dir=d)
    assert _ids(v1) == ["lcb-abc900_a", "lcb-abc900_b", "lcb-abc900_c"]
    assert len(_ids(LiveCodeBenchTask(release="release_v2", data_dir=d))) == 6
    assert _ids(LiveCodeBenchTask(release="v2", data_dir=d)) == [
        "lcb-3100",
        "lcb-3101",
        "lcb-3102",
    ]
    manifest = LiveCodeBenchTask(release="v2", data_dir=d, end_date="2024-09-30").split_manifest()
    assert manifest["release"] == "v2" and manifest["end_date"] == "2024-09-30T00:00:00"


def test_lcb_hub_paths_are_the_release_files():
    task = LiveCodeBenchTask(release="release_v2")
    assert task.release_paths() == [
        "hf://datasets/livecodebench/code_generation_lite/test.jsonl",
        "hf://datasets/livecodebench/code_generation_lite/test2.jsonl",
    ]
    pinned = LiveCodeBenchTask(release="v3_v4", revision="abc123")
    assert pinned.release_paths() == [
        "hf://datasets/livecodebench/code_generation_lite@abc123/test3.jsonl",
        "hf://datasets/livecodebench/code_generation_lite@abc123/test4.jsonl",
    ]


def test_lcb_date_window_is_inclusive_at_midnight(tmp_path):
    """load_code_generation_dataset: start_date <= contest_date <= end_date, dates at 00:00."""
    d = str(_lcb_dir(tmp_path))
    window = LiveCodeBenchTask(
        release="release_v2", data_dir=d, start_date="2024-05-11", end_date="2024-09-14"
    )
    assert _ids(window) == ["lcb-abc900_b", "lcb-abc900_c", "lcb-3100", "lcb-3101"]
    split = LiveCodeBenchTask(release="release_v2", data_dir=d, test_after="2024-08-01")
    assert _ids(split, "train") == ["lcb-abc900_a", "lcb-abc900_b", "lcb-abc900_c"]
    assert _ids(split) == ["lcb-3100", "lcb-3101", "lcb-3102"]


def test_lcb_functional_by_metadata_and_tests_capped_public_first():
    task = LiveCodeBenchTask(data_files={"test": str(FIX / "livecodebench_conformance.jsonl")})
    modes = {p.id: p.meta["mode"] for p in task.problems("test")}
    assert modes["lcb-3100"] == "call" and modes["lcb-abc900_a"] == "stdin"
    one = LiveCodeBenchTask(
        data_files={"test": str(FIX / "livecodebench_conformance.jsonl")}, max_tests=1
    )
    first = one.problems("test")[0]
    assert first.meta["tests"] == [("1 2\n", "0.5\n")]  # the public test


def test_taco_rows_give_limits_and_flags():
    task = TacoTask(data_files={"test": str(FIX / "taco_conformance_test.jsonl")})
    p0 = task.problems("test")[0]
    assert (p0.meta["time_limit_s"], p0.meta["memory_limit_mb"]) == (1.0, 256.0)
    assert task.limits(p0) == (2.0, 288)  # x2 time, x1 memory + 32 MiB
    assert json.loads(p0.answer)["time_limit_s"] == 1.0  # the limits are part of the spec
    exact = TacoTask(
        data_files={"test": str(FIX / "taco_conformance_test.jsonl")}, special_judge="exact"
    )
    flagged = [p for p in exact.problems("test") if p.meta.get("special_judge")]
    assert [(p.id, p.meta["special_judge_kind"]) for p in flagged] == [
        ("taco-test-5", "nondeterministic")  # TACO's own list, position 5 of its test split
    ]
    train_only = TacoTask(data_files={"train": str(FIX / "taco_conformance_test.jsonl")})
    assert not any(p.meta.get("special_judge") for p in train_only.problems("train"))


def test_codecontests_rows_give_limits_files_and_flags():
    task = CodeContestsTask(
        data_files={"test": str(FIX / "codecontests_conformance_test.jsonl")},
        time_limit_factor=3,
        special_judge="exact",
    )
    ratio, parity, files, pair = task.problems("test")
    assert task.limits(ratio) == (3.0, 277) and task.limits(parity) == (1.5, 94)
    assert (files.meta["input_file"], files.meta["output_file"]) == ("input.txt", "output.txt")
    assert pair.meta["special_judge_kind"] == "any_answer"
    assert not any(p.meta.get("special_judge") for p in (ratio, parity, files))
