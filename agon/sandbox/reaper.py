"""Leave nothing behind: kill every process a run started, and remove the run's dir.

A hostile program may fork, escape into a new session, ignore signals, or chmod its dir away.
In a PID namespace the kernel kills what is left once the namespace's init dies; the helpers
here do the rest. :func:`_kill_tree` kills the run's descendants before the wrapper, so that
each dead process is reaped by its own parent; in the ``none`` fallback, where no namespace
ends the run for us, escapees are found by the run's environment marker (:func:`_kill_marked`)
and, as root, by the run's own uid (:func:`_kill_uid`). :func:`_rmtree` removes the dir
whatever modes the program left on it.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time

import psutil

_ORPHAN_GRACE_S = 0.2  # once the program exited, how long inherited pipes may stay open
_KILL_WAIT_S = 2.0  # how long a SIGKILLed process may take to die before we move on
_MARKER_VAR = "AGON_SANDBOX_RUN"  # per-run marker found in escaped processes (fallback)


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
