"""Sandbox throughput and per-run overhead against a bare subprocess.

``sandbox.runs_per_s``: graded runs per second through a :class:`SandboxPool` of 2 workers
(the 2-core target machine) on a typical small stdin/stdout solution.
``sandbox.over_bare_subprocess``: median time of one sandboxed run over the median time of a
bare ``subprocess.run([python, prog.py], input=...)`` of the same program (the issue's
definition: what grading in the sandbox costs over just running the program).
``sandbox.over_same_flags``: the same against ``python -I -S prog.py``, the interpreter flags
the sandbox itself uses (standard library only, no ``site``), so it is the cost of the
isolation alone (namespaces, init shell, uid drop, bootstrap, temp dir). All three kinds of
run are interleaved in one loop so that machine noise hits them alike.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from agon.sandbox import SandboxPool, detect_isolation, run_program

TARGETS = {"sandbox.over_bare_subprocess": ("<=", 1.5)}

PROGRAM = (
    "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums), max(nums))\n"
)
STDIN = " ".join(str(i) for i in range(1000)) + "\n"
EXPECTED = f"{sum(range(1000))} 999"
PAIRS = 40  # interleaved (same-flags, bare, sandboxed) triples for the overhead ratios
POOL_RUNS = 120  # runs graded through the pool for throughput
POOL_WORKERS = 2


def run() -> dict[str, float]:
    level = detect_isolation()
    print(f"[bench] sandbox isolation: {level}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "prog.py")
        with open(path, "w") as f:
            f.write(PROGRAM)
        same_cmd, plain_cmd = [sys.executable, "-I", "-S", path], [sys.executable, path]
        same, plain, boxed = [], [], []
        for _ in range(3):  # warm the page cache and the isolation probe
            subprocess.run(plain_cmd, input=STDIN.encode(), capture_output=True, check=True)
            run_program(PROGRAM, STDIN)
        for _ in range(PAIRS):
            for cmd, times in ((same_cmd, same), (plain_cmd, plain)):
                t0 = time.perf_counter()
                out = subprocess.run(
                    cmd, input=STDIN.encode(), capture_output=True, timeout=30, check=True
                )
                times.append(time.perf_counter() - t0)
                assert out.stdout.decode().split() == EXPECTED.split()
            t0 = time.perf_counter()
            res = run_program(PROGRAM, STDIN, timeout_s=30)
            boxed.append(time.perf_counter() - t0)
            assert res.status == "ok" and res.stdout.split() == EXPECTED.split(), res
    with SandboxPool(workers=POOL_WORKERS) as pool:
        t0 = time.perf_counter()
        verdicts = pool.grade(
            [PROGRAM] * POOL_RUNS, [[(STDIN, EXPECTED)]] * POOL_RUNS, timeout_s=30
        )
        pool_s = time.perf_counter() - t0
    assert all(v.status == "pass" for v in verdicts)
    return {
        "sandbox.runs_per_s": POOL_RUNS / pool_s,
        "sandbox.run_ms": 1000 * statistics.median(boxed),
        "sandbox.bare_run_ms": 1000 * statistics.median(plain),
        "sandbox.same_flags_run_ms": 1000 * statistics.median(same),
        "sandbox.over_bare_subprocess": statistics.median(boxed) / statistics.median(plain),
        "sandbox.over_same_flags": statistics.median(boxed) / statistics.median(same),
        "sandbox.namespaces": 1.0 if level == "namespaces" else 0.0,
    }
