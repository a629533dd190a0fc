"""Intervals of measured rates and means, in one place: what the evaluation, the
collector's candidate design, the fitted agent's check and the benchmarks report beside
a success rate or a paired difference. (Off-policy estimates have their own, across
tasks: :mod:`helpdp.ope`.)"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

__all__ = ["detectable_difference", "mean_ci", "pairs_needed", "wilson"]


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
