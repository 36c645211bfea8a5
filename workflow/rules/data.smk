# Per (family, task): the config snapshot each stage runs with, and the seeded data split.


rule config_snapshot:
    """One stage's config for one (family, task): rewritten only when its content changes."""
    output:
        LAYOUT.snapshot("{family}", "{task}", "{stage}"),
    params:
        config=snapshot_params,
    log:
        LAYOUT.log("config/{family}/{task}/{stage}"),
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


rule data_split:
    """`agon data split`: the task's seeded train / test / hard split with content hashes.

    For hub data sets this is the one job that downloads them (never the DAG build)."""
    input:
        config=LAYOUT.snapshot("{family}", "{task}", "data"),
    output:
        LAYOUT.split("{family}", "{task}"),
    log:
        LAYOUT.log("data/{family}/{task}"),
    conda:
        "../envs/agon.yaml"
    threads: res("data", "threads")
    resources:
        mem_mb=res("data", "mem_mb"),
        runtime=res("data", "runtime"),
        gpu=res("data", "gpus"),
    shell:
        "python -m agon data split --config {input.config} --task {wildcards.task} --out {output} > {log} 2>&1"
