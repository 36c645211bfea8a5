"""What a toy world's evaluation samples show of reading and of luck, beside pass@1.

Two counts per evaluation, from its samples and the world's habits (``toy.models``):

- **take-up**: on the steps (program lines) where a draft shows one of the reader's own
  always-wrong habits (rate 1) done right, aligned with the reader's own work (the same
  value in, the question's operation and operand), how often the reader wrote that step right.
  The reader alone never does (its habit is written every time), so each such step it got
  right was taken from the draft: the action the duel would reinforce, sampled or not.
- **luck**: of the right answers, how many contain a wrong step (arith: a written step whose
  result or operand is wrong, or a chain that is not the question's; toycode: a program line
  that is not the question's operation). A right answer with wrong work was right by chance.

- **the oracle reader**: on each read (a cascade's sample), whether a reader that keeps every
  step of the draft that is right, aligned with its own work, and writes the others itself
  with the reader's habits (sampled at their rates, seeded by problem and sample) would be
  right: what reading could reach with those drafts, the ceiling the duel's reader is read
  against.

``agon eval`` writes them into an evaluation's summary (``audit``) for the toy tasks; the
regime's criteria (:mod:`agon.regime`) and table 1's mechanism columns read them.

- **unanswered drafts** (:func:`draft_counts`): of a cascade's drafts, how many hold no answer
  the task could grade (arith: no boxed answer; toycode: no program). Such a draft never helps
  a reader and can derail it: a drafter paid for its reader's failures (Agon's rival term) may
  learn to write them. The reports count them from ``samples.jsonl``, so every evaluation on
  record has them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agon.grading.math import extract_answer
from agon.tasks.code import extract_code
from agon.toy.chain import (
    ArithStep,
    apply_op,
    misread,
    parse_arith_steps,
)
from agon.toy.habits import writes_right
from agon.toy.mistake import Mistake
from agon.toy.toycode import parse_code_lines, same_line

TASKS = ("arith", "toycode")  # the tasks whose samples can be audited
KEYS = (
    "habit_steps",
    "habit_steps_taken",
    "right",
    "right_with_wrong_work",
    "reads",
    "oracle_right",
)


def _always_wrong(reader: Mistake, op: str, k: int, kind: str) -> bool:
    return reader.rate(op, k, kind) == 1.0


def habit_steps(
    task: str, problem: Any, draft: str, completion: str, reader: Mistake
) -> tuple[int, int]:
    """(steps where ``draft`` shows one of ``reader``'s always-wrong habits done right, aligned
    with the reader's own step; of them, the steps ``completion`` wrote right)."""
    ops = problem.meta["ops"]
    if task == "arith":
        shown, own = parse_arith_steps(draft), parse_arith_steps(completion)
        seen = taken = 0
        for i, (op, k) in enumerate(ops[: min(len(shown), len(own))]):
            d, r = shown[i], own[i]
            if not (_always_wrong(reader, op, k, "arith") and (d.op, d.rhs) == (op, k)):
                continue
            if not d.correct or d.lhs != r.lhs:
                continue
            if apply_op(d.lhs, op, misread(k)) == d.result:  # the habit writes this step right
                continue
            seen += 1
            taken += (r.op, r.rhs, r.result) == (op, k, d.result)
        return seen, taken
    shown_lines = parse_code_lines(extract_code(draft) or "")
    own_lines = parse_code_lines(extract_code(completion) or "")
    seen = taken = 0
    for i, (op, k) in enumerate(ops[: min(len(shown_lines), len(own_lines))]):
        if _always_wrong(reader, op, k, "code") and same_line(shown_lines[i], op, k):
            seen += 1
            taken += same_line(own_lines[i], op, k)
    return seen, taken


def wrong_work(task: str, problem: Any, completion: str) -> bool:
    """Whether ``completion``'s work departs from the question anywhere (a wrong step or
    line, one missing or one too many), whatever its answer."""
    ops = problem.meta["ops"]
    if task == "arith":
        steps = parse_arith_steps(completion)
        return len(steps) != len(ops) or any(
            not _step_right(s, op, k, problem.meta["start"] if i == 0 else steps[i - 1].result)
            for i, (s, (op, k)) in enumerate(zip(steps, ops))
        )
    lines = parse_code_lines(extract_code(completion) or "")
    return len(lines) != len(ops) or not all(same_line(w, op, k) for w, (op, k) in zip(lines, ops))


def oracle_right(task: str, problem: Any, draft: str, reader: Mistake, rng: random.Random) -> bool:
    """Whether a reader with ``reader``'s habits that keeps the draft's right aligned steps
    (program lines) and writes the others itself answers ``problem`` right."""
    if task == "arith":
        return writes_right(problem, rng, reader, keep=[parse_arith_steps(draft)])
    return writes_right(problem, rng, reader, keep=[parse_code_lines(extract_code(draft) or "")])


def _step_right(step: ArithStep, op: str, k: int, value: int) -> bool:
    return (step.lhs, step.op, step.rhs) == (value, op, k) and step.correct


def audit(
    task: str,
    problems: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    reader: Mistake | None,
) -> dict[str, int]:
    """The counts of :data:`KEYS` over an evaluation's sample ``records`` (``problems``: by
    id). Take-up reads the samples with one draft text (a cascade's), with ``reader``'s habits;
    without a reader (a system that reads no draft) its counts are 0."""
    out = dict.fromkeys(KEYS, 0)
    for r in records:
        problem = problems[r["problem_id"]]
        if r["correct"] is True:
            out["right"] += 1
            out["right_with_wrong_work"] += wrong_work(task, problem, r["completion"])
        draft = cascade_draft(r)
        if reader is not None and draft is not None:
            seen, taken = habit_steps(task, problem, draft, r["completion"], reader)
            out["habit_steps"] += seen
            out["habit_steps_taken"] += taken
            rng = random.Random(f"oracle-{r['problem_id']}-{r.get('sample', 0)}")
            out["reads"] += 1
            out["oracle_right"] += oracle_right(task, problem, draft, reader, rng)
    return out


def cascade_draft(record: Mapping[str, Any]) -> str | None:
    """The draft a sample read, if it read one (a cascade's); None for a single model's sample
    or MoA's, whose ``drafts`` are its layers' proposals."""
    drafts = record.get("drafts") or []
    return drafts[0] if len(drafts) == 1 and isinstance(drafts[0], str) else None


def gives_answer(task: str, draft: str) -> bool:
    """Whether ``draft`` holds an answer ``task`` could grade: arith, a boxed answer; toycode,
    a program."""
    if task == "arith":
        return extract_answer(draft) is not None
    return bool(extract_code(draft))


def draft_counts(task: str, records: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(drafts, drafts without an answer: :func:`gives_answer`) over the sample ``records``
    that read one draft (a cascade's; MoA's several proposals are not counted)."""
    shown = [d for d in map(cascade_draft, records) if d is not None]
    return len(shown), sum(not gives_answer(task, d) for d in shown)


def rollout_take_up(
    task: str,
    problems: Sequence[Any],
    drafts: Sequence[Sequence[str]],
    reads: Sequence[Sequence[Sequence[str]]],
    reader: Mistake,
) -> tuple[int, int]:
    """A duel step's take-up counts for one direction (:func:`habit_steps` summed over every
    read of every draft): ``drafts[i][g]`` is problem ``i``'s ``g``-th draft text,
    ``reads[i][g][k]`` its ``k``-th read."""
    seen = taken = 0
    for p, row, per_draft in zip(problems, drafts, reads):
        for draft, texts in zip(row, per_draft):
            for text in texts:
                s, t = habit_steps(task, p, draft, text, reader)
                seen, taken = seen + s, taken + t
    return seen, taken


def model_habits(model: str | Path) -> Mistake | None:
    """The habits toy model folder ``model`` (``.../seed0/A``) was pretrained with, from the
    pretraining report beside it (``report.json``: the config it ran with); None for a model
    that is not a pretrained toy model."""
    path = Path(model)
    report = path.parent / "report.json"
    if not report.is_file():
        return None
    try:
        config = json.loads(report.read_text())["provenance"]["config"]
        return reader_mistake(config, path.name)
    except (KeyError, TypeError, ValueError):
        return None


def reader_mistake(config: Mapping[str, Any], row: str) -> Mistake | None:
    """The habits of the toy model of family row ``row`` (``a``/``b``), from ``toy.models``;
    None where the config has none."""
    models = (config.get("toy") or {}).get("models") or {}
    entry = models.get(row.upper())
    return Mistake.from_config(entry["mistake"]) if entry else None
