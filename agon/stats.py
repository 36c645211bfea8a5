"""pass@k and its uncertainty.

pass@k is the unbiased estimator of Chen et al. (2021, "Codex"): with n samples of which c are
correct, pass@k = 1 - C(n-c, k) / C(n, k), averaged over problems. The standard error is that of
the mean over problems; the 95% interval is a seeded percentile bootstrap over problems.

Table 1 compares trained systems, whose pass@1 also varies with the training seed:
:func:`two_level_bootstrap` resamples problems (paired across systems) and each system's seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# the first words of every note that says a number means nothing (an interval that cannot be
# stated, a bar that is no bar): the reports recognise such a note by them
NOT_MEANINGFUL = "not meaningful"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with ``n`` samples, ``c`` of them correct."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    # 1 - prod_{i=n-c+1}^{n} (1 - k/i), the numerically stable form of the binomial ratio
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def per_problem_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> np.ndarray:
    """pass@k of each problem from (n, c) pairs."""
    return np.array([pass_at_k(n, c, k) for n, c in counts], dtype=float)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (0 for a single value)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values")
    se = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else 0.0
    return float(x.mean()), se


def bootstrap_ci(
    values: Sequence[float], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, resampling problems with a seeded RNG."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def summarize(
    counts: Sequence[tuple[int, int]], ks: Sequence[int] = (1,), n_boot: int = 1000, seed: int = 0
) -> dict:
    """pass@k for each k with standard error and 95% bootstrap interval, as a flat dict.

    Keys: ``pass@{k}``, ``pass@{k}_se``, ``pass@{k}_lo``, ``pass@{k}_hi``, plus ``n_problems``
    and ``n_samples`` (total).
    """
    out: dict = {"n_problems": len(counts), "n_samples": int(sum(n for n, _ in counts))}
    for k in ks:
        vals = per_problem_pass_at_k(counts, k)
        mean, se = mean_se(vals)
        lo, hi = bootstrap_ci(vals, n_boot=n_boot, seed=seed)
        out.update({f"pass@{k}": mean, f"pass@{k}_se": se, f"pass@{k}_lo": lo, f"pass@{k}_hi": hi})
    return out


def two_level_bootstrap(
    systems: Sequence[np.ndarray | Sequence[Sequence[float]]],
    n_boot: int = 1000,
    seed: int = 0,
    shared_seeds: bool = False,
) -> np.ndarray:
    """Bootstrap replicates of each system's mean pass@1 over training seeds and problems.

    ``systems[i]`` is an (n_seeds_i, n_problems) array: system i's pass rate on each problem
    at each of its training seeds (one row for a system evaluated at one seed). Every system
    has the same problems, in the same column order. Each replicate draws n_problems problems
    with replacement, the same draw for every system (so differences and ratios are paired),
    and then, independently for each system, n_seeds_i of that system's seeds with
    replacement, and averages the system's rates over the drawn (seed, problem) pairs.

    Returns an array of shape (len(systems), n_boot). The problem draw comes first from
    ``default_rng(seed)`` with the shape :func:`bootstrap_ci` draws, so a system whose seeds
    are all alike (or that has one seed) gets :func:`bootstrap_ci`'s replicates.

    ``shared_seeds``: the systems' rows are the same training seeds, in the same order (each
    seed's runs start from that seed's base models): one seed draw serves every system, so a
    comparison pairs seed with seed as it pairs problem with problem, and what a seed shares
    across systems (its base models) cancels in their difference instead of adding to it.
    """
    mats = [np.atleast_2d(np.asarray(x, dtype=float)) for x in systems]
    if not mats:
        raise ValueError("no systems")
    n_problems = mats[0].shape[1]
    if n_problems == 0 or any(m.shape[1] != n_problems or m.shape[0] == 0 for m in mats):
        raise ValueError(
            f"every system needs >= 1 seed and the same >= 1 problems, got shapes "
            f"{[m.shape for m in mats]}"
        )
    rng = np.random.default_rng(seed)

    def weights(draws: np.ndarray, n: int) -> np.ndarray:
        """(n_boot, n): the share of each replicate's draws that fell on each index."""
        offsets = draws + n * np.arange(draws.shape[0])[:, None]
        counts = np.bincount(offsets.ravel(), minlength=draws.shape[0] * n)
        return counts.reshape(draws.shape[0], n) / draws.shape[1]

    problem_w = weights(rng.integers(0, n_problems, size=(n_boot, n_problems)), n_problems)
    if shared_seeds and len({m.shape[0] for m in mats}) != 1:
        shapes = [m.shape for m in mats]
        raise ValueError(f"shared_seeds needs the same seeds for every system, got {shapes}")
    shared_w = None  # the one seed draw of every system (shared_seeds)
    out = np.empty((len(mats), n_boot))
    for i, x in enumerate(mats):
        n_seeds = x.shape[0]
        if shared_w is not None:
            seed_w = shared_w
        else:
            seed_w = weights(rng.integers(0, n_seeds, size=(n_boot, n_seeds)), n_seeds)
            shared_w = seed_w if shared_seeds else None
        # replicate b: sum over s, p of seed_w[b, s] * x[s, p] * problem_w[b, p]
        out[i] = ((seed_w @ x) * problem_w).sum(axis=1)
    return out


# 80% power at a two-sided 5% level: an effect this many standard errors from 0 is detected
# four times in five (z of 0.975 plus z of 0.80)
MDE_Z = 1.959964 + 0.841621


def minimal_detectable_effect(replicates: np.ndarray) -> float:
    """The smallest true effect a comparison detects with 80% power at the 5% level:
    :data:`MDE_Z` times its bootstrap standard error (the replicates' standard deviation)."""
    x = np.asarray(replicates, dtype=float)
    x = x[np.isfinite(x)]
    return float(MDE_Z * np.std(x, ddof=1)) if x.size > 1 else float("nan")


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap ``replicates`` (NaN replicates dropped)."""
    x = np.asarray(replicates, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        raise ValueError("no replicates")
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(x, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def wilson_interval(part: int, whole: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's 95% score interval of the share ``part / whole`` (counts taken as independent
    draws; ``whole`` > 0)."""
    if whole <= 0:
        raise ValueError(f"a share of nothing: whole={whole}")
    share = part / whole
    den = 1 + z * z / whole
    mid = (share + z * z / (2 * whole)) / den
    half = z * math.sqrt(share * (1 - share) / whole + z * z / (4 * whole * whole)) / den
    return max(0.0, mid - half), min(1.0, mid + half)
