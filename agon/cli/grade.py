"""`agon grade math`: re-grade completions and print one JSON verdict per item.

agon grade math --gold '\\frac12' --completion 'so \\boxed{0.5}'
agon grade math --jsonl FILE        # lines of {"gold": ..., "completion": ...}
"""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon grade`."""
    p = sub.add_parser("grade", help="grade completions (math: math-verify in a hard-limited pool)")
    p.add_argument("kind", choices=["math"], help="which grader")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--completion", help="one completion (with --gold)")
    src.add_argument(
        "--jsonl", help='file of {"gold": ..., "completion": ...} lines; "-" for stdin'
    )
    p.add_argument("--gold", help="the gold answer (with --completion)")
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="hard wall-clock limit per item, seconds (default 5)",
    )
    p.add_argument(
        "--workers", type=int, default=0, help="worker processes (default: one per core)"
    )
    p.set_defaults(func=_run)


def _read_jsonl(path: str) -> tuple[list[str], list[str]]:
    golds, comps = [], []
    stream = sys.stdin if path == "-" else open(path)
    with stream:
        for lineno, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                golds.append(str(row["gold"]))
                comps.append(str(row["completion"]))
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise SystemExit(
                    f"{path}:{lineno}: expected a JSON object with 'gold' and 'completion' ({err})"
                ) from None
    return golds, comps


def _run(args: argparse.Namespace) -> int:
    from agon.grading.math import MathGrader

    if args.completion is not None:
        if args.gold is None:
            raise SystemExit("--completion needs --gold")
        golds, comps = [args.gold], [args.completion]
    else:
        golds, comps = _read_jsonl(args.jsonl)
    with MathGrader(timeout_s=args.timeout, workers=args.workers) as grader:
        for verdict in grader.grade(golds, comps):
            print(json.dumps(verdict.to_dict()), flush=True)
    return 0
