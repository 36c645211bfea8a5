"""The architecture holds: ``agon/`` never imports ``baselines/``, no import cycles, no private
names imported across packages, no oversized module or workflow file without a stated reason,
and no heavy
module (torch, transformers, TRL) on the paths that must start fast, each lazy import keeping
off the module its comment names.

Read from the source (every ``import`` statement, function-level ones included), so a lazy
import cannot hide a dependency.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agon", "baselines")
MAX_LINES = 400  # a longer module says why on its first lines ("# long: ...")
# the Snakefile and each .smk file (a rules file: a stage's few rules; a helper file: one
# subject, workflow/rules/common.smk's seams); a longer one says why in the same way
WORKFLOW_MAX_LINES = 200
WORKFLOW_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]


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


def _check_size(path: Path, limit: int) -> None:
    """``path`` has at most ``limit`` lines, or says why it is one piece on its first lines."""
    lines = path.read_text().splitlines()
    if len(lines) > limit:
        assert any(line.startswith("# long:") for line in lines[:3]), (
            f"{path.relative_to(ROOT)} has {len(lines)} lines (> {limit}): split it "
            "along its seams, or say why it is one piece in a '# long: ...' line at its top"
        )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    _check_size(MODULES[module], MAX_LINES)


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_workflow_file_size(path):
    """The Snakefile and every rules or helper file: the workflow's Python helpers stay split
    by subject (config and resources, snapshots, each table's jobs), as modules are."""
    _check_size(path, WORKFLOW_MAX_LINES)


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


# ------------------------------------------------------------------ what a lazy import keeps off
#
# A lazy import's comment names the modules it keeps off its module's import, then says why
# that matters: ``# lazy: torch, transformers (agon.engines.hf imports them): off ...``, or
# ``# lazy: cycle: agon.x: ...`` where importing agon.x at the top would close a loop.

LAZY_NOTE = re.compile(r"# lazy: (cycle: )?([A-Za-z_][\w.]*(?:, [A-Za-z_][\w.]*)*)( \(.+?\))?: \S")
ALL_MODULES = {
    **MODULES,
    **{
        f"bench.{f.stem}" if f.stem != "__init__" else "bench": f
        for f in (ROOT / "bench").glob("*.py")
    },
}
FAST_PATHS_OFF = ("torch", "transformers", "trl")  # what `agon`, the DAG and the reports never load


def _within(name: str, module: str) -> bool:
    """``name`` is ``module`` or one of its submodules."""
    return name == module or name.startswith(module + ".")


def _project_module(name: str) -> str | None:
    while name and name not in ALL_MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _stmt_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    """What one import statement imports: ``from m import a`` gives m and m.a (a may be a
    submodule)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level or not node.module:
        return []
    return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]


@functools.cache
def _top_level_imports(path: Path) -> frozenset[str]:
    """The modules ``path`` imports when it is imported: every import statement outside its
    functions (under ``if``/``try`` and in class bodies too, not under ``if TYPE_CHECKING``)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]))
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.update(_stmt_modules(child))
            visit(child)

    visit(ast.parse(path.read_text()))
    return frozenset(found)


@functools.cache
def _loads(module: str) -> frozenset[str]:
    """Every module name that importing the project module ``module`` imports, as far as the
    source says: the packages above it, their top-level imports and those of every project
    module these reach (a third-party module's own imports are not followed)."""
    seen: set[str] = set()
    names: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [p for i in range(1, len(parts)) if (p := ".".join(parts[:i])) in ALL_MODULES]
        for name in _top_level_imports(ALL_MODULES[m]):
            names.add(name)
            target = _project_module(name)
            if target is not None:
                todo.append(target)
    return frozenset(names | seen)


def _brings(stmt: ast.Import | ast.ImportFrom, name: str) -> bool:
    """Whether running ``stmt`` imports ``name``: it imports ``name`` (or a submodule), or a
    project module whose import imports it."""
    for imported in _stmt_modules(stmt):
        if _within(imported, name):
            return True
        target = _project_module(imported)
        if target is not None and any(_within(n, name) for n in _loads(target)):
            return True
    return False


def _lazy_groups(path: Path) -> dict[int, list[ast.Import | ast.ImportFrom]]:
    """The function-level imports of ``path`` by the line of the ``# lazy:`` comment above
    them (the nearest one, up through the comment, import and blank lines right above)."""
    lines = path.read_text().splitlines()
    groups: dict[int, list] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(node):
            if not isinstance(sub, (ast.Import, ast.ImportFrom)):
                continue
            i = sub.lineno - 1
            while i >= 0 and LAZY not in lines[i]:
                i -= 1
                if i < 0 or (lines[i].strip() and not lines[i].strip().startswith(PREFIXES)):
                    i = -1
            if i >= 0 and sub not in groups.get(i + 1, []):
                groups.setdefault(i + 1, []).append(sub)
    return groups


def _lazy_problems(path: Path, module: str | None) -> list[str]:
    """What is wrong with the lazy imports of ``path`` (the project module ``module``, or a
    file outside the project) as far as the source tells: a comment that names no module, an
    import that brings none of the modules its comment names, a named module that no import of
    the group brings, or one that the module imports at its top anyway (directly or through a
    project module); a ``cycle:`` whose module does not import this one."""
    lines = path.read_text().splitlines()
    on_import = _loads(module) if module else _top_level_imports(path)
    bad = []
    for at, stmts in sorted(_lazy_groups(path).items()):
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{at}"
        note = LAZY_NOTE.search(lines[at - 1])
        if note is None:
            bad.append(f"{where}: '{LAZY} MODULE[, MODULE] (...): why' names no module")
            continue
        cycle, names = bool(note.group(1)), note.group(2).split(", ")
        for stmt in stmts:
            if not any(_brings(stmt, n) for n in names):
                bad.append(f"{where}: line {stmt.lineno} imports none of {names}")
        for n in names:
            if not any(_brings(s, n) for s in stmts):
                bad.append(f"{where}: no import of the group brings {n}")
            if cycle:
                if module is None or _project_module(n) is None or module not in _loads(n):
                    bad.append(f"{where}: {n} does not import {module}: no cycle to avoid")
            elif any(_within(m, n) for m in on_import):
                bad.append(f"{where}: {n} is imported at the top anyway: import it there")
    return bad


def _lazy_files() -> dict[str, Path]:
    return {m: f for m, f in ALL_MODULES.items() if LAZY in f.read_text()}


def test_each_lazy_import_keeps_off_the_module_its_comment_names():
    """A lazy import earns its place: its comment names the modules it keeps off, each import
    under it brings one of them, and the module does not import them at its top anyway."""
    bad = [p for m, f in sorted(_lazy_files().items()) for p in _lazy_problems(f, m)]
    assert not bad, "\n".join(bad)


def test_lazy_import_effect_check_sees_a_pointless_or_misnamed_one(tmp_path):
    """The check above can fail: json imported at the top and again lazily, a comment naming
    a module its import does not bring, and a comment that names none."""
    f = tmp_path / "m.py"
    f.write_text(
        "import json\n\n\n"
        "def f():\n    # lazy: json: pointless\n    import json\n\n\n"
        "def g():\n    # lazy: torch: misnamed\n    import csv\n\n\n"
        "def h():\n    # lazy: seconds to import\n    import shlex\n\n\n"
        "def k():\n    # lazy: sqlite3 (a reason): fine\n    import sqlite3\n"
    )
    bad = _lazy_problems(f, None)
    assert bad == [
        "m.py:5: json is imported at the top anyway: import it there",
        "m.py:10: line 11 imports none of ['torch']",
        "m.py:10: no import of the group brings torch",
        "m.py:15: '# lazy: MODULE[, MODULE] (...): why' names no module",
    ]


def _loaded_after(code: str, names: tuple[str, ...]) -> dict:
    """Run ``code`` in a fresh interpreter at the repository root; which of ``names`` it left in
    ``sys.modules`` (``{"missing": name}`` where an import of a third-party module failed)."""
    script = (
        "import json, sys\n"
        "try:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "except ModuleNotFoundError as err:\n"
        "    print(json.dumps({'missing': err.name})); raise SystemExit\n"
        f"print(json.dumps({{'loaded': [n for n in {list(names)!r} if n in sys.modules]}}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_torch_transformers_or_trl():
    """``import agon.cli``, and building the parser of every subcommand (what ``agon --help``
    imports), leave torch, transformers and TRL unloaded: they come with the work that needs
    them."""
    code = (
        "import agon.cli\n"
        f"bare = [n for n in {list(FAST_PATHS_OFF)!r} if n in sys.modules]\n"
        "assert not bare, f'import agon.cli loads {bare}'\n"
        "agon.cli.build_parser([])\n"
    )
    assert _loaded_after(code, FAST_PATHS_OFF) == {"loaded": []}


def test_the_workflow_and_its_reports_import_no_torch_transformers_or_trl():
    """What the Snakefile (the DAG build) and the report scripts import of agon leaves torch,
    transformers and TRL unloaded."""
    sources = [ROOT / "Snakefile", *(ROOT / "workflow").rglob("*.smk")]
    sources += (ROOT / "workflow").rglob("*.py")
    found = {
        m
        for f in sources
        for m in re.findall(r"^\s*(?:from|import) (agon[\w.]*)", f.read_text(), re.M)
    }
    assert {"agon.config", "agon.results", "agon.report.table1"} <= found
    code = "".join(f"import {m}\n" for m in sorted(found))
    assert _loaded_after(code, FAST_PATHS_OFF) == {"loaded": []}


def test_each_lazy_import_keeps_its_module_off_in_fact():
    """Importing the modules that keep a module off, in a fresh interpreter, does not load it
    (what the source check above cannot see: a third-party module that imports another). One
    interpreter per kept-off module imports all of them (none loads it if all together do not);
    else each is imported alone. A module whose optional extra is missing here is left out."""
    keepers: dict[str, set[str]] = {}  # kept-off module -> the modules that keep it off
    for m, f in _lazy_files().items():
        lines = f.read_text().splitlines()
        for at in _lazy_groups(f):
            note = LAZY_NOTE.search(lines[at - 1])
            if note and not note.group(1):
                for name in note.group(2).split(", "):
                    keepers.setdefault(name, set()).add(m)
    assert keepers

    def check(name: str) -> list[str]:
        mods = sorted(keepers[name])
        code = "".join(f"import {m}\n" for m in mods)
        if _loaded_after(code, (name,)).get("loaded") == []:
            return []
        found = []
        for m in mods:
            alone = _loaded_after(f"import {m}", (name,))
            missing = alone.get("missing")
            assert missing is None or _project_module(missing) is None, (m, missing)
            if alone.get("loaded"):
                found.append(f"import {m} loads {name}")
        return found

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        bad = [line for lines in pool.map(check, sorted(keepers)) for line in lines]
    assert not bad, "\n".join(bad)


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
