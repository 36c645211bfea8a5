"""An engine in a process of its own, pinned to one GPU: how a colocated vLLM engine runs.

vLLM builds an ``LLM`` on the first GPU its process sees and does not support two ``LLM``
objects in one process on different GPUs (its maintainers' advice: one process per engine,
each with its own ``CUDA_VISIBLE_DEVICES``; docs/scale.md cites the threads). So each
colocated engine of the in-house trainers is a child process started with
``CUDA_VISIBLE_DEVICES`` set to the one GPU :func:`agon.engines.placement.place` gives it
(:func:`engine_env`), and the trainer talks to it over a pipe: ``generate`` requests and their
completions, and after each update of its policy a weight refresh.

**Weights.** NCCL does not connect two processes on the same GPU, so the refresh goes through
the host: the trainer writes the policy's current weights (gathered in full under FSDP2, cast
to the engine's dtype) to one safetensors file in shared memory (``/dev/shm``), and the engine
loads them into vLLM's model in place, tensor by tensor (a worker extension,
:class:`agon.engines.vllm.StagedWeights`), then drops its prefix cache. The file stays for the
run (one copy of the policy's weights in host memory per engine, which ``agon plan``
prices) and is removed on close. This works the same beside the policy and on a GPU of its own.

The child runs ``python -m agon.engines.process FD`` and builds its engine from a
``module:attribute`` factory and keyword arguments, so the protocol runs on CPU in the tests
with a stand-in engine; with vLLM it has not run (no GPU here).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from agon.engines.base import Completion, Engine, Messages, SamplingParams

# what a launcher (torchrun, accelerate) tells its ranks: an engine process is no rank, and
# vLLM reads some of these to decide how to start its own distributed state
LAUNCHER_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
)
LAUNCHER_PREFIXES = ("TORCHELASTIC_", "ACCELERATE_")
SHARED_MEMORY = Path("/dev/shm")  # a tmpfs on Linux: the staged weights never touch a disk


def engine_env(gpu: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an engine process pinned to the physical GPU ``gpu``: the
    trainer's, with ``CUDA_VISIBLE_DEVICES`` that one GPU and no launcher variables."""
    env = dict(os.environ if base is None else base)
    for key in list(env):
        if key in LAUNCHER_VARIABLES or key.startswith(LAUNCHER_PREFIXES):
            del env[key]
    env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return env


def staging_path(name: str) -> Path:
    """Where the weights of policy ``name``'s engine are staged: shared memory when the host
    has it, else the temporary folder; one file per trainer process and policy."""
    folder = SHARED_MEMORY if SHARED_MEMORY.is_dir() else Path(tempfile.gettempdir())
    return folder / f"agon-engine-{os.getpid()}-{name}.safetensors"


def stage_weights(model: Any, path: Path, dtype: Any) -> None:
    """Write ``model``'s parameters in ``dtype`` to ``path`` (atomically). Under FSDP2 every
    rank takes part in gathering each full parameter; each rank stages its own engine's copy."""
    # lazy: safetensors (its torch half imports torch): off agon.engines' import, which agon
    # plan reads its placement from
    from safetensors.torch import save_file

    state = {}
    for name, p in model.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p.data
        state[name.removeprefix("module.")] = full.detach().to("cpu", dtype).contiguous()
    tmp = path.with_suffix(".tmp")
    save_file(state, str(tmp))
    os.replace(tmp, path)


class EngineProcess(Engine):
    """An engine built by ``factory`` (``"module:attribute"``) with ``kwargs`` in a child
    process with environment ``env``; ``tokenizer`` is the trainer's own (the child builds its
    engine's). ``dtype`` is what staged weights are cast to (the engine's)."""

    def __init__(
        self,
        factory: str,
        kwargs: Mapping[str, Any],
        env: Mapping[str, str],
        *,
        name: str = "engine",
        tokenizer: Any = None,
        dtype: Any = None,
    ):
        self.tokenizer, self.dtype, self.name = tokenizer, dtype, name
        self.staged: Path | None = None
        parent, child = multiprocessing.Pipe()
        self.conn: Connection | None = parent
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agon.engines.process", str(child.fileno())],
            env=dict(env),
            pass_fds=(child.fileno(),),
        )
        child.close()
        try:
            self._call("start", factory, dict(kwargs))
        except BaseException:
            self.close()
            raise

    def _call(self, op: str, *args: Any) -> Any:
        if self.conn is None:
            raise RuntimeError(f"{self.name}: the engine process is closed")
        try:
            self.conn.send((op, args))
            ok, value = self.conn.recv()
        except (EOFError, OSError) as err:
            code = self.proc.poll()
            raise RuntimeError(f"{self.name}: the engine process died (exit {code})") from err
        if not ok:
            raise RuntimeError(f"{self.name}: the engine process failed in {op}:\n{value}")
        return value

    def generate(
        self, prompts: Sequence[Messages], n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        return self._call("generate", list(prompts), n, sampling)

    def sync_weights(self, model: Any) -> None:
        """Stage ``model``'s current weights and have the engine load them in place."""
        self.staged = self.staged or staging_path(self.name)
        stage_weights(model, self.staged, self.dtype)
        self._call("load_staged", str(self.staged))

    def close(self) -> None:
        """Stop the engine process and remove its staged weights."""
        if self.conn is not None:
            try:
                self._call("close")
            except RuntimeError:
                pass
            self.conn.close()
            self.conn = None
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.staged is not None:
            self.staged.unlink(missing_ok=True)


def build(factory: str, kwargs: dict) -> Any:
    """The engine ``factory`` (``"module:attribute"``) builds with ``kwargs``."""
    module, _, attr = factory.partition(":")
    return getattr(importlib.import_module(module), attr)(**kwargs)


def serve(conn: Connection) -> None:
    """The child's loop: build the engine, answer requests until ``close``."""
    engine = None
    while True:
        try:
            op, args = conn.recv()
        except EOFError:  # the trainer is gone
            return
        try:
            if op == "start":
                engine, value = build(*args), None
            elif op == "generate":
                value = engine.generate(*args)
            elif op == "load_staged":
                value = engine.load_staged(*args)
            elif op == "close":
                if engine is not None:
                    engine.close()
                conn.send((True, None))
                return
            else:
                raise ValueError(f"unknown request {op!r}")
            conn.send((True, value))
        except Exception:  # the trainer re-raises it with the child's traceback
            conn.send((False, traceback.format_exc()))


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
