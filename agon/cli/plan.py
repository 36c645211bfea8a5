"""`agon plan --config C`: what every job of a config costs before the first one runs (tokens,
FLOPs, memory per GPU, GPU-hours), with the jobs that would not fit flagged (agon.plan)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agon.config import ConfigError, load_config
from agon.plan.errors import PlanError
from agon.plan.hardware import GPU_KINDS
from agon.plan.jobs import TARGETS
from agon.plan.planner import plan
from agon.plan.render import dumps, to_csv, to_text
from agon.provenance import atomic_write_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon plan`."""
    p = sub.add_parser("plan", help="the bill of a config: tokens, FLOPs, memory, GPU-hours")
    p.add_argument("--config", required=True, help="agon config YAML, e.g. config/paper.yaml")
    p.add_argument(
        "--target",
        default="all",
        help=f"results/table1.csv, results/related.csv, results/ablations.csv or all "
        f"(the three; default); also {', '.join(TARGETS)}",
    )
    p.add_argument(
        "--gpu",
        default="h200",
        help=f"the GPU kind the GPU jobs run on: {', '.join(GPU_KINDS)} (default h200)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--csv", metavar="FILE", help="also write one row per job to FILE")
    p.add_argument(
        "--lengths-from",
        metavar="DIR",
        help="an out_dir with runs of these families: their measured mean lengths replace "
        "the caps (metrics.jsonl, eval summaries, split.json)",
    )
    p.add_argument(
        "--throughput",
        metavar="DIR",
        help="folder of throughput measurements (default: bench/throughput)",
    )
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        result = plan(config, args.target, args.gpu, args.lengths_from, args.throughput)
    except (ConfigError, PlanError) as err:
        print(f"agon plan: {err}", file=sys.stderr)
        return 2
    if args.csv:
        atomic_write_text(Path(args.csv), to_csv(result))
    print(dumps(result) if args.json else to_text(result), end="")
    return 0
