"""The toy audit's columns in a report row (:mod:`agon.toy.audit`): each system's audit counts
summed over its seeds' summaries with the shares they give, and its cascade's drafts without an
answer counted from its seeds' ``samples.jsonl``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agon.results import read_jsonl
from agon.toy.audit import draft_counts

AUDIT_SHARES = {
    "take_up": ("habit_steps_taken", "habit_steps"),
    "luck": ("right_with_wrong_work", "right"),
    "oracle": ("oracle_right", "reads"),
}


def audit_columns(prefix: str, summaries: Sequence[str | Path]) -> dict[str, Any]:
    """A system's audit (:mod:`agon.toy.audit`) summed over its seeds' summaries: each count
    (``{prefix}audit_{key}``) and the shares :data:`AUDIT_SHARES` names (``{prefix}take_up``:
    right draft steps on the reader's always-wrong habits that it wrote right; ``{prefix}luck``:
    right answers with wrong work; ``{prefix}oracle``: the oracle reader's pass@1 on the
    cascade's drafts; None where nothing was counted); nothing where a seed's
    summary has no audit (a task or family without one)."""
    loaded = [json.loads(Path(p).read_text()).get("audit") for p in summaries]
    if not loaded or any(a is None for a in loaded):
        return {}
    total = {k: sum(int(a[k]) for a in loaded) for k in loaded[0]}
    out: dict[str, Any] = {f"{prefix}audit_{k}": v for k, v in total.items()}
    for name, (part, whole) in AUDIT_SHARES.items():
        out[f"{prefix}{name}"] = total[part] / total[whole] if total.get(whole) else None
    return out


def draft_columns(prefix: str, task: str, samples: Mapping[int, str | Path]) -> dict[str, Any]:
    """A cascade's drafts without an answer (:func:`agon.toy.audit.draft_counts`), from its
    seeds' ``samples.jsonl``: the counts pooled (``{prefix}drafts_n``,
    ``{prefix}drafts_unanswered_n``), the pooled share (``{prefix}drafts_unanswered``) and each
    seed's (``{prefix}drafts_unanswered_seed{k}``); nothing for a system that reads no single
    draft or whose samples are missing."""
    per_seed = {}
    for seed, path in samples.items():
        if not Path(path).is_file():
            return {}
        per_seed[seed] = draft_counts(task, read_jsonl(path))
    n = sum(d for d, _ in per_seed.values())
    if not n:
        return {}
    bad = sum(u for _, u in per_seed.values())
    out: dict[str, Any] = {f"{prefix}drafts_n": n, f"{prefix}drafts_unanswered_n": bad}
    out[f"{prefix}drafts_unanswered"] = bad / n
    for seed, (d, u) in per_seed.items():
        out[f"{prefix}drafts_unanswered_seed{seed}"] = u / d if d else None
    return out


def audit_counts(row: Mapping[str, Any], systems: Sequence[str]) -> dict[str, dict[str, int]]:
    """system -> its audit counts, from a row's :func:`audit_columns` (systems without them
    left out)."""
    out: dict[str, dict[str, int]] = {}
    for s in systems:
        head = f"{s}_audit_"
        found = {k[len(head) :]: v for k, v in row.items() if k.startswith(head)}
        if found:
            out[s] = found
    return out
