# The workflow's ground: the config, validated; where every result lives; the config's rows as
# the DAG's wildcards; the environment every job inherits; each rule's resources; the folders a
# job derives from its outputs. The other helper files, each on one subject, build on it:
# snapshots.smk (the config each job reads), table1_jobs.smk, ablations_jobs.smk,
# regime_jobs.smk and control_jobs.smk (the inputs, commands and result lists of each table's
# jobs); the rules files (pretrain.smk, train.smk, ...) use them all.
#
# The config is validated here, when the DAG is built, with the same schema and semantic
# checks as every `agon` CLI, so a bad family row fails before any job starts. Paths are
# built from one place (agon.results.Layout), which `agon report` also reads, so the
# workflow and the report cannot disagree about where a result lives. Table 1's columns and
# the methods that train their models come from one list too (agon.methods).

# json, re and Path serve the other .smk files too (Snakemake gives them one namespace)
import json
import os
import re
from pathlib import Path

from agon.config import ConfigError, kernel_env, validate_config
from agon.methods import COLUMNS, TRAINED_METHODS, columns_for_methods, trained_methods_for
from agon.packaged_models import PROVENANCE, packaged
from agon.results import Layout

try:
    validate_config(config)
except ConfigError as err:
    raise WorkflowError(f"{err}\nFix the config file (or the --config overrides) and rerun.")

OUT = config["out_dir"]
LAYOUT = Layout(OUT, config["figures_dir"])
FAMILIES = {row["name"]: row for row in config["families"]}
TASKS = {row["name"]: row for row in config["tasks"]}
SEEDS = [int(s) for s in config["seeds"]]
EVAL_SYSTEMS = columns_for_methods(config["methods"])
TRAIN_METHODS = trained_methods_for(EVAL_SYSTEMS)
ABLATIONS = config["ablations"]
VARIANTS = [v["name"] for v in ABLATIONS["variants"]]
TOY_FAMILIES = [name for name, row in FAMILIES.items() if row["toy"]]
# model folders the prepare_model rule builds from a row's `source` (a GGUF checkpoint)
PACKAGED = packaged(config)


def _alternation(names):
    """A wildcard regex matching exactly one of ``names`` (config rows become wildcards)."""
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    family=_alternation(FAMILIES),
    task=_alternation(TASKS),
    method=_alternation(TRAINED_METHODS),
    system=_alternation(COLUMNS),
    variant=_alternation(VARIANTS) if VARIANTS else r"(?!)",
    seed=r"\d+",


def _check_toy_rows():
    """Toy families must point at the models the pretrain rule builds, or nothing builds them."""
    for name in TOY_FAMILIES:
        rows = [("model_a", LAYOUT.toy_model("A")), ("model_b", LAYOUT.toy_model("B"))]
        if "teacher" in FAMILIES[name]:
            rows.append(("teacher", LAYOUT.toy_model("teacher")))
        # LAYOUT.toy_model's default seed is the literal "{seed}": each training seed's pair
        for key, expected in rows:
            got = FAMILIES[name][key]["model"]
            if os.path.normpath(got) != os.path.normpath(expected):
                raise WorkflowError(
                    f"families (name {name!r}): field '{key}.model' is {got!r}, but a toy family's "
                    f"models are built by the pretrain rule at {expected!r} (out_dir={OUT!r}); "
                    f"set it to {expected!r}, or set toy: false to use an existing model."
                )


_check_toy_rows()


# Jobs run `python -m agon` with this checkout first on the path, so they use the code this
# workflow came with, in the ambient environment and in the rules' conda env (which holds the
# dependencies only, see workflow/envs/). Set in the environment jobs inherit, not in a rule's
# params or command, so moving the checkout does not look like a change that reruns jobs.
os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (workflow.basedir, os.getenv("PYTHONPATH")) if p))
# The config's cpu_kernels: every job's torch, MKL and oneDNN take one CPU kernel set (on x86-64),
# so a seeded table is the same on AVX2 and AVX512 machines (each summary's provenance says which)
os.environ.update(kernel_env(config))


def res(rule_name, key):
    """Resource ``key`` of ``rule_name`` from the config's ``resources`` section, or its default."""
    defaults = {"threads": 1, "gpus": 0, "mem_mb": 4000, "runtime": 60}
    return config["resources"].get(rule_name, {}).get(key, defaults[key])


# ---------------------------------------------------------------- output folders from outputs
# Derived from each job's own outputs (not rebuilt from the config), as the linter asks, so
# the folders stay right wherever the outputs are staged.


def job_folder(wildcards, output):
    """The folder of a train / evaluate job: where its summary.json and resumable state live."""
    return os.path.dirname(output.summary)


def pretrain_out(wildcards, output):
    """`agon toy pretrain --out`: the folder holding A/, B/ and report.json."""
    return os.path.dirname(output.report)


def figures_dir(wildcards, output):
    """Where `agon report` writes the figures: the folder of the first declared figure."""
    return os.path.dirname(output.figures[0])
