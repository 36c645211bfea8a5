"""`agon train`: train one (family, task, method, seed) cell of table 1.

    agon train --config config/config.yaml --family toy --task arith --method agon --out DIR

writes ``DIR/A`` and ``DIR/B`` (final model folders with tokenizer), ``DIR/metrics.jsonl`` (one
row per step), ``DIR/summary.json`` (with provenance) and ``DIR/checkpoints/``. The method is a
trainer's name in :data:`agon.registry.TRAINERS`: ``agon`` trains the pair with the duel
(:mod:`agon.duel`), ``grpo`` trains A and B each alone with TRL's GRPOTrainer
(``baselines/grpo``), so that ``grpo_cascade`` can be evaluated. Every setting is validated
(config schema, then the trainer's own checks) before any model loads; a rerun of a killed job
resumes from its last complete checkpoint (:mod:`agon.training.run`).
"""

from __future__ import annotations

import argparse
import logging

from agon.config import ConfigError
from agon.registry import TRAINERS
from agon.training.run import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon train`."""
    p = sub.add_parser("train", help="train a method (agon duel, GRPO, ...) on one family x task")
    p.add_argument("--config", required=True, help="YAML config (config/config.yaml, ...)")
    p.add_argument("--family", required=True, help="family row name")
    p.add_argument("--task", required=True, help="task row name")
    p.add_argument("--method", required=True, choices=TRAINERS.names())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out", required=True, help="output folder (A/, B/, metrics.jsonl, summary.json, ...)"
    )
    p.add_argument("--steps", type=int, default=None, help="override train.steps (smoke runs)")
    p.add_argument(
        "--match-run",
        default=None,
        help="the reference (agon) run's summary.json whose per-model spend a budget-matched "
        "method (grpo) trains to (train.budget)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.threads:
        # lazy: torch: off `agon --help`, which imports this module to build its parser
        import torch

        torch.set_num_threads(args.threads)
    try:
        payload = run(
            args.config,
            args.family,
            args.task,
            args.method,
            args.seed,
            args.out,
            steps=args.steps,
            match_run=args.match_run,
        )
    except ConfigError as err:
        print(f"agon train: {err}")
        return 2
    print(f"[agon train] done: {args.out} ({payload['steps']} steps, {payload['wall_s']:.0f}s)")
    return 0
