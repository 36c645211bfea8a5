"""The records of an evaluation: one JSON line per (problem, sample) in ``samples.jsonl``.

A record holds the problem id, gold answer (math tasks), final prompt, draft(s) or proposals,
completion, extracted answer, verdict and token counts. This module writes a record
(:func:`record`), reads a possibly torn file back (:func:`read_samples`), keeps the problems
whose samples are all there (:func:`complete_records`: how a killed evaluation resumes) and
computes the summary from them (:func:`summarize_records`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.stats import summarize
from agon.systems import Sample
from agon.tasks import Problem


def read_samples(path: str | Path) -> tuple[list[dict], int]:
    """Parsed records of a samples JSONL up to its first torn/unparseable line, and the byte
    length of that clean prefix."""
    path = Path(path)
    if not path.is_file():
        return [], 0
    records: list[dict] = []
    good = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn last line: the write was killed half way
            try:
                records.append(json.loads(raw))
            except json.JSONDecodeError:
                break
            good += len(raw)
    return records, good


def complete_records(records: Sequence[dict], n: int, run_id: str, path: Path) -> list[dict]:
    """The records of problems with all ``n`` samples; an error if another run wrote them."""
    for r in records:
        if r.get("run_id") != run_id:
            raise RuntimeError(
                f"{path} was written by a different evaluation (run_id {r.get('run_id')} != "
                f"{run_id}: "
                "other system, models, task, split or sampling); delete it or choose another --out"
            )
    by_problem: dict[str, set[int]] = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], set()).add(r["sample"])
    done = {pid for pid, s in by_problem.items() if s == set(range(n))}
    seen: set[tuple[str, int]] = set()
    kept = []
    for r in records:
        key = (r["problem_id"], r["sample"])
        if r["problem_id"] in done and key not in seen:
            seen.add(key)
            kept.append(r)
    return kept


def record(
    run_id: str,
    system: str,
    problem: Problem,
    index: int,
    sample: Sample,
    verdict: Any,
    gold: bool,
    wall_s: float,
) -> dict:
    rec = {
        "run_id": run_id,
        "system": system,
        "problem_id": problem.id,
        "sample": index,
        "difficulty": problem.difficulty,
        "prompt": sample.prompt,
        "drafts": sample.drafts,
        "completion": sample.completion,
        "extracted": verdict.extracted,
        "correct": verdict.correct,
        "status": verdict.status,
        "prompt_tokens": sample.prompt_tokens,
        "completion_tokens": sample.completion_tokens,
        "draft_tokens": sample.draft_tokens,
        "total_tokens": sample.total_tokens,
        "finish_reason": sample.finish_reason,
        "wall_s": wall_s,
    }
    if gold:
        rec["gold"] = problem.answer
    return rec


def summarize_records(records: Sequence[dict], ks: Sequence[int], n_boot: int, seed: int) -> dict:
    """pass@k (with se and 95% interval), mean tokens and wall time from sample records.

    A sample whose verdict is ``None`` (could not be graded) counts as not correct, and is
    counted in ``n_ungraded`` so it is visible.
    """
    if not records:
        raise ValueError("no samples to summarize")
    by_problem: dict[str, list[dict]] = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], []).append(r)
    counts = [(len(rs), sum(1 for r in rs if r["correct"] is True)) for rs in by_problem.values()]
    n_min = min(n for n, _ in counts)
    out = summarize(counts, ks=[k for k in ks if k <= n_min], n_boot=n_boot, seed=seed)
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1

    def mean(key: str) -> float:
        return sum(r[key] for r in records) / len(records)

    out.update(
        {
            "n_ungraded": sum(1 for r in records if r["correct"] is None),
            "status_counts": statuses,
            "mean_completion_tokens": mean("completion_tokens"),
            "mean_draft_tokens": mean("draft_tokens"),
            "mean_total_tokens": mean("total_tokens"),
            "total_generated_tokens": int(sum(r["total_tokens"] for r in records)),
            "finish_length_fraction": sum(1 for r in records if r["finish_reason"] == "length")
            / len(records),
            "wall_time_s": float(sum(r["wall_s"] for r in records)),
        }
    )
    return out
