"""The toy world's positive control (results/control.csv) from synthetic evaluations, and the
pieces it and table 1's mechanism section stand on: the control's config, the robust_read
system, where twin runs' rollouts diverge, per-seed base models and the CPU kernel pin.

Every expected number is recomputed here from what the test wrote, never hard-coded."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from agon.config import (
    ConfigError,
    control_config,
    family_for_seed,
    get_family,
    kernel_env,
    load_config,
    seeded_bases,
)
from agon.report.control import build_control_report, verdicts
from agon.report.mechanism import divergence, divergence_columns
from agon.results import Layout
from agon.systems import WrongDraftRead
from agon.tasks import get_task
from agon.training import metrics as mk
from tests.tiny_models import ScriptedEngine

ROOT = Path(__file__).resolve().parents[1]
SCHEMES = ["agon", "zero_sum", "independent", "cooperative"]
# the synthetic truth: the share of each scheme's wrong drafts written hidden, its reader's
# rate against hidden-error drafts, its cascade's rate
TRUTH = {
    "base": (0.5, 0.3, 0.6),
    "agon": (0.9, 0.7, 0.55),
    "zero_sum": (0.9, 0.7, 0.55),
    "independent": (0.5, 0.3, 0.65),
    "cooperative": (0.1, 0.3, 0.7),
}


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    cfg = load_config(ROOT / "config" / "config.yaml")
    out = tmp_path_factory.mktemp("control")
    cfg["out_dir"] = str(out / "results")
    cfg["control"]["seeds"] = [0, 1]
    cfg["eval"]["bootstrap"] = 300
    return cfg


def test_control_config_is_the_toy_world_with_its_changes(config):
    c = control_config(config, "results/control/models", "zero_sum")
    fam = get_family(c, "control")
    assert fam["model_a"]["model"] == "results/control/models/A" and "teacher" not in fam
    assert [t["name"] for t in c["tasks"]] == ["arith"] and c["methods"] == ["agon"]
    assert c["agon"]["reward"]["scheme"] == "zero_sum"
    assert c["toy"]["models"]["A"]["mistake"]["hidden_share"] == 0.5
    assert c["toy"]["models"]["A"]["mistake"]["op"] == config["toy"]["models"]["A"]["mistake"]["op"]
    assert (
        c["toy"]["reader"]["arith_copy_wrong"]
        == config["control"]["toy"]["reader"]["arith_copy_wrong"]
    )
    assert c["train"]["steps"] == config["control"]["train"]["steps"]
    bad = {**config, "control": {**config["control"], "task": "nope"}}
    with pytest.raises(ConfigError, match="control.task"):
        control_config(bad, "m")


def test_a_family_row_may_name_its_base_models_per_seed():
    fam = {"name": "f", "model_a": {"model": "m/seed{seed}/A"}, "model_b": {"model": "other/B"}}
    assert seeded_bases(fam) and not seeded_bases({"model_a": {"model": "x"}})
    got = family_for_seed(fam, 2)
    assert got["model_a"]["model"] == "m/seed2/A" and got["model_b"]["model"] == "other/B"
    assert fam["model_a"]["model"] == "m/seed{seed}/A"  # the config's row is left alone


def test_cpu_kernel_pin():
    assert kernel_env({"cpu_kernels": "avx2"}, "x86_64") == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_CBWR": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    }
    assert kernel_env({"cpu_kernels": "avx2"}, "aarch64") == {}
    assert kernel_env({"cpu_kernels": None}, "x86_64") == {}


def test_robust_read_reads_each_problems_fixed_wrong_draft():
    task = get_task("arith", n_train=5, n_test=20, n_validation=2, grading_workers=1)
    try:
        problems = task.problems("hard")[:3]
        engine = ScriptedEngine(lambda prompt, j: "\\boxed{1}")
        rows = WrongDraftRead(engine).run(task, problems, 2, _sampling())
        for p, row, prompt in zip(problems, rows, engine.calls):
            draft = task.wrong_draft(p, 0)
            assert [s.drafts for s in row] == [[draft], [draft]]
            assert draft in prompt[-1]["content"] and task.error_style(p, draft) == "hidden"
    finally:
        task.close()


def _sampling():
    from agon.engines.base import SamplingParams

    return SamplingParams(max_new_tokens=8, temperature=1.0, seed=0)


def test_twins_diverge_where_their_fingerprints_first_differ(tmp_path):
    def write(name, shas):
        path = tmp_path / name
        rows = [{mk.STEP: i, mk.ROLLOUT_SHA: h} for i, h in enumerate(shas)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    a = write("a.jsonl", ["x", "y", "z", "w"])
    assert divergence(a, write("b.jsonl", ["x", "y", "q", "w"])) == 2
    assert divergence(a, write("c.jsonl", ["x", "y", "z", "w"])) is None
    cols = divergence_columns([2, None, 0], [0, 1, 2])
    assert cols["agon_diverges_at"] == "2;never;0"
    assert "seed(s) [1]" in cols["agon_diverges_at_note"]
    assert divergence_columns([1, 3], [0, 1])["agon_diverges_at_note"] == ""


def _write_control(
    config: dict, layout: Layout, n_problems: int = 40, misled: tuple = (0.1, 0.9)
) -> dict:
    """Synthetic evaluations of every scheme at every seed: cascade samples whose drafts are
    right, hidden-wrong or visible-wrong at TRUTH's rates (a read right after a hidden and
    after a visible wrong draft at the rates ``misled``), and robust samples; returns the
    hidden shares and levers the report should recount."""
    task = get_task("arith", grading_workers=1)
    problems = task.problems("hard")[:n_problems]
    rng = random.Random(0)
    counted = {}
    try:
        for scheme in ["base", *config["control"]["schemes"]]:
            hidden_rate, robust_rate, cascade_rate = TRUTH[scheme]
            h = n = 0
            reads = {"hidden": [0, 0], "visible": [0, 0]}
            paid: dict[str, list] = {}
            for seed in config["control"]["seeds"]:
                for measure, rate in (("cascade", cascade_rate), ("robust", robust_rate)):
                    d = Path(layout.control_eval_dir(scheme, measure, seed))
                    d.mkdir(parents=True, exist_ok=True)
                    lines = []
                    for p in problems:
                        for j in range(2):
                            row = {"problem_id": p.id, "sample": j, "correct": rng.random() < rate}
                            if measure == "cascade":
                                if rng.random() < 0.5:  # a right draft
                                    draft = task.solution(p)
                                else:
                                    style = "hidden" if rng.random() < hidden_rate else "visible"
                                    draft = task.wrong_draft(p, rng.randrange(99), style)
                                    h += style == "hidden"
                                    n += 1
                                    right = rng.random() < misled[style == "visible"]
                                    row["correct"] = right
                                    reads[style] = [x + y for x, y in zip(reads[style], (1, right))]
                                row["drafts"] = [draft]
                            lines.append(json.dumps(row))
                    (d / "samples.jsonl").write_text("\n".join(lines) + "\n")
                    (d / "summary.json").write_text(json.dumps({"pass@1": rate}))
                if scheme != "base":
                    run = Path(layout.control_train_dir(scheme, seed))
                    run.mkdir(parents=True, exist_ok=True)
                    (run / "summary.json").write_text(
                        json.dumps(
                            {
                                "A/hidden_share_first": 0.5,
                                "A/hidden_minus_visible_reward": 0.1 * (scheme != "independent"),
                                "B/last_robust_pass@1": 0.4,
                            }
                        )
                    )
                    # per step: the pay drawn around 0.1 (agon, ...) or exactly 0 (independent)
                    pays = [
                        {
                            "A/drafter/hidden_minus_visible_reward": (
                                (0.1 + rng.gauss(0, 0.05)) * (scheme != "independent")
                            ),
                            "A/drafter/style_gap_pairs": float(1 + step % 3),
                        }
                        for step in range(10)
                    ]
                    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pays))
                    paid[scheme] = paid.get(scheme, []) + pays
            counted[scheme] = h / n
            if scheme in paid:
                w = [r["A/drafter/style_gap_pairs"] for r in paid[scheme]]
                v = [r["A/drafter/hidden_minus_visible_reward"] for r in paid[scheme]]
                counted[f"{scheme}/pay"] = float(np.dot(w, v) / np.sum(w))
            counted[f"{scheme}/lever"] = (
                reads["visible"][1] / reads["visible"][0] - reads["hidden"][1] / reads["hidden"][0]
            )
    finally:
        task.close()
    return counted


def test_the_control_table_recounts_its_measures_and_states_the_outcome(config):
    layout = Layout(config["out_dir"])
    counted = _write_control(config, layout)
    written = build_control_report(config, layout)
    rows = {r["scheme"]: r for r in _read_csv(written["csv"][0])}
    assert list(rows) == ["base", *SCHEMES]
    for scheme, share in counted.items():
        if "/" in scheme:  # the lever, the pay: recounted, the pay as its steps' weighted mean
            name, what = scheme.split("/")
            column = {"lever": "lever", "pay": "train_style_pay"}[what]
            assert float(rows[name][column]) == pytest.approx(share)
            continue
        r = rows[scheme]
        assert float(r["hidden_share"]) == pytest.approx(share)
        assert float(r["hidden_share_lo"]) <= share <= float(r["hidden_share_hi"])
    agon = rows["agon"]
    diff = float(agon["hidden_share_minus_independent"])
    assert diff == pytest.approx(counted["agon"] - counted["independent"])
    assert float(agon["hidden_share_minus_independent_lo"]) > 0  # 0.9 against 0.5: shown
    assert float(agon["hidden_share_minus_independent_mde"]) > 0
    assert (
        "hidden_share_minus_independent" not in rows["independent"]
        or not rows["independent"]["hidden_share_minus_independent"]
    )
    assert float(agon["train_style_pay_lo"]) > 0.05  # the steps' pay ~0.1: shown
    assert float(rows["independent"]["train_style_pay"]) == 0.0
    md = Path(written["md"][0]).read_text()
    assert "The contest reaches the drafter" in md and "The mechanism follows" in md
    assert json.loads(Path(written["provenance"][0]).read_text())["family"] == "control"


def test_a_world_without_a_lever_is_inconclusive(config):
    """When reads after hidden wrong drafts are right as often as after visible ones, hiding
    an error pays nothing: the control says it cannot test the implementation."""
    layout = Layout(config["out_dir"])
    counted = _write_control(config, layout, misled=(0.5, 0.5))
    written = build_control_report(config, layout)
    rows = {r["scheme"]: r for r in _read_csv(written["csv"][0])}
    assert float(rows["base"]["lever"]) == pytest.approx(counted["base/lever"])
    assert float(rows["base"]["lever_lo"]) < 0 < float(rows["base"]["lever_hi"])
    md = Path(written["md"][0]).read_text()
    assert "Inconclusive: this control world gives the drafter no lever" in md
    assert "falsified" not in md.split("## What it shows")[1]


def test_verdicts_name_a_falsified_implementation_and_a_failed_mechanism():
    def row(style_lo, robust_lo):
        return {
            "scheme": "agon",
            **{
                f"{m}_minus_independent{k}": v
                for m, lo in (("hidden_share", style_lo), ("robust", robust_lo), ("cascade", -0.1))
                for k, v in (("", lo + 0.05), ("_lo", lo), ("_hi", lo + 0.1), ("_mde", 0.05))
            },
        }

    lever = {"scheme": "base", "lever": 0.2, "lever_lo": 0.1, "lever_hi": 0.3}
    pay = {"train_style_pay_seed0": 0.2, "train_style_pay_seed1": -0.1, "train_style_pay": 0.05}
    # a lever and a share that does not move: the rule as first stated, and what the pay says
    unpaid = row(-0.02, 0.1) | pay | {"train_style_pay_lo": -0.01, "train_style_pay_hi": 0.1}
    unpaid |= {"lever": 0.01}
    lines = verdicts([lever, unpaid, {"scheme": "independent", "train_style_pay": 0.0}])
    assert "Not shown" in lines[0] and "falsified" in lines[0]
    assert "+0.050 [-0.010, +0.100]" in lines[1] and "+0.000 under independent" in lines[1]
    assert "not shown during training" in lines[1] and "+1.0 to +1.0 points" in lines[1]
    paid = unpaid | {"train_style_pay_lo": 0.02}
    assert "the incentive was there" in verdicts([lever, paid])[1]
    # no lever: inconclusive, whatever the share and the pay
    flat = lever | {"lever": 0.0, "lever_lo": -0.1}
    assert "Inconclusive" in verdicts([flat, unpaid])[0]
    lines = verdicts([lever, row(0.1, -0.03)])
    assert "reaches the drafter" in lines[0] and "fails in this world" in lines[1]


def _read_csv(path):
    import csv

    with open(path) as f:
        return list(csv.DictReader(f))


def test_style_share_is_a_ratio_of_sums():
    """A problem with more wrong drafts weighs more in the hidden share (sums, not means)."""
    h = np.array([[3.0, 0.0]])
    n = np.array([[3.0, 1.0]])
    assert h.sum() / n.sum() == pytest.approx(0.75)
