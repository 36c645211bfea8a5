"""The OPD phase of OPD-then-RL: on-policy distillation by per-token reverse KL to a teacher.

The student samples (the same rollout as the RL phase: the core's single-model step,
:func:`agon.rl.solo_step`; the grade is only a metric here), the frozen teacher scores the
student's own tokens, and the student is updated with the core's loss and update
(:func:`agon.rl.update`, :func:`agon.loss.policy_loss`) on **per-token advantages** (the step's
one hook, :func:`opd_hooks`, ``train_on``)

    A[i, t] = log pi_teacher(y_t | x, y_<t) - log pi_student_old(y_t | x, y_<t)

(stop-gradient; masked past a sample's end). With one gradient step per rollout the loss's
gradient is ``-E_t[A_t * grad log pi(y_t)]``: the score-function gradient of the per-token
reverse KL ``KL(pi_student || pi_teacher)`` estimated on the student's own samples, each token
on its own (no sum over later tokens). That is TRL's importance-weighted OPD
(``trl.experimental.iw_opd``, ``distillation_objective="iw_opd"``) at ``iw_opd_gamma = 0``;
with ``gamma > 0`` each token's advantage is weighted as TRL weights it,
``1 + gamma * (1 - prefix / total)`` of the sample's accumulated ``|A|`` (earlier tokens count
more), which :func:`opd_advantages` also computes (``opd_then_rl.iw_opd_gamma``).
``tests/test_opd_then_rl.py`` checks both against a hand computation and TRL's own loss.

Both log-probabilities are taken at the rollout temperature (the student's fused head and the
teacher's use ``train.temperature``, as TRL divides both models' logits by its temperature).
The teacher sees exactly the student's token ids (its prompt with the student's persona and its
completion), so it must share the student's tokenizer; it generates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from agon import rl
from agon.logprobs import completion_mask, frozen_logprobs, frozen_scorer, micro_batches
from agon.tasks.base import Problem, Task
from agon.training import metrics as mk
from agon.training.policy import Policy

# metrics of one model's OPD step, besides GRPO's drafter keys (agon.rl.solo_rollout)
REVERSE_KL = "{model}/opd/reverse_kl"  # mean over its sampled tokens of log pi - log pi_teacher
TEACHER_TOKENS = "{model}/opd/teacher_tokens"  # prompt + completion tokens its forward read
TEACHER_S = "time/teacher_s"  # the teacher's wall seconds (the slowest process's), in rollout_s


def opd_advantages(
    teacher_logps: torch.Tensor,
    student_logps: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 0.0,
    eps: float = 1e-8,
) -> torch.Tensor:
    """The ``(B, T)`` per-token OPD advantages ``teacher - student`` (0 off ``mask``), detached.

    ``gamma > 0``: each token's advantage times TRL IW-OPD's weight ``1 + gamma * (1 - P_t / S)``,
    ``P_t`` the sum of ``|A|`` over the sample's earlier tokens and ``S`` over all of them
    (``trl.experimental.iw_opd.IWOPDTrainer._compute_iw_opd_loss``)."""
    mask = mask.bool()
    a = torch.where(mask, teacher_logps.detach() - student_logps.detach(), 0.0)
    if gamma:
        size = a.abs()
        prefix = size.cumsum(dim=1) - size
        total = size.sum(dim=1, keepdim=True).clamp_min(eps)
        a = (1.0 + gamma * (1.0 - prefix / total)) * a
    return a


class Teacher:
    """A frozen model that scores completions token by token (it generates nothing)."""

    def __init__(
        self,
        model: torch.nn.Module,
        temperature: float,
        pad_token_id: int,
        packing: bool = True,
        micro_batch_size: int = 64,
    ):
        self.model = frozen_scorer(model, temperature)  # the students' rule: dropout off
        self.pad_token_id, self.packing = pad_token_id, packing
        self.micro_batch_size = micro_batch_size

    def logprobs(
        self, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        """``(n, width)`` log-probs of each completion's tokens under the teacher (0 past a
        completion's end; width as :func:`agon.logprobs.completion_mask`'s)."""
        width = completion_mask(completion_ids).size(1)
        parts = micro_batches(len(completion_ids), self.micro_batch_size)
        logps = frozen_logprobs(
            self.model, prompt_ids, completion_ids, width, self.pad_token_id, self.packing, parts
        )
        return torch.cat([x.float() for x in logps]) if logps else torch.zeros(0, width)

    def close(self) -> None:
        """Drop the model (and free cached GPU memory)."""
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def forward_tokens(prompt_ids: Sequence[Sequence[int]], comp_ids: Sequence[Sequence[int]]) -> int:
    """Tokens a forward pass over these (prompt, completion) pairs reads: the teacher's cost."""
    return sum(len(p) + len(c) for p, c in zip(prompt_ids, comp_ids))


def student_logprobs(
    policy: Policy, prompt_ids: list[list[int]], comp_ids: list[list[int]], s: Any
) -> torch.Tensor:
    """The sampling policy's log-probs of its own tokens (no gradient): what the OPD advantage
    subtracts. Chunked as :func:`agon.rl.update` chunks its forwards (the whole batch's count
    of sequences), so that sharded models run as many forwards on every process."""
    width = completion_mask(comp_ids).size(1)
    parts = micro_batches(int(policy.sum_over_ranks(len(comp_ids))), s.micro_batch_size)
    logps = frozen_logprobs(
        policy.model, prompt_ids, comp_ids, width, policy.pad_token_id, s.packing, parts
    )
    return torch.cat([x.float() for x in logps]) if logps else torch.zeros(0, width)


def opd_hooks(teacher: Teacher, s: Any, gamma: float = 0.0) -> rl.SoloHooks:
    """OPD's change to GRPO's step: the model is updated on per-token advantages, the
    teacher's log-probs of its own tokens minus its own (the grade is only a metric)."""

    def train_on(
        name: str, policy: Policy, ro: rl.SoloRollout, watch: rl.Stopwatch
    ) -> tuple[rl.Samples, dict[str, float]]:
        prompt_ids = [c.prompt_token_ids for c in ro.flat]
        comp_ids = [c.token_ids for c in ro.flat]
        with watch:
            t_logps = teacher.logprobs(prompt_ids, comp_ids)
        s_logps = student_logprobs(policy, prompt_ids, comp_ids, s)
        mask = completion_mask(comp_ids).to(s_logps.device)
        t_logps = t_logps.to(s_logps.device)
        adv = opd_advantages(t_logps, s_logps, mask, gamma)
        samples = rl.Samples("drafter", prompt_ids, comp_ids, adv.cpu().numpy().astype(np.float64))
        counts = {
            "kl_sum": float(((s_logps - t_logps) * mask).sum()),
            "tokens": float(mask.sum()),
            "forward_tokens": float(forward_tokens(prompt_ids, comp_ids)),
        }
        return samples, counts

    return rl.SoloHooks(train_on=train_on, metrics=opd_metrics, seconds=TEACHER_S)


def opd_metrics(name: str, counts: Mapping[str, float]) -> dict[str, float]:
    """One model's OPD metrics from its counts summed over every process."""
    kl = counts["kl_sum"] / counts["tokens"] if counts["tokens"] else 0.0
    return {
        mk.key(REVERSE_KL, model=name): kl,
        mk.key(TEACHER_TOKENS, model=name): counts["forward_tokens"],
    }


def opd_step(
    task: Task,
    policies: Mapping[str, Policy],
    problems: list[Problem],
    s: Any,
    step: int,
    keys: Sequence[int] | None = None,
    n_total: int | None = None,
    *,
    teacher: Teacher,
    gamma: float = 0.0,
) -> dict[str, float]:
    """One OPD step of every policy, each alone on the same ``problems``: rollout -> teacher
    and student log-probs of the samples -> per-token advantages -> update; the metrics row.

    :func:`agon.rl.solo_step` with :func:`opd_hooks` (bind ``teacher`` and ``gamma`` for
    :func:`agon.training.loop.train`'s ``step_fn``); each process scores its own share of the
    samples, and the OPD metrics of the row are the whole batch's."""
    return rl.solo_step(task, policies, problems, s, step, keys, opd_hooks(teacher, s, gamma))
