"""DeepMath loader on a local fixture with the real schema; the seeded split and its hashes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agon.tasks import available_tasks, get_task

FIXTURE = Path(__file__).parent / "fixtures" / "deepmath_sample.jsonl"


def _task(**kw):
    params = {
        "source": str(FIXTURE),
        "test_size": 10,
        "validation_size": 5,
        "hard_min_difficulty": 8.0,
        "seed": 0,
        "grading_workers": 1,
    }
    return get_task("deepmath", **{**params, **kw})


def test_registry_lists_deepmath():
    assert "deepmath" in available_tasks()
    with pytest.raises(KeyError, match="unknown task"):
        get_task("no-such-task")


def test_split_sizes_and_hard_threshold():
    task = _task()
    train, test, hard = task.problems("train"), task.problems("test"), task.problems("hard")
    val = task.problems("validation")
    assert len(test) == 10 and len(val) == 5 and len(train) == 15
    ids = [{p.id for p in ps} for ps in (train, val, test)]
    assert not ids[0] & ids[1] and not ids[0] & ids[2] and not ids[1] & ids[2]
    assert hard and all(p.difficulty >= 8.0 for p in hard) and set(hard) <= set(test)
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    n_hard_test = sum(1 for p in test if p.difficulty >= 8.0)
    n_hard_val = sum(1 for p in val if p.difficulty >= 8.0)
    assert len(hard) == n_hard_test
    assert [p.id for p in task.problems("validation_hard")] == [
        p.id for p in val if p.difficulty >= 8.0
    ]
    assert (
        len(task.problems("train_hard"))
        == sum(r["difficulty"] >= 8 for r in rows) - n_hard_test - n_hard_val
    )


def test_validation_is_carved_from_non_test_rows_and_test_is_unchanged():
    # the test ids before the validation split existed (test_size 10, seed 0)
    before = [
        "dm-e3d84ea0eb00",
        "dm-9e65c9ab196a",
        "dm-bed4cbc3b2a7",
        "dm-884d2bd2e60c",
        "dm-40debb3f5587",
        "dm-6c22b425df67",
        "dm-26fc2cc62d97",
        "dm-e2bea6083b32",
        "dm-12f5227a0e21",
        "dm-13038428c6ec",
    ]
    for size in (0, 5, 12):
        task = _task(validation_size=size)
        assert [p.id for p in task.problems("test")] == before
        assert len(task.problems("validation")) == size
        assert len(task.problems("train")) == 20 - size
    assert [p.id for p in _task(seed=1).problems("validation")] != [
        p.id for p in _task().problems("validation")
    ]
    with pytest.raises(ValueError, match="validation_size"):
        _task(validation_size=20).problems("test")


def test_split_is_seeded_and_hashed():
    a, b, c = _task().split_manifest(), _task().split_manifest(), _task(seed=1).split_manifest()
    assert a["ids"] == b["ids"] and a["split_sha256"] == b["split_sha256"]
    assert a["ids"]["test"] != c["ids"]["test"] and a["split_sha256"] != c["split_sha256"]
    assert a["source_sha256"] == c["source_sha256"]  # same data, different split


def test_parquet_gives_the_same_split(tmp_path):
    import pandas as pd

    pq = tmp_path / "dm.parquet"
    pd.read_json(FIXTURE, lines=True).to_parquet(pq)
    assert _task(source=str(pq)).split_manifest()["ids"] == _task().split_manifest()["ids"]


def test_only_the_needed_columns_are_read(tmp_path):
    """The three long R1 solutions are read only when asked (parquet prunes them on read)."""
    import pandas as pd

    from agon.tasks.deepmath import load_rows

    pq = tmp_path / "dm.parquet"
    pd.read_json(FIXTURE, lines=True).to_parquet(pq)
    for source in (str(FIXTURE), str(pq)):
        assert set(load_rows(source)[0]) == {"question", "final_answer", "difficulty", "topic"}
        assert "r1_solution_3" in load_rows(source, solutions=True)[0]
    p = _task(solutions=True).problems("test")[0]
    assert len(p.meta["r1_solutions"]) == 3 and all(p.meta["r1_solutions"])
    assert "r1_solutions" not in _task().problems("test")[0].meta
    pd.read_json(FIXTURE, lines=True).drop(columns=["topic"]).to_parquet(pq)
    assert "topic" not in load_rows(str(pq))[0]  # optional: read when there


def test_missing_fields_and_files_fail_clearly(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    with pytest.raises(ValueError, match="lacks fields"):
        _task(source=str(bad)).problems("test")
    with pytest.raises(FileNotFoundError):
        _task(source=str(tmp_path / "none.jsonl")).problems("test")


def test_prompts_and_grading():
    task = _task()
    p = task.problems("test")[0]
    solve = task.solve_prompt(p)[0]["content"]
    read = task.reader_prompt(p, "my draft \\boxed{0}")[0]["content"]
    assert p.question in solve and "\\boxed{}" in solve
    assert p.question in read and "my draft" in read and "rival" in read and "may be wrong" in read
    verdicts = task.grade([p, p], [f"\\boxed{{{p.answer}}}", "\\boxed{-12345}"])
    task.close()
    assert [v.correct for v in verdicts] == [True, False]


def test_cli_writes_split_with_provenance(tmp_path):
    cfg = {
        "families": [{"name": "f", "model_a": {"model": "a"}, "model_b": {"model": "b"}}],
        "tasks": [
            {
                "name": "deepmath",
                "params": {"source": str(FIXTURE), "test_size": 10, "validation_size": 5},
            }
        ],
        "methods": ["base"],
    }
    cpath = tmp_path / "c.yaml"
    cpath.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "split.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "agon",
            "data",
            "split",
            "--config",
            str(cpath),
            "--task",
            "deepmath",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    body = json.loads(out.read_text())
    assert body["sizes"]["test"] == 10 and len(body["split_sha256"]) == 64
    assert body["sizes"]["validation"] == 5 and body["validation_size"] == 5
    assert body["provenance"]["config_hash"]
