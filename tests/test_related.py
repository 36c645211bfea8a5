"""results/related.csv: the related methods' columns next to GRPO's and Agon's, their paired
comparisons, their compute with a teacher's tokens counted, and the compute figure."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from agon.config import ConfigError, validate_config
from agon.methods import columns_for_methods
from agon.report.related import build_related_report, related_methods
from agon.results import Layout
from tests.report_helpers import ALL_METHODS, make_config, write_synthetic

RELATED_METHODS = ["base", "base_cascade", "grpo", "grpo_cascade", "agon", "cliff"]


def _config(tmp_path: Path) -> dict:
    cfg = make_config(tmp_path / "results", methods=ALL_METHODS)
    cfg["related"] = {"methods": RELATED_METHODS}
    return validate_config(cfg)


def test_related_methods_are_checked(tmp_path):
    cfg = _config(tmp_path)
    assert related_methods(cfg) == RELATED_METHODS
    cfg["related"] = {"methods": ["grpo", "nope"]}
    with pytest.raises(ConfigError, match="related"):
        validate_config(cfg)


def test_related_table_compares_each_method_with_agon_and_counts_helper_tokens(tmp_path):
    cfg = _config(tmp_path)
    layout = Layout(cfg["out_dir"], str(tmp_path / "figures"))
    truth = write_synthetic({**cfg, "methods": RELATED_METHODS}, layout)
    written = build_related_report(cfg, layout)
    rows = list(csv.DictReader(open(layout.table_files("related").csv)))
    assert len(rows) == 1
    r = rows[0]
    for s in columns_for_methods(RELATED_METHODS):
        assert r[f"{s}_pass@1"] != "", s

    def p1(system: str) -> float:  # pass@1 recounted from the synthetic samples, over seeds
        per_seed = truth[("fam1", "arith", system)]
        means = [
            sum(sum(v) / len(v) for v in problems.values()) / len(problems)
            for problems in per_seed.values()
        ]
        return sum(means) / len(means)

    assert float(r["agon_over_cliff_cascade"]) == pytest.approx(
        p1("agon") / p1("cliff_cascade"), rel=1e-9
    )
    assert float(r["cliff_cascade_over_grpo_cascade"]) == pytest.approx(
        p1("cliff_cascade") / p1("grpo_cascade"), rel=1e-9
    )
    lo, hi = float(r["agon_over_cliff_cascade_lo"]), float(r["agon_over_cliff_cascade_hi"])
    assert lo < float(r["agon_over_cliff_cascade"]) < hi
    assert float(r["cliff_gain"]) == pytest.approx(p1("cliff") - p1("base"), abs=1e-9)
    # compute: the teacher's tokens (1000 x (seed + 1) per model, seeds 0 and 1) are counted
    assert float(r["cliff_extra_tokens"]) == pytest.approx(2 * (1000 + 2000) / 2)
    assert float(r["cliff_total_tokens"]) == pytest.approx(
        float(r["cliff_train_tokens"]) + float(r["cliff_extra_tokens"])
    )
    assert float(r["grpo_extra_tokens"]) == 0.0 and float(r["agon_extra_tokens"]) == 0.0
    md = Path(layout.table_files("related").md).read_text()
    assert "# Related methods" in md and "agon / cliff_cascade" in md
    assert "helper tokens" in md
    assert [p.name for p in written["figures"]] == ["related_compute.png", "related_compute.pdf"]
    prov = json.loads(Path(layout.table_files("related").provenance).read_text())
    assert prov["rows"] == 1 and len(prov["runs"]) == 3 * 2  # grpo, agon, cliff x 2 seeds
    # table 1 is another report: nothing of it was written
    assert not Path(layout.table_files("table1").csv).exists()


def test_schema_lists_every_method_the_related_table_can_name():
    from agon.config import config_schema
    from agon.methods import METHODS, RELATED

    items = config_schema()["properties"]["related"]["properties"]["methods"]["items"]["enum"]
    assert items == [m for m in METHODS if m not in RELATED] + list(RELATED)
    table1 = config_schema()["properties"]["methods"]["items"]["enum"]
    assert table1 == [m for m in METHODS if m not in RELATED]
