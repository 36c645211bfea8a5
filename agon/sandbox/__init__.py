"""The code sandbox: run and grade untrusted Python programs safely.

``run_program`` runs one program (see :mod:`agon.sandbox.core` for the isolation it gets and
the fallback where the kernel allows less); ``grade_program`` runs it on stdin/stdout tests
and returns an :class:`agon.grading.Verdict`; ``SandboxPool`` grades many at once.
Function-call tests become harness programs (:mod:`agon.sandbox.harness`).
"""

from agon.sandbox.core import ISOLATION, RunResult, detect_isolation, run_program, sandbox_python
from agon.sandbox.grade import VERDICTS, SandboxPool, grade_program, outputs_match
from agon.sandbox.harness import call_program, check_program

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
