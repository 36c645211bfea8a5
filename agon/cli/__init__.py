"""The `agon` command line.

Each subcommand lives in its own module of this package (``agon/cli/<name>.py``), which
exposes ``add_parser(subparsers)`` and only parses arguments: the work is done by the library.
The modules are imported lazily so that `agon grade` does not pay for torch, and a new
subcommand is one line in ``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from agon.logs import drop_known_noise

# name -> module exposing add_parser(subparsers) that sets `func` on its parser
SUBCOMMANDS: dict[str, str] = {
    "config": "agon.cli.config",
    "grade": "agon.cli.grade",
    "data": "agon.cli.data",
    "sandbox": "agon.cli.sandbox",
    "toy": "agon.cli.toy",
    "model": "agon.cli.model",
    "eval": "agon.cli.eval",
    "train": "agon.cli.train",
    "report": "agon.cli.report",
    "plan": "agon.cli.plan",
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """Build the parser, importing only the subcommand named in ``argv`` (all for --help)."""
    parser = argparse.ArgumentParser(prog="agon", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    for name, module in SUBCOMMANDS.items():
        if wanted is not None and name != wanted:
            sub.add_parser(name, help=f"(see `agon {name} --help`)")
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name and (err.name == module or module.startswith(err.name + ".")):
                continue  # subcommand not built into this version
            raise
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agon` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    drop_known_noise()  # before any subcommand imports transformers (and with it torchao)
    args = build_parser(argv).parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
