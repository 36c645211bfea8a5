"""``bench/bench_duel.py``: the duel it times trains both policies (K = 2 reads per draft, so
the reader's groups have spread; with K = 1 the reader's update is a zero-advantage step and
the ratio would set a one-update duel against two solo updates), its second solo step has the
reader's shape (P x G prompts around real drafts, K samples each), the timed sides take turns,
TRL's side is the GRPO baseline as the product builds it, and our rollout's fast path (what
``solo.step_over_trl`` times) draws the samples the per-step draws did."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from types import SimpleNamespace

import torch

from agon import duel
from agon.engines import hf
from agon.tasks.synthetic import ParityTask
from bench import bench_duel as bench


def test_sides_are_timed_in_turn():
    """One warm-up call of each side, then one call of each side per round."""
    calls = []
    fns = [lambda i, name=name: calls.append((name, i)) or {"tokens": 1} for name in "abc"]
    out = bench._time_interleaved(fns, 2)
    assert calls == [("a", -1), ("b", -1), ("c", -1)] + [
        (name, i) for i in range(2) for name in "abc"
    ]
    assert [len(rows) for rows in out] == [2, 2, 2]


def test_reader_side_has_the_duels_shape():
    """One solo problem per draft, problem-major as the duel orders its reads, each shown its
    own draft in the reader prompt; K samples each."""
    task = ParityTask()
    problems = (task.problems("train") * 2)[:3]
    roll = SimpleNamespace(
        drafts=[[SimpleNamespace(text=f"draft {j}.{g}") for g in range(2)] for j in range(3)]
    )
    read_problems, drafts = bench._read_problems(problems, roll)
    assert len(read_problems) == 6 and len({p.id for p in read_problems}) == 6
    assert [drafts[p.id] for p in read_problems] == [
        f"draft {j}.{g}" for j in range(3) for g in range(2)
    ]
    assert [p.question for p in read_problems] == [p.question for p in problems for _ in range(2)]
    shaped = bench._ReaderShaped(task, drafts)
    assert shaped.solve_prompt(read_problems[3]) == task.reader_prompt(problems[1], "draft 1.1")
    duel_s, solo_s, read_s = bench.settings()
    assert duel_s.num_reads == read_s.num_generations == bench.K >= 2
    assert duel_s.reader_group == "draft"
    assert read_s.problems_per_step == solo_s.problems_per_step * solo_s.num_generations


def test_timed_duel_trains_both_policies(tmp_path):
    """Under the bench's settings both the drafter's and the reader's update run a forward and
    backward on their tokens; with one read per draft the reader's would not."""
    task = ParityTask()
    problems = (task.problems("train") * 4)[: bench.P]
    duel_s, _, _ = bench.settings()
    pair = bench._policies(tmp_path, ["A", "B"], [0, 1], duel_s)
    threads = torch.get_num_threads()
    torch.set_num_threads(bench.THREADS)  # as the bench runs (many threads crawl on a busy CPU)
    try:
        row = duel.duel_step(task, pair, problems, duel_s, step=0)
        one_read = duel.duel_step(task, pair, problems, replace(duel_s, num_reads=1), step=0)
    finally:
        torch.set_num_threads(threads)
    [(_, d, r, _)] = duel.directions(0, duel_s, list(pair), list(range(bench.P)), bench.P)
    assert row[f"{d}/zero_advantage"] == 0.0 and row[f"{r}/zero_advantage"] == 0.0
    assert row[f"{d}/trained_tokens"] > 0 and row[f"{r}/trained_tokens"] > 0
    assert one_read[f"{r}/zero_advantage"] == 1.0 and one_read[f"{d}/zero_advantage"] == 0.0


def test_trl_side_is_built_as_the_grpo_baseline_builds_it(tmp_path, monkeypatch):
    """TRL's step is timed with the config the product builds, the GRPO baseline's settings
    through :meth:`baselines.grpo.GRPOSettings.grpo_config`, whose values are the solo side's,
    and the baseline's trainer class."""
    from agon.random_models import build_tiny_model
    from baselines.grpo import GRPOSettings

    built = {}

    class Trainer:
        def __init__(self, **kw):
            built.update(kw)

        def train(self):
            pass

    monkeypatch.setattr(bench, "SkipZeroAdvantageGRPOTrainer", Trainer)
    model = build_tiny_model("qwen3", tmp_path / "m")
    assert bench._trl_step_times(model, tmp_path / "trl", 3) == []
    s = bench.trl_settings(3)
    assert isinstance(s, GRPOSettings) and (s.steps, s.checkpoint_every) == (4, 0)
    _, solo_s, _ = bench.settings()
    for f in dataclasses.fields(GRPOSettings):
        if f.init and hasattr(solo_s, f.name) and f.name not in ("steps", "checkpoint_every"):
            assert getattr(s, f.name) == getattr(solo_s, f.name), f.name
    args = built["args"]
    assert args.to_dict() == s.grpo_config(tmp_path / "trl").to_dict()
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == bench.P * bench.G
    assert (args.num_generations, args.max_completion_length) == (bench.G, bench.MAX_NEW)
    assert (args.max_steps, args.learning_rate, args.top_k) == (4, bench.LR, 0)


class _OldSampler(hf._SampleAndRecord):
    """The engine's per-row sampler as it was, kept as the reference: each row's uniform drawn
    at every step from its own generator, the token handed to ``generate``'s sampling path
    (a softmax and a multinomial over the one-hot scores)."""

    def __init__(self, sampling, row_seeds=None):
        super().__init__(sampling, None)
        self.generators = None
        if row_seeds is not None and not sampling.greedy:
            self.generators = [torch.Generator().manual_seed(x) for x in row_seeds]

    def __call__(self, input_ids, scores):
        scores = super().__call__(input_ids, scores)
        if self.generators is None:
            return scores
        cdf = torch.softmax(scores, dim=-1).cumsum(dim=-1)
        u = torch.stack([torch.rand((), generator=g, dtype=cdf.dtype) for g in self.generators])
        tokens = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
        tokens = tokens.clamp(max=cdf.size(-1) - 1)
        return torch.full_like(scores, float("-inf")).scatter(1, tokens, 0.0)


def test_seeded_rows_take_generates_greedy_path_to_the_same_samples(tiny, monkeypatch):
    """``solo.step_over_trl`` times our rollout: rows seeded each by its own generator have
    their token picked by the engine, so ``generate`` takes it greedily (no softmax over the
    vocabulary, no multinomial), from uniforms drawn at once per row; the samples and their
    logprobs are bit for bit those of the per-step draws through ``generate``'s sampling."""
    from agon.engines import SamplingParams

    task = ParityTask()
    prompts = [task.solve_prompt(p) for p in task.problems("train")[:3]]
    out = {}
    for name, sampler in (("new", hf._SampleAndRecord), ("old", _OldSampler)):
        monkeypatch.setattr(hf, "_SampleAndRecord", sampler)
        engine = hf.HFEngine(str(tiny["qwen3"]), dtype="float32", device="cpu", batch_size=4)
        generate, modes = engine.model.generate, []

        def spy(*a, _generate=generate, _modes=modes, **k):
            _modes.append(k["generation_config"].do_sample)
            return _generate(*a, **k)

        engine.model.generate = spy
        rows = []
        for sp in (
            SamplingParams(max_new_tokens=16, seed=3, prompt_seeds=(1, 2, 3)),
            SamplingParams(max_new_tokens=16, temperature=0.7, top_p=0.9, prompt_seeds=(4, 5, 6)),
            SamplingParams(
                max_new_tokens=16, temperature=0.7, prompt_seeds=(7, 8, 9), logprobs="processed"
            ),
        ):
            rows += [
                (c.token_ids, c.logprobs, c.text)
                for r in engine.generate(prompts, 3, sp)
                for c in r
            ]
        out[name] = (rows, modes)
    assert out["new"][0] == out["old"][0]
    assert set(out["new"][1]) == {False} and set(out["old"][1]) == {True}
