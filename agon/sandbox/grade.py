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
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from agon.grading.verdict import Verdict
from agon.sandbox.batch import run_tests
from agon.sandbox.result import RunResult
from agon.sandbox.run import STDOUT_CAP

VERDICTS = ("pass", "wrong_answer", "timeout", "memory", "runtime_error", "sandbox_error")
Test = tuple[str, str]  # (stdin, expected stdout)
Compare = Callable[[str, str], bool]  # (program's output, expected) -> does the test pass


def outputs_match(got: str, expected: str) -> bool:
    """Token-wise equality of two outputs (whitespace layout ignored)."""
    return got.split() == expected.split()


def _verdict_of(
    run: RunResult, expected: str, index: int, n: int, elapsed: float, compare: Compare | None
) -> Verdict:
    where = f"test {index + 1}/{n}"
    counts = {"seconds": elapsed, "tests_passed": index, "tests_total": n}
    if run.status == "ok":
        try:
            ok = compare(run.stdout, expected) if compare else outputs_match(run.stdout, expected)
        except Exception as err:  # noqa: BLE001 - a broken comparison cannot score the program
            detail = f"{where}: the comparison failed: {type(err).__name__}: {err}"
            return Verdict(None, "sandbox_error", detail=detail, **counts)
        if ok:
            return Verdict(True, "pass", detail=f"{n} tests", **{**counts, "tests_passed": n})
        return Verdict(
            False,
            "wrong_answer",
            detail=f"{where}: got {run.stdout[:200]!r}, expected {expected[:200]!r}",
            **counts,
        )
    if run.status == "output_limit":
        return Verdict(False, "wrong_answer", detail=f"{where}: {run.detail}", **counts)
    if run.status == "sandbox_error":
        return Verdict(None, "sandbox_error", detail=f"{where}: {run.detail}", **counts)
    tail = run.stderr.strip().splitlines()[-1:] if run.stderr.strip() else []
    detail = f"{where}: {run.detail or 'exit ' + str(run.exit_code)}" + (
        f": {tail[0][:200]}" if tail else ""
    )
    return Verdict(False, run.status, detail=detail, **counts)


def grade_program(
    code: str,
    tests: Sequence[Test],
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    *,
    isolation: str | None = None,
    site_packages: bool = False,
    compare: Compare | None = None,
    input_file: str | None = None,
    output_file: str | None = None,
) -> Verdict:
    """Run ``code`` on each test (stdin, expected stdout) and stop at the first failure.

    ``status`` is pass | wrong_answer | timeout | memory | runtime_error | sandbox_error;
    ``correct`` is True for pass, False for failures the program caused, None for a
    sandbox_error (cannot score). ``timeout_s`` and ``memory_mb`` are per test;
    ``site_packages`` lets the program import the grader's installed packages.
    ``compare(got, expected)`` decides a test (default: :func:`outputs_match`).
    ``input_file``: the test's input is also in that file of the run's dir (and on stdin);
    ``output_file``: the answer is that file, if the program wrote it, else stdout.
    ``tests_passed`` counts the tests before the first failure. All tests run in one sandbox
    where the isolation allows (:mod:`agon.sandbox.batch`). A program with no tests is a
    sandbox_error: passing it would reward anything.
    """
    if not tests:
        return Verdict(None, "sandbox_error", detail="no tests to grade against", tests_total=0)
    t0 = time.perf_counter()

    def failed(k: int, run: RunResult) -> bool:
        return _verdict_of(run, tests[k][1], k, len(tests), 0.0, compare).status != "pass"

    runs = run_tests(
        code,
        [stdin for stdin, _ in tests],
        timeout_s,
        memory_mb,
        on_result=failed,
        isolation=isolation,
        # Leave room for a right answer, however long, but not for an unbounded one.
        stdout_caps=[max(STDOUT_CAP, 2 * len(expected) + 4096) for _, expected in tests],
        site_packages=site_packages,
        input_file=input_file,
        output_file=output_file,
    )
    elapsed = time.perf_counter() - t0
    for k, run in enumerate(runs):
        verdict = _verdict_of(run, tests[k][1], k, len(tests), elapsed, compare)
        if verdict.status != "pass":
            return verdict
    if len(runs) < len(tests):  # cannot happen unless the batch runner lost a test
        detail = f"only {len(runs)} of {len(tests)} tests ran"
        return Verdict(
            None, "sandbox_error", seconds=elapsed, detail=detail, tests_total=len(tests)
        )
    return verdict


def _per_item(value, n: int, name: str, scalar: Callable = None) -> list:
    """``value`` for each of ``n`` items: repeated if it is one value, checked if it is a list."""
    is_scalar = scalar(value) if scalar else isinstance(value, (int, float))
    if is_scalar:
        return [value] * n
    values = list(value)
    if len(values) != n:
        raise ValueError(f"SandboxPool.grade: {n} codes but {len(values)} values of {name}")
    return values


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
        timeout_s: float | Sequence[float] = 5.0,
        memory_mb: int | Sequence[int] = 512,
        *,
        compare: Compare | None | Sequence[Compare | None] = None,
        io: Sequence[tuple[str | None, str | None] | None] | None = None,
    ) -> list[Verdict]:
        """One verdict per (code, tests) pair, in order; a None code is ``no_code`` (wrong).

        ``timeout_s``, ``memory_mb`` and ``compare`` are one for all or one per item; ``io``
        is one ``(input_file, output_file)`` or None (stdin/stdout) per item (see
        :func:`grade_program`). Identical items in one call run once and share the verdict:
        sampled completions repeat often (a trained model writes the same program for most of
        a problem's samples), and grading is what a code task's evaluation and training spend
        their time on.
        """
        n = len(codes)
        if len(tests) != n:
            raise ValueError(f"SandboxPool.grade: {n} codes but {len(tests)} test lists")
        timeouts, memories = (
            _per_item(timeout_s, n, "timeout_s"),
            _per_item(memory_mb, n, "memory_mb"),
        )
        compares = _per_item(compare, n, "compare", scalar=lambda c: c is None or callable(c))
        ios = [None] * n if io is None else list(io)
        if len(ios) != n:
            raise ValueError(f"SandboxPool.grade: {n} codes but {len(ios)} io entries")
        pool = self._pool()
        futures, runs = {}, {}
        for i, (code, ts) in enumerate(zip(codes, tests)):
            if code is not None:
                ts = tuple(tuple(t) for t in ts)
                files = tuple(ios[i]) if ios[i] else (None, None)
                key = (code, ts, float(timeouts[i]), int(memories[i]), compares[i], files)
                if key not in runs:
                    runs[key] = pool.submit(
                        grade_program,
                        code,
                        list(ts),
                        float(timeouts[i]),
                        int(memories[i]),
                        isolation=self.isolation,
                        site_packages=self.site_packages,
                        compare=compares[i],
                        input_file=files[0],
                        output_file=files[1],
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
