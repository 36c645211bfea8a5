"""The quality gates of the toy base models: what makes A and B a usable pair, measured.

After training, each model answers the gate split (``toy.gates.split``, by default the hard
problems of the validation split) of both tasks greedily (:func:`greedy`), each reads the
other's drafts (the untrained cascade), and A reads both answers at once (the untrained
Mixture-of-Agents). :func:`op_error_rates` measures each model's errors per operation, so the
difference between the two characteristic mistakes is measured rather than assumed, and
:func:`check_gates` turns the numbers into pass / fail checks: behaviourally different (each
errs more than its rival on the steps of its own always-wrong habit on each task) and, where
the config has a ``regime`` section (table 1's world), the regime's criteria on the untrained
systems
(:data:`agon.regime.SPECS`: each model in the base range, the two within the base gap, the
untrained cascade A drafts -> B reads and MoA gaining at most ``(1 - base) / divisor`` over the
better model), read greedily on the gate split: a first reading right after pretraining, which
``results/regime.csv`` then makes as table 1 does (sampled, with GRPO). Without one (the
positive control's world) each model's pass@1 is checked against ``toy.gates.pass_range``.
The gates that asked the untrained cascade to beat both models and MoA to match the better one
are gone: they asked for the reading before RL that the regime rules out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.engines.base import SamplingParams
from agon.regime import criteria
from agon.toy.chain import OPS, parse_arith_steps
from agon.toy.mistake import Mistake
from agon.toy.sft import ROLES
from agon.toy.toycode import parse_code_lines, same_line


def greedy(model_path: Path, prompts: list[list[dict]], cfg: dict) -> list[str]:
    """Greedy completions through the project's HF engine (batched, KV cache, left padding)."""
    # lazy: torch, transformers (agon.engines.hf imports them): off `agon toy`'s import
    from agon.engines.hf import HFEngine

    g = cfg["gates"]
    engine = HFEngine(str(model_path), dtype="float32", device="cpu", batch_size=g["batch_size"])
    try:
        out = engine.generate(
            prompts,
            n=1,
            sampling=SamplingParams(max_new_tokens=g["max_new_tokens"], temperature=0.0),
        )
    finally:
        engine.close()
    return [c[0].text for c in out]


def step_errors(name: str, problems: Sequence[Any], completions: Sequence[str]):
    """Yield ``(op, k, wrong)`` for each step (arith) or program line (toycode) of each problem,
    read as :func:`op_error_rates` says."""
    for p, text in zip(problems, completions):
        if name == "arith":
            steps = parse_arith_steps(text)
            for i, (op, k) in enumerate(p.meta["ops"]):
                ok = i < len(steps) and (steps[i].op, steps[i].rhs) == (op, k) and steps[i].correct
                yield op, k, not ok
        else:
            lines = parse_code_lines(text)
            for i, (op, k) in enumerate(p.meta["ops"]):
                yield op, k, not (i < len(lines) and same_line(lines[i], op, k))


def operand_errors(
    name: str, problems: Sequence[Any], completions: Sequence[str]
) -> dict[str, list[int]]:
    """``{"op k": [wrong, total]}`` over the steps (lines) of each operation and operand."""
    out: dict[str, list[int]] = {}
    for op, k, wrong in step_errors(name, problems, completions):
        cell = out.setdefault(f"{op}{k}", [0, 0])
        cell[0] += wrong
        cell[1] += 1
    return out


def always_wrong_habit(mistake: Mistake, kind: str) -> Mistake | None:
    """A writer's habit written every time (rate 1) on ``kind`` (``arith``/``code``), the first
    of ``mistake`` and its ``also``; None where it has none."""
    rate = "arith_rate" if kind == "arith" else "code_rate"
    return next((h for h in (mistake, *mistake.also) if getattr(h, rate) == 1.0), None)


def op_error_rates(
    name: str, problems: Sequence[Any], completions: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Per-operation error rates of written steps (arith) or program lines (toycode).

    arith: step ``i`` is an error when it does not apply the problem's ``i``-th operation and
    operand, or its result is not ``lhs op rhs`` mod 7 (a miscopied operand counts, not only a
    wrong table entry; counted on the problem's operation). toycode: line ``i`` is an error
    when it does not apply the ``i``-th operation of the problem (a subtraction written either
    way, :func:`agon.toy.toycode.same_line`; a missing or unparseable line is an error too).
    """
    wrong = {op: 0 for op in OPS}
    total = {op: 0 for op in OPS}
    for op, _, bad in step_errors(name, problems, completions):
        total[op] += 1
        wrong[op] += bad
    return {
        op: {"error_rate": wrong[op] / total[op] if total[op] else None, "n": total[op]}
        for op in OPS
    }


# the gates' untrained systems as table 1 names its columns (the regime's criteria read these)
AS_COLUMNS = {"A": "base", "B": "base_b", "cascade_A_drafts_B_reads": "base_cascade", "moa": "moa"}


def check_gates(gates: dict, cfg: dict, regime: dict | None = None) -> dict[str, dict]:
    """The quality gates, each with the measured numbers and pass / fail; ``regime``: the
    config's ``regime`` section (:func:`agon.config.regime_section`), None without one."""
    lo, hi = cfg["gates"]["pass_range"]
    checks = {}
    for n, row in gates["tasks"].items():
        if regime is not None:
            p = {col: row[k]["pass@1"] for k, col in AS_COLUMNS.items() if k in row}
            for c in criteria(p, regime):
                checks[f"{n}.regime.{c.name}"] = {
                    "value": c.value,
                    "range": [c.min, c.max],
                    "pass": c.met,
                }
        for r in ROLES if regime is None else ():
            v = row[r]["pass@1"]
            checks[f"{n}.{r}.hard_pass@1_in_range"] = {  # hard: of the gate split
                "value": v,
                "range": [lo, hi],
                "pass": lo <= v <= hi,
            }
        # behaviourally different: each model errs more than its rival on the steps of its own
        # always-wrong habit on this task (its operation and operands); a report from before
        # the per-operand counts: on its habit's operation
        if "operand_errors" in row:
            checks |= habit_checks(n, row["operand_errors"], cfg)
            continue
        for r in ROLES:
            op = cfg["models"][r]["mistake"]["op"]
            other = "B" if r == "A" else "A"
            mine, theirs = (
                row["op_error_rates"][r][op]["error_rate"],
                row["op_error_rates"][other][op]["error_rate"],
            )
            checks[f"{n}.{r}.more_errors_on_{op}"] = {
                "value": [mine, theirs],
                "pass": mine is not None and theirs is not None and mine > theirs,
            }
    return checks


def habit_checks(name: str, errors: dict[str, dict[str, list[int]]], cfg: dict) -> dict:
    """``{name}.{r}.more_errors_on_own_habit``: model ``r``'s error rate on the steps of its
    always-wrong habit on task ``name`` (:func:`always_wrong_habit`) above its rival's on the
    same steps (``errors``: :func:`operand_errors` per model). A model without such a habit on
    the task is not checked."""
    kind = "arith" if name == "arith" else "code"
    checks = {}
    for r in ROLES:
        habit = always_wrong_habit(Mistake.from_config(cfg["models"][r]["mistake"]), kind)
        if habit is None:
            continue
        other = "B" if r == "A" else "A"
        keys = [f"{habit.op}{k}" for k in habit.operands]

        def rate(model: str, keys=keys) -> float | None:
            wrong = sum(errors[model].get(k, [0, 0])[0] for k in keys)
            total = sum(errors[model].get(k, [0, 0])[1] for k in keys)
            return wrong / total if total else None

        mine, theirs = rate(r), rate(other)
        checks[f"{name}.{r}.more_errors_on_own_habit"] = {
            "value": [mine, theirs],
            "habit": f"{habit.op} {list(habit.operands)}",
            "pass": mine is not None and theirs is not None and mine > theirs,
        }
    return checks
