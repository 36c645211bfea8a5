"""A stand-in engine for the engine-process tests (tests/test_engines.py): built in a real child
process by :class:`agon.engines.process.EngineProcess`, it fails the ways an engine can. Its
behaviour is picked by the first prompt's text:

- ``hang``: never answers (an engine stuck or busy when its trainer dies);
- ``orphan``: starts a grandchild that holds the engine's end of the pipe, writes the
  grandchild's pid to ``pid_file``, and dies (exit 3) without answering;
- anything else: one completion whose text is the prompt's.

``load_staged`` answers the staged file's names; ``sleep`` and ``wake_up`` record their calls,
which ``generate`` reports for the prompt ``state``. Kept free of torch and transformers so
that an engine process starts in well under a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from agon.engines.base import Completion, Engine


class FaultyEngine(Engine):
    """The stand-in; ``pid_file``: where ``orphan`` writes its grandchild's pid."""

    def __init__(self, pid_file: str | None = None, fail: bool = False):
        if fail:
            raise ValueError("this engine does not start")
        self.pid_file, self.calls = pid_file, []

    def generate(self, prompts, n=1, sampling=None):
        what = prompts[0][0]["content"]
        if what == "hang":
            time.sleep(3600)
        if what == "orphan":
            fd = int(sys.argv[1])  # the engine process's end of the pipe (agon.engines.process)
            keeper = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(300)"], pass_fds=(fd,)
            )
            with open(self.pid_file, "w") as f:
                f.write(str(keeper.pid))
            os._exit(3)
        text = " ".join(self.calls) if what == "state" else what
        return [[Completion(text, [1], [0.0], [0], "stop")] * n for _ in prompts]

    def load_staged(self, path):
        from safetensors import safe_open

        with safe_open(path, framework="np") as f:
            return sorted(f.keys())

    def sleep(self, level=1):
        self.calls.append(f"sleep{level}")

    def wake_up(self):
        self.calls.append("wake")
