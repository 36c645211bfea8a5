"""One training run of table 1: a (family, task, method, seed) cell, from config to summary.

:func:`run` checks everything that can be checked before a model loads (config schema, then
the trainer's settings), trains through the trainer registered under the method's name
(:data:`agon.registry.TRAINERS`: the duel here, GRPO in ``baselines/grpo``), and writes
``summary.json`` with provenance. Every trainer writes ``OUT/A`` and ``OUT/B`` (final model
folders), ``OUT/metrics.jsonl`` (keys: :mod:`agon.training.metrics`) and its resumable state
under ``OUT/checkpoints/``; a rerun of a killed job resumes from the last complete checkpoint.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from agon.config import ConfigError, get_family, get_task_row, load_config
from agon.registry import TRAINERS, Trainer
from agon.training import metrics as mk
from agon.training.settings import DuelSettings

log = logging.getLogger("agon.train")


def prepare(
    config_path: str | Path,
    family: str,
    task: str,
    method: str,
    seed: int,
    steps: int | None = None,
    match_run: str | Path | None = None,
) -> tuple[dict, dict, Any]:
    """Load and check everything that can be checked before a model loads.

    ``match_run``: the reference run's ``summary.json`` whose per-model spend a
    budget-matched trainer (:data:`agon.methods.BUDGET_MATCHED`) runs to
    (:mod:`agon.training.budget`). Returns (config, family row, the trainer's settings).
    Raises ConfigError naming the bad field.
    """
    overrides = {"train": {"steps": steps}} if steps else None
    config = load_config(config_path, overrides)
    fam = get_family(config, family)
    get_task_row(config, task)
    if method not in TRAINERS.names():
        raise ConfigError(f"--method {method!r}: expected one of {TRAINERS.names()}")
    try:
        settings = TRAINERS.get(method).settings_from_config(config, fam, seed)
    except ValueError as err:
        raise ConfigError(f"{config_path}: {err}") from None
    _set_budget(settings, method, match_run)
    if config["train"]["backend"] == "vllm" and isinstance(settings, DuelSettings):
        _check_vllm()
    return config, fam, settings


def _set_budget(settings: Any, method: str, match_run: str | Path | None) -> None:
    """Give a budget-matched trainer its per-model targets from ``match_run``."""
    from agon.methods import BUDGET_MATCHED, BUDGET_REFERENCE
    from agon.training.budget import Budget

    if method not in BUDGET_MATCHED:
        if match_run is not None:
            raise ConfigError(
                f"--match-run: method {method!r} does not match a budget; only {BUDGET_MATCHED} do"
            )
        return
    if match_run is None:
        if settings.budget_match != "steps":
            raise ConfigError(
                f"train.budget.match is {settings.budget_match!r}: method {method!r} needs "
                f"--match-run SUMMARY (the {BUDGET_REFERENCE!r} run's summary.json of the same "
                "family, task and seed), or set train.budget.match: steps"
            )
        return
    try:
        budget = Budget.from_reference(match_run, settings.budget_match)
    except ValueError as err:
        raise ConfigError(f"--match-run: {err}") from None
    settings.budget_targets = dict(budget.targets)
    settings.budget_reference = budget.reference


def _check_vllm() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise ConfigError(
            "train.backend is vllm but vLLM is not installed; `pip install agon[gpu]` on a GPU "
            "machine, or use backend: hf"
        ) from None


def family_policies(
    config: dict, fam: dict, settings: DuelSettings, accelerator: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Policies A and B from the family row (model, rollout engine, optimizer), each
    distributed over ``accelerator``'s processes with its own optimizer; and their tokenizers."""
    from agon.engines.hf import load_model, load_tokenizer
    from agon.engines.rollouts import rollout_engine
    from agon.training.policy import distribute, make_policy

    policies, tokenizers = {}, {}
    for name in ("A", "B"):
        row = fam[f"model_{name.lower()}"]
        tok = load_tokenizer(row["model"], revision=row.get("revision"))
        model = load_model(row["model"], dtype=fam["dtype"], revision=row.get("revision"))
        engine = rollout_engine(config, fam, name.lower(), model, tok)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        policy = make_policy(name, model, engine, settings, pad_token_id=pad)
        distribute(policy, accelerator)  # shard / replicate each model with its own optimizer
        policies[name] = policy
        tokenizers[name] = tok
    return policies, tokenizers


def save_policies(
    policies: dict[str, Any], tokenizers: dict[str, Any], out: Path, accelerator: Any
) -> None:
    """Each policy's final model into ``OUT/<name>``; under several processes every rank calls
    this, the full weights are gathered (FSDP2 shards them) and saved once."""
    from agon.training.checkpoint import save_model

    for name, pol in policies.items():
        if accelerator is None:
            save_model(pol.model, tokenizers[name], out / name)
        else:
            state = accelerator.get_state_dict(pol.model)
            if accelerator.is_main_process:
                model = accelerator.unwrap_model(pol.model)
                save_model(model, tokenizers[name], out / name, state_dict=state)
            accelerator.wait_for_everyone()


def run_payload(
    out: Path, rows: list[dict], t0: float, accelerator: Any, settings: Any = None
) -> dict:
    """The summary payload of a run trained by :func:`agon.training.loop.train`: the totals of
    ``OUT/metrics.jsonl``, this run's wall seconds and steps, and its processes; with a compute
    budget in ``settings``, what each model spent against it (``budget``)."""
    from agon.training.budget import from_settings
    from agon.training.budget import report as budget_report
    from agon.training.metrics import read_rows, summarize_metrics
    from agon.training.policy import distributed_info

    payload = summarize_metrics(out / "metrics.jsonl") | {
        "wall_s_this_run": time.time() - t0,
        "steps_this_run": len(rows),
        "distributed": distributed_info(accelerator),
    }
    budget = from_settings(settings) if settings is not None else None
    if budget is not None:
        caps = {name: settings.model_steps(name) for name in budget.targets}
        payload["budget"] = budget_report(budget, read_rows(out / "metrics.jsonl"), caps)
    return payload


def train_duel(config: dict, fam: dict, task_name: str, settings: DuelSettings, out: Path) -> dict:
    """The duel: policies A and B from the family row, trained together; the summary payload."""
    import torch

    from agon.tasks import task_from_config
    from agon.training.loop import train
    from agon.training.policy import make_accelerator

    torch.manual_seed(settings.seed)
    task = task_from_config(config, task_name)
    accelerator = make_accelerator()
    policies, tokenizers = family_policies(config, fam, settings, accelerator)
    t0 = time.time()
    try:
        rows = train(task, policies, settings, out, on_step=_print_step)
    finally:
        task.close()
    save_policies(policies, tokenizers, out, accelerator)
    return run_payload(out, rows, t0, accelerator)


DUEL = Trainer("agon", DuelSettings, train_duel, settings_overrides=(("mode", "duel"),))
# The contest's control: the same duel (the same rollouts, cascade data and updates), but each
# model is rewarded for its own correctness only; `agon` minus this column is what the rival
# term adds (table 1's agon_minus_agon_independent).
DUEL_INDEPENDENT = Trainer(
    "agon_independent",
    DuelSettings,
    train_duel,
    settings_overrides=(("mode", "duel"), ("reward_scheme", "independent")),
)


def _print_step(row: dict) -> None:
    keys = [
        *(
            mk.key(mk.ROLE_CORRECT, model=m, role=r)
            for m in mk.MODELS
            for r in ("drafter", "reader")
        ),
        mk.POOLED_OUTCOME.format(outcome="reader_wins"),
        mk.TOKENS,
        *(mk.key(mk.HARD_PASS1, model=m) for m in mk.MODELS),
    ]
    shown = " ".join(f"{k}={row[k]:.3g}" for k in keys if k in row)
    print(f"[agon train] step {row['step']}: {shown}", flush=True)


def run(
    config_path: str | Path,
    family: str,
    task: str,
    method: str,
    seed: int,
    out: str | Path,
    steps: int | None = None,
    match_run: str | Path | None = None,
) -> dict:
    """Prepare (fails fast), train, write OUT/A, OUT/B, metrics.jsonl and summary.json."""
    from agon.provenance import write_results

    config, fam, settings = prepare(config_path, family, task, method, seed, steps, match_run)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    trainer: Trainer = TRAINERS.get(method)
    payload = trainer.train(config, fam, task, settings, out)
    payload = {
        "method": method,
        "family": family,
        "task": task,
        "seed": seed,
        "wall_s": time.time() - t0,
        "settings": settings.to_dict(),
        **payload,
    }
    write_results(out / "summary.json", payload, config=config, seed=seed)
    return payload
