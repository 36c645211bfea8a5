"""Systems: single, cascade and Mixture-of-Agents, with scripted engines and tiny real models."""

from __future__ import annotations

import json
import re

import pytest
from tiny_models import ScriptedEngine, tiny_sum_task

from agon.engines import SamplingParams
from agon.engines.hf import HFEngine
from agon.evaluation import evaluate
from agon.random_models import ARCHS
from agon.systems import cascade, single
from baselines.moa import AGGREGATE_AND_SYNTHESIZE, moa


def _sum(text: str) -> int:
    a, b = re.search(r"What is (\d+) \+ (\d+)\?", text).groups()
    return int(a) + int(b)


@pytest.fixture()
def task():
    t = tiny_sum_task(4)
    yield t
    t.close()


def test_single_asks_the_solve_prompt(task):
    engine = ScriptedEngine(lambda text, j: f"draft {j} \\boxed{{{_sum(text)}}}")
    out = single(engine).run(task, task.problems("hard"), 3, SamplingParams())
    assert [len(s) for s in out] == [3] * 4
    assert out[0][2].completion.startswith("draft 2")
    assert engine.calls[0] == task.solve_prompt(task.problems("hard")[0])
    assert out[0][0].draft_tokens == 0 and out[0][0].total_tokens == out[0][0].completion_tokens


@pytest.mark.parametrize(
    "view,shown",
    [
        ("full", "think one two three </think> answer 5"),
        ("answer_section", "answer 5"),
        ("last_tokens:2", "answer 5"),
    ],
)
def test_cascade_reader_sees_the_draft_through_the_view(task, view, shown):
    drafter = ScriptedEngine(lambda text, j: "think one two three </think> answer 5")
    reader = ScriptedEngine(lambda text, j: "read \\boxed{5}")
    problems = task.problems("hard")
    out = cascade(drafter, reader, view).run(task, problems, 2, SamplingParams())
    assert len(reader.calls) == len(problems) * 2  # one read per draft
    assert reader.calls[0] == task.reader_prompt(problems[0], shown)
    s = out[1][1]
    assert s.drafts == ["think one two three </think> answer 5"] and s.shown == [shown]
    assert (
        s.completion == "read \\boxed{5}" and s.draft_tokens == 7 and s.total_tokens == 9
    )  # one token per word


def test_cascade_rejects_an_unknown_view():
    with pytest.raises(ValueError, match="draft_view"):
        cascade(ScriptedEngine(str), ScriptedEngine(str), "middle")


def test_moa_alternates_proposers_and_synthesizes(task):
    a = ScriptedEngine(lambda text, j: "A says \\boxed{1}")
    b = ScriptedEngine(lambda text, j: "B says \\boxed{2}")
    problems = task.problems("hard")[:2]
    out = moa(a, b, layers=2, proposers=3, aggregator="b").run(task, problems, 2, SamplingParams())
    chains = len(problems) * 2
    # layer 1 and 2: proposers 0 and 2 are A, proposer 1 is B; then B aggregates
    assert len(a.calls) == 2 * 2 * chains and len(b.calls) == 2 * chains + chains
    layer2 = a.calls[2 * chains]
    assert layer2[0]["role"] == "system" and layer2[0]["content"].startswith(
        AGGREGATE_AND_SYNTHESIZE
    )
    assert (
        "1. A says \\boxed{1}\n2. B says \\boxed{2}\n3. A says \\boxed{1}" in layer2[0]["content"]
    )
    assert layer2[1:] == task.solve_prompt(problems[0])
    s = out[1][0]
    assert s.drafts == [["A says \\boxed{1}", "B says \\boxed{2}", "A says \\boxed{1}"]] * 2
    assert s.completion == "B says \\boxed{2}" and s.draft_tokens == 6 * 3
    with pytest.raises(ValueError, match="moa.layers"):
        moa(a, b, layers=0)


def test_moa_reader_prompt_shows_proposals_through_the_proposals_prompt(task):
    a = ScriptedEngine(lambda text, j: "A says \\boxed{1}")
    b = ScriptedEngine(lambda text, j: "B says \\boxed{2}")
    problems = task.problems("hard")[:2]
    moa(a, b, layers=1, proposers=2, prompt="reader").run(task, problems, 1, SamplingParams())
    final = a.calls[-1]  # A aggregates the second problem's chain last
    assert final == task.proposals_prompt(problems[1], ["A says \\boxed{1}", "B says \\boxed{2}"])
    (msg,) = final  # the default wording: both attempts numbered, marked as rivals'
    assert "<rival_attempt_1>\nA says \\boxed{1}\n</rival_attempt_1>" in msg["content"]
    assert "<rival_attempt_2>\nB says \\boxed{2}\n</rival_attempt_2>" in msg["content"]
    assert "Below are 2 attempts" in msg["content"] and "\\boxed{}" in msg["content"]
    assert task.proposals_prompt(problems[0], ["x"]) == task.reader_prompt(problems[0], "x")
    with pytest.raises(ValueError, match="moa.prompt"):
        moa(a, b, prompt="vote")


@pytest.mark.parametrize("arch", ARCHS)
def test_paper_architectures_run_single_and_cascade(tiny, arch, tmp_path):
    """Each paper family's architecture through both systems, end to end on CPU."""
    kwargs = {"enable_thinking": False} if arch.startswith("qwen") else {}
    engine = HFEngine(
        tiny[arch], dtype="float32", device="cpu", batch_size=8, chat_template_kwargs=kwargs
    )
    task = tiny_sum_task(3)
    sampling = SamplingParams(max_new_tokens=6, temperature=1.0, seed=0)
    try:
        for system in (single(engine), cascade(engine, engine, "last_tokens:4")):
            summary = evaluate(
                system,
                task,
                task.problems("hard"),
                tmp_path / system.name,
                n=2,
                ks=[1, 2],
                sampling=sampling,
                chunk_size=4,
                n_boot=100,
                progress=False,
            )
            lines = [
                json.loads(x)
                for x in (tmp_path / system.name / "samples.jsonl").read_text().splitlines()
            ]
            assert len(lines) == 6 and summary["n_problems"] == 3
            assert all(0 < r["completion_tokens"] <= 6 for r in lines)
            if system.name == "cascade":
                assert all(len(r["drafts"]) == 1 and 0 < r["draft_tokens"] <= 6 for r in lines)
                assert "<rival_attempt>" in lines[0]["prompt"][-1]["content"]
    finally:
        task.close()


def test_moa_runs_on_a_tiny_model(tiny, tmp_path):
    a = HFEngine(tiny["qwen3"], dtype="float32", device="cpu")
    b = HFEngine(tiny["qwen3_5_text"], dtype="float32", device="cpu")
    task = tiny_sum_task(2)
    try:
        summary = evaluate(
            moa(a, b, layers=1, proposers=2),
            task,
            task.problems("hard"),
            tmp_path,
            n=2,
            ks=[1],
            sampling=SamplingParams(max_new_tokens=5, seed=1),
            n_boot=100,
            progress=False,
        )
    finally:
        task.close()
    assert summary["n_samples"] == 4 and summary["mean_draft_tokens"] > 0


def test_moa_proposals_are_cut_to_fit_the_readers_prompt_limit():
    """Proposals that do not fit together keep equal tails (where their answers are); a prompt
    that fits is left alone; one that cannot fit even empty is an error."""
    from agon.engines.base import PromptTooLongError
    from baselines.moa.moa import fit_proposals

    class Limited:
        max_prompt_tokens = 40

        def encode(self, messages):
            n = sum(len(m["content"]) for m in messages)
            if n > self.max_prompt_tokens:
                raise PromptTooLongError(f"{n} > {self.max_prompt_tokens}")
            return list(range(n))

    def build(props):
        return [{"role": "user", "content": "Q:" + "|".join(props)}]

    short = ["a \\boxed{1}", "b \\boxed{2}"]
    assert fit_proposals(build, short, Limited()) == build(short)
    long = ["x" * 50 + " \\boxed{1}", "y" * 60 + " \\boxed{2}"]
    got = fit_proposals(build, long, Limited())[0]["content"]
    assert len(got) <= 40 and got.count("\\boxed") == 2  # both tails kept, equal length
    first, second = got[2:].split("|")
    assert len(first) == len(second)
    tiny = Limited()
    tiny.max_prompt_tokens = 1
    with pytest.raises(PromptTooLongError, match="empty proposals"):
        fit_proposals(build, long, tiny)
