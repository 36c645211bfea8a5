"""`agon plan --config C`: what every job of a config costs before the first one runs (tokens,
FLOPs, memory per GPU, GPU-hours), with the jobs that would not fit flagged (agon.plan)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agon.config import ConfigError, load_config
from agon.plan.dims import PlanError
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
    p.add_argument(
        "--jobs", action="store_true", help="list every job (with its seed and flags), not groups"
    )
    p.add_argument(
        "--fsdp",
        action="store_true",
        help="price training jobs launched by accelerate with FSDP2 (config/accelerate/"
        "fsdp2.yaml): one process per GPU of resources.train.gpus, each model sharded",
    )
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
        run = dict(lengths_from=args.lengths_from, measurements_dir=args.throughput, fsdp=args.fsdp)
        result = plan(config, args.target, args.gpu, **run)
        kinds = {args.gpu: result}
        if GPU_KINDS[args.gpu].memory_bytes:  # the same target on every GPU kind, for its totals
            for kind in (k for k, v in GPU_KINDS.items() if v.memory_bytes and k != args.gpu):
                kinds[kind] = plan(config, args.target, kind, **run)
    except (ConfigError, PlanError) as err:
        print(f"agon plan: {err}", file=sys.stderr)
        return 2
    if args.csv:
        atomic_write_text(Path(args.csv), to_csv(result))
    text = dumps(result, kinds) if args.json else to_text(result, kinds, jobs=args.jobs)
    print(text, end="")
    return 0
