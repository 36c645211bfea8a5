"""The package imports without GPU-only or heavy packages, and the CLI answers --help."""

import subprocess
import sys


def test_import_agon_loads_no_gpu_package():
    code = (
        "import sys, agon, agon.config, agon.tasks, agon.stats, agon.grading; "
        "print(sorted(m for m in ('vllm', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_cli_help():
    out = subprocess.run(
        [sys.executable, "-m", "agon", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    for cmd in ("grade", "config", "data"):
        assert cmd in out.stdout
