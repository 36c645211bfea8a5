"""pass@k, standard error and the bootstrap interval against values computed by hand."""

import math

import numpy as np
import pytest

from agon.stats import bootstrap_ci, mean_se, pass_at_k, summarize


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (5, 2, 1, 2 / 5),
        (5, 2, 2, 1 - math.comb(3, 2) / math.comb(5, 2)),  # 1 - 3/10 = 0.7
        (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5)),  # 1 - 21/252
        (4, 0, 2, 0.0),
        (4, 4, 3, 1.0),
        (4, 3, 2, 1.0),  # n - c < k: every draw of 2 holds a correct one
        (1, 1, 1, 1.0),
    ],
)
def test_pass_at_k_by_hand(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_rejects_bad_input():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_mean_and_standard_error_by_hand():
    # values 0, 1, 1, 0.5: mean 0.625; sample var = ((.625)^2 + 2(.375)^2 + (.125)^2)/3
    mean, se = mean_se([0, 1, 1, 0.5])
    var = (0.625**2 + 2 * 0.375**2 + 0.125**2) / 3
    assert mean == pytest.approx(0.625)
    assert se == pytest.approx(math.sqrt(var / 4))
    assert mean_se([0.3]) == (0.3, 0.0)


def test_bootstrap_is_seeded_and_sane():
    vals = np.r_[np.ones(30), np.zeros(70)]
    lo, hi = bootstrap_ci(vals, n_boot=2000, seed=1)
    assert (lo, hi) == bootstrap_ci(vals, n_boot=2000, seed=1)
    assert lo < 0.3 < hi
    # normal approximation: 0.3 +- 1.96 * sqrt(.3 * .7 / 100) = [0.21, 0.39]
    assert lo == pytest.approx(0.21, abs=0.025) and hi == pytest.approx(0.39, abs=0.025)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)


def test_summarize_counts():
    counts = [(4, 0), (4, 2), (4, 4)]
    out = summarize(counts, ks=(1, 2), n_boot=500)
    assert out["n_problems"] == 3 and out["n_samples"] == 12
    assert out["pass@1"] == pytest.approx((0 + 0.5 + 1) / 3)
    assert out["pass@2"] == pytest.approx((0 + (1 - 1 / 6) + 1) / 3)
    assert out["pass@1_lo"] <= out["pass@1"] <= out["pass@1_hi"]
