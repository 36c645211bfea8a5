"""`agon train`: train one (family, task, method, seed) cell of table 1.

    agon train --config config/config.yaml --family toy --task arith --method agon --seed 0 --out DIR

writes ``DIR/A`` and ``DIR/B`` (final model folders with tokenizer), ``DIR/metrics.jsonl`` (one
row per step), ``DIR/summary.json`` (with provenance) and ``DIR/checkpoints/``. ``--method
agon`` trains the pair with the duel trainer (:mod:`agon.duel`); ``--method grpo`` trains A and
B each alone with TRL's GRPOTrainer (:mod:`baselines.grpo`), so that ``grpo_cascade`` can be
evaluated. Every setting is validated (config schema, then the trainer's own checks) before
any model loads; a rerun of a killed job resumes from its last complete checkpoint.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from agon.config import ConfigError, get_family, get_task_row, load_config

METHODS = ("agon", "grpo")
log = logging.getLogger("agon.train")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon train`."""
    p = sub.add_parser(
        "train", help="train a method (agon duel or GRPO baseline) on one family x task"
    )
    p.add_argument(
        "--config", required=True, help="YAML config (config/config.yaml, config/paper.yaml)"
    )
    p.add_argument("--family", required=True, help="family row name")
    p.add_argument("--task", required=True, help="task row name")
    p.add_argument("--method", required=True, choices=METHODS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out",
        required=True,
        help="output folder (A/, B/, metrics.jsonl, summary.json, checkpoints/)",
    )
    p.add_argument("--steps", type=int, default=None, help="override train.steps (smoke runs)")
    p.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's choice)"
    )
    p.set_defaults(func=_cli)


def prepare(
    config_path: str | Path,
    family: str,
    task: str,
    method: str,
    seed: int,
    steps: int | None = None,
) -> tuple[dict, dict, Any]:
    """Load and check everything that can be checked before a model loads.

    Returns (config, family row, settings): :class:`agon.duel.DuelSettings` for agon,
    :class:`baselines.grpo.GRPOSettings` for grpo. Raises ConfigError / ValueError with a
    message naming the bad field.
    """
    overrides = {"train": {"steps": steps}} if steps else None
    config = load_config(config_path, overrides)
    fam = get_family(config, family)
    get_task_row(config, task)
    if method not in METHODS:
        raise ConfigError(f"--method {method!r}: expected one of {METHODS}")
    try:
        if method == "agon":
            from agon.duel import DuelSettings

            settings = DuelSettings.from_config(config, fam, mode="duel", seed=seed)
        else:
            from baselines.grpo import GRPOSettings

            settings = GRPOSettings.from_config(config, fam, seed=seed)
    except ValueError as err:
        raise ConfigError(f"{config_path}: {err}") from None
    if config["train"]["backend"] == "vllm" and method == "agon":
        _check_vllm()
    return config, fam, settings


def _check_vllm() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise ConfigError(
            "train.backend is vllm but vLLM is not installed; `pip install agon[gpu]` on a GPU machine, or use backend: hf"
        ) from None


def make_accelerator() -> Any:
    """An accelerate.Accelerator when launched with several processes (`accelerate launch`), else None.

    One Accelerator prepares both policies (config/accelerate/fsdp2.yaml shards each with
    FSDP2). Schedulers step once per optimizer step, not once per process.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import Accelerator

    return Accelerator(step_scheduler_with_optimizer=False)


def _save_model(model: Any, tokenizer: Any, path: Path, state_dict: dict | None = None) -> None:
    """Save a model folder atomically (temp folder + rename), so a half-written one never exists."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, state_dict=state_dict)
    tokenizer.save_pretrained(tmp)
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp, path)


def train_agon(config: dict, fam: dict, task_name: str, settings: Any, out: Path) -> dict:
    """The duel: policies A and B from the family row, trained together; returns the summary payload."""
    import torch

    from agon import duel
    from agon.duel_scale import rollout_engine
    from agon.engines.hf import load_model, load_tokenizer
    from agon.evaluate import task_from_config

    torch.manual_seed(settings.seed)
    task = task_from_config(config, task_name)
    accelerator = make_accelerator()
    policies, tokenizers = {}, {}
    for name in ("A", "B"):
        row = fam[f"model_{name.lower()}"]
        tok = load_tokenizer(row["model"], revision=row.get("revision"))
        model = load_model(row["model"], dtype=fam["dtype"], revision=row.get("revision"))
        engine = rollout_engine(config, fam, name.lower(), model, tok)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        policy = duel.make_policy(name, model, engine, settings, pad_token_id=pad)
        if (
            accelerator is not None
        ):  # shard / replicate each model with its own optimizer (FSDP2 or DDP)
            policy.model, policy.optimizer, policy.scheduler = accelerator.prepare(
                policy.model, policy.optimizer, policy.scheduler
            )
            policy.accelerator = accelerator
        policies[name] = policy
        tokenizers[name] = tok
    t0 = time.time()
    try:
        rows = duel.train(task, policies, settings, out, on_step=_print_step)
    finally:
        task.close()
    for name, pol in policies.items():
        if accelerator is None:
            _save_model(pol.model, tokenizers[name], out / name)
        else:  # gather the full weights (FSDP2 shards them), save once
            state = accelerator.get_state_dict(pol.model)
            if accelerator.is_main_process:
                _save_model(
                    accelerator.unwrap_model(pol.model),
                    tokenizers[name],
                    out / name,
                    state_dict=state,
                )
            accelerator.wait_for_everyone()
    return summarize_metrics(out / "metrics.jsonl") | {
        "wall_s_this_run": time.time() - t0,
        "steps_this_run": len(rows),
    }


def _print_step(row: dict) -> None:
    keys = [
        "A/drafter/correct",
        "A/reader/correct",
        "B/drafter/correct",
        "B/reader/correct",
        "duel/reader_wins",
        "tokens_generated",
        "eval/hard_pass@1/A",
        "eval/hard_pass@1/B",
    ]
    print(
        f"[agon train] step {row['step']}: "
        + " ".join(f"{k}={row[k]:.3g}" for k in keys if k in row),
        flush=True,
    )


def summarize_metrics(path: Path) -> dict:
    """Totals and last values from metrics.jsonl: tokens generated per model, steps, skipped updates,
    and each model's last hard-split evaluation (after the last update, once the run is complete)."""
    from agon.train_eval import KEY, SECONDS_KEY, is_eval_only

    rows = (
        [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        if Path(path).exists()
        else []
    )
    out: dict[str, Any] = {"steps": sum(not is_eval_only(r) for r in rows)}
    for name in ("A", "B"):
        out[f"{name}/tokens_generated"] = sum(
            r.get(f"{name}/drafter/tokens", 0) + r.get(f"{name}/reader/tokens", 0) for r in rows
        )
        out[f"{name}/skipped_updates"] = sum(r.get(f"{name}/skipped", 0) for r in rows)
        evals = [r[KEY.format(model=name)] for r in rows if KEY.format(model=name) in r]
        if evals:
            out[f"{name}/last_hard_pass@1"] = evals[-1]
    out["tokens_generated"] = sum(r.get("tokens_generated", 0) for r in rows)
    out["train_time_s"] = sum(r.get("time/rollout_s", 0) + r.get("time/update_s", 0) for r in rows)
    out["eval_time_s"] = sum(r.get(SECONDS_KEY, 0) for r in rows)
    return out


def run(
    config_path: str | Path,
    family: str,
    task: str,
    method: str,
    seed: int,
    out: str | Path,
    steps: int | None = None,
) -> dict:
    """Prepare (fails fast), train, write DIR/A, DIR/B, metrics.jsonl and summary.json."""
    from agon.provenance import write_results

    config, fam, settings = prepare(config_path, family, task, method, seed, steps)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if method == "agon":
        payload = train_agon(config, fam, task, settings, out)
    else:
        from baselines.grpo import train_pair

        payload = train_pair(config, fam, task, settings, out)
    payload = {
        "method": method,
        "family": family,
        "task": task,
        "seed": seed,
        "wall_s": time.time() - t0,
        "settings": _jsonable(settings),
        **payload,
    }
    write_results(out / "summary.json", payload, config=config, seed=seed)
    return payload


def _jsonable(settings: Any) -> dict:
    import dataclasses

    return dataclasses.asdict(settings) if dataclasses.is_dataclass(settings) else dict(settings)


def _cli(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        payload = run(
            args.config, args.family, args.task, args.method, args.seed, args.out, steps=args.steps
        )
    except ConfigError as err:
        print(f"agon train: {err}")
        return 2
    print(f"[agon train] done: {args.out} ({payload['steps']} steps, {payload['wall_s']:.0f}s)")
    return 0
