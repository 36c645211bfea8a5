"""Evaluation: verdicts against an independent recount, resume after a real SIGKILL, the CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from math import comb
from pathlib import Path

import pytest
import yaml
from tiny_models import ScriptedEngine, tiny_sum_task

import agon.tasks
from agon.cli import main
from agon.engines import SamplingParams
from agon.evaluation import evaluate
from agon.evaluation.from_config import resolve_kind
from agon.random_models import build_tiny_model
from agon.systems import cascade, single

TESTS = Path(__file__).parent


def _sum(text: str) -> int:
    a, b = re.search(r"What is (\d+) \+ (\d+)\?", text).groups()
    return int(a) + int(b)


def _reply(text: str, j: int) -> str:
    """Right, wrong, hostile, or no answer, depending on the problem and the sample index."""
    s = _sum(text)
    kind = (s + j) % 4
    return [f"so \\boxed{{{s}}}", f"so \\boxed{{{s + 1}}}", "so \\boxed{" + "(" * 50, "no idea"][
        kind
    ]


def _read(text: str, j: int) -> str:
    """A reader that copies the draft's boxed answer when there is one, else solves it."""
    found = re.findall(r"\\boxed\{(-?\d+)\}", text)
    return f"copied \\boxed{{{found[-1]}}}" if found else f"solved \\boxed{{{_sum(text)}}}"


def _recount(lines: list[dict], ks: list[int]) -> dict:
    """pass@k straight from the JSONL, re-grading each completion with a regex of our own."""
    per: dict[str, list[bool]] = {}
    for r in lines:
        found = re.findall(r"\\boxed\{(-?\d+)\}", r["completion"])
        correct = bool(found) and int(found[-1]) == int(r["gold"])
        assert correct == (r["correct"] is True), r
        per.setdefault(r["problem_id"], []).append(correct)
    out = {}
    for k in ks:
        vals = [1 - comb(len(v) - sum(v), k) / comb(len(v), k) for v in per.values()]
        out[f"pass@{k}"] = sum(vals) / len(vals)
    return out


@pytest.mark.parametrize("kind", ["single", "cascade"])
def test_verdicts_match_an_independent_recount(tmp_path, kind):
    task = tiny_sum_task(8)
    drafter = ScriptedEngine(_reply)
    system = single(drafter) if kind == "single" else cascade(drafter, ScriptedEngine(_read))
    ks = [1, 2, 3]
    try:
        summary = evaluate(
            system,
            task,
            task.problems("hard"),
            tmp_path,
            n=3,
            ks=ks,
            sampling=SamplingParams(seed=0),
            chunk_size=6,
            n_boot=200,
            progress=False,
        )
    finally:
        task.close()
    lines = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 24 and len({(r["problem_id"], r["sample"]) for r in lines}) == 24
    recount = _recount(lines, ks)
    for k in ks:
        assert summary[f"pass@{k}"] == pytest.approx(recount[f"pass@{k}"])
        assert summary[f"pass@{k}_lo"] <= summary[f"pass@{k}"] <= summary[f"pass@{k}_hi"]
    assert 0 < summary["pass@1"] < 1  # a mix of verdicts, so the recount is not trivially 0 or 1
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["pass@1"] == summary["pass@1"] and on_disk["provenance"]["seed"] == 0
    assert summary["mean_total_tokens"] == pytest.approx(sum(r["total_tokens"] for r in lines) / 24)
    if kind == "cascade":
        assert all(r["drafts"] and r["draft_tokens"] > 0 for r in lines)


def test_a_different_evaluation_is_refused(tmp_path):
    task = tiny_sum_task(2)
    try:
        evaluate(
            single(ScriptedEngine(_reply)),
            task,
            task.problems("hard"),
            tmp_path,
            n=2,
            progress=False,
            n_boot=100,
        )
        with pytest.raises(RuntimeError, match="different evaluation"):
            evaluate(
                single(ScriptedEngine(_reply)),
                task,
                task.problems("hard"),
                tmp_path,
                n=2,
                progress=False,
                n_boot=100,
                sampling=SamplingParams(temperature=0.5),
            )
    finally:
        task.close()


CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from tiny_models import tiny_sum_task
from agon.tasks import register_task
from agon.cli import main

def slow_task(**params):
    task = tiny_sum_task(10)
    grade = task.grade
    def slow_grade(problems, completions):  # a slow grader, so the kill lands mid-run
        time.sleep({delay})
        return grade(problems, completions)
    task.grade = slow_grade
    return task

if __name__ == "__main__":  # the grading pool's forkserver re-imports this file
    register_task("tinysum", slow_task)
    sys.exit(main(sys.argv[1:]))
"""


def _child(tmp_path: Path, config: Path, out: Path, delay: float) -> list[str]:
    script = tmp_path / f"child_{delay}.py"
    script.write_text(CHILD.format(tests=str(TESTS), delay=delay))
    return [
        sys.executable,
        str(script),
        "eval",
        "--config",
        str(config),
        "--family",
        "tiny",
        "--task",
        "tinysum",
        "--system",
        "base_cascade",
        "--seed",
        "3",
        "--out",
        str(out),
        "--no-progress",
    ]


def test_resume_after_sigkill_neither_redoes_nor_duplicates(tmp_path, monkeypatch, capsys):
    model = build_tiny_model("qwen3", tmp_path / "qwen3")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "families": [
                    {
                        "name": "tiny",
                        "model_a": {"model": str(model)},
                        "model_b": {"model": str(model)},
                        "dtype": "float32",
                        "max_new_tokens": 6,
                        "max_prompt_tokens": 400,
                    }
                ],
                "tasks": [{"name": "tinysum"}],
                "methods": ["base_cascade"],
                "eval": {
                    "n_samples": 2,
                    "k": [1, 2],
                    "batch_size": 2,
                    "temperature": 1.0,
                    "bootstrap": 100,
                },
            }
        )
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed = tmp_path / "killed"
    samples = killed / "samples.jsonl"
    proc = subprocess.Popen(
        _child(tmp_path, config, killed, delay=0.4),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if samples.is_file() and samples.read_text().count("\n") >= 6:  # three problems written
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stdout.read().decode()[-2000:]
    before = samples.read_text()
    n_before = before.count("\n")
    assert 6 <= n_before < 20, "the kill should land mid-run"
    with open(samples, "a") as f:
        f.write('{"run_id": "torn')  # what a kill in the middle of a write leaves behind

    monkeypatch.setitem(agon.tasks.TASKS._objects, "tinysum", lambda **params: tiny_sum_task(10))
    capsys.readouterr()
    assert (
        main(_child(tmp_path, config, killed, delay=0.0)[2:]) == 0
    )  # the restart, in this process
    kept_problems = len({json.loads(x)["problem_id"] for x in before.splitlines()})
    assert f"{kept_problems} of 10 problems already done" in capsys.readouterr().err
    after = samples.read_text()
    assert after.startswith(
        before
    )  # the samples already on disk were kept byte for byte, not redone
    lines = [json.loads(x) for x in after.splitlines()]
    assert len(lines) == 20 and len({(r["problem_id"], r["sample"]) for r in lines}) == 20

    clean = tmp_path / "clean"
    assert (
        main(_child(tmp_path, config, clean, delay=0.0)[2:]) == 0
    )  # the same evaluation, uninterrupted
    ref_lines = [json.loads(x) for x in (clean / "samples.jsonl").read_text().splitlines()]

    def strip(r: dict) -> dict:
        return {k: v for k, v in r.items() if k != "wall_s"}

    # each chunk is seeded by its position: the killed-and-resumed run drew the same samples
    assert sorted(map(json.dumps, map(strip, lines))) == sorted(
        map(json.dumps, map(strip, ref_lines))
    )
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["n_problems"] == 10 and summary["n_samples"] == 20 and "pass@2_se" in summary


def test_cli_explicit_forms(tmp_path, monkeypatch, capsys):
    """`agon eval --system cascade --drafter ... --reader ...` and moa without a config file."""
    model = str(build_tiny_model("qwen3", tmp_path / "qwen3"))
    monkeypatch.setitem(agon.tasks.TASKS._objects, "tinysum", lambda **params: tiny_sum_task(2))
    common = ["--task", "tinysum", "--max-new-tokens", "3", "--n-samples", "2", "--no-progress"]
    assert (
        main(
            [
                "eval",
                "--system",
                "cascade",
                "--drafter",
                model,
                "--reader",
                model,
                "--out",
                str(tmp_path / "c"),
                *common,
            ]
        )
        == 0
    )
    assert "cascade on tinysum: pass@1=" in capsys.readouterr().out
    assert (
        main(
            [
                "eval",
                "--system",
                "moa",
                "--drafter",
                model,
                "--reader",
                model,
                "--out",
                str(tmp_path / "m"),
                *common,
            ]
        )
        == 0
    )
    moa_lines = [json.loads(x) for x in (tmp_path / "m" / "samples.jsonl").read_text().splitlines()]
    assert len(moa_lines) == 4 and all(
        len(r["drafts"]) == 1 and len(r["drafts"][0]) == 4 for r in moa_lines
    )  # 1 layer x 4 proposers
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["system"] == "cascade" and summary["models"]["drafter"] == model
    assert (
        main(["eval", "--system", "grpo", "--out", str(tmp_path / "x"), "--task", "tinysum"]) == 2
    )  # no models given


def test_system_names_resolve():
    assert resolve_kind("base", None, None, None) == "single"
    assert resolve_kind("base_cascade", None, None, None) == "cascade"
    assert resolve_kind("moa", None, None, None) == "moa"
    assert resolve_kind("grpo", "run/A", None, None) == "single"
    assert resolve_kind("agon_rev", None, "run/B", "run/A") == "cascade"
    with pytest.raises(ValueError, match="--drafter PATH --reader PATH"):
        resolve_kind("agon", None, None, None)


def test_each_policy_keeps_its_rows_persona(tmp_path, monkeypatch):
    """agon_rev: B's checkpoint drafts with B's persona, A's reads with A's."""
    from agon.evaluation.from_config import build_system, minimal_config

    model = str(build_tiny_model("qwen3", tmp_path / "qwen3"))
    monkeypatch.setitem(agon.tasks.TASKS._objects, "tinysum", lambda **params: tiny_sum_task(2))
    config = minimal_config("tinysum", model, model)
    config["families"][0]["model_a"]["system_prompt"] = "persona A"
    config["families"][0]["model_b"]["system_prompt"] = "persona B"
    system, identity = build_system(config, "cli", "agon_rev", drafter=model, reader=model)
    assert (system.drafter.system_prompt, system.reader.system_prompt) == ("persona B", "persona A")
    assert identity["rows"] == ["b", "a"] and system.name == "agon_rev"
    system, _ = build_system(config, "cli", "grpo_cascade", drafter=model, reader=model)
    assert (system.drafter.system_prompt, system.reader.system_prompt) == ("persona A", "persona B")
