"""Training and evaluation through real vLLM on CPU (its CPU build; ``pytest -m vllm`` where it
is installed, as tests/test_vllm_cpu.py): the duel with ``train.backend: vllm`` (an engine
process per policy) and GRPO on TRL's colocated vLLM, each checked after every weight sync
(the engine's log-probs of a fixed text are the trainer's); a cascade evaluated with
``eval.backend: vllm``, its two engines in one process, as ``agon eval`` builds them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from test_vllm_cpu import MAX_LEN, TEXT, TOL, text_logprobs

from agon.config import load_config
from agon.engines.hf import load_tokenizer
from agon.engines.process import EngineProcess
from agon.evaluation.from_config import evaluate_from_config
from agon.random_models import build_tiny_model
from agon.training.run import run

pytestmark = pytest.mark.vllm
vllm = pytest.importorskip(
    "vllm", reason="vLLM is not installed here (.ci/run installs its CPU build in .venv-vllm)"
)


def _duel_config(root: Path, steps: int = 2, backend: str = "hf", **sections) -> Path:
    """A config of two tiny Qwen3 models vLLM takes (under ``root``) on the parity task."""
    models = [build_tiny_model("qwen3", root / f"qwen3-{s}", seed=s, vllm=True) for s in (0, 1)]
    config = {
        "families": [
            {
                "name": "tiny",
                "model_a": {"model": str(models[0])},
                "model_b": {"model": str(models[1]), "system_prompt": "Be bold."},
                "dtype": "float32",
                "max_prompt_tokens": 200,
                "max_new_tokens": 6,
            }
        ],
        "tasks": [{"name": "parity", "params": {}}],
        "methods": ["grpo", "agon"],
        "train": {
            "steps": steps,
            "problems_per_step": 2,
            "num_generations": 4,
            "learning_rate": 1e-2,
            "checkpoint_every": 0,
            "backend": backend,
            "budget": {"match": "steps"},
        },
        "agon": {"num_reads": 2},
        **sections,
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_duel_trains_through_vllm_engines(tmp_path, monkeypatch):
    """Two steps of the duel (agon.duel, through the trainer shell and ``rollout_engine``) with
    ``train.backend: vllm``: an engine process per policy samples, each update is synced, and
    after every sync the engine's log-probs of a fixed text are the trainer's."""
    path = _duel_config(tmp_path, backend="vllm")
    models = [tmp_path / f"qwen3-{seed}" for seed in (0, 1)]
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    # rollout_engine pins each engine to a GPU of CUDA_VISIBLE_DEVICES; vLLM's CPU build
    # ignores the variable
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    ids = load_tokenizer(models[0])(TEXT, add_special_tokens=False)["input_ids"]
    checked: list[tuple[str, float]] = []
    sync = EngineProcess.sync_weights

    def sync_and_check(self, model):
        loaded = sync(self, model)
        got, want = self.score(ids), text_logprobs(model, ids)
        tol = TOL["float32"]
        assert got == pytest.approx(want, abs=tol), f"{self.name} after sync {len(checked)}"
        checked.append((self.name, max(abs(a - b) for a, b in zip(got, want))))
        return loaded

    monkeypatch.setattr(EngineProcess, "sync_weights", sync_and_check)
    summary = run(path, "tiny", "parity", "agon", 0, tmp_path / "run")
    assert summary["steps"] == 2
    assert sorted({name for name, _ in checked}) == ["A", "B"] and len(checked) >= 4
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [0, 1]


def test_grpo_through_trl_with_colocated_vllm(tmp_path, monkeypatch):
    """Two steps of GRPO on TRL (``grpo.use_vllm``, colocate mode: vLLM in the trainer
    process), A then B, each sampling from its engine; after every weight sync the engine's
    log-probs of a fixed text are the trainer's, and between an engine's first and last sync
    they moved by more than that tolerance (an engine left at its first weights would fail).

    TRL's own sync loads tensor by tensor into parameters vLLM's CPU build has repacked for
    its kernels ('Parameter' object has no attribute 'weight_loader'); the trainer syncs
    through vLLM's in-place reload (:func:`agon.engines.vllm.reload_in_place`), and without it
    this test fails so. TRL builds its engine in the checkpoint's dtype as vLLM resolves it
    (bfloat16 on a CPU for a float32 checkpoint), so the tolerance is that dtype's."""
    import baselines.grpo.trainer as grpo_trainer
    from agon.engines.vllm import reload_in_place

    path = _duel_config(tmp_path, grpo={"use_vllm": True, "vllm_mode": "colocate"})
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    synced: dict[str, list[list[float]]] = {}

    def reload_and_check(generation):
        reload_in_place(generation)
        sync = generation.sync_weights
        ids = generation.processing_class(TEXT, add_special_tokens=False)["input_ids"]
        dtype = str(generation.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        seen = synced.setdefault(f"{generation.model.name_or_path} ({dtype})", [])

        def sync_and_check():
            sync()
            # temperature 1: TRL's engine reports processed log-probs, here the raw ones
            params = vllm.SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0)
            prompt = {"prompt_token_ids": ids}
            (out,) = generation.llm.generate([prompt], params, use_tqdm=False)
            got = [float(s[t].logprob) for s, t in zip(out.prompt_logprobs[1:], ids[1:])]
            # a plain forward: TRL's model carries its own fused head, left as TRL set it
            with torch.no_grad():
                logits = generation.model(input_ids=torch.tensor([ids])).logits[0, :-1]
            rows = logits.float().log_softmax(-1)
            want = rows.gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()
            assert got == pytest.approx(want, abs=TOL[dtype]), f"sync {len(seen)} ({dtype})"
            seen.append(got)

        generation.sync_weights = sync_and_check

    monkeypatch.setattr(grpo_trainer, "reload_in_place", reload_and_check)
    assert run(path, "tiny", "parity", "grpo", 0, tmp_path / "run")["steps"] == 2
    assert len(synced) == 2, synced.keys()  # A's engine, then B's
    for name, seen in synced.items():
        dtype = name.rsplit("(", 1)[1].rstrip(")")
        moved = max(abs(a - b) for a, b in zip(seen[0], seen[-1]))
        assert len(seen) >= 2 and moved > TOL[dtype], (name, len(seen), moved)


def test_a_cascade_evaluates_through_two_vllm_engines_in_one_process(tmp_path, monkeypatch):
    """``agon eval``'s path with ``eval.backend: vllm`` on the base cascade: A drafts and B
    reads, each a vLLM engine built in this process (vLLM runs each engine's core in a process
    of its own); every sample's reader prompt holds the draft A's engine wrote."""
    ev = {"split": "test", "n_samples": 1, "k": [1], "temperature": 0.0, "max_problems": 6}
    path = _duel_config(tmp_path, eval=ev | {"bootstrap": 100})
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    config = load_config(path)
    out = tmp_path / "eval"
    summary = evaluate_from_config(
        config, "tiny", "parity", "base_cascade", out, backend="vllm", progress=False,
        engine_kwargs={"enforce_eager": True, "max_model_len": MAX_LEN},
    )  # fmt: skip
    rows = [json.loads(line) for line in (out / "samples.jsonl").open()]
    assert len(rows) == 6 and {r["system"] for r in rows} == {"base_cascade"}
    for row in rows:
        (draft,) = row["drafts"]
        assert row["draft_tokens"] > 0 and draft in row["prompt"][-1]["content"], row
        assert row["completion_tokens"] > 0 and isinstance(row["correct"], bool), row
    assert summary["backend"] == "vllm" and len(summary["models"]["fingerprints"]) == 2
