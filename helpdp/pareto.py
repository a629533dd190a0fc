"""The whole usage-success frontier: every breakpoint of E[U](r), with E[U], E[S].

The optimal Lagrangian value ``g(r) = max_pi E[S] - r E[U]`` is the upper envelope
of one line per deterministic policy. Its vertices are found exactly by the
Eisner-Severance recursion: solve at the intersection of two optimal policies'
lines; if the solve beats both lines a new vertex policy lies between them
(recurse on both sides), otherwise the intersection is a breakpoint. Each policy on
the frontier costs one solve, each breakpoint one more. The frontier's (E[U], E[S])
points, joined by straight segments (the randomized mixtures), are the best success
reachable at every budget.

Where the per-task trace applies (one intervention, acyclic graph laid out by
task: ``helpdp.trace``), ``frontier`` reads the vertices off the sum of the
tasks' own frontiers instead: one pass over every task, all breakpoints exact.
``method="solves"`` forces the recursion above.

``python -m helpdp.frontier`` (``run_frontier``, its fields ``FrontierConfig``) writes
``frontier.parquet`` (one row per vertex policy: the r-interval where it is optimal, its
E[U] and E[S]) and ``frontier.png``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpdp import trace as _trace
from helpdp.budget import Solves, raise_until, warm_up
from helpdp.cliconf import UsageError, parse_budgets
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf.progress import tqdm_bar
from helpdp.config import SolverConfig
from helpdp.data import MDP, load_dataset
from helpdp.demo import demo_dataset_path


@dataclass
class Frontier:
    """Vertex policies sorted by usage ascending (r descending)."""

    table: pd.DataFrame  # r_min, r_max, expected_usage, expected_success
    solves: int
    seconds: float

    def success_at(self, budget: float) -> float:
        """Best E[S] at expected usage ``budget`` (linear between vertices)."""
        u = self.table["expected_usage"].to_numpy()
        s = self.table["expected_success"].to_numpy()
        if budget < u[0] - 1e-12:
            return float("nan")
        return float(np.interp(budget, u, s))


def frontier(
    mdp: MDP,
    *,
    gamma: float,
    max_solves: int = 5000,
    progress: bool = True,
    method: str = "auto",
    **solver_kw,
) -> Frontier:
    """Trace every vertex of the frontier (``rule=exact`` only: under the rule of Min et al. (2025),
    usage is not monotone in r, so it has no such frontier). ``method``: ``"auto"``
    (the per-task trace where it applies, else solves), ``"frontier"``, ``"solves"``."""
    if mdp.n_actions != 2:
        raise ValueError("the frontier is defined for one intervention")
    if method not in ("auto", "frontier", "solves"):
        raise ValueError(f"method must be auto, frontier or solves, got {method!r}")
    if method != "solves" and _trace.applies(mdp):
        had = ("frontier", float(gamma), float(solver_kw.get("tie_tol", 1e-12))) in mdp.cache
        fr = _trace.frontier_of(mdp, gamma=gamma, tie_tol=solver_kw.get("tie_tol", 1e-12))
        if fr is not None:
            table = pd.DataFrame(
                {
                    "r_min": fr.starts[::-1].astype(np.float64),
                    "r_max": np.array([fr.vertex(k).r_max for k in range(len(fr))])[::-1],
                    "expected_usage": fr.usage[::-1].astype(np.float64),
                    "expected_success": fr.success[::-1].astype(np.float64),
                }
            )
            return Frontier(table=table, solves=0 if had else 1, seconds=fr.seconds)
    elif method == "frontier":
        raise ValueError("method='frontier' needs one intervention and an acyclic graph")
    tol_line = 1e-10 + 10 * solver_kw.get("tol", 1e-10)
    bar = tqdm_bar()(total=None, desc="frontier solves", unit="solve", disable=not progress)
    at = Solves(
        mdp,
        what="frontier",
        max_solves=max_solves,
        log=lambda _: bar.update(1),
        gamma=gamma,
        rule="exact",
        **solver_kw,
    )
    first = at(0.0)
    # the least-usage policy: r = 1, 8, 64, ... until a solve changes nothing
    r, last, _, _ = raise_until(
        at,
        1.0,
        at(1.0),
        lambda a, b: (a.total_usage, a.expected_success) != (b.total_usage, b.expected_success),
    )
    # vertices as (solution, r where it was found); breakpoints between neighbours
    vertices = {0.0: first}
    breaks: list[float] = []
    stack = [(0.0, first, r, last)]
    if first.total_usage - last.total_usage <= 1e-15:
        stack = []
    else:
        vertices[r] = last
    while stack:
        ra, a, rb, b = stack.pop()
        du = a.total_usage - b.total_usage
        rx = (a.expected_success - b.expected_success) / du
        if not ra <= rx <= rb:
            rx = min(max(rx, ra), rb)
        x = at(rx)
        if x.lagrangian() <= b.lagrangian(rx) + tol_line:
            breaks.append(rx)
            continue
        vertices[rx] = x
        if a.total_usage - x.total_usage > 1e-15:
            stack.append((ra, a, rx, x))
        if x.total_usage - b.total_usage > 1e-15:
            stack.append((rx, x, rb, b))
    bar.close()
    sols = sorted(vertices.values(), key=lambda s: (s.total_usage, s.expected_success))
    # drop duplicates (same point found twice)
    pts = []
    for s in sols:
        if pts and abs(pts[-1].total_usage - s.total_usage) <= 1e-15:
            pts[-1] = s if s.expected_success > pts[-1].expected_success else pts[-1]
        else:
            pts.append(s)
    breaks = sorted(set(breaks), reverse=True)
    n = len(pts)
    r_max = [np.inf] + breaks[: n - 1]
    r_min = breaks[: n - 1] + [0.0]
    table = pd.DataFrame(
        {
            "r_min": np.array(r_min[:n], dtype=np.float64),
            "r_max": np.array(r_max[:n], dtype=np.float64),
            "expected_usage": [s.total_usage for s in pts],
            "expected_success": [s.expected_success for s in pts],
        }
    )
    return Frontier(table=table, solves=at.count, seconds=at.seconds())


def plot(
    fr: Frontier,
    path: Path,
    budget: float | None = None,
    title: str = "",
    random_help: pd.DataFrame | None = None,
) -> Path:
    """Usage-success frontier (left) and E[U] as a step function of r (right).

    ``random_help``: optional DataFrame indexed by trigger probability with the
    collected episodes' mean ``expert_calls`` and ``success``, drawn for comparison.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = fr.table
    u, s = t["expected_usage"].to_numpy(), t["expected_success"].to_numpy()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    ax.plot(
        u, s, "-o", ms=3, lw=1.5, color="C0", label="optimal frontier (mixtures between vertices)"
    )
    if random_help is not None and len(random_help):
        ax.plot(
            random_help["expert_calls"],
            random_help["success"],
            "x--",
            color="C2",
            label="random help in the data (per trigger p)",
        )
    if budget is not None and budget >= u[0]:
        sb = fr.success_at(budget)
        ax.axvline(budget, ls="--", color="C3", lw=1)
        ax.plot([budget], [sb], "*", ms=14, color="C3", label=f"budget {budget:g}: E[S] = {sb:.3f}")
    ax.set_xlabel("expected expert calls per episode, E[U]")
    ax.set_ylabel("expected success, E[S]")
    ax.set_title(title or "usage-success frontier")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    rr = t["r_min"].to_numpy()
    pos = rr > 0
    if pos.any():
        ax2.step(rr[pos], u[pos], where="post", color="C1")
        ax2.set_xscale("log")
    if budget is not None:
        ax2.axhline(budget, ls="--", color="C3", lw=1, label=f"budget {budget:g}")
        ax2.legend(fontsize=8)
    ax2.set_xlabel("help cost r (log scale)")
    ax2.set_ylabel("E[U] of the optimal policy")
    ax2.set_title("usage as a function of the help cost")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


@dataclass
class FrontierConfig(SolverConfig):
    """`python -m helpdp.frontier`: every breakpoint of the usage-success frontier."""

    data: Any = _f(None, "dataset directory; null runs on the embedded demo dataset")
    budget: Any = _f(1.0, "budget to mark on the plot (null: none)")
    out: str = _f(
        "outputs/frontier",
        "output directory (frontier.parquet, frontier.png), relative to the current directory",
    )
    max_solves: int = _f(5000, "most solves the frontier trace may use")
    method: str = _f(
        "auto",
        "auto: the per-task trace (one pass over every task) where it applies, else the "
        "solve-based recursion; frontier: the trace only; solves: the recursion",
    )


def run_frontier(cfg: FrontierConfig) -> Frontier:
    """The body of ``python -m helpdp.frontier``."""

    if cfg.rule != "exact":
        raise ValueError("the frontier is traced with rule=exact")
    mark = None if cfg.budget is None else parse_budgets(cfg.budget)
    if mark is not None and len(mark) != 1:
        raise UsageError(f"budget={cfg.budget}: the plot marks one budget (or null: none)")
    data = Path(cfg.data) if cfg.data else demo_dataset_path()
    ds = load_dataset(data, gamma=cfg.gamma)
    kw = dict(gamma=ds.gamma, tol=cfg.tol, max_iters=cfg.max_iters, tie_tol=cfg.tie_tol)
    warm = warm_up(ds.mdp, rule="exact", **kw)  # reported apart from fr.seconds
    fr = frontier(ds.mdp, max_solves=cfg.max_solves, method=cfg.method, **kw)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    fr.table.to_parquet(out / "frontier.parquet", index=False)
    random_help = random_help_curve(ds.episodes)
    plot(
        fr,
        out / "frontier.png",
        None if mark is None else mark[0],
        title=f"usage-success frontier: {data.name}",
        random_help=random_help,
    )
    print(fr.table.to_string(max_rows=30))
    print(
        f"{len(fr.table)} frontier policies  [{fr.solves} solves, {fr.seconds:.3f}s{warm}] -> "
        f"{out / 'frontier.parquet'}, {out / 'frontier.png'}"
    )
    return fr


def random_help_curve(episodes: pd.DataFrame | None) -> pd.DataFrame | None:
    """Mean calls and success per trigger probability of the grid's episodes (random help
    at every step), for the frontier plot; a stage-2 design's rows (``design`` set: help
    randomised at trigger states only) are left out. None without such episodes."""
    if episodes is None or not {"trigger_p", "expert_calls", "success"} <= set(episodes.columns):
        return None
    grid = episodes[episodes["design"].isna()] if "design" in episodes.columns else episodes
    if not len(grid):
        return None
    return grid.groupby("trigger_p")[["expert_calls", "success"]].mean()
