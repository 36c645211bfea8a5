"""What table 1's runs show of the contest's mechanism, beside the outcomes.

From each trained method's runs (``summary.json``: :func:`agon.training.metrics.
mechanism_summary`; ``metrics.jsonl``: the rollout fingerprints), the mean over seeds of:

- per model as a reader: its correctness after right drafts and after wrong ones over the run
  (the gap is how often a wrong draft misleads), a toy reader's take-up of right draft steps on
  its always-wrong habits in the first and the last quarter of its reads (:mod:`agon.toy.audit`:
  was reading learned while training), and its pass@1 reading a fixed wrong draft of
  each validation probe problem before training and after (its robustness; the same drafts for
  every method, GRPO's models included);
- per model as a drafter: the hidden share of its wrong drafts in the first and the last
  quarter of its steps (where the task can tell), and its dead groups (no gradient: every
  distinct draft's advantages sum to 0);
- per seed, the first step at which ``agon``'s rollouts differ from ``agon_independent``'s
  (the same duel without the rival term, from the same base models and sampling seeds): before
  it, the two runs took exactly the same samples and any difference in their tables came
  from their updates alone; a pair that never differs says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.report.render import head, table_row
from agon.results import Layout
from agon.stats import wilson_interval
from agon.training.logbook import read_rows
from agon.training.metrics import MODELS, ROLLOUT_SHA, STEP

# summary.json keys (per model) of the mechanism, and their column names
SUMMARY_KEYS = {
    "read_after_right": "read_after_right",
    "read_after_wrong": "read_after_wrong",
    "take_up_first": "take_up_first",
    "take_up_last": "take_up_last",
    "first_robust_pass@1": "robust_before",
    "last_robust_pass@1": "robust_after",
    "hidden_share_first": "hidden_first",
    "hidden_share_last": "hidden_last",
    "drafter_frac_dead": "dead_drafter_groups",
}
TWINS = ("agon", "agon_independent")  # the runs whose rollouts are compared step by step


def mechanism_columns(
    layout: Layout, family: str, task: str, trained: Sequence[str], seeds: Sequence[int]
) -> dict[str, Any]:
    """``{method}_{model}_{column}`` (mean over the seeds whose summaries have it) for every
    trained method, and ``agon_diverges_at`` (per seed, ``;``-joined: the first step whose
    rollouts differ from agon_independent's, or ``never``) with its note."""
    out: dict[str, Any] = {}
    for m in trained:
        loaded = [_summary(layout.train_summary(family, task, m, s)) for s in seeds]
        for model in MODELS:
            for src, col in SUMMARY_KEYS.items():
                vals = [float(x[f"{model}/{src}"]) for x in loaded if _finite(x, f"{model}/{src}")]
                out[f"{m}_{model}_{col}"] = sum(vals) / len(vals) if vals else None
    if all(t in trained for t in TWINS):
        steps = [
            divergence(
                layout.train_metrics(family, task, TWINS[0], s),
                layout.train_metrics(family, task, TWINS[1], s),
            )
            for s in seeds
        ]
        out |= divergence_columns(steps, seeds)
    return out


def divergence(metrics_a: str | Path, metrics_b: str | Path) -> int | None:
    """The first training step at which two runs' rollout fingerprints differ; None when they
    never do over the steps both logged (or neither logged one)."""
    a = {r[STEP]: r[ROLLOUT_SHA] for r in read_rows(metrics_a) if ROLLOUT_SHA in r}
    b = {r[STEP]: r[ROLLOUT_SHA] for r in read_rows(metrics_b) if ROLLOUT_SHA in r}
    for step in sorted(set(a) & set(b)):
        if a[step] != b[step]:
            return int(step)
    return None


def divergence_columns(steps: Sequence[int | None], seeds: Sequence[int]) -> dict[str, Any]:
    """``agon_diverges_at``: each seed's first differing step (``never``), and a note when a
    seed's twins never differ: its agon - agon_independent is then no measure of the contest."""
    cells = ["never" if s is None else str(s) for s in steps]
    never = [seed for seed, s in zip(seeds, steps) if s is None]
    note = ""
    if never:
        note = (
            f"seed(s) {never}: agon's rollouts never differ from agon_independent's, so the "
            "two runs sampled the same completions throughout and their difference measures "
            "the updates alone, not the contest"
        )
    return {"agon_diverges_at": ";".join(cells), "agon_diverges_at_note": note}


def _summary(path: str | Path) -> dict:
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else {}


def _finite(d: dict, key: str) -> bool:
    v = d.get(key)
    return isinstance(v, (int, float)) and v == v  # not NaN


MECHANISM_COLUMNS = (
    ("read_after_right", "read right after a right draft"),
    ("read_after_wrong", "read right after a wrong draft"),
    ("take_up_first", "take-up of right draft steps, first quarter"),
    ("take_up_last", "... last quarter"),
    ("robust_before", "reading fixed wrong drafts, before"),
    ("robust_after", "... after"),
    ("hidden_first", "hidden share of wrong drafts, first quarter"),
    ("hidden_last", "... last quarter"),
    ("dead_drafter_groups", "dead drafter groups"),
)


def mechanism_markdown(rows: list[dict], trained: Sequence[str]) -> list[str]:
    """What the runs logged of the mechanism (agon.report.mechanism), per method and model,
    and where agon's rollouts first differ from agon_independent's."""
    keys = [k for k, _ in MECHANISM_COLUMNS]
    shown = [
        (r, m, model)
        for r in rows
        for m in trained
        for model in MODELS
        if any(r.get(f"{m}_{model}_{k}") is not None for k in keys)
    ]
    if not shown:
        return []
    lines = [
        "",
        "## The mechanism: what the runs logged (% ; mean over seeds; validation probe; "
        "docs/method.md)",
        "",
        *head(["family", "task", "method", "model", *(title for _, title in MECHANISM_COLUMNS)]),
    ]
    for r, m, model in shown:
        cells = [r.get(f"{m}_{model}_{k}") for k in keys]
        cells = ["" if v is None else f"{100 * float(v):.1f}" for v in cells]
        lines.append(table_row([r["family"], r["task"], m, model, *cells]))
    twins = [r for r in rows if r.get("agon_diverges_at")]
    if twins:
        lines += [
            "",
            "agon's rollouts first differ from agon_independent's at step (per training seed): "
            + "; ".join(f"{r['family']}/{r['task']} {r['agon_diverges_at']}" for r in twins)
            + ".",
        ]
        lines += [
            f"- {r['agon_diverges_at_note']}" for r in twins if r.get("agon_diverges_at_note")
        ]
    return lines


def unanswered_cell(r: dict, system: str) -> str:
    """A cascade's drafts without an answer (:func:`agon.report.audit_columns.draft_columns`) in %:
    pooled, then each seed's in parentheses (one seed's drafter can learn them alone)."""
    share = r.get(f"{system}_drafts_unanswered")
    if share is None:
        return ""
    head_ = f"{system}_drafts_unanswered_seed"
    seeds = sorted((int(k[len(head_) :]), v) for k, v in r.items() if k.startswith(head_))
    each = ", ".join("n/a" if v is None else f"{100 * v:.1f}" for _, v in seeds)
    return f"{100 * share:.1f} ({each})" if len(seeds) > 1 else f"{100 * share:.1f}"


def reading_markdown(rows: list[dict], systems: Sequence[str], pairs: Sequence[tuple]) -> list[str]:
    """What the evaluations' samples show of reading (:mod:`agon.toy.audit`), per system that
    has an audit: the reader's take-up of right draft steps on its own always-wrong habits (a
    cascade's), the cascade minus its reader alone on the same problems (``pairs``: (cascade,
    reader)), and the share of right answers with a wrong step."""
    shown = [(r, s) for r in rows for s in systems if f"{s}_audit_right" in r]
    if not shown:
        return []
    readers = dict(pairs)
    lines = [
        "",
        "",
        "## Reading, on the evaluation's samples (agon.toy.audit; docs/method.md)",
        "",
        "take-up: of the steps where the draft shows one of the reader's own always-wrong habits "
        "done right, the share the reader wrote right (it never does alone, so each was taken "
        "from the draft), Wilson 95% interval; cascade - reader: the cascade's pass@1 minus its "
        "reader's alone (B, trained as in the cascade) on the same problems, points, paired 95% "
        "interval; oracle: the pass@1 of a reader with the reader's habits that kept every right "
        "step of the same drafts and wrote the rest itself (what reading could reach with them); "
        "luck: the share of right answers with a wrong step; unanswered drafts: of the "
        "cascade's drafts, the share that hold no answer the task could grade (arith: no boxed "
        "answer; toycode: no program), pooled (each seed's): such a draft never helps a reader "
        "and can derail it.",
        "",
        *head(
            [
                "family",
                "task",
                "system",
                "take-up (steps)",
                "cascade - reader",
                "oracle",
                "luck",
                "unanswered drafts (%)",
            ]
        ),
    ]
    for r, s in shown:
        steps, taken = r.get(f"{s}_audit_habit_steps", 0), r.get(f"{s}_audit_habit_steps_taken", 0)
        take = ""
        if steps:
            lo, hi = wilson_interval(taken, steps)
            take = f"{100 * taken / steps:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] ({steps})"
        diff = ""
        key = f"{s}_minus_reader"
        if s in readers and r.get(key) is not None:
            lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
            diff = f"{100 * r[key]:+.1f}" + (
                f" [{100 * lo:+.1f}, {100 * hi:+.1f}]" if lo is not None else ""
            )
        right, lucky = r.get(f"{s}_audit_right", 0), r.get(f"{s}_audit_right_with_wrong_work", 0)
        luck = f"{100 * lucky / right:.1f} ({lucky}/{right})" if right else "no right answer"
        oracle = "" if r.get(f"{s}_oracle") is None else f"{100 * r[f'{s}_oracle']:.1f}"
        cells = [r["family"], r["task"], s, take, diff, oracle, luck, unanswered_cell(r, s)]
        lines.append(table_row(cells))
    return lines
