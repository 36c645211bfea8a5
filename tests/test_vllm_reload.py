"""The bookkeeping of :func:`agon.engines.vllm.reloading` and :func:`reload_in_place` without
vLLM (its in-place reload itself runs in tests/test_vllm_cpu.py, ``pytest -m vllm``): the
names every load inside the block reached, the model's own ``load_weights`` back after it,
and TRL's sync run inside the block on the engine's model."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from agon.engines.vllm import reload_in_place, reloading

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None,
    reason="vLLM is installed: its in-place reload runs instead (tests/test_vllm_cpu.py)",
)


class Model:
    """A stand-in for a vLLM model: ``load_weights`` answers the names it took."""

    def __init__(self):
        self.took: list[str] = []

    def load_weights(self, weights):
        names = [name for name, _ in weights]
        self.took += names
        return set(names)


def test_the_block_records_every_load_and_gives_the_model_back():
    model = Model()
    with reloading(model, model_config=None) as loaded:
        model.load_weights([("a.weight", 0)])
        model.load_weights(iter([("b.weight", 1), ("c.bias", 2)]))
    assert loaded == {"a.weight", "b.weight", "c.bias"}
    assert model.took == ["a.weight", "b.weight", "c.bias"]
    assert "load_weights" not in vars(model)  # the class's own method again
    with pytest.raises(RuntimeError), reloading(model, model_config=None):
        raise RuntimeError("a load failed")
    assert "load_weights" not in vars(model)


def test_trl_sync_runs_inside_the_block_on_the_engines_model():
    model = Model()
    runner = SimpleNamespace(get_model=lambda: model, model_config=None)
    executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
    seen: list[bool] = []

    def sync():  # TRL's colocated sync: one load per tensor
        seen.append("load_weights" in vars(model))  # inside the block: the recording one
        for name in ("x", "y"):
            model.load_weights([(name, 0)])

    generation = SimpleNamespace(
        llm=SimpleNamespace(llm_engine=SimpleNamespace(model_executor=executor)),
        sync_weights=sync,
    )
    reload_in_place(generation)
    generation.sync_weights()
    assert seen == [True] and model.took == ["x", "y"] and "load_weights" not in vars(model)
