# long: every key of metrics.jsonl and summary.json, each with how processes combine it.
"""Every key of a training run's ``metrics.jsonl``, in one place, each declared once.

Every trainer writes one JSON row per optimizer step into ``metrics.jsonl`` with these keys
(the GRPO baseline translates TRL's logs into them, :mod:`baselines.grpo`), and summarizes a
finished run with :func:`agon.training.logbook.summarize_metrics`, so the report and the figures
read one schema. ``{model}`` is a policy's name ("A" or "B"), ``{role}`` is ``drafter`` or
``reader`` (a GRPO sample counts as a draft), ``{drafter}->{reader}`` one duel direction.

Per step: ``{model}/{role}/...`` from the rollout, ``{model}/...`` from the update, the duel
outcomes per direction and pooled, and on the probe's steps ``eval/...``.

:data:`KEYS` declares each key with how one step's rows of several processes combine into the
one-process row (:func:`agon.training.logbook.combine_ranks`): counts add up, wall seconds are the
slowest process's, a rate is weighted by the count it is a rate of (its denominator, a key of
the same row), and what every process computes alike is taken as it is. A method's own keys
are declared in its own module (a tuple of :class:`Key`, its trainer's ``keys``), and the
shell of the in-house trainers collects them; a key no declaration matches is an error there.
The code that computes, reads and summarizes rows is :mod:`agon.training.logbook`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

STEP = "step"
TOKENS = "tokens_generated"  # completion tokens generated this step, both models together
ROLLOUT_S = "time/rollout_s"
UPDATE_S = "time/update_s"
# CPU seconds of the step's training work (rollout, grading, update; the probe excluded), of
# this process and every live or finished process under it (agon.training.cost), and GPU
# seconds (wall seconds times the GPUs in use; 0 on CPU). A GRPO row also has {model}/cpu_s.
CPU_S = "time/cpu_s"
GPU_S = "time/gpu_s"
MODEL_CPU_S = "{model}/cpu_s"
SUMMED = (CPU_S, GPU_S)  # per-step totals that add up when per-model files are merged

# rollout, per model and role
ROLE_REWARD = "{model}/{role}/reward"
ROLE_CORRECT = "{model}/{role}/correct"  # mean correctness of the role's own completions
ROLE_UNGRADED = "{model}/{role}/ungraded"  # share the verifier could not score
ROLE_ZERO_SPREAD = "{model}/{role}/frac_zero_spread"  # groups whose rewards were all equal
# groups with no gradient: every distinct completion's advantages sum to 0 (eight identical
# drafts are dead whatever their reads); frac_zero_spread undercounts these
ROLE_DEAD = "{model}/{role}/frac_dead"
ROLE_LENGTH = "{model}/{role}/mean_length"
ROLE_TRUNCATED = "{model}/{role}/truncated"  # share stopped by max_new_tokens
ROLE_TOKENS = "{model}/{role}/tokens"  # completion tokens the role generated this step
ROLE_COMPLETIONS = "{model}/{role}/completions"  # completions the role generated this step
DRAFTS_CUT = "{model}/reader/drafts_cut"  # drafts shortened to fit the reader prompt

# the mechanism (docs/method.md, what the toy world can show), per reader and per drafter:
# how often a read is right after a right draft and after a wrong one (a gap between them is
# how often wrong drafts mislead), and how the drafter's wrong drafts went wrong
READ_AFTER_RIGHT = "{model}/reader/correct_after_right_draft"
READ_AFTER_WRONG = "{model}/reader/correct_after_wrong_draft"
READS_AFTER_RIGHT = "{model}/reader/reads_after_right_draft"  # the denominators of the rates
READS_AFTER_WRONG = "{model}/reader/reads_after_wrong_draft"
# a toy reader's take-up (agon.toy.audit): of the steps where a draft shows one of the reader's
# always-wrong habits done right, aligned with its own work, how many it wrote right
HABIT_STEPS = "{model}/reader/habit_steps"
HABIT_TAKEN = "{model}/reader/habit_steps_taken"
TAKE_UP = "{model}/reader/take_up"  # HABIT_TAKEN / HABIT_STEPS
HIDDEN_SHARE = "{model}/drafter/hidden_share"  # hidden / (hidden + visible) wrong drafts
STYLED = "{model}/drafter/styled_wrong"  # wrong drafts classified visible or hidden
# what the drafter is paid for a hidden over a visible wrong draft (mean reward of the one
# minus the other, steps holding both): its own correctness is 0 in both, so the gap is the
# rival term's pull on the style (0 under `independent`), whether or not the style moves
STYLE_REWARD_GAP = "{model}/drafter/hidden_minus_visible_reward"
STYLE_GAP_WEIGHT = "{model}/drafter/style_gap_pairs"  # min(hidden, visible): the gap's weight
# a fingerprint of every completion the step generated (drafts and reads, token ids): two runs
# whose rows agree on it took the same rollouts (agon and its agon_independent twin diverge at
# the first step they differ; on several processes, rank 0's share)
ROLLOUT_SHA = "rollout/sha"

# duel outcomes, per direction and pooled: fractions of graded (draft, read) pairs
OUTCOMES = ("drafter_wins", "reader_wins", "ties")
POOLED_OUTCOME = "duel/{outcome}"
# per direction "{drafter}->{reader}/duel/{outcome}", which this pattern reads back
DIRECTION_PATTERN = (
    r"^(?P<drafter>[^/]+)->(?P<reader>[^/]+)/duel/(?P<outcome>drafter_wins|reader_wins|ties)$"
)

# update, per model (agon.rl.update)
LOSS = "{model}/loss"  # each process's is its share of the whole batch's loss
GRAD_NORM = "{model}/grad_norm"  # before clipping
ENTROPY = "{model}/entropy"  # mean over the trained tokens
KL = "{model}/kl"  # mean over the trained tokens (NaN without a KL term)
CLIP_RATIO = "{model}/clip_ratio"  # share of trained tokens whose ratio was clipped
SKIP_EMPTY = "{model}/skip_reason_empty"  # 1 when no process generated a token
SKIPPED = "{model}/skipped"  # 1 when the update was dropped (non-finite loss or gradient)
# 1 when every advantage of the model's step was 0 (no KL term): no forward or backward ran,
# AdamW stepped on zero gradients (agon.rl.update)
ZERO_ADVANTAGE = "{model}/zero_advantage"
LR = "{model}/lr"  # present on every step the model took an optimizer step
TRAINED_TOKENS = "{model}/trained_tokens"  # completion tokens in the step's loss (one pass)

# hard-split probe (agon.training.probe), on the steps it runs
HARD_PASS1 = "eval/hard_pass@1/{model}"
HARD_TOKENS = "eval/hard_tokens/{model}"  # tokens the probe generated (not training tokens)
HARD_PROBLEMS = "eval/hard_problems"
# the reader's robustness: its greedy pass@1 reading a fixed wrong draft of each probe problem
# (Task.wrong_draft: the same drafts for every method), before the first update and after
ROBUST_PASS1 = "eval/robust_pass@1/{model}"
ROBUST_PROBLEMS = "eval/robust_problems"
EVAL_S = "time/eval_s"
EVAL_ROW_KEYS = (STEP, TOKENS, EVAL_S)  # an evaluation-only row's keys besides eval/*

MODELS = ("A", "B")
COMBINES = ("sum", "max", "rate", "same", "first")


def key(template: str, **names: str) -> str:
    """A metrics key from its template: ``key(ROLE_CORRECT, model="A", role="drafter")``."""
    return template.format(**names)


@dataclass(frozen=True)
class Key:
    """One metrics key: its template and how the rows of several processes combine it.

    ``combine``: ``sum`` (a count, or each process's share of a sum: tokens, the loss),
    ``max`` (wall seconds: the slowest process's), ``rate`` (a mean over what ``per`` counts:
    the processes' values weighted by ``per``, a key template of the same row that is a
    ``sum``), ``same`` (what every process computes alike, or a whole-batch value already
    summed over the processes: averaged, NaN left out), ``first`` (rank 0's: a step, a
    fingerprint). ``total``: the ``summary.json`` key (a template) that adds it up over the
    run's rows, if any."""

    template: str
    combine: str
    per: str | None = None
    total: str | None = None

    def __post_init__(self) -> None:
        if self.combine not in COMBINES:
            raise ValueError(f"Key {self.template}: combine must be one of {COMBINES}")
        if (self.combine == "rate") != (self.per is not None):
            raise ValueError(f"Key {self.template}: a rate, and only a rate, names its `per`")


# what a placeholder of a template may stand for in a key
_PLACEHOLDERS = {
    "model": r"[^/>-]+",
    "role": r"drafter|reader",
    "drafter": r"[^/>-]+",
    "reader": r"[^/>-]+",
    "outcome": "|".join(OUTCOMES),
}


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", template)
    regex = "".join(
        re.escape(p) if i % 2 == 0 else f"(?P<{p}>{_PLACEHOLDERS[p]})" for i, p in enumerate(parts)
    )
    return re.compile(f"^{regex}$")


def _rate(template: str, per: str) -> Key:
    return Key(template, "rate", per)


def _role(name: str) -> str:
    return f"{{model}}/{{role}}/{name}"


KEYS: tuple[Key, ...] = (
    Key(STEP, "first"),
    Key(TOKENS, "sum"),
    Key(ROLLOUT_S, "max"),
    Key(UPDATE_S, "max"),
    Key(CPU_S, "sum"),
    Key(GPU_S, "sum"),
    Key(MODEL_CPU_S, "sum"),
    # the rollout, per model and role: rates of the role's completions
    Key(ROLE_COMPLETIONS, "sum"),
    Key(ROLE_TOKENS, "sum"),
    *(
        _rate(t, ROLE_COMPLETIONS)
        for t in (ROLE_REWARD, ROLE_CORRECT, ROLE_UNGRADED, ROLE_LENGTH, ROLE_TRUNCATED)
    ),
    # groups: every group of a role has as many completions, so completions weigh them
    _rate(ROLE_ZERO_SPREAD, ROLE_COMPLETIONS),
    _rate(ROLE_DEAD, ROLE_COMPLETIONS),
    Key(DRAFTS_CUT, "sum"),
    # the mechanism
    Key(READS_AFTER_RIGHT, "sum"),
    Key(READS_AFTER_WRONG, "sum"),
    _rate(READ_AFTER_RIGHT, READS_AFTER_RIGHT),
    _rate(READ_AFTER_WRONG, READS_AFTER_WRONG),
    Key(HABIT_STEPS, "sum"),
    Key(HABIT_TAKEN, "sum"),
    _rate(TAKE_UP, HABIT_STEPS),
    Key(STYLED, "sum"),
    _rate(HIDDEN_SHARE, STYLED),
    Key(STYLE_GAP_WEIGHT, "sum"),
    # a difference of two means: weighted by the pairs, the whole batch's to first order
    _rate(STYLE_REWARD_GAP, STYLE_GAP_WEIGHT),
    Key(ROLLOUT_SHA, "first"),
    # a direction's outcomes are shares of its reads (its reader's reads); the pooled ones are
    # made again from the combined directions (agon.training.logbook.combine_ranks)
    _rate("{drafter}->{reader}/" + POOLED_OUTCOME, "{reader}/reader/completions"),
    Key(POOLED_OUTCOME, "same"),
    # the update
    Key(LOSS, "sum"),
    Key(TRAINED_TOKENS, "sum"),
    *(_rate(t, TRAINED_TOKENS) for t in (ENTROPY, KL, CLIP_RATIO)),
    *(Key(t, "same") for t in (GRAD_NORM, LR, SKIPPED, SKIP_EMPTY, ZERO_ADVANTAGE)),
    # the probe: every process scores the same problems
    *(Key(t, "same") for t in (HARD_PASS1, HARD_TOKENS, HARD_PROBLEMS)),
    *(Key(t, "same") for t in (ROBUST_PASS1, ROBUST_PROBLEMS)),
    Key(EVAL_S, "max"),
)


class Declared:
    """Metrics keys to their declarations: :data:`KEYS` and a trainer's own."""

    def __init__(self, keys: Iterable[Key] = ()) -> None:
        self.keys = (*KEYS, *keys)
        self._exact = {k.template: k for k in self.keys if "{" not in k.template}
        self._patterns = [(_pattern(k.template), k) for k in self.keys if "{" in k.template]
        if len({k.template for k in self.keys}) < len(self.keys):
            raise ValueError("a metrics key is declared twice")

    def find(self, name: str) -> tuple[Key, dict[str, str]] | None:
        """The declaration of the key ``name`` and what its placeholders stand for there
        (None: not declared)."""
        if name in self._exact:
            return self._exact[name], {}
        for pattern, k in self._patterns:
            m = pattern.match(name)
            if m:
                return k, m.groupdict()
        return None

    def undeclared(self, names: Iterable[str]) -> list[str]:
        """The keys among ``names`` that no declaration matches."""
        return [n for n in names if self.find(n) is None]

    def totals(self) -> Sequence[Key]:
        """The declarations that add up into ``summary.json``."""
        return [k for k in self.keys if k.total is not None]
