"""Run the benchmarks, print a table, write bench/results.json (a flat metric -> number map)
and bench/results.provenance.json (per benchmark: its metrics, the commit, the machine and when).

Each ``bench/bench_*.py`` exposes ``run() -> dict[str, float]`` and may expose ``TARGETS``:
``{metric: (">=" | "<=", value)}``. Ratios are measured side by side in one run, so they mean
something on a shared, noisy machine where absolute times do not.

    python -m bench              # all
    python -m bench grading      # only bench_grading.py
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from pathlib import Path

from agon.provenance import provenance

HERE = Path(__file__).resolve().parent


def write_provenance(
    path: Path,
    entries: dict,
    measured: dict[str, list[str]],
    targets: dict[str, tuple[str, float]],
) -> None:
    """Record, per benchmark just run, its metrics and their targets under this run's provenance
    (commit, machine, package versions, time); the other benchmarks keep their ``entries`` (the
    sidecar as read), as results.json keeps their numbers."""
    here = provenance()
    keep = ("git", "packages", "python", "host", "timestamp")
    for name, metrics in measured.items():
        aims = {m: list(targets[m]) for m in metrics if m in targets}
        entries[name] = {"metrics": metrics, "targets": aims, **{k: here[k] for k in keep}}
    path.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")


def main(argv: list[str]) -> int:
    names = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    wanted = argv or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {names}")
        return 2
    results: dict[str, float] = {}
    targets: dict[str, tuple[str, float]] = {}
    failed = []
    measured: dict[str, list[str]] = {}
    for name in wanted:
        mod = importlib.import_module(f"bench.bench_{name}")
        t0 = time.perf_counter()
        print(f"[bench] {name} ...", flush=True)
        try:
            got = mod.run()
            if not got:  # nothing measured (vLLM absent, say): its earlier numbers stay
                print(f"[bench] {name}: nothing measured", flush=True)
                continue
            results.update(got)
            measured[name] = sorted(got)
        except Exception:
            traceback.print_exc()
            failed.append(name)
            continue
        targets.update(getattr(mod, "TARGETS", {}))
        print(f"[bench] {name} done in {time.perf_counter() - t0:.1f}s", flush=True)
    out = HERE / "results.json"
    previous = json.loads(out.read_text()) if out.exists() else {}
    sidecar = HERE / "results.provenance.json"
    runs = json.loads(sidecar.read_text()) if sidecar.exists() else {}
    for name in measured:  # a benchmark run again: its old metrics go, renamed ones too
        for key in (runs.get(name) or {}).get("metrics") or []:
            previous.pop(key, None)
    out.write_text(json.dumps({**previous, **results}, indent=2, sort_keys=True) + "\n")
    write_provenance(sidecar, runs, measured, targets)
    print(f"\n{'metric':40s} {'value':>12s}  target")
    for key, value in results.items():
        target = ""
        if key in targets:
            op, ref = targets[key]
            ok = value >= ref if op == ">=" else value <= ref
            target = f"{op} {ref}  {'ok' if ok else 'MISSED'}"
        print(f"{key:40s} {value:12.4g}  {target}")
    print(f"\nwrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
