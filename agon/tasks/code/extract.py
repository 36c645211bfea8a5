"""Code extraction: the program a completion submits is its last fenced python block.

Every code task grades what :func:`extract_code` returns, so the rule lives in one place: tasks,
the toy code task and the tests agree on which block counts. Extraction never runs anything; a
truncated block is still returned, and the sandbox decides whether it runs.
"""

from __future__ import annotations

THINK_START, THINK_END = "<think>", "</think>"
PYTHON_FENCES = ("", "python", "py", "python3", "py3")  # info strings taken as python


def extract_code(completion: str) -> str | None:
    """The last fenced python block of a completion, or None when there is none.

    Fences with no language tag count as python (models often omit it); fences tagged with
    another language do not. For thinking models only the text after ``</think>`` counts; an
    unclosed ``<think>`` has no answer. A final fence that never closes (a truncated
    generation) yields its text to the end: the sandbox, not the extractor, decides whether it
    runs. Linear in the completion's length.
    """
    if THINK_END in completion:
        completion = completion.rsplit(THINK_END, 1)[1]
    elif THINK_START in completion:
        return None
    last: str | None = None
    block: list[str] | None = None
    is_python = False
    for line in completion.split("\n"):
        stripped = line.strip()
        if block is None:
            if stripped.startswith("```"):
                info = stripped[3:].strip().lower()
                block, is_python = [], info in PYTHON_FENCES
        elif stripped == "```" or (stripped.startswith("```") and not stripped.strip("`")):
            if is_python:
                last = "\n".join(block) + "\n"
            block = None
        else:
            block.append(line)
    if block is not None and is_python and any(b.strip() for b in block):
        last = "\n".join(block) + "\n"
    if last is not None and not last.strip():
        return None
    return last
