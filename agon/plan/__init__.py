"""`agon plan`: what a config costs before its first job runs.

For every job of the workflow's DAG (:mod:`agon.plan.jobs`), the planner computes the tokens
generated and trained on (:mod:`agon.plan.workload`, lengths measured where an out_dir gives
them, else the caps: :mod:`agon.plan.expect`), FLOPs of generation and training
(:mod:`agon.plan.dims`), memory on the fullest GPU and on the host
(:mod:`agon.plan.memory`, :mod:`agon.plan.placement`), and GPU-hours from the throughput model
(:mod:`agon.plan.hardware`: measured efficiencies from ``bench/throughput``, else assumed ones,
labelled so), and flags the jobs that would not fit their ``resources`` (:mod:`agon.plan.pricing`).
Model sizes come from a local ``config.json`` or the table of published dimensions
(:mod:`agon.plan.published`), never from a download.

For tests and benchmarks: :func:`estimate_step_memory` on any :class:`ModelDims` (e.g.
``PUBLISHED[name].with_layers(2)``), :func:`dims_from_config` of a transformers config,
:func:`transformers_config` of dims, :func:`write_measurement` for a throughput measurement.
"""

from __future__ import annotations

from agon.plan.dims import ModelDims, PlanError, kv_cache_bytes, param_breakdown, param_count
from agon.plan.hardware import GPU_KINDS, write_measurement
from agon.plan.hf_config import dims_from_config, load_dims, transformers_config
from agon.plan.memory import Breakdown, estimate_generation_memory, estimate_step_memory
from agon.plan.planner import Plan, plan
from agon.plan.published import PUBLISHED

__all__ = [
    "GPU_KINDS",
    "PUBLISHED",
    "Breakdown",
    "ModelDims",
    "Plan",
    "PlanError",
    "dims_from_config",
    "estimate_generation_memory",
    "estimate_step_memory",
    "kv_cache_bytes",
    "load_dims",
    "param_breakdown",
    "param_count",
    "plan",
    "transformers_config",
    "write_measurement",
]
