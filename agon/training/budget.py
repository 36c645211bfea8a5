"""Matched compute: a trainer that runs until it has spent what a reference run spent.

Table 1 compares GRPO with Agon. Matched by optimizer steps alone, each Agon model generates
and trains on about 1.5 times GRPO's completions (drafts and reads), so ``train.budget``
matches what each *model* spent instead (docs/method.md, matched compute):

- ``tokens`` (default): GRPO trains model A until A has generated as many completion tokens as
  A generated in the Agon run of the same family, task and seed (drafts and reads together);
  the same for B.
- ``samples``: as many completions.
- ``steps``: as many optimizer steps (``train.steps``; GRPO then sees fewer completions).

How the count reaches the GRPO job: a dependency. The GRPO job of (family, task, seed) waits
for the Agon run's ``summary.json`` and reads each model's spend from it (``agon train
--match-run``); the workflow wires it (``workflow/rules/table1_jobs.smk``). A budget fixed up front
that both trainers stop at would need the duel's per-model spend before the duel runs, and the
duel's tokens per step depend on what its models write; the dependency matches what was
really spent, at the price of running the two jobs one after the other.

GRPO stops after the first step that reaches the target, so it overshoots by less than one
step's spend (64 completions of the toy world's ~3% of a run); ``train.budget.max_steps_factor``
caps its steps (and is its scheduler's horizon), and a run that hits the cap first says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agon.training import logbook
from agon.training import metrics as mk
from agon.training.settings import BUDGET_MATCHES as MATCHES

# what each match counts, per model: the summary key, and the per-step keys of metrics rows
SUMMARY_KEYS = {
    "tokens": "{model}/tokens_generated",
    "samples": "{model}/completions",
    "steps": "{model}/steps",
}
ROW_KEYS = {"tokens": mk.ROLE_TOKENS, "samples": mk.ROLE_COMPLETIONS}


@dataclass(frozen=True)
class Budget:
    """Per model, how much of ``match`` to spend, from the run at ``reference``."""

    match: str
    targets: Mapping[str, float]
    reference: str = ""

    def __post_init__(self) -> None:
        if self.match not in MATCHES:
            raise ValueError(f"train.budget.match must be one of {MATCHES}, got {self.match!r}")

    @classmethod
    def from_reference(cls, summary: str | Path, match: str) -> Budget:
        """The targets of every model in the reference run's ``summary.json``."""
        path = Path(summary)
        if not path.is_file():
            raise ValueError(f"budget reference {path} does not exist (a finished run's summary)")
        data = json.loads(path.read_text())
        template = SUMMARY_KEYS.get(match)
        if template is None:
            raise ValueError(f"train.budget.match must be one of {MATCHES}, got {match!r}")
        targets = {}
        for name in mk.MODELS:
            value = data.get(template.format(model=name))
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(
                    f"budget reference {path} has no positive {template.format(model=name)!r}: "
                    "is it a finished run's summary.json (made by this version)?"
                )
            targets[name] = float(value)
        return cls(match, targets, str(path))

    def target(self, model: str) -> float:
        return float(self.targets[model])

    def to_dict(self) -> dict[str, Any]:
        return {"match": self.match, "reference": self.reference, "targets": dict(self.targets)}


def spent(rows: Iterable[Mapping[str, Any]], model: str, match: str) -> float:
    """What ``model`` has spent in metrics ``rows`` (steps: the optimizer steps it took)."""
    rows = [r for r in rows if not logbook.is_eval_only(r)]
    if match == "steps":
        return float(
            sum(
                mk.key(mk.LR, model=model) in r or mk.key(mk.SKIPPED, model=model) in r
                for r in rows
            )
        )
    keys = [mk.key(ROW_KEYS[match], model=model, role=role) for role in ("drafter", "reader")]
    return float(sum(r.get(k, 0) or 0 for r in rows for k in keys))


def report(
    budget: Budget, rows: list[Mapping[str, Any]], step_caps: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The budget, what each model spent against it, and the relative difference; with
    ``step_caps`` (each model's most steps), ``{model}/hit_step_cap``: the model took them all
    and still fell short of its target."""
    out = budget.to_dict()
    for name, target in budget.targets.items():
        got = spent(rows, name, budget.match)
        out[f"{name}/spent"] = got
        out[f"{name}/relative_difference"] = (got - target) / target if target else None
        if step_caps is not None:
            took = spent(rows, name, "steps")
            out[f"{name}/hit_step_cap"] = took >= step_caps[name] and got < target
    return out


def from_settings(s: Any) -> Budget | None:
    """The budget a trainer's settings carry (``agon train --match-run``), or None."""
    if s.budget_targets is None:
        return None
    return Budget(s.budget_match, s.budget_targets, s.budget_reference)


def active_models(
    budget: Budget | None, names: Iterable[str], rows: list[Mapping[str, Any]], s: Any
) -> list[str]:
    """The models of a solo trainer's loop that still train: every model without a budget;
    with one, those that have neither reached their target nor taken their most steps
    (:meth:`agon.training.settings.TrainSettings.model_steps`). A model stops after the first
    step that reaches its target, so it overshoots by less than one step's spend."""
    if budget is None:
        return list(names)
    return [
        n
        for n in names
        if spent(rows, n, budget.match) < budget.target(n)
        and spent(rows, n, "steps") < s.model_steps(n)
    ]
