"""Agon: reinforcement learning in which two competing language models grade each other.

Importing this package is cheap and loads no GPU-only package (vLLM): heavy modules
(torch, transformers, math-verify) are imported by the submodules that need them.
"""

__version__ = "0.1.0"
