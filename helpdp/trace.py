"""Per-task frontiers and their sum: every budget from one pass.

For one intervention the Lagrangian ``g(r) = max_pi E[S] - r E[U]`` decomposes by
task: states of different tasks never connect, so each task's optimal policy at
r depends on that task alone, and ``g`` is the start-weighted sum of the tasks'
own ``g_t``. ``helpdp._src.parametric`` traces each task's ``g_t`` exactly (its
breakpoints in r and the policy's E[U], E[S] between them, with the fixed-r
solver's tie rule) in one backward pass of piecewise-linear functions. The
global frontier is their sum: all breakpoints sorted by r, E[U] and E[S] jumping
at each by the owning task's jumps (``Breakpoints.merge``). A budget is then a
binary search (``TracedFrontier.query``): the breakpoint r* where E[U] falls to the
budget, the two optimal policies on either side, and the mixture weight that
spends the budget exactly. Since the two policies differ only in the task(s)
whose breakpoint r* is, the mixture randomises within that task only.

Partial traces of disjoint groups of tasks (files read one group at a time, or
Ray workers: ``helpdp.stream``) merge the same way, since the sum is over tasks.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from helpdp._src import parametric, pertask
from helpdp.data import MDP

R_MAX = 1e12  # beyond this help cost the budget is declared infeasible (as helpdp.budget)
USAGE_EPS = 1e-12  # budget slack treated as "spent exactly" (as helpdp.budget)
# breakpoints of different tasks closer than this (relative to r) are one global
# breakpoint: equal in exact arithmetic (r = 1/3 from counts), they differ in the last
# bits per task, and no solve can land between them (at 10^7 transitions, 3 of 20
# budgets hit vertices 1e-16 wide and fell back to the search by solves)
R_MERGE = 1e-11
# stored pieces per state (on average over a task) above which a task's trace is
# abandoned for the solve-based search: one huge, densely merging task
MAX_PIECES_PER_STATE = 64
MAX_POOL_PIECES = 1 << 24  # and at most this many per thread (24 bytes each: 400 MB)
TRACE_CHUNK = 4096  # states per batch of tasks handed to a thread


@dataclass(frozen=True)
class Breakpoints:
    """Un-normalised frontier of a group of tasks: at r = 0 the start-weighted sums
    ``base_success``, ``base_usage``; at each ``r[i]`` (sorted) they jump by
    ``d_success[i]``, ``d_usage[i]``. ``weight`` is the group's episode count."""

    weight: float
    base_success: float
    base_usage: float
    r: np.ndarray
    d_success: np.ndarray
    d_usage: np.ndarray
    n_tasks: int

    @property
    def nbytes(self) -> int:
        return int(self.r.nbytes + self.d_success.nbytes + self.d_usage.nbytes)

    @staticmethod
    def from_pieces(piece_ptr, b, s, u, weight: float, n_tasks: int) -> Breakpoints:
        """From per-task pieces (``piece_ptr`` delimits each task's pieces)."""
        first = piece_ptr[:-1][np.diff(piece_ptr) > 0]
        later = np.ones(len(b), bool)
        later[first] = False
        ds = np.r_[0.0, np.diff(s)][later]
        du = np.r_[0.0, np.diff(u)][later]
        r = b[later]
        order = np.argsort(r, kind="stable")
        return Breakpoints(
            weight=float(weight),
            base_success=float(np.sum(s[first])),
            base_usage=float(np.sum(u[first])),
            r=r[order],
            d_success=ds[order],
            d_usage=du[order],
            n_tasks=int(n_tasks),
        )

    @staticmethod
    def merge(parts: list[Breakpoints]) -> Breakpoints:
        """The sum of the frontiers of disjoint groups of tasks."""
        r = np.concatenate([p.r for p in parts])
        order = np.argsort(r, kind="stable")
        return Breakpoints(
            weight=float(sum(p.weight for p in parts)),
            base_success=float(np.sum([p.base_success for p in parts])),
            base_usage=float(np.sum([p.base_usage for p in parts])),
            r=r[order],
            d_success=np.concatenate([p.d_success for p in parts])[order],
            d_usage=np.concatenate([p.d_usage for p in parts])[order],
            n_tasks=int(sum(p.n_tasks for p in parts)),
        )


@dataclass(frozen=True)
class Vertex:
    """One deterministic optimal policy of the frontier: optimal for r in
    ``[r_min, r_max)``, with its E[U] and E[S]."""

    r_min: float
    r_max: float
    expected_usage: float
    expected_success: float


@dataclass(frozen=True)
class Query:
    """A budget answered from the frontier (``TracedFrontier.query``)."""

    budget: float
    r: float  # the breakpoint r* (0 when the budget does not bind)
    less_help: Vertex  # usage <= budget
    more_help: Vertex | None  # the other side of r*, when the budget falls between
    weight_more_help: float | None

    @property
    def expected_usage(self) -> float:
        if self.more_help is None:
            return self.less_help.expected_usage
        w = self.weight_more_help
        return w * self.more_help.expected_usage + (1 - w) * self.less_help.expected_usage

    @property
    def expected_success(self) -> float:
        if self.more_help is None:
            return self.less_help.expected_success
        w = self.weight_more_help
        return w * self.more_help.expected_success + (1 - w) * self.less_help.expected_success


class InfeasibleBudget(ValueError):
    """No policy in the data meets the budget (some states only ever saw help): raised by
    ``TracedFrontier.query`` and by helpdp.budget's searches (one class, exported there)."""


@dataclass(frozen=True)
class TracedFrontier:
    """The global usage-success frontier: vertex ``k`` is optimal on
    ``[starts[k], ends[k])`` (``starts[0] = 0``, the last open-ended), with
    normalised E[U] ``usage[k]`` (non-increasing) and E[S] ``success[k]``.
    ``ends[k]`` is ``starts[k + 1]`` but where tasks' breakpoints closer than
    ``R_MERGE`` make one global breakpoint: it spans ``[ends[k], starts[k + 1]]``,
    where no single policy is optimal (None: ``ends[k] = starts[k + 1]``)."""

    starts: np.ndarray
    usage: np.ndarray
    success: np.ndarray
    n_tasks: int
    seconds: float
    ends: np.ndarray | None = None

    @staticmethod
    def from_breakpoints(bp: Breakpoints, seconds: float = 0.0) -> TracedFrontier:
        r = bp.r
        # breakpoints of several tasks at the same r (to R_MERGE) are one global
        # breakpoint, placed at the group's largest r: at and above it every task of
        # the group has taken its less-help policy
        gap = np.diff(r) > R_MERGE * np.maximum(1.0, np.abs(r[1:]))
        new = np.r_[True, gap] if len(r) else np.zeros(0, bool)
        first = np.flatnonzero(new)
        group_last = np.r_[first[1:] - 1, len(r) - 1] if len(r) else first
        grp = np.cumsum(new) - 1
        n_g = int(new.sum())
        # sums in extended precision: 10^6 jumps lose no digit that matters
        du = np.zeros(n_g, np.longdouble)
        ds = np.zeros(n_g, np.longdouble)
        np.add.at(du, grp, bp.d_usage.astype(np.longdouble))
        np.add.at(ds, grp, bp.d_success.astype(np.longdouble))
        w = np.longdouble(bp.weight)
        usage = np.r_[np.longdouble(bp.base_usage), np.longdouble(bp.base_usage) + np.cumsum(du)]
        success = np.r_[
            np.longdouble(bp.base_success), np.longdouble(bp.base_success) + np.cumsum(ds)
        ]
        usage = (usage / w).astype(np.float64)
        success = (success / w).astype(np.float64)
        starts = np.r_[0.0, r[group_last]]
        ends = np.r_[r[first], np.inf]
        # a breakpoint whose E[U] jump rounds to nothing is no vertex of its own
        keep = np.r_[True, np.abs(np.diff(usage)) > 1e-15]
        if not keep.all():
            idx = np.flatnonzero(keep)
            # the merged vertex takes the values of the last breakpoint it absorbs
            last = np.r_[idx[1:] - 1, len(usage) - 1]
            starts, usage, success, ends = starts[idx], usage[last], success[last], ends[last]
        return TracedFrontier(starts, usage, success, bp.n_tasks, seconds, ends)

    def __len__(self) -> int:
        return len(self.starts)

    def vertex(self, k: int) -> Vertex:
        if self.ends is not None:
            r_max = self.ends[k]
        else:
            r_max = self.starts[k + 1] if k + 1 < len(self.starts) else np.inf
        return Vertex(
            float(self.starts[k]), float(r_max), float(self.usage[k]), float(self.success[k])
        )

    def query(self, budget: float) -> Query:
        """The policy of largest usage with E[U] <= budget, and the mixture at the
        breakpoint that spends the budget exactly (docs/method.md, "Outputs"). O(log n)."""
        u = self.usage
        if u[0] <= budget + USAGE_EPS:
            return Query(float(budget), 0.0, self.vertex(0), None, None)
        # usage is non-increasing in k: the first vertex within budget
        k = int(np.searchsorted(-u, -(budget + USAGE_EPS), side="left"))
        if k >= len(u) or self.starts[k] > R_MAX:
            last = min(int(np.searchsorted(self.starts, R_MAX, side="right")) - 1, len(u) - 1)
            raise InfeasibleBudget(
                f"budget {budget} is below the least expert usage any policy in the data reaches "
                f"(E[U] = {u[last]:.6g} at r = {self.starts[last]:.3g}): some states were only "
                "ever observed with help"
            )
        hi, lo = self.vertex(k), self.vertex(k - 1)
        w = None
        if budget - hi.expected_usage > USAGE_EPS:
            w = (budget - hi.expected_usage) / (lo.expected_usage - hi.expected_usage)
            w = min(max(w, 0.0), 1.0)
        return Query(float(budget), float(self.starts[k]), hi, lo if w else None, w if w else None)


def applies(mdp: MDP, rule: str = "exact") -> bool:
    """Whether the per-task trace answers this search: the exact rule, one
    intervention, an acyclic graph laid out by task."""
    return rule == "exact" and mdp.n_actions == 2 and mdp.acyclic and mdp.comp_ptr is not None


def trace_breakpoints(mdp: MDP, *, gamma: float, tie_tol: float = 1e-12) -> Breakpoints | None:
    """Every task's frontier, traced on all numba threads (batches of tasks handed
    out on demand, largest first). None when a task is too large to trace
    (``MAX_PIECES_PER_STATE``)."""
    if not applies(mdp):
        raise ValueError("the per-task trace needs one intervention and an acyclic graph")
    lo, hi, sched = pertask.chunk_plan(mdp.comp_ptr, TRACE_CHUNK)
    sizes = np.diff(mdp.comp_ptr)
    # the components of each batch
    first = np.searchsorted(mdp.comp_ptr, lo)
    last = np.searchsorted(mdp.comp_ptr, hi)
    max_pieces = min(int(MAX_PIECES_PER_STATE * max(int(sizes.max()), 1024)), MAX_POOL_PIECES)
    g, weight = mdp.graph, mdp.start_weight

    def run(i):
        comps = np.arange(first[i], last[i], dtype=np.int64)
        return parametric.trace_components(
            mdp.comp_ptr, comps, g, weight, float(gamma), float(tie_tol), max_pieces
        )

    threads = numba.get_num_threads()
    if threads > 1 and len(sched) > 1:
        with ThreadPoolExecutor(threads) as ex:
            outs = dict(zip(sched.tolist(), ex.map(run, sched.tolist())))
        outs = [outs[i] for i in range(len(sched))]
    else:
        outs = [run(i) for i in range(len(sched))]
    if not all(o[0] for o in outs):
        return None
    ptr = [outs[0][1]]
    for o in outs[1:]:
        ptr.append(o[1][1:] + ptr[-1][-1])
    piece_ptr = np.concatenate(ptr)
    b = np.concatenate([o[2] for o in outs])
    s = np.concatenate([o[3] for o in outs])
    u = np.concatenate([o[4] for o in outs])
    return Breakpoints.from_pieces(
        piece_ptr, b, s, u, float(mdp.start_weight.sum()), len(mdp.comp_ptr) - 1
    )


def warm_up(mdp: MDP) -> None:
    """Compile (or load from numba's cache) the trace kernel on ``mdp``'s smallest task."""
    c = int(np.argmin(np.diff(mdp.comp_ptr)))
    comps = np.array([c], np.int64)
    parametric.trace_components(
        mdp.comp_ptr, comps, mdp.graph, mdp.start_weight, 1.0, 1e-12, 1 << 20
    )


def frontier_of(mdp: MDP, *, gamma: float, tie_tol: float = 1e-12) -> TracedFrontier | None:
    """The global frontier of ``mdp`` (cached on it), or None where the per-task
    trace does not apply or a task is too large for it."""
    if not applies(mdp):
        return None
    key = ("frontier", float(gamma), float(tie_tol))
    if key not in mdp.cache:
        t = time.perf_counter()
        bp = trace_breakpoints(mdp, gamma=gamma, tie_tol=tie_tol)
        mdp.cache[key] = (
            None if bp is None else TracedFrontier.from_breakpoints(bp, time.perf_counter() - t)
        )
    return mdp.cache[key]
