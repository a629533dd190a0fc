"""Points and curves that coincide stay visible, and the counts stay legible (issue 46,
item 9): usage_success.png (never under the DP table, a helper's budgets under one
another) and reliability.png (one split's curve under another's, counts overlapping)."""

import numpy as np
import pandas as pd
import pytest
from plot_helpers import assert_drawn_png

from helpdp.evaluate.plots import point_styles, usage_success_figure, usage_success_plot
from prm.metrics import reliability_diagram, reliability_figure

# the test split of docs/results/evaluation/demo-worlds-test.md, with the budget-1 helper
# moved onto the budget-2 one: (policy, U, SR, interval half-width)
POINTS = [
    ("never", 0.0, 0.509, 0.031),
    ("always", 6.16, 0.924, 0.016),
    ("random p=0.05", 0.33, 0.562, 0.030),
    ("random p=0.5", 3.17, 0.820, 0.024),
    ("rule: turn 0", 1.0, 0.709, 0.028),
    ("dp table (budget 1)", 0.0, 0.509, 0.031),
    ("helper (budget 1)", 1.47, 0.774, 0.026),
    ("helper (budget 2)", 1.48, 0.776, 0.026),
]


def _summary():
    rows = [
        {"split": "test", "policy": p, "U": u, "SR": sr, "SR_lo": sr - h, "SR_hi": sr + h}
        for p, u, sr, h in POINTS
    ]
    return pd.DataFrame(rows)


def test_coinciding_points_get_nested_markers_the_larger_below():
    xy = [(0.0, 0.509), (6.16, 0.924), (0.0, 0.509), (1.47, 0.774), (1.48, 0.776)]
    s = point_styles(xy)
    assert len({st["marker"] for st in s}) == len(xy)  # a shape each
    for below, above in ((0, 2), (3, 4)):  # never / dp table; the helper's two budgets
        assert s[below]["markersize"] > s[above]["markersize"]
        assert s[below]["zorder"] < s[above]["zorder"]
        assert s[below]["markerfacecolor"] == "none" and s[above]["markerfacecolor"] is None
    assert s[1]["markersize"] == 6.0 and s[1]["markerfacecolor"] is None  # alone: plain


def test_usage_success_draws_never_and_the_dp_table_distinguishably(tmp_path):
    import matplotlib.pyplot as plt

    fig = usage_success_figure(_summary(), None)
    try:
        # each policy an errorbar container: its label and its data line
        lines = {c.get_label(): c.lines[0] for c in fig.axes[0].containers}
        pairs = [("never", "dp table (budget 1)"), ("helper (budget 1)", "helper (budget 2)")]
        for a, b in pairs:
            la, lb = lines[a], lines[b]
            assert (la.get_marker(), la.get_markersize()) != (lb.get_marker(), lb.get_markersize())
            assert la.get_markersize() > lb.get_markersize()  # the earlier one rings the later
            assert la.get_zorder() < lb.get_zorder()
    finally:
        plt.close(fig)
    usage_success_plot(_summary(), None, tmp_path / "usage_success.png")
    assert_drawn_png(tmp_path / "usage_success.png")


def _curves():
    rng = np.random.default_rng(0)
    p = rng.beta(2, 2, 3000)
    y = (rng.random(3000) < p).astype(float)
    p2 = rng.beta(2, 2, 800)
    y2 = (rng.random(800) < p2 * 0.9).astype(float)
    return {"train": (y, p, None), "validation": (y, p, None), "test": (y2, p2, None)}


def test_reliability_curves_through_the_same_points_are_told_apart_and_counts_do_not_overlap(
    tmp_path,
):
    import matplotlib.pyplot as plt

    fig = reliability_figure(_curves())
    try:
        ax, axh = fig.axes[:2]
        curves = [ln for ln in ax.get_lines() if ln.get_label().startswith(("train", "valid"))]
        train, val = curves
        assert np.allclose(train.get_xydata(), val.get_xydata())  # the same points
        assert train.get_marker() != val.get_marker()
        assert train.get_linestyle() != val.get_linestyle()
        assert train.get_markersize() > val.get_markersize()
        assert train.get_zorder() < val.get_zorder()
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = [t.get_window_extent(renderer) for t in axh.texts]
        assert len(boxes) == 30  # 10 bins x 3 curves, every bin visited
        overlapping = [
            (i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])
        ]
        assert overlapping == []
        inside = axh.get_window_extent(renderer)
        assert all(inside.contains(b.x0, b.y0) and inside.contains(b.x1, b.y1) for b in boxes)
    finally:
        plt.close(fig)
    assert_drawn_png(reliability_diagram(_curves(), tmp_path / "rel.png"), min_height=600)


@pytest.mark.parametrize("n", [1, 2, 6])
def test_reliability_diagram_draws_any_number_of_curves(tmp_path, n):
    y, p, _ = _curves()["train"]
    curves = {f"split {i}": (y, np.clip(p + 0.01 * i, 0, 1), None) for i in range(n)}
    assert_drawn_png(reliability_diagram(curves, tmp_path / "r.png"), min_height=600)
