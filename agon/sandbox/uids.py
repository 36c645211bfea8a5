"""Distinct unprivileged uids for concurrent sandbox runs as root.

Root ignores RLIMIT_NPROC, and a program running as root could delete the grader's files or
signal and read its processes, so a root run drops to an unprivileged uid of its own (the
drop itself is in :mod:`agon.sandbox.isolation`). One uid per concurrent run, not one for all
runs, so that RLIMIT_NPROC counts only that run's processes and the ``none`` fallback's uid
sweep (:mod:`agon.sandbox.reaper`) kills that run's processes and no other's.
"""

from __future__ import annotations

import os
import threading

UID_BASE = 200_000  # first uid handed to runs as root; uids need no passwd entry
UID_SLOTS = 1024  # concurrent runs per grader process that get distinct uids


class _UidSlots:
    """Hands out distinct unprivileged uids to concurrent runs of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Offset by pid so that two grader processes on one machine rarely share uids.
        self._base = UID_BASE + (os.getpid() % 997) * UID_SLOTS
        self._free = list(range(UID_SLOTS))

    def take(self) -> int:
        """A free uid for one run; raises RuntimeError when every slot is taken."""
        with self._lock:
            if not self._free:
                raise RuntimeError(f"more than {UID_SLOTS} concurrent sandbox runs in one process")
            return self._base + self._free.pop()

    def give(self, uid: int) -> None:
        """Hand ``uid`` (from :meth:`take`) back once its run is over."""
        with self._lock:
            self._free.append(uid - self._base)


_UIDS: _UidSlots | None = None
_UIDS_LOCK = threading.Lock()


def _uid_slots() -> _UidSlots:
    """The process's uid slots, made on first use (only root runs need them)."""
    global _UIDS
    with _UIDS_LOCK:
        if _UIDS is None:
            _UIDS = _UidSlots()
        return _UIDS
