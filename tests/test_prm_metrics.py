"""Metrics, temperature scaling and the reliability diagram."""

import numpy as np
import pytest
from plot_helpers import assert_drawn_png
from sklearn.metrics import brier_score_loss, roc_auc_score

from prm.base import logit, sigmoid
from prm.metrics import auroc, brier, ece, fit_temperature, reliability_diagram, summarize


def test_auroc_and_brier_match_sklearn_with_weights_and_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    p = np.round(rng.random(400) * 0.5 + 0.4 * y, 1)  # rounded: many ties
    w = rng.integers(1, 5, 400).astype(float)
    assert auroc(y, p, w) == pytest.approx(roc_auc_score(y, p, sample_weight=w), abs=1e-12)
    assert brier(y, p, w) == pytest.approx(brier_score_loss(y, p, sample_weight=w), abs=1e-12)
    assert auroc([1, 0], [0.9, 0.1]) == 1.0 and auroc([1, 0], [0.1, 0.9]) == 0.0
    assert np.isnan(auroc([1, 1], [0.2, 0.3]))


def test_ece_by_hand():
    # bin [0.1, 0.2): p 0.1, 0.1 with outcomes 0, 1 -> |0.1 - 0.5| ; bin [0.9, 1]: p 0.9, y 1 -> 0.1
    assert ece([0, 1, 1], [0.1, 0.1, 0.9]) == pytest.approx((2 * 0.4 + 1 * 0.1) / 3)
    assert ece([0, 1, 1], [0.1, 0.1, 0.9], [1, 1, 2]) == pytest.approx((2 * 0.4 + 2 * 0.1) / 4)


def test_temperature_scaling_recovers_overconfidence():
    rng = np.random.default_rng(1)
    z_true = rng.normal(0, 1.5, 20000)
    y = (rng.random(20000) < sigmoid(z_true)).astype(float)
    z_over = 3.0 * z_true  # an overconfident model
    t = fit_temperature(y, z_over)
    assert t == pytest.approx(3.0, rel=0.08)
    s = summarize(y, sigmoid(z_over), None, t)
    assert s["ece_scaled"] < s["ece"] / 3
    assert logit(sigmoid(np.array([2.0])))[0] == pytest.approx(2.0)


def test_reliability_diagram_png(tmp_path):
    y = np.array([0, 1, 1, 0, 1])
    p = np.array([0.2, 0.7, 0.9, 0.4, 0.6])
    out = reliability_diagram({"validation": (y, p, None)}, tmp_path / "r" / "rel.png")
    assert_drawn_png(out, min_width=500, min_height=600)


def test_temperature_is_kept_only_where_it_improves_held_out_calibration():
    from prm.metrics import checked_temperature

    rng = np.random.default_rng(0)
    n = 4000
    z = rng.normal(0.0, 3.0, n)
    tasks = rng.integers(0, 20, n)
    # overconfident everywhere (truth is sigmoid(z / 3)): scaling helps on either half
    y = (rng.random(n) < sigmoid(z / 3.0)).astype(float)
    t, note = checked_temperature(y, z, None, tasks)
    assert t == pytest.approx(3.0, rel=0.15) and note.startswith(f"T={t:.3f}: held-out ECE")
    # overconfident on the even tasks, underconfident on the odd ones: a temperature
    # fitted on one half makes the other half worse, so none is kept
    truth = np.where(tasks % 2 == 0, z / 3.0, z * 3.0)
    y = (rng.random(n) < sigmoid(truth)).astype(float)
    t, note = checked_temperature(y, z, None, tasks)
    assert t == 1.0 and note.startswith("identity: T=") and "did not improve" in note
    t, note = checked_temperature(y, z, None, np.zeros(n))
    assert t == 1.0 and "one validation task" in note
