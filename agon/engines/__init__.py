"""Generation engines behind one interface (:class:`agon.engines.base.Engine`).

``transformers`` (CPU or GPU) is always available; vLLM is an optional extra loaded only when
asked for, so importing agon never needs it.
"""

from agon.engines.base import Completion, Engine, SamplingParams

__all__ = ["Completion", "Engine", "SamplingParams"]
