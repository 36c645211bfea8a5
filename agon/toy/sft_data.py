"""What the toy models are trained on: characteristic mistakes and the SFT examples.

Each model's solutions carry its own characteristic mistake (:class:`Mistake`), and the mix
holds both roles: solving a problem, and reading a rival's possibly wrong draft and then
solving (:func:`make_example`), plus reading two proposals at once, as a Mixture-of-Agents
aggregator does. :class:`SFTStream` draws examples with a curriculum over the levels, never a
test or validation question. Why the pair needs each of these: :mod:`agon.toy.pretrain`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from agon.toy.chain import OPERANDS, OPS, ArithStep, answer_of, apply_op, arith_solution, misread
from agon.toy.mistake import Mistake, chose
from agon.toy.toycode import code_line, code_program

KINDS = ("arith_solve", "arith_read", "arith_moa", "code_solve", "code_read", "code_moa")
# toy.reader.targets: what a read or MoA example's target is. ``draft`` (the default, and what a
# config without the key means): the model's work keeping a draft's correct steps, so the base
# models are taught to read before any RL. ``own``: the model's own solution, drawn as a solve
# target is, whatever the drafts shown; the base models then see drafts but never a target that
# depends on one, and what reading a draft is worth is left for the duel to teach. ``follow``:
# the model's own work, except that each step (program line) a draft shows aligned with its own
# is taken from the draft as it stands, right or wrong, with probability ``toy.reader.follow``:
# a reader that anchors on what it reads some of the time, as a language model does. Taking a
# right step it would itself get wrong is then an action sampling already makes, which RL can
# reinforce, and taking a wrong one a mistake it can unlearn; since the reader follows right
# and wrong steps alike, the untrained cascade and MoA still gain little.
READER_TARGETS = ("draft", "own", "follow")


def reader_targets(reader_cfg: dict) -> str:
    """The ``toy.reader.targets`` mode of a reader section (``draft`` when it has none)."""
    mode = reader_cfg.get("targets", "draft")
    if mode not in READER_TARGETS:
        raise ValueError(f"toy.reader.targets must be one of {READER_TARGETS}, got {mode!r}")
    return mode


def written_arith_steps(
    start: int,
    ops: Sequence[tuple[str, int]],
    rng: random.Random,
    mistake: Mistake | None,
    slip: float = 0.0,
    keep: Sequence[Sequence[ArithStep]] = (),
    copy_wrong: float = 0.0,
    marked: Sequence[bool] = (),
    entropy: list[float] | None = None,
    follow: float = 0.0,
) -> list[ArithStep]:
    """The steps a model with ``mistake`` writes for a chain, continuing from its own results.

    ``slip``: extra probability per step of a random wrong result (a rival's careless errors).
    ``keep``: the drafts being read (one for a read, several for a Mixture-of-Agents
    aggregator's proposals), in the order shown. Step ``i`` of a draft is *aligned* when it
    starts from the same value as the reader's own step ``i`` with the same operation and
    operand. The reader copies an aligned step that is right, from any draft (they all agree on
    it); when no aligned step is right it redoes the step with its own habit, except that with
    probability ``copy_wrong`` it copies the first draft's aligned (so wrong) step as it stands
    (the reader anchors on a draft instead of checking it), unless that draft is marked
    (``marked[j]`` true for draft ``j``: opened with :data:`agon.toy.tasks.MARK`).
    ``follow`` above 0 replaces that rule (``toy.reader.targets: follow``): the reader takes the
    first draft's aligned step as it stands, right or wrong, with probability ``follow`` (an
    unmarked draft's), and otherwise does the step itself, with its habit, never checking it.
    ``entropy``: where given, each random choice that changes the text gets its entropy (nats)
    appended (:func:`loss_floor`).
    """
    out, value = [], start
    for i, (op, k) in enumerate(ops):
        shown = k  # the operand the step shows (a habit that writes its misread one changes it)
        aligned = [
            (d[i], j < len(marked) and marked[j])
            for j, d in enumerate(keep)
            if i < len(d) and d[i].lhs == value and d[i].op == op and d[i].rhs == k
        ]
        right = next((s for s, _ in aligned if s.correct), None)
        unmarked = bool(aligned) and not aligned[0][1]
        result = None  # None: the reader's own work
        if follow > 0:
            if unmarked and chose(rng, follow, entropy):
                result = aligned[0][0].result
        elif right is not None:
            result = right.result
        elif unmarked and copy_wrong and chose(rng, copy_wrong, entropy):
            result = aligned[0][0].result
        if result is None:  # the reader's own work
            result = apply_op(value, op, k)
            habit = None if mistake is None else mistake.habit(op, k, "arith")
            # "result": a misread that gives the same result (0 * k) writes the same text
            # either way; "operand": the step shows the misread operand, so it always differs
            copies = habit is not None and habit.writes == "operand"
            differs = copies or apply_op(value, op, misread(k)) != result
            if habit is not None and chose(rng, habit.arith_rate, entropy if differs else None):
                result = apply_op(value, op, misread(k))
                shown = misread(k) if copies else k
            elif slip and rng.random() < slip:
                result = rng.choice([r for r in range(7) if r != result])
        out.append(ArithStep(value, op, shown, result))
        value = result
    return out


def written_code_lines(
    ops: Sequence[tuple[str, int]],
    rng: random.Random,
    mistake: Mistake | None,
    slip: float = 0.0,
    keep: Sequence[Sequence[tuple[str, int] | None]] = (),
    copy_wrong: float = 0.0,
    entropy: list[float] | None = None,
    follow: float = 0.0,
) -> list[tuple[str, int]]:
    """The (op, operand) of each program line a model with ``mistake`` writes.

    As :func:`written_arith_steps`: ``slip`` adds random wrong operands or operations; ``keep``
    holds the drafts being read, in the order shown; a line ``i`` that any draft has right is
    copied rather than rewritten; when every draft that has a line ``i`` has it wrong, the
    first such draft's line is copied with probability ``copy_wrong`` (lines do not depend on
    each other, so any draft's line ``i`` is aligned). ``follow`` above 0: the first draft's line
    is taken as it stands with that probability, else the line is the model's own, as there.
    ``entropy``: as there.
    """
    out = []
    for i, (op, k) in enumerate(ops):
        shown = [d[i] for d in keep if i < len(d) and d[i] is not None]
        if follow > 0:
            if shown and chose(rng, follow, entropy):
                out.append(shown[0])
                continue
        elif (op, k) in shown:
            out.append((op, k))
            continue
        elif shown and copy_wrong and chose(rng, copy_wrong, entropy):
            out.append(shown[0])
            continue
        w_op, w_k = op, k
        rate = None if mistake is None else mistake.rate(op, k, "code")
        if rate is not None and chose(rng, rate, entropy):
            w_k = misread(k)
        elif slip and rng.random() < slip:
            if rng.random() < 0.5:
                w_op = rng.choice([o for o in OPS if o != op])
            else:
                w_k = rng.choice([o for o in OPERANDS if o != k])
        out.append((w_op, w_k))
    return out


def program_text(
    lines: Sequence[tuple[str, int]], subtract: str = "minus", answer: str = "final"
) -> str:
    """The fenced program for the written lines, subtractions written as ``subtract`` says, each
    line printing its result where ``answer`` is ``trace`` (:func:`agon.toy.toycode.code_line`)."""
    return code_program([code_line(op, k, subtract, answer) for op, k in lines])


def make_example(
    kind: str,
    problem,
    task,
    rng: random.Random,
    own: Mistake,
    rival: Mistake,
    reader_cfg: dict,
    entropy: list[float] | None = None,
) -> tuple[list[dict], str]:
    """One SFT example (prompt messages, target completion) of ``kind`` in :data:`KINDS`.

    Solve targets carry the model's own mistakes; read examples show a draft written with the
    rival's mistakes and slips (or a clean one), and the target keeps its correct steps.
    Mixture-of-Agents examples (``*_moa``) show two proposals through the task's proposals
    prompt, as the untrained MoA shows its aggregator A's and B's answers: one written with the
    model's own habit, one with its rival's, in random order, each independently clean with
    probability ``draft_clean``, else with its habit plus ``draft_slip``. The target keeps a
    step (line) that either proposal has right, anchors on the first proposal's wrong one with
    the ``*_copy_wrong`` probability, and is the model's own work elsewhere. Under
    ``reader_cfg["targets"]`` ``own`` (:data:`READER_TARGETS`) the drafts are drawn and shown
    the same way, but a read or MoA target is the model's own work throughout, as a solve
    target is: it never copies a draft's step or line, right or wrong. Under ``follow`` the
    target takes each aligned step (line) of the first draft as it stands with probability
    ``reader_cfg["follow"]``, right or wrong, and is the model's own work elsewhere.
    ``entropy``: where given, the entropy of each random choice in the target (:func:`loss_floor`).
    """
    ops = problem.meta["ops"]
    mode = reader_targets(reader_cfg)
    follow = float(reader_cfg.get("follow", 0.0)) if mode == "follow" else 0.0
    own_work = mode == "own" or (mode == "follow" and follow == 0.0)
    clean = rng.random() < reader_cfg["draft_clean"]
    slip = 0.0 if clean else reader_cfg["draft_slip"]
    rival_habit = None if clean else rival
    if kind.endswith("_moa"):
        # the rival's proposal uses the draw above; the model's own proposal draws its own
        own_clean = rng.random() < reader_cfg["draft_clean"]
        writers = [  # (whose style, habit, slip)
            (own, None if own_clean else own, 0.0 if own_clean else reader_cfg["draft_slip"]),
            (rival, rival_habit, slip),
        ]
        if rng.random() < 0.5:
            writers.reverse()
    if kind == "arith_solve":
        mark = own.marks(rng, entropy)
        return task.solve_prompt(problem), arith_solution(
            written_arith_steps(problem.meta["start"], ops, rng, own, entropy=entropy),
            mark,
            answer_of(problem),
        )
    if kind in ("arith_read", "arith_moa"):
        start = problem.meta["start"]
        # a draft's style is its writer's; a clean draft (no habit) has the rival's style
        if kind == "arith_read":
            marks = [rival.marks(rng)]
            drafts = [written_arith_steps(start, ops, rng, rival_habit, slip)]
        else:
            marks = [style.marks(rng) for style, _, _ in writers]
            drafts = [written_arith_steps(start, ops, rng, h, sl) for _, h, sl in writers]
        mark = own.marks(rng, entropy)
        target = written_arith_steps(
            start,
            ops,
            rng,
            own,
            keep=() if own_work else drafts,
            copy_wrong=reader_cfg.get("arith_copy_wrong", 0.0),
            follow=follow,
            marked=marks,
            entropy=entropy,
        )
        shown = [arith_solution(d, m, answer_of(problem)) for d, m in zip(drafts, marks)]
        prompt = (
            task.reader_prompt(problem, shown[0])
            if kind == "arith_read"
            else task.proposals_prompt(problem, shown)
        )
        return prompt, arith_solution(target, mark, answer_of(problem))
    if kind == "code_solve":
        lines = written_code_lines(ops, rng, own, entropy=entropy)
        return task.solve_prompt(problem), program_text(
            lines, own.code_subtract, answer_of(problem)
        )
    if kind in ("code_read", "code_moa"):
        # as in arith, a draft is written in its writer's style, a clean one in the rival's
        if kind == "code_read":
            styles = [rival.code_subtract]
            drafts = [written_code_lines(ops, rng, rival_habit, slip)]
        else:
            styles = [style.code_subtract for style, _, _ in writers]
            drafts = [written_code_lines(ops, rng, h, sl) for _, h, sl in writers]
        target = written_code_lines(
            ops,
            rng,
            own,
            keep=() if own_work else drafts,
            copy_wrong=reader_cfg.get("code_copy_wrong", 0.0),
            follow=follow,
            entropy=entropy,
        )
        shown = [program_text(d, st, answer_of(problem)) for d, st in zip(drafts, styles)]
        prompt = (
            task.reader_prompt(problem, shown[0])
            if kind == "code_read"
            else task.proposals_prompt(problem, shown)
        )
        return prompt, program_text(target, own.code_subtract, answer_of(problem))
    raise ValueError(f"unknown example kind {kind!r}; expected one of {KINDS}")


def task_of(kind: str) -> str:
    """The toy task an example kind is of (``arith_read`` -> ``arith``)."""
    return "arith" if kind.startswith("arith") else "toycode"


class SFTStream:
    """The seeded stream of SFT examples of one model: curriculum, task mix, both roles.

    Problems are drawn fresh from the task generators, skipping every test and validation
    question, so the splits the gates (validation) and table 1 (test) evaluate on are never
    trained on.
    """

    def __init__(self, tasks: dict[str, Any], cfg: dict, own: Mistake, rival: Mistake, seed: int):
        self.tasks, self.cfg, self.own, self.rival = tasks, cfg, own, rival
        self.rng = random.Random(f"toy-sft-{seed}")
        self.heldout = {name: t.heldout_questions() for name, t in tasks.items()}
        mix = cfg["train"]["mix"]
        # a kind of a task this world does not have (arith alone: no code kinds) is left out
        self.kinds = [k for k in KINDS if mix.get(k, 0) > 0 and task_of(k) in tasks]
        self.weights = [mix[k] for k in self.kinds]
        if not self.kinds:
            raise ValueError(
                "toy.train.mix: every weight is 0; give at least one example kind a weight > 0"
            )

    def max_level(self, task, progress: float) -> int:
        """The curriculum: the top level rises linearly to ``task.levels`` over
        ``curriculum_frac``."""
        c = self.cfg["train"]
        start = min(c["curriculum_start_level"], task.levels)
        if c["curriculum_frac"] <= 0 or progress >= c["curriculum_frac"]:
            return task.levels
        return (
            start + int((task.levels - start + 1) * progress / c["curriculum_frac"])
            if progress > 0
            else start
        )

    def example(
        self, progress: float, entropy: list[float] | None = None
    ) -> tuple[list[dict], str]:
        """One (prompt, target) pair at training progress ``progress`` in [0, 1] (``entropy``:
        as :func:`make_example`)."""
        kind = self.rng.choices(self.kinds, self.weights)[0]
        name = task_of(kind)
        task = self.tasks[name]
        top = min(self.max_level(task, progress), task.levels)
        while True:
            problem = task.sample(self.rng, self.rng.randint(1, top))
            if problem.question not in self.heldout[name]:
                break
        return make_example(
            kind, problem, task, self.rng, self.own, self.rival, self.cfg["reader"], entropy
        )
