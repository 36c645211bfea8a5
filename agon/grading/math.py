"""Math grading: extract the final answer, judge equivalence with math-verify, never hang.

math-verify bounds its own work with SIGALRM, which only works on a process's main thread, and
some inputs escape it anyway (towers of powers evaluated inside GMP, megabyte answers). So
:class:`MathGrader` grades in a pool of worker processes (pebble) with a hard wall-clock limit
per item: a worker that overruns is killed and replaced, and the item's verdict is
``timeout``. Workers also run under an address-space limit so one answer cannot exhaust memory.

Statuses: ``graded`` (correct is True/False), ``no_answer`` (correct=False: nothing boxed, or
an unfinished thinking trace), ``timeout`` and ``error`` (correct=None: cannot score).
"""

from __future__ import annotations

import functools
import os
import re
import resource
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from multiprocessing import get_context

from pebble import ProcessPool

from agon.grading.verdict import Verdict

THINK_END = "</think>"
THINK_START = "<think>"
MAX_ANSWER_CHARS = 1000  # a boxed answer longer than this is graded wrong, unparsed


def hostile_answers() -> list[str]:
    """Completions known to stress math-verify or the extractor (towers of powers, huge
    factorials, deep nesting, unclosed boxes, a megabyte of text); the tests and
    `python -m bench grading` share this set. None of them equals 7."""
    return [
        r"\boxed{9^{9^{9^{9^{9}}}}}",
        r"\boxed{(10^{8})!}",
        r"\boxed{10^{10^{10^{10}}}}",
        "\\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}",
        "\\boxed{" * 100_000,
        "x" * 1_000_000 + r"\boxed{1}",
        r"\boxed{\int_0^\infty e^{-x^{x^x}} dx}",
    ]


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def answer_section(completion: str) -> str | None:
    """The part of a completion that may hold the final answer.

    For thinking models only the text after the last ``</think>`` counts; a completion that
    opened ``<think>`` and never closed it has no answer section (None).
    """
    if THINK_END in completion:
        return completion.rsplit(THINK_END, 1)[1]
    if THINK_START in completion:
        return None
    return completion


def last_boxed(text: str, tries: int = 3) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces balanced.

    If the last box never closes (a truncated generation), the one before it is tried, up to
    ``tries`` boxes, so a hostile run of unclosed boxes costs linear time, not quadratic.
    """
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts[-tries:]):
        depth = 1
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
    return None


def extract_answer(completion: str) -> str | None:
    """The final answer of a completion: the last boxed expression of its answer section."""
    section = answer_section(completion)
    if section is None:
        return None
    return last_boxed(section)


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str, soft_timeout: int):
    # lazy: math_verify (loads sympy): off the import of agon.config, the CLI and the DAG
    from math_verify import parse

    text = gold if "\\boxed" in gold or "$" in gold else f"${gold}$"
    return parse(text, parsing_timeout=soft_timeout, raise_on_error=True)


def grade_one(gold: str, completion: str, soft_timeout: int = 2) -> Verdict:
    """Grade one completion in this process (main thread only: math-verify uses SIGALRM).

    This has no hard limit; untrusted input goes through :class:`MathGrader`. math-verify's
    own timeouts give ``timeout`` (not a silent False); an answer it cannot parse or compare
    is wrong, as in math-verify; a gold answer it cannot parse is an ``error``.
    """
    # lazy: math_verify (loads sympy): off the import of agon.config, the CLI and the DAG
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    t0 = time.perf_counter()

    def verdict(correct, status, answer, detail=None):
        return Verdict(correct, status, answer, time.perf_counter() - t0, detail)

    answer = extract_answer(completion)
    if answer is None:
        return verdict(False, "no_answer", None)
    if len(answer) > MAX_ANSWER_CHARS:
        return verdict(False, "graded", answer[:80] + "...", "answer too long")
    try:
        gold_parsed = _parse_gold(gold, soft_timeout)
    except TimeoutException:
        return verdict(None, "timeout", answer, "gold answer parse timed out")
    except Exception as err:
        return verdict(None, "error", answer, f"gold answer unparseable: {type(err).__name__}")
    if not gold_parsed:
        return verdict(None, "error", answer, f"gold answer unparseable: {gold[:80]!r}")
    try:
        pred = parse(f"\\boxed{{{answer}}}", parsing_timeout=soft_timeout, raise_on_error=True)
        correct = bool(pred) and verify(
            gold_parsed, pred, timeout_seconds=soft_timeout, raise_on_error=True
        )
    except TimeoutException:
        return verdict(None, "timeout", answer, "math-verify soft limit")
    except Exception as err:
        return verdict(
            False, "graded", answer, f"unparseable or incomparable: {type(err).__name__}"
        )
    return verdict(bool(correct), "graded", answer)


def _worker_init(memory_mb: int) -> None:
    """Pool worker setup: cap memory, and pay math-verify's import and its parsers' first use
    (building the LaTeX and expression parsers takes a second or more on a busy machine) here,
    not inside the first answer's soft time limit, where it read as that answer's timeout."""
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # lazy: math_verify (loads sympy): off the import of agon.config, the CLI and the DAG
    from math_verify import parse, verify

    verify(parse("$\\frac{1}{2}$"), parse("\\boxed{0.5}"))  # no time limit: a warm-up


class MathGrader:
    """A pool of grading workers with a hard wall-clock limit per item.

    Use as a context manager, or call :meth:`close`. ``grade`` takes parallel lists of gold
    answers and completions and returns one :class:`Verdict` each, in order.
    """

    def __init__(
        self,
        timeout_s: float = 5.0,
        workers: int = 0,
        memory_mb: int = 4096,
        soft_timeout: int | None = None,
    ):
        """``timeout_s``: hard wall-clock limit per item. ``workers``: processes (0 = one per
        core). ``memory_mb``: address-space cap per worker. ``soft_timeout``: math-verify's own
        SIGALRM limits in whole seconds; None picks timeout_s / 3 so the common slow case ends
        without killing a worker; 0 disables them, leaving only the hard limit."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self.soft_timeout = (
            max(1, int(self.timeout_s / 3)) if soft_timeout is None else soft_timeout
        )
        self.workers = workers or os.cpu_count() or 1
        self.memory_mb = memory_mb
        self._pool = self._start()

    def _start(self):
        # forkserver, not fork: callers (trainers) hold torch threads that fork would copy.
        # Preloading this module (and so math-verify) in the server makes a replacement
        # worker cheap after a kill, and keeps the server from re-importing __main__.
        ctx = get_context("forkserver")
        ctx.set_forkserver_preload(["agon.grading.math", "math_verify"])
        return ProcessPool(
            max_workers=self.workers,
            initializer=_worker_init,
            initargs=(self.memory_mb,),
            context=ctx,
        )

    def grade(self, golds: Sequence[str], completions: Sequence[str]) -> list[Verdict]:
        """Grade each completion against its gold answer; never raises for a bad answer.

        Each item has a hard limit of ``timeout_s`` once it starts; the whole batch has a
        deadline (items / workers + 2) * timeout_s + 30 s, after which anything unfinished is
        an ``error`` and the pool is restarted, so even a broken pool cannot hang the caller.
        """
        if len(golds) != len(completions):
            raise ValueError(f"{len(golds)} gold answers for {len(completions)} completions")
        futures = [
            self._pool.schedule(
                grade_one, args=(str(g), str(c), self.soft_timeout), timeout=self.timeout_s
            )
            for g, c in zip(golds, completions)
        ]
        deadline = time.monotonic() + (len(futures) / self.workers + 2) * self.timeout_s + 30
        verdicts, stalled = [], False
        for comp, fut in zip(completions, futures):
            try:
                verdicts.append(fut.result(timeout=max(0.0, deadline - time.monotonic())))
            except FutureTimeout:
                if fut.done():  # pebble's per-item hard limit fired
                    answer = extract_answer(comp)
                    detail = "hard limit hit; worker replaced"
                    verdicts.append(
                        Verdict(None, "timeout", answer and answer[:200], self.timeout_s, detail)
                    )
                else:  # the batch deadline passed: the pool itself is stuck
                    stalled = True
                    fut.cancel()
                    verdicts.append(
                        Verdict(None, "error", None, 0.0, "grading pool stalled; restarted")
                    )
            except Exception as err:  # a worker that died (memory limit, crash)
                verdicts.append(
                    Verdict(None, "error", None, 0.0, f"{type(err).__name__}: {err}"[:200])
                )
        if stalled:
            self.close()
            self._pool = self._start()
        return verdicts

    def close(self) -> None:
        """Stop the workers (killing any still busy)."""
        self._pool.stop()
        self._pool.join(timeout=5)

    def __enter__(self) -> MathGrader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
