"""What a first GPU run would trip over, shown on CPU where a CPU can show it: the FSDP2 config
(what it leaves off and why), the engines asleep through their policy's update, and server
mode's client (one batched weight update, stop strings, the device left as it was). vLLM and
TRL's server client are stood in for: nothing here has run against a GPU."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch
import yaml
from test_workflow import REPO

from agon import rl
from agon.engines import rollouts
from agon.engines.base import Completion, SamplingParams
from agon.engines.hf import HFEngine
from agon.tasks.synthetic import ParityTask
from agon.training import policy as pol
from agon.training.settings import RLSettings
from tests.duel_helpers import tiny_policies

FSDP2 = REPO / "config" / "accelerate" / "fsdp2.yaml"
PAPER = REPO / "config" / "paper.yaml"


# ----------------------------------------------------------------------------- FSDP2


def test_fsdp2_config_leaves_off_what_breaks_the_first_run():
    """fsdp2.yaml: no bf16 mixed precision (accelerate would upcast every trained weight to
    float32 masters), no FSDP activation checkpointing (train.gradient_checkpointing is the one
    switch: both would checkpoint twice and rename the weights the engines load), every rank
    loads the checkpoint itself."""
    acc = yaml.safe_load(FSDP2.read_text())
    fsdp = acc["fsdp_config"]
    assert acc["distributed_type"] == "FSDP" and fsdp["fsdp_version"] == 2
    assert acc["mixed_precision"] == "no"
    assert fsdp["fsdp_activation_checkpointing"] is False
    assert fsdp["fsdp_cpu_ram_efficient_loading"] is False
    assert yaml.safe_load(PAPER.read_text())["train"]["gradient_checkpointing"] is True


def test_fsdp_activation_checkpointing_is_refused_by_the_in_house_trainers():
    def accelerator(kind: str, ac: bool):
        plugin = SimpleNamespace(activation_checkpointing=ac)
        return SimpleNamespace(
            distributed_type=kind, num_processes=2, state=SimpleNamespace(fsdp_plugin=plugin)
        )

    with pytest.raises(ValueError, match="fsdp_activation_checkpointing: false"):
        pol.check_fsdp_plugin(accelerator("FSDP", True))
    pol.check_fsdp_plugin(accelerator("FSDP", False))
    pol.check_fsdp_plugin(accelerator("MULTI_CPU", True))  # accelerate applies it under FSDP only


# ----------------------------------------------------------------------------- sleep


class SleepingEngine:
    """An HFEngine (the live model) that records what the policy asks of it and refuses to
    generate while asleep, as a vLLM engine whose weights and KV cache were released would."""

    def __init__(self, engine: HFEngine, calls: list):
        self.engine, self.calls, self.asleep = engine, calls, False

    def generate(self, prompts, n=1, sampling=None):
        assert not self.asleep, "generate while asleep"
        self.calls.append("generate")
        return self.engine.generate(prompts, n=n, sampling=sampling)

    def sleep(self, level):
        self.calls.append(f"sleep {level}")
        self.asleep = True

    def wake_up(self):
        self.calls.append("wake_up")
        self.asleep = False

    def sync_weights(self, model):
        assert not self.asleep, "sync while asleep"
        self.calls.append("sync")


def _step(tmp_path, wrap: bool) -> tuple[dict, list]:
    s = RLSettings(
        problems_per_step=2, num_generations=4, max_new_tokens=6, learning_rate=1e-2,
        micro_batch_size=2,
    )  # fmt: skip
    torch.manual_seed(0)
    policies = tiny_policies("qwen3", tmp_path, s, names=("A",), seeds=(0,))
    calls: list = []
    if wrap:
        policies["A"].engine = SleepingEngine(policies["A"].engine, calls)
    task = ParityTask()
    torch.manual_seed(1)
    for step in range(2):
        rl.grpo_step(task, policies, task.problems("train")[2 * step : 2 * step + 2], s, step)
    return {k: v.clone() for k, v in policies["A"].model.state_dict().items()}, calls


def test_the_engine_sleeps_through_its_policys_update(tmp_path):
    """Each update: the engine sleeps (level 2) before the first backward, once, and wakes
    before the weight sync; an engine without sleep (the transformers engine) trains to the
    same weights."""
    plain, _ = _step(tmp_path / "plain", wrap=False)
    slept, calls = _step(tmp_path / "slept", wrap=True)
    updates = calls.count(f"sleep {pol.ENGINE_SLEEP_LEVEL}")
    assert updates >= 1, calls  # at least one step had reward spread, so a backward
    assert calls.count("wake_up") == updates and calls.count("sync") == 2
    for i, c in enumerate(calls):
        if c.startswith("sleep"):
            assert calls[i + 1 : i + 3] == ["wake_up", "sync"], calls
    assert all(torch.equal(plain[k], slept[k]) for k in plain)


# ----------------------------------------------------------------------------- server mode


class FakeClient:
    """TRL's VLLMClient as ServerRollouts uses it; it records the requests, and, as TRL's
    does, sets the current CUDA device when it builds its weight-transfer group."""

    def __init__(self, base_url=None, group_port=None, connection_timeout=None):
        self.requests: list = []

    def init_communicator(self, device):
        torch.cuda.set_device(device)
        self.requests.append("init_communicator")

    def update_named_params(self, metadata, named_params):
        self.requests.append(("update_named_params", metadata, list(named_params)))

    def update_named_param(self, name, tensor):
        self.requests.append(("update_named_param", name))

    def reset_prefix_cache(self):
        self.requests.append("reset_prefix_cache")

    def generate(self, prompts, n, generation_kwargs=None, **kw):
        self.requests.append(("generate", generation_kwargs))
        ids = self.ids
        return {"completion_ids": [ids] * (n * len(prompts)), "logprobs": [[[-1.0]]] * len(ids)}


@pytest.fixture
def server(monkeypatch, tmp_path):
    """A ServerRollouts on GPU 1 against FakeClient; torch.cuda's device calls recorded."""
    import trl.generation.vllm_client as vc

    state = {"inside": False, "set_outside": 0, "set_inside": 0}

    @contextlib.contextmanager
    def device(d):
        state["inside"] = True
        try:
            yield
        finally:
            state["inside"] = False

    def set_device(d):
        state["set_inside" if state["inside"] else "set_outside"] += 1

    monkeypatch.setattr(vc, "VLLMClient", FakeClient)
    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    (policy,) = tiny_policies("qwen3", tmp_path, RLSettings(), names=("A",), seeds=(0,)).values()
    engine = rollouts.ServerRollouts("http://s:8000", policy.engine.tokenizer, device=1)
    return engine, policy, state


def test_server_weights_go_in_one_batched_update(server):
    """One request and one broadcast for every tensor (TRL batches; a request per tensor was
    400-700 a sync), under the names the engine's model has (a checkpoint wrapper's dropped)."""
    engine, policy, state = server
    model = policy.model
    layer = model.model.layers[0]
    wrapped = torch.nn.Module()
    wrapped._checkpoint_wrapped_module = layer  # what FSDP's activation checkpointing makes
    model.model.layers[0] = wrapped
    engine.sync_weights(model)
    (_, metadata, streamed), reset = engine.client.requests[1:]
    assert reset == "reset_prefix_cache"
    assert not [r for r in engine.client.requests if r[0] == "update_named_param"]
    names = [m[0] for m in metadata]
    assert names == [n for n, _ in streamed] and len(names) == len(list(model.parameters()))
    assert "model.layers.0.self_attn.q_proj.weight" in names
    assert not [n for n in names if "_checkpoint_wrapped_module" in n]
    assert all(list(t.shape) == m[2] and m[1] == "float32" for m, (_, t) in zip(metadata, streamed))
    # the weight-transfer group was built, and the sync ran, on GPU 1 as a device context
    assert state == {"inside": False, "set_outside": 0, "set_inside": 1}


def test_server_weights_carry_the_checkpoints_names(monkeypatch, tmp_path):
    """Qwen3.5's trainer model (``Qwen3_5ForCausalLM``, ``model.layers.*``) sends the names of
    the checkpoint the server loaded (``model.language_model.*``), as a staged file does."""
    import trl.generation.vllm_client as vc
    from safetensors import safe_open

    monkeypatch.setattr(vc, "VLLMClient", FakeClient)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: None)
    (policy,) = tiny_policies("qwen3_5", tmp_path, RLSettings(), names=("A",), seeds=(0,)).values()
    engine = rollouts.ServerRollouts("http://s:8000", policy.engine.tokenizer, device=1)
    engine.sync_weights(policy.model)
    (_, metadata, streamed) = engine.client.requests[1]
    names = [m[0] for m in metadata]
    with safe_open(str(tmp_path / "qwen3_5-0" / "model.safetensors"), framework="pt") as f:
        checkpoint = set(f.keys())
    assert len(names) == len(list(policy.model.parameters())) and set(names) <= checkpoint
    assert any(n.startswith("model.language_model.layers.") for n in names)
    assert [n for n, _ in streamed] == names


def test_server_rollouts_pass_and_cut_at_stop_strings(server):
    engine, _, _ = server
    tok = engine.tokenizer
    engine.client.ids = tok.encode("12 END more", add_special_tokens=False)
    sampling = SamplingParams(max_new_tokens=8, stop=("END",), seed=3)
    (row,) = engine.generate([[{"role": "user", "content": "hi"}]], n=2, sampling=sampling)
    assert engine.client.requests[-1] == ("generate", {"seed": 3, "stop": ["END"]})
    assert all(isinstance(c, Completion) for c in row)
    assert [c.text for c in row] == ["12 ", "12 "] and row[0].finish_reason == "stop"
    engine.client.ids = tok.encode("12 more", add_special_tokens=False)
    (row,) = engine.generate([[{"role": "user", "content": "hi"}]], sampling=sampling)
    assert row[0].finish_reason == "length" and row[0].text == "12 more"
