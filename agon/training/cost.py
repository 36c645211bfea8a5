"""What a training step cost: CPU seconds of the whole process tree, and GPU seconds.

A step's CPU time is not only this process's: the grading pool's workers and the sandboxed
programs they run are processes of their own, alive across steps. :func:`cpu_seconds` adds
up, from ``/proc``, the user and system time of this process and of every process under it
(with what their finished children used), so the difference between two calls is what the
step cost in all of them. Elsewhere than Linux it falls back to this process and its
finished children (``resource.getrusage``), and says so in :data:`CPU_SCOPE`.

GPU seconds are wall seconds times the GPUs the process uses (0 on CPU): a device is held
for the whole step whether or not its kernels are busy.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_PROC = "/proc"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
CPU_SCOPE = "process tree" if os.path.isdir(_PROC) else "process and finished children"


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds incl. waited-for children) of ``pid``, or None if gone."""
    try:
        with open(f"{_PROC}/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / _TICKS


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and every process under it."""
    if not os.path.isdir(_PROC):
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    root = os.getpid()
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for name in os.listdir(_PROC):
        if name.isdigit():
            got = _stat(int(name))
            if got is not None:
                parent[int(name)], used[int(name)] = got
    total = 0.0
    for pid, secs in used.items():
        p, hops = pid, 0
        while p not in (root, 0, 1) and hops < 64:  # walk up to this process, if it is above
            p, hops = parent.get(p, 0), hops + 1
        if p == root:
            total += secs
    return total


def gpus_in_use() -> int:
    """GPUs this process can use (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class StepCost:
    """CPU and GPU seconds between :meth:`start` and :meth:`stop`, summed over intervals."""

    def __init__(self) -> None:
        self.gpus = gpus_in_use()
        self.cpu_s = 0.0
        self.gpu_s = 0.0
        self._t0: tuple[float, float] | None = None

    def start(self) -> None:
        self._t0 = (cpu_seconds(), time.perf_counter())

    def stop(self) -> tuple[float, float]:
        """Add the interval since :meth:`start`; return (cpu_s, gpu_s) so far, then reset."""
        if self._t0 is not None:
            cpu0, wall0 = self._t0
            self.cpu_s += cpu_seconds() - cpu0
            self.gpu_s += (time.perf_counter() - wall0) * self.gpus
            self._t0 = None
        out = (self.cpu_s, self.gpu_s)
        self.cpu_s = self.gpu_s = 0.0
        return out


@contextmanager
def measured() -> Iterator[dict[str, float]]:
    """``with measured() as cost:`` then ``cost["cpu_s"]``, ``cost["gpu_s"]`` of the block."""
    cost = StepCost()
    out: dict[str, float] = {}
    cost.start()
    try:
        yield out
    finally:
        out["cpu_s"], out["gpu_s"] = cost.stop()
