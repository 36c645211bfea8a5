"""Two toy base models, A and B, trained from scratch by SFT (``docs/method.md``, the toy world).

What makes them a usable pair for the Agon method:

- *Comparably strong, behaviourally different.* Same architecture and recipe, different seeds,
  and each model's training solutions carry its own **characteristic mistake**: a habit of
  misreading the operand of one operation (A: ``*``, B: ``-`` by default), injected at a rate
  into its arithmetic steps and program lines (``toy.models.X.mistake``). The gates report
  each model's per-operation error rates, so the difference is measured, not assumed.
- *Both roles.* The SFT mix holds solve examples (problem -> solution) and read examples
  (problem + a rival's possibly wrong draft -> a solution that keeps the draft's correct
  steps and redoes the rest, with the reader's own habits). Drafts are drawn with the rival's
  mistake profile plus random slips, so the untrained cascade A drafts -> B reads already
  works in-distribution. A reader may also *anchor*: copy a wrong draft step as it stands
  (``toy.reader.{arith,code}_copy_wrong``), a habit that training the reader can remove.
  Under ``toy.reader.targets: own`` the read (and MoA) examples keep the drafts in the prompt
  but their targets are the model's own work: the models see the format, never a target that
  depends on a draft, and reading is left for the duel to teach.
- *Mixture-of-Agents, too.* MoA examples show two proposals, one with the model's own habit
  and one with its rival's, through the task's proposals prompt; the target keeps a step that
  either has right. So the untrained MoA baseline (A's and B's answers, read by one of them)
  is read in a format the models know, as the cascade is.
- *Trained for real, and checked.* A curriculum raises the maximum level from
  ``curriculum_start_level`` to the task's top level over the first ``curriculum_frac`` of the
  steps (without it the model may never "click"). A guard compares the running loss with
  thresholds along the way and at the end and retries with another seed, then fails loudly:
  a model at chance is never returned.
- *Gates.* After training, each model's greedy pass@1 on the gate split of both tasks
  (``toy.gates.split``: the hard problems of the validation split, never a test split), its
  per-operation error rates, both untrained cascades and the untrained MoA are measured,
  printed, checked (:mod:`agon.toy.gates`: with the config's ``regime`` section, against its
  criteria) and written to ``DIR/report.json`` with the timings.

The two models train in parallel, one process and one thread each (``toy.train.parallel``),
which is what fits the 2-core budget. Departures from a plain SFT recipe are all named config
options in the ``toy`` section of the config.

This module is the orchestration (:func:`pretrain`): the tokenizer, the process pool that
trains and queries both models, the gate measurements and the report. The SFT examples are
:mod:`agon.toy.sft_data`, the training loop and its guard :mod:`agon.toy.sft`, the gate
metrics and checks :mod:`agon.toy.gates`.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from agon.config import regime_section
from agon.provenance import write_results
from agon.toy.gates import check_gates, greedy, op_error_rates, operand_errors
from agon.toy.mistake import Mistake
from agon.toy.sft import ROLES, train_with_guard
from agon.toy.sft_data import KINDS, make_example, task_of
from agon.toy.tasks import ArithTask
from agon.toy.tokenizer import build_tokenizer
from agon.toy.toycode import ToyCodeTask

MOA_AGGREGATOR = "A"  # the gates' untrained MoA aggregator (the config's moa.aggregator is not
# in the pretrain config; A is its default)


def tokenizer_corpus(tasks: dict[str, Any], n: int, seed: int = 0) -> list[str]:
    """Text the BPE is trained on: prompts and solutions of every kind and level."""
    rng = random.Random(f"toy-tokenizer-{seed}")
    none = Mistake("+", (), 0.0, 0.0)
    kinds = [k for k in KINDS if task_of(k) in tasks]  # every kind of the world's tasks
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        task = tasks[task_of(kind)]
        problem = task.sample(rng, rng.randint(1, task.levels))
        prompt, target = make_example(
            kind, problem, task, rng, none, none, {"draft_clean": 0.5, "draft_slip": 0.2}
        )
        out += [m["content"] for m in prompt] + [target]
    return out


def make_tasks(task_params: dict[str, dict]) -> dict[str, Any]:
    """The toy tasks the config's task rows name, with their params (both, with their default
    params, when it names neither): a world of arith alone (the positive control) pretrains
    and gates on arith alone."""
    classes = {"arith": ArithTask, "toycode": ToyCodeTask}
    wanted = {n: p for n, p in task_params.items() if n in classes} or {n: {} for n in classes}
    return {name: classes[name](**params) for name, params in wanted.items()}


def _worker_train(
    cfg: dict,
    task_params: dict[str, dict],
    tok_dir: str,
    role: str,
    base_seed: int,
    out_dir: str,
) -> dict:
    """Process entry point: one thread, train one model with the guard, save it.

    ``task_params``: the params of the task rows, from which the worker rebuilds the tasks
    (plain dicts pickle cheaply to a spawned process; task objects may hold grading pools)."""
    # lazy: torch, transformers: off `agon toy`'s import, which imports this module
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(cfg["train"]["threads"])
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    tasks = make_tasks(task_params)
    t0 = time.perf_counter()
    stats = train_with_guard(cfg, tasks, tokenizer, role, base_seed, Path(out_dir) / role)
    stats["worker_seconds"] = time.perf_counter() - t0
    return stats


def _worker_generate(
    cfg: dict, model_path: str, prompts: list[list[dict]]
) -> tuple[list[str], float]:
    """Process entry point: greedy completions on one thread, and the seconds they took."""
    # lazy: torch: off `agon toy`'s import, which imports this module
    import torch

    torch.set_num_threads(cfg["train"]["threads"])
    t0 = time.perf_counter()
    return greedy(Path(model_path), prompts, cfg), time.perf_counter() - t0


def _map(pool: Any, fn: Callable[..., Any], calls: list[tuple]) -> list:
    """Run ``fn(*args)`` for each call, in the process pool when there is one."""
    if pool is None:
        return [fn(*args) for args in calls]
    futures = [pool.submit(fn, *args) for args in calls]
    return [f.result() for f in futures]


def pretrain(
    config: dict, out: str | Path, seed: int | None = None, log: Callable[[str], Any] = print
) -> dict:
    """Build the tokenizer, train A and B, measure the gates; write ``out/{A,B,report.json}``.

    ``config`` is a loaded agon config; its ``toy`` section drives everything and its task rows
    named ``arith`` / ``toycode`` give the task params (so the gates use the same splits as
    the rest of the pipeline). ``seed`` overrides ``toy.seed``. Returns the report payload.
    """

    cfg = dict(config["toy"])
    base_seed = cfg["seed"] if seed is None else int(seed)
    rows = {
        r["name"]: dict(r.get("params", {}))
        for r in config["tasks"]
        if r["name"] in ("arith", "toycode")
    }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    tasks = make_tasks(rows)

    tokenizer = build_tokenizer(
        tokenizer_corpus(tasks, cfg["tokenizer"]["corpus_examples"]), cfg["tokenizer"]["vocab_size"]
    )
    tok_dir = out / ".tokenizer"
    tokenizer.save_pretrained(tok_dir)

    pool = None
    if cfg["train"]["parallel"]:
        # spawn: a forked child would inherit this process's torch threads and locks
        pool = ProcessPoolExecutor(
            max_workers=len(ROLES), mp_context=multiprocessing.get_context("spawn")
        )
    try:
        t_train = time.perf_counter()
        train_stats = dict(
            zip(
                ROLES,
                _map(
                    pool,
                    _worker_train,
                    [(cfg, rows, str(tok_dir), r, base_seed, str(out)) for r in ROLES],
                ),
            )
        )
        train_wall = time.perf_counter() - t_train
        log(
            f"[toy] trained A and B in {train_wall:.1f}s wall "
            f"({'parallel' if pool else 'sequential'})"
        )

        t_gate = time.perf_counter()
        g = cfg["gates"]
        hard = {name: t.problems(g["split"])[: g["max_problems"]] for name, t in tasks.items()}
        names = list(hard)
        # solo: each model answers the solve prompts of both tasks (one job per model)
        solve = [tasks[n].solve_prompt(p) for n in names for p in hard[n]]
        solo_raw = dict(
            zip(ROLES, _map(pool, _worker_generate, [(cfg, str(out / r), solve) for r in ROLES]))
        )
        solo = {r: _split(solo_raw[r][0], names, hard) for r in ROLES}
        # cascades: the other model reads each draft (A drafts -> B reads, and the reverse)
        read_jobs = []
        for reader in ROLES:
            drafter = "A" if reader == "B" else "B"
            prompts = [
                tasks[n].reader_prompt(p, d)
                for n in names
                for p, d in zip(hard[n], solo[drafter][n])
            ]
            read_jobs.append((cfg, str(out / reader), prompts))
        # untrained MoA: proposer 0 is A, proposer 1 is B (their greedy solo answers above);
        # the aggregator is A (moa.aggregator is not part of the pretrain config), reading them
        # through the proposals prompt. A third job: it runs beside the two reads.
        moa_prompts = [
            tasks[n].proposals_prompt(p, [da, db])
            for n in names
            for p, da, db in zip(hard[n], solo["A"][n], solo["B"][n])
        ]
        moa_job = (cfg, str(out / MOA_AGGREGATOR), moa_prompts)
        *read_out, moa_raw = _map(pool, _worker_generate, [*read_jobs, moa_job])
        read_raw = dict(zip(ROLES, read_out))
        reads = {r: _split(read_raw[r][0], names, hard) for r in ROLES}
        moa = _split(moa_raw[0], names, hard)
    finally:
        if pool is not None:
            pool.shutdown()
    gen_seconds = {r: solo_raw[r][1] + read_raw[r][1] for r in ROLES}
    gen_seconds[MOA_AGGREGATOR] += moa_raw[1]

    gates: dict[str, Any] = {"tasks": {}}
    try:
        for n in names:
            task = tasks[n]

            def pass1(completions: list[str], task=task, problems=hard[n]) -> dict:
                verdicts = task.grade(problems, completions)
                ok = [bool(v.correct) for v in verdicts]
                undecided = sum(v.correct is None for v in verdicts)
                return {"pass@1": sum(ok) / len(ok), "n": len(ok), "undecided": undecided}

            row = {
                "A": pass1(solo["A"][n]),
                "B": pass1(solo["B"][n]),
                "cascade_A_drafts_B_reads": pass1(reads["B"][n]),
                "cascade_B_drafts_A_reads": pass1(reads["A"][n]),
                "moa": {**pass1(moa[n]), "aggregator": MOA_AGGREGATOR},
                "op_error_rates": {r: op_error_rates(n, hard[n], solo[r][n]) for r in ROLES},
                "operand_errors": {r: operand_errors(n, hard[n], solo[r][n]) for r in ROLES},
                "examples": {
                    r: [
                        {"question": p.question, "completion": c}
                        for p, c in list(zip(hard[n], solo[r][n]))[:3]
                    ]
                    for r in ROLES
                },
            }
            gates["tasks"][n] = row
    finally:
        for t in tasks.values():
            t.close()
    gate_seconds = time.perf_counter() - t_gate
    # table 1's world carries the regime's criteria into the gates; the control's has none
    checks = check_gates(gates, cfg, regime_section(config) if "regime" in config else None)
    payload = {
        "seed": base_seed,
        "models": {r: str(out / r) for r in ROLES},
        "train": train_stats,
        "gates": gates,
        "checks": checks,
        "all_gates_pass": all(c["pass"] for c in checks.values()),
        "timing": {
            "pretrain_wall_seconds": train_wall,
            "gate_wall_seconds": gate_seconds,
            "generation_seconds": gen_seconds,
            "total_wall_seconds": time.perf_counter() - t_start,
            "load_average_1m": os.getloadavg()[0],
            "cpus": os.cpu_count(),
            "parallel": bool(cfg["train"]["parallel"]),
            "threads_per_model": cfg["train"]["threads"],
        },
        "generation": {
            "engine": "agon.engines.hf.HFEngine",
            "decoding": "greedy",
            "max_new_tokens": g["max_new_tokens"],
            "split": g["split"],
        },
    }
    shutil.rmtree(tok_dir, ignore_errors=True)
    write_results(out / "report.json", payload, config={"toy": cfg, "tasks": rows}, seed=base_seed)
    log(format_report(payload))
    if cfg["gates"]["strict"] and not payload["all_gates_pass"]:
        failed = [k for k, c in checks.items() if not c["pass"]]
        raise RuntimeError(
            f"toy gates failed: {failed} (see {out / 'report.json'}); toy.gates.strict is true"
        )
    return payload


def _split(flat: list[str], names: list[str], hard: dict[str, list]) -> dict[str, list[str]]:
    """Undo the concatenation of the tasks' prompt lists."""
    out, i = {}, 0
    for n in names:
        out[n] = flat[i : i + len(hard[n])]
        i += len(hard[n])
    return out


def format_report(payload: dict) -> str:
    """The human-readable gate table printed at the end of pretraining."""
    split = payload.get("generation", {}).get("split", "validation_hard")
    lines = [f"toy pretrain (seed {payload['seed']}): gates on {split}, greedy pass@1"]
    for n, row in payload["gates"]["tasks"].items():
        lines.append(
            f"  {n:8s} A {row['A']['pass@1']:.3f}  B {row['B']['pass@1']:.3f}  "
            f"A->B {row['cascade_A_drafts_B_reads']['pass@1']:.3f}  "
            f"B->A {row['cascade_B_drafts_A_reads']['pass@1']:.3f}  "
            f"MoA(A+B, {row['moa']['aggregator']} aggregates) {row['moa']['pass@1']:.3f}  "
            f"(n={row['A']['n']})"
        )
        for r in ROLES:
            rates = "  ".join(
                f"{op}:{v['error_rate']:.3f}" if v["error_rate"] is not None else f"{op}:-"
                for op, v in row["op_error_rates"][r].items()
            )
            lines.append(f"           {r} per-op error rates  {rates}")
    t = payload["timing"]
    for r in ROLES:
        s = payload["train"][r]
        lines.append(
            f"  model {r}: seed {s['seed']} (try {s['attempt'] + 1}), {s['steps']} steps, "
            f"final loss {s['final_loss']:.4f}, train {s['train_seconds']:.1f}s wall / "
            f"{s['train_cpu_seconds']:.1f}s cpu"
        )
    lines.append(
        f"  pretrain wall {t['pretrain_wall_seconds']:.1f}s, gates {t['gate_wall_seconds']:.1f}s, "
        f"total {t['total_wall_seconds']:.1f}s "
        f"(load avg {t['load_average_1m']:.2f}, {t['cpus']} cpus)"
    )
    failed = [k for k, c in payload["checks"].items() if not c["pass"]]
    lines.append("  gates: ALL PASS" if not failed else f"  gates: FAILED {failed}")
    return "\n".join(lines)
