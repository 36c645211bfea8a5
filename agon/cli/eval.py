"""`agon eval`: evaluate one system on one task, in two forms::

    agon eval --system cascade --drafter PATH --reader PATH --task arith --out DIR
    agon eval --config C --family F --task T --system base_cascade --seed 0 --out DIR

Systems: a system kind (``single``, ``cascade``, ``moa``, any name in
:data:`agon.registry.SYSTEM_KINDS`) or a table-1 column. Untrained columns resolve from the
family row: ``base`` = single(A), ``base_cascade`` = cascade(A, B), ``moa`` = moa(A, B).
Trained columns (``grpo``, ``agon``, ...) name their model folders with ``--model`` (a single
model) or ``--drafter/--reader`` (a cascade); each policy keeps its row's persona and
chat-template kwargs (``--*-row a|b``; a name ending in ``_rev`` swaps them). Writes
``DIR/samples.jsonl`` and ``DIR/summary.json`` (:mod:`agon.evaluation`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agon.config import ConfigError, get_family, load_config
from agon.evaluation.from_config import evaluate_from_config, minimal_config
from agon.evaluation.runner import SUMMARY_FILE


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``agon eval``: evaluate one system on one task (see the module docstring)."""
    p = sub.add_parser(
        "eval", help="evaluate a system (single, cascade, moa or a table-1 column) on a task"
    )
    p.add_argument("--config", help="config YAML; without it, schema defaults and the models given")
    p.add_argument("--family", help="family row of the config (default: the first)")
    p.add_argument(
        "--task", required=True, help="task name (a row of the config, or any registered task)"
    )
    p.add_argument(
        "--system",
        required=True,
        help="single | cascade | moa, or a table-1 column (base, base_cascade, grpo, agon, ...)",
    )
    p.add_argument("--model", help="model folder / hub id for a single-model system")
    p.add_argument("--drafter", help="drafter model for a cascade (model A for moa)")
    p.add_argument("--reader", help="reader model for a cascade (model B for moa)")
    for flag in ("model", "drafter", "reader"):
        p.add_argument(
            f"--{flag}-row",
            choices=["a", "b"],
            help=f"family row whose persona / template kwargs the {flag} uses",
        )
    p.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
    p.add_argument("--out", required=True, help="output folder: samples.jsonl and summary.json")
    p.add_argument(
        "--backend",
        choices=["hf", "vllm"],
        default="hf",
        help="generation engine (vllm: GPU, optional extra)",
    )
    p.add_argument(
        "--device", help="torch device for the hf backend (default: cuda if available, else cpu)"
    )
    p.add_argument("--n-samples", type=int, help="override eval.n_samples")
    p.add_argument("--max-problems", type=int, help="override eval.max_problems")
    p.add_argument(
        "--batch-size",
        type=int,
        help="override eval.batch_size (prompts per call; also the resume unit)",
    )
    p.add_argument("--max-new-tokens", type=int, help="override the family's max_new_tokens")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    try:
        if args.config:
            config = load_config(args.config)
        else:
            config = minimal_config(
                args.task, args.model or args.drafter, args.reader or args.model
            )
        family = args.family or config["families"][0]["name"]
        if args.batch_size:
            config["eval"]["batch_size"] = args.batch_size
        if args.max_new_tokens:
            get_family(config, family)["max_new_tokens"] = args.max_new_tokens
        rows = {
            k: v
            for k, v in (
                ("model", args.model_row),
                ("drafter", args.drafter_row),
                ("reader", args.reader_row),
            )
            if v
        }
        engine_kwargs = {"device": args.device} if args.device and args.backend == "hf" else {}
        summary = evaluate_from_config(
            config,
            family,
            args.task,
            args.system,
            args.out,
            seed=args.seed,
            model=args.model,
            drafter=args.drafter,
            reader=args.reader,
            rows=rows,
            backend=args.backend,
            engine_kwargs=engine_kwargs,
            n_samples=args.n_samples,
            max_problems=args.max_problems,
            progress=not args.no_progress,
        )
    except (ConfigError, ValueError, KeyError, RuntimeError) as err:
        print(f"agon eval: {err}")
        return 2
    keys = [k for k in summary if k.startswith("pass@") and not k.endswith(("_se", "_lo", "_hi"))]
    line = ", ".join(
        f"{k}={summary[k]:.4f} (se {summary[k + '_se']:.4f}, 95% CI [{summary[k + '_lo']:.4f}, "
        f"{summary[k + '_hi']:.4f}])"
        for k in keys
    )
    print(
        f"{summary['system']} on {summary['task']}: {line}; mean tokens "
        f"{summary['mean_total_tokens']:.1f}; "
        f"{summary['n_problems']} problems; wrote {Path(args.out) / SUMMARY_FILE}"
    )
    return 0
