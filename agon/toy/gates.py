"""The quality gates of the toy base models: what makes A and B a usable pair, measured.

After training, each model answers the gate split (``toy.gates.split``, by default the hard
problems of the validation split) of both tasks greedily (:func:`greedy`), each reads the
other's drafts (the untrained cascade), and A reads both answers at once (the untrained
Mixture-of-Agents). :func:`op_error_rates` measures each model's errors per operation, so the
difference between the two characteristic mistakes is measured rather than assumed, and
:func:`check_gates` turns the numbers into pass / fail checks: behaviourally different (each
errs more than its rival on its own habit's operation) and, where the config has a ``regime``
section (table 1's world), the regime's criteria on the untrained systems
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
from agon.toy.sft import ROLES
from agon.toy.tasks import OPS, parse_arith_steps
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
    for p, text in zip(problems, completions):
        if name == "arith":
            steps = parse_arith_steps(text)
            for i, (op, k) in enumerate(p.meta["ops"]):
                total[op] += 1
                ok = i < len(steps) and (steps[i].op, steps[i].rhs) == (op, k) and steps[i].correct
                wrong[op] += 0 if ok else 1
        else:
            lines = parse_code_lines(text)
            for i, (op, k) in enumerate(p.meta["ops"]):
                total[op] += 1
                wrong[op] += 0 if i < len(lines) and same_line(lines[i], op, k) else 1
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
        # behaviourally different: each model errs more than its rival on its own habit's op
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
