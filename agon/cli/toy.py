"""`agon toy pretrain --config CONFIG --out DIR [--seed S] [--model pair|teacher]`: build the
toy base models. `agon toy habits --config CONFIG`: what their habits alone allow, before any
training (:func:`agon.toy.habits.habits_pass`).

Writes ``DIR/A`` and ``DIR/B`` (transformers model folders with the tokenizer and its chat
template) and ``DIR/report.json`` (the quality gates and timings, with provenance). This is
what the workflow's pretrain rule calls. ``--model teacher``, run after it on the same DIR,
trains the toy teacher (no mistake of its own; :mod:`agon.toy.teacher`) into ``DIR/teacher``
and gates it against A and B in ``DIR/teacher_report.json``.
"""

from __future__ import annotations

import argparse
import sys

from agon.config import ConfigError, load_config
from agon.toy.habits import habits_pass
from agon.toy.mistake import Mistake
from agon.toy.pretrain import make_tasks, pretrain
from agon.toy.teacher import pretrain_teacher


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
        "--seed",
        type=int,
        default=None,
        help="base seed (default: toy.seed of the config; the teacher: the pair's)",
    )
    pre.add_argument(
        "--model",
        choices=("pair", "teacher"),
        default="pair",
        help="pair: the base models A and B (default); teacher: the toy teacher, into a DIR "
        "that already holds the pair",
    )
    pre.set_defaults(func=_pretrain)
    hab = actions.add_parser(
        "habits",
        help="pass@1 of writers that make exactly A's and B's habits (sampled, greedy, and with "
        "only the rate-1 habits), on the gate split: a world's baselines before pretraining",
    )
    hab.add_argument("--config", required=True, help="agon config whose `toy` section is read")
    hab.add_argument("--draws", type=int, default=50, help="sampled draws per problem (50)")
    hab.set_defaults(func=_habits)


def _config(path: str) -> dict | None:
    """The loaded config, or None with the reason printed (the action then exits 2)."""
    try:
        return load_config(path)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return None


def _pretrain(args: argparse.Namespace) -> int:
    config = _config(args.config)
    if config is None:
        return 2
    if getattr(args, "model", "pair") == "teacher":
        try:
            report = pretrain_teacher(config, args.out, seed=args.seed)
        except (FileNotFoundError, ValueError) as err:
            print(err, file=sys.stderr)
            return 2
        return 0 if report["all_gates_pass"] or not config["toy"]["gates"]["strict"] else 1

    report = pretrain(config, args.out, seed=args.seed)
    return 0 if report["all_gates_pass"] or not config["toy"]["gates"]["strict"] else 1


def _habits(args: argparse.Namespace) -> int:
    config = _config(args.config)
    if config is None:
        return 2
    cfg = config["toy"]
    rows = {r["name"]: dict(r.get("params", {})) for r in config["tasks"]}
    g = cfg["gates"]
    print(f"pass@1 (%) of each model's habits alone on {g['split']} (agon toy habits)")
    for name, task in make_tasks(rows).items():
        problems = task.problems(g["split"])[: g["max_problems"]]
        for role in ("A", "B"):
            m = Mistake.from_config(cfg["models"][role]["mistake"])
            r = habits_pass(task, problems, m, args.draws)
            print(
                f"  {name:8s} {role}  sampled {100 * r['sampled']:5.1f}  greedy "
                f"{100 * r['greedy']:5.1f}  rate-1 habits only {100 * r['ceiling']:5.1f}"
                f"  (n={len(problems)})"
            )
    return 0
