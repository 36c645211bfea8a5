"""The architecture holds: ``agon/`` never imports ``baselines/``, no import cycles, no private
names imported across packages, and no oversized module without a stated reason.

Read from the source (every ``import`` statement, function-level ones included), so a lazy
import cannot hide a dependency.
"""

from __future__ import annotations

import ast
import re
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


# ------------------------------------------------------------------ the shell and the core


def _importers_of(target: str) -> list[str]:
    return sorted(m for m, deps in _graph().items() if target in deps)


def test_no_trainer_module_imports_the_duel_and_baselines_build_on_the_core():
    """The loop and the shell run any step they are given: nothing under agon/training/ knows
    the duel; the related baselines stand on the policy-gradient core (agon.rl), not on it."""
    bad = [m for m in _importers_of("agon.duel") if m.startswith(("agon.training", "baselines"))]
    assert not bad, f"these import agon.duel: {bad}"
    core_users = {m.split(".")[1] for m in _importers_of("agon.rl") if m.startswith("baselines")}
    assert {"cliff", "gar", "opd_then_rl"} <= core_users


def test_bench_never_imports_the_tests():
    bad = [
        (str(f.relative_to(ROOT)), module)
        for f in (ROOT / "bench").rglob("*.py")
        for module, _ in _imports(f)
        if module == "tests" or module.startswith("tests.") or module in TEST_MODULES
    ]
    assert not bad, f"bench/ must not import tests/ (put shared pieces in agon/): {bad}"


TEST_MODULES = {f.stem for f in (ROOT / "tests").glob("*.py")}


# ------------------------------------------------------------------ imports at the top

LAZY = "# lazy:"  # the comment a function-level import carries, with its reason
PREFIXES = ("#", "from ", "import ")


def _function_imports(path: Path) -> list[int]:
    """Line numbers of the import statements inside functions of ``path``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    found.add(sub.lineno)
    return sorted(found)


def test_imports_inside_functions_say_why():
    """An import belongs at the top of its module, where its reader sees it; one inside a
    function says why on its line or in the comment lines right above it (an optional
    dependency, a heavy import off the CLI's path, ...): ``# lazy: <reason>``."""
    bad = []
    for f in [*MODULES.values(), *(ROOT / "bench").rglob("*.py")]:
        lines = f.read_text().splitlines()
        for n in _function_imports(f):
            above = []
            i = n - 2
            # the import's group: the import, comment and blank lines right above it
            while i >= 0 and (not lines[i].strip() or lines[i].strip().startswith(PREFIXES)):
                above.append(lines[i])
                i -= 1
            if not any(LAZY in line for line in [lines[n - 1], *above]):
                bad.append(f"{f.relative_to(ROOT)}:{n}: {lines[n - 1].strip()}")
    assert not bad, (
        "move these imports to the top of their module, or give each a reason "
        f"({LAZY} ...):\n" + "\n".join(bad)
    )


def test_lazy_import_check_sees_an_unexplained_import(tmp_path):
    """The check above can fail: a bare import inside a function is found."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    # lazy: heavy\n    import json\n\n\ndef g():\n    import os\n")
    assert _function_imports(f) == [3, 7]


# ------------------------------------------------------------------ the architecture document

DOC = ROOT / "docs" / "architecture.md"


def _documented_modules(text: str) -> set[str]:
    """The paths the module map of an architecture document names (``agon/rl.py``, folders
    as ``agon/training/``): the fenced block under ``## Modules``, nested by indentation."""
    block = text[text.index("## Modules") :]
    block = block[: block.index("\n## ", 4)]
    names, stack = set(), []
    for line in block.splitlines():
        m = re.match(r"^(\s*)([\w./]+\.py|[\w]+/)\s", line + " ")
        if not m or line.strip().startswith("```"):
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2)]
        names.add("".join(stack))
    return names


def test_architecture_doc_names_every_module_and_only_modules_that_exist():
    """docs/architecture.md's module map is true to the code: every module it names exists,
    and every module (but a package's ``__init__``) has its line there."""
    named = _documented_modules(DOC.read_text())
    gone = sorted(n for n in named if not (ROOT / n).exists())
    assert not gone, f"docs/architecture.md names what does not exist: {gone}"
    actual = {
        str(f.relative_to(ROOT))
        for pkg in PACKAGES
        for f in (ROOT / pkg).rglob("*.py")
        if f.name != "__init__.py"
    }
    missing = sorted(actual - named)
    assert not missing, f"docs/architecture.md's module map does not name: {missing}"


def test_doc_parser_reads_nested_folders():
    """The map's indentation nests folders: a module line under ``training/`` under
    ``agon/`` is ``agon/training/<module>``."""
    text = (
        "## Modules\n\n```\nagon/\n  rl.py   core\n  training/\n    loop.py   loop\n```\n\n## End\n"
    )
    assert _documented_modules(text) == {
        "agon/",
        "agon/rl.py",
        "agon/training/",
        "agon/training/loop.py",
    }
