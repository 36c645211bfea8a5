"""Known noise of other packages, kept out of the command line's logs.

Where the optional ``torchao`` is installed (the ``bf16-sr`` extra), transformers imports it with
its ``Trainer``, and on a CPU build of torch every such process opens its log with lines that say
nothing about the run: torchao failing to load its CUDA-only kernels (``_C_cutlass_90a``,
``_C_mxfp8``), and torch deprecating how torchao registers its enums. A job log that opens with
"Failed to load" hides the lines that matter, so :func:`drop_known_noise` filters exactly those
messages (by logger and text); every other record of those loggers, torchao's own failures
included, still reaches the log.
"""

from __future__ import annotations

import logging

# logger name -> the messages of it that are noise (a record is dropped when its message
# matches all the fragments of one entry)
NOISE: dict[str, tuple[tuple[str, ...], ...]] = {
    # torchao/__init__.py: a CUDA kernel library that a CPU torch cannot load
    "torchao": (("Failed to load ", "_C_", ".so"),),
    # torch/utils/_pytree.py, on torchao's enums (KernelPreference, ScaleCalculationMode)
    "torch.utils._pytree": (("is an Enum subclass", "register_constant()"),),
}


class _DropKnown(logging.Filter):
    """Drops a record whose message holds every fragment of one of ``patterns``."""

    def __init__(self, patterns: tuple[tuple[str, ...], ...]) -> None:
        super().__init__()
        self.patterns = patterns

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(all(f in message for f in frags) for frags in self.patterns)


def drop_known_noise() -> None:
    """Install the filters of :data:`NOISE` on their loggers (once per process; cheap: no
    package is imported)."""
    for name, patterns in NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropKnown) for f in logger.filters):
            logger.addFilter(_DropKnown(patterns))
