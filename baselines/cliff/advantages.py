"""Cliff's per-token advantages: GRPO's outcome advantage plus a prefix / suffix term.

The abstract fixes only the idea: a teacher marks the *first mistake* of a rollout; tokens
before it get a positive advantage, tokens from it on a negative one. Our reading (every
choice is a key of the config's ``cliff`` section, ``docs/method.md``, Cliff):

- per token ``t`` of rollout ``i``: ``A[i, t] = A_outcome[i] + w * s[i, t]``, where
  ``A_outcome`` is GRPO's group-normalized outcome advantage exactly as GRPO and the duel
  compute it (:func:`agon.rl.group_advantages`) and ``w`` is ``cliff.weight``;
- a wrong rollout whose first mistake is at token ``m``: ``s = +1`` on tokens ``0..m-1`` and
  ``-1`` on tokens ``m..T-1`` (a mistake at token 0 makes the whole rollout ``-1``);
- a correct rollout (``cliff.correct``): ``prefix_all`` (default) gives every token ``+1``, as if
  the mistake were after its end; ``none`` adds nothing;
- a wrong rollout whose mistake the teacher did not find (``cliff.unlocated``):
  ``outcome_only`` (default) adds nothing; ``negative`` gives every token ``-1``, as if the
  mistake were its first token;
- a rollout the verifier could not score has outcome advantage 0 and gets no term either: it
  stays out of the loss, as in the duel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CORRECT_MODES = ("prefix_all", "none")
UNLOCATED_MODES = ("outcome_only", "negative")


def token_advantages(
    outcome: float,
    n_tokens: int,
    correct: float,
    mistake: int | None,
    weight: float,
    correct_mode: str = "prefix_all",
    unlocated: str = "outcome_only",
) -> np.ndarray:
    """The ``(n_tokens,)`` advantages of one rollout (the rules in the module docstring).

    ``outcome``: its GRPO advantage; ``correct``: 1.0, 0.0, or NaN (could not be graded);
    ``mistake``: the token index of its first mistake (None: not located; clipped to
    ``0..n_tokens``; ignored for a correct rollout).
    """
    if correct_mode not in CORRECT_MODES:
        raise ValueError(f"cliff.correct must be one of {CORRECT_MODES}, got {correct_mode!r}")
    if unlocated not in UNLOCATED_MODES:
        raise ValueError(f"cliff.unlocated must be one of {UNLOCATED_MODES}, got {unlocated!r}")
    adv = np.full(n_tokens, float(outcome), dtype=np.float64)
    if correct is None or np.isnan(correct):  # ungraded: out of the loss, as in the duel
        return adv
    if correct >= 0.5:
        if correct_mode == "prefix_all":
            adv += weight
        return adv
    if mistake is None:
        if unlocated == "negative":
            adv -= weight
        return adv
    m = min(max(int(mistake), 0), n_tokens)
    adv[:m] += weight
    adv[m:] -= weight
    return adv


def padded_token_advantages(
    outcomes: Sequence[float],
    lengths: Sequence[int],
    correct: Sequence[float],
    mistakes: Sequence[int | None],
    weight: float,
    correct_mode: str = "prefix_all",
    unlocated: str = "outcome_only",
) -> np.ndarray:
    """One row of :func:`token_advantages` per rollout, zero-padded on the right to the longest
    (at least 1 column): the ``(B, T)`` layout :func:`agon.loss.policy_loss` takes, with the
    same width as :func:`agon.logprobs.completion_mask` of the same completions."""
    n = len(lengths)
    if not (len(outcomes) == len(correct) == len(mistakes) == n):
        raise ValueError("outcomes, lengths, correct and mistakes need one entry per rollout")
    out = np.zeros((n, max([*lengths, 1])), dtype=np.float64)
    for i in range(n):
        row = token_advantages(
            outcomes[i], lengths[i], correct[i], mistakes[i], weight, correct_mode, unlocated
        )
        out[i, : lengths[i]] = row
    return out
