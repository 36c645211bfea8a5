"""Evaluate a system on a task: per-sample JSONL, a summary with pass@k, resumable.

Python API: :func:`evaluate` (a built system and task) and :func:`evaluate_from_config` (the
``agon eval`` path: builds engines, system and task from a config). CLI: ``agon eval``, in two
forms::

    agon eval --system cascade --drafter PATH --reader PATH --task arith --out DIR
    agon eval --config C --family F --task T --system base_cascade --seed 0 --out DIR

Systems: ``single``, ``cascade`` and ``moa`` by kind, or a table-1 column name. Untrained
columns resolve from the family row: ``base`` = single(A), ``base_cascade`` = cascade(A, B),
``moa`` = moa(A, B). Trained columns (``grpo``, ``agon``, ...) name their model folders with
``--model`` (a single model) or ``--drafter/--reader`` (a cascade); each policy keeps its
row's persona and chat-template kwargs (``--*-row a|b``; a name ending in ``_rev`` swaps them).

Output (``DIR``):

- ``samples.jsonl``: one line per (problem, sample): problem id, gold answer (math tasks),
  final prompt, draft(s) or proposals, completion, extracted answer, verdict, token counts.
- ``summary.json``: pass@1 with standard error and 95% bootstrap interval, pass@k for the
  configured k, mean tokens, wall time, provenance; computed from ``samples.jsonl`` as read
  back from disk, so the two cannot disagree.

Resume: problems are done in fixed chunks, and a chunk's lines are appended and fsynced in one
write. A restarted evaluation keeps every problem whose ``n`` lines are all present (a torn
last line or a partly written problem is cut off), and generates only the rest. Each chunk is
seeded from the position of its first problem, so a resumed run draws from the same seeds as
an uninterrupted one (identical samples where the chunking coincides). A ``samples.jsonl``
written by a different evaluation (other system, models, task or sampling) is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agon.config import (
    ConfigError,
    config_hash,
    get_family,
    get_task_row,
    load_config,
    validate_config,
)
from agon.engines.base import SamplingParams
from agon.provenance import atomic_write_text, write_results
from agon.stats import summarize
from agon.systems import Sample, System, cascade, single
from agon.tasks import Problem, Task, get_task

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
KINDS = ("single", "cascade", "moa")
# table-1 columns that need no trained model: they resolve from the family row
UNTRAINED = {"base": "single", "base_cascade": "cascade", "moa": "moa"}


def chunk_seed(seed: int, start: int) -> int:
    """The sampling seed of the chunk whose first problem is ``problems[start]``: a hash, so
    that no two chunks (nor their stage and batch offsets) share a seed."""
    return int.from_bytes(
        hashlib.sha256(f"agon-eval:{seed}:{start}".encode()).digest()[:4], "little"
    )


# ----------------------------------------------------------------------------- resume


def read_samples(path: str | Path) -> tuple[list[dict], int]:
    """Parsed records of a samples JSONL up to its first torn/unparseable line, and the byte
    length of that clean prefix."""
    path = Path(path)
    if not path.is_file():
        return [], 0
    records: list[dict] = []
    good = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn last line: the write was killed half way
            try:
                records.append(json.loads(raw))
            except json.JSONDecodeError:
                break
            good += len(raw)
    return records, good


def complete_records(records: Sequence[dict], n: int, run_id: str, path: Path) -> list[dict]:
    """The records of problems with all ``n`` samples; an error if another run wrote them."""
    for r in records:
        if r.get("run_id") != run_id:
            raise RuntimeError(
                f"{path} was written by a different evaluation (run_id {r.get('run_id')} != {run_id}: "
                "other system, models, task, split or sampling); delete it or choose another --out"
            )
    by_problem: dict[str, set[int]] = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], set()).add(r["sample"])
    done = {pid for pid, s in by_problem.items() if s == set(range(n))}
    seen: set[tuple[str, int]] = set()
    kept = []
    for r in records:
        key = (r["problem_id"], r["sample"])
        if r["problem_id"] in done and key not in seen:
            seen.add(key)
            kept.append(r)
    return kept


# ----------------------------------------------------------------------------- evaluation


def _record(
    run_id: str,
    system: str,
    problem: Problem,
    index: int,
    sample: Sample,
    verdict: Any,
    gold: bool,
    wall_s: float,
) -> dict:
    rec = {
        "run_id": run_id,
        "system": system,
        "problem_id": problem.id,
        "sample": index,
        "difficulty": problem.difficulty,
        "prompt": sample.prompt,
        "drafts": sample.drafts,
        "completion": sample.completion,
        "extracted": verdict.extracted,
        "correct": verdict.correct,
        "status": verdict.status,
        "prompt_tokens": sample.prompt_tokens,
        "completion_tokens": sample.completion_tokens,
        "draft_tokens": sample.draft_tokens,
        "total_tokens": sample.total_tokens,
        "finish_reason": sample.finish_reason,
        "wall_s": wall_s,
    }
    if gold:
        rec["gold"] = problem.answer
    return rec


def summarize_records(records: Sequence[dict], ks: Sequence[int], n_boot: int, seed: int) -> dict:
    """pass@k (with se and 95% interval), mean tokens and wall time from sample records.

    A sample whose verdict is ``None`` (could not be graded) counts as not correct, and is
    counted in ``n_ungraded`` so it is visible.
    """
    if not records:
        raise ValueError("no samples to summarize")
    by_problem: dict[str, list[dict]] = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], []).append(r)
    counts = [(len(rs), sum(1 for r in rs if r["correct"] is True)) for rs in by_problem.values()]
    n_min = min(n for n, _ in counts)
    out = summarize(counts, ks=[k for k in ks if k <= n_min], n_boot=n_boot, seed=seed)
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1

    def mean(key: str) -> float:
        return sum(r[key] for r in records) / len(records)

    out.update(
        {
            "n_ungraded": sum(1 for r in records if r["correct"] is None),
            "status_counts": statuses,
            "mean_completion_tokens": mean("completion_tokens"),
            "mean_draft_tokens": mean("draft_tokens"),
            "mean_total_tokens": mean("total_tokens"),
            "total_generated_tokens": int(sum(r["total_tokens"] for r in records)),
            "finish_length_fraction": sum(1 for r in records if r["finish_reason"] == "length")
            / len(records),
            "wall_time_s": float(sum(r["wall_s"] for r in records)),
        }
    )
    return out


def evaluate(
    system: System,
    task: Task,
    problems: Sequence[Problem],
    out_dir: str | Path,
    *,
    n: int = 1,
    ks: Sequence[int] = (1,),
    sampling: SamplingParams | None = None,
    chunk_size: int = 64,
    seed: int = 0,
    n_boot: int = 1000,
    config: Any = None,
    identity: dict | None = None,
    meta: dict | None = None,
    progress: bool = True,
) -> dict:
    """Run ``system`` on ``problems`` (``n`` samples each), grade, and write the results.

    ``chunk_size`` is the number of samples (problems x n) per system call, the unit of resume.
    ``identity`` describes what makes this evaluation this one (models, settings); with the
    system, task, split and sampling it fixes the ``run_id`` a resumed run must match.
    ``meta`` is copied into the summary. Returns the summary payload (without provenance).
    """
    from tqdm.auto import tqdm

    if n < 1:
        raise ValueError(f"n (samples per problem) must be >= 1, got {n}")
    bad_k = [k for k in ks if not 1 <= k <= n]
    if bad_k:
        raise ValueError(f"pass@k needs 1 <= k <= n={n}; got k={bad_k}")
    if not problems:
        raise ValueError(
            f"no problems to evaluate for task {task.name!r} (empty split, or max_problems 0)"
        )
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"problem ids must be unique; {len(ids) - len(set(ids))} repeated in task {task.name!r}"
        )
    sampling = sampling or SamplingParams()
    sampling_base = sampling.seed if sampling.seed is not None else seed
    run_id = config_hash(
        {
            "system": system.name,
            "task": task.name,
            "task_version": task.version,
            "problems": config_hash(ids),
            "n": n,
            "sampling": {**sampling.__dict__, "seed": sampling_base},
            "identity": identity or {},
        }
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / SAMPLES_FILE
    records, clean_bytes = read_samples(path)
    kept = complete_records(records, n, run_id, path)
    if len(kept) != len(records) or (path.is_file() and path.stat().st_size != clean_bytes):
        # drop the torn tail and the partly written problems before appending
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    done = {r["problem_id"] for r in kept}
    if done:
        print(
            f"resuming {path}: {len(done)} of {len(problems)} problems already done",
            file=sys.stderr,
        )
    per_chunk = max(1, chunk_size // n)
    session_start = time.perf_counter()
    bar = tqdm(
        total=len(problems),
        initial=len(done),
        desc=f"eval {system.name} on {task.name}",
        unit="problem",
        disable=not progress,
    )
    try:
        with open(path, "a") as f:
            for start in range(0, len(problems), per_chunk):
                chunk = [p for p in problems[start : start + per_chunk] if p.id not in done]
                if not chunk:
                    continue
                t0 = time.perf_counter()
                chunk_sampling = SamplingParams(
                    **{**sampling.__dict__, "seed": chunk_seed(sampling_base, start)}
                )
                samples = system.run(task, chunk, n, chunk_sampling)
                flat = [(p, j, s) for p, ss in zip(chunk, samples) for j, s in enumerate(ss)]
                verdicts = task.grade([p for p, _, _ in flat], [s.completion for _, _, s in flat])
                share = (time.perf_counter() - t0) / len(flat)
                lines = "".join(
                    json.dumps(_record(run_id, system.name, p, j, s, v, task.kind == "math", share))
                    + "\n"
                    for (p, j, s), v in zip(flat, verdicts)
                )
                f.write(
                    lines
                )  # one write per chunk, then fsync: a kill leaves whole chunks or a torn tail
                f.flush()
                os.fsync(f.fileno())
                bar.update(len(chunk))
    finally:
        bar.close()
    final, _ = read_samples(path)
    final = complete_records(final, n, run_id, path)
    stats = summarize_records(final, ks, n_boot=n_boot, seed=seed)
    payload = {
        "system": system.name,
        "task": task.name,
        "task_version": task.version,
        "run_id": run_id,
        "n_samples_per_problem": n,
        "k": list(ks),
        "sampling": sampling.__dict__ | {"seed": sampling_base, "stop": list(sampling.stop)},
        **stats,
        "session_wall_s": time.perf_counter() - session_start,
        "samples_file": SAMPLES_FILE,
        **(meta or {}),
    }
    write_results(out_dir / SUMMARY_FILE, payload, config=config, seed=seed)
    return payload


# ----------------------------------------------------------------------------- from a config


def task_from_config(config: dict, name: str) -> Task:
    """Build task ``name`` from its config row, passing the grading settings it accepts."""
    try:
        row = get_task_row(config, name)
    except ConfigError:
        row = {"name": name, "params": {}}
    params = dict(row.get("params") or {})
    grading = {
        f"grading_{k}": v
        for k, v in config.get("grading", {}).items()
        if f"grading_{k}" not in params
    }
    try:
        return get_task(name, **params, **grading)
    except TypeError:  # a task without grading knobs (e.g. graded in a sandbox with its own limits)
        return get_task(name, **params)


def minimal_config(
    task: str, model_a: str | None, model_b: str | None, family: str = "cli"
) -> dict:
    """A validated config for the explicit CLI form (no --config): schema defaults throughout."""
    a = model_a or model_b
    b = model_b or model_a
    if a is None:
        raise ConfigError(
            "without --config, give the models: --model PATH, or --drafter PATH --reader PATH"
        )
    return validate_config(
        {
            "families": [{"name": family, "model_a": {"model": a}, "model_b": {"model": b}}],
            "tasks": [{"name": task, "params": {}}],
            "methods": ["base"],
        }
    )


def model_fingerprint(name_or_path: str) -> str:
    """A cheap identity of a local model folder (file names, sizes, mtimes), so that a resumed
    evaluation never mixes samples of a model with those of a retrained one at the same path;
    a hub id is its own identity."""
    path = Path(name_or_path)
    if not path.is_dir():
        return name_or_path
    files = sorted(
        (f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in path.iterdir() if f.is_file()
    )
    return f"{name_or_path}@{config_hash(files)}"


def resolve_kind(system: str, model: str | None, drafter: str | None, reader: str | None) -> str:
    """single, cascade or moa for a ``--system`` value and the model flags given."""
    if system in KINDS:
        return system
    if system in UNTRAINED and not (model or drafter or reader):
        return UNTRAINED[system]
    if model and not (drafter or reader):
        return "single"
    if drafter and reader and not model:
        return "cascade"
    raise ValueError(
        f"system {system!r}: pass --model PATH (one model) or --drafter PATH --reader PATH (a cascade); "
        f"without model flags only {sorted(UNTRAINED)} resolve from the family row"
    )


def build_system(
    config: dict,
    family: str,
    system: str,
    *,
    model: str | None = None,
    drafter: str | None = None,
    reader: str | None = None,
    rows: dict[str, str] | None = None,
    backend: str = "hf",
    engine_kwargs: dict | None = None,
) -> tuple[System, dict]:
    """The system to evaluate and an identity dict (what models it runs) for the run id."""
    from agon.engines import load_engine

    fam = get_family(config, family)
    kind = resolve_kind(system, model, drafter, reader)
    swapped = system.endswith("_rev")
    rows = {
        "model": "a",
        "drafter": "b" if swapped else "a",
        "reader": "a" if swapped else "b",
        **(rows or {}),
    }
    kw = {"batch_size": config["eval"]["batch_size"], **(engine_kwargs or {})}
    cache: dict[tuple[str, str], Any] = {}

    def engine(row: str, path: str | None):
        key = (row, path or fam[f"model_{row}"]["model"])
        if (
            key not in cache
        ):  # one engine per distinct model, e.g. MoA's A and a cascade's self-read
            cache[key] = load_engine(fam[f"model_{row}"], fam, backend, path=path, **kw)
        return cache[key]

    if kind == "single":
        sys_obj = single(engine(rows["model"], model))
        identity = {"model": model or fam[f"model_{rows['model']}"]["model"], "row": rows["model"]}
    elif kind == "cascade":
        sys_obj = cascade(
            engine(rows["drafter"], drafter), engine(rows["reader"], reader), fam["draft_view"]
        )
        identity = {
            "drafter": drafter or fam[f"model_{rows['drafter']}"]["model"],
            "reader": reader or fam[f"model_{rows['reader']}"]["model"],
            "rows": [rows["drafter"], rows["reader"]],
            "draft_view": fam["draft_view"],
        }
    else:
        from baselines.moa import moa

        m = config["moa"]
        sys_obj = moa(
            engine("a", drafter),
            engine("b", reader),
            layers=m["layers"],
            proposers=m["proposers"],
            aggregator=m["aggregator"],
            prompt=m["prompt"],
        )
        identity = {
            "a": drafter or fam["model_a"]["model"],
            "b": reader or fam["model_b"]["model"],
            "moa": m,
        }
    sys_obj.name = system
    identity["fingerprints"] = sorted({model_fingerprint(str(path)) for _, path in cache})
    identity["family_row"] = {k: v for k, v in fam.items() if k not in ("model_a", "model_b")} | {
        "personas": [fam["model_a"].get("system_prompt"), fam["model_b"].get("system_prompt")],
        "chat_template_kwargs": [
            fam["model_a"].get("chat_template_kwargs"),
            fam["model_b"].get("chat_template_kwargs"),
        ],
    }
    return sys_obj, identity


def evaluate_from_config(
    config: dict,
    family: str,
    task: str,
    system: str,
    out: str | Path,
    *,
    seed: int = 0,
    model: str | None = None,
    drafter: str | None = None,
    reader: str | None = None,
    rows: dict[str, str] | None = None,
    backend: str = "hf",
    engine_kwargs: dict | None = None,
    n_samples: int | None = None,
    max_problems: int | None = None,
    progress: bool = True,
) -> dict:
    """The ``agon eval`` path: build the system and task from ``config`` and :func:`evaluate`."""
    ev = config["eval"]
    fam = get_family(config, family)
    n = n_samples or ev["n_samples"]
    task_obj = task_from_config(config, task)
    sys_obj, identity = build_system(
        config,
        family,
        system,
        model=model,
        drafter=drafter,
        reader=reader,
        rows=rows,
        backend=backend,
        engine_kwargs=engine_kwargs,
    )
    try:
        problems = task_obj.problems(ev["split"])
        limit = max_problems or ev["max_problems"]
        problems = problems[:limit] if limit else problems
        sampling = SamplingParams(
            max_new_tokens=fam["max_new_tokens"],
            temperature=ev["temperature"],
            top_p=ev["top_p"],
            seed=seed,
        )
        return evaluate(
            sys_obj,
            task_obj,
            problems,
            out,
            n=n,
            ks=[k for k in ev["k"] if k <= n],
            sampling=sampling,
            chunk_size=ev["batch_size"],
            seed=seed,
            n_boot=ev["bootstrap"],
            config=config,
            identity=identity,
            progress=progress,
            meta={"family": family, "split": ev["split"], "backend": backend, "models": identity},
        )
    finally:
        sys_obj.close()
        task_obj.close()


# ----------------------------------------------------------------------------- CLI


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``agon eval``: evaluate one system on one task (see the module docstring)."""
    p = sub.add_parser(
        "eval", help="evaluate a system (single, cascade, moa or a table-1 column) on a task"
    )
    p.add_argument("--config", help="config YAML; without it, schema defaults and the models given")
    p.add_argument("--family", help="family row of the config (default: the first)")
    p.add_argument(
        "--task", required=True, help="task name (a row of the config, or any registered task)"
    )
    p.add_argument(
        "--system",
        required=True,
        help="single | cascade | moa, or a table-1 column (base, base_cascade, moa, grpo, agon, ...)",
    )
    p.add_argument("--model", help="model folder / hub id for a single-model system")
    p.add_argument("--drafter", help="drafter model for a cascade (model A for moa)")
    p.add_argument("--reader", help="reader model for a cascade (model B for moa)")
    for flag in ("model", "drafter", "reader"):
        p.add_argument(
            f"--{flag}-row",
            choices=["a", "b"],
            help=f"family row whose persona / template kwargs the {flag} uses",
        )
    p.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
    p.add_argument("--out", required=True, help="output folder: samples.jsonl and summary.json")
    p.add_argument(
        "--backend",
        choices=["hf", "vllm"],
        default="hf",
        help="generation engine (vllm: GPU, optional extra)",
    )
    p.add_argument(
        "--device", help="torch device for the hf backend (default: cuda if available, else cpu)"
    )
    p.add_argument("--n-samples", type=int, help="override eval.n_samples")
    p.add_argument("--max-problems", type=int, help="override eval.max_problems")
    p.add_argument(
        "--batch-size",
        type=int,
        help="override eval.batch_size (prompts per call; also the resume unit)",
    )
    p.add_argument("--max-new-tokens", type=int, help="override the family's max_new_tokens")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    try:
        if args.config:
            config = load_config(args.config)
        else:
            config = minimal_config(
                args.task, args.model or args.drafter, args.reader or args.model
            )
        family = args.family or config["families"][0]["name"]
        if args.batch_size:
            config["eval"]["batch_size"] = args.batch_size
        if args.max_new_tokens:
            get_family(config, family)["max_new_tokens"] = args.max_new_tokens
        rows = {
            k: v
            for k, v in (
                ("model", args.model_row),
                ("drafter", args.drafter_row),
                ("reader", args.reader_row),
            )
            if v
        }
        engine_kwargs = {"device": args.device} if args.device and args.backend == "hf" else {}
        summary = evaluate_from_config(
            config,
            family,
            args.task,
            args.system,
            args.out,
            seed=args.seed,
            model=args.model,
            drafter=args.drafter,
            reader=args.reader,
            rows=rows,
            backend=args.backend,
            engine_kwargs=engine_kwargs,
            n_samples=args.n_samples,
            max_problems=args.max_problems,
            progress=not args.no_progress,
        )
    except (ConfigError, ValueError, KeyError, RuntimeError) as err:
        print(f"agon eval: {err}")
        return 2
    keys = [k for k in summary if k.startswith("pass@") and not k.endswith(("_se", "_lo", "_hi"))]
    line = ", ".join(
        f"{k}={summary[k]:.4f} (se {summary[k + '_se']:.4f}, 95% CI [{summary[k + '_lo']:.4f}, {summary[k + '_hi']:.4f}])"
        for k in keys
    )
    print(
        f"{summary['system']} on {summary['task']}: {line}; mean tokens {summary['mean_total_tokens']:.1f}; "
        f"{summary['n_problems']} problems; wrote {Path(args.out) / SUMMARY_FILE}"
    )
    return 0
