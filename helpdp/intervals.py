"""Intervals of measured rates and means, in one place: what the evaluation, the
collector's candidate design, the fitted agent's check and the benchmarks report beside
a success rate or a paired difference. (Off-policy estimates have their own, across
tasks: :mod:`helpdp.ope`.)"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

__all__ = [
    "MIN_TASKS_DIFFER",
    "cluster_ci",
    "design_effect",
    "detectable_difference",
    "detectable_difference_tasks",
    "in_range",
    "mean_ci",
    "pairs_needed",
    "task_interval",
    "task_power",
    "task_shares",
    "tasks_needed",
    "wilson",
]


def wilson(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate ``k / n`` (``z``: 1.96 for 95%),
    clipped to [0, 1]; ``(nan, nan)`` without episodes. Unlike the normal (Wald)
    interval it stays inside [0, 1] and keeps its width at 0 or n successes.

    >>> [round(x, 3) for x in wilson(3, 4)]
    [0.301, 0.954]
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    lo = 0.0 if k <= 0 else max(0.0, centre - half)  # exact at the ends (no rounding)
    return lo, 1.0 if k >= n else min(1.0, centre + half)


def mean_ci(x, z: float = 1.96) -> tuple[float, float, float]:
    """Mean of ``x`` (e.g. paired differences, one per (task, seed) pair) and its normal
    interval ``(mean, lo, hi)``: ``(nan, nan, nan)`` when empty, an infinite half-width
    from one value."""
    d = np.asarray(x, np.float64)
    if len(d) == 0:
        return float("nan"), float("nan"), float("nan")
    m = float(d.mean())
    half = z * float(d.std(ddof=1)) / math.sqrt(len(d)) if len(d) > 1 else float("inf")
    return m, m - half, m + half


def _z_sum(power: float, alpha: float) -> float:
    """z of the two-sided ``alpha`` test plus z of ``power``: 2.80 at 5% and 80%."""
    return NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)


def detectable_difference(sd: float, n: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """The smallest true mean difference that ``n`` independent pairs with standard
    deviation ``sd`` show at two-sided level ``alpha`` with probability ``power`` (the
    normal approximation): ``(z_{1-alpha/2} + z_power) sd / sqrt(n)``; inf without pairs.

    >>> round(detectable_difference(0.5, 100), 4)
    0.1401
    """
    return _z_sum(power, alpha) * float(sd) / math.sqrt(n) if n > 0 else float("inf")


def pairs_needed(sd: float, delta: float, power: float = 0.8, alpha: float = 0.05) -> int:
    """Independent pairs with standard deviation ``sd`` that show a true mean difference
    ``delta`` with probability ``power`` (the inverse of :func:`detectable_difference`).

    >>> pairs_needed(0.5, 0.05)
    785
    """
    return int(math.ceil((_z_sum(power, alpha) * float(sd) / float(delta)) ** 2))


# ---------------------------------------------------------------------------
# tasks as the unit: a statement about tasks like these, not about these tasks' seeds
# ---------------------------------------------------------------------------

#: fewer tasks than this in which two policies differ at all, and no statement about
#: other tasks is made (the interval is still printed, marked)
MIN_TASKS_DIFFER = 5


def _cr2(x, clusters) -> tuple[float, float, float, int]:
    """``(mean, CR2 variance of the mean, Bell-McCaffrey df, G)`` of ``x`` clustered by
    ``clusters`` (:func:`cluster_ci`); variance and df NaN below two clusters."""
    d = np.asarray(x, np.float64)
    codes, n_g = np.unique(np.asarray(clusters), return_inverse=True, return_counts=True)[1:]
    m, n, g = float(d.mean()), len(d), len(n_g)
    if g < 2:
        return m, float("nan"), float("nan"), g
    n_g = n_g.astype(np.float64)
    s_g = np.bincount(codes, weights=d - m, minlength=g)  # the clusters' residual sums
    a = 1.0 / ((1.0 - n_g / n) * n * n)
    # Bell-McCaffrey: V's eigenvalues under an iid working model are those of
    # B = D^1/2 C D^1/2, C_gh = n_g delta_gh - n_g n_h / N, D = diag(a); df = tr(B)^2 /
    # sum B_gh^2, both in closed form (O(G), not the G x G matrix: thousands of tasks)
    tr = float((a * (n_g - n_g * n_g / n)).sum())
    ss = float((a * a * (n_g**2 - 2 * n_g**3 / n)).sum() + (a * n_g * n_g).sum() ** 2 / n**2)
    df = round(tr * tr / ss, 9)  # G - 1 exactly for equal sizes
    return m, float((a * s_g * s_g).sum()), df, g


def cluster_ci(x, clusters, level: float = 0.95) -> tuple[float, float, float, float, int]:
    """The mean of ``x`` (one value per pair) and its interval with ``clusters`` (e.g.
    the task of each pair) as the unit: ``(mean, lo, hi, df, G)``.

    The variance is the cluster-robust one with the CR2 small-cluster correction (Bell and
    McCaffrey 2002): for a mean, each cluster's residual sum ``S_g`` is scaled by
    ``1 / sqrt(1 - n_g / N)``, so ``V = sum_g S_g^2 / (1 - n_g / N) / N^2``, and the
    interval takes Student-t with the Bell-McCaffrey degrees of freedom (Imbens and
    Kolesar 2016), which are ``G - 1`` for clusters of equal size (then the interval is
    exactly the t interval of the clusters' means) and fewer for unequal ones. This is
    the choice of Cameron and Miller's (2015) guide and of Pustejovsky and Tipton (2018)
    for few clusters; its coverage at G = 3, 6, 12 and 30 is checked by simulation in
    ``tests/test_intervals.py`` and ``docs/ope.md``. Below two clusters the interval is
    infinite; a constant ``x`` has width 0.

    >>> m, lo, hi, df, g = cluster_ci([1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 2, 2])
    >>> round(m, 4), round(hi - m, 4), round(df, 6), g
    (0.6667, 1.4342, 2.0, 3)
    """
    from scipy.stats import t as student_t

    if len(np.asarray(x)) == 0:
        return float("nan"), float("nan"), float("nan"), float("nan"), 0
    m, var, df, g = _cr2(x, clusters)
    if g < 2:
        return m, -math.inf, math.inf, float("nan"), g
    half = float(student_t.ppf(0.5 + level / 2, df) * math.sqrt(var))
    return m, m - half, m + half, df, g


def task_interval(vals, groups, level: float) -> tuple[float, float, float, int]:
    """``(mean, lo, hi, tasks)`` of per-task values (the jackknife pseudo-values of
    :mod:`helpdp.ope`) with their jackknife ``groups`` as the unit: :func:`cluster_ci`
    over the finite values (exactly :func:`helpdp._src.ope.t_interval` with one task per
    group; the t interval of the groups' means for groups of equal size). Values pooled
    across folds: label the groups per fold (``fold:group``); no interval below two
    tasks (NaN)."""
    x = np.asarray(vals, np.float64)
    ok = np.isfinite(x)
    k = int(ok.sum())
    if k < 2:
        return (float(x[ok].mean()) if k else float("nan")), float("nan"), float("nan"), k
    m, lo, hi, _, n_g = cluster_ci(x[ok], np.asarray(groups)[ok], level)
    if n_g < 2:
        lo = hi = float("nan")
    return float(m), float(lo), float(hi), k


def design_effect(x, clusters) -> float:
    """The cluster-robust variance of the mean over the variance that counts the pairs as
    independent: how many times fewer effective pairs the clustering leaves (NaN where
    either is 0)."""
    d = np.asarray(x, np.float64)
    if len(d) < 2 or float(d.var(ddof=1)) == 0.0:
        return float("nan")
    _, var, _, g = _cr2(d, clusters)
    return float(var / (d.var(ddof=1) / len(d))) if g >= 2 else float("nan")


def task_shares(x, clusters) -> dict:
    """Which clusters carry a difference: ``{"tasks": G, "differ": clusters with a
    nonzero value, "sums": {cluster: sum of x}, "top_share": the largest share of
    ``sum |cluster sum|`` one cluster carries (NaN when every sum is 0)}``."""
    d = np.asarray(x, np.float64)
    c = np.asarray(clusters)
    keys, codes = np.unique(c, return_inverse=True)
    sums = np.bincount(codes, weights=d, minlength=len(keys))
    nz = np.bincount(codes, weights=(d != 0).astype(np.float64), minlength=len(keys))
    total = float(np.abs(sums).sum())
    return {
        "tasks": len(keys),
        "differ": int((nz > 0).sum()),
        "sums": {k.item() if hasattr(k, "item") else k: float(s) for k, s in zip(keys, sums)},
        "top_share": float(np.abs(sums).max() / total) if total > 0 else float("nan"),
    }


def _t_sum(power: float, alpha: float, df: float) -> float:
    from scipy.stats import t as student_t

    return float(student_t.ppf(1 - alpha / 2, df) + student_t.ppf(power, df))


def detectable_difference_tasks(
    sd_task: float, tasks: int, power: float = 0.8, alpha: float = 0.05
) -> float:
    """The smallest true mean difference that ``tasks`` tasks show at two-sided level
    ``alpha`` with probability ``power``, with tasks as the unit: ``(t_{1-alpha/2, G-1} +
    t_{power, G-1}) sd_task / sqrt(G)``, where ``sd_task`` is the standard deviation of
    the tasks' mean differences (between-task spread plus each task's own noise at its
    pairs); inf below two tasks.

    >>> round(detectable_difference_tasks(0.2, 30), 4)
    0.1059
    """
    if tasks < 2:
        return float("inf")
    return _t_sum(power, alpha, tasks - 1) * float(sd_task) / math.sqrt(tasks)


def tasks_needed(
    sd_task: float, delta: float, power: float = 0.8, alpha: float = 0.05, most: int = 100_000
) -> int:
    """Tasks (each with as many pairs as those behind ``sd_task``) that show a true mean
    difference ``delta`` with probability ``power``, tasks as the unit (the inverse of
    :func:`detectable_difference_tasks`; ``most`` + 1 where even ``most`` do not).

    >>> tasks_needed(0.2, 0.1059)
    30
    """
    if not sd_task > 0:
        return 2
    lo, hi = 2, most + 1
    while lo < hi:  # the detectable difference falls with the tasks
        mid = (lo + hi) // 2
        if detectable_difference_tasks(sd_task, mid, power, alpha) <= delta:
            hi = mid
        else:
            lo = mid + 1
    return lo


def task_power(x, clusters, delta: float = 0.05, power: float = 0.8, alpha: float = 0.05):
    """Task-level power of paired differences ``x`` clustered by ``clusters``: ``{"sd_task":
    the standard deviation of the clusters' mean differences, "detectable": the difference
    these tasks show with ``power``, "tasks_for_delta": the tasks ``delta`` needs}``."""
    d = cluster_means(x, clusters)
    g = len(d)
    sd = float(np.std(d, ddof=1)) if g > 1 else float("nan")
    return {
        "sd_task": sd,
        "detectable": detectable_difference_tasks(sd, g, power, alpha)
        if g > 1 and sd > 0
        else float("nan"),
        "tasks_for_delta": tasks_needed(sd, delta, power, alpha) if g > 1 and sd > 0 else None,
    }


def cluster_means(x, clusters) -> np.ndarray:
    """Each cluster's mean of ``x`` (in the order of the sorted cluster keys)."""
    d = np.asarray(x, np.float64)
    codes, n_g = np.unique(np.asarray(clusters), return_inverse=True, return_counts=True)[1:]
    return np.bincount(codes, weights=d, minlength=len(n_g)) / n_g


def in_range(quantity: str, lo: float, hi: float) -> tuple[float, float]:
    """An interval cut to the quantity's range (SR in [0, 1], dSR in [-1, 1], calls at
    least 0): the true value lies there, so the cut interval covers whenever the uncut
    one does (a t or bootstrap interval of an estimator that can leave the range, such
    as dr's, otherwise prints rates below 0)."""
    if quantity == "SR":
        return max(lo, 0.0), min(hi, 1.0)
    if quantity == "dSR":
        return max(lo, -1.0), min(hi, 1.0)
    if quantity.startswith("U"):
        return max(lo, 0.0), hi
    return lo, hi
