"""`python tests/_agon_with_test_task.py train ...`: the `agon` CLI with the tests' ParityTask
registered.

Subprocess tests (a real SIGKILL needs a real process) run the real entry point through this.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agon.cli import main
from agon.tasks import register_task
from tests.duel_helpers import ParityTask

register_task("parity_test", ParityTask)
sys.exit(main(sys.argv[1:]))
