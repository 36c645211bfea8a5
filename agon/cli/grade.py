"""`agon grade`: re-grade completions and print one JSON verdict per item.

agon grade math --gold '\\frac12' --completion 'so \\boxed{0.5}'
agon grade math --jsonl FILE        # lines of {"gold": ..., "completion": ...}
agon grade code --task taco --jsonl FILE [--split test] [--param max_tests=20]
                                    # lines of a source row + "completion"
"""

from __future__ import annotations

import argparse
import json
import sys

from agon.config import load_config
from agon.grading.math import MathGrader
from agon.tasks import get_task, task_from_config
from agon.tasks.code import CodeTask


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon grade`."""
    p = sub.add_parser(
        "grade",
        help="grade completions (math: math-verify in a hard-limited pool; code: the sandbox)",
    )
    p.add_argument("kind", choices=["math", "code"], help="which grader")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--completion", help="one completion (math, with --gold)")
    src.add_argument(
        "--jsonl",
        help='file of lines, "-" for stdin: math {"gold": ..., "completion": ...}; code a row '
        'of the task\'s source (its own schema, as the loader reads it) plus "completion"',
    )
    p.add_argument("--gold", help="the gold answer (with --completion)")
    p.add_argument("--task", help="code: the task whose loader and grader to use (e.g. taco)")
    p.add_argument(
        "--split",
        default="test",
        help="code: the source split the rows come from, in the source's order (default test; "
        "TACO's special-judge list is by position in its test split)",
    )
    p.add_argument("--config", help="code: take the task's params from this config")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="code: a task param (VALUE read as JSON, else as a string); repeatable",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="math: hard wall-clock limit per item, seconds (default 5)",
    )
    p.add_argument(
        "--workers", type=int, default=0, help="worker processes (default: one per core)"
    )
    p.set_defaults(func=_run)


def _read_jsonl(path: str, fields: tuple[str, ...]) -> list[dict]:
    rows = []
    stream = sys.stdin if path == "-" else open(path)
    with stream:
        for lineno, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                missing = [f for f in fields if f not in row]
                if missing:
                    raise KeyError(", ".join(missing))
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise SystemExit(
                    f"{path}:{lineno}: expected a JSON object with {list(fields)} ({err})"
                ) from None
            rows.append(row)
    return rows


def _params(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--param {pair!r}: expected KEY=VALUE")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params


def _run(args: argparse.Namespace) -> int:
    if args.kind == "code":
        return _run_code(args)

    if args.completion is not None:
        if args.gold is None:
            raise SystemExit("--completion needs --gold")
        golds, comps = [args.gold], [args.completion]
    else:
        rows = _read_jsonl(args.jsonl, ("gold", "completion"))
        golds, comps = [str(r["gold"]) for r in rows], [str(r["completion"]) for r in rows]
    with MathGrader(timeout_s=args.timeout, workers=args.workers) as grader:
        for verdict in grader.grade(golds, comps):
            print(json.dumps(verdict.to_dict()), flush=True)
    return 0


def _run_code(args: argparse.Namespace) -> int:

    if args.task is None or args.jsonl is None:
        raise SystemExit("agon grade code needs --task and --jsonl")
    params = _params(args.param)
    if args.workers:
        params["grading_workers"] = args.workers
    if args.config:
        config = load_config(args.config)
        row = next((r for r in config.get("tasks") or [] if r.get("name") == args.task), None)
        if row is not None:
            row["params"] = {**(row.get("params") or {}), **params}
        else:
            config.setdefault("tasks", []).append({"name": args.task, "params": params})
        task = task_from_config(config, args.task)
    else:
        task = get_task(args.task, **params)
    if not isinstance(task, CodeTask):
        raise SystemExit(f"task {args.task!r} is not a code task graded from source rows")
    rows = _read_jsonl(args.jsonl, ("completion",))
    try:
        graded = task.grade_rows(
            [{k: v for k, v in r.items() if k != "completion"} for r in rows],
            [str(r["completion"]) for r in rows],
            args.split,
        )
    finally:
        task.close()
    for pid, verdict in graded:
        print(json.dumps({"id": pid, **verdict.to_dict()}), flush=True)
    return 0
