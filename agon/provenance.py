"""Every results file goes through here: written atomically, carrying its provenance.

Provenance is the config hash, the seed, the git commit (and whether the tree was dirty), a
fingerprint of the package's source (:func:`source_fingerprint`), package versions, host facts
and a UTC timestamp, so a number in table 1 can be traced to
the code and settings that measured it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from agon.config import config_hash

PACKAGES = (
    "agon",
    "torch",
    "transformers",
    "trl",
    "accelerate",
    "datasets",
    "math-verify",
    "vllm",
    "snakemake",
    "numpy",
)


# tracked files the project generates and commits (results/regime.csv, docs/results.md, ...):
# rewriting them is what a regenerating run does, so it does not make the tree dirty
GENERATED = ("results", "docs/results.md")


def git_commit(cwd: str | Path | None = None) -> dict:
    """The HEAD commit of the repository holding ``cwd`` (or this package), and if it is dirty:
    a tracked file differs from the commit, the generated ones (:data:`GENERATED`) aside."""
    where = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)"]
            + [f":(top,exclude){g}" for g in GENERATED],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


SOURCE_PACKAGES = ("agon", "baselines")
SOURCE_SUFFIXES = (".py", ".yaml", ".json", ".jinja")


@functools.cache
def source_fingerprint(root: str | Path | None = None) -> str:
    """sha256 of the code that makes results: every source file of ``agon/`` and ``baselines/``
    under ``root`` (default: the checkout this package runs from), path and bytes, sorted.

    Unlike the git commit it also changes with uncommitted edits, so a job can tell whether the
    state it would resume from was made by the same code.
    """
    root = Path(root) if root is not None else Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for pkg in SOURCE_PACKAGES:
        files = sorted(
            f
            for f in (root / pkg).rglob("*")
            if f.suffix in SOURCE_SUFFIXES and "__pycache__" not in f.parts and f.is_file()
        )
        for f in files:
            digest.update(f.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names`` (None when absent)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_model() -> str | None:
    """The CPU's model name (Linux: ``/proc/cpuinfo``; elsewhere what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host() -> dict[str, Any]:
    """The machine a result was computed on. Floating-point results depend on it: torch picks
    its CPU kernels by instruction set (``cpu_capability``: AVX2, AVX512, ...), so two CPUs can
    sum in different orders and a seeded run then takes another draw. Read from torch only when
    the job already imported it."""
    out: dict[str, Any] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        if torch.cuda.is_available():
            out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return out


def provenance(config: Any = None, seed: int | None = None, **extra: Any) -> dict:
    """The provenance block of a results file."""
    return {
        "config_hash": config_hash(config) if config is not None else None,
        "seed": seed,
        "git": git_commit(),
        "code": {"source_sha256": source_fingerprint()},
        "packages": package_versions(),
        "python": platform.python_version(),
        "host": host(),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_results(
    path: str | Path, payload: dict, config: Any = None, seed: int | None = None, **extra: Any
) -> Path:
    """Write a JSON results file atomically with a ``provenance`` block added.

    ``config`` is what the numbers depend on (its hash is recorded, and the config itself under
    ``provenance.config`` so the file is self-describing).
    """
    prov = provenance(config, seed, **extra)
    if config is not None:
        prov["config"] = config
    body = {**payload, "provenance": prov}
    return atomic_write_text(path, json.dumps(body, indent=2, sort_keys=False, default=str) + "\n")


def read_results(path: str | Path) -> dict:
    """Read a results JSON file written by :func:`write_results`."""
    with open(path) as f:
        return json.load(f)
