"""Sandbox throughput and the isolation's own cost, against the same program run bare.

Every sandboxed run counted here is a real run: the pool runs each distinct (program, tests)
pair once, so the throughput programs differ (a comment with their number).

``sandbox.runs_per_s``: distinct one-test programs graded per second through a
:class:`SandboxPool` of 2 workers (the 2-core target machine): a fresh sandbox each.
``sandbox.tests_per_s``: stdin tests per second for one program against 200 tests, the shape
of a CodeContests problem (one sandbox, one fork per test: :mod:`agon.sandbox.batch`).
``sandbox.over_same_flags``: per test, grading a program on ``TESTS`` tests in the sandbox
over running it once per test as ``python -I -S prog.py`` (the interpreter flags the sandbox
uses), with no sandbox at all: the cost of the isolation on a typical multi-test problem.
``sandbox.single_over_same_flags``: the same for a one-test program (a function-call harness
is one), where nothing is amortized: namespaces, uid drop, dir and interpreter are paid whole.
``sandbox.over_bare_subprocess``: a one-test sandboxed run over a bare ``python prog.py``
(with ``site``), what grading costs over just running the program.
All kinds of run are interleaved in one loop so that machine noise hits them alike.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from agon.sandbox import SandboxPool, detect_isolation, grade_program, run_program

TARGETS = {"sandbox.over_same_flags": ("<=", 1.5)}

PROGRAM = (
    "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums), max(nums))\n"
)
STDIN = " ".join(str(i) for i in range(1000)) + "\n"
EXPECTED = f"{sum(range(1000))} 999"
TESTS = 10  # tests per program for over_same_flags
MANY_TESTS = 200  # tests for tests_per_s
ROUNDS = 15  # interleaved rounds for the overhead ratios
POOL_RUNS = 120  # distinct programs graded through the pool for throughput
POOL_WORKERS = 2


def _tests(n: int) -> list[tuple[str, str]]:
    out = []
    for k in range(n):
        nums = list(range(k, k + 1000))
        out.append((" ".join(map(str, nums)) + "\n", f"{sum(nums)} {max(nums)}"))
    return out


def _bare(cmd: list[str], tests: list[tuple[str, str]]) -> float:
    t0 = time.perf_counter()
    for stdin, expected in tests:
        out = subprocess.run(cmd, input=stdin.encode(), capture_output=True, timeout=30, check=True)
        assert out.stdout.decode().split() == expected.split()
    return time.perf_counter() - t0


def _boxed(tests: list[tuple[str, str]]) -> float:
    t0 = time.perf_counter()
    v = grade_program(PROGRAM, tests, timeout_s=30)
    assert v.status == "pass" and v.tests_passed == len(tests), v
    return time.perf_counter() - t0


def run() -> dict[str, float]:
    level = detect_isolation()
    print(f"[bench] sandbox isolation: {level}", flush=True)
    tests, one = _tests(TESTS), [(STDIN, EXPECTED)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "prog.py")
        with open(path, "w") as f:
            f.write(PROGRAM)
        same_cmd, plain_cmd = [sys.executable, "-I", "-S", path], [sys.executable, path]
        for _ in range(3):  # warm the page cache and the isolation probe
            _bare(plain_cmd, one)
            run_program(PROGRAM, STDIN)
        same, boxed, same1, boxed1, plain1 = [], [], [], [], []
        for _ in range(ROUNDS):
            same.append(_bare(same_cmd, tests) / TESTS)
            boxed.append(_boxed(tests) / TESTS)
            same1.append(_bare(same_cmd, one))
            plain1.append(_bare(plain_cmd, one))
            boxed1.append(_boxed(one))
    many = _tests(MANY_TESTS)
    many_s = statistics.median(_boxed(many) for _ in range(3))
    programs = [f"# program {i}\n{PROGRAM}" for i in range(POOL_RUNS)]
    with SandboxPool(workers=POOL_WORKERS) as pool:
        t0 = time.perf_counter()
        verdicts = pool.grade(programs, [one] * POOL_RUNS, timeout_s=30)
        pool_s = time.perf_counter() - t0
    assert all(v.status == "pass" for v in verdicts)
    med = statistics.median
    return {
        "sandbox.runs_per_s": POOL_RUNS / pool_s,
        "sandbox.tests_per_s": MANY_TESTS / many_s,
        "sandbox.test_ms": 1000 * med(boxed),
        "sandbox.same_flags_test_ms": 1000 * med(same),
        "sandbox.over_same_flags": med(boxed) / med(same),
        "sandbox.run_ms": 1000 * med(boxed1),
        "sandbox.single_over_same_flags": med(boxed1) / med(same1),
        "sandbox.over_bare_subprocess": med(boxed1) / med(plain1),
        "sandbox.namespaces": 1.0 if level == "namespaces" else 0.0,
    }
