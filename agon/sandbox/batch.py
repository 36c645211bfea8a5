"""Run one program on many tests in one sandbox: the set-up is paid once per program.

A competitive-programming problem has tens to hundreds of tests. Started afresh for each test,
a sandboxed run pays for its namespaces, its uid drop, its dir and the interpreter's start-up
every time, which is most of what a test costs. :func:`run_tests` pays them once: the
supervisor (``_SUPERVISE`` in :mod:`agon.sandbox.bootstrap`) starts inside the isolation,
compiles the program, and forks once per test; each fork takes the test's limits, stdin and
output files and runs the program as a fresh run would. Between tests every process the test
left is killed, and test k's input is in its own file, so one test cannot reach into the next
through anything but the run's dir.

This needs a PID namespace (``namespaces`` or ``userns``), which bounds the supervisor's
``kill(-1)``; the ``none`` fallback runs each test afresh (:func:`agon.sandbox.run_program`).

What differs from fresh runs, each on purpose: the wall clock of a test starts at its fork
(the interpreter is already up), and a test that kills the supervisor or garbles its report
ends the program's run with a ``runtime_error`` at that test (the program's doing, never a
``sandbox_error``). The supervisor runs as the program's uid (the one of the run, as root), so
a program that sets out to attack this harness can kill, stop or impersonate it: killing ends
its run with a ``runtime_error``, a stopped supervisor runs into the grader's own clock (a
record is due within a test's wall clock plus a second), and a forged record still needs the
expected output, which never enters the sandbox. That is the trust boundary of the in-process
harness of :mod:`agon.sandbox.harness`. (A supervisor that keeps root and drops the uid only
in each test's fork would close it, but an interpreter installed where only root can read it,
a common pyenv layout, then runs its tests on another build's stdlib.)
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence

from agon.sandbox.bootstrap import _SUPERVISE
from agon.sandbox.box import _Box, _plain_name
from agon.sandbox.isolation import ISOLATION, sandbox_python
from agon.sandbox.result import RunResult, classify
from agon.sandbox.run import (
    FSIZE_MB,
    NOFILE,
    NPROC,
    STDERR_CAP,
    STDOUT_CAP,
    _launch,
    _run_result,
    detect_isolation,
    run_program,
)

BATCH_LEVELS = ("namespaces", "userns")  # levels with a PID namespace: tests share a sandbox
_SETUP_S = 2.0  # the run's own start-up, on top of the first test's wall clock
_PER_TEST_S = 1.0  # slack per test on top of its wall clock (fork, files, the record, a busy CPU)


class _Records:
    """Reads the supervisor's records as they arrive and hands each test's result on."""

    def __init__(self, n: int, caps: Sequence[int], stderr_cap: int, emit: Callable):
        self.n, self.caps, self.stderr_cap, self.emit = n, caps, stderr_cap, emit
        self.buf = bytearray()
        self.head: tuple[int, ...] | None = None
        self.seen = 0
        self.garbled: str | None = None
        self.last = time.perf_counter()

    def due(self, timeout_s: float) -> float:
        """When the next record is late: the supervisor enforces each test's wall clock, so a
        silent one was stopped or is stuck (a program can stop a supervisor of its own uid)."""
        return self.last + timeout_s + _PER_TEST_S + (_SETUP_S if self.seen == 0 else 0.0)

    def feed(self, chunk: bytes) -> bool:
        """Take a chunk of the supervisor's stdout; True: stop the run (a failure was seen
        with tests left, or the stream cannot be trusted)."""
        self.buf += chunk
        while True:
            if self.head is None:
                nl = self.buf.find(b"\n", 0, 128)
                if nl < 0:
                    return (
                        self._garble("a record's header is missing")
                        if len(self.buf) > 128
                        else False
                    )
                head = self.buf[:nl].split()
                try:
                    k, kind, value, micros, n_out, n_err = (int(x) for x in head[1:])
                except ValueError:
                    return self._garble(f"bad header {bytes(self.buf[:nl])[:60]!r}")
                k_ok = head[:1] == [b"T"] and k == self.seen and 0 <= kind <= 3
                if (
                    not k_ok
                    or not 0 <= n_out <= self.caps[k] + 1
                    or not 0 <= n_err <= self.stderr_cap
                ):
                    return self._garble(f"bad header {bytes(self.buf[:nl])[:60]!r}")
                self.head = (k, kind, value, micros, n_out, n_err)
                del self.buf[: nl + 1]
            k, kind, value, micros, n_out, n_err = self.head
            if len(self.buf) < n_out + n_err:
                return False
            out, err = bytes(self.buf[:n_out]), bytes(self.buf[n_out : n_out + n_err])
            del self.buf[: n_out + n_err]
            self.head = None
            self.seen += 1
            self.last = time.perf_counter()
            # stop at a failure with tests left; after the last one the supervisor ends itself
            if self.emit(k, kind, value, micros / 1e6, out, err) and self.seen < self.n:
                return True

    def _garble(self, why: str) -> bool:
        self.garbled = why
        return True


def _test_result(
    kind: int,
    value: int,
    seconds: float,
    out: bytes,
    err: bytes,
    cap: int,
    timeout_s: float,
    level: str,
) -> RunResult:
    """One test's record as the result a fresh run would have given."""
    stderr = err.decode("utf-8", "replace")
    common = {
        "stdout": out[:cap].decode("utf-8", "replace"),
        "stderr": stderr,
        "seconds": seconds,
        "stdout_truncated": len(out) > cap,
        "isolation": level,
    }
    if kind == 2:
        return RunResult("timeout", None, detail=f"wall clock {timeout_s:g}s", **common)
    if kind == 3:
        detail = f"the test could not be started ({os.strerror(value) if value else 'error'})"
        return RunResult("runtime_error", None, detail=detail, **common)
    if len(out) > cap:
        return RunResult("output_limit", None, detail=f"stdout over {cap} bytes", **common)
    code = -value if kind == 1 else value
    return RunResult(classify(code, stderr), code, **common)


def run_tests(
    code: str,
    inputs: Sequence[str],
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    *,
    on_result: Callable[[int, RunResult], bool] | None = None,
    isolation: str | None = None,
    python: str | None = None,
    stdout_caps: Sequence[int] | None = None,
    stderr_cap: int = STDERR_CAP,
    site_packages: bool = False,
    input_file: str | None = None,
    output_file: str | None = None,
) -> list[RunResult]:
    """Run ``code`` on each of ``inputs`` in one sandbox; one :class:`RunResult` per test run.

    ``on_result(k, result)`` sees each test's result as it arrives and returns True to stop
    (the rest is not run, and the list is shorter). The limits, ``site_packages`` and the
    files mean what they mean for :func:`agon.sandbox.run_program`, per test. Where the
    isolation has no PID namespace the tests run afresh, one :func:`run_program` each. The
    last result says why a run ended early: ``sandbox_error`` only if the program never ran.
    """

    python = python or sandbox_python()
    level = isolation or detect_isolation(python)
    if level not in ISOLATION:
        raise ValueError(f"isolation {level!r}; expected one of {ISOLATION}")
    caps = list(stdout_caps) if stdout_caps is not None else [STDOUT_CAP] * len(inputs)
    if len(caps) != len(inputs):
        raise ValueError(f"{len(caps)} stdout caps for {len(inputs)} tests")
    results: list[RunResult] = []

    def emit(k: int, result: RunResult) -> bool:
        results.append(result)
        return bool(on_result and on_result(k, result))

    if level not in BATCH_LEVELS:
        for k, stdin in enumerate(inputs):
            res = run_program(
                code,
                stdin,
                timeout_s,
                memory_mb,
                isolation=level,
                python=python,
                stdout_cap=caps[k],
                stderr_cap=stderr_cap,
                site_packages=site_packages,
                input_file=input_file,
                output_file=output_file,
            )
            if emit(k, res):
                break
        return results
    if not inputs:
        return results
    t0 = time.perf_counter()
    try:
        with _Box(code, level, python) as box:
            for name in (input_file, output_file):
                if name:
                    _plain_name(name)
            os.mkdir(box.path("tests"), 0o755)  # the grader's: the program cannot change it
            for k, stdin in enumerate(inputs):
                box.write(os.path.join("tests", str(k)), stdin, owner=None)
            fsize = max(FSIZE_MB * 1024 * 1024, max(caps) + 1)
            records = _Records(
                len(inputs),
                caps,
                stderr_cap,
                lambda k, kind, value, secs, out, err: emit(
                    k, _test_result(kind, value, secs, out, err, caps[k], timeout_s, level)
                ),
            )
            args = [
                len(inputs),
                max(1, math.ceil(timeout_s)),
                int(memory_mb) * 1024 * 1024,
                fsize,
                NOFILE,
                NPROC,
                int(timeout_s * 1000),
                max(caps),
                stderr_cap,
                input_file or "",
                output_file or "",
            ]
            raw = _launch(
                box,
                python,
                site_packages,
                _SUPERVISE,
                args,
                b"",
                lambda: records.due(timeout_s),
                0,
                stderr_cap,
                records.feed,
            )
    except Exception as err:  # noqa: BLE001 - the sandbox failed, not the program: never raise
        results.append(RunResult.sandbox_failed(err, time.perf_counter() - t0, level))
        return results
    done = records.seen >= len(inputs) or (results and raw.stopped and not records.garbled)
    if done:
        return results
    # The run ended before the test in progress reported: say why, as that test's result.
    k = records.seen
    if not raw.started and not raw.timed_out:
        results.append(_run_result(raw, level, timeout_s, 0, time.perf_counter() - t0))
        return results
    if records.garbled:
        why = f"the run's report of test {k + 1} is garbled ({records.garbled})"
        status = "runtime_error"
    elif raw.timed_out:
        why, status = f"wall clock {timeout_s:g}s (the run stopped answering)", "timeout"
    else:
        why = f"the run ended during test {k + 1} (exit {raw.returncode})"
        status = "runtime_error"
    stderr = raw.err.decode("utf-8", "replace")
    results.append(
        RunResult(status, None, "", stderr, time.perf_counter() - t0, isolation=level, detail=why)
    )
    return results
