"""The real checkpoint of the slow ``real`` tests and of ``python -m bench real``.

SmolLM2-135M-Instruct, the real tier's model A: the ``source`` of its row in
``config/real-cpu.yaml`` (a GGUF file in a registry package, with its sha256) is prepared by
:func:`agon.packaged_models.prepared_in_cache` into a plain transformers folder under the user's
cache, once. An environment variable may name a folder prepared beforehand instead
(``AGON_REAL_MODEL_DIR`` for the tests). A package that cannot be fetched (no network, a
registry error) raises :class:`agon.packaged_models.PackageUnavailable`, which the tests turn
into a stated skip; any other failure (a wrong hash, weights that do not fit) is an error.
"""

from __future__ import annotations

import os
from pathlib import Path

from agon.config import load_config
from agon.packaged_models import prepared_in_cache

ROOT = Path(__file__).resolve().parents[1]
REAL_CONFIG = ROOT / "config" / "real-cpu.yaml"
SMOLLM2 = "smollm2-135m-instruct"
MODEL_DIR_ENV = "AGON_REAL_MODEL_DIR"


def smollm2_row() -> dict:
    """SmolLM2's model row of the real tier's config (model A of its one family)."""
    return load_config(REAL_CONFIG)["families"][0]["model_a"]


def smollm2_dir(env: str = MODEL_DIR_ENV) -> Path:
    """A transformers folder of SmolLM2-135M-Instruct: the one ``$env`` names, else the cached
    copy, prepared from its package first when there is none."""
    given = os.environ.get(env)
    if given:
        if not (Path(given) / "config.json").is_file():
            raise FileNotFoundError(f"{env}={given} is not a prepared model folder")
        return Path(given)
    return prepared_in_cache(smollm2_row()["source"], SMOLLM2)
