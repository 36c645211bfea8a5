"""Run one untrusted Python program in the sandbox and say what it did.

:func:`run_program` writes the program into a fresh temp dir (owned by the run's own uid as
root), starts the bootstrap (:mod:`agon.sandbox.bootstrap`) inside the wrapper of the
isolation level (:mod:`agon.sandbox.isolation`), feeds stdin and reads capped stdout and
stderr without blocking, enforces the wall clock, kills whatever the run left
(:mod:`agon.sandbox.reaper`) and removes the dir. The threat model and what each isolation
level guarantees are described in :mod:`agon.sandbox`.

The verdict of a run (:class:`RunResult.status`) is one of ``ok``, ``timeout``, ``memory``,
``runtime_error``, ``output_limit`` or ``sandbox_error`` (the sandbox itself failed: the
program never started). Whether the program started is reported on a private pipe by the
bootstrap before any program code runs, so a program cannot forge a ``sandbox_error``.

A program that the kernel kills (SIGKILL at the hard CPU limit, SIGSEGV of a stack overflow)
is a ``runtime_error`` unless the signal is SIGXCPU (``timeout``); ``memory`` is read from
the program's stderr (MemoryError), since an address-space limit makes allocations fail
rather than kill.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from agon.sandbox.bootstrap import _BOOT, read_regular
from agon.sandbox.box import _Box, _plain_name
from agon.sandbox.isolation import (
    ISOLATION,
    ISOLATION_ENV,
    _is_root,
    _prefix,
    _which,
    sandbox_python,
)
from agon.sandbox.reaper import (
    _MARKER_VAR,
    _ORPHAN_GRACE_S,
    _kill_marked,
    _kill_tree,
    _kill_uid,
)
from agon.sandbox.result import RunResult, classify, reported_exit

# Limits that are not per-call arguments. Each is a ceiling for hostile code, far above what
# a competitive-programming solution needs.
STDOUT_CAP = 4 * 1024 * 1024  # bytes of stdout kept; more kills the run (status output_limit)
STDERR_CAP = 64 * 1024  # bytes of stderr kept (the head); the rest is read and dropped
FSIZE_MB = 16  # largest file the program may write
NOFILE = 64  # open file descriptors
NPROC = 32  # processes + threads of the run's uid (as root: its own uid, see agon.sandbox)
_READ_CHUNK = 65536
_WRITE_CHUNK = 65536
_REPORT_CAP = 64  # bytes kept of the bootstrap's report ("S", then "W<status>\n")


_PROBE_LOCK = threading.Lock()  # pool threads that start together probe once, not each


def detect_isolation(python: str | None = None) -> str:
    """The strongest isolation level that works here (see :func:`_detect_isolation`)."""
    with _PROBE_LOCK:
        return _detect_isolation(python or sandbox_python())


detect_isolation.cache_clear = lambda: _detect_isolation.cache_clear()  # type: ignore[attr-defined]


@functools.cache
def _detect_isolation(python: str = sys.executable) -> str:
    """The strongest isolation level that works here, probed once per process.

    ``AGON_SANDBOX_ISOLATION`` (namespaces | userns | none | auto) forces a level; forcing one
    the kernel does not allow makes every run a ``sandbox_error``, which is the point: a
    deployment that asked for namespaces must not silently run without them. The probe is a
    sandboxed run itself, which is why detection lives beside :func:`run_program`.
    """
    forced = os.environ.get(ISOLATION_ENV, "auto").strip().lower()
    if forced in ISOLATION:
        return forced
    if forced != "auto":
        raise ValueError(f"{ISOLATION_ENV}={forced!r}; expected one of {ISOLATION} or auto")
    candidates = (["namespaces"] if _is_root() else []) + ["userns"]
    for level in candidates:
        if _which("unshare") is None:
            continue
        # The probe is a real sandboxed run whose program must also find the network gone.
        probe = (
            "import socket\n"
            "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
            "except OSError:\n    print('isolated')\n"
        )
        res = run_program(probe, timeout_s=10.0, memory_mb=256, isolation=level, python=python)
        if res.status == "ok" and res.stdout.strip() == "isolated":
            return level
    return "none"


@dataclasses.dataclass
class _Raw:
    """What watching one sandboxed process saw, before it is read as a verdict."""

    returncode: int
    report: bytes
    out: bytes
    err: bytes
    out_trunc: bool
    err_trunc: bool
    overflow: bool
    timed_out: bool
    stopped: bool

    @property
    def started(self) -> bool:
        return self.report.startswith(b"S")

    def exit_code(self, level: str) -> int | None:
        return self.returncode if level == "none" else reported_exit(self.report)


def run_program(
    code: str,
    stdin: str = "",
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    *,
    isolation: str | None = None,
    python: str | None = None,
    stdout_cap: int = STDOUT_CAP,
    stderr_cap: int = STDERR_CAP,
    site_packages: bool = False,
    input_file: str | None = None,
    output_file: str | None = None,
) -> RunResult:
    """Run ``code`` as a Python program on ``stdin`` in the sandbox and report what it did.

    ``timeout_s`` is the wall-clock limit (the CPU limit is its ceiling in whole seconds);
    ``memory_mb`` the address-space limit. ``isolation`` overrides :func:`detect_isolation`;
    ``python`` overrides :func:`sandbox_python`.
    The program sees the standard library only (``python -I -S``), as a judge does, unless
    ``site_packages``: the grader's environment (torch, agon, ...) is no business of hostile
    code, and skipping ``site`` halves the interpreter's start-up time.
    File-I/O problems: ``input_file`` (a plain name) holds ``stdin`` too, in the run's dir;
    ``output_file``: the result's ``stdout`` is that file's contents (capped like stdout) if
    the program wrote it, else what it printed.
    Never raises for anything the program does; a failure of the sandbox itself is a
    ``sandbox_error`` result.
    """
    t0 = time.perf_counter()
    python = python or sandbox_python()
    level = isolation or detect_isolation(python)
    if level not in ISOLATION:
        raise ValueError(f"isolation {level!r}; expected one of {ISOLATION}")
    try:
        with _Box(code, level, python) as box:
            if input_file:
                box.write(_plain_name(input_file), stdin)
            if output_file:
                _plain_name(output_file)
            cpu = max(1, math.ceil(timeout_s))
            limits = [cpu, int(memory_mb) * 1024 * 1024, FSIZE_MB * 1024 * 1024, NOFILE, NPROC]
            raw = _launch(
                box,
                python,
                site_packages,
                _BOOT,
                [*limits, 1 if level == "none" else 0],
                stdin.encode("utf-8", "surrogateescape"),
                t0 + timeout_s,
                stdout_cap,
                stderr_cap,
            )
            if output_file and not raw.timed_out:
                answer = read_regular(box.path(output_file), stdout_cap + 1)
                if answer is not None:
                    raw.out, raw.out_trunc = answer[:stdout_cap], len(answer) > stdout_cap
                    raw.overflow = raw.out_trunc
        return _run_result(raw, level, timeout_s, stdout_cap, time.perf_counter() - t0)
    except Exception as err:  # noqa: BLE001 - the sandbox failed, not the program: never raise
        return RunResult.sandbox_failed(err, time.perf_counter() - t0, level)


def _run_result(raw: _Raw, level: str, timeout_s: float, stdout_cap: int, seconds: float):
    """The verdict of a single run (see the module docstring for the statuses)."""
    stderr = raw.err.decode("utf-8", "replace")
    common = {
        "stdout": raw.out.decode("utf-8", "replace"),
        "stderr": stderr,
        "seconds": seconds,
        "stdout_truncated": raw.out_trunc,
        "stderr_truncated": raw.err_trunc,
        "isolation": level,
    }
    if not raw.started and not raw.timed_out:
        return RunResult(
            "sandbox_error",
            None,
            detail=f"the program never started (exit {raw.returncode}): {stderr[-500:]}",
            **common,
        )
    if raw.timed_out:
        return RunResult("timeout", None, detail=f"wall clock {timeout_s:g}s", **common)
    if raw.overflow:
        return RunResult("output_limit", None, detail=f"stdout over {stdout_cap} bytes", **common)
    exit_code = raw.exit_code(level)
    if exit_code is None:  # the program started, then its init died unreported: the program's doing
        return RunResult(
            "runtime_error",
            None,
            detail=f"the run's init died without a report (wrapper exit {raw.returncode})",
            **common,
        )
    return RunResult(classify(exit_code, stderr), exit_code, **common)


def _launch(
    box: _Box,
    python: str,
    site_packages: bool,
    boot: str,
    boot_args: list,
    stdin: bytes,
    deadline: float | Callable[[], float],
    stdout_cap: int,
    stderr_cap: int,
    on_stdout: Callable[[bytes], bool] | None = None,
) -> _Raw:
    """Start ``boot`` (the bootstrap or the supervisor) in ``box`` inside the isolation's
    wrapper, feed it ``stdin``, read its stdout and stderr (capped) and its report until it
    ends or ``deadline`` passes (a ``perf_counter`` time, or a function that says it now: a
    supervisor's deadline moves with its progress), then kill what is left.

    ``on_stdout``: stdout chunks go to it instead of the capped buffer; it returns True to
    stop the run now (the supervisor's caller has seen enough).
    """
    level, uid = box.level, box.uid
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": box.tmp,
        "TMPDIR": box.tmp,
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
    }
    if box.marker is not None:
        env[_MARKER_VAR] = box.marker
    if level == "userns" and uid is not None:
        raise RuntimeError(
            "isolation 'userns' as root would map the program to real root; use 'namespaces'"
        )
    ready_r, ready_w = os.pipe()
    argv = _prefix(level, uid, box.method, ready_w) + [
        python,
        "-I",
        *([] if site_packages else ["-S"]),
        "-c",
        boot,
        str(ready_w),
        *(str(a) for a in boot_args),
    ]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=box.tmp,
            # A new process group, not a new session: Popen's setsid costs a full fork of the
            # grader (no vfork) on this Python; the bootstrap puts the program in a session
            # of its own instead, away from any terminal of the grader.
            env=env,
            process_group=None if level == "none" else 0,
            pass_fds=(ready_w,),
            close_fds=True,
        )
    finally:
        os.close(ready_w)
    marker = box.marker
    due = deadline if callable(deadline) else lambda: deadline
    out, err = bytearray(), bytearray()
    out_trunc = err_trunc = overflow = timed_out = stopped = False
    report = bytearray()  # what the bootstrap sent: "S" (started), then "W<exit code>\n"
    sel = selectors.DefaultSelector()
    try:
        for pipe in (proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe.fileno(), selectors.EVENT_READ)
        os.set_blocking(ready_r, False)
        sel.register(ready_r, selectors.EVENT_READ)
        stdin_fd = proc.stdin.fileno()
        if stdin:
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        offset = 0
        exited_at = None
        while sel.get_map():
            now, limit = time.perf_counter(), due()
            if now >= limit:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _ORPHAN_GRACE_S:
                break  # the program is gone; whoever still holds its pipes is an escapee
            for key, _ in sel.select(min(limit - now, 0.05)):
                fd = key.fd
                if fd == stdin_fd:
                    try:
                        offset += os.write(fd, stdin[offset : offset + _WRITE_CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # the program closed its stdin (EPIPE): fine
                        offset = len(stdin)
                    if offset >= len(stdin):
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    continue
                if fd == ready_r:
                    if len(report) < _REPORT_CAP:
                        report += chunk[: _REPORT_CAP - len(report)]
                elif fd == proc.stdout.fileno():
                    if on_stdout is not None:
                        stopped = stopped or on_stdout(chunk)
                        continue
                    room = stdout_cap - len(out)
                    out += chunk[:room]
                    if len(chunk) > room:
                        out_trunc = overflow = True
                else:
                    room = stderr_cap - len(err)
                    if room > 0:
                        err += chunk[:room]
                    if len(chunk) > room:
                        err_trunc = True
            if overflow or stopped:
                break
        if timed_out or overflow or stopped:
            _kill_tree(proc, marker)
        try:
            returncode = proc.wait(timeout=max(0.0, due() - time.perf_counter()) + _ORPHAN_GRACE_S)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(proc, marker)
            returncode = proc.wait()
        if marker is not None:  # fallback: escapees from the process group
            _kill_marked(marker)
            if uid is not None:  # ... including ones that dropped the marker
                _kill_uid(uid)
        try:  # the report may still sit in the pipe if the loop ended early
            report += os.read(ready_r, _REPORT_CAP)[: max(0, _REPORT_CAP - len(report))]
        except OSError:
            pass
    finally:
        sel.close()
        os.close(ready_r)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
        if proc.poll() is None:
            _kill_tree(proc, marker)
            proc.wait()
    return _Raw(
        returncode,
        bytes(report),
        bytes(out),
        bytes(err),
        out_trunc,
        err_trunc,
        overflow,
        timed_out,
        stopped,
    )
