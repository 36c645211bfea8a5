"""Where a completion's steps are, where its first mistake is, and which token that is.

Cliff needs the *token* at which a rollout's first mistake starts. Both teachers name a
position in the completion's text (a character offset), and :func:`char_to_token` maps it to
the sampled tokens. How a step is located, per task:

- **toy ``arith``** (:class:`agon.toy.tasks.ArithTask`, solutions like ``4*3=5 5+2=0
  \\boxed{0}``): a step is one ``a op b = c`` written in the text, and the final
  ``\\boxed{...}`` is a step of its own; the text between them must be blank (a completion
  with neither is shown to a model teacher as a generic one). The exact oracle
  (:func:`arith_first_mistake`) walks the text left to right and stops at the first of: a step
  whose value ``c`` differs from the gold chain's value after the same number of operations
  (the chain is rebuilt from ``problem.meta``, as the task generator built it); a step beyond
  the chain's length; a boxed answer that is not the gold answer; any other non-blank text
  (gibberish, a malformed step). A step with a miscopied operand but the right value is not a
  mistake: what it carries forward is right.
- **toy ``toycode``** (:class:`agon.toy.toycode.ToyCodeTask`, a fenced program of one line
  per operation): a step is one line. The oracle (:func:`code_first_mistake`) expects the gold
  program's fixed head lines, then operation lines, then its fixed tail lines, and stops at
  the first line that breaks that shape, or at the first operation line after which the
  program's map of ``x`` (as a function on 0..6: every operation is mod 7) differs from the
  gold chain's map after the same number of operations; a missing operation is found at the
  tail line that comes too early (when the program's map is not already the gold one); an
  extra operation line is a mistake itself. Blank lines are skipped.
- **a generic task** (DeepMath or any other math / code task; only the model teacher works
  there, since there is no gold chain): the steps are the non-blank lines of the completion
  (:func:`generic_steps`), or its sentences when it is a single line.

For both toy tasks the oracle finds no mistake (None: *unlocated*) when the text stops before
anything wrong was written (cut at ``max_new_tokens`` mid-solution, or a right solution the
grader still refused).

A step's place in tokens: its first character's offset, mapped by :func:`char_to_token` to the
first token whose decoded prefix reaches past it (a binary search over decoded prefixes of the
*sampled* ids, so no re-tokenization can disagree with what the policy generated). A mistake
that starts inside a token is charged from that token on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agon.tasks.base import Problem, Task
from agon.toy.chain import OPERANDS, OPS, answer_of, apply_op, gold_arith_steps
from agon.toy.tasks import ArithTask
from agon.toy.toycode import TRACE, ToyCodeTask, code_line, code_program, parse_code_lines

Span = tuple[int, int]  # [start, end) character offsets in a completion's text

_ARITH_EVENT = re.compile(r"(\d+)([-+*])(\d+)=(\d+)|\\boxed\{([^{}]*)\}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_NOT_BLANK = re.compile(r"\S")
# the start of a step or of a boxed answer, cut off by the generation limit
_ARITH_CUT = re.compile(
    r"\d+(?:[-+*](?:\d+=?)?)?"  # 5, 5+, 5+2, 5+2=
    r"|\\(?:b(?:o(?:x(?:e(?:d(?:\{[^{}]*)?)?)?)?)?)?"  # \, \b, ..., \boxed{, \boxed{3
)


# -- steps: what a teacher is shown ---------------------------------------------------------


def arith_steps(text: str) -> list[Span]:
    """The ``a op b = c`` steps and ``\\boxed{}`` answers of an arith completion, in order."""
    return [m.span() for m in _ARITH_EVENT.finditer(text)]


def line_steps(text: str) -> list[Span]:
    """Every non-blank line (without its newline)."""
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.strip():
            out.append((pos, pos + len(body)))
        pos += len(line)
    return out


def generic_steps(text: str) -> list[Span]:
    """The non-blank lines; a single line is split into sentences (after ``.``, ``!``, ``?``)."""
    lines = line_steps(text)
    if len(lines) != 1:
        return lines
    start, end = lines[0]
    out, pos = [], start
    for m in _SENTENCE_END.finditer(text, start, end):
        if text[pos : m.start()].strip():
            out.append((pos, m.start()))
        pos = m.end()
    if text[pos:end].strip():
        out.append((pos, end))
    return out


def task_steps(task: Task, text: str) -> list[Span]:
    """The steps of ``text`` as the teacher sees them, by task (see the module docstring)."""
    if isinstance(task, ArithTask):
        return arith_steps(text) or generic_steps(text)
    if isinstance(task, ToyCodeTask):
        return line_steps(text)
    return generic_steps(text)


# -- the exact oracle of the toy world -------------------------------------------------------


def _first_non_blank(text: str, start: int, end: int) -> int | None:
    m = _NOT_BLANK.search(text, start, end)
    return m.start() if m else None


def arith_first_mistake(problem: Problem, text: str) -> int | None:
    """The character offset of the first mistake of an arith completion (None: none written)."""
    gold = [s.result for s in gold_arith_steps(problem.meta["start"], problem.meta["ops"])]
    answer = str(problem.answer).strip()
    pos, i = 0, 0
    for m in _ARITH_EVENT.finditer(text):
        junk = _first_non_blank(text, pos, m.start())
        if junk is not None:
            return junk
        if m.group(5) is not None:  # a boxed answer
            if m.group(5).strip() != answer:
                return m.start()
        else:
            if i >= len(gold) or int(m.group(4)) != gold[i]:
                return m.start()
            i += 1
        pos = m.end()
    junk = _first_non_blank(text, pos, len(text))
    if junk is not None and _ARITH_CUT.fullmatch(text[junk:].rstrip()):
        return None  # a last step cut off mid-way: nothing wrong written yet
    return junk


def _chain_map(ops: Sequence[tuple[str, int]]) -> tuple[int, ...]:
    """The map x -> chain(x) on 0..6 (every operation is mod 7, so this is the whole map)."""
    out = []
    for x in range(7):
        for op, k in ops:
            x = apply_op(x, op, k)
        out.append(x)
    return tuple(out)


def _program_frame() -> tuple[list[str], list[str]]:
    """The gold program's lines before and after its operation lines."""
    marker = "\0"
    lines = code_program([marker]).splitlines()
    at = lines.index(marker)
    return lines[:at], lines[at + 1 :]


def code_first_mistake(problem: Problem, text: str) -> int | None:
    """The character offset of the first mistake of a toycode completion (None: none written)."""
    gold_ops = [tuple(o) for o in problem.meta["ops"]]
    trace = answer_of(problem) == "trace"  # every line prints its result: each one is checked
    head, tail = _program_frame()
    written: list[tuple[str, int]] = []
    phase, expect = "head", list(head)  # head -> ops -> tail -> done
    for start, end in line_steps(text):
        line = text[start:end].rstrip()
        if phase == "done":  # anything after the closing fence
            return start
        if phase == "ops":
            if _cut_line(text, end, line, [*_OP_LINES[trace], tail[0]]):
                return None
            parsed = parse_code_lines(line) if line.startswith(" x=") else []
            if parsed:  # an operation line
                if parsed[0] is None or len(written) >= len(gold_ops):
                    return start
                if line.endswith(TRACE) != trace:
                    return start
                written.append(parsed[0])
                if _chain_map(written) != _chain_map(gold_ops[: len(written)]):
                    return start
                continue
            # the operations end here: a missing one is a mistake unless the map is already right
            if len(written) < len(gold_ops) and (
                trace or _chain_map(written) != _chain_map(gold_ops)
            ):
                return start
            phase, expect = "tail", list(tail)
        if line != expect[0]:
            return None if _cut_line(text, end, line, [expect[0]]) else start
        expect.pop(0)
        if not expect:
            phase = "ops" if phase == "head" else "done"
    return None


_OP_LINES = {  # by trace: whether each line prints its result
    trace: [code_line(op, k, answer="trace" if trace else "final") for op in OPS for k in OPERANDS]
    for trace in (False, True)
}


def _cut_line(text: str, end: int, line: str, expected: Sequence[str]) -> bool:
    """Whether ``line`` is the text's unfinished last line, the start of an expected line."""
    return (
        not text[end:].strip()
        and not text.endswith("\n")
        and any(e.startswith(line) and e != line for e in expected)
    )


def oracle_mistake(task: Task, problem: Problem, text: str) -> int | None:
    """The exact first mistake of a toy completion (a character offset; None: not found)."""
    if isinstance(task, ArithTask):
        return arith_first_mistake(problem, text)
    if isinstance(task, ToyCodeTask):
        return code_first_mistake(problem, text)
    raise ValueError(
        f"cliff.teacher oracle needs a toy task (arith or toycode), not {task.name!r}; "
        "use cliff.teacher: model"
    )


def has_oracle(task: Task) -> bool:
    """Whether :func:`oracle_mistake` knows ``task``."""
    return isinstance(task, (ArithTask, ToyCodeTask))


# -- characters to tokens --------------------------------------------------------------------


def char_to_token(tokenizer: Any, token_ids: Sequence[int], pos: int) -> int:
    """The index of the token in which character ``pos`` of the decoded text lies.

    The smallest ``t`` with ``len(decode(ids[: t + 1])) > pos`` (binary search; the engines
    decode with special tokens kept, so prefixes match the completion's text); ``len(ids)``
    when ``pos`` is past the text.
    """
    ids = list(token_ids)

    def length(n: int) -> int:
        return len(tokenizer.decode(ids[:n], skip_special_tokens=False))

    if pos < 0:
        return 0
    lo, hi = 0, len(ids)  # answer in [lo, hi]: length(hi) > pos unless hi == len(ids)
    if hi == 0 or length(hi) <= pos:
        return len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if length(mid + 1) > pos:
            hi = mid
        else:
            lo = mid + 1
    return lo
