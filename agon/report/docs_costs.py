"""docs/results.md beside its tables (:mod:`agon.report.docs`): the benchmarks, each metric
with the commit, machine and target its benchmark's last run recorded, and what regenerating
each results tree cost (its benchmarked jobs' time, summed, and its size on disk); with the
small formatters the page shares.
"""

from __future__ import annotations

import json
from pathlib import Path

from agon.report.render import head, short, table_row
from agon.results import benchmark_seconds

# ----------------------------------------------------------------------------- formatters


def commit_text(commit: str | None, dirty: bool) -> str:
    if not commit:
        return "not recorded"
    return f"`{commit[:12]}`" + (" (with uncommitted changes)" if dirty else "")


def duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


# ----------------------------------------------------------------------------- benchmarks


def target_text(value: float, target: list | None) -> str:
    """A benchmark metric's target (``[op, bound]``, as its module declares it) and whether this
    value meets it; '' without one."""
    if not target:
        return ""
    op, bound = target
    ok = value >= bound if op == ">=" else value <= bound
    return f"{op} {bound:g}: " + ("met" if ok else "**missed**")


def host_text(host: dict) -> str:
    """A machine in a few words: its CPU model, torch's CPU kernels and its GPUs."""
    if not host.get("cpu_model"):
        return "not recorded"
    parts = [host["cpu_model"]]
    if host.get("cpu_capability"):
        parts.append(f"kernels {host['cpu_capability']}")
    parts += host.get("gpus") or []
    return ", ".join(parts)


def bench_section(bench: Path, throughput: Path) -> str:
    """The benchmarks: ``bench/results.json`` (a flat metric map), each metric under the commit
    and machine its benchmark's last run recorded (``bench/results.provenance.json``), and the
    throughput measurements of ``bench/throughput/`` (each with its own)."""
    lines = [
        "## Benchmarks",
        "",
        "Each benchmark carries its own commit and machine, apart from the tables.",
        "",
    ]
    lines += ["### Micro-benchmarks (`bench/results.json`)", ""]
    if bench.is_file():
        metrics = json.loads(bench.read_text())
        sidecar = bench.with_suffix(".provenance.json")
        runs = json.loads(sidecar.read_text()) if sidecar.is_file() else {}
        # a metric's benchmark: the newest run that lists it
        newest = sorted(runs.items(), key=lambda kv: kv[1].get("timestamp") or "")
        origin = {m: name for name, run in newest for m in run.get("metrics") or []}
        unrecorded = len(set(metrics) - set(origin))
        where = (
            f"each benchmark's commit and machine from `{sidecar}`, written by the run that "
            "measured it"
            if sidecar.is_file()
            else f"no `{sidecar}`: the runs that measured them recorded no commit or machine"
        )
        if unrecorded and sidecar.is_file():
            where += f" ({count(unrecorded, 'metric')} from runs that recorded none)"
        lines += [
            f"- {count(len(metrics), 'metric')}; {where}",
            "- regenerate: `python -m bench` (one: `python -m bench NAME`)",
            "",
            *head(["benchmark", "metric", "value", "target", "commit", "machine", "measured"]),
        ]
        for key in sorted(metrics):
            run = runs.get(origin.get(key, ""), {})
            git = run.get("git") or {}
            row = [
                origin.get(key, "not recorded"),
                f"`{key}`",
                short(float(metrics[key])),
                target_text(float(metrics[key]), (run.get("targets") or {}).get(key)),
                commit_text(git.get("commit"), bool(git.get("dirty"))),
                host_text(run.get("host") or {}),
                run.get("timestamp") or "not recorded",
            ]
            lines.append(table_row(row))
        lines.append("")
    else:
        lines += ["- **not generated**", "- regenerate: `python -m bench`", ""]
    lines += ["### Throughput measurements (`bench/throughput/`)", ""]
    found = sorted(throughput.glob("*.json")) if throughput.is_dir() else []
    if not found:
        lines += [
            "- **not generated**",
            "- regenerate: a benchmark that calls `agon.plan.hardware.write_measurement` on the "
            "machine measured (`bench/throughput/README.md`)",
            "",
        ]
        return "\n".join(lines)
    cols = [
        "file",
        "GPU kind",
        "model",
        "engine",
        "generation tok/s",
        "training tok/s",
        "date",
        "commit",
        "machine",
    ]
    lines += head(cols)
    for p in found:
        m = json.loads(p.read_text())
        machine = ((m.get("provenance") or {}).get("machine") or {}).get(
            "cpu_model"
        ) or "not recorded"
        row = [
            p.name,
            m.get("gpu_kind"),
            (m.get("model") or {}).get("name"),
            m.get("engine"),
            short(m.get("generation_tokens_per_s")),
            short(m.get("training_tokens_per_s")),
            m.get("date"),
            commit_text(m.get("git_commit"), False),
            machine,
        ]
        lines.append(table_row(["" if c is None else str(c) for c in row]))
    return "\n".join(lines + [""])


# ----------------------------------------------------------------------------- the cost


def nested_out_dirs(results: Path) -> list[Path]:
    """The folders directly under ``results`` that are another config's out_dir (the real
    tier's, the smoke run's): each holds its own tables' provenance or benchmark files."""
    if not results.is_dir():
        return []
    return sorted(
        d
        for d in results.iterdir()
        if d.is_dir()
        and d.name != "benchmarks"
        and ((d / "benchmarks").is_dir() or any(d.glob("*.provenance.json")))
    )


def tree_cost(results: Path) -> tuple[int, float, int]:
    """(benchmarked jobs, their summed seconds, bytes on disk) of one out_dir, the out_dirs
    nested in it left out."""
    seconds, jobs = 0.0, 0
    for tsv in sorted((results / "benchmarks").rglob("*.tsv")):
        secs = benchmark_seconds(tsv)
        if secs is not None:
            seconds, jobs = seconds + secs, jobs + 1
    skip = set(nested_out_dirs(results))
    size = 0
    stack = [results] if results.is_dir() else []
    while stack:
        for entry in stack.pop().iterdir():
            if entry in skip or entry.is_symlink():
                continue
            if entry.is_dir():
                stack.append(entry)
            elif entry.is_file():
                size += entry.stat().st_size
    return jobs, seconds, size


def size_text(size: int) -> str:
    """Bytes in GB (from what rounds to 1 GB) or MB, one decimal."""
    return f"{size / 1e9:.1f} GB" if round(size / 1e6, 1) >= 1000 else f"{size / 1e6:.1f} MB"


def count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def cost_section(results: Path) -> str:
    """What regenerating every tree cost: each out_dir's benchmarked jobs, their time summed
    (pretraining included; with two jobs at once the wall clock is shorter) and its size."""
    lines = [
        "## Regenerating everything",
        "",
        "Each results tree (this page's out_dir and the out_dirs nested in it): the jobs with a "
        "Snakemake benchmark file, their wall times summed (pretraining included; where jobs ran "
        "side by side the command's own wall clock is shorter) and the tree's size on disk "
        "(checkpoints included).",
        "",
        *head(["results tree", "benchmarked jobs", "job time, summed", "size on disk"]),
    ]
    if not results.is_dir():
        return "\n".join(lines[:4] + [f"- **not generated**: no `{results}`", ""])
    for tree in [results, *nested_out_dirs(results)]:
        jobs, seconds, size = tree_cost(tree)
        lines.append(table_row([f"`{tree}`", f"{jobs:,}", duration(seconds), size_text(size)]))
    return "\n".join(lines + [""])
