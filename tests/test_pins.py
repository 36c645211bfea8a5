"""One torch pin everywhere: the README's install lines, CI and the GPU environment agree."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pins(text: str) -> set[str]:
    return set(re.findall(r"\btorch==([0-9][0-9a-z.+]*)", text))


def test_the_readme_ci_and_the_gpu_environment_pin_one_torch():
    readme = _pins((ROOT / "README.md").read_text())
    ci = _pins((ROOT / ".ci" / "run").read_text())
    deps = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    env = _pins("\n".join(pip))
    assert len(readme) == 1 and readme == ci == env, (readme, ci, env)


def test_the_pin_finder_sees_a_disagreement():
    assert _pins("pip install torch==2.13.0 && pip install torch==2.14.0") == {"2.13.0", "2.14.0"}
