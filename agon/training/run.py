"""One training run of table 1: a (family, task, method, seed) cell, from config to summary.

:func:`run` checks everything that can be checked before a model loads (config schema, then
the trainer's settings), trains through the trainer registered under the method's name
(:data:`agon.registry.TRAINERS`: the in-house trainers run by the shell of
:mod:`agon.training.shell`, GRPO on TRL in ``baselines/grpo``), and writes ``summary.json``
with provenance. Every trainer writes ``OUT/A`` and ``OUT/B`` (final model
folders), ``OUT/metrics.jsonl`` (keys: :mod:`agon.training.metrics`) and its resumable state
under ``OUT/checkpoints/``; a rerun of a killed job resumes from the last complete checkpoint.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from agon.config import ConfigError, get_family, get_task_row, load_config
from agon.methods import BUDGET_MATCHED, BUDGET_REFERENCE
from agon.provenance import write_results
from agon.registry import TRAINERS
from agon.training.budget import Budget
from agon.training.settings import RLSettings

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
    fam = get_family(config, family, seed)  # a family's base models may be per seed
    get_task_row(config, task)
    if method not in TRAINERS.names():
        raise ConfigError(f"--method {method!r}: expected one of {TRAINERS.names()}")
    try:
        settings = TRAINERS.get(method).settings_from_config(config, fam, seed)
    except ValueError as err:
        raise ConfigError(f"{config_path}: {err}") from None
    _set_budget(settings, method, match_run)
    if isinstance(settings, RLSettings) and settings.backend == "vllm":
        _check_vllm()
    return config, fam, settings


def _set_budget(settings: Any, method: str, match_run: str | Path | None) -> None:
    """Give a budget-matched trainer its per-model targets from ``match_run``."""
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
        # lazy: vllm: the GPU-only optional extra; its absence is a ConfigError
        import vllm  # noqa: F401
    except ImportError:
        raise ConfigError(
            "train.backend is vllm but vLLM is not installed; `pip install agon[gpu]` on a GPU "
            "machine, or use backend: hf"
        ) from None


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
    config, fam, settings = prepare(config_path, family, task, method, seed, steps, match_run)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    payload = TRAINERS.get(method).train(config, fam, task, settings, out)
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
