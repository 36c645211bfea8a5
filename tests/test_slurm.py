"""The workflow on a real one-node SLURM cluster, through profiles/slurm (slow; needs root and
Debian's slurm-wlm and munge packages, else skipped with the reason).

scripts/slurm_one_node.sh starts munge, slurmctld and slurmd with no accounting database, the
case where the plugin's default status command (sacct) would wait forever. The reduced toy DAG
then runs through `--profile profiles/slurm`; the test checks that every job went through
sbatch with the resources its rule declares (from Snakemake's own dry-run listing, read back
from `scontrol show job`), kills a running training job with `scancel` once it has written a
checkpoint, and again once its resubmission has written a later one, and checks that the
`retries` + `rerun-incomplete` of the profile ran it again each time, resumed from its last
checkpoint each time, to the end: what `agon plan` counts on for a job longer than its runtime
row (resumed runs). The profile's `retries` allow one resubmission; the test passes
`--retries 2` on the command line, as the plan tells a longer job to. The daemons are stopped
afterwards.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from test_workflow import REPO, SNAKEMAKE, snakemake, workdir_with
from test_workflow_e2e import REDUCED

from agon.plan.jobs import profile_retries

pytestmark = pytest.mark.slow

SCRIPT = REPO / "scripts" / "slurm_one_node.sh"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel")


def _cannot_run() -> str | None:
    if os.geteuid() != 0:
        return "needs root: munged, slurmctld and slurmd are system daemons"
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"needs the slurm-wlm and munge packages ({', '.join(missing)} not found)"
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = _cannot_run()
    if reason:
        pytest.skip(reason)
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "AGON_SLURM_DIR": str(state)}
    up = subprocess.run(
        [str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=120
    )
    assert up.returncode == 0, up.stdout + up.stderr
    env["SLURM_CONF"] = str(state / "slurm.conf")
    try:
        yield env
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
        for name in ("slurmctld", "slurmd"):
            assert not (state / f"{name}.pid").exists(), f"{name} was not stopped"


def _declared(wd: Path) -> dict[str, set]:
    """rule -> {(threads, mem_mb, runtime minutes)} of the jobs that go to the cluster (not
    localrules), from Snakemake's own dry-run listing."""
    local = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=rule \w+:)", smk.read_text()):
            name = re.match(r"rule (\w+):", block)
            if name and re.search(r"^\s+localrule: True", block, re.M):
                local.add(name.group(1))
    assert local, "the workflow has localrules (config snapshots); the parser found none"
    res = snakemake(wd, "-n", "--cores", "2")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    declared: dict[str, set] = {}
    rule = threads = None
    for line in res.stdout.splitlines() + [""]:
        head = re.match(r"^(local)?rule (\w+):$", line)
        if head or not line.strip():
            rule, threads = (None if head is None or head.group(1) else head.group(2)), 1
        elif rule and line.startswith("    threads: "):
            threads = int(line.split(": ", 1)[1])
        elif rule and line.startswith("    resources: "):
            kv = dict(x.split("=", 1) for x in line.split(": ", 1)[1].split(", "))
            if "mem_mb" in kv:
                declared.setdefault(rule, set()).add(
                    (threads, int(kv["mem_mb"]), int(kv["runtime"]))
                )
    return {rule: v for rule, v in declared.items() if rule not in local}


def _jobs(env) -> list[dict]:
    """Every job slurmctld knows (MinJobAge keeps finished ones), as key -> value dicts."""
    out = subprocess.run(
        ["scontrol", "-o", "show", "job"], env=env, capture_output=True, text=True, timeout=30
    ).stdout
    jobs = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w[\w/:]*)=(\S*)", line))
        if "JobId" in fields:
            jobs.append(fields)
    return jobs


def _minutes(limit: str) -> int:
    """SLURM's [D-]HH:MM:SS time limit in minutes."""
    days, _, clock = limit.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + (s > 0)


def _mem_mb(value: str) -> int:
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    return int(float(value[:-1]) * units[value[-1]]) if value[-1] in units else int(value)


def _checkpoints(run_dir: Path) -> list[int]:
    """The steps of a run's complete checkpoints."""
    return sorted(
        int(p.parent.name.removeprefix("step-")) for p in run_dir.glob("checkpoints/*/COMPLETE")
    )


def _kill_training_twice(env, results: Path, killed: list, stop: threading.Event):
    """Watch the cluster; scancel the first running `train` job whose run has a complete
    checkpoint; then, once the same run runs again (a new job id), has resumed and written a
    checkpoint after the one it resumed from, scancel that attempt too, keeping its log (the
    next attempt rewrites it)."""
    while not stop.is_set() and len(killed) < 2:
        for job in _jobs(env):
            comment = job.get("Comment", "")
            if job.get("JobState") != "RUNNING" or not comment.startswith("rule_train"):
                continue
            if any(k["job"] == job["JobId"] for k in killed):
                continue
            for run_dir in results.glob("toy/arith/train/*/seed0"):
                method = run_dir.parent.name
                if killed and method != killed[0]["method"]:
                    continue
                if not comment.endswith((f"_{method}_0", f"_{method}_seed0")):
                    continue
                steps = _checkpoints(run_dir)
                log = results / "logs" / "train" / "toy" / "arith" / method / "seed0.log"
                text = log.read_text() if log.is_file() else ""
                resumed = re.search(r"resumed from \S+ at step (\d+)", text)
                if not steps or (killed and not (resumed and steps[-1] > int(resumed[1]))):
                    continue
                subprocess.run(["scancel", job["JobId"]], env=env, timeout=30, check=True)
                killed.append(
                    dict(job=job["JobId"], method=method, run_dir=run_dir, step=steps[-1], log=text)
                )
                break
        time.sleep(0.2)


def test_reduced_dag_through_the_slurm_profile(cluster, tmp_path):
    cfg = copy.deepcopy(REDUCED)
    # long enough to be killed between its checkpoints
    cfg["train"].update(steps=10, checkpoint_every=1, eval_every=5)
    # distinct resources per rule, so a mix-up between rules would show in sbatch's requests
    cfg["resources"] = {
        "data": {"threads": 1, "mem_mb": 1500, "runtime": 10},
        "pretrain": {"threads": 1, "mem_mb": 3500, "runtime": 45},
        "train": {"threads": 2, "mem_mb": 3000, "runtime": 30},
        "evaluate": {"threads": 1, "mem_mb": 2500, "runtime": 20},
        "report": {"threads": 1, "mem_mb": 2000, "runtime": 15},
    }
    wd = workdir_with(tmp_path, cfg)
    out = wd / cfg["out_dir"]  # config/smoke.yaml's own folder, apart from the real results
    declared = _declared(wd)
    killed: list[dict] = []
    stop = threading.Event()
    watcher = threading.Thread(
        target=_kill_training_twice,
        args=(cluster, out, killed, stop),
        daemon=True,
    )
    env = {**cluster, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    t0 = time.perf_counter()
    watcher.start()
    try:
        res = subprocess.run(
            [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(wd)]
            + ["--profile", str(REPO / "profiles" / "slurm"), "--jobs", "4", "--retries", "2"],
            capture_output=True,
            text=True,
            timeout=1800,
            env=env,
            cwd=wd,
        )
    finally:
        stop.set()
        watcher.join(timeout=10)
    wall = time.perf_counter() - t0
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert (out / "table1.csv").is_file()

    # every job went through sbatch with its rule's declared threads, memory and runtime
    jobs = _jobs(cluster)
    seen: dict[str, set] = {}
    for job in jobs:
        rule = re.match(r"rule_(\w+?)(_wildcards_.*)?$", job.get("Comment", ""))
        assert rule, job
        mem = _mem_mb(job["MinMemoryNode"])
        seen.setdefault(rule.group(1), set()).add(
            (int(job["NumCPUs"]), mem, _minutes(job["TimeLimit"]))
        )
    print(f"\nSLURM: {len(jobs)} jobs, {wall:.0f}s wall; resources seen by sbatch:")
    for rule in sorted(seen):
        print(f"  {rule}: (cpus, mem MiB, minutes) {sorted(seen[rule])}")
    assert set(seen) == set(declared), (seen, declared)
    assert len({v for vs in declared.values() for v in vs}) == len(declared), declared
    for rule, wanted in declared.items():
        if rule not in seen:
            continue
        got = seen[rule]
        assert {(c, t) for c, _, t in got} == {(c, t) for c, _, t in wanted}, (rule, got, wanted)
        # the plugin adds a small margin for its job step's own process to --mem
        for _, m, _ in got:
            assert any(wm <= m <= wm + 1024 for _, wm, _ in wanted), (rule, got, wanted)

    # the training job killed twice was submitted again each time, and each attempt resumed from
    # its last checkpoint: the second attempt's log (kept when it was killed) and the last one's
    assert profile_retries() == 1, "the profile allows one resubmission; this test passes two"
    assert len(killed) == 2, f"the training job was not killed twice: {killed}"
    states = {j["JobId"]: j["JobState"] for j in jobs}
    assert [states[k["job"]] for k in killed] == ["CANCELLED", "CANCELLED"], states
    method = killed[0]["method"]
    final = (out / "logs" / "train" / "toy" / "arith" / method / "seed0.log").read_text()
    resumed = []
    for log in (killed[1]["log"], final):
        # the retry's log (workflow/scripts/resumable.py rewrites it) opens with the reason when
        # it threw the killed attempt's state away: e.g. agon's or baselines' source changed
        # between the attempts (an edit while this test runs), which rightly starts it fresh
        fresh = re.search(r"^.*: removing \[.*$", log, re.M)
        assert not fresh, f"a retry of the killed {method} job started fresh: {fresh.group(0)}"
        found = re.search(r"resumed from (\S+) at step (\d+)", log)
        assert found, log[:1000] + "\n[...]\n" + log[-3000:]
        resumed.append(int(found.group(2)))
    assert killed[0]["step"] <= resumed[0] <= killed[1]["step"] <= resumed[1], (killed, resumed)
    summary = json.loads((killed[0]["run_dir"] / "summary.json").read_text())
    assert summary["steps"] >= resumed[1]
    print(
        f"  scancel'd {method} training twice (jobs {killed[0]['job']}, {killed[1]['job']}); "
        f"the retries resumed at steps {resumed[0]} and {resumed[1]} and finished at step "
        f"{summary['steps']}"
    )
