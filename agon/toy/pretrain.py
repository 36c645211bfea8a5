"""Two toy base models, A and B, trained from scratch by SFT (DESIGN.md §5).

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
- *Trained for real, and checked.* A curriculum raises the maximum level from
  ``curriculum_start_level`` to the task's top level over the first ``curriculum_frac`` of the
  steps (without it the model may never "click"). A guard compares the running loss with
  thresholds along the way and at the end and retries with another seed, then fails loudly:
  a model at chance is never returned.
- *Gates.* After training, each model's greedy pass@1 on the hard split of both tasks, its
  per-operation error rates, and both untrained cascades are measured, printed, and written to
  ``DIR/report.json`` with the timings.

The two models train in parallel, one process and one thread each (``toy.train.parallel``),
which is what fits the 2-core budget. Departures from a plain SFT recipe are all named config
options in the ``toy`` section of the config.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.toy.sft_data import KINDS, Mistake, SFTStream, make_example
from agon.toy.tasks import (
    OPS,
    ArithTask,
    ToyCodeTask,
    parse_arith_steps,
    parse_code_lines,
)

ROLES = ("A", "B")


# ---------------------------------------------------------------------------------------
# tokenizer, model, training


def tokenizer_corpus(tasks: dict[str, Any], n: int, seed: int = 0) -> list[str]:
    """Text the BPE is trained on: prompts and solutions of every kind and level."""
    rng = random.Random(f"toy-tokenizer-{seed}")
    none = Mistake("+", (), 0.0, 0.0)
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        task = tasks["arith" if kind.startswith("arith") else "toycode"]
        problem = task.sample(rng, rng.randint(1, task.levels))
        prompt, target = make_example(
            kind, problem, task, rng, none, none, {"draft_clean": 0.5, "draft_slip": 0.2}
        )
        out += [m["content"] for m in prompt] + [target]
    return out


def build_model(cfg: dict, tokenizer, seed: int):
    """A tiny Qwen3-architecture causal LM, randomly initialised under ``seed``."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    m = cfg["model"]
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=m["hidden_size"],
        intermediate_size=m["intermediate_size"],
        num_hidden_layers=m["num_hidden_layers"],
        num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_key_value_heads"],
        head_dim=m["hidden_size"] // m["num_attention_heads"],
        max_position_embeddings=m["max_position_embeddings"],
        rope_theta=m["rope_theta"],
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def encode_example(tokenizer, prompt: list[dict], target: str) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 on the prompt) of one example, encoded as at generation time."""
    from agon.engines.base import render_prompt

    p = render_prompt(tokenizer, prompt)
    t = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return p + t, [-100] * len(p) + t


def lr_at(step: int, steps: int, cfg: dict) -> float:
    """Linear warmup then cosine decay to ``min_lr_frac * lr``."""
    lr, warm = cfg["lr"], max(1, int(cfg["warmup_frac"] * steps))
    if step < warm:
        return lr * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    floor = cfg["min_lr_frac"] * lr
    return floor + (lr - floor) * 0.5 * (1 + math.cos(math.pi * t))


class NotClickedError(RuntimeError):
    """Training stayed above the guard's loss threshold: the model did not learn the task."""


def train_one(cfg: dict, tasks: dict[str, Any], tokenizer, role: str, seed: int, log=print):
    """Train model ``role`` under ``seed``; returns (model, stats). Raises NotClickedError.

    The guard compares the mean loss over the last ``guard.window`` steps with each
    ``[share, max_loss]`` of ``guard.checks`` at that share of the steps (stopping a run that
    has not clicked early, to save time for the retry) and with ``guard.max_loss_final`` at the
    end.
    """
    import torch

    tc, guard = cfg["train"], cfg["guard"]
    other = "B" if role == "A" else "A"
    own = Mistake.from_config(cfg["models"][role]["mistake"])
    rival = Mistake.from_config(cfg["models"][other]["mistake"])
    stream = SFTStream(tasks, cfg, own, rival, seed)
    model = build_model(cfg, tokenizer, seed)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": tc["weight_decay"]},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=tc["lr"],
        betas=(0.9, 0.98),
    )
    steps, bs, pad = tc["steps"], tc["batch_size"], tokenizer.pad_token_id
    losses: list[float] = []
    checks = {max(1, int(share * steps)): limit for share, limit in guard["checks"]}
    t0, cpu0 = time.perf_counter(), time.process_time()
    for step in range(steps):
        batch = [encode_example(tokenizer, *stream.example(step / steps)) for _ in range(bs)]
        inputs = _sft_batch(batch, pad, tc["packing"])
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, tc)
        loss = model(**inputs, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc["grad_clip"])
        opt.step()
        losses.append(float(loss.detach()))
        if tc["log_every"] and (step + 1) % tc["log_every"] == 0:
            log(
                f"[toy {role} seed {seed}] step {step + 1}/{steps} loss {sum(losses[-tc['log_every'] :]) / tc['log_every']:.4f} ({time.perf_counter() - t0:.0f}s)"
            )
        if step + 1 in checks:
            recent, limit = _window_mean(losses, guard["window"]), checks[step + 1]
            if recent > limit:
                raise NotClickedError(
                    f"model {role} seed {seed}: loss {recent:.4f} > {limit} (toy.guard.checks) at step {step + 1}/{steps}"
                )
    final = _window_mean(losses, guard["window"])
    if final > guard["max_loss_final"]:
        raise NotClickedError(
            f"model {role} seed {seed}: final loss {final:.4f} > toy.guard.max_loss_final={guard['max_loss_final']}"
        )
    stats = {
        "seed": seed,
        "steps": steps,
        "train_seconds": time.perf_counter() - t0,
        "train_cpu_seconds": time.process_time() - cpu0,
        "final_loss": final,
        "loss_curve": _curve(losses, 20),
    }
    return model, stats


def _sft_batch(batch: Sequence[tuple[list[int], list[int]]], pad: int, packing: bool) -> dict:
    """Model inputs for (ids, labels) examples: packed rows (several examples per row, each
    attending only to itself) or one right-padded example per row. The loss, a mean over the
    labelled tokens, is the same either way; packing skips the padding (about half the tokens
    of a toy batch)."""
    import torch

    from agon.packing import pack

    if packing:
        p = pack([x for x, _ in batch], pad, labels=[y for _, y in batch])
        return {"input_ids": p.input_ids, "position_ids": p.position_ids, "labels": p.labels}
    width = max(len(x) for x, _ in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (x, y) in enumerate(batch):  # right padding: positions stay 0..len-1
        ids[i, : len(x)], labels[i, : len(y)], mask[i, : len(x)] = (
            torch.tensor(x),
            torch.tensor(y),
            1,
        )
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _window_mean(xs: Sequence[float], window: int) -> float:
    tail = xs[-window:] if xs else [float("inf")]
    return sum(tail) / len(tail)


def _curve(xs: Sequence[float], points: int) -> list[list[float]]:
    """[step, mean loss] at ``points`` evenly spaced steps (for the report)."""
    n = len(xs)
    if n == 0:
        return []
    size = max(1, n // points)
    return [
        [i + size, round(sum(xs[i : i + size]) / len(xs[i : i + size]), 4)]
        for i in range(0, n, size)
    ]


def model_seed(base_seed: int, role: str, attempt: int) -> int:
    """The training seed of ``role`` on try ``attempt``: distinct for A and B and per retry."""
    return base_seed * 1000 + ROLES.index(role) * 100 + attempt


def train_with_guard(
    cfg: dict, tasks: dict[str, Any], tokenizer, role: str, base_seed: int, out: Path, log=print
) -> dict:
    """Train ``role`` until the guard passes (at most ``1 + guard.retries`` tries), save it to
    ``out``, and return its stats; raise RuntimeError naming every failed try otherwise."""
    failures = []
    for attempt in range(cfg["guard"]["retries"] + 1):
        seed = model_seed(base_seed, role, attempt)
        try:
            model, stats = train_one(cfg, tasks, tokenizer, role, seed, log)
        except NotClickedError as err:
            log(f"[toy {role}] guard: {err}; retrying with another seed")
            failures.append(str(err))
            continue
        if out.exists():
            shutil.rmtree(out)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        stats.update(attempt=attempt, failed_attempts=failures)
        return stats
    raise RuntimeError(
        f"toy model {role} did not learn in {len(failures)} tries (training never 'clicked'):\n  "
        + "\n  ".join(failures)
        + "\nraise toy.train.steps, or check toy.guard thresholds against the logged losses"
    )


# ---------------------------------------------------------------------------------------
# gates: greedy pass@1, per-operation error rates, the untrained cascade


def greedy(model_path: Path, prompts: list[list[dict]], cfg: dict) -> list[str]:
    """Greedy completions through the project's HF engine (batched, KV cache, left padding)."""
    from agon.engines.base import SamplingParams
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


def op_error_rates(name: str, problems, completions: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per-operation error rates of written steps (arith) or program lines (toycode).

    arith: step ``i`` is an error when it does not apply the problem's ``i``-th operation and
    operand, or its result is not ``lhs op rhs`` mod 7 (a miscopied operand counts, not only a
    wrong table entry; counted on the problem's operation). toycode: line ``i`` is an error
    when it is not the ``i``-th operation of the problem (a missing or unparseable line too).
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
                wrong[op] += 0 if i < len(lines) and lines[i] == (op, k) else 1
    return {
        op: {"error_rate": wrong[op] / total[op] if total[op] else None, "n": total[op]}
        for op in OPS
    }


def _worker_train(cfg: dict, tok_dir: str, role: str, base_seed: int, out_dir: str) -> dict:
    """Process entry point: one thread, train one model with the guard, save it."""
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(cfg["train"]["threads"])
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    tasks = make_tasks(cfg["_task_params"])
    t0 = time.perf_counter()
    stats = train_with_guard(cfg, tasks, tokenizer, role, base_seed, Path(out_dir) / role)
    stats["worker_seconds"] = time.perf_counter() - t0
    return stats


def _worker_generate(
    cfg: dict, model_path: str, prompts: list[list[dict]]
) -> tuple[list[str], float]:
    """Process entry point: greedy completions on one thread, and the seconds they took."""
    import torch

    torch.set_num_threads(cfg["train"]["threads"])
    t0 = time.perf_counter()
    return greedy(Path(model_path), prompts, cfg), time.perf_counter() - t0


def make_tasks(task_params: dict[str, dict]) -> dict[str, Any]:
    """The two toy tasks with the params of the config's task rows (defaults where absent)."""
    return {
        "arith": ArithTask(**task_params.get("arith", {})),
        "toycode": ToyCodeTask(**task_params.get("toycode", {})),
    }


def _map(pool, fn, calls: list[tuple]) -> list:
    """Run ``fn(*args)`` for each call, in the process pool when there is one."""
    if pool is None:
        return [fn(*args) for args in calls]
    futures = [pool.submit(fn, *args) for args in calls]
    return [f.result() for f in futures]


def pretrain(config: dict, out: str | Path, seed: int | None = None, log=print) -> dict:
    """Build the tokenizer, train A and B, measure the gates; write ``out/{A,B,report.json}``.

    ``config`` is a loaded agon config; its ``toy`` section drives everything and its task rows
    named ``arith`` / ``toycode`` give the task params (so the gates use the same splits as
    the rest of the pipeline). ``seed`` overrides ``toy.seed``. Returns the report payload.
    """
    from agon.provenance import write_results
    from agon.toy.tokenizer import build_tokenizer

    cfg = dict(config["toy"])
    base_seed = cfg["seed"] if seed is None else int(seed)
    rows = {
        r["name"]: dict(r.get("params", {}))
        for r in config["tasks"]
        if r["name"] in ("arith", "toycode")
    }
    cfg["_task_params"] = rows
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
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

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
                    [(cfg, str(tok_dir), r, base_seed, str(out)) for r in ROLES],
                ),
            )
        )
        train_wall = time.perf_counter() - t_train
        log(
            f"[toy] trained A and B in {train_wall:.1f}s wall ({'parallel' if pool else 'sequential'})"
        )

        t_gate = time.perf_counter()
        g = cfg["gates"]
        hard = {name: t.problems("hard")[: g["max_problems"]] for name, t in tasks.items()}
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
        read_raw = dict(zip(ROLES, _map(pool, _worker_generate, read_jobs)))
        reads = {r: _split(read_raw[r][0], names, hard) for r in ROLES}
    finally:
        if pool is not None:
            pool.shutdown()
    gen_seconds = {r: solo_raw[r][1] + read_raw[r][1] for r in ROLES}

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
                "op_error_rates": {r: op_error_rates(n, hard[n], solo[r][n]) for r in ROLES},
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
    checks = check_gates(gates, cfg)
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
        },
    }
    shutil.rmtree(tok_dir, ignore_errors=True)
    cfg.pop("_task_params", None)
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


def check_gates(gates: dict, cfg: dict) -> dict[str, dict]:
    """The quality gates, each with the measured numbers and pass / fail."""
    lo, hi = cfg["gates"]["pass_range"]
    checks = {}
    for n, row in gates["tasks"].items():
        for r in ROLES:
            v = row[r]["pass@1"]
            checks[f"{n}.{r}.hard_pass@1_in_range"] = {
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
        best = max(row["A"]["pass@1"], row["B"]["pass@1"])
        casc = row["cascade_A_drafts_B_reads"]["pass@1"]
        checks[f"{n}.cascade_beats_both"] = {"value": [casc, best], "pass": casc > best}
    return checks


def format_report(payload: dict) -> str:
    """The human-readable gate table printed at the end of pretraining."""
    lines = [f"toy pretrain (seed {payload['seed']}): gates on the hard split, greedy pass@1"]
    for n, row in payload["gates"]["tasks"].items():
        lines.append(
            f"  {n:8s} A {row['A']['pass@1']:.3f}  B {row['B']['pass@1']:.3f}  "
            f"A->B {row['cascade_A_drafts_B_reads']['pass@1']:.3f}  B->A {row['cascade_B_drafts_A_reads']['pass@1']:.3f}  (n={row['A']['n']})"
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
            f"  model {r}: seed {s['seed']} (try {s['attempt'] + 1}), {s['steps']} steps, final loss {s['final_loss']:.4f}, train {s['train_seconds']:.1f}s wall / {s['train_cpu_seconds']:.1f}s cpu"
        )
    lines.append(
        f"  pretrain wall {t['pretrain_wall_seconds']:.1f}s, gates {t['gate_wall_seconds']:.1f}s, total {t['total_wall_seconds']:.1f}s (load avg {t['load_average_1m']:.2f}, {t['cpus']} cpus)"
    )
    failed = [k for k, c in payload["checks"].items() if not c["pass"]]
    lines.append("  gates: ALL PASS" if not failed else f"  gates: FAILED {failed}")
    return "\n".join(lines)
