"""Lengths and counts of one (family, task): the caps, means measured in an existing ``out_dir``
(``agon plan --lengths-from DIR``), problem counts; each number says where it came from.

Read from an out_dir, nothing else: training runs' ``metrics.jsonl`` (``{model}/{role}/
mean_length`` weighted by ``{model}/{role}/completions``; a GRPO sample counts as a draft), a
budget-matched run's ``summary.json`` where its metrics have nothing, evaluations'
``summary.json`` (``mean_completion_tokens``, ``mean_draft_tokens``) and single-model
``samples.jsonl`` (``prompt_tokens``), and data splits' ``split.json`` (``sizes``).
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from agon.methods import BUDGET_MATCHED, COLUMNS
from agon.plan.dims import PlanError
from agon.tasks import TASKS

ROLE_LENGTH = re.compile(r"^(?P<model>[^/]+)/(?P<role>drafter|reader)/mean_length$")
MAX_PROMPT_SAMPLES = 2000  # samples.jsonl lines read per file for the mean prompt length


@dataclass
class Mean:
    """A running weighted mean and the files it came from."""

    total: float = 0.0
    weight: float = 0.0
    files: set[str] = field(default_factory=set)

    def add(self, value: float, weight: float, path: str) -> None:
        if weight > 0 and value == value:  # skip NaN
            self.total += value * weight
            self.weight += weight
            self.files.add(path)

    @property
    def value(self) -> float | None:
        return self.total / self.weight if self.weight else None


@dataclass
class MeasuredLengths:
    """Means read from one ``out_dir`` (empty when none is given)."""

    root: str | None = None
    # (family, task, method, model, role) -> mean completion tokens
    roles: dict[tuple[str, str, str, str, str], Mean] = field(default_factory=dict)
    # (family, task, system) -> {"completion": Mean, "draft": Mean}
    evals: dict[tuple[str, str, str], dict[str, Mean]] = field(default_factory=dict)
    prompts: dict[tuple[str, str], Mean] = field(default_factory=dict)  # mean solve prompt
    sizes: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    eval_problems: dict[tuple[str, str], int] = field(default_factory=dict)  # problems evaluated

    def role(self, family: str, task: str, model: str, role: str, method: str | None = None):
        """(mean completion tokens, source) of ``model`` in ``role``: the method's own runs
        first, then any run of (family, task); (None, None) when none."""
        keys = [k for k in self.roles if k[:2] == (family, task) and k[3:] == (model, role)]
        own = [k for k in keys if k[2] == method]
        for group in (own, keys):
            mean = Mean()
            for k in group:
                m = self.roles[k]
                mean.total, mean.weight = mean.total + m.total, mean.weight + m.weight
                mean.files |= m.files
            if mean.value is not None:
                return mean.value, f"measured: {len(mean.files)} run file(s) in {self.root}"
        return None, None

    def eval_mean(self, family: str, task: str, system: str, which: str):
        """(mean tokens, source) of an evaluated system's ``completion`` or ``draft`` tokens."""
        m = self.evals.get((family, task, system), {}).get(which)
        if m is None or m.value is None:
            return None, None
        return m.value, f"measured: {len(m.files)} eval summary(ies) in {self.root}"

    def prompt(self, family: str, task: str):
        """(mean solve-prompt tokens, source) of (family, task)."""
        m = self.prompts.get((family, task))
        if m is None or m.value is None:
            return None, None
        return m.value, f"measured: prompt_tokens of {len(m.files)} samples file(s)"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PlanError(
            f"{path}: unreadable ({err}); remove it or point --lengths-from elsewhere"
        ) from None


def _metrics(lengths: MeasuredLengths, path: Path, family: str, task: str, method: str) -> None:
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed run
        for key, value in row.items():
            m = ROLE_LENGTH.match(key)
            if not m or not isinstance(value, (int, float)):
                continue
            n = row.get(f"{m['model']}/{m['role']}/completions", 1.0) or 0.0
            k = (family, task, method, m["model"], m["role"])
            lengths.roles.setdefault(k, Mean()).add(float(value), float(n), str(path))


def _summary(lengths: MeasuredLengths, path: Path, family: str, task: str, method: str) -> None:
    """A budget-matched run's tokens over completions where its metrics gave nothing (a duel's
    summary pools drafts and reads: left out)."""
    if method not in BUDGET_MATCHED:
        return
    body = _read_json(path)
    for model in ("A", "B"):
        key = (family, task, method, model, "drafter")
        tokens, n = body.get(f"{model}/tokens_generated"), body.get(f"{model}/completions")
        if key in lengths.roles or not (isinstance(tokens, (int, float)) and n):
            continue
        lengths.roles.setdefault(key, Mean()).add(float(tokens) / float(n), float(n), str(path))


def read_lengths(root: str | Path) -> MeasuredLengths:
    """Every mean :class:`MeasuredLengths` knows, read from ``root`` (an ``out_dir``)."""
    base = Path(root)
    if not base.is_dir():
        raise PlanError(f"--lengths-from {root}: not a folder; give an out_dir holding runs")
    out = MeasuredLengths(root=str(base))
    for path in sorted(base.glob("*/*/train/*/seed*/metrics.jsonl")):
        family, task, _, method = path.parts[-6:-2]
        _metrics(out, path, family, task, method)
    for path in sorted(base.glob("*/*/train/*/seed*/summary.json")):
        family, task, _, method = path.parts[-6:-2]
        _summary(out, path, family, task, method)
    for path in sorted(base.glob("*/*/ablations/*/train/seed*/metrics.jsonl")):
        family, task = path.parts[-7:-5]
        _metrics(out, path, family, task, "agon")
    for path in sorted(base.glob("*/*/eval/*/seed*/summary.json")):
        family, task, _, system = path.parts[-6:-2]
        body = _read_json(path)
        n = float(body.get("n_samples") or body.get("n_problems") or 1)
        if isinstance(body.get("n_problems"), int):
            key = (family, task)
            out.eval_problems[key] = max(out.eval_problems.get(key, 0), body["n_problems"])
        slot = out.evals.setdefault((family, task, system), {"completion": Mean(), "draft": Mean()})
        for which, key in (
            ("completion", "mean_completion_tokens"),
            ("draft", "mean_draft_tokens"),
        ):
            if isinstance(body.get(key), (int, float)):
                slot[which].add(float(body[key]), n, str(path))
        samples = path.with_name("samples.jsonl")
        if samples.is_file() and system in COLUMNS and COLUMNS[system].kind == "single":
            mean = out.prompts.setdefault((family, task), Mean())
            with open(samples) as f:
                for i, line in enumerate(f):
                    if i >= MAX_PROMPT_SAMPLES:
                        break
                    try:
                        tokens = json.loads(line).get("prompt_tokens")
                    except ValueError:
                        continue
                    if isinstance(tokens, (int, float)):
                        mean.add(float(tokens), 1.0, str(samples))
    for path in sorted(base.glob("*/*/data/split.json")):
        family, task = path.parts[-4:-2]
        sizes = _read_json(path).get("sizes")
        if isinstance(sizes, dict):
            out.sizes[(family, task)] = {k: int(v) for k, v in sizes.items()}
    return out


# a solve prompt (template, persona, problem) where none was measured: assumed, not measured
ASSUMED_SOLVE_PROMPT_TOKENS = 512
# published test-split sizes (CodeContests' card: 165 test, 117 valid; HumanEval's paper; TACO's
# card), upper bounds of the hard splits within them
TEST_SPLIT_SIZES = {"codecontests": 165, "humaneval": 164, "taco": 1000}
VALIDATION_SPLIT_SIZES = {"codecontests": 117}
ASSUMED_SPLIT_PROBLEMS = 500  # a task with no size parameter nor row above
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
    """How many problems of ``split`` a job reads, at most ``cap``: measured, else the whole
    split's size (parameters, table, constructor default), else assumed."""
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
    """Tokens of a draft a reader sees under ``draft_view``: ``last_tokens:N`` the last N, else
    all of it (for ``answer_section`` an upper bound)."""
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
        """A reader prompt: the solve prompt and the shown draft, cut to ``max_prompt_tokens``."""
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
    prompt = Count(measured, source)
    if measured is None:
        n = min(ASSUMED_SOLVE_PROMPT_TOKENS, family_row["max_prompt_tokens"])
        prompt = Count(n, f"assumed {ASSUMED_SOLVE_PROMPT_TOKENS}-token solve prompt")
    row = family_row
    return Expect(row["max_new_tokens"], row["max_prompt_tokens"], row["draft_view"], prompt)


def role_length(
    lengths: MeasuredLengths,
    e: Expect,
    family: str,
    task: str,
    model: str,
    role: str,
    method: str | None = None,
) -> Count:
    """Expected completion tokens of ``model`` in ``role``: measured, else the cap."""
    value, source = lengths.role(family, task, model, role, method)
    if value is not None:
        return Count(min(value, e.max_new), source)
    return Count(e.max_new, f"cap: max_new_tokens {e.max_new}")


def eval_length(
    lengths: MeasuredLengths, e: Expect, family: str, task: str, system: str, which: str
) -> Count:
    """Expected tokens of an evaluated system's ``completion`` or ``draft``: measured or the cap."""
    value, source = lengths.eval_mean(family, task, system, which)
    if value is not None:
        return Count(value, source)
    return Count(e.max_new, f"cap: max_new_tokens {e.max_new}")
