"""Run one untrusted Python program: fresh temp dir, limits, no network, nothing left behind.

Model-written code is hostile until proven otherwise. Every run:

- gets a fresh temp dir (its cwd, HOME and TMPDIR), removed afterwards whatever happened;
- starts in a session and process group of its own (``os.setsid`` in the bootstrap), so a
  wall-clock timeout kills the whole group, and it has no controlling terminal;
- runs under rlimits set by a tiny bootstrap before the program is compiled: CPU seconds,
  address space (``memory_mb``), file size, open files and processes (hard = soft, so the
  program cannot raise them back);
- gets the stdin it is given, through a pipe written without blocking, and has stdout and
  stderr read into capped buffers (a program that overflows stdout is killed at once);
- sees a scrubbed environment (no variable of the grader's leaks in);
- sees the standard library only (``python -I -S``: no site-packages of the grader, and half
  the interpreter's start-up time), unless ``site_packages=True``;
- has no network and cannot reach the grader, by the strongest :data:`ISOLATION` level the
  kernel allows (detected once per process by a probe run, or forced with the environment
  variable ``AGON_SANDBOX_ISOLATION``):

  ``namespaces``  ``unshare --net --pid --fork --kill-child``: an empty network namespace (no
                  interface is up, every connect fails), and a PID namespace whose init is
                  a shell that waits for the program (the program must not be the init: an
                  init ignores CPU-limit signals), so when the program ends, or the run is
                  killed, the kernel kills every process it left, including ones that
                  escaped into a new session. As root the
                  program also drops to an unprivileged uid of its own (``unshare --setuid``
                  or ``setpriv``, whichever can start the interpreter), one uid
                  per concurrent run, so RLIMIT_NPROC counts only that run's processes (root
                  ignores RLIMIT_NPROC) and the program can neither delete the grader's files
                  nor signal or read the grader's processes.
  ``userns``      the same namespaces inside an unprivileged user namespace
                  (``unshare --user --map-root-user``), for non-root users on kernels that
                  allow it; no uid of its own, so files of the user are writable.
  ``none``        the documented fallback: no namespace. A Python audit hook, installed
                  before the program runs, refuses sockets, ctypes, and starting other
                  programs (best effort: it guards Python-level calls only). Processes that
                  escape the process group are found afterwards by a per-run marker in their
                  environment, and (as root) every process of the run's own uid is killed.
                  As root the program still runs under its own uid; as a normal user it can
                  touch that user's files and processes, and a program that deliberately
                  escapes the guard (private APIs) and drops the marker can outlive the run.

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
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass

ISOLATION = ("namespaces", "userns", "none")
ISOLATION_ENV = "AGON_SANDBOX_ISOLATION"  # force a level: namespaces | userns | none | auto
PYTHON_ENV = "AGON_SANDBOX_PYTHON"  # the interpreter that runs programs (default: this one)

# Limits that are not per-call arguments. Each is a ceiling for hostile code, far above what
# a competitive-programming solution needs.
STDOUT_CAP = 4 * 1024 * 1024  # bytes of stdout kept; more kills the run (status output_limit)
STDERR_CAP = 64 * 1024  # bytes of stderr kept (the head); the rest is read and dropped
FSIZE_MB = 16  # largest file the program may write
NOFILE = 64  # open file descriptors
NPROC = 32  # processes + threads of the run's uid (as root: its own uid, see above)
UID_BASE = 200_000  # first uid handed to runs as root; uids need no passwd entry
UID_SLOTS = 1024  # concurrent runs per grader process that get distinct uids
_READ_CHUNK = 65536
_WRITE_CHUNK = 65536
_ORPHAN_GRACE_S = 0.2  # once the program exited, how long inherited pipes may stay open
_REPORT_CAP = 64  # bytes kept of the bootstrap's report ("S", then "W<status>\n")
_KILL_WAIT_S = 2.0  # how long a SIGKILLed process may take to die before we move on
_MARKER_VAR = "AGON_SANDBOX_RUN"  # per-run marker found in escaped processes (fallback)

_MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "out of memory")

# The bootstrap runs as ``python -I -S -c BOOT FD CPU AS FSIZE NOFILE NPROC GUARD``. It sets
# the limits, optionally installs the audit guard, sends "S" on FD (the program starts),
# closes FD, and runs prog.py as __main__ in a fresh module. The program never holds FD, so
# it cannot forge the start message nor the exit report below.
#
# In a PID namespace the run's init (PID 1) is a shell, not the program: a namespace's init
# ignores signals it has no handler for, CPU-limit signals included. The shell waits for the
# program and sends "W<status>" on FD (the shell's status: 128+N for signal N), which
# ``unshare`` would not pass on for a signal. A program that exits with 128+N itself reads as
# killed by signal N: a failure either way.
# (dash redirects only fds 0-9 by number; the pipe's number may be higher, so it is reopened
# through /proc, which is the same pipe)
_INIT_SH = 'fd=$1; shift; "$@"; echo "W$?" > /proc/self/fd/$fd'
_BOOT = r"""
import os, sys, resource
def _agon_boot():
    fd, cpu, mem, fsize, nofile, nproc, guard = (int(x) for x in sys.argv[1:8])
    limits = [(resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (mem, mem)),
              (resource.RLIMIT_FSIZE, (fsize, fsize)), (resource.RLIMIT_NOFILE, (nofile, nofile)),
              (resource.RLIMIT_NPROC, (nproc, nproc)), (resource.RLIMIT_CORE, (0, 0))]
    for res, lim in limits:
        resource.setrlimit(res, lim)
    os.setsid()
    if guard:
        blocked = ("socket.__new__", "socket.connect", "socket.bind", "ctypes.dlopen",
                   "ctypes.dlsym", "ctypes.cdata", "os.system", "os.exec", "os.posix_spawn",
                   "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "pty.spawn",
                   "os.kill", "os.killpg")
        def hook(event, args, blocked=frozenset(blocked)):
            if event in blocked:
                raise PermissionError("sandbox: " + event + " is not allowed")
        sys.addaudithook(hook)
    os.write(fd, b"S")
    os.close(fd)
    with open("prog.py", "rb") as f:
        src = f.read()
    sys.argv = ["prog.py"]
    return compile(src, "prog.py", "exec")
_agon_code = _agon_boot()
_agon_main = type(sys)("__main__")
_agon_main.__file__ = "prog.py"
_agon_main.__builtins__ = __builtins__
sys.modules["__main__"] = _agon_main
exec(_agon_code, _agon_main.__dict__)
"""


@dataclass(frozen=True)
class RunResult:
    """What one sandboxed run did.

    ``status``: ``ok`` (exit 0), ``timeout`` (wall clock or CPU limit), ``memory`` (address
    space exhausted), ``runtime_error`` (any other failure of the program), ``output_limit``
    (stdout over its cap; the run was killed) or ``sandbox_error`` (the sandbox failed; the
    program never ran). ``stdout`` / ``stderr`` are decoded (UTF-8, invalid bytes replaced)
    and capped. ``exit_code`` is the program's exit status, negative for a signal, None when
    the sandbox killed it or never started it.
    """

    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    isolation: str = ""
    detail: str | None = None

    def to_dict(self) -> dict:
        """A JSON-able dict."""
        return asdict(self)


# ---------------------------------------------------------------------------------------
# isolation level


def _which(name: str) -> str | None:
    return shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin:" + os.environ.get("PATH", ""))


def _prefix(
    level: str, uid: int | None, uid_method: str | None = None, report_fd: int | None = None
) -> list[str]:
    """The command that wraps the interpreter at ``level``: namespaces, the init shell (which
    reports the exit status on ``report_fd``), and the drop to ``uid`` (as root)."""
    method = uid_method or (_uid_method(sandbox_python()) if uid is not None else None)
    ns: list[str] = []
    if level != "none" or (uid is not None and method == "unshare"):
        ns = [_which("unshare") or "unshare"]
        if level == "userns":
            ns += ["--user", "--map-root-user"]
        if level != "none":
            ns += ["--net", "--pid", "--fork", "--kill-child"]
        if uid is not None and method == "unshare":  # unshare sets the ids itself: one exec less
            ns += [f"--setuid={uid}", f"--setgid={uid}"]
    if level != "none" and report_fd is not None:
        ns += [_which("sh") or "/bin/sh", "-c", _INIT_SH, "sh", str(report_fd)]
    if uid is not None and method == "setpriv":
        ns += [_which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return ns


@functools.cache
def _uid_method(python: str = sys.executable) -> str | None:
    """How a root run drops to its own uid: ``unshare`` (``--setuid/--setgid``, cheapest),
    ``setpriv``, or None when neither can start ``python`` as an unprivileged user with an
    importable standard library and no supplementary groups (then runs keep root: weaker).

    Both are probed because they differ in practice: an interpreter under a root-only
    directory (pyenv in /root) starts through setpriv but not through unshare.
    """
    uid = UID_BASE - 1  # outside every run's range
    probe = "import os, socket, json; print(os.getuid(), os.getgroups())"
    for method in ("unshare", "setpriv"):
        if _which(method) is None:
            continue
        argv = _prefix("none", uid, method) + [python, "-I", "-S", "-c", probe]
        try:
            out = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=30,
                cwd="/",
                env={"PATH": "/usr/bin:/bin"},
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.split() == [str(uid), "[]"]:
            return method
    return None


def _is_root() -> bool:
    return os.geteuid() == 0


_PROBE_LOCK = threading.Lock()  # pool threads that start together probe once, not each


def sandbox_python() -> str:
    """The interpreter that runs programs: ``AGON_SANDBOX_PYTHON`` if set, else this one.

    Any CPython 3.8+ (or PyPy) works: the bootstrap uses the standard library only. Set it
    when this interpreter is not readable by unprivileged users, or to judge with another.
    """
    return os.environ.get(PYTHON_ENV) or sys.executable


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
    deployment that asked for namespaces must not silently run without them.
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


# ---------------------------------------------------------------------------------------
# uids for concurrent runs (root only)


class _UidSlots:
    """Hands out distinct unprivileged uids to concurrent runs of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Offset by pid so that two grader processes on one machine rarely share uids.
        self._base = UID_BASE + (os.getpid() % 997) * UID_SLOTS
        self._free = list(range(UID_SLOTS))

    def take(self) -> int:
        with self._lock:
            if not self._free:
                raise RuntimeError(f"more than {UID_SLOTS} concurrent sandbox runs in one process")
            return self._base + self._free.pop()

    def give(self, uid: int) -> None:
        with self._lock:
            self._free.append(uid - self._base)


_UIDS: _UidSlots | None = None
_UIDS_LOCK = threading.Lock()


def _uid_slots() -> _UidSlots:
    global _UIDS
    with _UIDS_LOCK:
        if _UIDS is None:
            _UIDS = _UidSlots()
        return _UIDS


# ---------------------------------------------------------------------------------------
# cleanup helpers


def _rmtree(path: str) -> None:
    """Remove the run's dir even if the program chmod-ed parts of it away."""

    def onerror(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)
    if os.path.exists(path):  # last resort: ownership and modes reset, then retry once
        for root, dirs, files in os.walk(path):
            for n in dirs + files:
                try:
                    os.chmod(os.path.join(root, n), stat.S_IRWXU)
                except OSError:
                    pass
        shutil.rmtree(path, ignore_errors=True)


def _kill_tree(proc: subprocess.Popen, marker: str | None) -> None:
    """Kill every descendant of the run, then its process group, then (fallback) escapees.

    Descendants go first and ``proc`` (``unshare``, or the bootstrap's init) last, so that
    each dead process is reaped by its own parent: killing the parent first would hand the
    zombies to the machine's init, which need not reap them.
    """
    import psutil

    victims: list[psutil.Process] = []
    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        pass
    for v in victims:
        try:
            v.kill()
        except psutil.Error:
            pass
    _wait_gone(victims)
    try:
        proc.wait(timeout=_ORPHAN_GRACE_S)  # it reaps its child and exits by itself
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(
            proc.pid, signal.SIGKILL
        )  # the wrapper's group (in `none`: the program's session)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass
    if marker is not None:
        _wait_gone(_kill_marked(marker))


def _wait_gone(procs: list, timeout_s: float = _KILL_WAIT_S) -> None:
    """Wait until every killed process is dead. A zombie is dead: its reaper may be some other
    process (a killed namespace's init is reaped by whoever inherits it), not us."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while procs and time.monotonic() < deadline:
        alive = []
        for p in procs:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.Error:
                pass
        procs = alive
        if procs:
            time.sleep(0.01)


def _kill_uid(uid: int) -> list:
    """Fallback as root: kill every process of the run's own uid (held by this run alone)."""
    import psutil

    found = []
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"] is not None and uid in (
                p.info["uids"].real,
                p.info["uids"].effective,
            ):
                p.kill()
                found.append(p)
        except psutil.Error:
            pass
    _wait_gone(found)
    return found


def _kill_marked(marker: str) -> list:
    """Fallback: kill processes whose environment carries this run's marker."""
    import psutil

    needle = f"{_MARKER_VAR}={marker}".encode()
    found = []
    me = os.getpid()
    for pid in psutil.pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in env:
            try:
                p = psutil.Process(pid)
                p.kill()
                found.append(p)
            except psutil.Error:
                pass
    return found


# ---------------------------------------------------------------------------------------
# the run


def _classify(returncode: int, stderr: str) -> str:
    if returncode == 0:
        return "ok"
    if returncode == -signal.SIGXCPU:
        return "timeout"
    if any(s in stderr[-4096:] for s in _MEMORY_SIGNS):
        return "memory"
    return "runtime_error"


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
    # If no way to drop the uid works, a root run keeps root (weaker, see the module docstring).
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
    exit_code = returncode if level == "none" else _reported_exit(report)
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
    return RunResult(_classify(exit_code, stderr), exit_code, **common)


def _reported_exit(report: bytes) -> int | None:
    """The program's exit code from the init shell's report (-N: killed by signal N), None if
    there is none."""
    i = report.find(b"W")
    if i < 0 or not report.endswith(b"\n"):
        return None
    try:
        status = int(report[i + 1 : -1])
    except ValueError:
        return None
    return -(status - 128) if status > 128 else status
