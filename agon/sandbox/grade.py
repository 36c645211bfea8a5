"""Grade a program against stdin/stdout tests, and the pool that grades many at once.

Output comparison is by whitespace-separated tokens (``outputs_match``): trailing spaces,
blank lines and line breaks do not matter, every token must be equal. This is the usual
judge for TACO / CodeContests style problems without a special checker.

Function-call tests (HumanEval, LiveCodeBench functional, TACO ``fn_name``) are graded by a
harness program (:mod:`agon.sandbox.harness`) run in the same sandbox; to the grader it is an
ordinary stdin/stdout test whose expected output is a per-grading random nonce.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from agon.grading.verdict import Verdict
from agon.sandbox.result import RunResult
from agon.sandbox.run import STDOUT_CAP, run_program

VERDICTS = ("pass", "wrong_answer", "timeout", "memory", "runtime_error", "sandbox_error")
Test = tuple[str, str]  # (stdin, expected stdout)


def outputs_match(got: str, expected: str) -> bool:
    """Token-wise equality of two outputs (whitespace layout ignored)."""
    return got.split() == expected.split()


def _verdict_of(run: RunResult, expected: str, index: int, n: int, elapsed: float) -> Verdict:
    where = f"test {index + 1}/{n}"
    if run.status == "ok":
        if outputs_match(run.stdout, expected):
            return Verdict(True, "pass", seconds=elapsed, detail=f"{n} tests")
        return Verdict(
            False,
            "wrong_answer",
            seconds=elapsed,
            detail=f"{where}: got {run.stdout[:200]!r}, expected {expected[:200]!r}",
        )
    if run.status == "output_limit":
        return Verdict(False, "wrong_answer", seconds=elapsed, detail=f"{where}: {run.detail}")
    if run.status == "sandbox_error":
        return Verdict(None, "sandbox_error", seconds=elapsed, detail=f"{where}: {run.detail}")
    tail = run.stderr.strip().splitlines()[-1:] if run.stderr.strip() else []
    detail = f"{where}: {run.detail or 'exit ' + str(run.exit_code)}" + (
        f": {tail[0][:200]}" if tail else ""
    )
    return Verdict(False, run.status, seconds=elapsed, detail=detail)


def grade_program(
    code: str,
    tests: Sequence[Test],
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    *,
    isolation: str | None = None,
    site_packages: bool = False,
) -> Verdict:
    """Run ``code`` on each test (stdin, expected stdout) and stop at the first failure.

    ``status`` is pass | wrong_answer | timeout | memory | runtime_error | sandbox_error;
    ``correct`` is True for pass, False for failures the program caused, None for a
    sandbox_error (cannot score). ``timeout_s`` and ``memory_mb`` are per test;
    ``site_packages`` lets the program import the grader's installed packages. A program
    with no tests is a sandbox_error: passing it would reward anything.
    """
    if not tests:
        return Verdict(None, "sandbox_error", detail="no tests to grade against")
    elapsed = 0.0
    verdict = None
    for i, (stdin, expected) in enumerate(tests):
        # Leave room for a right answer, however long, but not for an unbounded one.
        cap = max(STDOUT_CAP, 2 * len(expected) + 4096)
        run = run_program(
            code,
            stdin,
            timeout_s,
            memory_mb,
            isolation=isolation,
            stdout_cap=cap,
            site_packages=site_packages,
        )
        elapsed += run.seconds
        verdict = _verdict_of(run, expected, i, len(tests), elapsed)
        if verdict.status != "pass":
            return verdict
    return verdict


class SandboxPool:
    """Grades many programs at once, each run in its own sandbox.

    ``workers=0`` means one per CPU core. Runs are subprocesses, so the pool is threads that
    wait on them; the GIL is not the bottleneck. Usable as a context manager; ``close`` is
    idempotent.
    """

    def __init__(self, workers: int = 0, isolation: str | None = None, site_packages: bool = False):
        """``workers``: concurrent runs (0: one per core). ``isolation``: force a level (None:
        detect). ``site_packages``: programs may import installed packages (numpy, ...)."""
        self.workers = workers if workers > 0 else (os.cpu_count() or 1)
        self.isolation = isolation
        self.site_packages = site_packages
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="agon-sandbox")
            return self._executor

    def grade(
        self,
        codes: Sequence[str | None],
        tests: Sequence[Sequence[Test]],
        timeout_s: float = 5.0,
        memory_mb: int = 512,
    ) -> list[Verdict]:
        """One verdict per (code, tests) pair, in order; a None code is ``no_code`` (wrong).

        Identical pairs in one call run once and share the verdict: sampled completions repeat
        often (a trained model writes the same program for most of a problem's samples), and
        grading is what a code task's evaluation and training spend their time on.
        """
        if len(codes) != len(tests):
            raise ValueError(f"SandboxPool.grade: {len(codes)} codes but {len(tests)} test lists")
        pool = self._pool()
        futures, runs = {}, {}
        for i, (code, ts) in enumerate(zip(codes, tests)):
            if code is not None:
                ts = [tuple(t) for t in ts]
                key = (code, tuple(ts))
                if key not in runs:
                    runs[key] = pool.submit(
                        grade_program,
                        code,
                        ts,
                        timeout_s,
                        memory_mb,
                        isolation=self.isolation,
                        site_packages=self.site_packages,
                    )
                futures[i] = runs[key]
        out = []
        for i, code in enumerate(codes):
            if code is None:
                out.append(
                    Verdict(False, "no_code", detail="no fenced python block in the completion")
                )
                continue
            try:
                out.append(futures[i].result())
            except Exception as err:  # noqa: BLE001 - a grading bug must not sink the batch
                out.append(Verdict(None, "sandbox_error", detail=f"{type(err).__name__}: {err}"))
        return out

    def close(self) -> None:
        """Stop the worker threads (runs in flight finish first)."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def __enter__(self) -> SandboxPool:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()
