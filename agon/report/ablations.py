"""`agon report --ablations`: results/ablations.csv, one row per Agon variant of the config's
``ablations`` section, from the variants' evaluations and runs.

Each variant's cascade (A drafts, B reads) pass@1 is read as table 1 reads a system (over seeds
and problems, :func:`agon.report.compare.system_stats`), compared with the reference variant by
a paired two-level bootstrap, and shown with its training compute.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agon.config import config_hash
from agon.report.compare import (
    RNG,
    difference_columns,
    empty_columns,
    paired_replicates,
    stats_columns,
    system_stats,
)
from agon.report.compute import train_compute
from agon.report.render import ablations_markdown
from agon.report.write import result_paths, write_table
from agon.results import Layout


def changes_text(changes: Mapping[str, Any], prefix: str = "") -> str:
    """A variant's agon changes as ``key.sub=value`` pairs: ``reward.scheme=zero_sum
    reader_group=problem``; ``(none)`` for a variant that changes nothing."""
    parts = []
    for k, v in changes.items():
        if isinstance(v, Mapping) and v:
            parts.append(changes_text(v, f"{prefix}{k}."))
        else:
            parts.append(f"{prefix}{k}={json.dumps(v) if not isinstance(v, str) else v}")
    return " ".join(parts) or ("(none)" if not prefix else "")


def ablation_reference(config: dict) -> str:
    """The variant every other is compared with: ``ablations.reference``, or the first."""
    ab = config.get("ablations") or {}
    names = [v["name"] for v in ab.get("variants") or []]
    if not names:
        raise ValueError("the config has no ablations.variants: there is nothing to report")
    ref = ab.get("reference") or names[0]
    if ref not in names:
        raise ValueError(f"ablations.reference {ref!r} is not a variant; variants: {names}")
    return ref


SINGLE_SEED = (
    "one training seed: the interval covers the problems, not the spread between training runs "
    "(set ablations.seeds to several)"
)


def build_ablation_table(config: dict, layout: Layout) -> list[dict]:
    """One dict per (family, task, variant): the variant's changes, its cascade's (A drafts, B
    reads) pass@1 over seeds and problems, the paired difference from the reference variant,
    and its training compute."""
    ab = config["ablations"]
    ref = ablation_reference(config)
    variants = ab["variants"]
    seeds = [int(s) for s in ab.get("seeds") or [0]]
    n_boot = int(config["eval"]["bootstrap"])
    rows = []
    for fam in config["families"]:
        for task in config["tasks"]:
            f, t = fam["name"], task["name"]
            stats, rates = {}, {}
            for v in variants:
                name = v["name"]
                stats[name], rates[name] = system_stats(
                    f"{f}/{t}/ablation {name}",
                    {k: layout.ablation_eval_samples(f, t, name, k) for k in seeds},
                    {k: layout.ablation_eval_summary(f, t, name, k) for k in seeds},
                    n_boot,
                )
            p = {n: s["pass@1"] for n, s in stats.items()}
            for v in variants:
                name = v["name"]
                row: dict[str, Any] = {
                    "family": f,
                    "task": t,
                    "variant": name,
                    "changes": changes_text(v.get("agon") or {}),
                    "split": config["eval"]["split"],
                    "seeds": len(seeds),
                    "n_problems": stats[name].get("n_problems"),
                    **stats_columns("", stats[name]),
                    "reference": ref,
                }
                if name == ref:
                    row |= empty_columns("minus_reference")
                    row["minus_reference_note"] = "the reference variant"
                else:
                    reps = paired_replicates([rates[name], rates[ref]], n_boot, RNG["ablation"])
                    row |= difference_columns("minus_reference", name, ref, p, reps, "difference")
                    if len(seeds) == 1 and reps is not None:
                        # one training run per variant: two runs of the same variant differ by
                        # about as much as the variants do, and this interval does not see it
                        note = row["minus_reference_note"]
                        row["minus_reference_note"] = (f"{note}; " if note else "") + SINGLE_SEED
                compute = train_compute(
                    [layout.ablation_train_summary(f, t, name, s) for s in seeds],
                    [f"{layout.ablation_train_dir(f, t, name, s)}/metrics.jsonl" for s in seeds],
                    [layout.benchmark(f"ablations/{f}/{t}/{name}/train/seed{s}") for s in seeds],
                )
                compute.pop("budget_match", None)
                row |= compute
                rows.append(row)
    return rows


def build_ablations_report(config: dict, layout: Layout) -> dict[str, list[Path]]:
    """Write ablations.csv (+ provenance JSON) and ablations.md; return what was written."""
    rows = build_ablation_table(config, layout)
    names = [v["name"] for v in config["ablations"]["variants"]]
    seeds = [int(s) for s in config["ablations"].get("seeds") or [0]]
    inputs = result_paths(config, layout.ablation_eval_summary, names, lambda _f, _m: seeds)
    runs = result_paths(config, layout.ablation_train_summary, names, lambda _f, _m: seeds)
    return write_table(
        layout.table_files("ablations"),
        rows,
        ablations_markdown(rows, config_hash(config)),
        config,
        inputs + runs,
        provenance={"reference": ablation_reference(config), "inputs": inputs, "runs": runs},
    )
