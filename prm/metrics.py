"""Weighted classification and calibration metrics (numpy only), temperature
scaling, and the reliability diagram.

All functions take binary labels ``y``, predicted probabilities ``p`` and
optional non-negative weights ``w`` (the number of visits a row stands for).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from prm.base import logit, sigmoid


def _w(y, w) -> np.ndarray:
    return np.ones(len(y)) if w is None else np.asarray(w, np.float64)


def auroc(y, p, w=None) -> float:
    """Area under the ROC curve: the probability that a random positive scores above
    a random negative (ties count one half), with weights. NaN with one class only."""
    y = np.asarray(y, np.float64)
    p = np.asarray(p, np.float64)
    w = _w(y, w)
    pos_w, neg_w = w * (y > 0.5), w * (y <= 0.5)
    total_pos, total_neg = pos_w.sum(), neg_w.sum()
    if total_pos <= 0 or total_neg <= 0:
        return float("nan")
    order = np.argsort(p, kind="mergesort")
    ps = p[order]
    starts = np.flatnonzero(np.r_[True, ps[1:] != ps[:-1]])
    pos_g = np.add.reduceat(pos_w[order], starts)
    neg_g = np.add.reduceat(neg_w[order], starts)
    neg_below = np.cumsum(neg_g) - neg_g
    return float((pos_g * (neg_below + 0.5 * neg_g)).sum() / (total_pos * total_neg))


def brier(y, p, w=None) -> float:
    """Weighted mean squared error of the probabilities."""
    y = np.asarray(y, np.float64)
    w = _w(y, w)
    return float((w * (np.asarray(p, np.float64) - y) ** 2).sum() / w.sum())


def reliability_bins(y, p, w=None, n_bins: int = 10):
    """Per equal-width bin of p: (total weight, mean p, observed success rate)."""
    y = np.asarray(y, np.float64)
    p = np.asarray(p, np.float64)
    w = _w(y, w)
    b = np.clip((p * n_bins).astype(np.int64), 0, n_bins - 1)
    wt = np.bincount(b, w, n_bins)
    sp = np.bincount(b, w * p, n_bins)
    sy = np.bincount(b, w * y, n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return wt, sp / wt, sy / wt


def ece(y, p, w=None, n_bins: int = 10) -> float:
    """Expected calibration error: sum over equal-width bins of
    (bin weight / total) * |mean p - observed rate|."""
    wt, mp, my = reliability_bins(y, p, w, n_bins)
    m = wt > 0
    return float((wt[m] * np.abs(mp[m] - my[m])).sum() / wt.sum())


def nll(y, z, w=None) -> float:
    """Weighted binary cross-entropy of logits ``z``."""
    y = np.asarray(y, np.float64)
    z = np.asarray(z, np.float64)
    w = _w(y, w)
    loss = np.logaddexp(0.0, z) - y * z
    return float((w * loss).sum() / w.sum())


def fit_temperature(y, z, w=None) -> float:
    """The temperature T > 0 minimizing the weighted NLL of ``sigmoid(z / T)``."""
    from scipy.optimize import minimize_scalar

    y = np.asarray(y, np.float64)
    z = np.asarray(z, np.float64)
    if len(y) == 0 or not np.any(z != 0):
        return 1.0
    res = minimize_scalar(
        lambda lt: nll(y, z / np.exp(lt), w), bounds=(-6.0, 6.0), method="bounded"
    )
    return float(np.exp(res.x))


def checked_temperature(y, z, w=None, groups=None, n_bins: int = 10) -> tuple[float, str]:
    """Temperature scaling kept only where it improves held-out calibration: the rows
    (the validation split's) are cut in two halves by ``groups`` (tasks; every other one
    of the sorted distinct groups, else every other row), T is fitted on each half and
    the other half's ECE compared with and without it; summed over the two halves, an
    ECE that improves keeps ``fit_temperature`` of all the rows, else 1 (identity).
    Returns ``(T, note)``, the note saying which and why."""
    y = np.asarray(y, np.float64)
    z = np.asarray(z, np.float64)
    w = _w(y, w)
    if len(y) < 4:
        return 1.0, "identity: too few validation rows to check a temperature"
    if groups is None:
        half = np.arange(len(y)) % 2 == 1
    else:
        g = np.asarray(groups).astype(str)
        names = np.unique(g)
        half = np.isin(g, names[1::2])
    if half.all() or not half.any():
        return 1.0, "identity: one validation task, no held-out part to check a temperature on"
    plain, scaled = 0.0, 0.0
    for fit, check in ((~half, half), (half, ~half)):
        t = fit_temperature(y[fit], z[fit], w[fit])
        plain += ece(y[check], sigmoid(z[check]), w[check], n_bins) * w[check].sum()
        scaled += ece(y[check], sigmoid(z[check] / t), w[check], n_bins) * w[check].sum()
    plain, scaled = plain / w.sum(), scaled / w.sum()
    t_all = fit_temperature(y, z, w)
    if scaled < plain:
        return t_all, f"T={t_all:.3f}: held-out ECE {plain:.4f} -> {scaled:.4f} (two halves)"
    return 1.0, (
        f"identity: T={t_all:.3f} did not improve held-out ECE ({plain:.4f} -> {scaled:.4f}, "
        "two halves of the validation tasks)"
    )


def summarize(y, p, w=None, temperature: float = 1.0, n_bins: int = 10) -> dict:
    """AUROC, Brier, ECE, and Brier/ECE after dividing the logits by ``temperature``."""
    p_scaled = sigmoid(logit(p) / temperature)
    return {
        "auroc": auroc(y, p, w),
        "brier": brier(y, p, w),
        "ece": ece(y, p, w, n_bins),
        "ece_scaled": ece(y, p_scaled, w, n_bins),
        "brier_scaled": brier(y, p_scaled, w),
        "temperature": float(temperature),
        "n_rows": int(len(y)),
        "weight": float(_w(y, w).sum()),
    }


#: one marker and line style per curve, the earlier curves' markers larger and drawn
#: below the later ones: curves through the same points show nested shapes, both dashes
CURVE_MARKERS = ("o", "s", "^", "D", "v", "P")
CURVE_LINES = ("-", "--", "-.", ":")


def curve_style(i: int, n: int) -> dict:
    """The plot keywords of the ``i``-th of ``n`` curves (:data:`CURVE_MARKERS`)."""
    return {
        "marker": CURVE_MARKERS[i % len(CURVE_MARKERS)],
        "markersize": 5.0 + min(3.0, 9.0 / max(n - 1, 1)) * (n - 1 - i),  # at most 14
        "markerfacecolor": "none" if i < n - 1 else None,
        "markeredgewidth": 1.6,
        "linestyle": CURVE_LINES[i % len(CURVE_LINES)],
        "zorder": 2 + i,
    }


def reliability_figure(curves: dict, *, n_bins: int = 10, title: str = "PRM reliability"):
    """The figure of :func:`reliability_diagram` (its caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    n = len(curves)
    fig, (ax, axh) = plt.subplots(
        2,
        1,
        figsize=(9.0, 6.5 + 0.25 * max(n - 2, 0)),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1.2 + 0.15 * n]},
        constrained_layout=True,
    )
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration", zorder=1)
    edges = np.linspace(0, 1, n_bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    top = 0.0
    rows = blended_transform_factory(axh.transData, axh.transAxes)
    for i, (name, (y, p, w)) in enumerate(curves.items()):
        wt, mp, my = reliability_bins(y, p, w, n_bins)
        m = wt > 0
        (line,) = ax.plot(
            mp[m], my[m], label=f"{name} (ECE {ece(y, p, w, n_bins):.3f})", **curve_style(i, n)
        )
        style = curve_style(i, n)
        heights, _, _ = axh.hist(
            np.asarray(p),
            bins=edges,
            weights=_w(y, w),
            histtype="step",
            color=line.get_color(),
            linestyle=style["linestyle"],
            linewidth=1.0 + 1.2 * (n - 1 - i) / max(n - 1, 1),
            zorder=style["zorder"],
        )
        top = max(top, float(np.max(heights)))
        # the visits per bin: one row per curve above the histogram, at the bins' centres
        for x, k in zip(centres[m], wt[m], strict=True):
            ax_y = 1.0 - (i + 0.6) / (n + 1.0) * 0.55
            axh.text(
                x,
                ax_y,
                f"{k:.0f}",
                transform=rows,
                ha="center",
                va="center",
                fontsize=7,
                color=line.get_color(),
            )
    axh.set_ylim(0, max(top, 1.0) / 0.45)  # the histogram in the lower 45%, the counts above
    axh.set_yticks([t for t in axh.get_yticks() if 0 <= t <= top])
    ax.set_xlim(-0.03, 1.03)  # points at 0 and 1 stay whole
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("observed success rate")
    ax.set_title(textwrap.fill(title, 60), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    axh.set_xlabel("predicted p(success)")
    axh.set_ylabel("visits\n(numbers: per bin)", fontsize=8)
    return fig


def reliability_diagram(
    curves: dict, path, *, n_bins: int = 10, title: str = "PRM reliability"
) -> Path:
    """Write a reliability diagram PNG: for each name -> (y, p, w) in ``curves``, the
    observed success rate against the mean predicted probability per bin, above a
    histogram of the predictions with each bin's weight (visits) written above it, one
    row per curve in the curve's colour. Each curve has its own marker and line style
    (:func:`curve_style`), so that one through the same points as another stays visible.
    The title is wrapped to the figure's width and the legend sits outside the axes,
    right of them, so that it covers no point."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = reliability_figure(curves, n_bins=n_bins, title=title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
