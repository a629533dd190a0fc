"""The one home of measured-rate intervals (helpdp.intervals), checked by hand and by
simulation."""

import math

import numpy as np

from helpdp.intervals import mean_ci, wilson


def test_wilson_by_hand():
    # 3 of 4: centre (0.75 + 1.96^2/8) / (1 + 1.96^2/4), half 1.96 sqrt(3/64 + 1.96^2/64) / d
    d = 1 + 1.96**2 / 4
    centre = (0.75 + 1.96**2 / 8) / d
    half = 1.96 * math.sqrt(0.75 * 0.25 / 4 + 1.96**2 / 64) / d
    assert np.allclose(wilson(3, 4), (centre - half, centre + half))
    lo, hi = wilson(0, 10)  # no success: [0, 0.278], not the Wald interval's [0, 0]
    assert lo == 0.0 and abs(hi - 0.2775) < 1e-3
    assert all(math.isnan(x) for x in wilson(0, 0))


def test_wilson_covers_by_simulation():
    rng = np.random.default_rng(0)
    p, n, reps = 0.1, 30, 4000
    k = rng.binomial(n, p, reps)
    inside = [lo <= p <= hi for lo, hi in (wilson(x, n) for x in k)]
    assert 0.93 <= np.mean(inside) <= 0.99  # Wald at n=30, p=0.1 covers about 0.80


def test_mean_ci():
    m, lo, hi = mean_ci([1.0, 0.0, 1.0, 1.0])
    half = 1.96 * np.std([1.0, 0.0, 1.0, 1.0], ddof=1) / 2
    assert (m, lo, hi) == (0.75, 0.75 - half, 0.75 + half)
    assert math.isinf(mean_ci([0.5])[2]) and math.isnan(mean_ci([])[0])
