"""Where each part of a training job sits: the policies, their optimizer states, their rollout
engines and the helpers, on the job's GPUs (or the CPU, or a server outside the job).

:func:`place` is the one decision. The trainer builds from it
(:func:`agon.training.shell.family_policies`: each policy's device, each engine's process and
GPU) and ``agon plan`` prices from it (:mod:`agon.plan.memory`: a GPU's memory is the sum of
what :func:`place` puts on it), so the two cannot disagree. ``docs/scale.md`` says why it is
this placement.

**One process** (the workflow's launch: ``python -m agon train``, ``resources.train.gpus``
GPUs visible):

- the in-house trainers (``runs`` ``duel`` or ``solo``: both policies at once) put policy A and
  its optimizer states on GPU 0, B's on GPU 1 when there are two GPUs, else both on GPU 0;
- a colocated vLLM engine (``train.backend: vllm``, no server) runs in a process of its own,
  pinned to one GPU by ``CUDA_VISIBLE_DEVICES`` (:mod:`agon.engines.process`): beside its
  policy, or on a GPU of its own when the job holds one for each engine besides the policies'
  (four GPUs for two policies: engines on GPUs 2 and 3). vLLM does not pin two ``LLM`` objects
  of one process to different GPUs; its maintainers advise one process per engine;
- a server (``agon.servers``: a URL per policy) is a ``trl vllm-serve`` on a GPU outside the
  job (started beside it, config/accelerate/README.md);
- the transformers engine (``train.backend: hf``) samples from the live policy: its KV cache
  sits on the policy's GPU;
- helpers (a Cliff or OPD teacher) load on the process's default device, GPU 0;
- GRPO on TRL (``runs`` ``trl``) trains each model in a process of its own that sees one GPU
  (``CUDA_VISIBLE_DEVICES``): transformers' Trainer wraps a model in ``nn.DataParallel`` when
  one process sees several GPUs, which TRL's GRPOTrainer refuses, and a process holds one
  colocated vLLM (TRL's colocate mode), which it tears down by exiting. With two GPUs A trains
  on GPU 0 and B on GPU 1 at the same time; with one (or with ``grpo.vllm_mode: server``, whose
  one URL serves one model at a time) A, then B, on GPU 0.

**Several processes** (``accelerate launch``, one per GPU): accelerate puts everything a rank
prepares on the rank's own device, so each rank holds its share of both policies (all of them
replicated under DDP, ``1 / processes`` of weights, gradients and optimizer states under
FSDP), its own colocated engines and helpers, on its GPU. GRPO on TRL trains A, then B, in the
ranks themselves (one engine at a time: the first is torn down before the second is built).

``Part.process`` names the operating-system process that holds a part (``agon plan`` prices a
CUDA context per process on each GPU it touches).

With no GPU everything is on the CPU (the toy world, the tests).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

POLICIES = ("A", "B")
INHOUSE = ("duel", "solo")  # agon.registry.RUNS that hold both policies at once
BACKENDS = ("hf", "vllm")
TRAINER = "trainer"  # Part.process of what the training process (a rank) holds itself


@dataclass(frozen=True)
class Part:
    """One part of a job and where it sits.

    ``kind``: ``policy`` (weights, gradients, activations), ``optimizer`` (AdamW's moments),
    ``engine`` (a rollout engine: ``live`` on the policy itself, ``vllm`` in a process of its
    own or, under TRL, in the trainer's), ``server`` (a vLLM server outside the job) or
    ``helpers`` (frozen helper models). ``gpu``: the job's GPU index (None: the CPU, or for a
    server a GPU outside the job). ``rank``: the training process that holds it. ``shards``:
    FSDP keeps ``1 / shards`` of it per rank. ``phase``: parts of one phase (TRL's model A, then
    model B) are never held at the same time as another phase's. ``process``: the process that
    holds it (:data:`TRAINER`, the rank's own; ``"A.engine"``, a colocated engine's; ``"A"``,
    a TRL model's process of its own; ``"server A"``).
    """

    name: str
    model: str
    kind: str
    gpu: int | None
    rank: int = 0
    engine: str | None = None  # live | vllm, for an engine or a server
    shards: int = 1
    phase: str | None = None
    process: str = "trainer"

    @property
    def device(self) -> str | None:
        """The torch device of a part in its rank's process (None: the default device)."""
        return None if self.gpu is None else f"cuda:{self.gpu}"


@dataclass(frozen=True)
class Placement:
    """Every part of a job, and how many GPUs and training processes it has."""

    gpus: int
    processes: int
    parts: tuple[Part, ...]
    how: str  # one line, for the plan

    def part(self, name: str, rank: int = 0) -> Part:
        """The part ``name`` (``"A.policy"``, ``"B.engine"``) of rank ``rank``."""
        for p in self.parts:
            if p.name == name and p.rank == rank:
                return p
        raise KeyError(f"no part {name!r} for rank {rank} in this placement")

    def on(self, gpu: int | None) -> list[Part]:
        """The parts on the job's GPU ``gpu`` (None: on the CPU)."""
        return [p for p in self.parts if p.gpu == gpu and p.kind != "server"]

    @property
    def used(self) -> list[int]:
        """The job's GPUs that hold something."""
        return sorted({p.gpu for p in self.parts if p.gpu is not None and p.kind != "server"})

    @property
    def servers(self) -> list[Part]:
        """The servers outside the job."""
        return [p for p in self.parts if p.kind == "server"]

    @property
    def at_once(self) -> bool:
        """Whether the models train at the same time in processes of their own (TRL's GRPO on
        two GPUs): a job's time is then its slower model's, not the sum."""
        return any(p.process in POLICIES for p in self.parts) and not any(
            p.phase for p in self.parts
        )

    @property
    def server_gpus(self) -> int:
        """The GPUs the servers hold, one each (TRL's models, one at a time, share one)."""
        return len({p.model if p.phase is None else "" for p in self.servers})


def place(
    runs: str,
    backend: str,
    gpus: int,
    *,
    servers: Mapping[str, str | None] | None = None,
    processes: int = 1,
    sharded: bool = False,
    helpers: bool = False,
) -> Placement:
    """Where every part of a training job sits (see the module docstring).

    ``runs``: how the method runs (:data:`agon.registry.RUNS`); ``backend``: its rollout
    engine (``train.backend``, or ``vllm`` for TRL with ``grpo.use_vllm``); ``gpus``: the GPUs
    the job (each process, with one process) sees; ``servers``: a URL (or None) per policy;
    ``processes``: the training processes (one per GPU under accelerate); ``sharded``: FSDP
    over them; ``helpers``: the job holds helper models (teachers).
    """
    if backend not in BACKENDS:
        raise ValueError(f"rollout backend {backend!r}: expected one of {BACKENDS}")
    if runs not in (*INHOUSE, "trl"):
        raise ValueError(f"runs {runs!r}: expected duel, solo or trl")
    servers = servers or {}
    if processes > 1 and gpus and processes != gpus:
        raise ValueError(f"{processes} processes on {gpus} GPUs: accelerate runs one per GPU")
    parts: list[Part] = []
    shards = processes if (sharded and gpus) else 1
    apart = runs == "trl" and processes == 1 and gpus >= 1  # a process per model, one GPU each
    at_once = apart and gpus >= len(POLICIES) and not any(servers.get(m) for m in POLICIES)
    for rank in range(processes):
        own = rank if processes > 1 else 0  # a rank's own GPU
        if not gpus:
            own = None
        for i, m in enumerate(POLICIES):
            gpu = own
            if processes == 1 and gpus >= 2 and (runs in INHOUSE or at_once):
                gpu = i  # one policy per GPU
            phase = m if runs == "trl" and not at_once else None  # TRL: one model at a time
            proc = m if apart else TRAINER
            for kind in ("policy", "optimizer"):
                parts.append(Part(f"{m}.{kind}", m, kind, gpu, rank, None, shards, phase, proc))
            if backend == "hf" or not gpus:
                parts.append(Part(f"{m}.engine", m, "engine", gpu, rank, "live", 1, phase, proc))
            elif servers.get(m):
                parts.append(
                    Part(f"{m}.engine", m, "server", None, rank, "vllm", 1, phase, f"server {m}")
                )
            else:
                spare = processes == 1 and runs in INHOUSE and gpus >= 2 * len(POLICIES)
                where = len(POLICIES) + i if spare else gpu
                # TRL's colocated vLLM lives in its trainer's process; ours in one of its own
                owner = proc if runs == "trl" else f"{m}.engine"
                parts.append(Part(f"{m}.engine", m, "engine", where, rank, "vllm", 1, phase, owner))
        if helpers:
            parts.append(Part("helpers", "helpers", "helpers", own, rank))
    return Placement(
        gpus, processes, tuple(parts), _describe(runs, backend, gpus, processes, shards, parts)
    )


def _describe(
    runs: str, backend: str, gpus: int, processes: int, shards: int, parts: list[Part]
) -> str:
    """One line: where the policies and the engines sit."""
    if not gpus:
        return "everything on the CPU" + (f" ({processes} processes)" if processes > 1 else "")
    if processes > 1:
        how = f"FSDP over {processes} GPUs" if shards > 1 else f"DDP over {processes} GPUs"
        what = "each model sharded" if shards > 1 else "each model replicated"
        trl = "; TRL: A, then B" if runs == "trl" else ""
        return f"{how}: {what}, each rank's engines on its GPU{trl}"
    engines = {p.model: p for p in parts if p.name.endswith(".engine") and p.rank == 0}
    if runs == "trl":
        where = "a server" if any(p.kind == "server" for p in engines.values()) else "its GPU"
        if any(p.phase for p in parts):
            return (
                f"TRL: A, then B, on GPU 0, each in a process of its own seeing one GPU, its "
                f"{backend} engine on {where}"
            )
        return (
            f"TRL: A on GPU 0 and B on GPU 1 at once, each in a process of its own seeing one "
            f"GPU, its {backend} engine on {where}"
        )
    policy = {p.model: p.gpu for p in parts if p.kind == "policy" and p.rank == 0}
    said = []
    for m in POLICIES:
        e = engines[m]
        if e.kind == "server":
            said.append(f"{m} on GPU {policy[m]}, its engine a server outside the job")
        elif e.engine == "live":
            said.append(f"{m} on GPU {policy[m]} (samples from itself)")
        elif e.gpu == policy[m]:
            said.append(f"{m} and its engine on GPU {policy[m]}")
        else:
            said.append(f"{m} on GPU {policy[m]}, its engine on GPU {e.gpu}")
    return "; ".join(said)


def visible_gpus(env: Mapping[str, str] | None = None, count: int | None = None) -> list[str]:
    """The physical ids of the GPUs a process sees, in the order it numbers them: the list
    in ``CUDA_VISIBLE_DEVICES`` when it is set, else ``0 .. count - 1``."""
    env = os.environ if env is None else env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and listed.strip():
        return [d.strip() for d in listed.split(",") if d.strip()]
    return [str(i) for i in range(count or 0)]


def place_eval(models: list[str], backend: str, gpus: int) -> Placement:
    """Where an evaluation's engines sit: every distinct model of the system (its ``models``),
    each in its own engine, on the job's first GPU (``agon eval`` builds them on the default
    device), or on the CPU. ``backend``: ``eval.backend``. A vLLM engine's work runs in a
    process of its own (vLLM's engine core); transformers' in the evaluation's."""
    gpu = 0 if gpus else None
    kind = "vllm" if backend == "vllm" and gpus else "hf"
    parts = tuple(
        Part(f"{m}.engine", m, "engine", gpu, engine=kind,
             process=f"{m}.engine" if kind == "vllm" else TRAINER)
        for m in models
    )  # fmt: skip
    where = "GPU 0" if gpus else "the CPU"
    what = "vLLM engine, its share reserved" if kind == "vllm" else "transformers engine"
    return Placement(gpus, 1, parts, f"each model's {what}, on {where}")
