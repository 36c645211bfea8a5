"""The command line's logs hold no known noise of other packages (agon.logs)."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys

import pytest

from agon.logs import NOISE, drop_known_noise

CUDA_KERNEL = "Failed to load /x/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: Could not load"
ENUM = (
    "<enum 'KernelPreference'> is an Enum subclass and is now natively supported by torch.compile"
    " as an opaque value type. Calling register_constant() on Enum subclasses is deprecated"
)


def _kept(logger_name: str, message: str) -> bool:
    logger = logging.getLogger(logger_name)
    record = logger.makeRecord(logger_name, logging.WARNING, __file__, 1, message, (), None)
    return bool(logger.filter(record))


def test_the_known_lines_are_dropped_and_nothing_else():
    drop_known_noise()
    drop_known_noise()  # once per logger, however often it is called
    assert sum(type(f).__name__ == "_DropKnown" for f in logging.getLogger("torchao").filters) == 1
    assert not _kept("torchao", CUDA_KERNEL)
    assert not _kept("torch.utils._pytree", ENUM)
    # torchao's other warnings, and the same text on another logger, still reach the log
    assert _kept("torchao", "Skipping import of cpp extensions due to incompatible torch version")
    assert _kept("agon", CUDA_KERNEL)
    assert set(NOISE) == {"torchao", "torch.utils._pytree"}


@pytest.mark.slow  # two imports of transformers' Trainer: 10-25 s
@pytest.mark.skipif(
    importlib.util.find_spec("torchao") is None, reason="torchao (the bf16-sr extra) not installed"
)
def test_importing_the_trainer_logs_no_torchao_noise():
    """The real import, as a job's `python -m agon` makes it: with the filters its stderr holds
    none of the noise; without them (on a CPU torch) it does, so the check can fail."""
    code = "from transformers import Trainer"
    quiet = "from agon.logs import drop_known_noise; drop_known_noise(); " + code
    run = [
        subprocess.run([sys.executable, "-c", c], capture_output=True, text=True, timeout=300)
        for c in (quiet, code)
    ]
    assert run[0].returncode == 0, run[0].stderr
    assert "Failed to load" not in run[0].stderr and "register_constant" not in run[0].stderr
    import torch

    if torch.version.cuda is None:  # a CPU build: torchao's CUDA kernels fail to load
        assert "Failed to load" in run[1].stderr
