# The offline toy world's two base models, trained from scratch (docs/method.md, the toy world).
# Built only when some family has `toy: true`; those rows point at the folders written here.


rule pretrain_config:
    """The config the toy pretraining runs with (toy section, toy task rows, the models' paths)."""
    output:
        LAYOUT.pretrain_snapshot(),
    params:
        config=snapshot("pretrain"),
    log:
        LAYOUT.log("pretrain_config"),
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


rule pretrain:
    """`agon toy pretrain`: two tiny base models with different characteristic mistakes."""
    input:
        config=LAYOUT.pretrain_snapshot(),
    output:
        model_a=directory(LAYOUT.toy_model("A")),
        model_b=directory(LAYOUT.toy_model("B")),
        report=LAYOUT.toy_report(),
    log:
        LAYOUT.log("pretrain"),
    benchmark:
        LAYOUT.benchmark("pretrain")
    params:
        out=pretrain_out,
    conda:
        "../envs/agon.yaml"
    threads: res("pretrain", "threads")
    resources:
        mem_mb=res("pretrain", "mem_mb"),
        runtime=res("pretrain", "runtime"),
        gpu=res("pretrain", "gpus"),
    shell:
        "OMP_NUM_THREADS={threads} python -m agon toy pretrain --config {input.config} --out {params.out}"
        " > {log} 2>&1"
