"""Config snapshots: editing a config section reruns the jobs that read it, and only those.

A results tree of the smoke world (with two ablation variants, a pilot rate and both control
arms) is made without running anything heavy: the snapshot jobs run for real (each writes a
small YAML file, and Snakemake records the params it was written from), every other output is
created empty and marked done with ``--touch``. A dry run with an edited config then lists
what a real run would redo.

About 20-30 s (mostly the snapshot jobs, one short Python process each): over the ~20 s that
makes a test `slow`, and kept in the default suite on purpose, since a snapshot that holds a
section its jobs do not read shows nowhere else until an edit reruns every training run.
"""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path

import pytest
import yaml
from test_workflow import REPO, dry_run_jobs, snakemake, workdir_with

from agon.config import validate_config

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
TOY = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
OUT = SMOKE["out_dir"]
TARGETS = ["all_tables", f"{OUT}/control_pilot.csv", f"{OUT}/control_curriculum.csv"]
SNAPSHOT_RULES = ["config_snapshot", "pretrain_config", "ablation_config", "control_config"]
# every rule that trains a model: table 1's and the related methods' (train), the toy base
# models and teacher, the regime's, the ablations' and the positive control's
TRAINING = {
    "pretrain",
    "pretrain_teacher",
    "train",
    "regime_train",
    "ablation_train",
    "control_pretrain",
    "control_train",
}
BASE_MODELS = {"pretrain", "pretrain_teacher", "control_pretrain"}  # shaped by `toy`, not `train`
EVALUATION = {"evaluate", "regime_evaluate", "ablation_eval", "control_eval"}


def world() -> dict:
    """The smoke config with two of the toy world's ablation variants, and its positive control
    cut to two schemes, one pilot learning rate and one seed per arm: every kind of training
    job, at few snapshots."""
    cfg = copy.deepcopy(SMOKE)
    ablations = copy.deepcopy(TOY["ablations"])
    cfg["ablations"] = {**ablations, "variants": ablations["variants"][:2]}
    control = copy.deepcopy(TOY["control"])
    control["seeds"], control["schemes"] = [0], ["agon", "independent"]  # the pilot's two
    control["pilot"]["learning_rates"] = control["pilot"]["learning_rates"][:1]
    control["curriculum"]["seeds"] = [0]
    cfg["control"] = control
    return cfg


def edited(cfg: dict, changes: dict) -> dict:
    """``cfg`` with each dotted key of ``changes`` set to its value."""
    cfg = copy.deepcopy(cfg)
    for dotted, value in changes.items():
        *path, last = dotted.split(".")
        node = cfg
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    return cfg


# every key of table 1's eval section, and of the control's, changed at once: a training
# snapshot that held any of them would change, and its training job rerun
EVAL_EDIT = {
    "eval.split": "validation",
    "eval.n_samples": 3,
    "eval.k": [1, 3],
    "eval.temperature": 0.7,
    "eval.top_p": 0.9,
    "eval.batch_size": 8,
    "eval.backend": "vllm",
    "eval.max_problems": 3,
    "eval.bootstrap": 200,
    "control.eval.n_samples": 3,
    "control.eval.k": [1, 3],
    "control.eval.max_problems": 150,
    "control.eval.bootstrap": 200,
}
# a key no stage overrides (the control's pilot runs at rates of its own, its curriculum arm
# for steps of its own)
TRAIN_EDIT = {"train.learning_rate": 2e-4, "control.train.num_generations": 4}


def _make_outputs(jobs: list[dict], root: Path) -> None:
    """Create every output the jobs declare, empty: a folder where the name has no suffix
    (the model folders, declared ``directory()``), a file otherwise."""
    for job in jobs:
        for out in job["output"]:
            path = root / out
            if path.suffix:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            else:
                path.mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A working directory whose results tree is complete for :func:`world`, and the jobs
    that made it (every job of TARGETS)."""
    wd = workdir_with(tmp_path_factory.mktemp("snapshots"), world(), name="world.yaml")
    world_targets = ("--configfile", "config/world.yaml", "--", *TARGETS)
    # the snapshot jobs for real: Snakemake records the params each was written from
    snaps = snakemake(wd, "--cores", "2", "--until", *SNAPSHOT_RULES, *world_targets)
    assert snaps.returncode == 0, snaps.stdout[-3000:] + snaps.stderr[-3000:]
    jobs = dry_run_jobs(wd, *world_targets)
    assert {j["rule"] for j in jobs} >= TRAINING | EVALUATION  # every kind of job is in it
    assert not {j["rule"] for j in jobs} & set(SNAPSHOT_RULES)  # the snapshots were written
    _make_outputs(jobs, wd)
    touch = snakemake(wd, "--cores", "1", "--touch", *world_targets)  # done, in the DAG's order
    assert touch.returncode == 0, touch.stdout[-3000:] + touch.stderr[-3000:]
    assert dry_run_jobs(wd, *world_targets) == []  # complete: an unedited config redoes nothing
    return wd, jobs


def rerun(wd: Path, name: str, changes: dict) -> Counter:
    """The jobs (rule -> count) a run of the world with ``changes`` would redo."""
    (wd / "config" / f"{name}.yaml").write_text(yaml.safe_dump(edited(world(), changes)))
    jobs = dry_run_jobs(wd, "--configfile", f"config/{name}.yaml", "--", *TARGETS)
    return Counter(j["rule"] for j in jobs)


def test_editing_eval_reruns_the_evaluations_and_no_training(tree):
    """`eval` (table 1's and the control's) is read by the evaluations alone: editing every
    key of it remeasures each kind of evaluation and retrains nothing."""
    wd, jobs = tree
    counts = rerun(wd, "eval_edited", EVAL_EDIT)
    evals = Counter(j["rule"] for j in jobs if j["rule"] in EVALUATION)
    assert {r: counts[r] for r in evals} == evals, counts
    assert not TRAINING & set(counts), {r: counts[r] for r in TRAINING & set(counts)}


def test_editing_train_reruns_every_training_run(tree):
    """`train` (table 1's and the control's) shapes every training run: editing it reruns each
    one (table 1's, the related methods', the regime's, the ablations', the control's) but not
    the base models, which it does not shape."""
    wd, jobs = tree
    counts = rerun(wd, "train_edited", TRAIN_EDIT)
    runs = Counter(j["rule"] for j in jobs if j["rule"] in TRAINING - BASE_MODELS)
    assert {r: counts[r] for r in runs} == runs, counts
    assert not BASE_MODELS & set(counts), counts


def test_editing_resources_reruns_nothing(tree):
    """`resources` (threads, memory, runtime per rule) never changes a result: editing every
    rule's runtime reruns no job, the control's training runs included (their snapshots once
    held every section but `eval`)."""
    wd, _ = tree
    edit = {f"resources.{rule}.runtime": 999 for rule in ("train", "evaluate", "pretrain")}
    assert rerun(wd, "resources_edited", edit) == Counter()


def test_a_toy_evaluation_snapshot_holds_the_worlds_habits(tmp_path):
    """The audit of a toy evaluation (agon.toy.audit) reads the readers' habits from its
    config: the eval snapshot carries `toy.models` as the config has them (table 1's world's,
    not the schema's defaults; the rest of `toy` shapes the base models, which the evaluation
    waits for anyway)."""
    cfg = copy.deepcopy(SMOKE)
    cfg["toy"]["models"] = copy.deepcopy(TOY["toy"]["models"])
    wd = workdir_with(tmp_path, cfg, name="habits.yaml")
    target = f"{OUT}/toy/arith/config/eval.yaml"
    res = snakemake(wd, "--cores", "1", "--configfile", "config/habits.yaml", "--", target)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    snap = yaml.safe_load((wd / target).read_text())
    assert snap["toy"]["models"] == validate_config(cfg)["toy"]["models"]
    assert snap["toy"]["models"] != validate_config(SMOKE)["toy"]["models"]
