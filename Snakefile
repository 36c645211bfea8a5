# The Agon replication workflow (docs/method.md, docs/architecture.md).
#
#   snakemake --cores all results/table1.csv                      # the offline toy world
#   snakemake --cores all results/ablations.csv                   # its Agon variants
#   snakemake --cores all results/related.csv                     # Cliff, GAR, ... beside it
#   snakemake --cores all results/regime.csv                      # can the world show the claims?
#   snakemake -n --configfile config/paper.yaml results/table1.csv  # the paper's DAG
#   snakemake --profile profiles/slurm --configfile config/paper.yaml  # on a SLURM cluster
#
# The DAG fans out over families x tasks x methods x seeds; every stage lives in its own
# rules file, Python helpers in workflow/rules/common.smk, the logic in the `agon` package.

from snakemake.utils import min_version

min_version("9.0")


# the default config, unless the command line gives one (--configfile): then that file alone,
# never merged into the default (a paper run must not inherit the toy world's ablations)
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# `snakemake --report results/report.html`: table 1, the figures with their captions and the
# provenance in one self-contained page (workflow/report/ holds the captions)
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/ablations.smk"
include: "workflow/rules/control.smk"
include: "workflow/rules/regime.smk"
include: "workflow/rules/plan.smk"


rule all:
    input:
        table_outputs(),
    default_target: True
