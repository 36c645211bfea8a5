"""The architecture holds: ``agon/`` never imports ``baselines/``, no import cycles, no private
names imported across packages, and no oversized module without a stated reason.

Read from the source (every ``import`` statement, function-level ones included), so a lazy
import cannot hide a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agon", "baselines")
MAX_LINES = 400  # a longer module says why on its first lines ("# long: ...")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = f
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an imported name lives in (None: outside the project)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names imported from it) of every import statement in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, [a.name for a in node.names]))
    return out


def _graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        for module, names in _imports(path):
            for target in {_resolve(module), *(_resolve(f"{module}.{n}") for n in names)}:
                if target and target != m:
                    edges[m].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_library_never_imports_a_baseline():
    bad = [
        (m, module)
        for m, path in MODULES.items()
        if m.startswith("agon")
        for module, _ in _imports(path)
        if module == "baselines" or module.startswith("baselines.")
    ]
    assert not bad, f"agon/ must not import baselines/ (register it in agon.registry): {bad}"


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_cycle_detection_sees_a_cycle():
    """The check above can fail: a two-module loop is found."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_private_names_across_packages():
    """``from agon.x import _private`` only inside the package folder that owns ``_private``."""
    bad = []
    for m, path in MODULES.items():
        for module, names in _imports(path):
            target = _resolve(module)
            if target is None:
                continue
            owner, importer = target.rpartition(".")[0], m.rpartition(".")[0]
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and not (importer == owner or importer.startswith(owner + ".")):
                bad.append((m, module, private))
    assert not bad, bad


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    lines = MODULES[module].read_text().splitlines()
    if len(lines) > MAX_LINES:
        assert any(line.startswith("# long:") for line in lines[:3]), (
            f"{MODULES[module].relative_to(ROOT)} has {len(lines)} lines (> {MAX_LINES}): split it "
            "along its seams, or say why it is one piece in a '# long: ...' line at its top"
        )
