"""The compute columns of the tables: what each evaluated system and each trained method spent.

Per trained method, the mean per seed of its runs' ``summary.json``: steps, completions, tokens
generated and trained on per model (:data:`MODEL_COMPUTE`), CPU and GPU seconds, wall hours
(the Snakemake benchmark where there is one), and for a budget-matched run (``train.budget``)
how far its spend came from its target, flagged beyond :data:`BUDGET_TOLERANCE`. Per evaluated
system, its generated tokens and wall hours. Used by table 1 (:mod:`agon.report`), the
ablations and ``results/related.csv``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agon.results import (
    TOKEN_KEYS,
    WALL_KEYS,
    Layout,
    benchmark_seconds,
    read_jsonl,
    summary_number,
)
from agon.training.logbook import cumulative_tokens
from agon.training.metrics import MODELS

# a budget-matched run whose spend is further than this from its target is flagged
BUDGET_TOLERANCE = 0.05
# per model keys of a training summary (``{model}/{key}``) shown as compute columns
MODEL_COMPUTE = ("steps", "completions", "tokens_generated", "tokens_trained", "cpu_s")


def _number(d: Mapping[str, Any] | None, key: str) -> float | None:
    v = (d or {}).get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean, or None when a value is missing (a partial mean would mislead)."""
    if not values or any(v is None for v in values):
        return None
    return sum(values) / len(values)


def compute_used(
    layout: Layout, family: str, task: str, system: str, seeds: Sequence[int]
) -> dict[str, float | None]:
    """Mean per evaluated seed of ``system``'s eval tokens and wall hours."""
    ev = [json.loads(Path(layout.eval_summary(family, task, system, s)).read_text()) for s in seeds]
    wall = _mean(
        [
            benchmark_seconds(layout.benchmark(f"eval/{family}/{task}/{system}/seed{s}"))
            or summary_number(e, WALL_KEYS)
            for s, e in zip(seeds, ev)
        ]
    )
    return {
        "eval_tokens": _mean([summary_number(e, TOKEN_KEYS) for e in ev]),
        "eval_wall_h": wall / 3600 if wall is not None else None,
    }


def train_compute(
    summaries: Sequence[str | Path],
    metrics: Sequence[str | Path] = (),
    benchmarks: Sequence[str | Path] = (),
) -> dict[str, Any]:
    """Mean per seed of a trained method's compute, from its runs' ``summary.json`` (one per
    seed; ``metrics``: their ``metrics.jsonl``, for tokens an old summary lacks;
    ``benchmarks``: their Snakemake benchmark files, preferred for wall time).

    Keys: ``train_tokens``, ``train_wall_h``, ``cpu_s``, ``gpu_s``, ``{model}_{k}`` for ``k``
    in :data:`MODEL_COMPUTE`, and for a run with a ``budget``: ``budget_match``,
    ``{model}_budget_rel_diff`` (mean over seeds), ``{model}_budget_hit_step_cap`` (any seed)
    and ``{model}_budget_note``. A key no summary has is None."""
    loaded = [json.loads(Path(p).read_text()) for p in summaries]
    toks = []
    for i, s in enumerate(loaded):
        t = summary_number(s, TOKEN_KEYS)
        if t is None and i < len(metrics) and Path(metrics[i]).is_file():
            rows = read_jsonl(metrics[i])
            t = cumulative_tokens(rows)[-1] if rows else None
        toks.append(t)
    walls = [
        (benchmark_seconds(benchmarks[i]) if i < len(benchmarks) else None)
        or summary_number(s, WALL_KEYS)
        for i, s in enumerate(loaded)
    ]
    w = _mean(walls)
    out: dict[str, Any] = {
        "train_tokens": _mean(toks),
        "train_wall_h": w / 3600 if w is not None else None,
        "cpu_s": _mean([_number(s, "cpu_s") for s in loaded]),
        "gpu_s": _mean([_number(s, "gpu_s") for s in loaded]),
    }
    for m in MODELS:
        for k in MODEL_COMPUTE:
            out[f"{m}_{k}"] = _mean([_number(s, f"{m}/{k}") for s in loaded])
    budgets = [s.get("budget") if isinstance(s.get("budget"), dict) else None for s in loaded]
    if any(budgets):
        out |= budget_columns(budgets)
    return out


def budget_columns(budgets: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """What a budget-matched method's runs (one ``budget`` per seed, None for a run without
    one) spent against their targets, and a note where that is not a match."""
    given = [b for b in budgets if b]
    matches = sorted({str(b.get("match")) for b in given})
    out: dict[str, Any] = {"budget_match": ",".join(matches)}
    for m in MODELS:
        rels = [_number(b, f"{m}/relative_difference") if b else None for b in budgets]
        capped = sum(b.get(f"{m}/hit_step_cap") is True for b in given)
        out[f"{m}_budget_rel_diff"] = _mean(rels)
        out[f"{m}_budget_hit_step_cap"] = capped > 0
        notes = []
        known = [r for r in rels if r is not None]
        worst = max(known, key=abs) if known else None
        if worst is not None and abs(worst) > BUDGET_TOLERANCE:
            notes.append(
                f"not matched: model {m} spent {100 * worst:+.1f}% of its {matches[0]} target "
                f"in a seed (tolerance {100 * BUDGET_TOLERANCE:.0f}%)"
            )
        if capped:
            notes.append(f"step cap: model {m} hit it before its target in {capped} seed(s)")
        if len(known) < len(budgets):
            notes.append(
                f"incomplete: {len(budgets) - len(known)} seed(s) record no budget for model {m}"
            )
        out[f"{m}_budget_note"] = "; ".join(notes)
    return out
