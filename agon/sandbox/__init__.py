"""The code sandbox: run and grade untrusted Python programs safely.

``run_program`` runs one program with the isolation described below (or the fallback where
the kernel allows less); ``grade_program`` runs it on stdin/stdout tests and returns an
:class:`agon.grading.Verdict`; ``SandboxPool`` grades many at once. Function-call tests
become harness programs (:mod:`agon.sandbox.harness`).

The modules: :mod:`~agon.sandbox.run` (one run, and the probe of which isolation level works),
:mod:`~agon.sandbox.result` (the verdict of a run), :mod:`~agon.sandbox.isolation` (the
isolation levels and the command that applies one),
:mod:`~agon.sandbox.bootstrap` (the code that sets the limits inside the sandbox),
:mod:`~agon.sandbox.box` (a run's dir, and reading what the program left in it),
:mod:`~agon.sandbox.uids` (a uid of its own for each concurrent root run),
:mod:`~agon.sandbox.reaper` (killing what a run leaves behind, removing its dir),
:mod:`~agon.sandbox.batch` (a program's tests in one sandbox, one fork each),
:mod:`~agon.sandbox.grade` (verdicts on tests, the pool) and :mod:`~agon.sandbox.harness`.

Each run: fresh temp dir, limits, no network, nothing left behind. A program's tests share one
sandbox where there is a PID namespace (set-up paid once, a fresh fork and limits per test, all
it left killed between tests; see :mod:`agon.sandbox.batch`).
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
"""

from agon.sandbox.grade import VERDICTS, SandboxPool, grade_program, outputs_match
from agon.sandbox.harness import call_program, check_program
from agon.sandbox.isolation import ISOLATION, sandbox_python
from agon.sandbox.result import RunResult
from agon.sandbox.run import detect_isolation, run_program

__all__ = [
    "ISOLATION",
    "VERDICTS",
    "RunResult",
    "SandboxPool",
    "call_program",
    "check_program",
    "detect_isolation",
    "grade_program",
    "outputs_match",
    "run_program",
    "sandbox_python",
]
