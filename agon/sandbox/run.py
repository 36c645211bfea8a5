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

import functools
import math
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from agon.sandbox.bootstrap import _BOOT
from agon.sandbox.isolation import (
    ISOLATION,
    ISOLATION_ENV,
    _is_root,
    _prefix,
    _uid_method,
    _which,
    sandbox_python,
)
from agon.sandbox.reaper import (
    _MARKER_VAR,
    _ORPHAN_GRACE_S,
    _kill_marked,
    _kill_tree,
    _kill_uid,
    _rmtree,
)
from agon.sandbox.result import RunResult, classify, reported_exit
from agon.sandbox.uids import _uid_slots

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
) -> RunResult:
    """Run ``code`` as a Python program on ``stdin`` in the sandbox and report what it did.

    ``timeout_s`` is the wall-clock limit (the CPU limit is its ceiling in whole seconds);
    ``memory_mb`` the address-space limit. ``isolation`` overrides :func:`detect_isolation`;
    ``python`` overrides :func:`sandbox_python`.
    The program sees the standard library only (``python -I -S``), as a judge does, unless
    ``site_packages``: the grader's environment (torch, agon, ...) is no business of hostile
    code, and skipping ``site`` halves the interpreter's start-up time.
    Never raises for anything the program does; a failure of the sandbox itself is a
    ``sandbox_error`` result.
    """
    t0 = time.perf_counter()
    python = python or sandbox_python()
    level = isolation or detect_isolation(python)
    if level not in ISOLATION:
        raise ValueError(f"isolation {level!r}; expected one of {ISOLATION}")
    # If no way to drop the uid works, a root run keeps root (weaker, see agon.sandbox).
    slots = _uid_slots() if _is_root() and _uid_method(python) else None
    uid = slots.take() if slots is not None else None
    tmp = None
    try:
        tmp = tempfile.mkdtemp(prefix="agon-sbx-")
        with open(os.path.join(tmp, "prog.py"), "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(code)
        if uid is not None:
            os.chown(tmp, uid, uid)
            os.chmod(os.path.join(tmp, "prog.py"), 0o644)
        return _run_in(
            tmp,
            level,
            uid,
            code,
            stdin,
            timeout_s,
            memory_mb,
            python,
            stdout_cap,
            stderr_cap,
            site_packages,
            t0,
        )
    except Exception as err:  # noqa: BLE001 - the sandbox failed, not the program: never raise
        return RunResult(
            "sandbox_error",
            None,
            "",
            "",
            time.perf_counter() - t0,
            isolation=level,
            detail=f"{type(err).__name__}: {err}",
        )
    finally:
        if tmp is not None:
            _rmtree(tmp)
        if uid is not None:
            slots.give(uid)


def _run_in(
    tmp: str,
    level: str,
    uid: int | None,
    code: str,
    stdin: str,
    timeout_s: float,
    memory_mb: int,
    python: str,
    stdout_cap: int,
    stderr_cap: int,
    site_packages: bool,
    t0: float,
) -> RunResult:
    """The run itself, in the prepared dir ``tmp`` (see :func:`run_program`)."""
    marker = uuid.uuid4().hex if level == "none" else None
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": tmp,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
    }
    if marker is not None:
        env[_MARKER_VAR] = marker
    if level == "userns" and uid is not None:
        raise RuntimeError(
            "isolation 'userns' as root would map the program to real root; use 'namespaces'"
        )
    cpu = max(1, math.ceil(timeout_s))
    ready_r, ready_w = os.pipe()
    argv = _prefix(level, uid, _uid_method(python) if uid is not None else None, ready_w) + [
        python,
        "-I",
        *([] if site_packages else ["-S"]),
        "-c",
        _BOOT,
        str(ready_w),
        str(cpu),
        str(int(memory_mb) * 1024 * 1024),
        str(FSIZE_MB * 1024 * 1024),
        str(NOFILE),
        str(NPROC),
        "1" if level == "none" else "0",
    ]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp,
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
    deadline = t0 + timeout_s
    out, err = bytearray(), bytearray()
    out_trunc = err_trunc = overflow = timed_out = False
    report = bytearray()  # what the bootstrap sent: "S" (started), then "W<exit code>\n"
    data = stdin.encode("utf-8", "surrogateescape")
    sel = selectors.DefaultSelector()
    try:
        for pipe in (proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe.fileno(), selectors.EVENT_READ)
        os.set_blocking(ready_r, False)
        sel.register(ready_r, selectors.EVENT_READ)
        stdin_fd = proc.stdin.fileno()
        if data:
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        offset = 0
        exited_at = None
        while sel.get_map():
            now = time.perf_counter()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _ORPHAN_GRACE_S:
                break  # the program is gone; whoever still holds its pipes is an escapee
            for key, _ in sel.select(min(deadline - now, 0.05)):
                fd = key.fd
                if fd == stdin_fd:
                    try:
                        offset += os.write(fd, data[offset : offset + _WRITE_CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # the program closed its stdin (EPIPE): fine
                        offset = len(data)
                    if offset >= len(data):
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
            if overflow:
                break
        if timed_out or overflow:
            _kill_tree(proc, marker)
        try:
            returncode = proc.wait(
                timeout=max(0.0, deadline - time.perf_counter()) + _ORPHAN_GRACE_S
            )
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
    seconds = time.perf_counter() - t0
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    common = {
        "stdout": stdout,
        "stderr": stderr,
        "seconds": seconds,
        "stdout_truncated": out_trunc,
        "stderr_truncated": err_trunc,
        "isolation": level,
    }
    started = report.startswith(b"S")
    exit_code = returncode if level == "none" else reported_exit(report)
    if not started and not timed_out:
        return RunResult(
            "sandbox_error",
            None,
            detail=f"the program never started (exit {returncode}): {stderr[-500:]}",
            **common,
        )
    if timed_out:
        return RunResult("timeout", None, detail=f"wall clock {timeout_s:g}s", **common)
    if overflow:
        return RunResult("output_limit", None, detail=f"stdout over {stdout_cap} bytes", **common)
    if exit_code is None:  # the program started, then its init died unreported: the program's doing
        return RunResult(
            "runtime_error",
            None,
            detail=f"the run's init died without a report (wrapper exit {returncode})",
            **common,
        )
    return RunResult(classify(exit_code, stderr), exit_code, **common)
