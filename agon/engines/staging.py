"""Where an engine process's weights are staged between the trainer and the engine: the
trainer writes its policy's weights, under its checkpoint's names, to one safetensors file per
engine in shared memory (the temporary folder on disk when shared memory cannot hold two
copies), the engine loads them, and the engine process removes the file when it exits
(:mod:`agon.engines.process`); the files of trainers killed together with their engines are
removed by the next trainer to stage.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import psutil

SHARED_MEMORY = Path("/dev/shm")  # a tmpfs on Linux: the staged weights never touch a disk
STAGED_NAME = re.compile(r"agon-engine-(\d+)-.+\.(safetensors|tmp)")  # staging_path's names
log = logging.getLogger(__name__)


def staging_folders() -> list[Path]:
    """Where staged weights may be written, preferred first: shared memory when the host has
    it, then the temporary folder."""
    shm = [SHARED_MEMORY] if SHARED_MEMORY.is_dir() else []
    return [*shm, Path(tempfile.gettempdir())]


def staging_path(name: str, nbytes: int = 0) -> Path:
    """Where this trainer process stages the weights (``nbytes``) of policy ``name``'s engine:
    shared memory when it has room for two copies (a refresh writes the new file beside the
    old one), else the temporary folder, with a warning (on disk: slower, same result)."""
    first, *rest = staging_folders()
    folder, free = first, free_bytes(first)
    if rest and free < 2 * nbytes:
        folder = rest[-1]
        log.warning(
            "%s has %.1f GB free, under twice the %.1f GB of policy %s's weights: staging them "
            "in %s instead (on disk, slower); give the machine more shared memory to avoid it",
            first, free / 1e9, nbytes / 1e9, name, folder,
        )  # fmt: skip
    return folder / f"agon-engine-{os.getpid()}-{name}.safetensors"


def free_bytes(folder: Path) -> int:
    """The bytes an unprivileged process may still write to ``folder``'s file system."""
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def owned_files(name: str, pid: int) -> list[Path]:
    """Every file trainer process ``pid`` may stage policy ``name``'s weights in (each folder
    of :func:`staging_folders`, the file and its ``.tmp`` while written): what the engine
    process removes when it exits."""
    files = []
    for folder in staging_folders():
        path = folder / f"agon-engine-{pid}-{name}.safetensors"
        files += [path, path.with_suffix(".tmp")]
    return files


def remove_stale_staged() -> list[Path]:
    """Remove the staged files of trainer processes that no longer run (killed together with
    their engines, which would have removed them); the files removed."""
    removed = []
    for folder in staging_folders():
        for path in folder.glob("agon-engine-*"):
            match = STAGED_NAME.fullmatch(path.name)
            if match and not psutil.pid_exists(int(match.group(1))):
                with contextlib.suppress(OSError):  # another trainer removed it first
                    path.unlink()
                    removed.append(path)
    return removed


def checkpoint_state(model: Any, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` (``model``'s parameters by its own names) under the names of the checkpoint
    the model was loaded from, as ``save_pretrained`` would write them: transformers renames a
    checkpoint's weights on loading (Qwen3.5's ``model.language_model.*`` are a
    ``Qwen3_5ForCausalLM``'s ``model.*``), and vLLM loads that checkpoint's names."""
    # lazy: transformers (its model-loading module imports torch): off agon.engines' import,
    # which agon plan reads its placement from
    from transformers import PreTrainedModel
    from transformers.core_model_loading import revert_weight_conversion

    model = getattr(model, "module", model)  # under DDP, the model inside
    if not isinstance(model, PreTrainedModel):
        return state
    return revert_weight_conversion(model, state)


def stage_weights(model: Any, path: Path, dtype: Any) -> list[str]:
    """Write ``model``'s parameters in ``dtype`` to ``path`` (atomically), under its
    checkpoint's names (:func:`checkpoint_state`); the names written. Under FSDP2 every rank
    takes part in gathering each full parameter; each rank stages its own engine's copy."""
    # lazy: safetensors (its torch half imports torch): off agon.engines' import, which agon
    # plan reads its placement from
    from safetensors.torch import save_file

    state = {}
    for name, p in model.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p.data
        state[name.removeprefix("module.")] = full.detach().to("cpu", dtype).contiguous()
    state = checkpoint_state(model, state)
    tmp = path.with_suffix(".tmp")
    save_file(state, str(tmp))
    os.replace(tmp, path)
    return sorted(state)


def weights_bytes(model: Any, dtype: Any) -> int:
    """The bytes of ``model``'s parameters (in full, under FSDP2) in ``dtype`` (None: their
    own)."""
    return sum(p.numel() * (dtype or p.dtype).itemsize for p in model.parameters())
