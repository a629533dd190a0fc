"""Search the help cost r whose policy meets an expert-usage budget (docs/method.md, "Outputs"; ``python -m helpdp.search`` runs it).

For ``rule=exact`` the optimal value ``g(r) = max_pi E[S] - r E[U]`` is convex and piecewise
linear in r, each piece one deterministic policy, and E[U](r) a non-increasing step. After
bracketing the budget on a log scale (``r_lo`` with E[U] > C, ``r_hi`` with E[U] <= C), each
step solves at the intersection of the two bracketing policies' lines (Eisner-Severance
chord search; log-scale bisection if rounding puts it outside the bracket). When that solve
finds nothing better than both lines, the intersection is the breakpoint r*: both policies
are optimal there, and following the more-help one with probability ``w = (C - U_hi) /
(U_lo - U_hi)`` per episode spends C exactly. By constrained-MDP duality (Altman 1999) that
mixture is optimal over all policies, randomized ones included; its E[S] equals the
occupancy-measure LP's optimum (tested).

``rule=paper`` has no such structure (its usage need not be monotone in r), so it
bisects log r until r stops moving at the precision it is reported with (the next
midpoint would read the same as an end at ``R_DIGITS`` significant digits) and
mixes the two ends' policies, as at an exact breakpoint.

**Solves counted.** A result's ``solves`` counts every solve its budget used, shared ones
included; the per-task trace counts as one for every budget it answers (printed apart:
"trace + 2 solves", one ``solve`` line each).

**Per-task trace (the default where it applies).** With the exact rule, one intervention
and an acyclic graph, the search reads r* and both sides' E[U], E[S] off the global
frontier (``helpdp.trace``: every task's breakpoints, traced once per MDP, cached on it,
summed), then solves twice to materialise the two policies: at r* (the less-help side; the
fixed-r tie rule gives the policy right of r*) and in the middle of the interval left of r*
(the more-help side). Both are checked against the frontier's E[U] and E[S]; should they
disagree (rounding at a degenerate breakpoint), the solve-based search above runs instead.
``method="solves"`` forces it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpdp import trace as _trace
from helpdp.data import MDP, Dataset
from helpdp.solve import Solution, cost_means, solve, solve_costs
from helpdp.trace import InfeasibleBudget

R_MAX = _trace.R_MAX  # beyond this the budget is declared infeasible
USAGE_EPS = _trace.USAGE_EPS  # budget slack treated as "spent exactly"
METHODS = ("auto", "frontier", "solves")
FRONTIER_CHECK_TOL = 1e-9  # a materialised policy reproduces the frontier's E[U], E[S] so
# a sweep answered from the frontier materialises its policies in batches of Solutions
SWEEP_BATCH_BYTES = 1 << 30  # of at most this many bytes together (25 per state each)
# r is reported (search log, the command's line) to this many significant digits;
R_DIGITS = 6  # rule=paper's bisection stops when its next midpoint would not move r at them


class Solves:
    """``solves(r)``: the DP at help cost ``r`` (a number, or one per intervention),
    counted, refused past ``max_solves``, each reported to ``log`` (a line)."""

    def __init__(self, mdp: MDP, *, what: str, max_solves: int, log=None, **solve_kw):
        self.mdp, self.what, self.max_solves, self.log = mdp, what, int(max_solves), log
        self.solve_kw = solve_kw
        self.count = 0
        self.t0 = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def __call__(self, r) -> Solution:
        if self.count >= self.max_solves:
            raise RuntimeError(
                f"{self.what} used max_solves={self.max_solves} solves without converging"
            )
        self.count += 1
        sol = solve(self.mdp, r, **self.solve_kw)
        if self.log:
            if np.ndim(r) == 0:
                line = (
                    f"r={_r_text(r)}  E[U]={sol.total_usage:.6f}  E[S]={sol.expected_success:.6f}  "
                    f"({self.seconds():.3f}s)"
                )
            else:
                line = (
                    f"r={np.round(r, 6).tolist()}  E[U]={np.round(sol.expected_usage, 6).tolist()}"
                    f"  E[S]={sol.expected_success:.6f}"
                )
            self.log(f"solve {self.count:3d}: {line}")
        return sol


def raise_until(at, r: float, sol: Solution, going_on, *, factor: float = 8.0, r_max=R_MAX):
    """From ``sol = at(r)``, solve at ``r * factor``, ``r * factor**2``, ... while
    ``going_on(previous, new)`` holds and r stays <= ``r_max``.

    Returns ``(r_prev, prev, r_next, new)``: the last two help costs and their
    solutions, ``new`` the first one for which ``going_on`` is false, or None (not
    solved) when ``r_next`` passed ``r_max``.
    """
    while True:
        r_next = r * factor
        if r_next > r_max:
            return r, sol, r_next, None
        new = at(r_next)
        if not going_on(sol, new):
            return r, sol, r_next, new
        r, sol = r_next, new


@dataclass
class SearchResult:
    budget: float
    r: float
    policy: Solution  # deterministic, usage <= budget (the less-help side)
    more_help: Solution | None  # the other side of the breakpoint, when mixed
    weight_more_help: float | None
    solves: int
    seconds: float
    rule: str
    gamma: float
    traced: bool = False  # the per-task trace answered it (counted in solves as one)

    @property
    def solves_text(self) -> str:  # as printed: a line a solve, the trace apart
        n = self.solves - self.traced
        return f"{'trace + ' * self.traced}{n} solve{'s' * (n != 1)}"

    @property
    def expected_usage(self) -> float:
        if self.more_help is None:
            return self.policy.total_usage
        w = self.weight_more_help
        return w * self.more_help.total_usage + (1 - w) * self.policy.total_usage

    @property
    def expected_success(self) -> float:
        if self.more_help is None:
            return self.policy.expected_success
        w = self.weight_more_help
        return w * self.more_help.expected_success + (1 - w) * self.policy.expected_success

    def to_json(self) -> dict:
        mixture = None
        if self.more_help is not None:
            mixture = {
                "r": self.r,
                "weight_more_help": self.weight_more_help,
                "more_help": _summary(self.more_help),
                "less_help": _summary(self.policy),
            }
        return _search_json(
            self,
            budget=self.budget,
            r=self.r,
            expected_usage=min(self.expected_usage, self.budget),
            expected_success=self.expected_success,
            mixture=mixture,
        )


def _search_json(res: SearchResult | MixResult, **fields) -> dict:
    """search.json (docs/method.md, "Outputs"): ``fields`` (budget, r, expected_usage,
    expected_success, mixture), then the search's solves, seconds, rule and gamma."""
    return {
        **fields,
        "solves": res.solves,
        "seconds": res.seconds,
        "rule": res.rule,
        "gamma": res.gamma,
    }


def _summary(sol: Solution) -> dict:
    return {"expected_usage": sol.total_usage, "expected_success": sol.expected_success}


@dataclass
class MixResult:
    """K > 1 interventions (``budgets.<name>=C``): the randomized policy of
    ``mix_budgets``, per episode component i with probability ``weights[i]``."""

    names: list[str]  # the interventions, in action order
    budgets: np.ndarray  # one per intervention
    policies: list[Solution]
    weights: np.ndarray
    solves: int
    seconds: float
    rule: str
    gamma: float
    least_help: Solution | None = None  # policy.parquet when no component fits alone

    def fitting(self) -> list[int]:
        """The components that meet every budget on their own."""
        ok = [np.all(p.expected_usage <= self.budgets + USAGE_EPS) for p in self.policies]
        return [i for i, fits in enumerate(ok) if fits]

    @property
    def deterministic(self) -> Solution:
        """The policy of policy.parquet: the most successful component that meets
        every budget on its own; when none does (the least-help policy can leave
        the mixture with weight 0), ``least_help``."""
        fits = self.fitting()
        if not fits:
            if self.least_help is None:
                raise ValueError("no component meets every budget and no least_help is given")
            return self.least_help
        return self.policies[max(fits, key=lambda i: self.policies[i].expected_success)]

    @property
    def expected_usage(self) -> np.ndarray:
        return sum(w * p.expected_usage for w, p in zip(self.weights, self.policies))

    @property
    def expected_success(self) -> float:
        return float(sum(w * p.expected_success for w, p in zip(self.weights, self.policies)))

    def _per_name(self, values) -> dict:
        return dict(zip(self.names, np.asarray(values).tolist()))

    def to_json(self) -> dict:
        mixture = None
        if len(self.policies) > 1:
            mixture = {
                "components": [
                    {
                        "weight": float(w),
                        "r": self._per_name(p.r),
                        "expected_usage": self._per_name(p.expected_usage),
                        "expected_success": p.expected_success,
                        "file": f"policy_mix_{i}.parquet",
                    }
                    for i, (w, p) in enumerate(zip(self.weights, self.policies))
                ]
            }
        return _search_json(
            self,
            budget=self._per_name(self.budgets),
            r=self._per_name(self.deterministic.r),
            expected_usage=self._per_name(np.minimum(self.expected_usage, self.budgets)),
            expected_success=self.expected_success,
            mixture=mixture,
        )


def search_budget(
    mdp: MDP,
    budget: float,
    *,
    gamma: float,
    rule: str = "exact",
    p_row: np.ndarray | None = None,
    max_solves: int = 200,
    log=None,
    method: str = "auto",
    **solver_kw,
) -> SearchResult:
    """Find the largest-usage policy with E[U] <= ``budget`` (one intervention) and
    the mixture that spends the budget exactly.

    ``method``: ``"frontier"`` answers from the per-task trace (``helpdp.trace``),
    ``"solves"`` by the chord search over solves, ``"auto"`` the former where it
    applies (exact rule, acyclic graph) and the latter elsewhere."""
    if mdp.n_actions != 2:
        raise ValueError(
            f"search_budget handles one intervention; this dataset has {mdp.n_actions - 1} "
            "(use mix_budgets, or budgets.<name>=C on the command line)"
        )
    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget must be a finite number >= 0, got {budget!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method != "solves" and _trace.applies(mdp, rule):
        res = _search_frontier(
            mdp, float(budget), gamma=gamma, max_solves=max_solves, log=log, **solver_kw
        )
        if res is not None:
            return res
    elif method == "frontier":
        raise ValueError(
            "method='frontier' needs rule='exact', one intervention and an acyclic graph"
        )
    at = Solves(
        mdp,
        what="budget search",
        max_solves=max_solves,
        log=log,
        gamma=gamma,
        rule=rule,
        p_row=p_row,
        **solver_kw,
    )

    def result(r, hi, lo=None):
        w = None
        if lo is not None and budget - hi.total_usage > USAGE_EPS:
            w = (budget - hi.total_usage) / (lo.total_usage - hi.total_usage)
            w = min(max(w, 0.0), 1.0)
        return SearchResult(
            budget=float(budget),
            r=float(r),
            policy=hi,
            more_help=lo if w else None,
            weight_more_help=w if w else None,
            solves=at.count,
            seconds=at.seconds(),
            rule=rule,
            gamma=gamma,
        )

    lo = at(0.0)
    r_lo = 0.0
    if lo.total_usage <= budget + USAGE_EPS:
        return result(0.0, lo)
    r_hi = 1.0
    hi = at(r_hi)
    if hi.total_usage > budget + USAGE_EPS:  # bracket: r = 8, 64, ... until E[U] <= C
        r_lo, lo, r_hi, hi = raise_until(
            at, r_hi, hi, lambda _, new: new.total_usage > budget + USAGE_EPS
        )
        if hi is None:
            raise InfeasibleBudget(
                f"budget {budget} is below the least expert usage any policy in the data reaches "
                f"(E[U] = {lo.total_usage:.6g} at r = {r_lo:.3g}): some states were only ever "
                "observed with help"
            )
    if rule == "exact":
        tol_line = 1e-10 + 10 * solver_kw.get("tol", 1e-10)
        while True:
            du = lo.total_usage - hi.total_usage
            r_x = (lo.expected_success - hi.expected_success) / du if du > 0 else math.nan
            if not (r_lo < r_x < r_hi):  # rounding: fall back to log-scale bisection
                r_x = math.sqrt(r_lo * r_hi) if r_lo > 0 else r_hi / 2
            x = at(r_x)
            if x.lagrangian() <= hi.lagrangian(r_x) + tol_line:
                return result(r_x, hi, lo)  # r_x is the breakpoint
            if x.total_usage <= budget + USAGE_EPS:
                hi, r_hi = x, r_x
            else:
                lo, r_lo = x, r_x
            if r_hi - r_lo <= 1e-12 * r_hi:
                return result(r_hi, hi, lo)
    while r_lo > 0 or r_hi > 1e-12:  # paper: bisect log r while r moves
        r_x = math.sqrt(r_lo * r_hi) if r_lo > 0 else r_hi / 8
        if _r_text(r_x) in (_r_text(r_lo), _r_text(r_hi)):
            break  # r stopped moving: the two ends' policies are the answer
        x = at(r_x)
        if x.total_usage <= budget + USAGE_EPS:
            hi, r_hi = x, r_x
        else:
            lo, r_lo = x, r_x
    return result(r_hi, hi, lo)


def _search_frontier(
    mdp: MDP, budget: float, *, gamma: float, max_solves: int, log=None, **solver_kw
) -> SearchResult | None:
    """The budget search answered from the global frontier (None: fall back)."""
    t0 = time.perf_counter()
    tie_tol = solver_kw.get("tie_tol", 1e-12)
    traced = ("frontier", float(gamma), float(tie_tol)) not in mdp.cache
    fr = _trace.frontier_of(mdp, gamma=gamma, tie_tol=tie_tol)
    if fr is None:
        return None
    if log and traced:
        log(
            f"trace: {fr.n_tasks} tasks, {len(fr)} frontier policies ({fr.seconds:.3f}s, "
            "one pass over every task)"
        )
    q = fr.query(budget)  # InfeasibleBudget below the least usage
    at = Solves(
        mdp,
        what="budget search",
        max_solves=max_solves,
        log=log,
        gamma=gamma,
        rule="exact",
        **solver_kw,
    )

    def materialise(v: _trace.Vertex, r_first: float) -> Solution | None:
        for r in dict.fromkeys([r_first, _r_mid(v)]):
            sol = at(r)
            if _on_vertex(sol, v):
                return sol
        return None

    hi = materialise(q.less_help, q.r)
    lo = None
    if hi is not None and q.more_help is not None:
        lo = materialise(q.more_help, _r_mid(q.more_help))
    if hi is None or (q.more_help is not None and lo is None):
        if log:
            log("trace: a solve disagrees with the frontier; falling back to the solve search")
        return None
    return SearchResult(
        budget=float(budget),
        r=q.r,
        policy=hi,
        more_help=lo,
        weight_more_help=q.weight_more_help,
        solves=at.count + 1,  # the trace: one solve, whether traced now or earlier
        seconds=time.perf_counter() - t0,
        rule="exact",
        gamma=gamma,
        traced=True,
    )


def _r_text(r: float) -> str:
    """r as the search reports it (``R_DIGITS`` significant digits)."""
    return f"{r:.{R_DIGITS}g}"


def _r_mid(v: _trace.Vertex) -> float:
    """A help cost inside the interval where ``v`` is optimal."""
    return v.r_min + 0.5 * (v.r_max - v.r_min) if np.isfinite(v.r_max) else 2 * v.r_min + 1


def _on_vertex(sol: Solution, v: _trace.Vertex) -> bool:
    """Whether a solve reproduces the frontier vertex's E[U] and E[S]."""
    return (
        abs(sol.total_usage - v.expected_usage) <= FRONTIER_CHECK_TOL
        and abs(sol.expected_success - v.expected_success) <= FRONTIER_CHECK_TOL
    )


def search_budgets(
    mdp: MDP,
    budgets,
    *,
    gamma: float,
    rule: str = "exact",
    p_row: np.ndarray | None = None,
    max_solves: int = 200,
    log=None,
    method: str = "auto",
    **solver_kw,
) -> Iterator[SearchResult]:
    """``search_budget`` for each of ``budgets``, in order, as a generator: the same
    results (the same policies, bit for bit, r and mixture weights).

    Where the per-task trace answers the search (``method`` not ``"solves"``, the
    exact rule, one intervention, an acyclic graph), every budget's two policies
    are materialised together: one pass that keeps no per-state values gives E[U]
    and E[S] at every budget's r* (``cost_means``), which tells whether the policy at
    r* is the frontier's less-help vertex or ``search_budget`` would solve again in
    the middle of its interval; then one batched backward pass (``solve_costs``)
    over the help costs of those policies and of the more-help ones (the middle of
    the interval left of r*). A budget whose policies disagree with the frontier
    falls back to the solve-based search, as ``search_budget`` does. Budgets are taken in batches whose Solutions fit ``SWEEP_BATCH_BYTES``; the
    Solutions of a batch share blocks of memory, so a consumer that drops each result
    before asking for the next holds one batch at a time."""
    budgets = [float(b) if isinstance(b, (int, float)) else b for b in budgets]
    kw = dict(gamma=gamma, max_solves=max_solves, log=log, **solver_kw)
    if mdp.n_actions != 2 or method == "solves" or not _trace.applies(mdp, rule):
        for b in budgets:
            yield search_budget(mdp, b, rule=rule, p_row=p_row, method=method, **kw)
        return
    for b in budgets:
        if not (isinstance(b, float) and math.isfinite(b) and b >= 0):
            raise ValueError(f"budget must be a finite number >= 0, got {b!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    t0 = time.perf_counter()
    tie_tol = solver_kw.get("tie_tol", 1e-12)
    traced = ("frontier", float(gamma), float(tie_tol)) not in mdp.cache
    fr = _trace.frontier_of(mdp, gamma=gamma, tie_tol=tie_tol)
    if fr is None:
        for b in budgets:
            yield search_budget(mdp, b, method="solves", **kw)
        return
    if log and traced:
        log(
            f"trace: {fr.n_tasks} tasks, {len(fr)} frontier policies ({fr.seconds:.3f}s, "
            "one pass over every task)"
        )
    queries, error = [], None
    for b in budgets:
        try:
            queries.append(fr.query(b))
        except InfeasibleBudget as e:
            error = e  # raised after the results before it
            break
    # search_budget solves at r* first and keeps that policy when it is the frontier's
    # less-help vertex, else solves in the middle of the vertex's interval: one pass
    # that keeps no values (E[U], E[S] at every r*) tells which, for every budget
    r_star = list(dict.fromkeys(q.r for q in queries))
    means = dict(zip(r_star, map(tuple, cost_means(mdp, r_star, gamma=gamma, tie_tol=tie_tol))))
    per_batch = max(1, SWEEP_BATCH_BYTES // (2 * 25 * mdp.n_states))
    try:
        for i in range(0, len(queries), per_batch):
            for res in _frontier_batch(mdp, queries[i : i + per_batch], means, tie_tol, kw):
                if traced:  # the first result's seconds include the trace
                    res.seconds = time.perf_counter() - t0
                    traced = False
                yield res
            # hold no result while the next batch is computed: a batch's Solutions share
            # its block of memory, which the next batch reuses when no result keeps it
            res = None
    finally:
        mdp.cache.pop("spare_block", None)  # the sweep's block goes with the sweep
    if error is not None:
        raise error


def _frontier_batch(mdp: MDP, queries, means: dict, tie_tol, kw) -> list[SearchResult]:
    """``search_budget``'s results for the frontier ``queries``, their policies
    materialised by one batched pass (``search_budgets``); ``means[r]`` is (E[S],
    E[U]) at each r*."""
    t0 = time.perf_counter()
    gamma, log = kw["gamma"], kw["log"]
    plans = []
    for q in queries:
        ok = _on_vertex(_Means(*means[q.r]), q.less_help)
        r_hi = q.r if ok else _r_mid(q.less_help)
        r_lo = _r_mid(q.more_help) if q.more_help is not None else None
        plans.append((q, ok, r_hi, r_lo))
    want = [r for _, ok, r_hi, r_lo in plans for r in (r_hi, r_lo) if r is not None]
    want = list(dict.fromkeys(want))
    sols = dict(zip(want, solve_costs(mdp, want, gamma=gamma, tie_tol=tie_tol)))
    out = []
    for q, ok, r_hi, r_lo in plans:
        seen = [q.r] if ok else list(dict.fromkeys([q.r, r_hi]))
        hi = sols[r_hi] if r_hi != q.r or ok else None
        if hi is not None and not _on_vertex(hi, q.less_help):
            hi = None
        lo = None
        if hi is not None and r_lo is not None:
            seen.append(r_lo)
            lo = sols[r_lo] if _on_vertex(sols[r_lo], q.more_help) else None
        if log:
            for k, r in enumerate(dict.fromkeys(seen)):
                e_s, e_u = (
                    (sols[r].expected_success, sols[r].total_usage) if r in sols else means[r]
                )
                log(f"solve {k + 1:3d}: r={_r_text(r)}  E[U]={e_u:.6f}  E[S]={e_s:.6f}  (batched)")
        if hi is None or (q.more_help is not None and lo is None):
            if log:
                log("trace: a solve disagrees with the frontier; falling back to the solve search")
            out.append(search_budget(mdp, q.budget, method="solves", **kw))
            continue
        out.append(
            SearchResult(
                budget=q.budget,
                r=q.r,
                policy=hi,
                more_help=lo,
                weight_more_help=q.weight_more_help,
                solves=len(dict.fromkeys(seen)) + 1,  # + the trace, shared, as alone
                seconds=(time.perf_counter() - t0) / len(queries),
                rule="exact",
                gamma=gamma,
                traced=True,
            )
        )
    return out


@dataclass
class _Means:
    """E[S], E[U] of a solve known without its Solution (``cost_means``)."""

    expected_success: float
    total_usage: float


def mix_budgets(
    mdp: MDP,
    budgets: np.ndarray,
    *,
    gamma: float,
    max_solves: int = 200,
    tol: float = 1e-10,
    log=None,
    **solver_kw,
) -> tuple[list[Solution], np.ndarray, int]:
    """K >= 1 interventions: the best randomized policy with E[U^k] <= budgets[k].

    Dantzig-Wolfe column generation on the occupancy LP, with the DP as pricing
    oracle: a small master LP mixes the deterministic policies found so far; its
    dual prices of the K usage constraints are help costs r; the DP at r returns the
    policy of largest reduced value ``S - r.U``; the loop stops when no policy beats
    the master's dual bound. The result mixes at most K + 1 policies (per episode,
    policy i with probability ``weights[i]``) and its E[S] is the LP optimum (tested).
    Returns (policies, weights, solves).
    """
    from scipy.optimize import linprog

    budgets = np.asarray(budgets, np.float64)
    k = mdp.n_actions - 1
    if budgets.shape != (k,) or np.any(budgets < 0):
        raise ValueError(f"need one budget >= 0 per intervention ({k}), got {budgets}")
    at = Solves(
        mdp,
        what="mixture search",
        max_solves=max_solves,
        log=log,
        gamma=gamma,
        rule="exact",
        tol=tol,
        **solver_kw,
    )
    cols = [at(np.zeros(k))]
    if np.all(cols[0].expected_usage <= budgets + USAGE_EPS):
        return cols, np.ones(1), at.count
    least = at(np.full(k, R_MAX))
    if np.any(least.expected_usage > budgets + USAGE_EPS):
        raise InfeasibleBudget(
            f"budgets {budgets.tolist()} are below the least usage the data allows "
            f"({least.expected_usage.tolist()}): some states were only ever observed with help"
        )
    cols.append(least)
    while True:
        S = np.array([c.expected_success for c in cols])
        U = np.array([c.expected_usage for c in cols])  # (n_cols, K)
        res = linprog(
            -S,
            A_ub=U.T,
            b_ub=budgets,
            A_eq=np.ones((1, len(cols))),
            b_eq=[1.0],
            bounds=(0, None),
            method="highs",
        )
        if res.status != 0:
            raise RuntimeError(f"master LP failed: {res.message}")
        r = np.maximum(-res.ineqlin.marginals, 0.0)  # prices of the usage constraints
        mu = -res.eqlin.marginals[0]
        new = at(r)
        if new.lagrangian(r) <= mu + 1e-10 + 10 * tol:
            keep = res.x > 1e-12
            w = res.x[keep] / res.x[keep].sum()
            return [c for c, m in zip(cols, keep) if m], w, at.count
        cols.append(new)


def policy_frame(ds: Dataset, sol: Solution) -> pd.DataFrame:
    """The policy as docs/method.md, "Outputs"'s policy.parquet: one row per state with an
    action to choose (non-terminal, at least one observed action)."""
    keep = sol.action >= 0
    usage = sol.values[:, 2:]
    df = pd.DataFrame(
        {
            "state_id": ds.state_ids[keep],
            "action": sol.action[keep].astype(np.int8),
            "usage": usage.sum(axis=1)[keep],
            "success": sol.values[keep, 1],
        }
    )
    if usage.shape[1] > 1:
        for k, name in enumerate(ds.actions[1:]):
            df[f"usage_{name}"] = usage[keep, k]
    return df.sort_values("state_id", ignore_index=True)


def write_result(ds: Dataset, res: SearchResult | MixResult, out: Path) -> Path:
    """Write search.json, policy.parquet and, when mixed, policy_more_help.parquet
    (one intervention) or policy_mix_<i>.parquet (K > 1)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.json").write_text(json.dumps(res.to_json(), indent=2) + "\n")
    if isinstance(res, MixResult):
        policy_frame(ds, res.deterministic).to_parquet(out / "policy.parquet", index=False)
        for i, p in enumerate(res.policies if len(res.policies) > 1 else []):
            policy_frame(ds, p).to_parquet(out / f"policy_mix_{i}.parquet", index=False)
        return out
    policy_frame(ds, res.policy).to_parquet(out / "policy.parquet", index=False)
    more = out / "policy_more_help.parquet"
    if res.more_help is not None:
        policy_frame(ds, res.more_help).to_parquet(more, index=False)
    elif more.exists():
        more.unlink()  # a stale file from an earlier run would contradict search.json
    return out


def warm_up(mdp: MDP, **solver_kw) -> str:
    """numba compiles its kernels (or loads them from its cache) on the first solve: run
    it here, once, before a search is timed, so that the search's time is the search's;
    returns the note that reports it apart (`` + 0.051s warm-up (...)``)."""
    t = time.perf_counter()
    solve(mdp, 1.0, **solver_kw)
    if _trace.applies(mdp, solver_kw.get("rule", "exact")):
        _trace.warm_up(mdp)
        solve_costs(mdp, [1.0], gamma=solver_kw["gamma"])  # the sweep's batched pass
    return f" + {time.perf_counter() - t:.3f}s warm-up (numba compile/load, first solve)"
