"""The toy world's teacher: a third model, trained as A and B are but with no mistake injected.

Methods that learn from a teacher's log-probabilities (OPD-then-RL, ``docs/method.md``) need a
teacher that knows more than the students and reads their tokens. The toy teacher is that: the
same architecture, SFT recipe, mix, curriculum and guard as A and B (:mod:`agon.toy.sft`), its
own seed, and no characteristic mistake (its solutions are the gold ones; the drafts its read
examples show carry random slips only). It is trained after the pair, into the same folder, and
reads the pair's tokenizer, so its vocabulary is the students' token for token.

Its gate: greedy pass@1 on the pair's gate problems (``toy.gates.split``, the first
``max_problems`` of each task: the same problems, the same decoding) above both A's and B's as
``DIR/report.json`` has them, on every task. ``agon toy pretrain --model teacher`` writes
``DIR/teacher`` and ``DIR/teacher_report.json``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agon.provenance import write_results
from agon.toy.gates import greedy, op_error_rates
from agon.toy.pretrain import _split, make_tasks
from agon.toy.sft import ROLES, TEACHER, train_with_guard

REPORT = "teacher_report.json"


def pretrain_teacher(
    config: dict, out: str | Path, seed: int | None = None, log: Callable[[str], Any] = print
) -> dict:
    """Train the toy teacher into ``out/teacher`` beside the pair ``out/{A,B}``, gate it against
    them, write ``out/teacher_report.json`` and return its payload.

    ``seed`` (default: the pair's base seed from ``out/report.json``) derives the teacher's
    training seed as the pair's are derived."""
    # lazy: torch, transformers: off `agon toy`'s import, which imports this module
    import torch
    from transformers import AutoTokenizer

    cfg = dict(config["toy"])
    out = Path(out)
    if not (out / "report.json").is_file() or not (out / "A").is_dir():
        raise FileNotFoundError(
            f"{out} holds no report.json and A/: run `agon toy pretrain` (models A and B) into it "
            "first; the teacher reads their tokenizer and is gated against them"
        )
    pair = json.loads((out / "report.json").read_text())
    g = cfg["gates"]
    if pair["generation"]["split"] != g["split"]:
        raise ValueError(
            f"{out / 'report.json'} gated A and B on {pair['generation']['split']!r}, this "
            f"config's toy.gates.split is {g['split']!r}: pretrain the teacher with the pair's "
            "config"
        )
    base_seed = int(pair["seed"]) if seed is None else int(seed)
    rows = {
        r["name"]: dict(r.get("params", {}))
        for r in config["tasks"]
        if r["name"] in ("arith", "toycode")
    }
    torch.set_num_threads(cfg["train"]["threads"])
    tokenizer = AutoTokenizer.from_pretrained(out / "A")
    tasks = make_tasks(rows)
    t0 = time.perf_counter()
    try:
        hard = {name: t.problems(g["split"])[: g["max_problems"]] for name, t in tasks.items()}
        names = list(hard)
        for n in names:
            if any(pair["gates"]["tasks"][n][r]["n"] != len(hard[n]) for r in ROLES):
                raise ValueError(
                    f"{out / 'report.json'} gated A and B on other {n} problems than this config "
                    "names (toy.gates.max_problems or the task row differ): pretrain the teacher "
                    "with the pair's config"
                )
        stats = train_with_guard(cfg, tasks, tokenizer, TEACHER, base_seed, out / TEACHER, log)
        train_wall = time.perf_counter() - t0
        solve = [tasks[n].solve_prompt(p) for n in names for p in hard[n]]
        answers = _split(greedy(out / TEACHER, solve, cfg), names, hard)
        gates: dict[str, Any] = {}
        checks: dict[str, dict] = {}
        for n in names:
            verdicts = tasks[n].grade(hard[n], answers[n])
            mine = sum(v.correct is True for v in verdicts) / len(verdicts)
            theirs = {r: pair["gates"]["tasks"][n][r] for r in ROLES}
            gates[n] = {
                TEACHER: {"pass@1": mine, "n": len(verdicts)},
                **{r: {"pass@1": theirs[r]["pass@1"]} for r in ROLES},
                "op_error_rates": op_error_rates(n, hard[n], answers[n]),
            }
            best = max(theirs[r]["pass@1"] for r in ROLES)
            checks[f"{n}.teacher.beats_A_and_B"] = {"value": [mine, best], "pass": mine > best}
    finally:
        for t in tasks.values():
            t.close()
    payload = {
        "seed": base_seed,
        "model": str(out / TEACHER),
        "train": stats,
        "gates": {"split": g["split"], "tasks": gates},
        "checks": checks,
        "all_gates_pass": all(c["pass"] for c in checks.values()),
        "timing": {
            "train_wall_seconds": train_wall,
            "total_wall_seconds": time.perf_counter() - t0,
        },
    }
    write_results(out / REPORT, payload, config={"toy": cfg, "tasks": rows}, seed=base_seed)
    log(format_report(payload))
    if g["strict"] and not payload["all_gates_pass"]:
        failed = [k for k, c in checks.items() if not c["pass"]]
        raise RuntimeError(
            f"toy teacher gates failed: {failed} (see {out / REPORT}); toy.gates.strict is true"
        )
    return payload


def format_report(payload: dict) -> str:
    """The teacher's gate table, printed at the end of its pretraining."""
    lines = [f"toy teacher (seed {payload['seed']}): gates on {payload['gates']['split']}, greedy"]
    for n, row in payload["gates"]["tasks"].items():
        lines.append(
            f"  {n:8s} teacher {row[TEACHER]['pass@1']:.3f}  A {row['A']['pass@1']:.3f}  "
            f"B {row['B']['pass@1']:.3f}  (n={row[TEACHER]['n']})"
        )
    s = payload["train"]
    lines.append(
        f"  seed {s['seed']} (try {s['attempt'] + 1}), {s['steps']} steps, final loss "
        f"{s['final_loss']:.4f}, train {s['train_seconds']:.1f}s wall"
    )
    failed = [k for k, c in payload["checks"].items() if not c["pass"]]
    lines.append("  gates: ALL PASS" if not failed else f"  gates: FAILED {failed}")
    return "\n".join(lines)
