# results/plan.csv: what every job of this config costs (tokens, FLOPs, memory per GPU, GPU-hours)
# before any runs: `snakemake results/plan.csv` (not part of the default target). The logic is
# `agon plan` (agon/plan/); the GPU kind is the environment's AGON_PLAN_GPU (default h200), since
# the config's schema has no key for it.

import glob


rule plan_config:
    """The whole config the workflow runs with (resources included: the plan checks jobs
    against them), as one file for `agon plan`."""
    output:
        f"{OUT}/plan/config.yaml",
    params:
        config=_canonical(dict(config)),
    log:
        LAYOUT.log("plan_config"),
    conda:
        "../envs/agon.yaml"
    threads: 1
    resources:
        mem_mb=res("snapshot", "mem_mb"),
        runtime=res("snapshot", "runtime"),
        gpu=0,
    localrule: True
    script:
        "../scripts/write_config.py"


rule plan:
    """`agon plan`: one CSV row per job of every table's DAG, with the jobs that would not fit
    their resources flagged; the throughput measurements under bench/throughput are inputs."""
    input:
        config=f"{OUT}/plan/config.yaml",
        measurements=sorted(glob.glob(os.path.join(workflow.basedir, "bench", "throughput", "*.json"))),
    output:
        csv=f"{OUT}/plan.csv",
    params:
        gpu=os.environ.get("AGON_PLAN_GPU", "h200"),
        throughput=os.path.join(workflow.basedir, "bench", "throughput"),
    log:
        LAYOUT.log("plan"),
    conda:
        "../envs/agon.yaml"
    threads: 1
    resources:
        mem_mb=res("report", "mem_mb"),
        runtime=res("report", "runtime"),
        gpu=0,
    localrule: True
    shell:
        "python -m agon plan --config {input.config} --target all --gpu {params.gpu}"
        " --throughput {params.throughput:q} --csv {output.csv} > {log} 2>&1"
