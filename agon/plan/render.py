"""A plan as a bill: a terminal page, a JSON document, or a CSV file (one row per job).

The page reads in one screen: what the target costs per table and per GPU kind (GPU-hours
held and used), the flags grouped by reason, the warnings, then one row per group of jobs
that cost the same (a rule's family x task x method or system, its seeds a column), and what
the plan assumed, said once. ``--jobs`` lists every job instead, with each one's flags. The
JSON keeps everything, per job.
"""

from __future__ import annotations

import csv
import io
import json
import re
import textwrap
from collections import defaultdict
from dataclasses import asdict
from typing import Any

import agon.plan.hardware as hw
import agon.plan.jobs as dag
import agon.plan.memory as mm
from agon.plan.memory import Breakdown
from agon.plan.planner import SECONDS_PER_HOUR, JobPlan, Plan

GIB, HOUR = hw.GIB, SECONDS_PER_HOUR
# what a flag is about, for the page's summary: a marker in its text, and the reason it names
FLAG_KINDS = (
    ("memory: ", "memory over a GPU"),
    ("host memory: ", "host memory over resources.*.mem_mb"),
    ("never completes", "runtime: never completes (no checkpoint within a run)"),
    ("--retries", "runtime: completes in more runs than the SLURM profile's retries"),
    ("vLLM's share", "a vLLM share that holds no sequence"),
    ("not planned", "not planned (unknown model dimensions)"),
)
MEMORY, NEVER, RETRIES = FLAG_KINDS[0][1], FLAG_KINDS[2][1], FLAG_KINDS[3][1]
WRAP = 120  # the page's prose (flags, warnings, assumptions) wraps here
NAME_WIDTH = 40  # the groups' name column; longer lists of names wrap, whole


def _si(x: float) -> str:
    """``x`` with a short SI suffix (1.2k, 3.4M, 5.6G, 7.8T, 9.1P, 2.3E, 4.5Z, 6.7Y)."""
    for i, unit in enumerate("YZEPTGMk"):
        if abs(x) >= 1e24 / 1000**i:
            return f"{x / (1e24 / 1000**i):.3g}{unit}"
    return f"{x:.3g}"


def _wrap(text: str, first: str = "  - ", rest: str = "    ") -> list[str]:
    return textwrap.wrap(text, WRAP, initial_indent=first, subsequent_indent=rest)


def breakdown_gib(b: Breakdown) -> dict[str, float]:
    """A breakdown in GiB, largest first."""
    return {k: v / GIB for k, v in sorted(b.components.items(), key=lambda kv: -kv[1])}


def length_kind(j: JobPlan) -> str:
    """``measured``, ``cap`` or ``mixed``: where the job's completion lengths came from."""
    kinds = {"measured" if s.split("(", 1)[-1].startswith("measured") else "cap" for s in j.lengths}
    return "-" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def rate_kind(j: JobPlan) -> str:
    """``assumed``, ``measured`` or ``-`` (nothing timed): how the job's time was priced."""
    if not j.throughput:
        return "-"
    return "assumed" if j.assumed else "measured"


def flag_kind(flag: str) -> str:
    """The reason a flag names (:data:`FLAG_KINDS`), or its own words before the first colon."""
    return next((kind for mark, kind in FLAG_KINDS if mark in flag), flag.split(":", 1)[0])


def job_row(j: JobPlan) -> dict[str, Any]:
    """The JSON form of one job's plan."""
    mem, c, jb = j.memory, j.chunks, j.job
    row = {"job": jb.label, "output": jb.output}
    row |= {k: getattr(jb, k) for k in ("rule", "family", "task", "method", "system", "variant")}
    row |= {"seed": jb.seed, "resources": j.resources, "gpus_held": j.gpus_held}
    row |= {"gpus_used": j.gpus_used, "steps": j.steps}
    row |= {k: getattr(j, k) for k in ("tokens_generated", "tokens_helpers", "tokens_trained")}
    row |= {"flops_generation": j.flops_generation, "flops_training": j.flops_training}
    row["memory"] = mem and {
        "per_gpu_gib": mem.per_device.total / GIB,
        "devices": {
            name: {"gib": b.total / GIB, "breakdown_gib": breakdown_gib(b)}
            for name, b in mem.devices.items()
        },
        "placement": mem.placement.how,
        "parts": [
            asdict(part) | {"gib": sum(b.total for b in held) / GIB} for part, held in mem.placed
        ],
        "host_gib": mem.host / GIB,
    }
    row |= {"in_flight": j.concurrency, "kv_room_gib": {k: v / GIB for k, v in j.kv_room.items()}}
    row["hours"] = None if j.seconds is None else j.seconds / HOUR
    row["runs"] = c and {
        "count": c.count, "checkpoint_interval_hours": c.interval / HOUR,
        "restart_minutes": c.restart / 60, "redone_hours": c.redone / HOUR,
        "added_hours": c.extra / HOUR,
    }  # fmt: skip
    row |= {"gpu_hours": j.gpu_hours, "gpu_hours_used": j.gpu_hours_used, "lengths": j.lengths}
    row |= {"length_source": length_kind(j), "throughput": j.throughput}
    row |= {"throughput_source": rate_kind(j), "phases": j.phases, "flags": j.flags}
    return row | {"notes": j.notes, "warnings": j.warnings}


def assumptions(p: Plan) -> list[str]:
    """What the plan assumed, said once."""
    lengths = (
        f"measured in {p.lengths_from} where found, else the cap (max_new_tokens)"
        if p.lengths_from
        else "the cap (max_new_tokens; --lengths-from DIR reads measured means)"
    )
    out = [
        f"GPU kind {p.gpu}: {hw.GPU_KINDS[p.gpu].source}; memory in GiB (2^30 bytes)",
        f"completion lengths: {lengths}",
    ]
    if any(j.assumed for j in p.jobs):
        out.append(
            f"throughput {hw.ASSUMED}: decode at {hw.ASSUMED_DECODE_EFFICIENCY['vllm']:g} (vLLM) "
            f"/ {hw.ASSUMED_DECODE_EFFICIENCY['hf']:g} (transformers) of the memory-bandwidth "
            f"bound, training and prefill at {hw.ASSUMED_COMPUTE_EFFICIENCY:g} of peak bf16 FLOPs"
        )
    if any(j.chunks for j in p.jobs):
        out.append(
            f"a restart, {hw.ASSUMED}: {dag.ASSUMED_START_S:.0f} s to start, its checkpoint and "
            f"models read at {dag.ASSUMED_LOAD_BYTES_PER_S / 1e9:g} GB/s, "
            f"{dag.ASSUMED_VLLM_WARMUP_S:.0f} s of warm-up per vLLM engine"
        )
    if any(j.memory and j.memory.placement.gpus for j in p.jobs):
        out.append(mm.ASSUMED_NOTE)
    launch = "accelerate with FSDP2, one process per GPU" if p.fsdp else "one process per job"
    out.append(f"launch: {launch}; placement as agon train builds it (agon.engines.placement)")
    return out + [
        f"placement: {h}" for h in sorted({j.memory.placement.how for j in p.jobs if j.memory})
    ]


def warnings(p: Plan) -> list[str]:
    """What the plan warns of once, not per job: pure 16-bit weights that lose AdamW's steps."""
    return list(dict.fromkeys(w for j in p.jobs for w in j.warnings))


def to_json(p: Plan, kinds: dict[str, Plan] | None = None) -> dict[str, Any]:
    """The whole plan as JSON-ready data (``kinds``: the same plan on other GPU kinds)."""
    return {
        "gpu": p.gpu,
        "target": p.target,
        "fsdp": p.fsdp,
        "jobs": [job_row(j) for j in p.jobs],
        "totals": {t: p.totals(t) for t in p.tables} | {"all": p.totals()},
        "by_gpu_kind": {k: q.totals() for k, q in (kinds or {p.gpu: p}).items()},
        "flagged": [{"job": j.job.label, "flags": j.flags} for j in p.jobs if j.flags],
        "warnings": warnings(p),
        "assumptions": assumptions(p),
    }


# fmt: off
CSV_COLUMNS = {  # column -> its value of a job's JSON row
    "job": lambda r: r["job"], "rule": lambda r: r["rule"], "family": lambda r: r["family"],
    "task": lambda r: r["task"], "method": lambda r: r["method"], "system": lambda r: r["system"],
    "variant": lambda r: r["variant"], "seed": lambda r: r["seed"],
    "gpus": lambda r: r["resources"]["gpus"], "gpus_used": lambda r: r["gpus_used"],
    "mem_mb": lambda r: r["resources"]["mem_mb"],
    "runtime_min": lambda r: r["resources"]["runtime"],
    "tokens_generated": lambda r: round(r["tokens_generated"]),
    "tokens_helpers": lambda r: round(r["tokens_helpers"]),
    "tokens_trained": lambda r: round(r["tokens_trained"]),
    "flops_generation": lambda r: f"{r['flops_generation']:.4g}",
    "flops_training": lambda r: f"{r['flops_training']:.4g}",
    "memory_per_gpu_gib": lambda r: r["memory"] and f"{r['memory']['per_gpu_gib']:.2f}",
    "host_memory_gib": lambda r: r["memory"] and f"{r['memory']['host_gib']:.2f}",
    "hours": lambda r: "" if r["hours"] is None else f"{r['hours']:.3f}",
    "runs": lambda r: r["runs"]["count"] if r["runs"] else 1,
    "gpu_hours": lambda r: f"{r['gpu_hours']:.3f}",
    "gpu_hours_used": lambda r: f"{r['gpu_hours_used']:.3f}",
    "lengths": lambda r: r["length_source"],
    "throughput": lambda r: hw.ASSUMED if r["throughput_source"] == "assumed"
    else r["throughput_source"],
    "flags": lambda r: " | ".join(r["flags"]),
}
# fmt: on


def to_csv(p: Plan) -> str:
    """One CSV row per job."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS))
    w.writeheader()
    for j in p.jobs:
        row = job_row(j)
        w.writerow({k: ("" if (v := f(row)) is None else v) for k, f in CSV_COLUMNS.items()})
    return buf.getvalue()


# ----------------------------------------------------------------------------- the page


def _runs(j: JobPlan) -> str:
    """The submissions a job takes: 1, N (resumed chunks), ``never`` (no chunk checkpoints)."""
    if j.seconds is None or not j.memory:
        return "-"
    if j.chunks is None:
        return "1"
    return str(j.chunks.count) if j.chunks.count else "never"


def _per_gpu(j: JobPlan) -> str:
    """Each GPU's peak in GiB (identical ones as ``N x``), servers marked ``s``."""
    if j.memory is None or not j.gpus_held:
        return "-"
    gpus = [b.total / GIB for name, b in j.memory.devices.items() if name.startswith("GPU")]
    servers = [b.total / GIB for name, b in j.memory.devices.items() if name.startswith("server")]
    said = f"{len(gpus)}x {gpus[0]:.1f}" if len(gpus) > 2 and len(set(gpus)) == 1 else ""
    said = said or "/".join(f"{g:.1f}" for g in gpus)
    return said + "".join(f" +s {s:.1f}" for s in servers)


def _in_flight(j: JobPlan) -> str:
    """Sequences in flight per generation phase of the policies, distinct values in order."""
    seen = list(dict.fromkeys(round(v) for v in j.concurrency.values()))
    return "/".join(str(v) for v in seen) or "-"


def _kv(j: JobPlan) -> str:
    """Each engine's KV room in GiB (distinct values)."""
    seen = list(dict.fromkeys(round(v / GIB, 1) for v in j.kv_room.values()))
    return "/".join(f"{v:.1f}" for v in seen) or "-"


def _cells(j: JobPlan) -> tuple[str, ...]:
    """What a row shows of a job (its group's when the group's jobs agree)."""
    hours = "-" if j.seconds is None else f"{j.seconds / HOUR:.1f}"
    gpus = f"{j.gpus_held}/{j.gpus_used}" if j.gpus_held else "0"
    return (gpus, _per_gpu(j), hours, _runs(j), _in_flight(j), _kv(j))


# fmt: off
COLUMNS = (
    ("seeds", 6), ("jobs", 4), ("GPUs", 5), ("GiB per GPU", 11), ("hours", 7), ("runs", 5),
    ("in flight", 9), ("KV GiB", 9), ("GPU-h held", 10), ("GPU-h used", 10), ("flags", 5),
)
# fmt: on


def _head(first: str, width: int) -> list[str]:
    cols = " ".join(f"{name:>{w}}" for name, w in COLUMNS)
    head = f"{first:{width}} {cols}"
    return [head, "-" * len(head)]


def _row(name: str, width: int, jobs: list[JobPlan]) -> list[str]:
    """A row of ``jobs`` (one job, or a group whose cells agree): the name wraps at ``width``
    between names, never cut."""
    seeds = _seeds([j.job.seed for j in jobs])
    held = sum(j.gpu_hours for j in jobs)
    used = sum(j.gpu_hours_used for j in jobs)
    flags = sum(1 for j in jobs if j.flags)
    values = (seeds, str(len(jobs)), *_cells(jobs[0]), f"{held:,.1f}", f"{used:,.1f}")
    cells = " ".join(f"{v:>{w}}" for v, (_, w) in zip((*values, str(flags or "")), COLUMNS))
    indent = " " * (len(name) - len(name.lstrip()))
    lines = textwrap.wrap(name.lstrip(), width, initial_indent=indent, subsequent_indent=indent)
    return [f"{lines[0]:{width}} {cells}", *lines[1:]]


def _seeds(seeds: list) -> str:
    s = sorted({x for x in seeds if x is not None})
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}-{s[-1]}"
    return ",".join(map(str, s)) or "-"


def _names(jobs: list[JobPlan]) -> str:
    """The methods or systems of ``jobs``, in full, each once."""
    return ", ".join(dict.fromkeys(j.job.method or j.job.system or j.job.rule for j in jobs))


def _groups(p: Plan) -> dict[str, dict[str, list[tuple[str, list[JobPlan]]]]]:
    """rule -> family task (variant) -> (names, jobs): the jobs of one rule, family, task and
    variant that show the same cells, their methods or systems named in full, in DAG order;
    jobs that cost nothing one group per rule."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for j in p.jobs:
        jb = j.job
        if j.memory is None:
            out["no model compute"][""][()].append(j)
            continue
        where = " ".join(x for x in (jb.family, jb.task, jb.variant) if x)
        out[jb.rule][where][_cells(j)].append(j)
    return {
        rule: {
            where: [(_names(js), js) for js in cells.values()] for where, cells in wheres.items()
        }
        for rule, wheres in out.items()
    }


def _total_lines(p: Plan, kinds: dict[str, Plan]) -> list[str]:
    """Totals per table, then the whole target on each GPU kind."""
    head = (
        f"{'totals':24} {'jobs':>5} {'GPU-h held':>11} {'GPU-h used':>11} {'idle':>9} "
        f"{'tokens gen':>10} {'trained':>8} {'FLOPs':>7} {'GiB/GPU':>8} {'flagged':>8}"
    )
    lines = [head]
    for t in (*p.tables, None):
        s = p.totals(t)
        lines.append(
            f"  {t or 'all (each job once)':22} {s['jobs']:>5} {s['gpu_hours']:>11,.0f} "
            f"{s['gpu_hours_used']:>11,.0f} {s['gpu_hours'] - s['gpu_hours_used']:>9,.0f} "
            f"{_si(s['tokens_generated']):>10} {_si(s['tokens_trained']):>8} "
            f"{_si(s['flops_generation'] + s['flops_training']):>7} "
            f"{s['peak_memory_per_gpu'] / GIB:>8.1f} {s['flagged']:>8}"
        )
    if len(kinds) > 1 and any(j.gpus_held for j in p.jobs):
        lines.append(f"{'on each GPU kind (all)':24}")
        for k, q in kinds.items():
            s, mem = q.totals(), hw.GPU_KINDS[k].memory_bytes
            name = f"{k} ({mem / GIB:.1f} GiB)" + (" <-" if k == p.gpu else "")
            over = sum(1 for j in q.jobs if any(f.startswith("memory:") for f in j.flags))
            lines.append(
                f"  {name:22} {s['jobs']:>5} {s['gpu_hours']:>11,.0f} "
                f"{s['gpu_hours_used']:>11,.0f} {s['gpu_hours'] - s['gpu_hours_used']:>9,.0f} "
                f"{'':>10} {'':>8} {'':>7} "
                f"{s['peak_memory_per_gpu'] / GIB:>8.1f} {s['flagged']:>8}  ({over} over a GPU)"
            )
    return lines


def _flag_lines(p: Plan) -> list[str]:
    """The flags grouped by reason: how many jobs, of which methods or systems."""
    flagged = [j for j in p.jobs if j.flags]
    lines = [f"flags: {len(flagged)} of {len(p.jobs)} jobs (--jobs: each job's own)"]
    by: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    worst: dict[str, float] = defaultdict(float)
    for j in flagged:
        for kind in dict.fromkeys(flag_kind(f) for f in j.flags):
            by[kind][f"{j.job.rule} {j.job.method or j.job.system}"] += 1
        for f in j.flags:
            if f.startswith("memory:"):
                gib = float(re.search(r"holds ([\d.]+) GiB", f).group(1))
                worst[MEMORY] = max(worst[MEMORY], gib)
        if j.chunks is not None:
            worst[RETRIES] = max(worst[RETRIES], j.chunks.count)
            worst[NEVER] = max(worst[NEVER], j.chunks.interval / HOUR)
    said = {MEMORY: "up to {:.1f} GiB", RETRIES: "up to {:.0f} runs"}
    said[NEVER] = "checkpoints up to {:.1f} h apart"
    for kind, who in by.items():
        top = f", {said[kind].format(worst[kind])}" if kind in worst else ""
        names = ", ".join(f"{w} {n}" for w, n in who.items())
        lines += _wrap(f"{kind}: {sum(who.values())} jobs{top}: {names}", "  ", "      ")
    return lines


def to_text(p: Plan, kinds: dict[str, Plan] | None = None, jobs: bool = False) -> str:
    """The page: totals (per table, per GPU kind), flags, warnings, the grouped jobs (every
    job with ``jobs``), assumptions."""
    kinds = kinds or {p.gpu: p}
    lines = [f"agon plan: {p.target} on {p.gpu} ({hw.GPU_KINDS[p.gpu].source})", ""]
    lines += _total_lines(p, kinds) + [""] + _flag_lines(p)
    if warned := warnings(p):
        lines += ["", "warnings"] + [line for w in warned for line in _wrap(w)]
    legend = (
        "GPUs: held/used; hours: wall time (restarts included); runs: submissions it takes; "
        "in flight: sequences per generation phase; KV GiB: each engine's KV room"
    )
    lines += [""] + _wrap(legend, "", "")
    if jobs:
        width = max(len(j.job.label) for j in p.jobs)
        lines += _head("job", width)
        for j in p.jobs:
            lines += _row(j.job.label, width, [j])
        flagged = [j for j in p.jobs if j.flags]
        lines += ["", f"flagged jobs ({len(flagged)})"]
        for j in flagged:
            lines += [f"  {j.job.label}"] + [
                x for f in j.flags for x in _wrap(f, "    - ", "      ")
            ]
    else:
        lines += _head("rule / family task / methods or systems", NAME_WIDTH)
        for rule, wheres in _groups(p).items():
            lines.append(rule)
            for where, groups in wheres.items():
                if where:
                    lines.append(f"  {where}")
                for names, js in groups:
                    lines += _row(f"    {names}", NAME_WIDTH, js)
    lines += ["", "assumptions"] + [line for a in assumptions(p) for line in _wrap(a)]
    return "\n".join(lines) + "\n"


def dumps(p: Plan, kinds: dict[str, Plan] | None = None) -> str:
    """The JSON document as text."""
    return json.dumps(to_json(p, kinds), indent=2) + "\n"
