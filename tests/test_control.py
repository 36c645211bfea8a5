"""The toy world's positive control (results/control.csv) from synthetic evaluations, and the
pieces it and table 1's mechanism section stand on: the control's config, the robust_read
system, where twin runs' rollouts diverge, per-seed base models and the CPU kernel pin.

Every expected number is recomputed here from what the test wrote, never hard-coded."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from agon.config import (
    CONTROL_ARMS,
    ConfigError,
    control_config,
    control_stage,
    family_for_seed,
    get_family,
    kernel_env,
    load_config,
    seeded_bases,
)
from agon.report.control import build_control_report
from agon.report.control_measures import table_spec
from agon.report.control_reading import pilot_effects, rate_rule, verdict
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
    cfg["control"]["eval"]["bootstrap"] = 300
    return cfg


def test_the_control_is_a_world_of_its_own(config):
    """The control's config comes from its own section over the schema's defaults: changing
    table 1's world (toy, tasks, train, agon, eval) leaves every control stage as it was."""
    c = control_config(config, "results/control/drafter/models", "zero_sum")
    fam = get_family(c, "control")
    assert fam["model_a"]["model"] == "results/control/drafter/models/A" and "teacher" not in fam
    assert [t["name"] for t in c["tasks"]] == ["arith"] and c["methods"] == ["agon"]
    assert c["agon"]["reward"]["scheme"] == "zero_sum"
    assert c["agon"]["train_roles"] == ["drafter"] and c["agon"]["role_schedule"] == "both"
    assert c["toy"]["models"]["A"]["mistake"]["hidden_share"] == 0.5
    assert c["train"]["steps"] == config["control"]["train"]["steps"]
    changed = copy.deepcopy(config)
    changed["toy"]["models"]["A"]["mistake"]["op"] = "+"
    changed["toy"]["reader"]["arith_copy_wrong"] = 0.3
    changed["tasks"][0]["params"] = {"levels": 9}
    changed["train"] |= {"steps": 7, "learning_rate": 0.1}
    changed["agon"]["num_reads"] = 5
    changed["eval"]["max_problems"] = 3
    for arm in CONTROL_ARMS:
        for stage in ("base", "agon", "lr1"):
            scheme, lr = control_stage(config, stage)
            want = control_config(config, "m", scheme, arm, lr)
            assert control_config(changed, "m", scheme, arm, lr) == want, (arm, stage)
    cur = control_config(config, "m", "agon", "curriculum")
    assert cur["agon"]["train_roles"] == ["drafter", "reader"]
    assert cur["toy"]["models"]["A"]["mistake"]["hidden_share"] < 0.5
    assert control_stage(config, "lr0") == (
        "independent",
        config["control"]["pilot"]["learning_rates"][0],
    )
    bad = copy.deepcopy(config)
    bad["control"]["task"]["name"] = "nope"
    with pytest.raises(ConfigError, match="control"):
        control_config(bad, "m")
    with pytest.raises(ConfigError, match="no arm"):
        control_config(config, "m", arm="nope")


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


def _save(folder: Path, w: np.ndarray) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"w": w.astype(np.float32)}, str(folder / "model.safetensors"))


def _write_arm(
    config: dict,
    layout: Layout,
    table: str,
    truth: dict,
    n_problems: int = 40,
    misled: tuple = (0.1, 0.9),
) -> dict:
    """Synthetic evaluations and runs of one control table: per direction, cascade samples
    whose drafts are right, hidden-wrong or visible-wrong at ``truth[direction][stage]``'s
    rates (a read right after a hidden and after a visible wrong draft at the rates
    ``misled``), robust samples, logged pay per step, model weights (the trained ones moved by
    a known amount); returns the hidden shares, levers, pays and moves the report should
    recount."""
    spec = table_spec(config, table)
    arm, seeds = spec["arm"], spec["seeds"]
    task = get_task("arith", grading_workers=1)
    problems = task.problems("hard")[:n_problems]
    rng = random.Random(0)
    base_w = np.ones(8)
    for m in "AB":
        _save(Path(layout.control_models(arm)) / m, base_w)
    counted = {}
    try:
        for direction, by_stage in truth.items():
            drafter, reader = ("A", "B") if direction == "AB" else ("B", "A")
            for stage in spec["stages"]:
                hidden_rate, robust_rate, cascade_rate = by_stage[stage]
                h = n = 0
                reads = {"hidden": [0, 0], "visible": [0, 0]}
                paid: list = []
                for seed in seeds:
                    for kind, rate in (("cascade", cascade_rate), ("robust", robust_rate)):
                        d = Path(layout.control_eval_dir(arm, stage, f"{kind}_{direction}", seed))
                        d.mkdir(parents=True, exist_ok=True)
                        lines = []
                        for p in problems:
                            for j in range(2):
                                row = {"problem_id": p.id, "sample": j}
                                row["correct"] = rng.random() < rate
                                if kind == "cascade":
                                    if rng.random() < 0.5:  # a right draft
                                        draft = task.solution(p)
                                    else:
                                        style = (
                                            "hidden" if rng.random() < hidden_rate else "visible"
                                        )
                                        draft = task.wrong_draft(p, rng.randrange(99), style)
                                        h += style == "hidden"
                                        n += 1
                                        right = rng.random() < misled[style == "visible"]
                                        row["correct"] = right
                                        reads[style] = [
                                            x + y for x, y in zip(reads[style], (1, right))
                                        ]
                                    row["drafts"] = [draft]
                                lines.append(json.dumps(row))
                        (d / "samples.jsonl").write_text("\n".join(lines) + "\n")
                        (d / "summary.json").write_text(json.dumps({"pass@1": rate}))
                    if stage == "base":
                        continue
                    run = Path(layout.control_train_dir(arm, stage, seed))
                    moved = 0.01 * (1 + seeds.index(seed))
                    for m in "AB":
                        _save(run / m, base_w * (1 + moved))
                    pay = 0.1 * (stage != "independent") * (hidden_rate != 0.5)
                    pays = [
                        {
                            f"{drafter}/drafter/hidden_minus_visible_reward": (
                                (pay + rng.gauss(0, 0.05)) * (stage != "independent")
                            ),
                            f"{drafter}/drafter/style_gap_pairs": float(1 + step % 3),
                        }
                        for step in range(10)
                    ]
                    old = run / "metrics.jsonl"
                    rows = (
                        [json.loads(x) for x in old.read_text().splitlines()]
                        if old.is_file()
                        else []
                    )
                    rows = rows or [{} for _ in pays]
                    rows = [r | q for r, q in zip(rows, pays)]
                    old.write_text("".join(json.dumps(r) + "\n" for r in rows))
                    (run / "summary.json").write_text(json.dumps({"A/hidden_share_first": 0.5}))
                    paid += pays
                counted[f"{direction}/{stage}"] = h / n
                if paid:
                    w = [r[f"{drafter}/drafter/style_gap_pairs"] for r in paid]
                    v = [r[f"{drafter}/drafter/hidden_minus_visible_reward"] for r in paid]
                    counted[f"{direction}/{stage}/pay"] = float(np.dot(w, v) / np.sum(w))
                    counted[f"{direction}/{stage}/moved"] = float(
                        np.mean([0.01 * (1 + i) for i in range(len(seeds))])
                    )
                if reads["visible"][0] and reads["hidden"][0]:  # else 0/0: no lever
                    counted[f"{direction}/{stage}/lever"] = (
                        reads["visible"][1] / reads["visible"][0]
                        - reads["hidden"][1] / reads["hidden"][0]
                    )
        for i, stage in enumerate(spec.get("sweep", [])):
            for seed in seeds:
                run = Path(layout.control_train_dir(arm, stage, seed))
                for m in "AB":
                    _save(run / m, base_w * (1 + 0.1 * (i + 1)))
                probe = [
                    {f"eval/hard_pass@1/{m}": 0.5 - 0.04 * i * k for m in "AB"} for k in (0, 1)
                ]
                (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in probe))
                (run / "summary.json").write_text("{}")
    finally:
        task.close()
    return counted


SEPARATES = {  # AB: the contest moves the drafter; BA: it does not
    "AB": TRUTH,
    "BA": {s: (0.5, 0.3, 0.6) for s in TRUTH},
}


def test_the_pilot_sweeps_rates_and_measures_the_expected_effect(config):
    layout = Layout(config["out_dir"])
    counted = _write_arm(config, layout, "control_pilot", SEPARATES)
    written = build_control_report(config, layout, "control_pilot")
    rows = _read_csv(written["csv"][0])
    effects = pilot_effects(written["csv"][0])
    assert set(effects) == {"AB", "BA"}
    want = counted["AB/agon"] - counted["AB/independent"]
    assert effects["AB"]["effect"] == pytest.approx(want) and effects["AB"]["mde"] > 0
    sweep = [r for r in rows if r["direction"] == "sweep"]
    rates = config["control"]["pilot"]["learning_rates"]
    assert sorted({float(r["learning_rate"]) for r in sweep}) == sorted(rates)
    top = [r for r in sweep if float(r["learning_rate"]) == rates[-1]]
    assert float(top[0]["drafter_weight_change"]) == pytest.approx(0.1 * len(rates), rel=1e-5)
    assert float(top[0]["probe_last"]) == pytest.approx(0.5 - 0.04 * (len(rates) - 1))
    md = Path(written["md"][0]).read_text()
    assert "learning-rate sweep" in md
    # probes fall 0.04 per step of the sweep: the first two rates keep within 5 points
    assert rate_rule(sweep) == sorted(rates)[1] and f"The rule picks {sorted(rates)[1]:g}" in md


def test_the_control_table_measures_both_directions_and_applies_the_rule(config):
    layout = Layout(config["out_dir"])
    _write_arm(config, layout, "control_pilot", SEPARATES)
    build_control_report(config, layout, "control_pilot")
    counted = _write_arm(config, layout, "control", SEPARATES)
    written = build_control_report(config, layout)
    rows = {(r["scheme"], r["direction"]): r for r in _read_csv(written["csv"][0])}
    assert [s for s, d in rows if d == "AB"] == ["base", *SCHEMES]
    for key, want in counted.items():
        direction, stage, *what = key.split("/")
        column = {(): "hidden_share", ("lever",): "lever", ("pay",): "train_style_pay"}.get(
            tuple(what), "drafter_weight_change"
        )
        assert float(rows[stage, direction][column]) == pytest.approx(want, rel=1e-5), key
    ab, ba = rows["agon", "AB"], rows["agon", "BA"]
    assert float(ab["hidden_share_minus_independent_lo"]) > 0 and ab["verdict"] == "shown"
    assert float(ab["train_style_pay_lo"]) > 0.05
    assert float(rows["independent", "AB"]["train_style_pay"]) == 0.0
    assert ba["verdict"] == "inconclusive"  # BA's pilot effect is not above its MDE
    md = Path(written["md"][0]).read_text()
    assert "**shown**" in md and "Rule, per direction" in md
    assert "BA (B drafts, A reads)" in md
    prov = json.loads(Path(written["provenance"][0]).read_text())
    assert prov["family"] == "control" and "pilot" in prov


def test_the_rule_reads_the_pilots_effect():
    def agon(lo, hi, pay_lo):
        return {
            "hidden_share_minus_independent_lo": lo,
            "hidden_share_minus_independent_hi": hi,
            "train_style_pay_lo": pay_lo,
        }

    pilot = {"effect": 0.2, "mde": 0.05}
    assert verdict(agon(0.01, 0.1, 0.1), pilot)[0] == "shown"
    assert verdict(agon(-0.05, 0.05, 0.1), pilot)[0] == "falsified"
    assert verdict(agon(-0.05, 0.15, 0.1), pilot)[0] == "inconclusive"  # above half the effect
    assert verdict(agon(-0.05, 0.05, -0.1), pilot)[0] == "inconclusive"  # not paid to hide
    weak = {"effect": 0.04, "mde": 0.05}
    branch, why = verdict(agon(-0.05, 0.0, 0.1), weak)
    assert branch == "inconclusive" and "unreachable" in why
    assert verdict(agon(-0.05, 0.05, 0.1), None)[0] == "inconclusive"


def _read_csv(path):
    import csv

    with open(path) as f:
        return list(csv.DictReader(f))


def test_style_share_is_a_ratio_of_sums():
    """A problem with more wrong drafts weighs more in the hidden share (sums, not means)."""
    h = np.array([[3.0, 0.0]])
    n = np.array([[3.0, 1.0]])
    assert h.sum() / n.sum() == pytest.approx(0.75)


def test_a_pair_that_stops_hiding_gets_undefined_cells_not_a_crash(config):
    """A scheme whose drafter writes no hidden wrong draft in one direction: its lever (0/0)
    has no replicate; the table says so instead of failing, and the rule reads inconclusive
    only where its own measure is undefined."""
    layout = Layout(config["out_dir"])
    never_hidden = {s: v for s, v in TRUTH.items()} | {"cooperative": (0.0, 0.3, 0.7)}
    _write_arm(config, layout, "control_pilot", SEPARATES)
    build_control_report(config, layout, "control_pilot")
    _write_arm(config, layout, "control", {"AB": never_hidden, "BA": SEPARATES["BA"]})
    written = build_control_report(config, layout)
    rows = {(r["scheme"], r["direction"]): r for r in _read_csv(written["csv"][0])}
    coop = rows["cooperative", "AB"]
    assert coop["lever"] == "" and "not defined" in coop["lever_note"]
    assert float(coop["hidden_share"]) == 0.0
    assert rows["agon", "AB"]["verdict"] == "shown"
    assert verdict({}, None)[0] == "inconclusive"
