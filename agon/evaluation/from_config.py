"""Evaluations built from a config: the system of a column or kind, its task and its settings.

:func:`evaluate_from_config` is what ``agon eval`` runs: it resolves ``--system`` to a system
kind (:func:`resolve_kind`), builds it from the family row through the kind's registered
builder (:func:`build_system`), builds the task from its row, and runs
:func:`agon.evaluation.runner.evaluate` with the config's ``eval`` section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agon.config import ConfigError, config_hash, get_family, validate_config
from agon.engines import load_engine
from agon.engines.base import SamplingParams
from agon.evaluation.runner import evaluate
from agon.methods import UNTRAINED
from agon.registry import SYSTEM_KINDS
from agon.systems import System, SystemContext
from agon.tasks import task_from_config
from agon.toy.audit import TASKS as TOY_AUDITED
from agon.toy.audit import audit as toy_audit
from agon.toy.audit import reader_mistake

# each vLLM engine of an evaluated system reserves this share of the GPU: a cascade or MoA runs
# two engines (A's and B's) on one device, and vLLM's own default (0.9) would leave none for B
EVAL_VLLM_SHARE = 0.45


def minimal_config(
    task: str, model_a: str | None, model_b: str | None, family: str = "cli"
) -> dict:
    """A validated config for the explicit CLI form (no --config): schema defaults throughout."""
    a = model_a or model_b
    b = model_b or model_a
    if a is None:
        raise ConfigError(
            "without --config, give the models: --model PATH, or --drafter PATH --reader PATH"
        )
    return validate_config(
        {
            "families": [{"name": family, "model_a": {"model": a}, "model_b": {"model": b}}],
            "tasks": [{"name": task, "params": {}}],
            "methods": ["base"],
        }
    )


def model_fingerprint(name_or_path: str) -> str:
    """A cheap identity of a local model folder (file names, sizes, mtimes), so that a resumed
    evaluation never mixes samples of a model with those of a retrained one at the same path;
    a hub id is its own identity."""
    path = Path(name_or_path)
    if not path.is_dir():
        return name_or_path
    files = sorted(
        (f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in path.iterdir() if f.is_file()
    )
    return f"{name_or_path}@{config_hash(files)}"


def resolve_kind(system: str, model: str | None, drafter: str | None, reader: str | None) -> str:
    """The system kind (single, cascade, moa, ...) for a ``--system`` value and the model flags
    given: a kind's own name, an untrained column, else one model or a drafter and a reader."""
    if system in SYSTEM_KINDS.names():
        return system
    if system in UNTRAINED and not (model or drafter or reader):
        return UNTRAINED[system]
    if model and not (drafter or reader):
        return "single"
    if drafter and reader and not model:
        return "cascade"
    raise ValueError(
        f"system {system!r}: pass --model PATH (one model) or --drafter PATH --reader PATH "
        f"(a cascade); without model flags only {sorted(UNTRAINED)} resolve from the family row"
    )


def build_system(
    config: dict,
    family: str,
    system: str,
    *,
    model: str | None = None,
    drafter: str | None = None,
    reader: str | None = None,
    rows: dict[str, str] | None = None,
    backend: str = "hf",
    engine_kwargs: dict | None = None,
    seed: int | None = None,
) -> tuple[System, dict]:
    """The system to evaluate and an identity dict (what models it runs) for the run id.

    The system kind comes from :func:`resolve_kind` and is built by the function registered
    under it (:data:`agon.registry.SYSTEM_KINDS`), with one engine per distinct (row, model).
    ``seed``: the training seed, whose base models a family with per-seed bases loads.
    """
    fam = get_family(config, family, seed)
    kind = resolve_kind(system, model, drafter, reader)
    rows = system_rows(system, rows)
    kw = {"batch_size": config["eval"]["batch_size"], **(engine_kwargs or {})}
    if backend == "vllm":  # each of a system's engines (at most A and B) takes its share
        kw.setdefault("gpu_memory_utilization", EVAL_VLLM_SHARE)
    cache: dict[tuple[str, str], Any] = {}

    def engine(row: str, path: str | None):
        key = (row, path or fam[f"model_{row}"]["model"])
        if key not in cache:  # one engine per distinct model, e.g. MoA's A and a self-read's
            cache[key] = load_engine(fam[f"model_{row}"], fam, backend, path=path, **kw)
        return cache[key]

    ctx = SystemContext(config, fam, engine, model=model, drafter=drafter, reader=reader, rows=rows)
    sys_obj, identity = SYSTEM_KINDS.get(kind)(ctx)
    sys_obj.name = system
    identity["fingerprints"] = sorted({model_fingerprint(str(path)) for _, path in cache})
    identity["family_row"] = {k: v for k, v in fam.items() if k not in ("model_a", "model_b")} | {
        "personas": [fam["model_a"].get("system_prompt"), fam["model_b"].get("system_prompt")],
        "chat_template_kwargs": [
            fam["model_a"].get("chat_template_kwargs"),
            fam["model_b"].get("chat_template_kwargs"),
        ],
    }
    return sys_obj, identity


def system_rows(system: str, rows: dict[str, str] | None = None) -> dict[str, str]:
    """Which family row (``a``/``b``) each of a system's parts loads: ``model`` (one model),
    ``drafter``, ``reader``; a ``_rev`` system swaps drafter and reader; ``rows`` overrides."""
    swapped = system.endswith("_rev")
    return {
        "model": "a",
        "drafter": "b" if swapped else "a",
        "reader": "a" if swapped else "b",
        **(rows or {}),
    }


def evaluate_from_config(
    config: dict,
    family: str,
    task: str,
    system: str,
    out: str | Path,
    *,
    seed: int = 0,
    model: str | None = None,
    drafter: str | None = None,
    reader: str | None = None,
    rows: dict[str, str] | None = None,
    backend: str = "hf",
    engine_kwargs: dict | None = None,
    n_samples: int | None = None,
    max_problems: int | None = None,
    progress: bool = True,
) -> dict:
    """The ``agon eval`` path: build the system and task from ``config`` and :func:`evaluate`."""
    ev = config["eval"]
    fam = get_family(config, family, seed)
    n = n_samples or ev["n_samples"]
    task_obj = task_from_config(config, task)
    sys_obj, identity = build_system(
        config,
        family,
        system,
        model=model,
        drafter=drafter,
        reader=reader,
        rows=rows,
        backend=backend,
        engine_kwargs=engine_kwargs,
        seed=seed,
    )
    try:
        problems = task_obj.problems(ev["split"])
        limit = max_problems or ev["max_problems"]
        problems = problems[:limit] if limit else problems
        sampling = SamplingParams(
            max_new_tokens=fam["max_new_tokens"],
            temperature=ev["temperature"],
            top_p=ev["top_p"],
            seed=seed,
        )
        return evaluate(
            sys_obj,
            task_obj,
            problems,
            out,
            n=n,
            ks=[k for k in ev["k"] if k <= n],
            sampling=sampling,
            chunk_size=ev["batch_size"],
            seed=seed,
            n_boot=ev["bootstrap"],
            config=config,
            identity=identity,
            progress=progress,
            meta={"family": family, "split": ev["split"], "backend": backend, "models": identity},
            audit=_toy_audit(config, fam, task, system_rows(system, rows)["reader"]),
        )
    finally:
        sys_obj.close()
        task_obj.close()


def _toy_audit(config: dict, fam: dict, task: str, reader_row: str):
    """The toy world's audit of an evaluation's samples (:mod:`agon.toy.audit`) for a toy
    family on a toy task, with the habits of the model that reads; None elsewhere."""
    if not fam.get("toy") or task not in TOY_AUDITED:
        return None
    reader = reader_mistake(config, reader_row)
    return lambda records, problems: toy_audit(task, problems, records, reader)
