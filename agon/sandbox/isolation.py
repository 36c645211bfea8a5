"""Which isolation level the kernel allows here, and the command that applies it.

A run gets the strongest of :data:`ISOLATION` that works (what each level guarantees is in
:mod:`agon.sandbox`). What works depends on the kernel, on being root and on which tools are
installed, so it is not guessed: :func:`agon.sandbox.run.detect_isolation` probes it once per
process with a real sandboxed run whose program must find the network gone (hence it lives
beside the run), and ``AGON_SANDBOX_ISOLATION`` can force a level. :func:`_prefix` builds the
command that wraps the interpreter at a level: ``unshare`` for the namespaces, the init shell
of :mod:`agon.sandbox.bootstrap`, and, as root, the drop to the run's own uid
(:mod:`agon.sandbox.uids`) through ``unshare`` or ``setpriv``, whichever of the two can start
the interpreter here.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

from agon.sandbox.bootstrap import _INIT_SH
from agon.sandbox.uids import UID_BASE

ISOLATION = ("namespaces", "userns", "none")
ISOLATION_ENV = "AGON_SANDBOX_ISOLATION"  # force a level: namespaces | userns | none | auto
PYTHON_ENV = "AGON_SANDBOX_PYTHON"  # the interpreter that runs programs (default: this one)


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


def sandbox_python() -> str:
    """The interpreter that runs programs: ``AGON_SANDBOX_PYTHON`` if set, else this one.

    Any CPython 3.8+ (or PyPy) works: the bootstrap uses the standard library only. Set it
    when this interpreter is not readable by unprivileged users, or to judge with another.
    """
    return os.environ.get(PYTHON_ENV) or sys.executable
