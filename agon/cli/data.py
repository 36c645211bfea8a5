"""`agon data split`: materialise a task's seeded train/test split, with its content hashes."""

from __future__ import annotations

import argparse

from agon.config import get_task_row, load_config
from agon.provenance import write_results
from agon.tasks import get_task


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon data`."""
    p = sub.add_parser("data", help="data sets: write a task's split manifest")
    p.add_argument("action", choices=["split"])
    p.add_argument("--config", required=True, help="agon config YAML")
    p.add_argument("--task", required=True, help="task name (a row of the config's tasks)")
    p.add_argument("--out", required=True, help="where to write the split JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:

    config = load_config(args.config)
    row = get_task_row(config, args.task)
    task = get_task(row["name"], **row["params"])
    manifest = task.split_manifest()
    write_results(args.out, manifest, config=row)
    print(f"wrote {args.out}: " + ", ".join(f"{k}={v}" for k, v in manifest["sizes"].items()))
    return 0
