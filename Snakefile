# The Agon replication workflow (docs/method.md, docs/architecture.md).
#
#   snakemake --cores all --configfile config/smoke.yaml          # a first look: results/smoke/
#   snakemake --cores all results/table1.csv                      # the offline toy world
#   snakemake --cores all results/ablations.csv                   # its Agon variants
#   snakemake --cores all results/related.csv                     # Cliff, GAR, ... beside it
#   snakemake --cores all results/regime.csv                      # can the world show the claims?
#   snakemake --cores all results/control.csv                     # the positive control
#   snakemake --cores all results/budget.csv                      # table 1 at 1x, 4x, 16x steps
#   snakemake --cores all all_tables                              # every table above (hours)
#   agon report --docs                                            # then docs/results.md
#   snakemake -n results/table1.csv --configfile config/paper.yaml  # the paper's DAG
#   snakemake --profile profiles/slurm --configfile config/paper.yaml  # on a SLURM cluster
#
# --configfile takes every word after it: name a target before it, not after.
#
# The DAG fans out over families x tasks x methods x seeds; every stage lives in its own
# rules file, the Python helpers by subject in the files included first (common.smk: the config,
# layout and resources; snapshots.smk: what each job reads of the config; *_jobs.smk: each
# table's inputs, commands and results), the logic in the `agon` package.

from snakemake.utils import min_version

min_version("9.0")


# the default config, unless the command line gives one (--configfile): then that file alone,
# never merged into the default (a paper run must not inherit the toy world's ablations)
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# `snakemake --report results/report.html`: table 1, the figures with their captions and the
# provenance in one self-contained page (workflow/report/ holds the captions)
report: "workflow/report/workflow.rst"


# the helpers, before the rules that call them when the DAG is built
include: "workflow/rules/common.smk"
include: "workflow/rules/snapshots.smk"
include: "workflow/rules/table1_jobs.smk"
include: "workflow/rules/ablations_jobs.smk"
include: "workflow/rules/regime_jobs.smk"
include: "workflow/rules/control_jobs.smk"
include: "workflow/rules/budget_jobs.smk"
# the rules
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/ablations.smk"
include: "workflow/rules/control.smk"
include: "workflow/rules/regime.smk"
include: "workflow/rules/budget.smk"
include: "workflow/rules/plan.smk"


rule all:
    input:
        table_outputs(),
    default_target: True


# `snakemake --cores all all_tables`: every toy-world table the project publishes (table 1, the
# regime, the positive control, the ablations, the related methods, the budget curve), then
# `agon report --docs`
# gathers them into docs/results.md. Not the default target: it takes hours. The control's
# pilot (committed, never rebuilt) and its exploratory arm 2 are built by name only.
rule all_tables:
    input:
        [LAYOUT.table_files(name).csv for name in ("table1", "regime", "control", "ablations", "related", "budget")],
    localrule: True
