"""What TRL's GRPOTrainer trains on: a task's prompts as a dataset, and its grader as a reward.

The reward is the verifier's verdict through the same code path evaluation uses (1.0 correct,
0.0 wrong, None when it cannot score, which TRL keeps out of the group baseline).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch.distributed as dist

from agon.engines.base import with_system_prompt
from agon.tasks.base import Problem, Task
from agon.training import metrics as mk

REWARD_NAME = "correctness"


def prompt_dataset(task: Task, split: str = "train", system_prompt: str | None = None) -> Any:
    """A datasets.Dataset of conversational prompts (the task's solve prompt, persona first)."""
    # lazy: datasets: off `import baselines.grpo` (agon train's checks, bench_paper_scale's start)
    from datasets import Dataset

    rows = [
        {"prompt": with_system_prompt(task.solve_prompt(p), system_prompt), "problem_id": p.id}
        for p in task.problems(split)
    ]
    if not rows:
        raise ValueError(f"task {task.name!r} has no {split!r} problems")
    return Dataset.from_list(rows)


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or a conversational list of messages."""
    if isinstance(completion, str):
        return completion
    return "".join(
        m.get("content", "") if isinstance(m.get("content"), str) else str(m.get("content"))
        for m in completion
    )


def make_reward_fn(task: Task, problems: Sequence[Problem], shares: Path | None = None):
    """A TRL reward function that grades with ``task.grade``: 1.0, 0.0, or None (cannot score).

    With ``shares``, each process appends the problems it graded at each step to
    ``shares/rank-R.jsonl`` (which share of the step's batch each process had)."""
    by_id = {p.id: p for p in problems}

    def correctness(
        prompts: list, completions: list, problem_id: list[str], **kwargs: Any
    ) -> list[float | None]:
        if shares is not None:
            _log_share(shares, kwargs.get("trainer_state"), problem_id)
        verdicts = task.grade(
            [by_id[i] for i in problem_id], [completion_text(c) for c in completions]
        )
        return [None if v.correct is None else float(v.correct) for v in verdicts]

    correctness.__name__ = REWARD_NAME
    return correctness


def _log_share(folder: Path, state: Any, problem_ids: Sequence[str]) -> None:
    on = dist.is_available() and dist.is_initialized()
    rank, world = (dist.get_rank(), dist.get_world_size()) if on else (0, 1)
    row = {
        mk.STEP: getattr(state, "global_step", None),
        "rank": rank,
        "world": world,
        "problems": list(dict.fromkeys(problem_ids)),
    }
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"rank-{rank}.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
