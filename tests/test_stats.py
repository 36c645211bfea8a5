"""pass@k, standard error and the bootstrap intervals against values computed by hand."""

import math

import numpy as np
import pytest

from agon.stats import (
    bootstrap_ci,
    mean_se,
    pass_at_k,
    percentile_interval,
    summarize,
    two_level_bootstrap,
)


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


def test_two_level_bootstrap_one_problem_is_the_seed_spread():
    """One problem: only the seeds vary. Each replicate is the mean of 3 seeds drawn with
    replacement from {lo, mid, hi}; the extremes each come up with probability 1/27 > 2.5%,
    so the 95% interval is [lo, hi]; the replicates' sd is that of a mean of 3 draws."""
    rates = [0.2, 0.5, 0.8]
    reps = two_level_bootstrap([np.array(rates)[:, None]], n_boot=20_000, seed=0)[0]
    assert percentile_interval(reps) == pytest.approx((min(rates), max(rates)))
    population_var = np.var(rates)  # ddof=0: the variance of one draw
    assert reps.mean() == pytest.approx(np.mean(rates), abs=0.005)
    assert reps.std() == pytest.approx(math.sqrt(population_var / len(rates)), rel=0.03)
    # the interval widens with the spread of the seeds, and is a point without one
    narrow = two_level_bootstrap([np.array([0.4, 0.5, 0.6])[:, None]], n_boot=2000, seed=0)
    same = two_level_bootstrap([np.full((3, 1), 0.5)], n_boot=2000, seed=0)
    width = lambda r: np.subtract(*percentile_interval(r)[::-1])  # noqa: E731
    assert width(same[0]) == 0 < width(narrow[0]) < width(reps)


def test_two_level_bootstrap_with_identical_seeds_is_the_problem_bootstrap():
    """Seeds that agree (or one seed) add nothing: the replicates are the problem bootstrap's,
    draw for draw, and so is the interval."""
    vals = np.random.default_rng(5).random(40)
    one = two_level_bootstrap([vals[None, :]], n_boot=800, seed=3)[0]
    three = two_level_bootstrap([np.vstack([vals, vals, vals])], n_boot=800, seed=3)[0]
    idx = np.random.default_rng(3).integers(0, vals.size, size=(800, vals.size))
    assert one == pytest.approx(vals[idx].mean(axis=1)) and three == pytest.approx(one)
    assert percentile_interval(three) == pytest.approx(bootstrap_ci(vals, n_boot=800, seed=3))


def test_two_level_bootstrap_pairs_problems_and_resamples_seeds_per_system():
    rng = np.random.default_rng(1)
    a = rng.random((3, 25))
    b = a + 0.1  # the same problems, 0.1 better at every seed
    reps = two_level_bootstrap([a, a, b], n_boot=500, seed=4)
    assert reps.shape == (3, 500)
    # the same problem draw for all: the seeds' draws differ, so a != a, but a constant shift
    # of every (seed, problem) moves every replicate by exactly that shift
    assert not np.allclose(reps[0], reps[1])
    shift = two_level_bootstrap([a, a + 0.1], n_boot=500, seed=4)
    assert shift[1] - reps[1] == pytest.approx(np.full(500, 0.1))
    # the point the replicates scatter around is the mean over seeds and problems
    assert reps[2].mean() == pytest.approx(b.mean(), abs=0.02)
    # seeded: the same replicates again
    assert np.array_equal(reps, two_level_bootstrap([a, a, b], n_boot=500, seed=4))


def test_two_level_bootstrap_checks_shapes():
    with pytest.raises(ValueError, match="same"):
        two_level_bootstrap([np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(ValueError):
        two_level_bootstrap([])
    with pytest.raises(ValueError):
        two_level_bootstrap([np.zeros((0, 3))])


def test_percentile_interval_drops_undefined_replicates():
    assert percentile_interval(np.r_[np.linspace(0, 1, 101), np.nan]) == pytest.approx(
        (0.025, 0.975)
    )
    with pytest.raises(ValueError):
        percentile_interval(np.array([np.nan]))


def test_shared_seeds_pair_a_seed_effect_away():
    """Two systems whose per-seed rates differ by the same seed effect (each seed's base
    models lift both alike) and by a constant: paired by seed, their difference has no seed
    variance; resampled apart, it has."""
    from agon.stats import minimal_detectable_effect, two_level_bootstrap

    rng = np.random.default_rng(0)
    seed_effect = np.array([[-0.2], [0.0], [0.2]])
    base = np.clip(0.5 + seed_effect + 0.05 * rng.standard_normal((3, 40)), 0, 1)
    a, b = base + 0.1, base
    paired = two_level_bootstrap([a, b], n_boot=400, seed=1, shared_seeds=True)
    apart = two_level_bootstrap([a, b], n_boot=400, seed=1)
    assert np.allclose(paired[0] - paired[1], 0.1)
    assert np.std(apart[0] - apart[1]) > 0.05
    assert minimal_detectable_effect(paired[0] - paired[1]) < 1e-9
    assert minimal_detectable_effect(apart[0] - apart[1]) == pytest.approx(
        2.8016 * np.std(apart[0] - apart[1], ddof=1), rel=1e-3
    )
    with pytest.raises(ValueError, match="same seeds"):
        two_level_bootstrap([a, b[:2]], shared_seeds=True)
