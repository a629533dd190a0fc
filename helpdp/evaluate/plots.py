"""``usage_success.png`` of ``helpdp.evaluate``: each policy's realised (calls, success)
with its interval, the random-help curve, the DP's forecast frontier and the best
task-wise mix of the baselines.

Policies often land on the same point (never and a DP table that never helps; a helper
at two budgets that spend alike): each policy has its own marker shape, and points that
coincide (within 2% of the axes' spans) are drawn as nested markers, the earlier ones
larger, hollow and below, so that every one of them stays visible (:func:`point_styles`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpdp.policies import name_family

MARKERS = ("s", "o", "D", "^", "v", "P", "X", "<", ">", "h", "p", "*", "d", "H", "8")
NEAR = 0.02  # of the axes' spans: points this close are drawn nested


def point_styles(xy, near: float = NEAR) -> list[dict]:
    """The marker keywords of points ``xy`` ((n, 2), in plot order): a shape each, and
    where points coincide (:data:`NEAR`) a size each, larger for the earlier ones, which
    are hollow and drawn below the later ones."""
    xy = np.asarray(xy, np.float64).reshape(-1, 2)
    span = np.ptp(xy, axis=0) if len(xy) else np.ones(2)
    span = np.where(span > 0, span, 1.0)
    group = list(range(len(xy)))
    for i in range(len(xy)):
        for j in range(i):
            if np.all(np.abs(xy[i] - xy[j]) <= near * span):
                group[i] = group[j]
                break
    styles = []
    for i, g in enumerate(group):
        members = [k for k, h in enumerate(group) if h == g]
        rank, size = members.index(i), len(members)
        styles.append(
            {
                "marker": MARKERS[i % len(MARKERS)],
                "markersize": 6.0 + 4.0 * (size - 1 - rank),
                "markerfacecolor": "none" if rank < size - 1 else None,
                "markeredgewidth": 1.5,
                "zorder": 3 + rank,
            }
        )
    return styles


def usage_success_figure(
    summary: pd.DataFrame, frontier: pd.DataFrame | None, curves: dict | None = None
):
    """The figure of :func:`usage_success_plot` (its caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = list(dict.fromkeys(summary["split"]))
    fig, axes = plt.subplots(1, len(splits), figsize=(6.5 * len(splits), 5), squeeze=False)
    for ax, split in zip(axes[0], splits):
        s = summary[summary["split"] == split]
        if frontier is not None:
            ax.plot(
                frontier["expected_usage"],
                frontier["expected_success"],
                "-",
                color="0.6",
                label="DP forecast frontier (train data)",
            )
        mix = (curves or {}).get(split)
        if mix is not None:
            ax.plot(
                mix["U"],
                mix["SR"],
                ":",
                color="0.2",
                label="best task-wise mix of the baselines (hindsight)",
            )
        rnd = s[s["policy"].map(name_family) == "random"].sort_values("U")
        ax.plot(rnd["U"], rnd["SR"], "o--", color="tab:blue", label="random state-wise help")
        points = [r for r in s.itertuples() if name_family(r.policy) != "random"]
        colours = plt.cm.tab20((np.arange(len(points)) + 2) % 20)  # blue is the random curve
        styles = point_styles([(r.U, r.SR) for r in points])
        for r, c, style in zip(points, colours, styles):  # SR's Wilson interval: within [0, 1]
            yerr = [[max(r.SR - r.SR_lo, 0.0)], [max(r.SR_hi - r.SR, 0.0)]]  # rounding at 0, 1
            ax.errorbar(r.U, r.SR, yerr=yerr, capsize=3, color=c, label=r.policy, **style)
        ax.set_xlabel("expert calls per episode (realised)")
        ax.set_ylabel("success rate")
        ax.set_title(f"{split} tasks ({'unseen' if split == 'test' else 'seen'})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def usage_success_plot(
    summary: pd.DataFrame, frontier: pd.DataFrame | None, path: Path, curves: dict | None = None
) -> None:
    """``usage_success.png``: per split, each policy's realised (U, SR), the random-help
    curve, the DP's forecast ``frontier`` and the best task-wise mix (``curves``)."""
    import matplotlib.pyplot as plt

    fig = usage_success_figure(summary, frontier, curves)
    fig.savefig(path, dpi=110)
    plt.close(fig)
