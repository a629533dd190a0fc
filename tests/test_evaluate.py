"""helpdp.evaluate: paired statistics by hand, and an end-to-end run in the environments."""

import numpy as np
import pandas as pd
import pytest

from helpdp.evaluate import compare, equal_spend_baseline, paired_ci, summarize


def test_paired_ci_by_hand():
    m, lo, hi = paired_ci(np.array([1.0, 0.0, 1.0, 1.0]))
    half = 1.96 * np.std([1, 0, 1, 1], ddof=1) / 2
    assert (m, lo, hi) == pytest.approx((0.75, 0.75 - half, 0.75 + half))
    assert np.isnan(paired_ci(np.array([]))[0])


def _runs(policy, success, calls, n=4):
    return pd.DataFrame({"policy": policy, "split": "test", "pair": [f"t#{i}" for i in range(n)],
                         "success": success, "expert_calls": calls, "steps": 3, "spl": 0.5,
                         "policy_errors": 0, "invalid": False})  # fmt: skip


def test_equal_spend_interpolates_the_random_curve_per_pair():
    a = _runs("random p=0.1", [0, 0, 1, 0], [0, 1, 0, 1]).set_index("pair")  # U 0.5, SR .25
    b = _runs("random p=0.3", [1, 1, 1, 0], [2, 1, 2, 1]).set_index("pair")  # U 1.5, SR .75
    base, how = equal_spend_baseline(1.0, {0.1: a, 0.3: b})
    assert base.tolist() == [0.5, 0.5, 1.0, 0.0] and "0.50/0.50" in how
    assert equal_spend_baseline(3.0, {0.1: a, 0.3: b}) is None  # outside the curve


def test_compare_is_paired_and_at_equal_spend():
    r = pd.concat([
        _runs("random p=0.1", [0, 0, 1, 0], [0, 1, 0, 1]),
        _runs("random p=0.3", [1, 1, 1, 0], [2, 1, 2, 1]),
        _runs("never", [0, 0, 0, 0], [0, 0, 0, 0]),
        _runs("smart", [1, 1, 1, 1], [1, 1, 1, 1]),
    ])  # fmt: skip
    c = compare(r, "smart", "test", [0.1, 0.3])
    assert c["U"] == 1.0 and c["vs_random_equal_spend"][0] == pytest.approx(0.5)
    assert c["vs never"][0] == 1.0
    s = summarize(r)
    row = s[s["policy"] == "smart"].iloc[0]
    assert (row["SR"], row["U"], row["episodes"], row["U_ci"]) == (1.0, 1.0, 4, 0.0)
    rnd = s[s["policy"] == "random p=0.1"].iloc[0]
    assert rnd["U_ci"] == pytest.approx(1.96 * np.std([0, 1, 0, 1], ddof=1) / 2)
