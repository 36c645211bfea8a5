"""Evaluation of a system on a task: resumable per-sample records and a pass@k summary.

- :mod:`agon.evaluation.runner`: :func:`evaluate`, a built system on a task's problems;
- :mod:`agon.evaluation.records`: the ``samples.jsonl`` records, resume and the summary;
- :mod:`agon.evaluation.from_config`: :func:`evaluate_from_config`, the ``agon eval`` path.
"""

from agon.evaluation.runner import SAMPLES_FILE, SUMMARY_FILE, chunk_seed, evaluate

__all__ = ["SAMPLES_FILE", "SUMMARY_FILE", "chunk_seed", "evaluate"]
