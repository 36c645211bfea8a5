"""`agon config check FILE`: validate a config and print it with defaults filled in."""

from __future__ import annotations

import argparse

import yaml

from agon.config import ConfigError, load_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon config`."""
    p = sub.add_parser("config", help="validate a config file")
    p.add_argument("action", choices=["check"])
    p.add_argument("path", help="YAML config, e.g. config/config.yaml")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.path)
    except ConfigError as err:
        print(err)
        return 2
    print(yaml.safe_dump(config, sort_keys=False))
    return 0
