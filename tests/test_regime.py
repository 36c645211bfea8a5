"""The regime (agon/regime.py): its criteria and ceilings on chosen numbers, table 1's regime
section and results/regime.csv on synthetic results recounted here, and the toy gates that
read the criteria instead of the ones that contradicted them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from report_helpers import (
    _write_eval,
    make_config,
    rate_matrix,
    read_csv,
    train_summary,
    write_synthetic,
)

from agon.config import regime_section, validate_config
from agon.methods import eval_seeds
from agon.regime import (
    DIFFERENCE,
    REGIME_SYSTEMS,
    ceilings,
    claim_reading,
    criteria,
    planned_grpo_steps,
    readers_note,
    regime_changes,
)
from agon.report.compare import RNG
from agon.report.regime import build_regime_report
from agon.report.table1 import build_report
from agon.results import Layout
from agon.stats import percentile_interval, two_level_bootstrap
from agon.toy.audit import KEYS
from agon.toy.gates import check_gates

REGIME = regime_section({})
IN_REGIME = {"base": 0.12, "base_b": 0.18, "moa": 0.2, "base_cascade": 0.19}
IN_REGIME |= {"grpo": 0.3, "grpo_b": 0.3}


def _by_name(found):
    return {c.name: c for c in found}


def test_the_defaults_are_the_issues_numbers():
    assert REGIME["base_range"] == [0.05, 0.25] and REGIME["max_base_gap"] == 0.10
    assert REGIME["grpo_min_gain"] == 0.08 and REGIME["grpo_max"] == 0.45
    assert REGIME["untrained_gain_divisor"] == 8 and REGIME["split"] == "validation_hard"
    assert REGIME["take_up_range"] == [0.10, 0.60] and REGIME["max_luck_share"] == 0.10


def test_a_world_in_the_regime_meets_every_criterion():
    found = criteria(IN_REGIME, REGIME)
    assert {c.name for c in found} == {
        "base_A",
        "base_B",
        "base_gap",
        "grpo_A_gain",
        "grpo_A",
        "grpo_B_gain",
        "grpo_B",
        "moa_gain",
        "base_cascade_gain",
    }
    assert all(c.met for c in found)
    moa = _by_name(found)["moa_gain"]  # over the better base, B's: (1 - 0.18) / 8
    assert moa.value == pytest.approx(0.02) and moa.max == pytest.approx(0.82 / 8)


@pytest.mark.parametrize(
    "change, failed",
    [
        ({"base": 0.49}, {"base_A", "base_gap", "grpo_A_gain"}),  # today's arith: 49.9
        ({"base_b": 0.04}, {"base_B"}),
        ({"base": 0.07}, {"base_gap"}),
        ({"grpo": 0.873}, {"grpo_A"}),  # today's GRPO
        ({"grpo_b": 0.2}, {"grpo_B_gain"}),
        ({"moa": 0.30}, {"moa_gain"}),  # 12 points over 18: more than 82/8
        ({"base_cascade": 0.29}, {"base_cascade_gain"}),
    ],
)
def test_each_criterion_fails_where_its_bound_is_crossed(change, failed):
    found = criteria({**IN_REGIME, **change}, REGIME)
    assert {c.name for c in found if not c.met} == failed


def test_criteria_need_their_systems_and_take_intervals_from_the_right_place():
    p = {"base": 0.1, "base_b": 0.2}
    joint = {"base": np.array([0.1, 0.2, 0.3]), "base_b": np.array([0.3, 0.2, 0.4])}
    found = _by_name(criteria(p, REGIME, joint, {"base": (0.05, 0.15)}))
    assert set(found) == {"base_A", "base_B", "base_gap"}  # no GRPO, MoA, cascade
    assert (found["base_A"].lo, found["base_A"].hi) == (0.05, 0.15)  # its own interval
    assert found["base_B"].lo is None  # none given
    gap = percentile_interval(np.abs(joint["base"] - joint["base_b"]))
    assert (found["base_gap"].lo, found["base_gap"].hi) == pytest.approx(gap)


def test_ceilings_say_what_this_world_cannot_show():
    # a world outside the regime: GRPO near the top, MoA gaining much
    today = {c.key: c for c in ceilings({"grpo": 0.873, "base": 0.499, "moa": 0.76}, REGIME)}
    assert today["agon_over_grpo"].ceiling == pytest.approx(1 / 0.873)
    assert today["agon_over_grpo"].verdict == "cannot be shown in this world"
    assert today["agon_gain_over_moa_gain"].ceiling == pytest.approx(0.501 / 0.261)
    assert today["agon_gain_over_moa_gain"].verdict == "cannot be shown in this world"
    assert today[DIFFERENCE].ceiling == pytest.approx(0.501 - 8 * 0.261)
    assert today[DIFFERENCE].verdict == "cannot be shown in this world"
    new = {c.key: c for c in ceilings({"grpo": 0.3, "base": 0.1, "moa": 0.11}, REGIME)}
    assert {c.verdict for c in new.values()} == {"representable"}
    flat = {c.key: c for c in ceilings({"base": 0.1, "moa": 0.1}, REGIME)}
    assert flat["agon_gain_over_moa_gain"].ceiling is None
    assert flat["agon_gain_over_moa_gain"].verdict.startswith("not defined")
    # k times a gain of 0 (or a loss) is no bar: the difference form says nothing there
    assert flat[DIFFERENCE].ceiling is None
    assert flat[DIFFERENCE].verdict.startswith("not meaningful: MoA's gain over base is +0.0")


def test_ceilings_over_either_grpo_model_and_the_stronger():
    """agon / grpo_b's ceiling is 1 / grpo_b, agon / max(grpo, grpo_b)'s 1 / the larger, each
    read against the paper's doubling over GRPO; none without its denominators."""
    claim = REGIME["claims"]["agon_over_grpo"]
    found = {c.key: c for c in ceilings({"grpo": 0.3, "grpo_b": 0.6}, REGIME)}
    assert found["agon_over_grpo"].ceiling == pytest.approx(1 / 0.3)
    assert found["agon_over_grpo_b"].ceiling == pytest.approx(1 / 0.6)
    assert found["agon_over_max_grpo"].ceiling == pytest.approx(1 / 0.6)
    assert {found[k].claim for k in found} == {claim}
    assert found["agon_over_grpo"].verdict == "representable"  # 3.33 >= 2
    for key in ("agon_over_grpo_b", "agon_over_max_grpo"):  # 1.67 < 2
        assert found[key].verdict == "cannot be shown in this world"
    swapped = {c.key: c for c in ceilings({"grpo": 0.6, "grpo_b": 0.3}, REGIME)}
    assert swapped["agon_over_max_grpo"].ceiling == pytest.approx(1 / 0.6)
    assert {c.key for c in ceilings({"grpo": 0.3}, REGIME)} == {"agon_over_grpo"}
    zero = {c.key: c for c in ceilings({"grpo": 0.0, "grpo_b": 0.0}, REGIME)}
    assert zero["agon_over_max_grpo"].ceiling == float("inf")


def test_the_claim_is_read_against_the_interval():
    assert claim_reading(0.58, 1.35, 2.0).startswith("excluded")  # a doubling ruled out
    assert claim_reading(1.5, 2.6, 2.0).startswith("neither")
    assert claim_reading(2.0, 2.6, 2.0).startswith("shown")
    assert claim_reading(-0.246, 0.319, 0.0).startswith("neither")  # the difference form
    assert claim_reading(None, None, 2.0) == ""


def test_the_regimes_grpo_budget_and_snapshot_changes():
    cfg = validate_config(
        {
            "families": [{"name": "f", "model_a": {"model": "a"}, "model_b": {"model": "b"}}],
            "tasks": [{"name": "arith"}],
            "methods": ["base"],
            "train": {"steps": 40},
            "agon": {"num_reads": 2},
        }
    )
    assert planned_grpo_steps(cfg) == 60  # 20 drafting steps + 20 x 2 reads, per model
    cfg["train"]["steps"] = 41  # A drafts 21 times and reads 20 times: 21 + 40
    assert planned_grpo_steps(cfg) == 20 + 21 * 2
    cfg["agon"]["role_schedule"] = "both"
    assert planned_grpo_steps(cfg) == 62  # ceil(41 / 2 x 3)
    cfg["train"]["budget"]["max_steps_factor"] = 1.0
    assert planned_grpo_steps(cfg) == 41  # the cap
    cfg["regime"] = {"grpo_steps": 7}
    assert regime_changes(cfg, "train") == {"train": {"steps": 7, "budget": {"match": "steps"}}}
    assert regime_changes(cfg, "eval") == {"eval": {"split": "validation_hard"}}


def test_readers_note_follows_the_reader_targets():
    cfg = {"families": [{"toy": True}], "toy": {"reader": {}}}
    assert "already taught to read" in readers_note(cfg)
    cfg["toy"]["reader"]["targets"] = "own"
    assert "untrained readers by construction" in readers_note(cfg)
    cfg["toy"]["reader"] |= {"targets": "follow", "follow": 0.3}
    assert "is follow (0.3)" in readers_note(cfg) and "reading_possible" in readers_note(cfg)
    assert readers_note({"families": [{"toy": False}]}) is None


# ----------------------------------------------------------------------------- table 1


def test_table1_has_the_regime_section_recounted_from_samples(tmp_path):
    cfg = make_config(tmp_path / "results", seeds=(0, 1, 2))
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    truth = write_synthetic(cfg, layout)
    build_report(cfg, layout)
    (r,) = read_csv(layout.table_files("table1").csv)
    x = {s: rate_matrix(truth[("fam1", "arith", s)]) for s in truth_systems(truth)}
    p = {s: float(m.mean()) for s, m in x.items()}
    n_boot = cfg["eval"]["bootstrap"]

    expected = {c.name: c for c in criteria(p, REGIME)}
    for name, c in expected.items():
        assert float(r[f"regime_{name}"]) == pytest.approx(c.value, abs=1e-9)
        assert (r[f"regime_{name}_met"] == "True") == c.met
    # a single system's interval is its column's; a difference's from one paired draw
    assert r["regime_base_A_lo"] == r["base_pass@1_lo"]
    names = [s for s in REGIME_SYSTEMS if s in x]
    reps = dict(zip(names, _paired([x[s] for s in names], n_boot, RNG["regime"])))
    lo, hi = percentile_interval(reps["grpo"] - reps["base"])
    assert (float(r["regime_grpo_A_gain_lo"]), float(r["regime_grpo_A_gain_hi"])) == (
        pytest.approx((lo, hi))
    )
    assert (r["regime_met"] == "True") == all(c.met for c in expected.values())

    # the ceilings, right after each ratio's columns
    cols = list(r)
    i = cols.index("agon_over_grpo_note")
    assert cols[i + 1 : i + 4] == [f"agon_over_grpo_{k}" for k in ("ceiling", "claim", "verdict")]
    assert float(r["agon_over_grpo_ceiling"]) == pytest.approx(1 / p["grpo"])
    assert float(r["agon_gain_over_moa_gain_ceiling"]) == pytest.approx(
        (1 - p["base"]) / (p["moa"] - p["base"])
    )
    # "eight times" in difference form, with its paired interval
    d = (p["agon"] - p["base"]) - 8 * (p["moa"] - p["base"])
    assert float(r[DIFFERENCE]) == pytest.approx(d, abs=1e-9)
    agon, moa, base = _paired([x["agon"], x["moa"], x["base"]], n_boot, RNG["eight_times"])
    lo, hi = percentile_interval((agon - base) - 8 * (moa - base))
    assert (float(r[f"{DIFFERENCE}_lo"]), float(r[f"{DIFFERENCE}_hi"])) == pytest.approx((lo, hi))

    md = Path(layout.table_files("table1").md).read_text()
    section = md.split("## Regime")[1]
    for name, c in expected.items():
        line = next(
            ln for ln in section.splitlines() if ln.startswith(f"| fam1 | arith | {name} |")
        )
        assert line.endswith("| yes |" if c.met else "| **no** |")
        assert f"| {100 * c.value:.1f} [" in line
    ratio = (1 - p["base"]) / (p["moa"] - p["base"])
    cell = f"(ceiling {ratio:.2f})"
    assert cell in md.split("## Each model alone")[0]
    verdict = "cannot be shown in this world" if ratio < 8 else "representable"
    assert f"| {ratio:.2f} | 8 | {verdict} |" in section
    # the difference form's interval read against its claim (at least 0), in the last column
    diff = next(ln for ln in section.splitlines() if "(agon-base) - 8 (moa-base)" in ln)
    assert claim_reading(lo, hi, 0.0) and diff.endswith(f"| {claim_reading(lo, hi, 0.0)} |")


def test_table1_reads_every_grpo_ratio_against_its_ceiling_and_the_claim(tmp_path, monkeypatch):
    """agon / grpo_b and agon / max(grpo, grpo_b) in table 1's regime section as agon / grpo
    is: the ceiling, claim and verdict columns right after each ratio's, a line with the
    interval read against the claim; B's GRPO model strong enough that a doubling over it, and
    over the stronger model, cannot be shown, which the comparisons table says."""
    import report_helpers

    monkeypatch.setitem(report_helpers.RATES, "grpo_b", 0.6)  # 1 / 0.6 < 2
    cfg = make_config(tmp_path / "results", seeds=(0, 1), methods=["base", "moa", "grpo", "agon"])
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    truth = write_synthetic(cfg, layout, n_problems=40)
    build_report(cfg, layout)
    (r,) = read_csv(layout.table_files("table1").csv)
    x = {s: rate_matrix(truth[("fam1", "arith", s)]) for s in ("agon", "grpo", "grpo_b")}
    p = {s: float(m.mean()) for s, m in x.items()}
    n_boot, claim = cfg["eval"]["bootstrap"], REGIME["claims"]["agon_over_grpo"]
    md = Path(layout.table_files("table1").md).read_text()
    section = md.split("## Regime")[1]
    ratios = [k for k in r if k.startswith("agon_over_") and k.endswith("_note")]
    assert ratios == [f"agon_over_{d}_note" for d in ("grpo", "grpo_b", "max_grpo")]
    cols = list(r)
    for key, title, over in (
        ("agon_over_grpo", "agon / grpo", ("grpo",)),
        ("agon_over_grpo_b", "agon / grpo_b", ("grpo_b",)),
        ("agon_over_max_grpo", "agon / max(grpo, grpo_b)", ("grpo", "grpo_b")),
    ):
        i = cols.index(f"{key}_note")
        assert cols[i + 1 : i + 4] == [f"{key}_{k}" for k in ("ceiling", "claim", "verdict")]
        top = 1 / max(p[s] for s in over)
        assert float(r[f"{key}_ceiling"]) == pytest.approx(top)
        assert float(r[f"{key}_claim"]) == claim
        verdict = "cannot be shown in this world" if top < claim else "representable"
        assert r[f"{key}_verdict"] == verdict
        reps = _paired([x["agon"], *(x[s] for s in over)], n_boot, RNG[key])
        lo, hi = percentile_interval(reps[0] / reps[1:].max(axis=0))
        assert (float(r[f"{key}_lo"]), float(r[f"{key}_hi"])) == pytest.approx((lo, hi))
        line = next(
            ln for ln in section.splitlines() if ln.startswith(f"| fam1 | arith | {title} |")
        )
        reading = claim_reading(lo, hi, claim)
        assert reading and line.endswith(f"| {top:.2f} | {claim:g} | {verdict} | {reading} |")
    assert r["agon_over_grpo_b_verdict"] == r["agon_over_max_grpo_verdict"] != "representable"
    comparisons = md.split("## Comparisons")[1].split("## ")[0]
    for title in ("agon / grpo_b", "agon / max(grpo, grpo_b)"):
        line = next(ln for ln in comparisons.splitlines() if f"| {title} |" in ln)
        assert "*cannot be shown in this world* (note" in line
        assert f"fam1/arith, {title}: cannot be shown in this world: the paper claims 2" in md


def truth_systems(truth):
    return sorted({s for (_, _, s) in truth})


def _paired(mats, n_boot, seed):
    shared = len({np.atleast_2d(m).shape[0] for m in mats}) == 1
    return two_level_bootstrap(mats, n_boot=n_boot, seed=seed, shared_seeds=shared)


# ----------------------------------------------------------------------------- results/regime.csv


def _regime_tree(tmp_path, rates, audits=None):
    """A regime tree of a toy family on arith: each regime system's evaluations at its seeds
    (pass@1 near ``rates``; with ``audits``, each summary carries its system's audit counts,
    0 where it names none) and GRPO's runs; (config, layout, {system: {seed: results}})."""
    cfg = make_config(tmp_path / "results", seeds=(0, 1), methods=["base", "moa", "grpo"])
    cfg["families"][0]["toy"] = True
    layout = Layout(cfg["out_dir"])
    rng, truth = random.Random(0), {}
    for s in REGIME_SYSTEMS:
        for seed in eval_seeds(s, cfg["seeds"]):
            d = Path(layout.regime_eval_dir("fam1", "arith", s, seed))
            truth.setdefault(s, {})[seed] = _write_eval(d, rng, rates[s], 40, 4, True, seed)
            if audits is not None:
                summary = json.loads((d / "summary.json").read_text())
                full = dict.fromkeys(KEYS, 0) | audits.get(s, {})
                (d / "summary.json").write_text(json.dumps(summary | {"audit": full}))
    for seed in cfg["seeds"]:
        run = Path(layout.regime_train_summary("fam1", "arith", "grpo", seed))
        run.parent.mkdir(parents=True, exist_ok=True)
        run.write_text(json.dumps(train_summary(rng, False, seed)))
    return cfg, layout, truth


def test_regime_csv_from_the_regime_evaluations(tmp_path):
    rates = {"base": 0.1, "base_b": 0.14, "base_cascade": 0.3, "moa": 0.12}
    rates |= {"grpo": 0.25, "grpo_b": 0.5}
    cfg, layout, truth = _regime_tree(tmp_path, rates)
    written = build_regime_report(cfg, layout)
    (r,) = read_csv(layout.table_files("regime").csv)
    p = {s: float(rate_matrix(v).mean()) for s, v in truth.items()}
    assert r["split"] == "validation_hard" and r["reader_targets"] == "draft"
    assert int(r["grpo_steps"]) == planned_grpo_steps(cfg)
    for s in REGIME_SYSTEMS:
        assert float(r[f"{s}_pass@1"]) == pytest.approx(p[s], abs=1e-9)
    found = _by_name(criteria(p, REGIME))
    assert not found["base_cascade_gain"].met and not found["grpo_B"].met
    for name, c in found.items():
        assert (r[f"regime_{name}_met"] == "True") == c.met
    assert r["regime_met"] == "False"
    assert float(r["agon_over_grpo_ceiling"]) == pytest.approx(1 / p["grpo"])
    assert DIFFERENCE not in r  # no agon: no difference form
    md = written["md"][0].read_text()
    assert "before any agon run" in md and "| fam1 | arith | grpo_B |" in md
    assert "not in the regime: " in md and "grpo_B" in md.split("not in the regime: ")[1]
    assert "Readers: toy.reader.targets is draft" in md
    assert Path(layout.table_files("regime").provenance).is_file()


# ----------------------------------------------------------------------------- the gates


def _gate_row(a, b, cascade, moa):
    rates = {op: {"error_rate": 0.1, "n": 10} for op in "+-*"}
    return {
        "A": {"pass@1": a},
        "B": {"pass@1": b},
        "cascade_A_drafts_B_reads": {"pass@1": cascade},
        "moa": {"pass@1": moa},
        "op_error_rates": {"A": rates, "B": rates},
    }


GATE_CFG = {
    "gates": {"pass_range": [0.2, 0.6]},
    "models": {"A": {"mistake": {"op": "*"}}, "B": {"mistake": {"op": "-"}}},
}


def test_the_gates_read_the_regimes_criteria_not_the_ones_that_contradicted_it():
    gates = {"tasks": {"arith": _gate_row(0.1, 0.15, 0.16, 0.15)}}
    checks = check_gates(gates, GATE_CFG, REGIME)
    assert not any(k.endswith(("cascade_beats_both", "moa_at_least_better_base")) for k in checks)
    assert "arith.A.hard_pass@1_in_range" not in checks  # pass_range gives way to base_range
    regime = {k: v for k, v in checks.items() if ".regime." in k}
    assert {k.split(".")[-1] for k in regime} == {
        "base_A",
        "base_B",
        "base_gap",
        "moa_gain",
        "base_cascade_gain",
    }
    assert all(c["pass"] for c in regime.values())  # a cascade that gains little passes
    today = check_gates({"tasks": {"arith": _gate_row(0.5, 0.45, 0.76, 0.76)}}, GATE_CFG, REGIME)
    assert not today["arith.regime.base_A"]["pass"]
    assert not today["arith.regime.base_cascade_gain"]["pass"]
    # a world without a regime section (the positive control's) keeps its pass range
    control = check_gates(gates, GATE_CFG)
    assert control["arith.A.hard_pass@1_in_range"] == {
        "value": 0.1,
        "range": [0.2, 0.6],
        "pass": False,
    }
    assert not any(".regime." in k for k in control)


def test_difference_form_after_a_moa_that_loses_is_not_meaningful():
    """MoA below base: (agon - base) - 8 (moa - base) is above 0 for any Agon that does not
    lose, so its interval reads nothing of the claim; the note, the ceiling's verdict and the
    section's claim column say so (a 'shown' there once rewarded MoA's loss, not Agon)."""
    from agon.report.compare import SeedRates
    from agon.report.regime import DIFFERENCE, ceiling_lines, difference_form

    rng = np.random.default_rng(0)
    rates = {
        s: SeedRates({0: {f"p{i}": float(rng.random() < q) for i in range(60)}})
        for s, q in (("agon", 0.5), ("moa", 0.1), ("base", 0.3))
    }
    p = {s: float(np.mean(list(r.per_seed[0].values()))) for s, r in rates.items()}
    assert p["moa"] < p["base"] <= p["agon"]
    out = difference_form(p, rates, 200, 8.0)
    assert out[f"{DIFFERENCE}_lo"] > 0  # would read "shown" without the rule
    assert out[f"{DIFFERENCE}_note"].startswith("not meaningful: MoA's gain over base is -")
    row = {"family": "fam1", "task": "arith", **out}
    for c in ceilings(p, REGIME):
        row |= {f"{c.key}_ceiling": c.ceiling, f"{c.key}_claim": c.claim}
        row[f"{c.key}_verdict"] = c.verdict
    line = next(ln for ln in ceiling_lines([row], True) if "(agon-base) - 8" in ln)
    assert "shown" not in line and line.endswith("| not meaningful |")
    assert "| n/a | >= 0 | not meaningful: MoA's gain" in line


def test_difference_form_with_every_system_at_zero_is_not_meaningful():
    """Every sample of agon, MoA and base at 0 (the real tier at its sizes): each replicate of
    the difference form is 0, so it has no interval, no MDE, and no reading of the claim (not
    a 'shown' from 0 >= 0)."""
    from agon.report.compare import SeedRates
    from agon.report.regime import DIFFERENCE, difference_form

    zero = SeedRates({0: {f"p{i}": 0.0 for i in range(12)}})
    p = {"agon": 0.0, "moa": 0.0, "base": 0.0}
    out = difference_form(p, {s: zero for s in p}, 200, 8.0)
    assert out[DIFFERENCE] == 0.0 and out[f"{DIFFERENCE}_lo"] is None
    assert out[f"{DIFFERENCE}_mde"] is None
    assert out[f"{DIFFERENCE}_note"].startswith("not meaningful")  # MoA's gain is 0 too
    assert claim_reading(out[f"{DIFFERENCE}_lo"], out[f"{DIFFERENCE}_hi"], 0.0) == ""


# ----------------------------------------------------------------------------- the audit's shares


def test_share_criteria_pool_their_systems_and_a_share_of_nothing_is_not_met():
    from agon.regime import share_criteria
    from agon.stats import wilson_interval

    counts = {
        "base_cascade": {"habit_steps": 80, "habit_steps_taken": 24},
        "base": {"right": 30, "right_with_wrong_work": 1},
        "base_b": {"right": 20, "right_with_wrong_work": 2},
    }
    found = _by_name(share_criteria(counts, REGIME))
    take, luck = found["reading_possible"], found["luck_rare"]
    assert take.value == pytest.approx(0.3) and take.met and (take.min, take.max) == (0.1, 0.6)
    assert (take.lo, take.hi) == pytest.approx(wilson_interval(24, 80))
    assert luck.value == pytest.approx(3 / 50) and luck.met and luck.max == 0.1
    counts["base_cascade"]["habit_steps_taken"] = 60  # 75%: reading already learned
    counts["base"]["right_with_wrong_work"] = 9  # 22%: luck
    found = _by_name(share_criteria(counts, REGIME))
    assert not found["reading_possible"].met and not found["luck_rare"].met
    counts["base_cascade"] = {"habit_steps": 0, "habit_steps_taken": 0}
    nothing = _by_name(share_criteria(counts, REGIME))["reading_possible"]
    assert nothing.value != nothing.value and not nothing.met and nothing.lo is None
    assert share_criteria({"base": counts["base"]}, REGIME) == []  # base_b missing: not read
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and 0.2 < hi < 0.35


def test_regime_csv_reads_the_audits_in_the_evaluations_summaries(tmp_path):
    """The regime's shares come from each seed's summary.json `audit`, summed over seeds, and
    decide regime_met with the pass@1 criteria."""
    rates = {"base": 0.1, "base_b": 0.14, "base_cascade": 0.15, "moa": 0.12}
    rates |= {"grpo": 0.25, "grpo_b": 0.3}
    audits = {
        "base": {"right": 10, "right_with_wrong_work": 0},
        "base_b": {"right": 12, "right_with_wrong_work": 1},
        "base_cascade": {"habit_steps": 40, "habit_steps_taken": 2, "reads": 80},
    }
    audits["base_cascade"]["oracle_right"] = 30
    cfg, layout, _ = _regime_tree(tmp_path, rates, audits)
    written = build_regime_report(cfg, layout)
    (r,) = read_csv(layout.table_files("regime").csv)
    seeds = {s: len(eval_seeds(s, cfg["seeds"])) for s in REGIME_SYSTEMS}
    assert int(r["base_cascade_audit_habit_steps"]) == 40 * seeds["base_cascade"]
    assert float(r["regime_reading_possible"]) == pytest.approx(2 / 40)
    assert r["regime_reading_possible_met"] == "False" and r["regime_met"] == "False"
    assert float(r["regime_luck_rare"]) == pytest.approx(1 / 22)
    assert r["regime_luck_rare_met"] == "True"
    md = written["md"][0].read_text()
    assert "| fam1 | arith | reading_possible | 10.0% to 60.0% | 5.0 [" in md
    assert float(r["base_cascade_oracle"]) == pytest.approx(30 / 80)
    assert "- fam1/arith: base_cascade's drafts 37.5%." in md


def test_each_model_errs_more_than_its_rival_on_its_own_always_wrong_habit():
    """The gate reads the steps of each model's rate-1 habit on the task (its operation and
    operands), not every step of its first habit's operation: two models whose always-wrong
    toycode habits share an operation, on other operands, still tell apart."""
    from agon.toy.gates import always_wrong_habit, habit_checks
    from agon.toy.mistake import Mistake

    a = {"op": "*", "operands": [3], "arith_rate": 1.0, "code_rate": 0.0}
    a["also"] = [{"op": "-", "operands": [2, 5], "arith_rate": 0.0, "code_rate": 1.0}]
    b = {"op": "-", "operands": [4], "arith_rate": 1.0, "code_rate": 0.0}
    b["also"] = [{"op": "-", "operands": [1, 3], "arith_rate": 0.0, "code_rate": 1.0}]
    cfg = {"models": {"A": {"mistake": a}, "B": {"mistake": b}}}
    assert always_wrong_habit(Mistake.from_config(a), "code").operands == (2, 5)
    assert always_wrong_habit(Mistake.from_config(b), "arith").op == "-"
    errors = {
        "A": {"-2": [10, 10], "-5": [9, 10], "-1": [1, 10], "-3": [0, 10]},
        "B": {"-2": [1, 10], "-5": [0, 10], "-1": [10, 10], "-3": [10, 10]},
    }
    checks = habit_checks("toycode", errors, cfg)
    assert checks["toycode.A.more_errors_on_own_habit"]["value"] == [0.95, 0.05]
    assert all(c["pass"] for c in checks.values()) and len(checks) == 2
    errors["B"] |= {"-2": [10, 10], "-5": [9, 10]}  # B errs on A's habit steps as much
    assert not habit_checks("toycode", errors, cfg)["toycode.A.more_errors_on_own_habit"]["pass"]
