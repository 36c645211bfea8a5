"""One write-and-provenance path for every table of the report.

A table is its CSV (generated, never edited), its Markdown for reading (ending with what made
its numbers: :func:`agon.report.origin.origin`), its figures, and a provenance sidecar written
last, so that the sidecar's presence means the rest is complete. Every file is written
atomically (:func:`agon.provenance.atomic_write_text`); the sidecar carries the config and its
hash, the git commit, package versions, the results files the table read, the code versions
and kinds of machine behind them, and the prepared checkpoints of the config's models.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agon.config import config_hash, seeded_bases
from agon.methods import eval_seeds, trained_methods_for
from agon.packaged_models import prepared_models
from agon.provenance import atomic_write_text, write_results
from agon.report.origin import origin
from agon.report.render import table_csv
from agon.results import TableFiles


def result_paths(
    config: dict,
    path_of: Callable[[str, str, str, int], str],
    names: Sequence[str],
    seeds_of: Callable[[dict, str], Sequence[int]],
) -> list[str]:
    """``path_of(family, task, name, seed)`` for every family, task, name and its seeds
    (``seeds_of(family row, name)``)."""
    return [
        path_of(f["name"], t["name"], n, seed)
        for f in config["families"]
        for t in config["tasks"]
        for n in names
        for seed in seeds_of(f, n)
    ]


def summaries_read(
    config: dict,
    systems: Sequence[str],
    eval_summary: Callable[[str, str, str, int], str],
    train_summary: Callable[[str, str, str, int], str],
) -> tuple[list[str], list[str]]:
    """The summaries a table of ``systems`` reads, as its provenance lists them: each system's
    evaluations (``eval_summary(family, task, system, seed)``) at the seeds it is evaluated at
    (:func:`agon.methods.eval_seeds`), and the runs of each method that trains one of them
    (``train_summary(family, task, method, seed)``) at every seed of the config."""
    seeds = [int(s) for s in config["seeds"]]
    inputs = result_paths(
        config, eval_summary, systems, lambda fam, s: eval_seeds(s, seeds, seeded_bases(fam))
    )
    runs = result_paths(config, train_summary, trained_methods_for(systems), lambda *_: seeds)
    return inputs, runs


def figure_meta(config: dict, source: str) -> dict[str, str]:
    """What every figure of a table carries in its metadata: the config hash and its maker."""
    return {"config_hash": config_hash(config), "source": source}


def write_table(
    files: TableFiles,
    rows: list[dict],
    markdown: str,
    config: dict,
    results: Sequence[str],
    figures: Sequence[Path] = (),
    provenance: dict[str, Any] | None = None,
) -> dict[str, list[Path]]:
    """Write a table's CSV, its Markdown (``markdown``, then the lines on what made the numbers
    of the ``results`` files it read) and, last, its provenance sidecar (``provenance``'s keys
    added); return what was written, by kind (``csv``, ``md``, ``figures``, ``provenance``)."""
    lines, made = origin(results, Path(files.provenance).name)
    written: dict[str, list[Path]] = {
        "csv": [atomic_write_text(files.csv, table_csv(rows))],
        "md": [atomic_write_text(files.md, markdown + "\n" + lines)],
        "figures": list(figures),
    }
    payload = {
        "table": files.csv,
        "markdown": files.md,
        "figures": [str(p) for p in figures],
        "rows": len(rows),
        **(provenance or {}),
        **made,
        "models": prepared_models(config),
    }
    written["provenance"] = [write_results(files.provenance, payload, config=config, seed=None)]
    return written


def report_job(log_path: str, config: Any, build: Callable[[dict], dict[str, list[Path]]]) -> None:
    """A workflow report rule's body: ``build`` on the rule's config, its output and the paths
    it wrote going to the rule's log (the report scripts hold no other logic)."""
    with open(log_path, "w") as log:
        sys.stdout = sys.stderr = log
        logging.basicConfig(stream=log, level=logging.WARNING)
        for kind, paths in build(dict(config)).items():
            for p in paths:
                print(f"wrote {kind}: {p}")
