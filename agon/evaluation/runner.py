"""Evaluate a system on a task: per-sample JSONL, a summary with pass@k, resumable.

:func:`evaluate` runs a built system on a task's problems; building the system and task
from a config is :mod:`agon.evaluation.from_config`, the records :mod:`agon.evaluation.records`,
the command line ``agon eval`` (:mod:`agon.cli.eval`).

Output (``DIR``):

- ``samples.jsonl``: one line per (problem, sample): problem id, gold answer (math tasks),
  final prompt, draft(s) or proposals, completion, extracted answer, verdict, token counts.
- ``summary.json``: pass@1 with standard error and 95% bootstrap interval, pass@k for the
  configured k, mean tokens, wall time, provenance; computed from ``samples.jsonl`` as read
  back from disk, so the two cannot disagree.

Resume: problems are done in fixed chunks, and a chunk's lines are appended and fsynced in one
write. A restarted evaluation keeps every problem whose ``n`` lines are all present (a torn
last line or a partly written problem is cut off), and generates only the rest. Each chunk is
seeded from the position of its first problem, so a resumed run draws from the same seeds as
an uninterrupted one (identical samples where the chunking coincides). A ``samples.jsonl``
written by a different evaluation (other system, models, task or sampling) is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from agon.config import config_hash
from agon.engines.base import SamplingParams
from agon.evaluation.records import complete_records, read_samples, record, summarize_records
from agon.provenance import atomic_write_text, write_results
from agon.systems import System
from agon.tasks import Problem, Task

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"


def chunk_seed(seed: int, start: int) -> int:
    """The sampling seed of the chunk whose first problem is ``problems[start]``: a hash, so
    that no two chunks (nor their stage and batch offsets) share a seed."""
    return int.from_bytes(
        hashlib.sha256(f"agon-eval:{seed}:{start}".encode()).digest()[:4], "little"
    )


def evaluate(
    system: System,
    task: Task,
    problems: Sequence[Problem],
    out_dir: str | Path,
    *,
    n: int = 1,
    ks: Sequence[int] = (1,),
    sampling: SamplingParams | None = None,
    chunk_size: int = 64,
    seed: int = 0,
    n_boot: int = 1000,
    config: Any = None,
    identity: dict | None = None,
    meta: dict | None = None,
    progress: bool = True,
    audit: Callable[[Sequence[dict], Mapping[str, Problem]], dict] | None = None,
) -> dict:
    """Run ``system`` on ``problems`` (``n`` samples each), grade, and write the results.

    ``chunk_size`` is the number of samples (problems x n) per system call, the unit of resume.
    ``identity`` describes what makes this evaluation this one (models, settings); with the
    system, task, split and sampling it fixes the ``run_id`` a resumed run must match.
    ``meta`` is copied into the summary; ``audit`` (the final sample records, the problems by
    id) returns what the summary carries as ``audit`` (:mod:`agon.toy.audit`). Returns the
    summary payload (without provenance).
    """

    if n < 1:
        raise ValueError(f"n (samples per problem) must be >= 1, got {n}")
    bad_k = [k for k in ks if not 1 <= k <= n]
    if bad_k:
        raise ValueError(f"pass@k needs 1 <= k <= n={n}; got k={bad_k}")
    if not problems:
        raise ValueError(
            f"no problems to evaluate for task {task.name!r} (empty split, or max_problems 0)"
        )
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"problem ids must be unique; {len(ids) - len(set(ids))} repeated in task {task.name!r}"
        )
    sampling = sampling or SamplingParams()
    sampling_base = sampling.seed if sampling.seed is not None else seed
    run_id = config_hash(
        {
            "system": system.name,
            "task": task.name,
            "task_version": task.version,
            "problems": config_hash(ids),
            "n": n,
            "sampling": {**sampling.__dict__, "seed": sampling_base},
            "identity": identity or {},
        }
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / SAMPLES_FILE
    records, clean_bytes = read_samples(path)
    kept = complete_records(records, n, run_id, path)
    if len(kept) != len(records) or (path.is_file() and path.stat().st_size != clean_bytes):
        # drop the torn tail and the partly written problems before appending
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    done = {r["problem_id"] for r in kept}
    if done:
        print(
            f"resuming {path}: {len(done)} of {len(problems)} problems already done",
            file=sys.stderr,
        )
    per_chunk = max(1, chunk_size // n)
    session_start = time.perf_counter()
    bar = tqdm(
        total=len(problems),
        initial=len(done),
        desc=f"eval {system.name} on {task.name}",
        unit="problem",
        disable=not progress,
    )
    try:
        with open(path, "a") as f:
            for start in range(0, len(problems), per_chunk):
                chunk = [p for p in problems[start : start + per_chunk] if p.id not in done]
                if not chunk:
                    continue
                t0 = time.perf_counter()
                chunk_sampling = SamplingParams(
                    **{**sampling.__dict__, "seed": chunk_seed(sampling_base, start)}
                )
                samples = system.run(task, chunk, n, chunk_sampling)
                flat = [(p, j, s) for p, ss in zip(chunk, samples) for j, s in enumerate(ss)]
                verdicts = task.grade([p for p, _, _ in flat], [s.completion for _, _, s in flat])
                share = (time.perf_counter() - t0) / len(flat)
                lines = "".join(
                    json.dumps(record(run_id, system.name, p, j, s, v, task.kind == "math", share))
                    + "\n"
                    for (p, j, s), v in zip(flat, verdicts)
                )
                f.write(
                    lines
                )  # one write per chunk, then fsync: a kill leaves whole chunks or a torn tail
                f.flush()
                os.fsync(f.fileno())
                bar.update(len(chunk))
    finally:
        bar.close()
    final, _ = read_samples(path)
    final = complete_records(final, n, run_id, path)
    stats = summarize_records(final, ks, n_boot=n_boot, seed=seed)
    payload = {
        "system": system.name,
        "task": task.name,
        "task_version": task.version,
        "run_id": run_id,
        "n_samples_per_problem": n,
        "k": list(ks),
        "sampling": sampling.__dict__ | {"seed": sampling_base, "stop": list(sampling.stop)},
        **stats,
        "session_wall_s": time.perf_counter() - session_start,
        "samples_file": SAMPLES_FILE,
        **({"task_notes": notes} if (notes := task.evaluation_notes()) else {}),
        **(meta or {}),
    }
    if audit is not None:
        payload["audit"] = audit(final, {p.id: p for p in problems})
    write_results(out_dir / SUMMARY_FILE, payload, config=config, seed=seed)
    return payload
