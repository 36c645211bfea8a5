"""``agon-lm-eval``: the ``lm_eval`` command with agon's model types and task YAMLs registered.

Arguments are lm-eval's own. agon's task folder is searched in addition to any
``--include_path``: lm-eval's CLI takes one path, its ``TaskManager`` a list, so this process's
``TaskManager`` is given both (a wrapper of its constructor; lm-eval itself is not modified).
"""

from __future__ import annotations

import functools
import sys

from agon.lm_eval_interop import TASKS_DIR, register


def _add_agon_tasks() -> None:
    """Make every TaskManager of this process also index agon's task YAMLs."""
    # lazy: lm_eval: the optional extra `lm-eval`; main() says how to install it
    from lm_eval.tasks import TaskManager

    original = TaskManager.__init__
    if getattr(original, "_agon", False):
        return

    @functools.wraps(original)
    def init(self, *args, include_path=None, **kwargs):
        paths = (
            []
            if include_path is None
            else list(include_path)
            if isinstance(include_path, (list, tuple))
            else [include_path]
        )
        original(self, *args, include_path=[*paths, TASKS_DIR], **kwargs)

    init._agon = True
    TaskManager.__init__ = init


def main(argv: list[str] | None = None) -> None:
    """Register agon's models and tasks, then run lm-eval's CLI on ``argv``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # lazy: lm_eval: the optional extra `lm-eval`; its absence is reported here
        import lm_eval  # noqa: F401
    except ModuleNotFoundError:
        sys.exit(
            "agon-lm-eval needs lm-evaluation-harness, an optional extra of agon: "
            "pip install -e '.[lm-eval]' (from the repository root)"
        )
    register()
    _add_agon_tasks()
    # lazy: lm_eval: the optional extra `lm-eval`; its absence is reported above
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", *argv]
    cli_evaluate()


if __name__ == "__main__":
    main()
