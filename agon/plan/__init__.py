"""`agon plan`: what a config costs before its first job runs.

For every job of the workflow's DAG (:mod:`agon.plan.jobs`): the tokens it generates and trains
on (:mod:`agon.plan.workload`, lengths measured where an out_dir gives them, else the caps),
its FLOPs and model sizes (:mod:`agon.plan.dims`, from a local or cached ``config.json`` or
the published table, :mod:`agon.plan.published`, never a download), memory on each GPU and the
host (:mod:`agon.plan.memory`), GPU-hours (:mod:`agon.plan.hardware`: measured efficiencies,
else assumed ones, labelled so) and the jobs that would not fit their ``resources``
(:mod:`agon.plan.planner`); :mod:`agon.plan.render` prints the bill.
"""

from __future__ import annotations

from agon.plan.dims import ModelDims, PlanError, kv_cache_bytes, param_breakdown, param_count
from agon.plan.hardware import GPU_KINDS, write_measurement
from agon.plan.memory import Breakdown, estimate_generation_memory, estimate_step_memory
from agon.plan.planner import Plan, plan
from agon.plan.published import PUBLISHED, dims_from_config, load_dims, transformers_config

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
