# Every job's config snapshot: the config a job runs with, cut to the rows and sections it
# reads, written to a file by a snapshot rule (config_snapshot, pretrain_config, ablation_config,
# control_config) with the cut config as a param. Snakemake reruns a snapshot (and everything
# downstream of it) only when its content changes, so editing a section a stage does not read
# reruns none of that stage's jobs.

from agon.config import ablation_config, control_config, control_stage, deep_merge
from agon.methods import RELATED, TABLE1_METHODS
from agon.regime import regime_changes

TOY_TASKS = ("arith", "toycode")  # the task rows `agon toy pretrain` reads
ALL_METHODS = list(TABLE1_METHODS)  # table 1's (the schema's `methods`)

# Sections of the config each stage depends on. A job's config snapshot holds exactly these
# (plus its own family and task row), so editing one family's row, or a section a stage
# does not read, reruns nothing else. `resources` and `seeds` are never in a snapshot:
# resources do not change results, and each job gets its seed on the command line.
STAGE_SECTIONS = {
    # `regime`: the toy gates check its criteria after pretraining
    "pretrain": ["toy", "grading", *(["regime"] if "regime" in config else [])],
    "data": [],
    # a related method's own section (cliff, gar, ...) shapes its training only. Not `eval`: no
    # training code reads it (the probe during training reads train.eval_*), so editing it
    # reruns the evaluations and no training run (tests/test_snapshots.py)
    "train": ["grading", "train", "agon", "grpo", *(m for m in RELATED if m in config)],
    "eval": ["grading", "eval", "moa"],
}
# results/regime.csv's stages: table 1's train and eval snapshots with the regime's changes
# (GRPO's steps fixed up front; the regime's split), agon.regime.regime_changes
REGIME_STAGES = {"regime_train": "train", "regime_eval": "eval"}


wildcard_constraints:
    stage=_alternation(["data", "train", "eval", *REGIME_STAGES]),


def _canonical(obj):
    """``obj`` with every mapping's keys sorted: Snakemake compares params by their repr, so a
    config whose YAML merely lists keys in another order must give the same snapshot."""
    return json.loads(json.dumps(obj, sort_keys=True))


def snapshot(stage, family=None, task=None):
    """The config a job of ``stage`` runs with, key order normalised (see :func:`_snapshot`)."""
    return _canonical(_snapshot(stage, family, task))


def _snapshot(stage, family=None, task=None):
    """The config a job of ``stage`` runs with: its rows and the sections it reads.

    Written to a file by the ``config_snapshot`` rule with this dict as a param, so
    Snakemake reruns a snapshot (and everything downstream of it) only when its content
    changes.
    """
    if stage == "report":  # the report reads everything that shapes table 1
        return {k: v for k, v in config.items() if k != "resources"}
    if stage in REGIME_STAGES:
        base = REGIME_STAGES[stage]
        return deep_merge(_snapshot(base, family, task), regime_changes(config, base))
    # `methods` only shapes the DAG (which jobs exist); no job reads it, so every snapshot
    # carries the same full list and adding a method reruns nothing that exists.
    cfg = {"out_dir": OUT, "methods": ALL_METHODS}
    if stage == "pretrain":
        # the pretrain reads the toy section and the toy tasks' rows, not the family rows; all
        # toy rows name the same two models (_check_toy_rows), so one fixed row stands for them
        # and adding or editing a toy family does not retrain the base models
        cfg["families"] = [{"name": "toy", "toy": True, "model_a": {"model": LAYOUT.toy_model("A")},
                            "model_b": {"model": LAYOUT.toy_model("B")}}]  # seed{seed}: one per seed
        cfg["tasks"] = [row for row in config["tasks"] if row["name"] in TOY_TASKS] or config["tasks"]
    else:
        # the data split depends on the task row only
        cfg["families"] = [_model_names_only(family) if stage == "data" else FAMILIES[family]]
        cfg["tasks"] = [TASKS[task]]
    for section in STAGE_SECTIONS[stage]:
        cfg[section] = config[section]
    if stage == "eval" and FAMILIES[family].get("toy") and "toy" in config:
        # the audit of a toy evaluation reads the world's habits (agon.toy.audit); they shape
        # the base models too, so keeping them here reruns no evaluation that would not rerun
        cfg["toy"] = {"models": config["toy"]["models"]}
    return cfg


def ablation_snapshot_params(wildcards):
    """Params of the ``ablation_config`` rule: the train snapshot of (family, task) with the
    variant's agon changes applied, which its training runs with. Its evaluation reads table
    1's eval snapshot (an evaluation reads no `agon` key), so an edit of `eval` or `moa`
    retrains no variant."""
    cfg = ablation_config(config, wildcards.variant)
    snap = _snapshot("train", wildcards.family, wildcards.task)
    for section in STAGE_SECTIONS["train"]:
        snap[section] = cfg[section]
    return _canonical(snap)


def _model_names_only(family):
    """A family row cut to what names its models, for stages that read nothing else of it."""
    row = FAMILIES[family]
    return {"name": family, "toy": row["toy"], "model_a": {"model": row["model_a"]["model"]},
            "model_b": {"model": row["model_b"]["model"]}}


def snapshot_params(wildcards):
    """Params of the ``config_snapshot`` rule for one (family, task, stage)."""
    return snapshot(wildcards.stage, wildcards.family, wildcards.task)


# ---------------------------------------------------------------- the positive control's
# what the control's pretrain and evaluations read, so that a change to its training (the
# learning rate, say) neither retrains its base pair nor remeasures it
CONTROL_SNAPSHOT_KEEP = ["out_dir", "cpu_kernels", "families", "tasks", "methods", "grading"]
CONTROL_SNAPSHOT_SECTIONS = {"pretrain": ["toy"], "eval": ["eval"]}
# a training stage's (a scheme, or the pilot's lr{i}): the duel reads the world's toy section,
# train and agon; not eval (editing control.eval remeasures the pairs and retrains none), not
# resources, and none of the schema's other sections, whose defaults control_config fills in
# (a section the schema gains would otherwise retrain every control run)
CONTROL_TRAIN_SECTIONS = ["toy", "train", "agon"]


def control_snapshot_params(wildcards):
    """An arm's config for one stage, cut to the sections that stage reads: ``pretrain``,
    ``eval``, or a training stage's (a scheme, or the pilot's ``lr{i}``)."""
    stage = wildcards.cstage
    scheme, lr = control_stage(config, "base" if stage in CONTROL_SNAPSHOT_SECTIONS else stage)
    cfg = control_config(config, LAYOUT.control_models(wildcards.arm), scheme, wildcards.arm, lr)
    read = CONTROL_SNAPSHOT_SECTIONS.get(stage, CONTROL_TRAIN_SECTIONS)
    return _canonical({k: cfg[k] for k in CONTROL_SNAPSHOT_KEEP + read if k in cfg})
