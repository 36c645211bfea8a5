"""pass@k and its uncertainty.

pass@k is the unbiased estimator of Chen et al. (2021, "Codex"): with n samples of which c are
correct, pass@k = 1 - C(n-c, k) / C(n, k), averaged over problems. The standard error is that of
the mean over problems; the 95% interval is a seeded percentile bootstrap over problems.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
