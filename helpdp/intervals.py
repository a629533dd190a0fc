"""Intervals of measured rates and means, in one place: what the evaluation, the
collector's candidate design, the fitted agent's check and the benchmarks report beside
a success rate or a paired difference. (Off-policy estimates have their own, across
tasks: :mod:`helpdp.ope`.)"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["mean_ci", "wilson"]


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
