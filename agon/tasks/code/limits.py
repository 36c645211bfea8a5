"""Per-problem limits from the data, and the per-problem cap on tests.

The sources state limits in their own shapes: CodeContests a protobuf ``Duration``
(``{"seconds": 2, "nanos": 0}``) and ``memory_limit_bytes``; TACO strings (``"2 seconds"``,
``"256 megabytes"``). A task runs each problem with the data's limit times a factor
(``time_limit_factor`` / ``memory_limit_factor``, see :class:`~agon.tasks.code.base.CodeTask`),
or its own ``grading_timeout_s`` / ``memory_mb`` where the data has none.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")

INTERPRETER_MB = 32
"""Address space added to a problem's memory limit for the interpreter itself, as
CodeContests' sandbox does (``CreateSandboxWithFds`` in ``execution/tester_sandboxer.cc``:
``memory_limit_bytes + (32ULL << 20)``): a judge's limit is for the program's data."""

_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$")
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0}
_SECONDS |= {"ms": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3}
_MEGABYTES = {"b": 2**-20, "byte": 2**-20, "bytes": 2**-20, "kb": 2**-10, "kilobyte": 2**-10}
_MEGABYTES |= {"kilobytes": 2**-10, "kib": 2**-10, "": 1.0, "m": 1.0, "mb": 1.0, "mib": 1.0}
_MEGABYTES |= {"megabyte": 1.0, "megabytes": 1.0, "gb": 1024.0, "gib": 1024.0}
_MEGABYTES |= {"gigabyte": 1024.0, "gigabytes": 1024.0}


def _amount(value: Any, units: dict[str, float]) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value > 0 else None
    m = _AMOUNT.match(str(value).lower())
    if not m or m.group(2) not in units:
        return None
    amount = float(m.group(1)) * units[m.group(2)]
    return amount if amount > 0 else None


def parse_seconds(value: Any) -> float | None:
    """Seconds from a TACO-style limit (``"2 seconds"``, ``"1 second"``, ``"0.5 s"``,
    ``"500 ms"``, a bare number); None when absent, zero or unreadable."""
    return _amount(value, _SECONDS)


def parse_megabytes(value: Any) -> float | None:
    """MiB from a TACO-style limit (``"256 megabytes"``, ``"64 MB"``, ``"1 GB"``, a bare
    number of MiB); None when absent, zero or unreadable."""
    return _amount(value, _MEGABYTES)


def duration_seconds(value: Any) -> float | None:
    """Seconds from CodeContests' ``time_limit`` (protobuf Duration ``{seconds, nanos}``);
    None when absent or zero (CodeContests stores a missing limit as zero)."""
    if not isinstance(value, dict):
        return None
    total = float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9
    return total if total > 0 else None


def cap_tests(groups: Sequence[Sequence[T]], max_tests: int | None, key: str) -> list[T]:
    """At most ``max_tests`` tests, taking the groups in order (public tests first, then
    private, then generated): whole groups while they fit, then a seeded sample of the group
    that does not (``key`` seeds it: task, seed and problem id), in source order; nothing after.

    Why not the first N: a source's later tests are often its large ones (CodeContests'
    generated tests grow), and the first N would test only small inputs. Why public first:
    they are the examples in the statement, the tests a solution is most surely meant to pass.
    """
    out: list[T] = []
    for group in groups:
        room = len(group) if max_tests is None else max_tests - len(out)
        if room <= 0:
            break
        if len(group) <= room:
            out.extend(group)
        else:
            keep = sorted(random.Random(key).sample(range(len(group)), room))
            out.extend(group[i] for i in keep)
    return out
