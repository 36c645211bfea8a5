"""GAR's reward: the outcome plus a weighted cosine, and the anchors the cosine is taken with.

Our reading (every choice is a key of the config's ``gar`` section, ``docs/method.md``, GAR):

- ``reward[i] = correct[i] + w * f(cos[i])`` with ``w = gar.weight``, where ``cos[i]`` is the
  cosine of sample ``i``'s gradient at the LM head with its problem's anchor's
  (:mod:`baselines.gar.gradients`) and ``f`` is ``gar.cosine``: ``clipped`` (default) takes
  ``max(cos, 0)`` (a bonus in ``[0, w]``), ``signed`` the cosine itself;
- ``gar.apply_to``: ``all`` (default) adds the term to every graded sample, ``wrong`` only to
  the wrong ones (a correct sample keeps its outcome);
- a problem without an anchor (``gar.missing``): ``outcome_only`` (default) leaves its samples
  at their outcome; ``drop`` gives them no reward (NaN), so their advantage is 0, as an
  ungraded sample's;
- a sample the verifier could not score keeps its NaN reward (advantage 0), with no term.

The anchor (``gar.anchor: worked_solution``) is the task's worked solution
(:meth:`agon.tasks.base.Task.worked_solution`) tokenized as a completion: its tokens, then the
tokenizer's end-of-sequence token (a sampled completion ends with it), the first
``gar.anchor_max_tokens`` of them (default the family's ``max_new_tokens``), after the very
prompt the samples had.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agon.tasks.base import Problem, Task

COSINES = ("clipped", "signed")
APPLY_TO = ("all", "wrong")
MISSING = ("outcome_only", "drop")
GRADIENTS = ("lm_head",)  # the output projection (the only one the abstract names)
ANCHORS = ("worked_solution",)


def anchor_ids(task: Task, problem: Problem, tokenizer: Any, max_tokens: int) -> list[int] | None:
    """The anchor's completion token ids for ``problem`` (None: the task has no worked
    solution for it)."""
    text = task.worked_solution(problem)
    if not text or not text.strip():
        return None
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    return ids[: max(int(max_tokens), 1)]


def needs_cosine(correct: np.ndarray, anchored: np.ndarray, apply_to: str = "all") -> np.ndarray:
    """``(P, G)`` bool: the samples whose reward takes a cosine (graded, anchored, and wrong
    under ``apply_to: wrong``)."""
    if apply_to not in APPLY_TO:
        raise ValueError(f"gar.apply_to must be one of {APPLY_TO}, got {apply_to!r}")
    correct = np.asarray(correct, dtype=np.float64)
    need = ~np.isnan(correct) & np.asarray(anchored, dtype=bool)[:, None]
    return need & (correct < 0.5) if apply_to == "wrong" else need


def gar_rewards(
    correct: np.ndarray,
    cosine: np.ndarray,
    anchored: np.ndarray,
    weight: float,
    cosine_mode: str = "clipped",
    apply_to: str = "all",
    missing: str = "outcome_only",
) -> np.ndarray:
    """``(P, G)`` rewards by the rules in the module docstring. ``correct``: 1.0, 0.0 or NaN;
    ``cosine``: each sample's cosine (read where :func:`needs_cosine`); ``anchored``: ``(P,)``
    whether the problem has an anchor."""
    if cosine_mode not in COSINES:
        raise ValueError(f"gar.cosine must be one of {COSINES}, got {cosine_mode!r}")
    if missing not in MISSING:
        raise ValueError(f"gar.missing must be one of {MISSING}, got {missing!r}")
    rewards = np.array(correct, dtype=np.float64)
    need = needs_cosine(correct, anchored, apply_to)
    cos = np.asarray(cosine, dtype=np.float64)
    term = np.clip(cos, 0.0, 1.0) if cosine_mode == "clipped" else cos
    rewards[need] += weight * term[need]
    if missing == "drop":
        rewards[~np.asarray(anchored, dtype=bool)] = np.nan
    return rewards
