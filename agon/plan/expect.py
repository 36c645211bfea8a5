"""Expected token counts of one (family, task): completion and prompt lengths, problem counts.

Every number says where it came from: ``measured`` (an existing out_dir, :mod:`agon.plan.lengths`),
``cap`` (the family row's ``max_new_tokens`` / ``max_prompt_tokens``: an upper bound), or
``assumed`` (a named constant below, where the config has no number at all).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from agon.plan.errors import PlanError
from agon.plan.lengths import MeasuredLengths
from agon.tasks import TASKS

# A solve prompt (chat template, persona and the problem statement) when no evaluation measured
# one: an assumption for competition math and code problems (hundreds of tokens), not a
# measurement. `agon plan --lengths-from DIR` replaces it with the mean of DIR's samples.
ASSUMED_SOLVE_PROMPT_TOKENS = 512
# Test-split sizes of tasks whose size no constructor parameter gives: CodeContests' test split
# has 165 problems and its valid split 117 (the data set's card); HumanEval 164 problems in all
# (its paper); TACO's test split 1,000 (its card). The hard split is a part of the test split,
# so these are upper bounds.
TEST_SPLIT_SIZES = {"codecontests": 165, "humaneval": 164, "taco": 1000}
VALIDATION_SPLIT_SIZES = {"codecontests": 117}
# a task with neither a size parameter nor a row above: assumed, and labelled so
ASSUMED_SPLIT_PROBLEMS = 500
# constructor parameters that give a split's size, in the order they are read
TEST_SIZE_PARAMS = ("max_test", "test_size", "n_test")
VALIDATION_SIZE_PARAMS = ("validation_size", "n_validation")


@dataclass(frozen=True)
class Count:
    """A number and where it came from."""

    value: float
    source: str


def _task_default(task: str, names: tuple[str, ...]) -> int | None:
    """A task constructor's default for the first of ``names`` it has (None: none)."""
    try:
        params = inspect.signature(TASKS.get(task).__init__).parameters
    except (KeyError, ValueError, TypeError):
        return None
    for name in names:
        if name in params and isinstance(params[name].default, int):
            return params[name].default
    return None


def split_size(
    task_row: dict, family: str, split: str, lengths: MeasuredLengths, cap: int | None = None
) -> Count:
    """How many problems of ``split`` (``hard``, ``validation_hard``, ...) a job reads, at most
    ``cap``: measured (a split.json, or an evaluation's problem count), else the split's size
    from the task's parameters or its published size (an upper bound: the hard part is
    smaller), else :data:`ASSUMED_SPLIT_PROBLEMS`."""
    task = task_row["name"]
    params = task_row.get("params") or {}
    test_side = split in ("hard", "test")
    sizes = lengths.sizes.get((family, task))
    evaluated = lengths.eval_problems.get((family, task)) if test_side else None
    if sizes and split in sizes:
        n = Count(sizes[split], f"measured: split.json in {lengths.root}")
    elif evaluated:
        n = Count(evaluated, f"measured: evaluations in {lengths.root}")
    else:
        names = TEST_SIZE_PARAMS if test_side else VALIDATION_SIZE_PARAMS
        table = TEST_SPLIT_SIZES if test_side else VALIDATION_SPLIT_SIZES
        given = next((params[k] for k in names if params.get(k)), None)
        size = given or table.get(task) or _task_default(task, names)
        whole = "test" if test_side else "validation"
        bound = "upper bound: " if split.endswith("hard") else ""
        if size:
            n = Count(size, f"{bound}the {whole} split's {size} problems")
        else:
            n = Count(ASSUMED_SPLIT_PROBLEMS, f"assumed {ASSUMED_SPLIT_PROBLEMS} problems")
    if cap is not None and cap < n.value:
        return Count(cap, f"capped by the config at {cap}")
    return n


def draft_shown(draft: float, view: str) -> float:
    """Tokens of a ``draft``-token draft a reader sees under ``draft_view``: all of it for
    ``full`` and (an upper bound, its thinking share unknown) ``answer_section``; the last N
    for ``last_tokens:N``."""
    if view.startswith("last_tokens:"):
        return min(draft, float(view.split(":", 1)[1]))
    return draft


@dataclass(frozen=True)
class Expect:
    """Expected lengths of one (family, task) and a method's runs on it."""

    max_new: int
    max_prompt: int
    draft_view: str
    solve_prompt: Count

    def reader_prompt(self, draft: float) -> float:
        """A reader prompt: the solve prompt and the shown draft, cut to ``max_prompt_tokens``
        (the duel and the cascade keep the tail of a draft that does not fit)."""
        return min(
            float(self.max_prompt), self.solve_prompt.value + draft_shown(draft, self.draft_view)
        )


def expect(family_row: dict, task: str, lengths: MeasuredLengths) -> Expect:
    """The family row's caps and the solve prompt's expected length on ``task``."""
    for key in ("max_new_tokens", "max_prompt_tokens"):
        if not isinstance(family_row.get(key), int):
            raise PlanError(
                f"families (name {family_row.get('name')!r}): no {key}; validate the config"
            )
    measured, source = lengths.prompt(family_row["name"], task)
    prompt = (
        Count(measured, source)
        if measured is not None
        else Count(
            min(ASSUMED_SOLVE_PROMPT_TOKENS, family_row["max_prompt_tokens"]),
            f"assumed {ASSUMED_SOLVE_PROMPT_TOKENS}-token solve prompt",
        )
    )
    return Expect(
        family_row["max_new_tokens"],
        family_row["max_prompt_tokens"],
        family_row["draft_view"],
        prompt,
    )


def role_length(
    lengths: MeasuredLengths,
    e: Expect,
    family: str,
    task: str,
    model: str,
    role: str,
    method: str | None = None,
) -> Count:
    """Expected completion tokens of ``model`` in ``role`` (``drafter``: drafts and solo
    samples; ``reader``): measured, else the cap."""
    value, source = lengths.role(family, task, model, role, method)
    if value is not None:
        return Count(min(value, e.max_new), source)
    return Count(e.max_new, f"cap: max_new_tokens {e.max_new}")


def eval_length(
    lengths: MeasuredLengths, e: Expect, family: str, task: str, system: str, which: str
) -> Count:
    """Expected tokens of an evaluated system's final completion (``completion``) or of what
    it generated before it (``draft``), measured or the cap."""
    value, source = lengths.eval_mean(family, task, system, which)
    if value is not None:
        return Count(value, source)
    return Count(e.max_new, f"cap: max_new_tokens {e.max_new}")
