"""The verdict of one sandboxed run, and how it is read from the way the program ended.

A program the kernel kills (SIGKILL at the hard CPU limit, SIGSEGV of a stack overflow) is a
``runtime_error`` unless the signal is SIGXCPU (``timeout``); ``memory`` is read from the
program's stderr (MemoryError), since an address-space limit makes allocations fail rather
than kill. Whether the program started, and its exit status inside a PID namespace, come from
the bootstrap's report on a private pipe (:func:`reported_exit`), which the program cannot
forge.
"""

from __future__ import annotations

import signal
from dataclasses import asdict, dataclass

_MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "out of memory")


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

    @classmethod
    def sandbox_failed(cls, err: Exception, seconds: float, isolation: str) -> RunResult:
        """The sandbox itself failed (the program never ran): never raised, reported."""
        detail = f"{type(err).__name__}: {err}"
        return cls("sandbox_error", None, "", "", seconds, isolation=isolation, detail=detail)


def classify(returncode: int, stderr: str) -> str:
    if returncode == 0:
        return "ok"
    if returncode == -signal.SIGXCPU:
        return "timeout"
    if any(s in stderr[-4096:] for s in _MEMORY_SIGNS):
        return "memory"
    return "runtime_error"


def reported_exit(report: bytes) -> int | None:
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
