"""A run's dir: a fresh temp dir holding the program, owned by the run's own uid as root.

The dir is the run's cwd, HOME and TMPDIR; the program may do anything in it, so the grader
reads what the program left there as hostile (:func:`agon.sandbox.bootstrap.read_regular`)
and removes the dir whatever modes the program left on it. File names from the data
(``input.txt``) are checked to be plain names in the dir (:func:`_plain_name`).
"""

from __future__ import annotations

import os
import tempfile
import uuid

from agon.sandbox.isolation import _is_root, _uid_method
from agon.sandbox.reaper import _rmtree
from agon.sandbox.uids import _uid_slots

_READ_CHUNK = 65536


def _plain_name(name: str) -> str:
    """A file name the data gives (``input.txt``): a plain name in the run's dir, never a path
    out of it nor one of the sandbox's own files."""
    if (
        not name
        or os.path.basename(name) != name
        or name in (".", "..", "prog.py", "tests")
        or "\0" in name
    ):
        raise ValueError(f"file name {name!r} is not a plain file name in the run's dir")
    return name


class _Box:
    """A run's fresh dir (its cwd, HOME and TMPDIR) holding ``prog.py``, and, as root, the
    unprivileged uid the run drops to (one per concurrent run). A context manager: on exit the
    dir is removed, whatever the program did to it, and the uid is given back."""

    def __init__(self, code: str, level: str, python: str):
        self.level = level
        # If no way to drop the uid works, a root run keeps root (weaker, see agon.sandbox).
        self._slots = _uid_slots() if _is_root() and _uid_method(python) else None
        self.uid = self._slots.take() if self._slots is not None else None
        self.method = _uid_method(python) if self.uid is not None else None
        self.marker = uuid.uuid4().hex if level == "none" else None
        self.tmp = None
        try:
            self.tmp = tempfile.mkdtemp(prefix="agon-sbx-")
            self.write("prog.py", code, owner=None)
            if self.uid is not None:
                os.chown(self.tmp, self.uid, self.uid)
        except BaseException:
            self.close()
            raise

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)

    def write(self, name: str, text: str, owner: int | None = -1) -> None:
        """Write ``text`` to ``name`` in the dir, readable by the run; owned by the run's uid
        (``owner`` -1), or left to the grader (None: the program can read but not change it,
        since sticky or not, a file it does not own keeps its contents)."""
        path = self.path(name)
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        os.chmod(path, 0o644)
        uid = self.uid if owner == -1 else owner
        if uid is not None:
            os.chown(path, uid, uid)

    def close(self) -> None:
        if self.tmp is not None:
            _rmtree(self.tmp)
            self.tmp = None
        if self.uid is not None:
            self._slots.give(self.uid)
            self.uid = None

    def __enter__(self) -> _Box:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()
