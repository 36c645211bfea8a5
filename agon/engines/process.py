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
to the engine's dtype) to one safetensors file in shared memory (``/dev/shm``; the temporary
folder on disk, with a warning, when shared memory cannot hold two copies, the old file and the
new one being written), and the engine loads them into vLLM's model in place, tensor by tensor
(a worker extension, :class:`agon.engines.vllm.StagedWeights`), then drops its prefix cache.
The file holds the names of the checkpoint the engine was built from (what ``save_pretrained``
writes, :func:`checkpoint_state`), which vLLM's loader of whatever architecture it built takes:
a trainer's ``Qwen3_5ForCausalLM`` names its layers ``model.layers.*``, the Qwen3.5 checkpoint
(and vLLM's ``Qwen3_5ForConditionalGeneration``) ``model.language_model.layers.*``. The file
stays for the run (one copy of the policy's weights in host memory per engine, which ``agon
plan`` prices) and is removed on close.

**Faults.** Nothing outlives the trainer: a call waits for its answer while the engine process
lives (a liveness poll, not a blocking read, so an engine that dies mid-call, even one whose
own children still hold the pipe, is an error within seconds); the engine process leads a
process group of its own, which closing the engine (or its death) kills, vLLM's engine-core
and worker processes with it; the engine process gets SIGTERM when the trainer dies (Linux's
parent-death signal), and then, as on any exit, removes the staged files; a trainer that exits
without closing its engines closes them at exit; and staged files of trainers that died with
their engines (SIGKILL of the whole group) are removed by the next one to stage.

The child runs ``python -m agon.engines.process FD PID`` and builds its engine from a
``module:attribute`` factory and keyword arguments, so the protocol runs on CPU in the tests
with a stand-in engine, and with vLLM's CPU build (``pytest -m vllm``).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import traceback
import weakref
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from agon.engines.base import Completion, Engine, Messages, SamplingParams
from agon.engines.staging import (
    owned_files,
    remove_stale_staged,
    stage_weights,
    staging_path,
    weights_bytes,
)

# what a launcher (torchrun, accelerate) tells its ranks: an engine process is no rank, and
# vLLM reads some of these to decide how to start its own distributed state
LAUNCHER_VARIABLES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
    "MASTER_ADDR", "MASTER_PORT",
)  # fmt: skip
LAUNCHER_PREFIXES = ("TORCHELASTIC_", "ACCELERATE_")
POLL_SECONDS = 1.0  # how often a trainer waiting for an answer checks that its engine lives
CLOSE_SECONDS = 60.0  # how long a closing engine may take to shut down before it is killed
KILL_SECONDS = 5.0  # how long the killed processes of an engine's group may take to die
# the requests a trainer may make besides start and close: methods of the child's engine
REQUESTS = ("generate", "load_staged", "score", "parameter_names", "sleep", "wake_up")
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent thread exits
log = logging.getLogger(__name__)


def engine_env(gpu: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an engine process pinned to the physical GPU ``gpu``: the
    trainer's, with ``CUDA_VISIBLE_DEVICES`` that one GPU and no launcher variables."""
    env = dict(os.environ if base is None else base)
    for key in list(env):
        if key in LAUNCHER_VARIABLES or key.startswith(LAUNCHER_PREFIXES):
            del env[key]
    env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return env


class EngineProcess(Engine):
    """An engine built by ``factory`` (``"module:attribute"``) with ``kwargs`` in a child
    process with environment ``env``; ``tokenizer`` is the trainer's own (the child builds its
    engine's). ``dtype`` is what staged weights are cast to (the engine's). ``timeout``: the
    longest a call waits for a live engine's answer (None: as long as it lives)."""

    def __init__(
        self,
        factory: str,
        kwargs: Mapping[str, Any],
        env: Mapping[str, str],
        *,
        name: str = "engine",
        tokenizer: Any = None,
        dtype: Any = None,
        timeout: float | None = None,
    ):
        self.tokenizer, self.dtype, self.name, self.timeout = tokenizer, dtype, name, timeout
        self.staged: Path | None = None
        parent, child = multiprocessing.Pipe()
        self.conn: Connection | None = parent
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agon.engines.process", str(child.fileno()), str(os.getpid())],
            env=dict(env),
            pass_fds=(child.fileno(),),
            start_new_session=True,  # a group of its own: closing kills vLLM's processes too
        )
        child.close()
        # closed at the latest when the trainer's interpreter exits
        self._finalizer = weakref.finalize(self, _stop, self.name, self.proc, parent)
        try:
            self._call("start", factory, dict(kwargs), [str(p) for p in self.owned])
        except BaseException:
            self.close()
            raise

    @property
    def owned(self) -> list[Path]:
        """The files this engine's weights may be staged in (:func:`owned_files`)."""
        return owned_files(self.name, os.getpid())

    def _call(self, op: str, *args: Any) -> Any:
        if self.conn is None:
            raise RuntimeError(f"{self.name}: the engine process is closed")
        try:
            self.conn.send((op, args))
            ok, value = _answer(self.conn, self.proc, self.timeout, self.name, op)
        except TimeoutError:  # (an OSError: before the clause below)
            self._abandon()  # a late answer would be taken for the next request's
            raise
        except (EOFError, OSError) as err:
            with contextlib.suppress(subprocess.TimeoutExpired):  # its pipe closes first
                self.proc.wait(timeout=POLL_SECONDS)
            code = self.proc.returncode
            self._abandon()
            raise RuntimeError(f"{self.name}: the engine process died (exit {code})") from err
        if not ok:
            raise RuntimeError(f"{self.name}: the engine process failed in {op}:\n{value}")
        return value

    def generate(
        self, prompts: Sequence[Messages], n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        return self._call("generate", list(prompts), n, sampling)

    def sync_weights(self, model: Any) -> list[str]:
        """Stage ``model``'s current weights and have the engine load them in place; the
        names of the engine's parameters they reached (its ``load_staged``' answer)."""
        if self.staged is None:
            remove_stale_staged()
            self.staged = staging_path(self.name, weights_bytes(model, self.dtype))
        stage_weights(model, self.staged, self.dtype)
        return self._call("load_staged", str(self.staged))

    def score(self, token_ids: Sequence[int]) -> list[float]:
        """The engine's log-prob of each token of ``token_ids`` after the first
        (:meth:`agon.engines.vllm.VLLMEngine.score`)."""
        return self._call("score", list(token_ids))

    def parameter_names(self) -> list[str]:
        """The names of the parameters of the engine's model."""
        return self._call("parameter_names")

    def sleep(self, level: int = 1) -> None:
        """Have the engine free its accelerator memory (:meth:`VLLMEngine.sleep
        <agon.engines.vllm.VLLMEngine.sleep>`: a no-op where vLLM has no sleep mode)."""
        self._call("sleep", level)

    def wake_up(self) -> None:
        """Have the engine take back what :meth:`sleep` freed."""
        self._call("wake_up")

    def close(self) -> None:
        """Stop the engine process (and its process group) and remove its staged weights."""
        self._finalizer()
        self.conn = None
        for path in self.owned:
            path.unlink(missing_ok=True)

    def _abandon(self) -> None:
        """Kill a dead or stuck engine's process group at once (no close request: it would
        not answer); :meth:`close` still removes the staged weights."""
        self._finalizer.detach()
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        _kill_group(self.proc)


def _answer(
    conn: Connection, proc: subprocess.Popen, timeout: float | None, name: str, op: str
) -> Any:
    """The engine's answer to the request just sent, waiting while ``proc`` lives (and at most
    ``timeout`` seconds): a dead engine is an error, even one whose children still hold the
    pipe open (a blocking read would wait for them)."""
    start = time.monotonic()
    while not conn.poll(POLL_SECONDS):
        if proc.poll() is not None:
            raise EOFError(f"exit {proc.returncode}")
        if timeout is not None and time.monotonic() - start > timeout:
            raise TimeoutError(
                f"{name}: the engine process did not answer {op} in {timeout:.0f} s; raise the "
                "EngineProcess timeout if the engine is slow rather than stuck"
            )
    return conn.recv()


def _stop(name: str, proc: subprocess.Popen, conn: Connection) -> None:
    """Close an engine process: ask it to close, wait for it (:data:`CLOSE_SECONDS`), kill it
    if it does not exit, then kill what is left of its process group (vLLM's processes, or
    anything holding the pipe)."""
    if not conn.closed:
        with contextlib.suppress(EOFError, OSError, TimeoutError):
            conn.send(("close", ()))
            _answer(conn, proc, CLOSE_SECONDS, name, "close")
        conn.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=CLOSE_SECONDS)
    _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the engine process and its process group (what it started that is still there:
    vLLM's processes, anything holding the pipe), reap it, and wait (a few seconds at most)
    until the group is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    deadline = time.monotonic() + KILL_SECONDS
    with contextlib.suppress(ProcessLookupError, PermissionError):
        while time.monotonic() < deadline:
            os.killpg(proc.pid, 0)  # raises once the group is gone
            time.sleep(0.05)


def build(factory: str, kwargs: dict) -> Any:
    """The engine ``factory`` (``"module:attribute"``) builds with ``kwargs``."""
    module, _, attr = factory.partition(":")
    return getattr(importlib.import_module(module), attr)(**kwargs)


_OWNED: list[str] = []  # the staged files this engine process removes when it exits


def remove_owned() -> None:
    """Remove the staged files the trainer named (idempotent: the SIGTERM handler and
    ``serve``'s cleanup may both run it, one interrupting the other)."""
    for path in list(_OWNED):
        with contextlib.suppress(OSError):
            os.unlink(path)


def serve(conn: Connection) -> None:
    """The child's loop: build the engine, answer requests until ``close`` or the trainer is
    gone; on any exit, remove the staged files the trainer named and close the engine."""
    engine = None
    try:
        while True:
            try:
                op, args = conn.recv()
            except EOFError:  # the trainer is gone
                return
            try:
                if op == "start":
                    factory, kwargs, owned = args
                    _OWNED[:] = [str(path) for path in owned]
                    engine, value = build(factory, kwargs), None
                elif op == "close":
                    conn.send((True, None))
                    return
                elif op in REQUESTS:
                    value = getattr(engine, op)(*args)
                else:
                    raise ValueError(f"unknown request {op!r}")
                conn.send((True, value))
            except Exception:  # the trainer re-raises it with the child's traceback
                conn.send((False, traceback.format_exc()))
    finally:
        remove_owned()
        if engine is not None:
            engine.close()


def _on_sigterm(*_: Any) -> None:
    """Remove the staged files first, then exit: the signal may land inside ``serve``'s own
    cleanup (the trainer's death closes the pipe and sends it at once), and the exit it
    raises there would skip the rest of that cleanup. A second SIGTERM is ignored, so that it
    cannot cut vLLM's own shutdown short either."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    remove_owned()
    sys.exit(128 + signal.SIGTERM)


def die_with(parent: int) -> None:
    """Have this process get SIGTERM when its parent (pid ``parent``) dies, and exit cleanly
    on it (the staged files removed, ``serve``'s cleanup run). Linux's parent-death signal,
    which follows the thread that started the process: the trainer starts its engines from
    its main thread. Elsewhere the closed pipe ends ``serve`` once it waits for the next
    request."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the signal was asked for
        sys.exit(128 + signal.SIGTERM)


if __name__ == "__main__":
    die_with(int(sys.argv[2]))
    serve(Connection(int(sys.argv[1])))
