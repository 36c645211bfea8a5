"""When OPD hands over to RL: the switch point, and the OPD checkpoints it may pick.

``opd_then_rl.switch``:

- ``best_validation`` (default): each model's greedy pass@1 on the task's validation split
  (``validation_split``, the first ``validation_problems``) is measured before OPD (the base
  model), every ``validate_every`` OPD updates and after the last one; RL starts from the
  candidate with the best score, the fewest updates on a tie (:func:`best_updates`). Each model
  picks its own.
- ``fixed``: RL starts from the model after all ``opd_steps`` updates; nothing is validated.

The validation runs inside the OPD step (:class:`SwitchPoint`, called by the phase's
``step_fn``), so its cost is in that step's CPU seconds, and its scores are in that step's
metrics row: ``{model}/opd/base_validation_pass@1`` (row 0: the base model) and
``{model}/opd/validation_pass@1`` (the weights after that row's update, ``step + 1`` updates).
The rows, which a resume truncates with the checkpoint, are the record the switch is chosen
from (:func:`scores_from_rows`). A candidate's weights are saved as a model folder
(``candidates/step-NNNNNN/<model>``) only while it is its model's best so far; the one it
displaces is deleted, so at most one folder per model is kept besides the base model's row.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agon.tasks.base import Problem, Task
from agon.training import metrics as mk
from agon.training import probe
from agon.training.policy import Policy
from agon.training.shell import save_policies

SWITCHES = ("best_validation", "fixed")
VALIDATION = "{model}/opd/validation_pass@1"  # the weights after the row's update
BASE_VALIDATION = "{model}/opd/base_validation_pass@1"  # the base model, in row 0
VALIDATION_TOKENS = "{model}/opd/validation_tokens"  # tokens the validation generated
VALIDATION_S = "time/validation_s"  # its wall seconds (apart from rollout_s and update_s)
# every process validates on every problem (sharded models need each in every forward)
KEYS = (
    *(mk.Key(t, "same") for t in (VALIDATION, BASE_VALIDATION, VALIDATION_TOKENS)),
    mk.Key(VALIDATION_S, "max"),
)


def validated_updates(opd_steps: int, every: int) -> list[int]:
    """The OPD updates after which ``best_validation`` scores each model: 0 (the base model),
    every ``every`` updates, and ``opd_steps`` (the last)."""
    if opd_steps < 1 or every < 1:
        raise ValueError(f"opd_steps ({opd_steps}) and validate_every ({every}) must be >= 1")
    return sorted({0, *range(every, opd_steps + 1, every), opd_steps})


def best_updates(scores: Mapping[int, float], available: Iterable[int] | None = None) -> int:
    """The candidate (updates done) with the best score; on a tie the one with fewer updates.

    ``available``: the candidates whose weights still exist (default: all scored ones); the
    base model (0) always does. With no score at all, the base model."""
    keep = set(scores) if available is None else set(available) | {0}
    scored = {u: x for u, x in scores.items() if u in keep}
    if not scored:
        return 0
    return min(scored, key=lambda u: (-scored[u], u))


def scores_from_rows(rows: Iterable[Mapping[str, Any]], name: str) -> dict[int, float]:
    """Model ``name``'s validation scores by updates done, from OPD metrics rows."""
    out: dict[int, float] = {}
    base, after = mk.key(BASE_VALIDATION, model=name), mk.key(VALIDATION, model=name)
    for r in rows:
        if base in r:
            out[0] = float(r[base])
        if after in r:
            out[int(r[mk.STEP]) + 1] = float(r[after])
    return out


class SwitchPoint:
    """The OPD phase's validations and candidate checkpoints (see the module docstring).

    ``root``: where candidate folders go; ``tokenizers``: each model's, saved with it;
    ``problems``: the validation problems (unused under ``fixed``)."""

    def __init__(
        self,
        mode: str,
        root: str | Path,
        opd_steps: int,
        every: int,
        problems: list[Problem],
        max_new_tokens: int,
        tokenizers: Mapping[str, Any],
        accelerator: Any = None,
    ):
        if mode not in SWITCHES:
            raise ValueError(f"opd_then_rl.switch must be one of {SWITCHES}, got {mode!r}")
        self.mode, self.root = mode, Path(root)
        self.opd_steps, self.every = opd_steps, every
        self.problems, self.max_new_tokens = problems, max_new_tokens
        self.tokenizers, self.accelerator = tokenizers, accelerator
        self.best: dict[str, tuple[int, float]] = {}  # model -> (updates, score)
        self.due = set(validated_updates(opd_steps, every)) if mode == "best_validation" else set()

    def folder(self, updates: int, name: str) -> Path:
        """Where the weights of ``name`` after ``updates`` OPD updates are saved."""
        return self.root / f"step-{updates:06d}" / name

    def exists(self, updates: int, name: str) -> bool:
        """Whether that candidate can be trained on from (the base model always can)."""
        return updates == 0 or (self.folder(updates, name) / "config.json").is_file()

    def resume(self, rows: Iterable[Mapping[str, Any]], names: Iterable[str]) -> None:
        """Each model's best so far, from the rows a resume keeps."""
        rows = list(rows)
        for name in names:
            scores = scores_from_rows(rows, name)
            if scores:
                u = best_updates(scores, [v for v in scores if self.exists(v, name)])
                self.best[name] = (u, scores[u])

    def validate(self, task: Task, policies: Mapping[str, Policy], updates: int) -> dict:
        """Score every policy (weights after ``updates`` OPD updates) on the validation
        problems, keep each one that beats its model's best so far; the row's entries."""
        m = probe.hard_pass1(
            {n: p.engine for n, p in policies.items()},
            task,
            self.problems,
            self.max_new_tokens,
            models=[p.model for p in policies.values()],
        )
        template = BASE_VALIDATION if updates == 0 else VALIDATION
        out: dict[str, float] = {VALIDATION_S: m[mk.EVAL_S]}
        for name, policy in policies.items():
            score = float(m[mk.key(mk.HARD_PASS1, model=name)])
            out[mk.key(template, model=name)] = score
            out[mk.key(VALIDATION_TOKENS, model=name)] = m[mk.key(mk.HARD_TOKENS, model=name)]
            if name not in self.best or score > self.best[name][1]:
                previous = self.best.get(name)
                if updates > 0:
                    self.save(name, policy, updates)
                self.best[name] = (updates, score)
                if previous is not None and previous[0] not in (0, updates):
                    self.drop(previous[0], name)
        return out

    def after_update(self, task: Task, policies: Mapping[str, Policy], updates: int) -> dict:
        """What the phase does after OPD update number ``updates``: validate (and keep) the
        candidates when due; under ``fixed``, save the last one."""
        if updates in self.due:
            return self.validate(task, policies, updates)
        if self.mode == "fixed" and updates == self.opd_steps:
            for name, policy in policies.items():
                self.save(name, policy, updates)
        return {}

    def save(self, name: str, policy: Policy, updates: int) -> None:
        """Save one candidate's model folder (every process calls it; one writes)."""
        target = self.folder(updates, name)
        save_policies(
            {name: policy}, {name: self.tokenizers[name]}, target.parent, self.accelerator
        )

    def drop(self, updates: int, name: str) -> None:
        """Delete a candidate that is no longer its model's best."""
        acc = self.accelerator
        if acc is None or acc.is_main_process:
            shutil.rmtree(self.folder(updates, name), ignore_errors=True)
            parent = self.folder(updates, name).parent
            if parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
        if acc is not None:
            acc.wait_for_everyone()

    def choose(self, rows: Iterable[Mapping[str, Any]], names: Iterable[str]) -> dict[str, dict]:
        """Each model's switch point after the OPD phase, from its metrics ``rows``:
        ``{model: {"updates", "validation_pass@1", "scores", "path"}}`` (path None: the base
        model)."""
        rows = list(rows)
        out = {}
        for name in names:
            scores = scores_from_rows(rows, name)
            if self.mode == "fixed":
                u = self.opd_steps
            else:
                u = best_updates(scores, [v for v in scores if self.exists(v, name)])
            out[name] = {
                "updates": u,
                "validation_pass@1": scores.get(u),
                "scores": {str(k): scores[k] for k in sorted(scores)},
                "path": str(self.folder(u, name)) if u > 0 else None,
            }
        return out
