"""One placement, read by the trainer and the planner (agon.engines.placement).

On CPU: the device each part is given for 1, 2 and 4 GPUs (and under FSDP, with servers, for
GRPO on TRL); that the trainer builds its policies and engines from it (torch's GPU count
faked, the loaders recorded); the environment each engine process gets, and the engine
process's protocol with a stand-in engine (a real child process, no vLLM); and that the
planner's memory on each GPU is the sum of what the placement puts there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_workflow import REPO

from agon.config import load_config
from agon.engines import placement as pl
from agon.engines import process as ep
from agon.engines import rollouts
from agon.engines.base import Completion, Engine
from agon.plan.memory import (
    ASSUMED_CUDA_CONTEXT_BYTES,
    ASSUMED_CUDA_GRAPH_BYTES,
    PERSISTENT,
    device_name,
)
from agon.plan.planner import plan
from agon.training import shell

PAPER = REPO / "config" / "paper.yaml"
TESTS = Path(__file__).resolve().parent


def gpus_of(where: pl.Placement, rank: int = 0) -> dict[str, int | None]:
    return {p.name: p.gpu for p in where.parts if p.rank == rank}


def processes_on(where: pl.Placement, gpu: int) -> set[tuple[int, str]]:
    """The processes (rank, Part.process) holding a part on ``gpu``: a CUDA context each."""
    return {(p.rank, p.process) for p in where.on(gpu)}


# ----------------------------------------------------------------------------- the decision


def test_duel_parts_on_one_two_and_four_gpus():
    one = pl.place("duel", "vllm", 1)
    assert set(gpus_of(one).values()) == {0} and one.used == [0]
    two = pl.place("duel", "vllm", 2)
    assert gpus_of(two) == {
        "A.policy": 0, "A.optimizer": 0, "A.engine": 0,
        "B.policy": 1, "B.optimizer": 1, "B.engine": 1,
    }  # fmt: skip
    four = pl.place("duel", "vllm", 4, helpers=True)
    assert gpus_of(four) == {
        "A.policy": 0, "A.optimizer": 0, "A.engine": 2,
        "B.policy": 1, "B.optimizer": 1, "B.engine": 3, "helpers": 0,
    }  # fmt: skip
    assert four.used == [0, 1, 2, 3] and "its engine on GPU 2" in four.how
    # each colocated engine runs in a process of its own; the transformers engine is the policy
    assert {p.engine for p in two.parts if p.kind == "engine"} == {"vllm"}
    hf = pl.place("duel", "hf", 2)
    assert gpus_of(hf)["B.engine"] == 1 and hf.part("B.engine").engine == "live"
    cpu = pl.place("duel", "hf", 0)
    assert set(gpus_of(cpu).values()) == {None} and cpu.how == "everything on the CPU"
    assert cpu.part("A.policy").device is None and two.part("B.policy").device == "cuda:1"


def test_servers_grpo_on_trl_and_fsdp():
    served = pl.place("duel", "vllm", 2, servers={"A": "http://a:8000", "B": "http://b:8001"})
    assert [p.name for p in served.servers] == ["A.engine", "B.engine"]
    assert served.used == [0, 1] and all(p.gpu is None for p in served.servers)
    assert served.server_gpus == 2
    # GRPO on TRL: a process per model, each seeing one GPU (TRL refuses nn.DataParallel, and
    # a process holds one colocated vLLM): A and B at once on two GPUs, else one after another
    trl = pl.place("trl", "vllm", 2)
    assert gpus_of(trl) == {
        "A.policy": 0, "A.optimizer": 0, "A.engine": 0,
        "B.policy": 1, "B.optimizer": 1, "B.engine": 1,
    }  # fmt: skip
    assert trl.used == [0, 1] and trl.at_once and {p.phase for p in trl.parts} == {None}
    assert {p.model: p.process for p in trl.parts} == {"A": "A", "B": "B"}  # engine in-process
    assert processes_on(trl, 1) == {(0, "B")} and "at once" in trl.how
    one = pl.place("trl", "vllm", 1)
    assert set(gpus_of(one).values()) == {0} and not one.at_once
    assert {p.phase for p in one.parts} == {"A", "B"} and processes_on(one, 0) == {
        (0, "A"),
        (0, "B"),
    }
    # one server URL serves one model at a time: A, then B
    trl_served = pl.place("trl", "vllm", 2, servers={"A": "http://a:8000", "B": "http://a:8000"})
    assert trl_served.used == [0] and not trl_served.at_once and trl_served.server_gpus == 1
    ranks = pl.place("trl", "vllm", 2, processes=2)  # accelerate: A, then B, in the ranks
    assert {p.phase for p in ranks.parts} == {"A", "B"} and {p.process for p in ranks.parts} == {
        pl.TRAINER
    }
    assert {p.process for p in pl.place("trl", "hf", 0).parts} == {pl.TRAINER}  # CPU: as before
    # the duel's colocated engines run in processes of their own; everything else in the rank's
    duel = pl.place("duel", "vllm", 2)
    assert processes_on(duel, 0) == {(0, pl.TRAINER), (0, "A.engine")}
    fsdp = pl.place("duel", "vllm", 4, processes=4, sharded=True)
    for rank in range(4):
        assert set(gpus_of(fsdp, rank).values()) == {rank}
    assert {p.shards for p in fsdp.parts if p.kind in ("policy", "optimizer")} == {4}
    assert {p.shards for p in fsdp.parts if p.kind == "engine"} == {1}  # full weights each
    ddp = pl.place("duel", "hf", 2, processes=2)
    assert {p.shards for p in ddp.parts} == {1}
    with pytest.raises(ValueError, match="one per GPU"):
        pl.place("duel", "vllm", 4, processes=2)


# ----------------------------------------------------------------------------- the trainer


@pytest.mark.parametrize("gpus", [0, 1, 2, 4])
def test_the_trainer_builds_from_the_placement(monkeypatch, gpus):
    """family_policies loads each policy on the device place() gives it and hands each engine
    its part; policy_device says the same."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    loaded, engines = {}, {}

    class Tok:
        pad_token_id, eos_token_id = 0, 0

    def fake_load_model(model, dtype=None, revision=None, device=None):
        loaded[model] = device
        return torch.nn.Linear(1, 1)

    def fake_engine(options, fam, name, model, tok, autocast=None, part=None):
        engines[name] = part
        return None

    monkeypatch.setattr(shell, "load_tokenizer", lambda *a, **k: Tok())
    monkeypatch.setattr(shell, "load_model", fake_load_model)
    monkeypatch.setattr(shell, "rollout_engine", fake_engine)
    monkeypatch.setattr(shell, "make_policy", lambda name, model, engine, *a, **k: model)
    config = load_config(PAPER)
    config["families"][0]["model_b"]["model"] = "B-model"
    fam = config["families"][0]
    settings = SimpleNamespace(
        master_dtype=None, backend="vllm", rollout_batch_size=8, vllm_gpu_memory_utilization=0.2,
        servers={}, gradient_checkpointing=False, max_new_tokens=256,
    )  # fmt: skip
    shell.family_policies(config, fam, settings, None)
    where = pl.place("duel", "vllm", gpus)
    assert loaded == {fam["model_a"]["model"]: where.part("A.policy").device, "B-model":
                      where.part("B.policy").device}  # fmt: skip
    assert engines == {m: where.part(f"{m}.engine") for m in "AB"}
    assert [shell.policy_device(i, None) for i in (0, 1)] == [
        where.part("A.policy").device,
        where.part("B.policy").device,
    ]
    if gpus >= 2:
        assert engines["B"].gpu != engines["A"].gpu  # never both engines on the first GPU


def test_each_engine_process_gets_its_gpu(monkeypatch):
    """rollout_engine starts a colocated engine with CUDA_VISIBLE_DEVICES set to the physical
    GPU of its part, and without the launcher's rank variables."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_PORT", "29500")
    started = []

    class Recorder:
        def __init__(self, factory, kwargs, env, **kw):
            started.append((factory, kwargs, env))

    monkeypatch.setattr(rollouts, "EngineProcess", Recorder)
    fam = load_config(PAPER)["families"][0]
    options = rollouts.RolloutOptions(backend="vllm", gpu_memory_utilization=0.3)
    where = pl.place("duel", "vllm", 4)
    for name in "AB":
        rollouts.rollout_engine(options, fam, name, None, None, None, where.part(f"{name}.engine"))
    (fa, ka, env_a), (_, kb, env_b) = started
    assert fa == "agon.engines.vllm:VLLMEngine" and ka["gpu_memory_utilization"] == 0.3
    assert (env_a["CUDA_VISIBLE_DEVICES"], env_b["CUDA_VISIBLE_DEVICES"]) == ("6", "7")
    assert "RANK" not in env_a and "MASTER_PORT" not in env_a
    assert ka["worker_extension_cls"] == "agon.engines.vllm.StagedWeights"
    assert pl.visible_gpus({}, 2) == ["0", "1"] and pl.visible_gpus({"CUDA_VISIBLE_DEVICES": "3"})


class StubEngine(Engine):
    """A stand-in for VLLMEngine in the engine process: it answers with the GPU it was given
    and the sum of the last weights it loaded."""

    def __init__(self, **kwargs):
        self.kwargs, self.loaded = kwargs, None

    def generate(self, prompts, n=1, sampling=None):
        text = f"{os.environ.get('CUDA_VISIBLE_DEVICES')} {self.loaded}"
        return [[Completion(text, [1], [0.0], [0], "stop")] * n for _ in prompts]

    def load_staged(self, path):
        from safetensors.torch import load_file

        self.loaded = round(sum(float(t.sum()) for t in load_file(path).values()), 3)

    def fail(self):
        raise ValueError("no")


def test_engine_process_round_trip_on_cpu():
    env = ep.engine_env("3", {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])})
    engine = ep.EngineProcess(
        "test_placement:StubEngine", {"x": 1}, env, name="A", dtype=torch.float32
    )
    try:
        (first,) = engine.generate([[{"role": "user", "content": "hi"}]], n=2)
        assert [c.text for c in first] == ["3 None", "3 None"]
        model = torch.nn.Linear(2, 1, bias=False)
        torch.nn.init.constant_(model.weight, 0.25)
        engine.sync_weights(model)
        assert engine.staged.is_file()
        assert engine.generate([[{"role": "user", "content": "hi"}]])[0][0].text == "3 0.5"
        with pytest.raises(RuntimeError, match="failed in fail"):
            engine._call("fail")
        staged = engine.staged
    finally:
        engine.close()
    assert engine.proc.returncode == 0 and not staged.exists()
    with pytest.raises(RuntimeError, match="closed"):
        engine.generate([])


# ----------------------------------------------------------------------------- the planner


def _sum_of_parts(memory, engines_sleep: bool = True) -> dict[str, float]:
    """Each device's peak recomputed from the parts the placement puts on it: their persistent
    components and a CUDA context per process there, plus the largest of: every sleeping
    engine's share awake (a rollout), or one part's transient set with the shares of the other
    models' engines beside it (an update: its own policy's engine sleeps)."""
    held: dict[str, dict] = {}
    for part, breakdowns in memory.placed:
        d = held.setdefault(device_name(part), {"keep": 0.0, "asleep": {}, "sets": [], "ps": set()})
        d["ps"].add((part.rank, part.process))
        for b in breakdowns:
            for k, v in b.components.items():
                if k == "vllm_reserved" and engines_sleep and part.kind == "engine":
                    d["asleep"][part.model] = d["asleep"].get(part.model, 0.0) + v
                elif k in PERSISTENT:
                    d["keep"] += v
            rest = sum(v for k, v in b.components.items() if k not in PERSISTENT)
            if rest:
                d["sets"].append((part.model if part.kind == "policy" else None, rest))
    out = {}
    for name, d in held.items():
        awake = sum(d["asleep"].values())
        sets = [awake] + [t + awake - d["asleep"].get(m, 0.0) for m, t in d["sets"]]
        out[name] = d["keep"] + len(d["ps"]) * ASSUMED_CUDA_CONTEXT_BYTES + max(sets)
    return out


@pytest.mark.parametrize("gpus,fsdp", [(1, False), (2, False), (4, False), (2, True), (4, True)])
def test_planned_memory_per_gpu_is_the_sum_of_the_placed_parts(gpus, fsdp):
    config = load_config(PAPER)
    config["resources"]["train"]["gpus"] = gpus
    p = plan(config, "results/table1.csv", fsdp=fsdp)
    duel = next(j for j in p.jobs if j.job.label == "train qwen3 deepmath agon seed0")
    mem = duel.memory
    assert mem.placement == pl.place(
        "duel", "vllm", gpus, servers={"A": None, "B": None}, processes=gpus if fsdp else 1,
        sharded=fsdp,
    )  # fmt: skip
    assert sorted(mem.devices) == [f"GPU {i}" for i in range(gpus)]
    for name, total in _sum_of_parts(mem).items():
        assert mem.devices[name].total == pytest.approx(total), name
    assert duel.gpus_held == gpus and duel.gpus_used == gpus
    engines = {p.model: p.gpu for p, _ in mem.placed if p.kind == "engine" and p.rank == 0}
    if gpus >= 2 and not fsdp:
        assert engines["A"] != engines["B"]  # as coded before, both sat on GPU 0
        on_gpu_0 = {p.name for p, _ in mem.placed if p.gpu == 0}
        assert "B.engine" not in on_gpu_0
    if gpus <= 2 or fsdp:  # an engine beside its policy sleeps through the policy's update
        assert max(_sum_of_parts(mem, engines_sleep=False).values()) > mem.per_device.total
    if fsdp:  # each rank holds half (a quarter) of each model and both engines
        step = mem.devices["GPU 0"].components
        unsharded = plan(load_config(PAPER), "results/table1.csv").jobs
        one = next(j for j in unsharded if j.job.label == duel.job.label).memory.devices["GPU 0"]
        assert step["A.weights"] == pytest.approx(one.components["A.weights"] / gpus)
        # both engines on each rank's GPU; at the peak (an update) one of them sleeps
        assert {"A.vllm_cuda_graphs", "B.vllm_cuda_graphs"} <= set(step)
        assert len({"A.vllm_reserved", "B.vllm_reserved"} & set(step)) == 1
        assert any(f"{gpus} ranks share each step's problems" in n for n in duel.notes)


def test_server_mode_and_grpo_are_priced_where_they_sit():
    config = load_config(PAPER)
    config["agon"]["servers"] = {"A": "http://a:8000", "B": "http://b:8001"}
    p = plan(config, "results/table1.csv")
    duel = next(j for j in p.jobs if j.job.label == "train qwen3 deepmath agon seed0")
    assert sorted(duel.memory.devices) == ["GPU 0", "GPU 1", "server A", "server B"]
    assert "A.vllm_reserved" not in duel.memory.devices["GPU 0"].components
    server = 0.9 * 150e9 + ASSUMED_CUDA_GRAPH_BYTES + ASSUMED_CUDA_CONTEXT_BYTES
    assert duel.memory.devices["server A"].total == pytest.approx(server)
    assert (duel.gpus_held, duel.gpus_used) == (4, 4)
    assert duel.gpu_hours == pytest.approx(duel.seconds / 3600 * 4)
    # GRPO on TRL: A on GPU 0 and B on GPU 1 at once, the job as long as its slower model
    grpo = next(j for j in p.jobs if j.job.label == "train qwen3 deepmath grpo seed0")
    assert (grpo.gpus_held, grpo.gpus_used) == (2, 2) and grpo.memory.placement.at_once
    assert sorted(grpo.memory.devices) == ["GPU 0", "GPU 1"]
    by_model = {m: sum(ph["seconds"] for ph in grpo.phases if ph["phase"].startswith(m))
                for m in "AB"}  # fmt: skip
    assert grpo.seconds >= max(by_model.values()) and grpo.seconds < sum(by_model.values())
    totals = p.totals("table1")
    assert totals["gpu_hours"] == pytest.approx(totals["gpu_hours_used"])  # nothing idle
    one = load_config(PAPER)
    one["resources"]["train"]["gpus"] = 1  # one GPU: A, then B, each in its own process
    grpo1 = next(j for j in plan(one, "results/table1.csv").jobs if j.job.label == grpo.job.label)
    assert (grpo1.gpus_held, grpo1.gpus_used) == (1, 1) and not grpo1.memory.placement.at_once
    assert grpo1.seconds > grpo.seconds
