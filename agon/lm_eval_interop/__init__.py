"""lm-evaluation-harness interop: agon's systems as lm-eval model types, agon's tasks as YAMLs.

- Model types ``agon-cascade`` (model args ``drafter=...,reader=...``), ``agon-moa``
  (``model_a=...,model_b=...``) and ``agon-single`` (``model=...``) run any ``generate_until``
  task (see :mod:`agon.lm_eval_interop.models`).
- Task YAMLs ``agon_arith`` and ``agon_deepmath_hard`` (group tag ``agon``) in
  :data:`TASKS_DIR`, graded by agon's math grader.

The package declares the model types in lm-eval's plugin entry-point group ``lm_eval.models``,
which lm-eval reads only in releases after 0.4.13; there, the stock ``lm_eval --model
agon-cascade ...`` finds them. Up to 0.4.13 a model type exists only in a process that has
called :func:`register`. ``agon-lm-eval`` (or ``python -m agon.lm_eval_interop``) is the
``lm_eval`` command with both registered::

    agon-lm-eval --model agon-cascade --model_args drafter=PATH,reader=PATH --tasks gsm8k
    agon-lm-eval --model agon-moa --model_args model_a=PATH,model_b=PATH --tasks agon_arith

From Python: ``register()``, then ``lm_eval.simple_evaluate(model="agon-cascade", ...,
task_manager=TaskManager(include_path=TASKS_DIR))``.
"""

from __future__ import annotations

from pathlib import Path

TASKS_DIR = str(Path(__file__).with_name("tasks"))
MODEL_TYPES = {
    "agon-single": "agon.lm_eval_interop.models:AgonSingleLM",
    "agon-cascade": "agon.lm_eval_interop.models:AgonCascadeLM",
    "agon-moa": "agon.lm_eval_interop.models:AgonMoALM",
}


def register() -> None:
    """Register agon's model types in lm-eval's model registry (lazily: imported on use)."""
    # lazy: lm_eval: the optional extra `lm-eval`; TASKS_DIR and MODEL_TYPES are read without it
    import lm_eval.models  # noqa: F401  (fills the registry with lm-eval's own types first)
    from lm_eval.api.registry import model_registry

    for name, target in MODEL_TYPES.items():
        if name not in model_registry:
            model_registry.register(name, target=target)
