"""`agon plan`: the DAG's jobs against the workflow's, the plan's flags and prices, registry
rows, throughput labels, JSON and CSV output, bad input, precision notes. Its model arithmetic
(parameters, FLOPs, KV cache, memory, dimensions): tests/test_plan_dims.py.

Fast: no model is loaded; one Snakemake dry run plans config/small-gpu.yaml.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from test_workflow import REPO, dry_run_jobs, expected_counts, workdir_with

import agon.plan.memory as mm
from agon.cli import main
from agon.config import load_config
from agon.methods import columns_for_methods, eval_seeds, trained_methods_for
from agon.plan.dims import (
    PlanError,
    param_count,
)
from agon.plan.hardware import (
    ASSUMED,
    ASSUMED_COMPUTE_EFFICIENCY,
    ASSUMED_DECODE_EFFICIENCY,
    efficiency,
    read_measurements,
    write_measurement,
)
from agon.plan.jobs import Job
from agon.plan.planner import PlanContext, _job_plan, plan, precision_note
from agon.plan.published import (
    PUBLISHED,
)
from agon.plan.render import to_json, to_text
from agon.plan.workload import MeasuredLengths
from agon.registry import TRAINERS, Helper, Method

PAPER = REPO / "config" / "paper.yaml"
SMALL = REPO / "config" / "small-gpu.yaml"


def by_rule(p) -> Counter:
    return Counter(j.job.rule for j in p.jobs)


def job(p, label: str):
    return next(j for j in p.jobs if j.job.label == label)


# ----------------------------------------------------------------------------- the DAG


def test_paper_jobs_are_the_workflows():
    cfg = load_config(PAPER)
    counts = by_rule(plan(cfg, "results/table1.csv"))
    want = expected_counts(cfg)  # test_workflow's count, from agon.methods, of the dry run's jobs
    for rule in ("config_snapshot", "all", "pretrain_config"):
        want.pop(rule, None)
    assert counts == want
    assert (counts["train"], counts["evaluate"]) == (54, 168)


def test_related_and_ablation_jobs():
    cfg = load_config(SMALL)
    p = plan(cfg, "results/related.csv")
    systems = columns_for_methods(cfg["related"]["methods"])
    n_ft, seeds = len(cfg["families"]) * len(cfg["tasks"]), cfg["seeds"]
    assert by_rule(p)["evaluate"] == n_ft * sum(len(eval_seeds(s, seeds)) for s in systems)
    assert by_rule(p)["train"] == n_ft * len(trained_methods_for(systems)) * len(seeds)
    a = by_rule(plan(cfg, "results/ablations.csv"))
    n_var = len(cfg["ablations"]["variants"]) * len(cfg["ablations"]["seeds"])
    assert a["ablation_train"] == a["ablation_eval"] == n_ft * n_var


def test_small_gpu_config_validates_and_its_dag_plans(tmp_path):
    """`snakemake -n results/table1.csv --configfile=config/small-gpu.yaml` lists exactly the
    training and evaluation jobs the planner prices; results/plan.csv is a rule of its own."""
    cfg = load_config(SMALL)
    wd = workdir_with(tmp_path)
    shutil.copy(SMALL, wd / "config" / "small-gpu.yaml")
    table, plan_csv = f"{cfg['out_dir']}/table1.csv", f"{cfg['out_dir']}/plan.csv"
    jobs = dry_run_jobs(wd, table, plan_csv, "--configfile=config/small-gpu.yaml")
    dry = {o for j in jobs if j["rule"] in ("train", "evaluate") for o in j["output"]}
    dry = {o for o in dry if o.endswith("summary.json")}
    planned = {j.job.output for j in plan(cfg, table).jobs if j.job.rule in ("train", "evaluate")}
    assert planned == dry and len(planned) > 0
    plan_job = next(j for j in jobs if j["rule"] == "plan")
    assert plan_job["output"] == [plan_csv] and plan_job["input"][0].endswith("plan/config.yaml")


# ----------------------------------------------------------------------------- the plan


def test_paper_plan_flags_what_does_not_fit():
    config = load_config(PAPER)
    p = plan(config, "results/table1.csv", gpu="h200")
    duel = job(p, "train qwen3 deepmath agon seed0")
    # with train.gradient_checkpointing (the paper config's) the duel's activations fit ...
    assert not any(f.startswith("memory:") and "activations" in f for f in duel.flags)
    # ... without it, every layer's activations of 8 x (reader prompt + 4096) tokens do not
    config["train"]["gradient_checkpointing"] = False
    kept = job(plan(config, "results/table1.csv", gpu="h200"), "train qwen3 deepmath agon seed0")
    assert any(f.startswith("memory:") and "activations" in f for f in kept.flags)
    share = config["train"]["vllm_gpu_memory_utilization"]  # each colocated engine's
    engine = dict((part.name, held) for part, held in duel.memory.placed)["A.engine"]
    assert engine[0].components["vllm_reserved"] == pytest.approx(share * 150e9)
    # its CUDA graphs stay on the GPU while it sleeps through A's update
    assert "A.vllm_cuda_graphs" in duel.memory.devices["GPU 0"].components
    grpo = job(p, "train qwen3 deepmath grpo seed0")  # TRL with gradient checkpointing fits
    assert not any(f.startswith("memory:") for f in grpo.flags)
    assert grpo.steps == {"A": 750, "B": 750}  # tokens of the duel: 500 x (1 + 2 reads) / 2
    assert grpo.tokens_generated == pytest.approx(duel.tokens_generated)
    moa = job(p, "evaluate qwen3 deepmath moa seed0")
    # the proposals are cut to fit (baselines.moa.fit_proposals), and on vLLM (eval.backend)
    # each of MoA's two engines holds its share of the GPU: no memory flag
    assert not any(f.startswith("memory:") for f in moa.flags)
    assert moa.memory.per_device.components["A.vllm_reserved"] == pytest.approx(0.45 * 150e9)
    t = p.totals("table1")
    assert t["jobs"] == len(p.jobs) and t["flagged"] > 0 and t["gpu_hours"] > 0


def test_what_no_share_counts_is_priced_and_said_to_be_assumed():
    """A CUDA context per process on each GPU, each vLLM engine's CUDA graphs beside its share,
    the staged weights' second copy while one is rewritten, and the engines asleep through
    their policy's update: each priced, and the page says they are assumed."""
    config = load_config(PAPER)
    p = plan(config, "results/table1.csv", gpu="h200")
    duel = job(p, "train qwen3 deepmath agon seed0")
    gpu0 = duel.memory.devices["GPU 0"].components
    # the trainer's process and policy A's engine process both touch GPU 0
    assert gpu0["cuda_context"] == pytest.approx(2 * mm.ASSUMED_CUDA_CONTEXT_BYTES)
    assert gpu0["A.vllm_cuda_graphs"] == mm.ASSUMED_CUDA_GRAPH_BYTES
    ctx = PlanContext(config, "h200", MeasuredLengths(), None)
    a, b = (mm.weight_bytes(ctx.dims("qwen3", m), "bfloat16") for m in "AB")
    # one process with both models, a staged copy per engine, and one more while rewritten
    expected = mm.HOST_PROCESS_BYTES + (a + b) + (a + b) + max(a, b)
    assert duel.memory.host == pytest.approx(expected)
    # asleep through A's update, A's engine's share is not beside A's gradients and activations
    update = {k: v for k, v in gpu0.items() if k.startswith("A.activations")}
    assert update and "A.vllm_reserved" not in gpu0
    text = to_text(p)
    assert "memory, assumed: a CUDA context of 500 MiB" in text and "CUDA graphs" in text
    eval_job = job(p, "evaluate qwen3 deepmath base seed0")  # an evaluation's vLLM engine too
    assert "A.vllm_cuda_graphs" in eval_job.memory.devices["GPU 0"].components


def test_small_gpu_plan_fits_one_80gb_gpu():
    p = plan(load_config(SMALL), "all", gpu="h100")
    assert not [j.job.label for j in p.jobs if j.flags]
    assert all(j.resources["gpus"] <= 1 for j in p.jobs)
    assert 0 < p.totals()["peak_memory_per_gpu"] <= 80e9


def test_budget_caps_and_matches_samples():
    cfg = load_config(SMALL)
    cfg["train"]["budget"] = {"match": "samples", "max_steps_factor": 1.2}
    p = plan(cfg, "results/table1.csv")
    grpo = job(p, "train qwen3_small deepmath grpo seed0")
    # the duel's 100 steps give each model 50 x 16 x 8 drafts + 50 x 16 x 8 x 2 reads = 19200
    # completions, 150 GRPO steps of 128; the cap is 1.2 x 100 = 120
    assert grpo.steps == {"A": 120, "B": 120}
    assert any("capped at 120" in n for n in grpo.notes)


def test_each_run_reads_its_knobs_from_settings_made_once(monkeypatch):
    """A training job's train.* and agon.* knobs come from one settings object per (family, how
    it runs, ablation variant), made as its trainer makes them: a variant's agon changes reach
    its duel, and what the trainer refuses the planner refuses, naming the key."""
    import agon.plan.workload as wl

    cfg = load_config(SMALL)
    cfg["ablations"]["variants"] = [{"name": "k4", "agon": {"num_reads": 4}}]
    cfg["ablations"]["reference"] = None
    made = Counter()
    real = wl.run_settings

    def counted(config, family, runs):
        s = real(config, family, runs)
        made[(family["name"], runs, s.num_reads if runs == "duel" else None)] += 1
        return s

    monkeypatch.setattr(wl, "run_settings", counted)
    p = plan(cfg, "all")
    assert made and set(made.values()) == {1}, made
    k = cfg["agon"]["num_reads"]
    assert k != 4
    assert ("qwen3_small", "duel", 4) in made and ("qwen3_small", "duel", k) in made
    duel = job(p, "train qwen3_small deepmath agon seed0")
    variant = job(p, "ablation_train qwen3_small deepmath k4 agon seed0")
    # the same drafts, each read 4 times instead of K (every length at its cap)
    ratio = variant.tokens_generated / duel.tokens_generated
    assert ratio == pytest.approx((1 + 4) / (1 + k))

    cfg["train"]["problems_per_step"] = 1
    cfg["agon"]["role_schedule"] = "both"
    with pytest.raises(PlanError, match="problems_per_step must be >= 2"):
        plan(cfg, "results/table1.csv")


def test_toy_config_plans_on_cpu_without_a_measurement():
    p = plan(load_config(REPO / "config" / "config.yaml"), "results/table1.csv")
    trains = [j for j in p.jobs if j.job.rule == "train"]
    assert trains and all(j.gpu_hours == 0 and j.seconds is None for j in trains)
    assert any("no throughput measurement for GPU kind 'cpu'" in n for n in trains[0].notes)
    duel = next(j for j in trains if j.job.method == "agon")
    assert duel.memory.placement.how == "everything on the CPU"


def test_lengths_from_an_out_dir(tmp_path):
    cfg = load_config(SMALL)
    run = tmp_path / "qwen3_small" / "deepmath"
    metrics = run / "train" / "agon" / "seed0" / "metrics.jsonl"
    metrics.parent.mkdir(parents=True)
    rows = [
        {
            "step": i,
            "A/drafter/mean_length": 300.0,
            "A/drafter/completions": 128,
            "B/reader/mean_length": 200.0,
            "B/reader/completions": 256,
        }
        for i in range(3)
    ]
    metrics.write_text("\n".join(json.dumps(r) for r in rows) + "\n")  # fmt: skip
    summary = run / "train" / "grpo" / "seed0" / "summary.json"  # no metrics: its totals
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"B/tokens_generated": 640_000, "B/completions": 3200}))
    split = run / "data" / "split.json"
    split.parent.mkdir(parents=True)
    split.write_text(json.dumps({"sizes": {"hard": 37, "validation_hard": 20}}))
    p = plan(cfg, "results/table1.csv", lengths_from=tmp_path)
    duel = job(p, "train qwen3_small deepmath agon seed0")
    assert any("A drafts: 300 tokens (measured" in s for s in duel.lengths)
    # B's drafts: none in the duel's runs, so another method's runs of (family, task) (GRPO's)
    assert any("B drafts: 200 tokens (measured" in s for s in duel.lengths)
    assert any("A reads B's drafts: 1024 tokens (cap" in s for s in duel.lengths)  # none
    grpo = job(p, "train qwen3_small deepmath grpo seed0")
    assert any("B samples: 200 tokens (measured" in s for s in grpo.lengths)
    base = job(p, "evaluate qwen3_small deepmath base seed0")
    assert base.tokens_generated == 37 * cfg["eval"]["n_samples"] * 1024


# ----------------------------------------------------------------------------- registry rows


def _plan_method(monkeypatch, config: dict, name: str, row: Method | None):
    """The plan of one train job of method ``name`` (its row ``row``, registered for this test
    only) on the paper config's qwen3 x deepmath."""
    if row is not None:
        monkeypatch.setitem(TRAINERS.rows, name, row)
    ctx = PlanContext(config, "h200", MeasuredLengths(), None)
    out = f"results/qwen3/deepmath/train/{name}/seed0/summary.json"
    return _job_plan(ctx, Job("train", out, "qwen3", "deepmath", method=name, seed=0))


def test_helper_work_is_read_from_the_row_not_the_name(monkeypatch):
    """GAR's and Cliff's rows under another name are priced as GAR and Cliff: the same phases,
    FLOPs and memory (GAR's logits transient is named after the method)."""
    config = load_config(PAPER)  # cliff.teacher: model, so Cliff's marks are priced
    for method in ("gar", "cliff"):
        real = _plan_method(monkeypatch, config, method, None)
        fake = _plan_method(monkeypatch, config, "fake", replace(TRAINERS.rows[method]))
        assert fake.phases == real.phases and fake.notes == real.notes
        assert fake.tokens_helpers == real.tokens_helpers and fake.seconds == real.seconds
        renamed = {
            k.replace(f"{method}_", "fake_"): v
            for k, v in real.memory.per_device.components.items()
        }
        assert fake.memory.per_device.components == renamed
        assert fake.memory.host == real.memory.host
    # the logits beside an update, at the peak when the engines (asleep through it) hold less
    config["train"]["vllm_gpu_memory_utilization"] = 0.05
    fake = _plan_method(monkeypatch, config, "fake", replace(TRAINERS.rows["gar"]))
    assert "fake_logits" in fake.memory.per_device.components


def test_a_new_rows_helpers_are_priced_from_their_config_keys(monkeypatch):
    """A throwaway method whose teacher scores the samples of its first ``warm`` steps and whose
    rival critiques its wrong samples: each declared line is priced, with the config's keys."""
    row = Method(
        "baselines.cliff:TRAINER",
        teacher=True,
        helpers=(
            Helper(
                "score",
                "teacher scores {m}'s warm-up samples",
                model="teacher",
                first_steps="fake.warm",
                memory="weights",
            ),
            Helper(
                "generate",
                "{helper} critiques {m}'s samples",
                model="other",
                over="wrong_samples",
                prompt="read",
                completion="fake.critique_tokens",
                when=("fake.critic", True),
                engine="hf",
                memory="engine",
            ),
        ),
    )
    assert row.helpers[0].config_keys == ("fake.warm",)
    assert set(row.helpers[1].config_keys) == {"fake.critique_tokens", "fake.critic"}
    config = load_config(PAPER)
    tr = config["train"]
    pg = tr["problems_per_step"] * tr["num_generations"]
    config["fake"] = {"warm": 5, "critique_tokens": 64, "critic": True}
    p = _plan_method(monkeypatch, config, "fake", row)
    phases = {ph["phase"]: ph for ph in p.phases}
    assert {"teacher scores A's warm-up samples", "B critiques A's samples"} <= set(phases)
    assert {"teacher scores B's warm-up samples", "A critiques B's samples"} <= set(phases)
    assert not any("no helper work declared" in n for n in p.notes)
    # the critiques: every sample of the run (an upper bound), 64 tokens each, as helper tokens
    probes = _plan_method(monkeypatch, config, "plain", Method("baselines.cliff:TRAINER"))
    critiques = sum(p.steps.values()) * pg * 64
    assert p.tokens_helpers == pytest.approx(probes.tokens_helpers + critiques)
    # the teacher's weights once, and one critic engine per model trained
    comps = p.memory.per_device.components
    assert comps["helper_weights"] > 0 and comps["helper_kv_cache"] > 0
    # the scoring covers the first `warm` steps only: twice the steps, twice the FLOPs
    config["fake"]["warm"] = 10
    p10 = _plan_method(monkeypatch, config, "fake", row)
    name = "teacher scores A's warm-up samples"
    ten = next(ph for ph in p10.phases if ph["phase"] == name)
    assert ten["flops"] == pytest.approx(2 * phases[name]["flops"])
    # `when` off: no critiques, no critic engine
    config["fake"]["critic"] = False
    off = _plan_method(monkeypatch, config, "fake", row)
    assert not any("critiques" in ph["phase"] for ph in off.phases)
    assert off.tokens_helpers == pytest.approx(probes.tokens_helpers)


def test_a_row_that_declares_nothing_is_priced_as_grpo_and_says_so(monkeypatch):
    config = load_config(PAPER)
    silent = _plan_method(monkeypatch, config, "silent", Method("baselines.cliff:TRAINER"))
    none = _plan_method(monkeypatch, config, "none", Method("x:Y", helpers=()))
    assert "no helper work declared for silent: priced as GRPO" in silent.notes
    assert not any("no helper work declared" in n for n in none.notes)
    assert silent.phases == none.phases and silent.seconds == none.seconds
    assert not any(ph["phase"].endswith(("anchors", "again")) for ph in silent.phases)
    # a trainer registered without a row at all (an entry point): the same, said the same way
    TRAINERS.rows.pop("rowless", None)
    rowless = _plan_method(monkeypatch, config, "rowless", None)
    assert "no helper work declared for rowless: priced as GRPO" in rowless.notes
    assert rowless.phases == silent.phases


def test_how_a_method_runs_comes_from_its_row(monkeypatch):
    """runs: trl (GRPO's TRL engine, each model in a process of its own), duel (both
    together in one)."""
    config = load_config(PAPER)
    grpo = _plan_method(monkeypatch, config, "grpo", None)
    trl = _plan_method(monkeypatch, config, "fake", replace(TRAINERS.rows["grpo"]))
    assert trl.phases == grpo.phases and trl.memory.placement == grpo.memory.placement
    assert "each in a process of its own" in trl.memory.placement.how
    agon = _plan_method(monkeypatch, config, "agon", None)
    duel = _plan_method(monkeypatch, config, "fake", replace(TRAINERS.rows["agon_independent"]))
    assert duel.phases == agon.phases and duel.steps == agon.steps


# ----------------------------------------------------------------------------- throughput


def test_assumed_throughput_is_labelled():
    e = efficiency("h200", "vllm", PUBLISHED["Qwen/Qwen3-4B"], [])
    assert e.assumed and ASSUMED in e.generation_label and ASSUMED in e.training_label
    assert (e.decode, e.train) == (ASSUMED_DECODE_EFFICIENCY["vllm"], ASSUMED_COMPUTE_EFFICIENCY)
    p = plan(load_config(SMALL), "results/table1.csv", gpu="h100")
    timed = [j for j in p.jobs if j.throughput]
    assert timed and all(j.assumed for j in timed)
    assert all(ASSUMED in line for j in timed for line in j.throughput)


def test_measurement_round_trip_and_extrapolation_labels(tmp_path):
    d4, d8 = PUBLISHED["Qwen/Qwen3-4B"], PUBLISHED["Qwen/Qwen3-8B"]
    path = write_measurement(
        tmp_path, gpu_kind="h200", dims=d4, engine="vllm", dtype="bfloat16", batch=64,
        prompt_tokens=512, new_tokens=1024, generation_tokens_per_s=5000.0,
        training_tokens_per_s=4000.0, date="2026-01-02", commit="abc", machine={"host": "x"},
        gpu_memory_utilization=0.9,
    )  # fmt: skip
    body = json.loads(path.read_text())
    for key in (
        "gpu_kind",
        "engine",
        "dtype",
        "batch",
        "prompt_tokens",
        "new_tokens",
        "date",
        "git_commit",
        "generation_tokens_per_s",
        "training_tokens_per_s",
        "provenance",
    ):
        assert key in body  # fmt: skip
    assert body["model"]["architecture"] == "qwen3" and body["model"]["params"] == param_count(d4)
    (m,) = read_measurements(tmp_path)
    assert m.dims == d4 and m.generation_tokens_per_s == 5000.0
    same = efficiency("h200", "vllm", d4, [m])
    assert not same.assumed and "the same model" in same.generation_label
    other_size = efficiency("h200", "vllm", d8, [m])
    assert "another size" in other_size.generation_label and other_size.decode == same.decode
    other_gpu = efficiency("h100", "vllm", d4, [m])
    assert "another GPU kind (h200)" in other_gpu.generation_label
    with pytest.raises(PlanError, match="no throughput measurement for GPU kind 'cpu'"):
        efficiency("cpu", "hf", d4, [m])  # a GPU measurement never carries over to the CPU
    p = plan(load_config(SMALL), "results/table1.csv", gpu="h100", measurements_dir=tmp_path)
    timed = [j for j in p.jobs if j.throughput]
    assert timed and not any(j.assumed for j in timed)


def test_write_measurement_refuses_bad_input(tmp_path):
    shape = dict(dims=PUBLISHED["Qwen/Qwen3-4B"], engine="vllm", dtype="bfloat16", batch=1,
                 prompt_tokens=1, new_tokens=1)  # fmt: skip
    with pytest.raises(PlanError, match="unknown GPU kind"):
        write_measurement(tmp_path, gpu_kind="tpu", generation_tokens_per_s=1.0, **shape)
    with pytest.raises(PlanError, match="needs generation_tokens_per_s"):
        write_measurement(tmp_path, gpu_kind="h200", **shape)
    (tmp_path / "broken.json").write_text("{}")
    with pytest.raises(PlanError, match="broken.json: not a throughput measurement"):
        read_measurements(tmp_path)


# ----------------------------------------------------------------------------- the CLI


def test_cli_json_and_csv(tmp_path, capsys):
    out = tmp_path / "plan.csv"
    assert main(["plan", "--config", str(SMALL), "--gpu", "h100", "--json", "--csv", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["totals"]) == {"table1", "related", "ablations", "all"}
    assert d["totals"]["all"]["jobs"] == len(d["jobs"]) == len(out.read_text().splitlines()) - 1
    train = next(j for j in d["jobs"] if j["rule"] == "train")
    assert train["length_source"] == "cap" and train["throughput_source"] == "assumed"
    assert train["memory"]["per_gpu_gib"] > 0 and train["gpu_hours"] > 0
    assert any(ASSUMED in a for a in d["assumptions"])


def test_cli_text_shows_totals_and_flags(capsys):
    assert main(["plan", "--config", str(PAPER), "--target", "results/table1.csv"]) == 0
    text = capsys.readouterr().out
    assert "totals" in text and "flags:" in text and ASSUMED in text


@pytest.mark.parametrize(
    "args,message",
    [
        (["--config", str(PAPER), "--gpu", "tpu-v5"], "unknown GPU kind 'tpu-v5'; known:"),
        (["--config", "no/such.yaml"], "config file not found: no/such.yaml"),
        (["--config", str(PAPER), "--target", "results/other.csv"], "unknown target"),
        (["--config", str(PAPER), "--lengths-from", "no/such/dir"], "not a folder"),
    ],
)
def test_cli_bad_input(args, message, capsys):
    assert main(["plan", *args]) == 2
    assert message in capsys.readouterr().err


# ----------------------------------------------------------------------------- precision


def test_precision_note_bounds_match_bfloat16_rounding():
    shape = SimpleNamespace(dtype="bfloat16", master_dtype=None)
    lr = 1e-6
    note = precision_note(shape, lr)
    assert "larger than 0.00051" in note and "below 0.00026" in note  # 2^9 and 2^8 x 1e-6
    # the bounds, checked against torch's own bfloat16 rounding on weights of every size
    w = torch.logspace(-7, 0, 20001, dtype=torch.float64).to(torch.bfloat16).unique()
    moved = (w.double() + lr).to(torch.bfloat16) != w
    size = w.double()
    assert bool(moved[size < 2**8 * lr].all())
    assert not bool(moved[size >= 2**9 * lr].any())
    assert bool(moved[(size >= 2**8 * lr) & (size < 2**9 * lr)].any())  # the binade decides
    assert precision_note(SimpleNamespace(dtype="bfloat16", master_dtype="float32"), lr) is None
    assert precision_note(SimpleNamespace(dtype="float32", master_dtype=None), lr) is None


def test_plan_warns_of_pure_bf16_once_and_not_with_fp32_masters():
    config = load_config(PAPER)
    config["train"]["bf16_update"] = "plain"
    p = plan(config, "results/table1.csv", gpu="h200")
    assert len(to_json(p)["warnings"]) == 1 and "pure bfloat16 weights at lr 1e-06" in to_text(p)
    evals = [j for j in p.jobs if j.job.rule == "evaluate"]
    assert evals and not any(j.warnings for j in evals)
    for update in ("kahan", "stochastic_rounding"):  # updates that keep AdamW's small steps
        config["train"]["bf16_update"] = update
        assert to_json(plan(config, "results/table1.csv", gpu="h200"))["warnings"] == []
    config["train"] |= {"bf16_update": "plain", "master_dtype": "float32"}
    p = plan(config, "results/table1.csv", gpu="h200")
    assert to_json(p)["warnings"] == [] and "\nwarnings\n" not in to_text(p)
    assert to_json(plan(load_config(REPO / "config" / "config.yaml"), gpu="h200"))["warnings"] == []


def test_kahan_update_adds_one_16_bit_buffer_per_weight():
    """train.bf16_update: kahan holds 2 more bytes per parameter of a bf16 policy (with its
    optimizer); stochastic rounding and plain hold none; float32 masters ignore the key."""
    config = load_config(PAPER)
    label = "train gemma4 deepmath agon seed0"
    held = {}
    for update in ("plain", "kahan", "stochastic_rounding"):
        config["train"]["bf16_update"] = update
        held[update] = job(plan(config, "results/table1.csv"), label).memory.devices["GPU 0"]
    params = param_count(PUBLISHED["google/gemma-4-E4B-it"])
    assert held["kahan"].components["A.kahan_buffer"] == 2 * params
    assert held["kahan"].total - held["plain"].total == pytest.approx(2 * params)
    assert held["stochastic_rounding"].total == held["plain"].total
    config["train"] |= {"bf16_update": "kahan", "master_dtype": "float32"}
    fp32 = job(plan(config, "results/table1.csv"), label).memory.devices["GPU 0"]
    assert "A.kahan_buffer" not in fp32.components


def test_a_vllm_config_on_the_cpu_kind_is_flagged_not_a_crash(capsys):
    """The paper's vLLM jobs priced on a kind with no GPU memory: each generation says vLLM
    needs a GPU, and the plan still prints (it once divided None by a GiB)."""
    assert main(["plan", "--config", str(PAPER), "--gpu", "cpu", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    flags = [f for j in d["jobs"] for f in j.get("flags", [])]
    assert any("vLLM runs on a GPU; cpu has no GPU memory" in f for f in flags)
