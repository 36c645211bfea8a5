"""Checkpoints that resume exactly: models, optimizers, schedulers, RNG, step and data position.

Layout: ``checkpoints/step-000010/`` holds ``<policy>.pt`` (model, optimizer and scheduler
state of each policy), ``state.pt`` (step, data position, RNG states) and a ``COMPLETE``
marker. It is written into a hidden temp folder, fsynced, marked complete and only then
renamed into place, so a run killed at any moment leaves either a whole checkpoint or none;
:func:`latest_checkpoint` only ever returns folders with the marker.

On CPU with the same seed, a resumed run reproduces the uninterrupted run bit for bit
(``tests/test_checkpoint.py`` kills a real run with SIGKILL to show it): sampling
seeds are derived from (seed, step), and every other source of randomness is restored here.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agon.provenance import atomic_write_text

MARKER = "COMPLETE"
PREFIX = "step-"


def _rng_state() -> dict:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _save(obj: Any, path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(
    root: str | Path,
    step: int,
    policies: Mapping[str, Any],
    data: dict | None = None,
    keep: int = 2,
    extra: dict | None = None,
    accelerator: Any = None,
) -> Path:
    """Write checkpoint ``step`` of ``policies`` (objects with model/optimizer/scheduler)
    atomically.

    Keeps the newest ``keep`` complete checkpoints (0 keeps all). Returns the checkpoint folder.
    Under ``accelerate`` (DDP / FSDP2, sharded states) every rank calls this: the models,
    optimizers, schedulers and RNG go through ``accelerator.save_state``; rank 0 writes the rest.
    """
    root = Path(root)
    final = root / f"{PREFIX}{step:06d}"
    main = accelerator is None or accelerator.is_main_process
    # one temp name for all ranks (no pid in it) when several processes write into it
    tmp = root / (
        f".tmp-{PREFIX}{step:06d}-{os.getpid()}"
        if accelerator is None
        else f".tmp-{PREFIX}{step:06d}-dist"
    )
    if main:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    if accelerator is not None:
        accelerator.wait_for_everyone()
        accelerator.save_state(
            str(tmp / "accelerate")
        )  # models, optimizers, schedulers, RNG of every rank
        accelerator.wait_for_everyone()
        if not main:
            accelerator.wait_for_everyone()  # rank 0 renames the folder
            return final
    for name, p in ({} if accelerator is not None else policies).items():
        _save(
            {
                "model": p.model.state_dict(),
                "optimizer": p.optimizer.state_dict(),
                "scheduler": p.scheduler.state_dict() if p.scheduler is not None else None,
            },
            tmp / f"{name}.pt",
        )
    _save(
        {
            "step": step,
            "data": data,
            "rng": _rng_state(),
            "policies": sorted(policies),
            "extra": extra or {},
        },
        tmp / "state.pt",
    )
    (tmp / MARKER).write_text(json.dumps({"step": step}) + "\n")
    _fsync_dir(tmp)
    if final.exists():  # a rerun of the same step (e.g. after resume): replace it whole
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    if keep > 0:
        for old in complete_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    if accelerator is not None:
        accelerator.wait_for_everyone()
    return final


def complete_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoint folders under ``root``, oldest first (half-written ones are ignored)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [
        p
        for p in root.iterdir()
        if p.is_dir() and p.name.startswith(PREFIX) and (p / MARKER).is_file()
    ]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX) :]))


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    found = complete_checkpoints(root)
    return found[-1] if found else None


def load_checkpoint(path: str | Path, policies: Mapping[str, Any], accelerator: Any = None) -> dict:
    """Restore ``policies`` and the RNG from checkpoint ``path``; return its state (step, data,
    extra).

    With an ``accelerator``, models / optimizers / schedulers / RNG come from ``load_state``.
    """
    path = Path(path)
    if not (path / MARKER).is_file():
        raise FileNotFoundError(
            f"{path} is not a complete checkpoint (no {MARKER} marker); delete it or pick another"
        )
    state = torch.load(path / "state.pt", weights_only=False)
    if sorted(policies) != state["policies"]:
        raise ValueError(
            f"checkpoint {path} holds policies {state['policies']}, this run has {sorted(policies)}"
        )
    if accelerator is not None:
        accelerator.load_state(str(path / "accelerate"))
        return state
    for name, p in policies.items():
        blob = torch.load(path / f"{name}.pt", weights_only=False)
        p.model.load_state_dict(blob["model"])
        p.optimizer.load_state_dict(blob["optimizer"])
        if p.scheduler is not None and blob["scheduler"] is not None:
            p.scheduler.load_state_dict(blob["scheduler"])
    _set_rng_state(state["rng"])
    return state


def truncate_jsonl(path: str | Path, keep: Callable[[dict], bool]) -> None:
    """Rewrite a JSONL file atomically with only the rows ``keep`` accepts (a torn last line is
    dropped)."""

    path = Path(path)
    if not path.exists():
        return
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a kill cut in half
        if keep(row):
            rows.append(line)
    atomic_write_text(path, "".join(r + "\n" for r in rows))


def save_model(
    model: Any, tokenizer: Any, path: str | Path, state_dict: dict | None = None
) -> None:
    """Save a final model folder (weights + tokenizer) atomically: temp folder, then rename, so a
    half-written model folder never exists."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, state_dict=state_dict)
    tokenizer.save_pretrained(tmp)
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp, path)
