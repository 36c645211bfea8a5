"""A plan as a terminal table, a JSON document, or a CSV file (one row per job)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from agon.plan.hardware import (
    ASSUMED,
    ASSUMED_COMPUTE_EFFICIENCY,
    ASSUMED_DECODE_EFFICIENCY,
    GPU_KINDS,
)
from agon.plan.planner import JobPlan, Plan, breakdown_gb

SI_PREFIXES = (
    ("Y", 1e24),
    ("Z", 1e21),
    ("E", 1e18),
    ("P", 1e15),
    ("T", 1e12),
    ("G", 1e9),
    ("M", 1e6),
    ("k", 1e3),
)
GB = 1e9  # memory is shown in GB (10^9 bytes), as GPU vendors state it (an H200 has 141 GB)
CSV_FIELDS = (
    "job",
    "rule",
    "family",
    "task",
    "method",
    "system",
    "variant",
    "seed",
    "gpus",
    "mem_mb",
    "runtime_min",
    "tokens_generated",
    "tokens_helpers",
    "tokens_trained",
    "flops_generation",
    "flops_training",
    "memory_per_gpu_gb",
    "host_memory_gb",
    "hours",
    "gpu_hours",
    "lengths",
    "throughput",
    "flags",
)


def _si(x: float) -> str:
    """``x`` with a short SI suffix (1.2k, 3.4M, 5.6G, 7.8T, 9.1P, 2.3E, 4.5Z, 6.7Y)."""
    for unit, scale in SI_PREFIXES:
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def length_kind(j: JobPlan) -> str:
    """``measured``, ``cap`` or ``mixed``: where the job's completion lengths came from."""
    kinds = {"measured" if s.split("(", 1)[-1].startswith("measured") else "cap" for s in j.lengths}
    return "-" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def rate_kind(j: JobPlan) -> str:
    """``assumed``, ``measured`` or ``-`` (nothing timed): how the job's time was priced."""
    if not j.throughput:
        return "-"
    return "assumed" if j.assumed else "measured"


def job_row(j: JobPlan) -> dict[str, Any]:
    """The JSON form of one job's plan."""
    mem = j.memory
    return {
        "job": j.job.label,
        "output": j.job.output,
        "rule": j.job.rule,
        "family": j.job.family,
        "task": j.job.task,
        "method": j.job.method,
        "system": j.job.system,
        "variant": j.job.variant,
        "seed": j.job.seed,
        "resources": j.resources,
        "steps": j.steps,
        "tokens_generated": j.tokens_generated,
        "tokens_helpers": j.tokens_helpers,
        "tokens_trained": j.tokens_trained,
        "flops_generation": j.flops_generation,
        "flops_training": j.flops_training,
        "memory": None
        if mem is None
        else {
            "per_gpu_gb": mem.per_device.total / GB,
            "breakdown_gb": breakdown_gb(mem.per_device),
            "devices": mem.devices,
            "placement": mem.placement,
            "host_gb": mem.host / 1e9,
        },
        "hours": None if j.seconds is None else j.seconds / 3600,
        "gpu_hours": j.gpu_hours,
        "lengths": j.lengths,
        "length_source": length_kind(j),
        "throughput": j.throughput,
        "throughput_source": rate_kind(j),
        "phases": j.phases,
        "flags": j.flags,
        "notes": j.notes,
        "warnings": j.warnings,
    }


def assumptions(p: Plan) -> list[str]:
    """What the plan assumed, said once."""
    out = [
        f"GPU kind {p.gpu}: {GPU_KINDS[p.gpu].source}",
        "completion lengths: "
        + (
            f"measured in {p.lengths_from} where found, else the cap (max_new_tokens)"
            if p.lengths_from
            else "the cap (max_new_tokens; --lengths-from DIR reads measured means)"
        ),
    ]
    if any(j.assumed for j in p.jobs):
        out.append(
            f"throughput {ASSUMED}: decode at {ASSUMED_DECODE_EFFICIENCY['vllm']:g} (vLLM) / "
            f"{ASSUMED_DECODE_EFFICIENCY['hf']:g} (transformers) of the memory-bandwidth bound, "
            f"training and prefill at {ASSUMED_COMPUTE_EFFICIENCY:g} of peak bf16 FLOPs"
        )
    placements = sorted({j.memory.placement for j in p.jobs if j.memory})
    out += [f"placement: {pl}" for pl in placements]
    return out


def warnings(p: Plan) -> list[str]:
    """What the plan warns of once, not per job: pure 16-bit weights that lose AdamW's steps."""
    return list(dict.fromkeys(w for j in p.jobs for w in j.warnings))


def to_json(p: Plan) -> dict[str, Any]:
    """The whole plan as JSON-ready data."""
    return {
        "gpu": p.gpu,
        "target": p.target,
        "jobs": [job_row(j) for j in p.jobs],
        "totals": {t: p.totals(t) for t in p.tables} | {"all": p.totals()},
        "flagged": [{"job": j.job.label, "flags": j.flags} for j in p.jobs if j.flags],
        "warnings": warnings(p),
        "assumptions": assumptions(p),
    }


def to_csv(p: Plan) -> str:
    """One CSV row per job."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    for j in p.jobs:
        mem = j.memory
        w.writerow(
            {
                "job": j.job.label,
                "rule": j.job.rule,
                "family": j.job.family,
                "task": j.job.task,
                "method": j.job.method,
                "system": j.job.system,
                "variant": j.job.variant,
                "seed": j.job.seed,
                "gpus": j.resources["gpus"],
                "mem_mb": j.resources["mem_mb"],
                "runtime_min": j.resources["runtime"],
                "tokens_generated": round(j.tokens_generated),
                "tokens_helpers": round(j.tokens_helpers),
                "tokens_trained": round(j.tokens_trained),
                "flops_generation": f"{j.flops_generation:.4g}",
                "flops_training": f"{j.flops_training:.4g}",
                "memory_per_gpu_gb": "" if mem is None else f"{mem.per_device.total / GB:.2f}",
                "host_memory_gb": "" if mem is None else f"{mem.host / 1e9:.2f}",
                "hours": "" if j.seconds is None else f"{j.seconds / 3600:.3f}",
                "gpu_hours": f"{j.gpu_hours:.3f}",
                "lengths": length_kind(j),
                "throughput": ASSUMED if j.assumed else rate_kind(j),
                "flags": " | ".join(j.flags),
            }
        )
    return buf.getvalue()


def _total_line(p: Plan, table: str | None) -> str:
    """One table's totals (None: every job of the plan once)."""
    s = p.totals(table)
    parts = [
        f"  {table or 'all (each job once)':22} {s['jobs']:>4} jobs",
        f"{s['gpu_hours']:>10.0f} GPU-h",
        f"{_si(s['tokens_generated']):>7} tokens generated",
        f"{_si(s['tokens_trained']):>7} trained",
        f"{_si(s['flops_generation'] + s['flops_training']):>7} FLOPs",
        f"peak {s['peak_memory_per_gpu'] / GB:.0f} GB/GPU",
        f"{s['flagged']} flagged",
    ]
    if s["assumed_throughput"]:
        parts.append(f"({s['assumed_throughput']} jobs' throughput {ASSUMED})")
    if s["untimed"]:
        parts.append(f"({s['untimed']} jobs not timed)")
    return "  ".join(parts)


def to_text(p: Plan, width: int = 44) -> str:
    """The terminal table: per job, then totals per table, flagged jobs, assumptions."""
    head = (
        f"{'job':{width}} {'gpu':>3} {'len':>8} {'gen tok':>8} {'train tok':>9} {'gen FLOP':>8} "
        f"{'trn FLOP':>8} {'GB/GPU':>8} {'host GB':>8} {'hours':>7} {'GPU-h':>8} "
        f"{'throughput':>21} flags"
    )
    lines = [f"agon plan: {p.target} on {p.gpu}", head, "-" * len(head)]
    for j in p.jobs:
        mem = j.memory
        gb = "-" if mem is None else f"{mem.per_device.total / GB:.1f}"
        host = "-" if mem is None else f"{mem.host / 1e9:.1f}"
        hours = "-" if j.seconds is None else f"{j.seconds / 3600:.1f}"
        rate = ASSUMED if j.assumed else rate_kind(j)
        label = j.job.label if len(j.job.label) <= width else j.job.label[: width - 1] + "~"
        lines.append(
            f"{label:{width}} {j.resources['gpus']:>3} {length_kind(j):>8} "
            f"{_si(j.tokens_generated):>8} {_si(j.tokens_trained):>9} "
            f"{_si(j.flops_generation):>8} {_si(j.flops_training):>8} {gb:>8} {host:>8} "
            f"{hours:>7} {j.gpu_hours:>8.1f} {rate:>21} {len(j.flags) or ''}"
        )
    lines += ["", "totals"] + [_total_line(p, t) for t in (*p.tables, None)]
    flagged = [j for j in p.jobs if j.flags]
    lines += ["", f"flagged jobs ({len(flagged)})"]
    for j in flagged:
        lines += [f"  {j.job.label}"] + [f"    - {f}" for f in j.flags]
    if warned := warnings(p):
        lines += ["", "warnings"] + [f"  - {w}" for w in warned]
    lines += ["", "assumptions"] + [f"  - {a}" for a in assumptions(p)]
    return "\n".join(lines) + "\n"


def dumps(p: Plan) -> str:
    """The JSON document as text."""
    return json.dumps(to_json(p), indent=2) + "\n"
