"""``bench/bench_duel.py``: the duel it times trains both policies (K = 2 reads per draft, so
the reader's groups have spread; with K = 1 the reader's update is a zero-advantage step and
the ratio would set a one-update duel against two solo updates), its second solo step has the
reader's shape (P x G prompts around real drafts, K samples each), and the timed sides take
turns."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import torch

from agon import duel
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
