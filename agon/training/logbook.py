# long: the code of every metrics row, from one step's rollouts to a run's summary.
"""The rows of a training run's ``metrics.jsonl``: made, combined, read and summarized.

One step's metrics from its rollouts (:func:`role_metrics`, :func:`reader_metrics`,
:func:`style_metrics`, :func:`duel_outcomes`), the rows of several processes combined into the
one-process row (:func:`counts_over_ranks`, :func:`combine_ranks`), and a run's rows read and
summarized (:func:`read_rows`, :func:`summarize_metrics`, :func:`mechanism_summary`). The keys
themselves, and how processes combine each, are declared in :mod:`agon.training.metrics`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agon.training.metrics import (
    CPU_S,
    EVAL_ROW_KEYS,
    EVAL_S,
    GPU_S,
    HABIT_STEPS,
    HABIT_TAKEN,
    HARD_PASS1,
    HIDDEN_SHARE,
    LR,
    MODEL_CPU_S,
    MODELS,
    OUTCOMES,
    POOLED_OUTCOME,
    READ_AFTER_RIGHT,
    READ_AFTER_WRONG,
    READS_AFTER_RIGHT,
    READS_AFTER_WRONG,
    ROBUST_PASS1,
    ROLE_COMPLETIONS,
    ROLE_CORRECT,
    ROLE_DEAD,
    ROLE_LENGTH,
    ROLE_REWARD,
    ROLE_TOKENS,
    ROLE_TRUNCATED,
    ROLE_UNGRADED,
    ROLE_ZERO_SPREAD,
    ROLLOUT_S,
    SKIPPED,
    STEP,
    STYLE_GAP_WEIGHT,
    STYLE_REWARD_GAP,
    STYLED,
    SUMMED,
    TAKE_UP,
    TOKENS,
    TRAINED_TOKENS,
    UPDATE_S,
    ZERO_ADVANTAGE,
    Declared,
    key,
)

# ----------------------------------------------------------------------------- one step


def _nanmean(x: Any) -> float:
    x = np.asarray(x, dtype=np.float64)
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else float("nan")


def role_metrics(
    model: str,
    role: str,
    rewards: np.ndarray,
    correct: np.ndarray,
    advantages: Any,
    completions: Sequence[Any],
) -> dict[str, float]:
    """The rollout metrics of ``model``'s completions in ``role`` (objects with ``token_ids``
    and ``finish_reason``; ``advantages`` an :class:`agon.rl.Advantages`), keyed
    ``{model}/{role}/...``."""
    lengths = [len(c.token_ids) for c in completions]
    zero_spread, dead = advantages.zero_spread, advantages.dead

    def k(template: str) -> str:
        return key(template, model=model, role=role)

    return {
        k(ROLE_REWARD): _nanmean(rewards),
        k(ROLE_CORRECT): _nanmean(correct),
        k(ROLE_UNGRADED): float(np.isnan(correct).mean()) if correct.size else 0.0,
        k(ROLE_ZERO_SPREAD): float(zero_spread.mean()) if zero_spread.size else float("nan"),
        k(ROLE_DEAD): float(dead.mean()) if dead is not None and dead.size else float("nan"),
        k(ROLE_LENGTH): float(np.mean(lengths)) if lengths else 0.0,
        k(ROLE_TRUNCATED): (
            float(np.mean([c.finish_reason == "length" for c in completions]))
            if completions
            else 0.0
        ),
        k(ROLE_TOKENS): float(sum(lengths)),
        k(ROLE_COMPLETIONS): float(len(completions)),
    }


def reader_metrics(
    reader: str, c_draft_per_read: np.ndarray, c_read: np.ndarray
) -> dict[str, float]:
    """The reader's correctness after right and after wrong drafts (graded pairs only; NaN
    where there was none), and how many reads followed a right and a wrong draft (the rates'
    denominators)."""
    ok = ~(np.isnan(c_draft_per_read) | np.isnan(c_read))
    d, r = c_draft_per_read[ok], c_read[ok]
    after_right, after_wrong = r[d == 1], r[d == 0]
    return {
        key(READ_AFTER_RIGHT, model=reader): _nanmean(after_right),
        key(READ_AFTER_WRONG, model=reader): _nanmean(after_wrong),
        key(READS_AFTER_RIGHT, model=reader): float(after_right.size),
        key(READS_AFTER_WRONG, model=reader): float(after_wrong.size),
    }


def take_up_metrics(reader: str, seen: int, taken: int) -> dict[str, float]:
    """A toy reader's take-up of right draft steps on its always-wrong habits this step
    (:func:`agon.toy.audit.rollout_take_up`): the counts and their rate (NaN: none seen)."""
    return {
        key(HABIT_STEPS, model=reader): float(seen),
        key(HABIT_TAKEN, model=reader): float(taken),
        key(TAKE_UP, model=reader): taken / seen if seen else float("nan"),
    }


def style_metrics(
    drafter: str, styles: Sequence[str | None], rewards: Sequence[float] | None = None
) -> dict[str, float]:
    """The share of hidden errors among the drafter's visible and hidden wrong drafts
    (``styles``: :meth:`agon.tasks.base.Task.error_style` of each wrong draft), and how many
    were classified; nothing when the task classifies none. With ``rewards`` (the drafter's
    reward of each wrong draft, in the same order), also what a hidden wrong draft was paid
    over a visible one, where the step holds both."""
    hidden = sum(x == "hidden" for x in styles)
    visible = sum(x == "visible" for x in styles)
    if not hidden + visible:
        return {}
    out = {
        key(HIDDEN_SHARE, model=drafter): hidden / (hidden + visible),
        key(STYLED, model=drafter): float(hidden + visible),
    }
    if rewards is not None and hidden and visible:
        r = np.asarray(rewards, dtype=float)
        kind = np.asarray([str(x) for x in styles])
        out[key(STYLE_REWARD_GAP, model=drafter)] = _nanmean(r[kind == "hidden"]) - _nanmean(
            r[kind == "visible"]
        )
        out[key(STYLE_GAP_WEIGHT, model=drafter)] = float(min(hidden, visible))
    return out


def rollout_sha(completions: Iterable[Any]) -> str:
    """A short fingerprint of completions' token ids, in order."""
    digest = hashlib.sha256()
    for c in completions:
        digest.update(np.asarray(c.token_ids, dtype=np.int64).tobytes() + b"|")
    return digest.hexdigest()[:16]


def duel_outcomes(c_draft_per_read: np.ndarray, c_read: np.ndarray) -> dict[str, float]:
    """Fractions of (draft, read) pairs the drafter wins, the reader wins, or tie (graded
    pairs only), keyed ``duel/{outcome}``."""
    ok = ~(np.isnan(c_draft_per_read) | np.isnan(c_read))
    n = int(ok.sum())
    if n == 0:
        return {POOLED_OUTCOME.format(outcome=o): float("nan") for o in OUTCOMES}
    d, r = c_draft_per_read[ok], c_read[ok]
    fractions = {
        "drafter_wins": (d > r).mean(),
        "reader_wins": (r > d).mean(),
        "ties": (d == r).mean(),
    }
    return {POOLED_OUTCOME.format(outcome=o): float(fractions[o]) for o in OUTCOMES}


def pool_duel_outcomes(metrics: dict[str, float]) -> None:
    """Pool the per-direction outcomes of a step into ``duel/{outcome}`` (in place)."""
    for outcome in OUTCOMES:
        suffix = "/" + POOLED_OUTCOME.format(outcome=outcome)
        vals = [v for k, v in metrics.items() if k.endswith(suffix) and not math.isnan(v)]
        if vals:
            metrics[POOLED_OUTCOME.format(outcome=outcome)] = float(np.mean(vals))


def counts_over_ranks(
    accelerator: Any, counts: dict[str, dict[str, float]], seconds: float
) -> tuple[dict[str, dict[str, float]], float]:
    """A step's per-model counts (``{model: {name: count}}``) summed over the processes, and
    the slowest process's seconds, as they are on one process: a baseline's own metrics (a
    teacher's, an anchor's) made from them are then the whole batch's on every rank, and
    :func:`combine_ranks`, which averages keys it does not know, keeps them."""
    if accelerator is None or accelerator.num_processes <= 1:
        return counts, seconds
    # lazy: accelerate (imports torch): off the reports' and agon train's import
    from accelerate.utils import gather_object

    shares = gather_object([(counts, seconds)])
    total = {
        name: {c: sum(share[name][c] for share, _ in shares) for c in per_model}
        for name, per_model in counts.items()
    }
    return total, max(t for _, t in shares)


def combine_ranks(
    rows: Sequence[Mapping[str, Any]], declared: Declared | None = None
) -> dict[str, Any]:
    """One step's row from the rows of every process that shared it (each on its own problems),
    as one process would have written it: each key as its declaration says
    (:class:`agon.training.metrics.Key`; ``declared``: :data:`agon.training.metrics.KEYS` and
    a trainer's own): counts add up, wall seconds are the slowest process's, a rate is weighted
    by its denominator on each process, what every process computes alike is averaged; the
    pooled duel outcomes are made again from the combined directions. A key no declaration
    matches is an error: combining it would be a guess."""
    if len(rows) == 1:
        return dict(rows[0])
    declared = declared or Declared()
    out: dict[str, Any] = {}
    found = {k: declared.find(k) for r in rows for k in r}  # each key's declaration, once
    missing = [k for k, f in found.items() if f is None]
    if missing:
        raise KeyError(
            f"metrics keys {missing} are not declared: declare each with how processes combine "
            "it (agon.training.metrics.Key), in KEYS or in the trainer's own keys"
        )
    for k, (decl, names_in) in found.items():  # type: ignore[misc]
        vals = [r[k] for r in rows if k in r]
        if decl.combine == "first" or not all(isinstance(v, (int, float)) for v in vals):
            out[k] = vals[0]
        elif decl.combine == "sum":
            out[k] = float(sum(vals))
        elif decl.combine == "max":
            out[k] = float(max(vals))
        elif decl.combine == "rate":
            per = key(decl.per, **names_in)  # type: ignore[arg-type]
            w = np.array([r.get(per, 0.0) for r in rows if k in r], dtype=np.float64)
            x = np.array(vals, dtype=np.float64)
            ok = ~np.isnan(x) & (w > 0)
            out[k] = float((x[ok] * w[ok]).sum() / w[ok].sum()) if ok.any() else float("nan")
        else:
            out[k] = _nanmean(vals)
    if any(POOLED_OUTCOME.format(outcome=o) in out for o in OUTCOMES):
        pool_duel_outcomes(out)
    return out


# ----------------------------------------------------------------------------- a run


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a ``metrics.jsonl`` (none if it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def is_eval_only(row: Mapping[str, Any]) -> bool:
    """True for a row with no training step in it (the probe after the last update)."""
    return any(k.startswith("eval/") for k in row) and all(
        k in EVAL_ROW_KEYS or k.startswith("eval/") for k in row
    )


def summarize_metrics(path: str | Path, models: Iterable[str] = MODELS) -> dict[str, Any]:
    """Totals and last values of a run: steps, and per model the optimizer steps, completions
    and tokens generated, tokens trained on, skipped updates, the last probe; training CPU and
    GPU seconds, and probing seconds. These are what ``train.budget`` matches and what table
    1's compute columns show."""
    rows = read_rows(path)
    out: dict[str, Any] = {"steps": sum(not is_eval_only(r) for r in rows)}
    for name in models:

        def total(
            template: str, roles: Sequence[str] = ("drafter", "reader"), name: str = name
        ) -> float:
            keys = [key(template, model=name, role=r) for r in roles]
            return float(sum(r.get(k, 0) or 0 for r in rows for k in keys))

        out[f"{name}/steps"] = sum(
            key(LR, model=name) in r or key(SKIPPED, model=name) in r for r in rows
        )
        out[f"{name}/completions"] = total(ROLE_COMPLETIONS)
        out[f"{name}/tokens_generated"] = total(ROLE_TOKENS)
        out[f"{name}/tokens_trained"] = total(TRAINED_TOKENS, roles=("",))
        out[f"{name}/skipped_updates"] = total(SKIPPED, roles=("",))
        out[f"{name}/zero_advantage_steps"] = total(ZERO_ADVANTAGE, roles=("",))
        if any(key(MODEL_CPU_S, model=name) in r for r in rows):
            out[f"{name}/cpu_s"] = total(MODEL_CPU_S, roles=("",))
        probes = [r[key(HARD_PASS1, model=name)] for r in rows if key(HARD_PASS1, model=name) in r]
        if probes:
            out[f"{name}/last_hard_pass@1"] = probes[-1]
        rk = key(ROBUST_PASS1, model=name)
        robust = [r[rk] for r in rows if rk in r]
        if robust:  # the reader before training and after it
            out[f"{name}/first_robust_pass@1"] = robust[0]
            out[f"{name}/last_robust_pass@1"] = robust[-1]
        out |= mechanism_summary([r for r in rows if not is_eval_only(r)], name)
    out[TOKENS] = sum(r.get(TOKENS, 0) for r in rows)
    if any(ROLLOUT_S in r for r in rows):  # a trainer that times its own phases (the duel)
        out["train_time_s"] = sum(r.get(ROLLOUT_S, 0) + r.get(UPDATE_S, 0) for r in rows)
    if any(CPU_S in r for r in rows):
        out["cpu_s"] = float(sum(r.get(CPU_S, 0) for r in rows))
        out["gpu_s"] = float(sum(r.get(GPU_S, 0) for r in rows))
    out["eval_time_s"] = sum(r.get(EVAL_S, 0) for r in rows)
    return out


def _weighted(rows: Sequence[Mapping[str, Any]], value: str, weight: str | None) -> float:
    """The mean of ``value`` over ``rows``, weighted by ``weight`` (None: every row alike;
    NaN: nothing to average)."""
    pairs = [(r[value], r.get(weight, 0.0) if weight else 1.0) for r in rows if value in r]
    pairs = [(v, w) for v, w in pairs if isinstance(v, (int, float)) and math.isfinite(v) and w]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else float("nan")


def mechanism_summary(rows: Sequence[Mapping[str, Any]], name: str) -> dict[str, float]:
    """What a run shows of the mechanism, for model ``name``: as a reader, its correctness after
    right and after wrong drafts over the run; as a drafter, its hidden-error share in the first
    and the last quarter of its steps; its dead groups over the run (absent keys: the trainer
    measured none)."""
    out: dict[str, float] = {}
    reads = [r for r in rows if key(READ_AFTER_WRONG, model=name) in r]
    if reads:
        # each step's rate over its own denominator, as the rate after a wrong draft below
        out[f"{name}/read_after_right"] = _weighted(
            reads, key(READ_AFTER_RIGHT, model=name), key(READS_AFTER_RIGHT, model=name)
        )
        out[f"{name}/read_after_wrong"] = _weighted(
            reads, key(READ_AFTER_WRONG, model=name), key(READS_AFTER_WRONG, model=name)
        )
    audited = [r for r in rows if r.get(key(HABIT_STEPS, model=name))]
    if audited:  # a toy reader's take-up over the run, and in its first and last quarter
        q = max(1, len(audited) // 4)
        rate, weight = key(TAKE_UP, model=name), key(HABIT_STEPS, model=name)
        out[f"{name}/take_up"] = _weighted(audited, rate, weight)
        out[f"{name}/take_up_first"] = _weighted(audited[:q], rate, weight)
        out[f"{name}/take_up_last"] = _weighted(audited[-q:], rate, weight)
    styled = [r for r in rows if key(HIDDEN_SHARE, model=name) in r]
    if styled:
        q = max(1, len(styled) // 4)
        share, weight = key(HIDDEN_SHARE, model=name), key(STYLED, model=name)
        out[f"{name}/hidden_share_first"] = _weighted(styled[:q], share, weight)
        out[f"{name}/hidden_share_last"] = _weighted(styled[-q:], share, weight)
    gap = key(STYLE_REWARD_GAP, model=name)
    if any(gap in r for r in rows):
        out[f"{name}/hidden_minus_visible_reward"] = _weighted(
            rows, gap, key(STYLE_GAP_WEIGHT, model=name)
        )
    for role in ("drafter", "reader"):
        dead = key(ROLE_DEAD, model=name, role=role)
        if any(dead in r for r in rows):
            out[f"{name}/{role}_frac_dead"] = _weighted(rows, dead, None)
    return out


def totals(
    rows: Sequence[Mapping[str, Any]],
    per_model: Mapping[str, str],
    run: Mapping[str, str] | None = None,
    models: Iterable[str] = MODELS,
) -> dict[str, float]:
    """A trainer's own costs summed over a run's rows, for ``summary.json``: ``per_model`` maps
    a summary key template to a row key template (both with ``{model}``), ``run`` a summary key
    to a row key with no model in it (seconds). Missing or null values count 0."""

    def total(k: str) -> float:
        return float(sum(r.get(k, 0) or 0 for r in rows))

    models = tuple(models)
    out = {
        key(name, model=m): total(key(row_key, model=m))
        for name, row_key in per_model.items()
        for m in models
    }
    return out | {name: total(row_key) for name, row_key in (run or {}).items()}


def declared_totals(
    rows: Sequence[Mapping[str, Any]], declared: Declared, models: Iterable[str] = MODELS
) -> dict[str, float]:
    """The ``summary.json`` totals of the declared keys that have one
    (:attr:`agon.training.metrics.Key.total`): each summed over the run's rows, per model for
    a key of a model."""
    out: dict[str, float] = {}
    for k in declared.totals():
        if "{model}" in k.template:
            out |= totals(rows, {k.total: k.template}, models=models)  # type: ignore[dict-item]
        else:
            out |= totals(rows, {}, {k.total: k.template})  # type: ignore[dict-item]
    return out


def merge_metrics(paths: Sequence[str | Path]) -> list[dict]:
    """Per-model metrics files (one model each) as one row per step, side by side.

    The evaluation after the last update is a step too; evaluation, CPU and GPU seconds add
    up, and each
    row's ``tokens_generated`` is the sum of the models' finite ``drafter/tokens``.
    """
    by_step: dict[int, dict] = {}
    for p in paths:
        for r in read_rows(p):
            row = by_step.setdefault(r[STEP], {STEP: r[STEP]})
            sums = {k: row.get(k, 0.0) + r.get(k, 0.0) for k in (EVAL_S, *SUMMED)}
            row.update(r)
            row.update({k: v for k, v in sums.items() if v})
    for r in by_step.values():
        r[TOKENS] = sum(
            v
            for k, v in r.items()
            if k.endswith("/drafter/tokens") and isinstance(v, (int, float)) and math.isfinite(v)
        )
    return [by_step[s] for s in sorted(by_step)]


def cumulative_tokens(rows: list[dict]) -> list[float]:
    """Tokens generated up to and including each row."""
    total, out = 0.0, []
    for r in rows:
        total += float(r.get(TOKENS, 0) or 0)
        out.append(total)
    return out
