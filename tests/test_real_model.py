"""The real checkpoint end to end: SmolLM2-135M-Instruct (fetched from its registry package and
dequantized once, ``tests/real_models.py``) through the cascade, one GRPO step on TRL and one
duel step, on real ``gsm_symbolic`` problems of reasoning-gym.

What the tiny random models of the other tests cannot show is the point here: the checkpoint's
own chat template and special tokens, its eos, a 49k vocabulary through the packed and fused
log-prob paths, and TRL's trainer on a real tokenizer. Budgets are minimal (2 problems, 2
samples, 32 new tokens), so nothing here measures quality.

Training needs reward spread: with 32 new tokens a 135M model never reaches a ``\\boxed{}``
answer, so the real grader scores every sample wrong, every group's advantage is 0 and no
weight moves. The training tests therefore keep the real problems and prompts but grade with
:class:`LongestWins` (the longest completion of each problem in a grading call is "correct"),
which gives every group of two or more samples a spread; the real grader is exercised by the
cascade test.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
import yaml

from agon.grading.verdict import Verdict
from agon.tasks.base import Problem
from agon.tasks.reasoning_gym import ReasoningGymTask

pytest.importorskip("reasoning_gym", reason="the real tier's extra: pip install 'agon[real]'")

pytestmark = [pytest.mark.slow, pytest.mark.real]

FAMILY = "smollm2"
MAX_NEW_TOKENS = 32
# reasoning-gym draws the splits; a handful each keeps the task instant
GSM = {"generator": "gsm_symbolic", "train_size": 4, "validation_size": 2, "test_size": 6}
TURN_END = "<|im_end|>"  # SmolLM2's end of turn (ChatML), its eos


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread, as the real tier's jobs run (``resources: threads: 1``): on a shared
    machine, multi-threaded kernels slow down under oversubscription. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class LongestWins(ReasoningGymTask):
    """Real gsm_symbolic problems and prompts; in each grading call, the longest completion of
    each problem (ties: the later text in sort order) is "correct", the others wrong."""

    name = "gsm_longest_wins"

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        best: dict[str, int] = {}
        for i, (p, text) in enumerate(zip(problems, completions)):
            j = best.get(p.id)
            if j is None or (len(text), text) > (len(completions[j]), completions[j]):
                best[p.id] = i
        winners = set(best.values())
        return [
            Verdict(i in winners, "graded", extracted=None, seconds=0.0)
            for i in range(len(completions))
        ]


def real_config(
    root: Path, model: Path, task: str = "reasoning_gym", **sections: dict
) -> tuple[Path, dict]:
    """A config whose one family has SmolLM2 as both A and B, on ``task`` (gsm_symbolic)."""
    from agon.tasks import register_task

    register_task(LongestWins.name, LongestWins)
    config = {
        "families": [
            {
                "name": FAMILY,
                "model_a": {"model": str(model)},
                "model_b": {"model": str(model)},
                "dtype": "float32",
                # a gsm_symbolic solve prompt is ~100-250 tokens with the template; a reader
                # prompt adds the draft
                "max_prompt_tokens": 1024,
                "max_new_tokens": MAX_NEW_TOKENS,
                "draft_view": "full",
            }
        ],
        "tasks": [{"name": task, "params": dict(GSM)}],
        "methods": ["base_cascade", "grpo", "agon"],
        "grading": {"workers": 1},
        "eval": {"split": "test", "n_samples": 1, "k": [1], "temperature": 0.0, "bootstrap": 100},
        "train": {
            "steps": 1,
            "problems_per_step": 2,
            "num_generations": 2,
            "learning_rate": 1e-5,
            "micro_batch_size": 4,
            "rollout_batch_size": 8,
            "checkpoint_every": 0,
            "budget": {"match": "steps"},
        },
        # the reads of a problem's drafts are one group: the reader's group has a spread too
        "agon": {"num_reads": 1, "reader_group": "problem"},
    }
    for key, value in sections.items():
        config[key] = {**config.get(key, {}), **value}
    path = root / "config-real.yaml"
    path.write_text(yaml.safe_dump(config))
    from agon.config import load_config

    return path, load_config(path)


def moved(before: Path, after: Path) -> list[str]:
    """Names of the parameters that differ between two saved models."""
    from transformers import AutoModelForCausalLM

    a = AutoModelForCausalLM.from_pretrained(before, dtype=torch.float32).state_dict()
    b = AutoModelForCausalLM.from_pretrained(after, dtype=torch.float32).state_dict()
    assert a.keys() == b.keys()
    return [k for k in a if not torch.equal(a[k], b[k])]


def test_cascade_on_gsm_symbolic_grades_records_and_reads_the_draft(smollm2, tmp_path):
    from agon.engines.base import render_prompt
    from agon.engines.hf import load_tokenizer
    from agon.evaluation.from_config import evaluate_from_config
    from agon.tasks import task_from_config

    _, config = real_config(tmp_path, smollm2)
    out = tmp_path / "eval"
    summary = evaluate_from_config(
        config, FAMILY, "reasoning_gym", "base_cascade", out, max_problems=3, progress=False
    )
    task = task_from_config(config, "reasoning_gym")
    problems = {p.id: p for p in task.problems("test")[:3]}
    task.close()
    records = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert summary["n_problems"] == 3 and len(records) == 3
    assert {r["problem_id"] for r in records} == set(problems)
    tok = load_tokenizer(smollm2)
    for r in records:
        p = problems[r["problem_id"]]
        assert r["gold"] == p.answer and r["system"] == "base_cascade"
        # graded by the real math grader: a verdict, never an error or a timeout
        assert r["status"] in ("graded", "no_answer") and isinstance(r["correct"], bool)
        assert 0 < r["draft_tokens"] <= MAX_NEW_TOKENS
        assert 0 < r["completion_tokens"] <= MAX_NEW_TOKENS
        assert r["total_tokens"] == r["draft_tokens"] + r["completion_tokens"]
        assert r["finish_reason"] in ("stop", "length")
        (draft,) = r["drafts"]
        assert draft.strip() and TURN_END not in draft and TURN_END not in r["completion"]
        # the reader's prompt holds the problem and the draft, in SmolLM2's own chat template
        (msg,) = r["prompt"]
        assert p.question in msg["content"] and f"<rival_attempt>\n{draft}\n" in msg["content"]
        ids = render_prompt(tok, r["prompt"], max_prompt_tokens=1024)
        text = tok.decode(ids)
        assert r["prompt_tokens"] == len(ids)
        assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
        assert draft in text
        assert r["prompt_tokens"] > len(tok(draft, add_special_tokens=False)["input_ids"])


def test_sampled_logprobs_are_what_the_trainer_scores(smollm2):
    """The engine's logprobs (left-padded batch, KV cache) equal the duel trainer's scoring of
    the same tokens, packed and padded (the fused LM head over the 49k vocabulary): the rollout
    is on-policy for the update."""
    from agon.engines import SamplingParams
    from agon.engines.hf import HFEngine
    from agon.logprobs import completion_logprobs, enable_token_logprobs
    from agon.tasks import get_task

    task = get_task("reasoning_gym", **GSM)
    p, q = task.problems("test")[:2]
    task.close()
    engine = HFEngine(smollm2, dtype="float32", device="cpu", batch_size=8)
    # prompts of very different lengths share a batch: rows are left-padded
    prompts = [
        task.solve_prompt(p),
        [{"role": "user", "content": "What is 2 + 2?"}],
        task.reader_prompt(q, "It is 5."),
    ]
    out = engine.generate(prompts, n=2, sampling=SamplingParams(max_new_tokens=16, seed=0))
    comps = [c for cs in out for c in cs]
    assert len({len(c.prompt_token_ids) for c in comps}) == 3
    width = max(len(c.token_ids) for c in comps)
    sampled = torch.zeros(len(comps), width)
    for i, c in enumerate(comps):
        assert 0 < len(c.token_ids) == len(c.logprobs) <= 16
        sampled[i, : len(c.logprobs)] = torch.tensor(c.logprobs)
    enable_token_logprobs(engine.model, temperature=1.0)
    with torch.no_grad():
        for packing in (True, False):
            scored, _ = completion_logprobs(
                engine.model,
                [c.prompt_token_ids for c in comps],
                [c.token_ids for c in comps],
                width,
                engine.pad_id,
                packing,
            )
            assert float((scored - sampled).abs().max()) < 1e-3, packing


def test_one_grpo_step_on_trl(smollm2, tmp_path):
    from agon.tasks import task_from_config
    from baselines.grpo import GRPOSettings, train_grpo

    _, config = real_config(tmp_path, smollm2, task=LongestWins.name)
    fam = config["families"][0]
    settings = GRPOSettings.from_config(config, fam)
    task = task_from_config(config, LongestWins.name)
    try:
        metrics = train_grpo(config, fam, task, settings, "a", tmp_path / "A", tmp_path / "work")
    finally:
        task.close()
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert len(rows) == 1
    row = rows[0]
    for key in ("A/drafter/correct", "A/entropy", "A/grad_norm", "A/drafter/mean_length"):
        assert key in row and math.isfinite(row[key]), (key, row)
    assert row["A/drafter/correct"] == 0.5  # one winner in each group of two
    assert row["A/drafter/frac_zero_spread"] == 0.0 and row["A/grad_norm"] > 0
    assert 0 < row["A/drafter/mean_length"] <= MAX_NEW_TOKENS
    assert moved(smollm2, tmp_path / "A")
    assert (tmp_path / "A" / "chat_template.jinja").is_file()  # the saved tokenizer keeps it


def test_one_duel_step_with_smollm2_as_both_models(smollm2, tmp_path):
    from agon.cli import main
    from tests.duel_helpers import train_args

    path, _ = real_config(tmp_path, smollm2, task=LongestWins.name)
    out = tmp_path / "out"
    args = train_args(path, out, "agon", family=FAMILY, task=LongestWins.name)
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["step"] == 0
    row = rows[0]
    # step 0: A drafts, B reads (train.role_schedule alternate)
    for key in (
        "A/drafter/correct",
        "B/reader/correct",
        "A->B/duel/reader_wins",
        "A/loss",
        "B/loss",
        "A/grad_norm",
        "B/grad_norm",
        "A/trained_tokens",
        "B/trained_tokens",
        "tokens_generated",
    ):
        assert key in row and math.isfinite(row[key]), (key, row)
    assert row["A/drafter/frac_zero_spread"] == 0.0 and row["B/reader/frac_zero_spread"] == 0.0
    assert row["A/grad_norm"] > 0 and row["B/grad_norm"] > 0
    # 2 problems x 2 drafts, and one read of each draft
    assert row["A/drafter/completions"] == 4 and row["B/reader/completions"] == 4
    assert 0 < row["tokens_generated"] <= 8 * MAX_NEW_TOKENS
    assert row["B/reader/drafts_cut"] == 0
    assert moved(smollm2, out / "A") and moved(smollm2, out / "B")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "agon" and summary["steps"] == 1
