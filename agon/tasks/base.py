"""What a task is: problems, the solve, reader and proposals prompts, and a grade function.

Prompts are chat messages (``[{"role": ..., "content": ...}]``); the engine applies each
family's chat template and persona. The reader prompt holds the problem, the rival's draft,
marked as a possibly wrong attempt by a rival, and the instruction to solve the problem itself
(``docs/method.md``, the duel). What of the draft is shown is the family's ``draft_view``. The
proposals prompt is the reader prompt for several rival attempts at once, numbered (what a
Mixture-of-Agents aggregator reads under ``moa.prompt: reader``).

Every task has the six splits of :data:`SPLITS`, built from three disjoint ones (train,
validation, test) and a hardness predicate by :func:`build_splits`.

A task class declares what a config row's ``params`` may hold (:attr:`Task.PARAMS`: each
parameter's type, default and meaning, :class:`Param`; the ``grading_*`` ones take the config's
``grading`` section) and how many problems its splits will hold, from the params alone
(:meth:`Task.expected_split_sizes`: what ``agon plan`` prices without loading any data).
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agon.grading.math import MathGrader
from agon.grading.verdict import Verdict

Messages = list[dict[str, str]]
SPLITS = ("train", "validation", "test", "hard", "train_hard", "validation_hard")
"""The splits of every task. ``train``: what training draws problems from. ``validation``:
held out from training like ``test`` and disjoint from it; whatever tunes or monitors reads it
(the training-time probe, the toy world's pretrain gates), so ``test`` is only ever reported.
``test``: the held-out problems. ``hard``: the hard part of ``test``, the only split table 1
reads (``eval.split``). ``train_hard`` and ``validation_hard``: the hard parts of ``train`` and
``validation`` (``train.split`` may train on the former; the probe and the gates read the
latter)."""


@dataclass(frozen=True)
class Problem:
    """One problem: its id, the text shown to the model, and the gold answer or test spec."""

    id: str
    question: str
    answer: str
    difficulty: float | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


SOLVE_TEMPLATE = "{question}\n\nSolve the problem. Put your final answer in \\boxed{{}}."
READER_TEMPLATE = (
    "{question}\n\n"
    "Below is a rival's attempt at this problem. It may be wrong. Check it critically, then "
    "solve the problem yourself and put your final answer in \\boxed{{}}.\n\n"
    "<rival_attempt>\n{draft}\n</rival_attempt>"
)
PROPOSALS_TEMPLATE = (
    "{question}\n\n"
    "Below are {n} attempts at this problem by rivals. Any of them may be wrong, and they may "
    "disagree. Check each critically, keep what is right, then solve the problem yourself and "
    "put your final answer in \\boxed{{}}.\n\n"
    "{attempts}"
)


def numbered_attempts(proposals: Sequence[str]) -> str:
    """The proposals as ``<rival_attempt_1>...</rival_attempt_1>`` blocks, one after another."""
    return "\n\n".join(
        f"<rival_attempt_{i}>\n{p}\n</rival_attempt_{i}>" for i, p in enumerate(proposals, 1)
    )


def build_splits(
    train: Sequence[Problem],
    validation: Sequence[Problem],
    test: Sequence[Problem],
    is_hard: Callable[[Problem], bool],
) -> dict[str, list[Problem]]:
    """The six splits of :data:`SPLITS` from the three disjoint ones and a hardness predicate:
    ``hard``, ``train_hard`` and ``validation_hard`` are the problems of ``test``, ``train`` and
    ``validation`` for which ``is_hard`` holds, in their order.

    Raises ValueError when a validation problem id is also in train or test: the validation
    split is held out from training and disjoint from test. Train and test are the task's
    own (the toy tasks and DeepMath draw them disjoint; a code source's split is its own)."""
    val_ids = {p.id for p in validation}
    for name, ps in (("train", train), ("test", test)):
        shared = val_ids & {p.id for p in ps}
        if shared:
            raise ValueError(
                f"splits validation and {name} share {len(shared)} problem(s), e.g. "
                f"{sorted(shared)[:3]}"
            )

    def hard(ps: Sequence[Problem]) -> list[Problem]:
        return [p for p in ps if is_hard(p)]

    return {
        "train": list(train),
        "validation": list(validation),
        "test": list(test),
        "hard": hard(test),
        "train_hard": hard(train),
        "validation_hard": hard(validation),
    }


def content_sha256(splits: dict[str, list[Problem]]) -> str:
    """A hash of every problem's split, id, question, answer and difficulty: what a generated
    or packaged source produced, so two runs can show they saw the same problems."""
    digest = hashlib.sha256()
    for name in sorted(splits):
        for p in splits[name]:
            digest.update(
                f"{name}\x00{p.id}\x00{p.question}\x00{p.answer}\x00{p.difficulty}\x01".encode()
            )
    return digest.hexdigest()


def apply_draft_view(draft: str, view: str, tokenizer: Any = None) -> str:
    """The part of a draft the reader sees: ``full``, ``answer_section`` or ``last_tokens:N``.

    ``answer_section`` is the text after ``</think>`` (the whole draft if there is none).
    ``last_tokens:N`` counts tokenizer tokens when a tokenizer is given, else whitespace words.
    """
    if view == "full":
        return draft
    if view == "answer_section":
        return draft.rsplit("</think>", 1)[1].lstrip() if "</think>" in draft else draft
    m = re.fullmatch(r"last_tokens:(\d+)", view)
    if not m:
        raise ValueError(
            f"unknown draft_view {view!r}; expected full, answer_section or last_tokens:N"
        )
    n = int(m.group(1))
    if tokenizer is not None:
        ids = tokenizer.encode(draft, add_special_tokens=False)
        return tokenizer.decode(ids[-n:]) if len(ids) > n else draft
    words = draft.split(" ")
    return " ".join(words[-n:]) if len(words) > n else draft


# a Param's type: its JSON-schema name -> (how an error says it, the test of a value); a bool is
# not a number here (Python counts True as 1, a config that writes `true` for a size is wrong)
PARAM_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "integer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "number": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "string": ("a string", lambda v: isinstance(v, str)),
    "boolean": ("true or false", lambda v: isinstance(v, bool)),
    "array": ("a list", lambda v: isinstance(v, (list, tuple))),
    "object": ("a mapping", lambda v: isinstance(v, dict)),
}
GRADING_PREFIX = "grading_"  # a param `grading_<key>` takes the config's `grading.<key>`
EXPECTED_SPLITS = ("test", "validation", "hard")  # the splits Task.expected_split_sizes sizes


@dataclass(frozen=True)
class Param:
    """One parameter of a task's constructor, as a config row's ``params`` gives it.

    ``type``: a key of :data:`PARAM_TYPES` (JSON-schema names). ``default``: the constructor's
    default; a parameter whose default is None may also be null. ``help``: what it means.
    ``choices``: the values it may take, where the constructor allows only some."""

    type: str
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"Param type {self.type!r}: expected one of {sorted(PARAM_TYPES)}")
        if (problem := self.problem(self.default)) is not None:  # refuses its own default
            raise ValueError(f"Param default {self.default!r}: {problem}")

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this parameter, said as the config check says it
        (``expected an integer, got 'x'``), or None when nothing is."""
        if value is None and self.default is None:
            return None
        what, admits = PARAM_TYPES[self.type]
        if not admits(value):
            null = " or null" if self.default is None else ""
            return f"expected {what}{null}, got {value!r}"
        if self.choices is not None and value not in self.choices:
            return f"expected one of {list(self.choices)}, got {value!r}"
        return None


class TaskParamsError(ValueError):
    """Params (or grading settings) a task's declaration refuses. ``task``: its name;
    ``problems``: one line per refused key, each naming the config key it came from
    (``params.n_test: expected an integer, got 'x'``), so a config check can prefix its row."""

    def __init__(self, task: str, problems: list[str]):
        self.task, self.problems = task, list(problems)
        super().__init__(f"task {task!r}: " + "; ".join(self.problems))


def params_problems(declared: dict[str, Param], params: dict[str, Any]) -> list[str]:
    """One line per key of ``params`` that ``declared`` refuses (an unknown key: which keys it
    has; a bad value: what the key takes), each as ``params.<key>: ...``."""
    out = []
    for key, value in params.items():
        param = declared.get(key)
        if param is None:
            out.append(f"params.{key}: not a parameter; expected one of {sorted(declared)}")
        elif (problem := param.problem(value)) is not None:
            out.append(f"params.{key}: {problem}")
    return out


ERROR_STYLES = ("visible", "hidden", "other")  # Task.error_style's answers for a wrong completion
# the seed of the fixed wrong drafts every robustness measure reads (Task.wrong_draft): one
# probe set for every method, seed and run
WRONG_DRAFT_SEED = 0


class Task(ABC):
    """A task of table 1. Subclasses set ``name`` and ``kind`` and implement the loaders; a
    subclass whose constructor takes parameters declares them in :attr:`PARAMS`, and the
    parameters that size its splits in :attr:`SIZE_PARAMS` (or overrides
    :meth:`expected_split_sizes`)."""

    name: str = ""
    kind: str = "math"  # "math" or "code": which grader family
    version: str = "1"  # bump when problems, prompts or grading change (lm-eval habit)
    # the constructor's keyword parameters: what a config row's `params` may hold (the
    # `grading_*` ones also take the config's `grading` section); none by default
    PARAMS: ClassVar[dict[str, Param]] = {}
    # "test" / "validation": the parameter of PARAMS that sets the split's size
    SIZE_PARAMS: ClassVar[dict[str, str]] = {}

    @classmethod
    def expected_split_sizes(cls, params: dict[str, Any]) -> dict[str, int | None]:
        """How many problems each split of :data:`EXPECTED_SPLITS` will hold with ``params``
        (a config row's, defaults for what it leaves out), from the params alone, without
        loading any data: what ``agon plan`` prices. None: unknown before the data are read.

        By default a split's size is its :attr:`SIZE_PARAMS` parameter's value, and ``hard``
        (the part of ``test`` a difficulty threshold keeps) is unknown."""
        sizes: dict[str, int | None] = dict.fromkeys(EXPECTED_SPLITS)
        for split, key in cls.SIZE_PARAMS.items():
            sizes[split] = params.get(key, cls.PARAMS[key].default)
        return sizes

    def problems(self, split: str) -> list[Problem]:
        """The problems of ``split`` (one of :data:`SPLITS`), in a fixed order.

        By default every split is built at once by :meth:`_load` (and cached there)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        return self._load()[split]

    def _load(self) -> dict[str, list[Problem]]:
        """All splits, keyed by the names in :data:`SPLITS`; implement this or :meth:`problems`."""
        raise NotImplementedError(f"{type(self).__name__} must implement _load() or problems()")

    def split_manifest(self) -> dict:
        """The split as data: ids per split and a hash of them, plus :meth:`_manifest_extra`
        (source, content hashes), so a run can prove which problems it trained and tested on."""
        ids = {name: [p.id for p in self.problems(name)] for name in SPLITS}
        return {
            "task": self.name,
            "version": self.version,
            **self._manifest_extra(),
            "split_sha256": hashlib.sha256(repr(sorted(ids.items())).encode()).hexdigest(),
            "sizes": {k: len(v) for k, v in ids.items()},
            "ids": ids,
        }

    def evaluation_notes(self) -> dict:
        """What an evaluation summary must say about how this task chose or graded its
        problems beyond pass@k (e.g. problems left out because they need a checker); empty
        for most tasks."""
        return {}

    def _manifest_extra(self) -> dict:
        """Task-specific fields of the split manifest (where the problems came from)."""
        return {}

    def worked_solution(self, problem: Problem) -> str | None:
        """An expert's worked solution of ``problem``, written as a completion of the solve
        prompt (reasoning, then the final answer as the prompt asks for it), or None when the
        task has none for it (the default). The toy tasks give their gold solution,
        reasoning-gym the generator's worked solution (``gsm_symbolic``), DeepMath its first R1
        solution (read with ``solutions: true``); the GAR baseline anchors on it."""
        return None

    def error_style(self, problem: Problem, completion: str) -> str | None:
        """How a wrong ``completion`` of ``problem`` went wrong, where the task can tell: one of
        :data:`ERROR_STYLES` (``visible``: the writer shows a reader where to check, e.g. the
        toy arith's mark; ``hidden``: every written input is right and a result is wrong, so
        only recomputing finds it; ``other``: any other departure), or None for a right
        completion or a task that cannot classify (the default). The duel's metrics report the
        drafter's hidden share (``docs/method.md``, what the toy world can show)."""
        return None

    def wrong_draft(self, problem: Problem, seed: int, style: str | None = None) -> str | None:
        """A fixed wrong draft of ``problem`` in ``style`` (None: the task's own choice), the
        same for a given ``seed`` every time: the probe of a reader's robustness reads these
        (:mod:`agon.training.probe`), so every method is measured on the same drafts. None when
        the task cannot write one (the default)."""
        return None

    def solve_prompt(self, problem: Problem) -> Messages:
        """The ordinary prompt: solve the problem."""
        return [{"role": "user", "content": SOLVE_TEMPLATE.format(question=problem.question)}]

    def reader_prompt(self, problem: Problem, draft: str) -> Messages:
        """The reader's prompt: the problem, a rival's (possibly wrong) draft, then solve it."""
        return [
            {
                "role": "user",
                "content": READER_TEMPLATE.format(question=problem.question, draft=draft),
            }
        ]

    def proposals_prompt(self, problem: Problem, proposals: Sequence[str]) -> Messages:
        """The reader prompt for several rival attempts: the problem, the proposals numbered
        (each marked as a rival's, possibly wrong; they may disagree), then solve it
        (:data:`PROPOSALS_TEMPLATE`). One proposal is the ordinary reader prompt."""
        if not proposals:
            raise ValueError("proposals_prompt needs at least one proposal")
        if len(proposals) == 1:
            return self.reader_prompt(problem, proposals[0])
        content = PROPOSALS_TEMPLATE.format(
            question=problem.question, n=len(proposals), attempts=numbered_attempts(proposals)
        )
        return [{"role": "user", "content": content}]

    @abstractmethod
    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """One verdict per (problem, completion) pair; never raises for a hostile completion."""

    def close(self) -> None:  # noqa: B027 - optional: a task with no grading pool
        """Release grading resources (worker pools); safe to call twice."""


class MathTask(Task):
    """A task graded by math-verify on the final boxed answer, in a pool that cannot hang."""

    kind = "math"
    PARAMS: ClassVar[dict[str, Param]] = {
        "grading_timeout_s": Param(
            "number", 5.0, "hard wall-clock limit per graded answer (config: grading.timeout_s)"
        ),
        "grading_workers": Param(
            "integer", 0, "grading worker processes, 0: one per core (config: grading.workers)"
        ),
    }

    def __init__(self, grading_timeout_s: float = 5.0, grading_workers: int = 0):
        """Parameters: :attr:`PARAMS`."""
        self.grading_timeout_s = grading_timeout_s
        self.grading_workers = grading_workers
        self._grader = None

    def grade(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Verdict]:
        """Grade with a lazily started :class:`agon.grading.math.MathGrader`, kept for reuse."""
        if self._grader is None:
            self._grader = MathGrader(
                timeout_s=self.grading_timeout_s, workers=self.grading_workers
            )
        return self._grader.grade([p.answer for p in problems], list(completions))

    def close(self) -> None:
        if self._grader is not None:
            self._grader.close()
            self._grader = None
