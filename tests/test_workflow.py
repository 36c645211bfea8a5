"""The Snakemake workflow: the DAG it builds from a config, validation at DAG time, lint.

Dry runs only (a few seconds each): nothing here loads a model or a data set. The end-to-end
runs of the real commands are in tests/test_workflow_e2e.py (marked slow).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

from agon.config import load_config, seeded_bases
from agon.methods import COLUMNS, columns_for_methods, eval_seeds

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def workdir_with(tmp_path: Path, config: dict | None = None, name: str = "config.yaml") -> Path:
    """A fresh working directory (as a new clone would be) holding config/ files."""
    (tmp_path / "config").mkdir(parents=True, exist_ok=True)
    for f in ("config.yaml", "paper.yaml", "real-cpu.yaml"):
        shutil.copy(REPO / "config" / f, tmp_path / "config" / f)
    if config is not None:
        (tmp_path / "config" / name).write_text(yaml.safe_dump(config, sort_keys=False))
    return tmp_path


def snakemake(workdir: Path, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(
        [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=workdir,
    )


def dry_run_jobs(workdir: Path, *args: str) -> list[dict]:
    """The jobs of a dry run: [{rule, output: [...], resources: {...}}] from Snakemake's listing."""
    res = snakemake(workdir, "-n", *args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    jobs, job = [], None
    for line in res.stdout.splitlines():
        m = re.match(r"^(local)?rule (\w+):$", line)
        if m:
            job = {"rule": m.group(2), "input": [], "output": [], "resources": {}}
            jobs.append(job)
        elif job is not None and line.startswith("    input: "):
            job["input"] = line.split(": ", 1)[1].split(", ")
        elif job is not None and line.startswith("    output: "):
            job["output"] = line.split(": ", 1)[1].split(", ")
        elif job is not None and line.startswith("    resources: "):
            job["resources"] = dict(kv.split("=", 1) for kv in line.split(": ", 1)[1].split(", "))
    return jobs


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def expected_counts(cfg: dict) -> Counter:
    """Jobs the DAG must hold for a config, from its rows (docs/method.md, docs/architecture.md)."""
    n_ft = len(cfg["families"]) * len(cfg["tasks"])
    seeds = len(cfg.get("seeds", [0]))
    systems = columns_for_methods(cfg["methods"])
    per_seed = any(seeded_bases(f) for f in cfg["families"])  # the toy world: a pair per seed
    evals = sum(len(eval_seeds(s, cfg.get("seeds", [0]), per_seed)) for s in systems)
    trained = {COLUMNS[s].train for s in systems} - {None}
    toy = any(f.get("toy") for f in cfg["families"])
    return (
        Counter(
            {
                "evaluate": n_ft * evals,
                "train": n_ft * len(trained) * seeds,
                "data_split": n_ft,
                "config_snapshot": n_ft * (3 if trained else 2),
                "pretrain": seeds if toy else 0,
                "pretrain_config": int(toy),
                "report": 1,
                "all": 1,
            }
        )
        - Counter()
    )  # drop zero counts


def test_paper_dag_lists_every_job_without_a_gpu(tmp_path):
    """`snakemake -n results/table1.csv --configfile config/paper.yaml` in a fresh clone."""
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "paper.yaml")
    jobs = dry_run_jobs(wd, "results/table1.csv", "--configfile", "config/paper.yaml")
    counts = Counter(j["rule"] for j in jobs)
    want = expected_counts(cfg)
    want.pop("all")  # an explicit target replaces the default rule
    assert counts == want
    outputs = {o for j in jobs for o in j["output"]}
    for fam in cfg["families"]:
        for task in cfg["tasks"]:
            for seed in cfg["seeds"]:
                for method in ("grpo", "agon"):
                    assert (
                        f"results/{fam['name']}/{task['name']}/train/{method}/seed{seed}/summary.json"
                        in outputs
                    )
                for system in columns_for_methods(cfg["methods"]):
                    folder = f"results/{fam['name']}/{task['name']}/eval/{system}"
                    path = f"{folder}/seed{seed}/summary.json"
                    # untrained systems have no training seed: evaluated at the first seed only
                    assert (path in outputs) == (seed in eval_seeds(system, cfg["seeds"]))
    # per-rule resources come from the config's resources section (what SLURM receives)
    train = next(j for j in jobs if j["rule"] == "train")
    assert train["resources"]["gpu"] == str(cfg["resources"]["train"]["gpus"])
    assert train["resources"]["mem_mb"] == str(cfg["resources"]["train"]["mem_mb"])
    assert train["resources"]["runtime"] == str(cfg["resources"]["train"]["runtime"])
    # nothing was downloaded or written by building the DAG
    assert not (wd / "results").exists()


def test_real_tier_plans_table_1_and_can_write_beside_the_toy_world(tmp_path):
    """`snakemake -n results/table1.csv --configfile config/real-cpu.yaml`: every job of table 1
    for real checkpoints, each prepared from its package; with ``out_dir`` and ``figures_dir``
    given, every file goes under the tier's own folders, so a clone can hold both tables."""
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "real-cpu.yaml")
    want = expected_counts(cfg)
    want.pop("all")
    want += Counter(prepare_model=2)  # no toy models: each checkpoint comes from its package
    assert {"agon_single", "agon_single_b"} <= set(columns_for_methods(cfg["methods"]))
    jobs = dry_run_jobs(wd, "results/table1.csv", "--configfile", "config/real-cpu.yaml")
    assert Counter(j["rule"] for j in jobs) == want
    report = next(j for j in jobs if j["rule"] == "report")
    assert "results/table1.csv" in report["output"]
    assert "figures/pass1_by_system.png" in report["output"]

    own = ("results/real-cpu/", "figures/real-cpu/")
    jobs = dry_run_jobs(
        wd,
        "results/real-cpu/table1.csv",
        "--configfile",
        "config/real-cpu.yaml",
        "--config",
        "out_dir=results/real-cpu",
        "figures_dir=figures/real-cpu",
    )
    assert Counter(j["rule"] for j in jobs) == want
    outputs = [o for j in jobs for o in j["output"]]
    assert all(o.startswith(own) for o in outputs), [o for o in outputs if not o.startswith(own)]
    assert "figures/real-cpu/pass1_by_system.png" in outputs
    assert not (wd / "results").exists()


def test_a_packaged_teacher_is_prepared_for_the_method_that_distills_from_it(tmp_path):
    """A teacher row with a ``source`` is prepared like A and B, and only the opd_then_rl runs
    wait for it."""
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "real-cpu.yaml")
    fam = cfg["families"][0]
    teacher = "results/real-cpu/models/teacher"
    fam["teacher"] = {"model": teacher, "source": {"gguf": "teacher.gguf", "sha256": "ab" * 32}}
    cfg["related"] = {"methods": ["base", "grpo", "agon", "opd_then_rl"]}
    (wd / "config" / "teacher.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    jobs = dry_run_jobs(wd, "results/related.csv", "--configfile", "config/teacher.yaml")
    prepared = {o for j in jobs if j["rule"] == "prepare_model" for o in j["output"]}
    assert f"{teacher}/provenance.json" in prepared and len(prepared) == 3
    trains = [j for j in jobs if j["rule"] == "train"]
    assert any("/train/opd_then_rl/" in j["output"][0] for j in trains)
    for run in trains:
        waits = f"{teacher}/provenance.json" in run["input"]
        assert waits == ("/train/opd_then_rl/" in run["output"][0]), run["output"][0]


def test_default_config_is_the_toy_world(tmp_path):
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "config.yaml")
    jobs = dry_run_jobs(wd)
    assert Counter(j["rule"] for j in jobs) == expected_counts(cfg)
    # each Agon model alone is a default column beside GRPO's (A's, B's): evaluated at every
    # seed from the agon runs, so table 1 divides the cascade by the reader's own GRPO model
    # next to a fair one; 2 columns x 2 tasks x 3 seeds evaluations more, no run more
    assert {"agon_single", "agon_single_b"} <= set(columns_for_methods(cfg["methods"]))
    evals = {o for j in jobs if j["rule"] == "evaluate" for o in j["output"]}
    for fam in cfg["families"]:
        for task in cfg["tasks"]:
            for system in ("agon_single", "agon_single_b"):
                for seed in cfg["seeds"]:
                    folder = f"results/{fam['name']}/{task['name']}/eval/{system}"
                    assert f"{folder}/seed{seed}/summary.json" in evals
    # a pair of base models per training seed, pretrained with toy.seed + that seed
    pretrain = sorted(o for j in jobs if j["rule"] == "pretrain" for o in j["output"])
    assert pretrain == sorted(
        f"results/toy/models/seed{s}/{f}" for s in cfg["seeds"] for f in ("A", "B", "report.json")
    )


def _job_details(workdir: Path, *args: str) -> str:
    res = snakemake(workdir, "-n", "-p", *args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def test_grpo_waits_for_the_agon_run_it_matches(tmp_path):
    """train.budget.match tokens: each GRPO job takes the agon run of its seed as an input and
    passes it as --match-run; with match steps the two run independently."""
    wd = workdir_with(tmp_path)
    out = _job_details(wd, "results/toy/arith/train/grpo/seed1/summary.json")
    block = out[out.index("rule train:") :]
    grpo = next(b for b in block.split("\n\n") if "method=grpo" in b)
    assert "results/toy/arith/train/agon/seed1/summary.json" in grpo.split("output:")[0]
    assert "results/toy/arith/train/agon/seed1/summary.json" in out  # the agon job is in the DAG
    cfg = load(wd / "config" / "config.yaml")
    cfg["train"]["budget"] = {"match": "steps"}
    wd2 = workdir_with(tmp_path / "steps", cfg)
    jobs = dry_run_jobs(wd2, "results/toy/arith/train/grpo/seed1/summary.json")
    assert {tuple(j["output"]) for j in jobs if j["rule"] == "train"} == {
        (
            "results/toy/arith/train/grpo/seed1/A",
            "results/toy/arith/train/grpo/seed1/B",
            "results/toy/arith/train/grpo/seed1/summary.json",
        )
    }


def test_ablations_are_one_target_away(tmp_path):
    """results/ablations.csv: every variant x task x ablation seed trained and evaluated; not
    part of the default target."""
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "config.yaml")
    jobs = dry_run_jobs(wd, "results/ablations.csv")
    counts = Counter(j["rule"] for j in jobs)
    n = len(cfg["families"]) * len(cfg["tasks"]) * len(cfg["ablations"]["seeds"])
    variants = cfg["ablations"]["variants"]
    assert counts["ablation_train"] == counts["ablation_eval"] == n * len(variants)
    assert counts["ablation_config"] == len(cfg["families"]) * len(cfg["tasks"]) * len(variants)
    assert counts["ablations_report"] == 1 and "train" not in counts and "report" not in counts
    default = Counter(j["rule"] for j in dry_run_jobs(wd))
    assert not any(r.startswith("ablation") for r in default)


def test_the_regime_needs_no_agon_run(tmp_path):
    """results/regime.csv: the baselines on the regime's split, GRPO at a budget fixed up
    front; no agon (or any table 1) run or evaluation is in its DAG, so it can be built and
    committed before the first agon run of a new world; not part of the default target."""
    from agon.regime import REGIME_SYSTEMS

    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "config.yaml")
    jobs = dry_run_jobs(wd, "results/regime.csv")
    counts = Counter(j["rule"] for j in jobs)
    n_ft, seeds = len(cfg["families"]) * len(cfg["tasks"]), cfg["seeds"]
    evals = sum(len(eval_seeds(s, seeds, True)) for s in REGIME_SYSTEMS)
    assert counts["regime_train"] == n_ft * len(seeds)
    assert counts["regime_evaluate"] == n_ft * evals and counts["regime_report"] == 1
    assert not {"train", "evaluate", "report"} & set(counts)
    outputs = {o for j in jobs for o in j["output"]}
    assert all(
        f"results/toy/{t}/config/regime_{s}.yaml" in outputs
        for t in ("arith", "toycode")
        for s in ("train", "eval")
    )
    assert not any("/agon" in i for j in jobs for i in j["input"])
    default = Counter(j["rule"] for j in dry_run_jobs(wd))
    assert not any(r.startswith("regime") for r in default)


def test_the_budget_curve_reuses_table_1_at_scale_1_and_matches_grpo_at_each_scale(tmp_path):
    """results/budget.csv: each scale but 1 trains agon, agon_independent and GRPO (waiting for
    agon's run of its scale and seed) with scale x train.steps; scale 1 is table 1's own runs
    and evaluations; not part of the default target."""
    from agon.budget_curve import SYSTEMS, TRAINED

    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "config.yaml")
    b = cfg["budget"]
    jobs = dry_run_jobs(wd, "results/budget.csv")
    counts = Counter(j["rule"] for j in jobs)
    others, seeds = [x for x in b["scales"] if x != 1], b["seeds"]
    n = len(cfg["families"]) * len(b["tasks"]) * len(others) * len(seeds)
    assert counts["budget_train"] == n * len(TRAINED)
    assert counts["budget_evaluate"] == n * len(SYSTEMS) and counts["budget_report"] == 1
    assert counts["train"] == len(b["tasks"]) * len(seeds) * len(TRAINED)  # table 1's, scale 1
    assert counts["budget_config"] == len(b["tasks"]) * len(others)
    x = others[-1]
    grpo = next(
        j
        for j in jobs
        if j["rule"] == "budget_train" and f"x{x}/train/grpo/seed{seeds[-1]}/A" in j["output"][0]
    )
    assert f"results/toy/arith/budget/x{x}/train/agon/seed{seeds[-1]}/summary.json" in grpo["input"]
    snaps = [f"results/toy/arith/config/budget/x{x}.yaml", "results/toy/arith/config/train.yaml"]
    assert snakemake(wd, "--cores", "1", *snaps).returncode == 0
    scaled, table1 = (load(wd / p) for p in snaps)
    assert scaled["train"].pop("steps") == x * table1["train"].pop("steps")
    assert scaled == table1  # nothing else of table 1's training changes
    default = Counter(j["rule"] for j in dry_run_jobs(wd))
    assert not any(r.startswith("budget") for r in default)


def test_related_methods_are_one_target_away(tmp_path):
    """results/related.csv: each related method trained per (family, task, seed) against the
    agon run of its seed, evaluated in its three columns; the toy teacher is built only for
    the method that distills from it; the paper config plans the same with a teacher row per
    family; table 1's DAG builds none of it."""
    from agon.methods import RELATED

    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "config.yaml")
    methods = load_config(wd / "config" / "config.yaml")["related"]["methods"]  # registry default
    assert set(RELATED) <= set(methods)
    jobs = dry_run_jobs(wd, "results/related.csv")
    counts = Counter(j["rule"] for j in jobs)
    n = len(cfg["families"]) * len(cfg["tasks"]) * len(cfg["seeds"])
    trained = {COLUMNS[c].train for c in columns_for_methods(methods)} - {None}
    # the toy teacher, like the pair it is gated against, is pretrained per training seed
    assert counts["train"] == n * len(trained) and counts["pretrain_teacher"] == len(cfg["seeds"])
    assert counts["related_report"] == 1 and "report" not in counts
    trains = [j for j in jobs if j["rule"] == "train"]
    for method in RELATED:
        run = next(j for j in trains if f"/train/{method}/seed1/" in j["output"][0])
        inputs = " ".join(run["input"])
        assert "/train/agon/seed1/summary.json" in inputs  # matched to the agon run of its seed
        assert ("teacher_report.json" in inputs) == (method == "opd_then_rl")
    default = Counter(j["rule"] for j in dry_run_jobs(wd))
    assert "pretrain_teacher" not in default and "related_report" not in default
    assert default["train"] == n * 3  # grpo, agon, agon_independent
    paper = load(wd / "config" / "paper.yaml")
    assert all("teacher" in fam for fam in paper["families"])
    jobs = dry_run_jobs(wd, "results/related.csv", "--configfile", "config/paper.yaml")
    outputs = {o for j in jobs for o in j["output"]}
    for fam in paper["families"]:
        for method in RELATED:
            assert f"results/{fam['name']}/deepmath/train/{method}/seed0/summary.json" in outputs


def test_a_family_is_a_row(tmp_path):
    """Adding one row to a copy of the config adds exactly that family's jobs."""
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "paper.yaml")
    before = dry_run_jobs(wd, "--configfile", "config/paper.yaml")
    row = copy.deepcopy(cfg["families"][0])
    row["name"] = "olmo3"
    row["model_a"]["model"] = "allenai/Olmo-3-7B-Think"
    row["model_b"]["model"] = "allenai/Olmo-3-7B-Instruct"
    cfg["families"].append(row)
    (wd / "config" / "new.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    after = dry_run_jobs(wd, "--configfile", "config/new.yaml")

    new = [j for j in after if any(o.startswith("results/olmo3/") for o in j["output"])]
    per_family = expected_counts({**cfg, "families": [row]})
    assert Counter(j["rule"] for j in new) == per_family - Counter({"report": 1, "all": 1})
    assert len(after) - len(before) == len(new)
    # the new family's jobs run the new row's models
    assert any(
        o.startswith("results/olmo3/deepmath/train/agon/seed") for j in new for o in j["output"]
    )


def test_methods_not_listed_are_not_built(tmp_path):
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "paper.yaml")
    cfg["methods"] = ["base", "agon_single"]
    (wd / "config" / "few.yaml").write_text(yaml.safe_dump(cfg))
    jobs = dry_run_jobs(wd, "--configfile", "config/few.yaml")
    outputs = [o for j in jobs for o in j["output"]]
    assert not any("/train/grpo/" in o for o in outputs)
    systems = {m.group(1) for o in outputs if (m := re.search(r"/eval/(\w+)/seed", o))}
    assert systems == {"base", "base_b", "agon_single", "agon_single_b"}
    assert Counter(j["rule"] for j in jobs) == expected_counts(cfg)


def test_bad_row_fails_when_the_dag_is_built(tmp_path):
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "paper.yaml")
    cfg["families"][1]["draft_view"] = "last_tokens:zero"
    (wd / "config" / "bad.yaml").write_text(yaml.safe_dump(cfg))
    res = snakemake(wd, "-n", "--configfile", "config/bad.yaml")
    assert res.returncode != 0
    err = res.stdout + res.stderr
    assert "families[1] (name 'qwen3_5')" in err and "draft_view" in err
    assert not (wd / "results").exists()


def test_toy_rows_must_point_at_the_pretrained_models(tmp_path):
    wd = workdir_with(tmp_path)
    cfg = load(wd / "config" / "config.yaml")
    cfg["out_dir"] = "elsewhere"  # but the toy row still points under results/
    (wd / "config" / "moved.yaml").write_text(yaml.safe_dump(cfg))
    res = snakemake(wd, "-n", "--configfile", "config/moved.yaml")
    assert res.returncode != 0
    assert (
        "'model_a.model'" in res.stdout + res.stderr
        and "elsewhere/toy/models/seed{seed}/A" in res.stdout + res.stderr
    )


def test_lint_is_clean():
    res = subprocess.run(
        [*SNAKEMAKE, "--lint", "-s", str(REPO / "Snakefile"), "-d", str(REPO)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Congratulations, your workflow is in a good condition!" in res.stdout + res.stderr


def test_slurm_profile_builds_the_paper_dag(tmp_path):
    """The SLURM profile loads (executor plugin, its options) and plans the paper DAG."""
    wd = workdir_with(tmp_path)
    shutil.copytree(REPO / "profiles", wd / "profiles")
    cfg = load(wd / "config" / "paper.yaml")
    jobs = dry_run_jobs(wd, "--profile", "profiles/slurm", "--configfile", "config/paper.yaml")
    assert Counter(j["rule"] for j in jobs) == expected_counts(cfg)
