"""What made a table's numbers: the code and the kind of machine behind each results file.

Every summary carries its provenance (:mod:`agon.provenance`): the source fingerprint of the
code and the host (CPU model, torch's CPU kernel set, GPUs). A table reads them back here, ends
with one line on each (a warning when its files mix code versions, a note when they mix kinds of
machine: a seeded run takes the same draw only on the same kind) and lists them in its sidecar.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path


def _grouped(
    paths: Sequence[str | Path], key: Callable[[dict], str | None]
) -> dict[str, list[str]]:
    """The results files at ``paths`` grouped by ``key`` of their provenance block
    (``unknown`` where it gives None)."""
    out: dict[str, list[str]] = {}
    for p in paths:
        prov = json.loads(Path(p).read_text()).get("provenance") or {}
        out.setdefault(key(prov) or "unknown", []).append(str(p))
    return out


def code_versions(paths: Sequence[str | Path]) -> dict[str, list[str]]:
    """The source fingerprints (``provenance.code.source_sha256``) of the results files at
    ``paths``, each with the files made by that code; ``unknown`` for files that lack one."""
    return _grouped(paths, lambda prov: (prov.get("code") or {}).get("source_sha256"))


def machine_label(prov: dict) -> str | None:
    """The kind of machine a result was computed on, as far as a seeded rerun depends on it: the
    CPU model, torch's CPU kernel set and the GPUs (``provenance.host``); None if unrecorded."""
    h = prov.get("host") or {}
    if not h.get("cpu_capability"):
        return None
    label = f"{h.get('cpu_model') or 'unknown CPU'}, torch CPU kernels {h['cpu_capability']}"
    return label + (f", GPUs {', '.join(sorted(set(h['gpus'])))}" if h.get("gpus") else "")


def machines(paths: Sequence[str | Path]) -> dict[str, list[str]]:
    """The kinds of machine (:func:`machine_label`) the results files at ``paths`` were computed
    on, each with its files."""
    return _grouped(paths, machine_label)


def code_note(versions: dict[str, list[str]], sidecar: str = "table1.provenance.json") -> str:
    """One line for a table on the code its numbers were made with; a warning for a mix."""
    if set(versions) == {"unknown"}:
        return "The code these results were made with is not recorded in their summaries."
    if len(versions) == 1:
        only = next(iter(versions))
        return f"Every run and evaluation was made by the same code (source {only[:12]})."
    counts = ", ".join(f"{v[:12]}: {len(files)} files" for v, files in versions.items())
    return (
        f"**Warning: mixed code versions** ({counts}): the runs were made by different code; "
        f"rerun the stale ones (see {sidecar}) before comparing columns."
    )


def machine_note(kinds: dict[str, list[str]]) -> str:
    """One line for a table on the machines its numbers were computed on: a seeded run takes the
    same draw again only on the same kind of machine (torch sums in another order under another
    CPU kernel set, and sampling and RL carry the difference on)."""
    if set(kinds) == {"unknown"}:
        return "The machines these results were computed on are not recorded in their summaries."
    if len(kinds) == 1:
        return (
            f"Every run and evaluation was computed on one kind of machine ({next(iter(kinds))}); "
            "a seeded rerun takes the same draw on that kind, another on another instruction set."
        )
    counts = "; ".join(f"{k}: {len(files)} files" for k, files in kinds.items())
    return (
        f"**Note: results from {len(kinds)} kinds of machine** ({counts}): each kind takes its "
        "own seeded draw, so these columns mix draws."
    )


def origin(paths: Sequence[str | Path], sidecar: str) -> tuple[str, dict]:
    """What made the results files at ``paths``: the code and the kinds of machine, as the lines
    a table's markdown ends with and as the entries of its provenance sidecar."""
    versions, kinds = code_versions(paths), machines(paths)
    lines = code_note(versions, sidecar) + "\n\n" + machine_note(kinds) + "\n"
    return lines, {"code_versions": versions, "machines": kinds}
