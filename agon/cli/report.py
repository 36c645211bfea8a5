"""`agon report --config C`: table 1 (CSV + Markdown, with provenance) and the figures;
`agon report --config C --ablations`: the ablations table (CSV + Markdown, with provenance);
`agon report --config C --related`: the related methods' table and its compute figure;
`agon report --config C --control`: the positive control's table;
`agon report --config C --regime`: table 1's baselines against the regime (results/regime.csv);
`agon report --config C --budget`: table 1's trained systems against training budget;
`agon report --docs [--results DIR] [--out PATH]`: docs/results.md, every published table with
its provenance (the config, default config/config.yaml, gives DIR and the commands)."""

from __future__ import annotations

import argparse

from agon.config import load_config
from agon.report.ablations import build_ablations_report
from agon.report.budget_curve import build_budget_report
from agon.report.control import build_control_report
from agon.report.control_measures import TABLES
from agon.report.docs import DEFAULT_CONFIG, DEFAULT_OUT, write_results_page
from agon.report.regime import build_regime_report
from agon.report.related import build_related_report
from agon.report.table1 import build_report
from agon.results import Layout


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon report`."""
    p = sub.add_parser("report", help="table 1 (CSV + Markdown) and the paper figures")
    p.add_argument(
        "--config",
        default=None,
        help="agon config YAML (the one the results were made with); required, apart from "
        f"--docs (default {DEFAULT_CONFIG})",
    )
    p.add_argument(
        "--figures",
        default=None,
        help="folder for the PNG and PDF figures (default: the config's figures_dir)",
    )
    p.add_argument(
        "--smooth", type=int, default=5, help="steps in the moving average of duel win rates"
    )
    p.add_argument(
        "--ablations",
        action="store_true",
        help="write results/ablations.csv and .md (the config's ablations section) instead",
    )
    p.add_argument(
        "--related",
        action="store_true",
        help="write results/related.csv and .md (the config's related section) and its figure",
    )
    p.add_argument(
        "--control",
        nargs="?",
        const="control",
        default=None,
        choices=TABLES,
        help="write a positive-control table (the control section): control (arm 1, the "
        "default), control_pilot (its pilot) or control_curriculum (arm 2)",
    )
    p.add_argument(
        "--budget",
        action="store_true",
        help="write results/budget.csv and .md: table 1's trained systems at each multiple of "
        "its training budget (the config's budget section), and the figure",
    )
    p.add_argument(
        "--regime",
        action="store_true",
        help="write results/regime.csv and .md: table 1's baselines on the regime's split "
        "against its criteria (the config's regime section)",
    )
    p.add_argument(
        "--docs",
        action="store_true",
        help=f"write {DEFAULT_OUT}: every published table's Markdown with its provenance (commit, "
        "config hash, machine, wall time, the command that regenerates it), a missing one "
        "listed as not generated, and the benchmarks",
    )
    p.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="with --docs: the folder the tables are read from (default: the config's out_dir)",
    )
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="PATH",
        help=f"with --docs: the page to write (default {DEFAULT_OUT})",
    )
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    reports = (
        args.ablations + args.related + args.regime + args.budget + (args.control is not None)
    ) + args.docs
    if reports > 1:
        raise SystemExit(
            "agon report: --ablations, --related, --regime, --budget, --control and --docs are "
            "reports; pass one"
        )
    if args.docs:
        config_path = args.config or DEFAULT_CONFIG
        results = args.results or load_config(config_path)["out_dir"]
        return _print(write_results_page(results, args.out, config_path))
    if args.config is None:
        raise SystemExit("agon report: --config is required (apart from --docs)")
    config = load_config(args.config)
    config.pop("resources", None)  # resources never change results (same as the workflow)
    layout = Layout(config["out_dir"], args.figures or config["figures_dir"])
    if args.regime:
        written = build_regime_report(config, layout)
    elif args.budget:
        written = build_budget_report(config, layout)
    elif args.control:
        written = build_control_report(config, layout, args.control)
    elif args.ablations:
        written = build_ablations_report(config, layout)
    elif args.related:
        written = build_related_report(config, layout)
    else:
        written = build_report(config, layout, smooth=args.smooth)
    return _print(written)


def _print(written: dict) -> int:
    for kind, paths in written.items():
        for p in paths:
            print(f"wrote {kind}: {p}")
    return 0
