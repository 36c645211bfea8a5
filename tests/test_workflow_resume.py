"""workflow/scripts/resumable.py: a killed job's state is resumed only for unchanged inputs and
unchanged code; a forced rerun of a finished job starts fresh.

The script is run as Snakemake runs it (a global ``snakemake`` object), with a cheap real
command (`agon config check`), so no model is involved.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "workflow" / "scripts" / "resumable.py"


class Params(SimpleNamespace):
    def keys(self):
        return list(vars(self))


def run_job(tmp_path: Path, inputs: list[Path], command: list[str], **extra) -> int:
    folder = tmp_path / "run"
    smk = SimpleNamespace(
        input=[str(p) for p in inputs],
        log=[str(tmp_path / "job.log")],
        threads=1,
        params=Params(
            folder=str(folder), state=["checkpoints", "metrics.jsonl"], command=command, **extra
        ),
    )
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), init_globals={"snakemake": smk})
    return done.value.code


def make_state(folder: Path) -> None:
    (folder / "checkpoints" / "step-1").mkdir(parents=True)
    (folder / "metrics.jsonl").write_text('{"step": 0}\n')


def killed_attempt(tmp_path: Path, cfg: Path) -> None:
    """An attempt that started on ``cfg`` and died (non-zero exit) after writing state."""
    assert run_job(tmp_path, [cfg], ["config", "check", str(tmp_path / "missing.yaml")]) != 0
    make_state(tmp_path / "run")


def test_state_survives_a_rerun_with_the_same_inputs_and_not_new_inputs(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text((REPO / "config" / "config.yaml").read_text())
    command = ["config", "check", str(cfg)]
    killed_attempt(tmp_path, cfg)
    folder = tmp_path / "run"

    assert run_job(tmp_path, [cfg], command) == 0  # rerun after a kill: same inputs, same code
    assert (folder / "checkpoints" / "step-1").is_dir() and (folder / "metrics.jsonl").is_file()

    killed_attempt(tmp_path, cfg)
    cfg.write_text(cfg.read_text() + "\n# edited\n")  # new inputs: start fresh
    assert run_job(tmp_path, [cfg], command) == 0
    assert not (folder / "checkpoints").exists() and not (folder / "metrics.jsonl").exists()
    assert "inputs or code changed" in (tmp_path / "job.log").read_text()


def test_new_code_starts_fresh(tmp_path, monkeypatch):
    """The same inputs with other code (an edited package) do not resume the old state."""
    import agon.provenance

    cfg = tmp_path / "config.yaml"
    cfg.write_text((REPO / "config" / "config.yaml").read_text())
    killed_attempt(tmp_path, cfg)
    monkeypatch.setattr(agon.provenance, "source_fingerprint", lambda: "other code")
    assert run_job(tmp_path, [cfg], ["config", "check", str(cfg)]) == 0
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert "inputs or code changed" in (tmp_path / "job.log").read_text()


def test_forced_rerun_of_a_finished_job_starts_fresh(tmp_path):
    """A job that finished and is run again (--forcerun) recomputes; it never returns the state
    of the finished run, even with the same inputs and code."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text((REPO / "config" / "config.yaml").read_text())
    command = ["config", "check", str(cfg)]
    assert run_job(tmp_path, [cfg], command) == 0  # finished
    assert (tmp_path / "run" / ".complete").is_file()
    make_state(tmp_path / "run")  # what the finished run left (its checkpoints, its metrics)
    assert run_job(tmp_path, [cfg], command) == 0
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert "forced rerun starts fresh" in (tmp_path / "job.log").read_text()


def test_source_fingerprint_follows_the_code(tmp_path):
    from agon.provenance import source_fingerprint

    for pkg in ("agon", "baselines"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "m.py").write_text("x = 1\n")
    before = source_fingerprint(tmp_path)
    assert source_fingerprint(tmp_path) == before
    (tmp_path / "baselines" / "m.py").write_text("x = 2\n")
    assert source_fingerprint.__wrapped__(tmp_path) != before  # uncached: the code changed
    assert len(source_fingerprint()) == 64  # this checkout


def test_state_of_unknown_origin_is_not_resumed(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text((REPO / "config" / "config.yaml").read_text())
    make_state(tmp_path / "run")  # no stamp: not made by this workflow's job
    assert run_job(tmp_path, [cfg], ["config", "check", str(cfg)]) == 0
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_command_failure_is_the_job_failure_and_threads_flag_is_added(tmp_path):
    missing = tmp_path / "nope.yaml"
    cfg = tmp_path / "config.yaml"
    cfg.write_text("methods: [base]\n")
    code = run_job(tmp_path, [cfg], ["config", "check", str(missing)])
    assert code != 0
    assert "config file not found" in (tmp_path / "job.log").read_text()
    # the threads flag goes last, after the job's own arguments
    run_job(tmp_path, [cfg], ["config", "check", str(cfg)], threads_flag="--threads")
    assert "check " + str(cfg) + " --threads 1" in (tmp_path / "job.log").read_text()
