"""`agon toy pretrain --config CONFIG --out DIR [--seed S]`: build the toy base models.

Writes ``DIR/A`` and ``DIR/B`` (transformers model folders with the tokenizer and its chat
template) and ``DIR/report.json`` (the quality gates and timings, with provenance). This is
what the workflow's pretrain rule calls.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon toy` and its `pretrain` action."""
    p = sub.add_parser("toy", help="the offline toy world: train the two base models from scratch")
    actions = p.add_subparsers(dest="toy_action", metavar="ACTION")
    actions.required = True
    pre = actions.add_parser(
        "pretrain", help="SFT of toy base models A and B, then the quality gates"
    )
    pre.add_argument(
        "--config",
        required=True,
        help="agon config whose `toy` section and arith/toycode task rows are used",
    )
    pre.add_argument("--out", required=True, help="output folder: DIR/A, DIR/B, DIR/report.json")
    pre.add_argument(
        "--seed", type=int, default=None, help="base seed (default: toy.seed of the config)"
    )
    pre.set_defaults(func=_pretrain)


def _pretrain(args: argparse.Namespace) -> int:
    from agon.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    from agon.toy.pretrain import pretrain

    report = pretrain(config, args.out, seed=args.seed)
    return 0 if report["all_gates_pass"] or not config["toy"]["gates"]["strict"] else 1
