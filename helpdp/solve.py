"""Thin, checked wrappers around the kernels: one solve at fixed help costs r.

``solve(mdp, r)`` is the Lagrangian value iteration (``rule="exact"``) or the
paper's usage/policy iteration with PRM scores (``rule="paper"``), returning a
``Solution``: the deterministic policy, per-state V, S and M^k, and the start-state
means E[S] and E[U^k] (docs/method.md, "The equations").
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd

from helpdp._src import forecast as kf
from helpdp._src import kernels, parametric, pertask
from helpdp._src.bundles import Backup, Chunks, Values
from helpdp.data import MDP, Dataset, DatasetError

RULES = ("exact", "paper")
# mean states per level below which the level-parallel pass is never tried: a
# parallel region per level only pays off on wide levels, and on a busy machine
# small regions wait for descheduled threads (measured: 10^6 transitions, 17
# levels, 7 ms quiet, 200 ms busy)
PARALLEL_MIN_LEVEL = 65536
PARALLEL_CHUNK = 2048  # states per parallel task of the level-parallel pass
# states per chunk of the per-task pass (whole tasks; a larger task is one chunk)
TASK_CHUNK = 8192
# the per-task and level-parallel passes are timed against the serial one as they
# run; a path is re-timed when it has not run for this many solves of the MDP
RETIME_EVERY = 32
# the kernel's instantaneous count of runnable threads (4th field: "running/total")
LOADAVG = "/proc/loadavg"
PATHS = ("auto", "tasks", "levels", "serial")
# bytes of the per-task scratch block of ``solve_costs`` (a task's states x 3 x help
# costs, float64): the costs are taken in groups that keep it in a core's cache
BATCH_SCRATCH = 2 << 20
NO_ORDER = np.zeros(0, np.int64)  # the kernels' "n - 1, ..., 0" (kernels.sweep)
# output sets of acyclic solves kept for reuse (``_outputs``): a search holds two
SPARE_SETS = 3


@dataclass(frozen=True)
class Solution:
    """A deterministic policy and its values at help costs ``r``."""

    r: np.ndarray  # float64 (K,): cost of each intervention
    action: np.ndarray  # int8 (n,): chosen action per state, -1 where none applies
    values: np.ndarray  # float64 (n, 2 + K): V, S, M^1..M^K per state
    expected_success: float  # E[S] over start states (episode-weighted)
    expected_usage: np.ndarray  # float64 (K,): E[M^k] over start states
    sweeps: int  # sweeps of the state graph this solve took
    rule: str

    @property
    def total_usage(self) -> float:
        return float(self.expected_usage.sum())

    def lagrangian(self, r=None) -> float:
        """E[S] - r . E[U] (at the solve's own r by default)."""
        r = self.r if r is None else np.broadcast_to(np.asarray(r, np.float64), self.r.shape)
        return float(self.expected_success - r @ self.expected_usage)


def _costs(mdp: MDP, r) -> np.ndarray:
    k = mdp.n_actions - 1
    r = np.asarray(r, dtype=np.float64)
    if r.ndim == 0:
        r = np.full(k, float(r))
    if r.shape != (k,):
        raise ValueError(
            f"r must be a scalar or have {k} entries (one per intervention), got {r.shape}"
        )
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"help costs must be finite and >= 0, got {r}")
    return np.r_[0.0, r]


def solve(
    mdp: MDP,
    r,
    *,
    gamma: float,
    rule: str = "exact",
    p_row: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iters: int = 100_000,
    tie_tol: float = 1e-12,
    dm_tol: float = 1e-9,
    parallel: bool | str = True,
) -> Solution:
    """Solve at help costs ``r`` (scalar, or one per intervention).

    On acyclic graphs one reverse-topological sweep is exact. With cycles the
    sweeps repeat until the largest change is below ``tol``; ``gamma == 1`` is
    refused there, since value iteration need not converge. ``rule="paper"``
    needs ``p_row`` (a PRM success estimate per state-action row, see
    ``score_rows``); on cyclic graphs it stops after ``max_iters`` sweeps, as in
    the iteration of Min et al. (2025).

    ``parallel`` picks the pass on acyclic graphs (every pass gives the same
    numbers): ``True``/``"auto"`` chooses among the eligible passes by their
    times measured under the same load (``choose_path``, ``free_cpus``: serial when
    no CPU is free), ``False``/``"serial"`` one serial sweep, ``"tasks"`` the per-task pass (tasks handed to numba threads on demand, each
    task serial: no barrier), ``"levels"`` the level-synchronous pass (one barrier
    per level; only wins on one huge task with wide levels on an idle machine).
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    costs = _costs(mdp, r)
    k = mdp.n_actions - 1
    if rule == "paper":
        if p_row is None:
            raise ValueError("rule='paper' needs PRM scores (scores.parquet)")
        p_row = np.ascontiguousarray(p_row, dtype=np.float64)
        if p_row.shape != (mdp.n_rows,):
            raise ValueError(f"p_row must have one entry per row ({mdp.n_rows}), got {p_row.shape}")
    else:
        p_row = np.zeros(0)
    rule_id = kernels.RULE_EXACT if rule == "exact" else kernels.RULE_PAPER
    backup = Backup(p_row, costs, float(gamma), rule_id, float(tie_tol), float(dm_tol))
    if mdp.acyclic:
        out = _outputs(mdp, 2 + k)
        _acyclic_pass(mdp, parallel, backup, out)
        sweeps = 1
    else:
        out = Values(np.zeros((mdp.n_states, 2 + k)), np.full(mdp.n_states, -1, np.int8))
        if gamma >= 1.0:
            raise ValueError(
                "the transition graph has cycles and gamma = 1: value iteration is not "
                "guaranteed to converge; pass gamma < 1 (e.g. gamma=0.99)"
            )
        sweeps, change = kernels.iterate_sweeps(mdp.order, mdp.graph, backup, tol, max_iters, out)
        if change >= tol and rule == "exact":
            raise RuntimeError(
                f"value iteration did not reach tol={tol} in {max_iters} sweeps (last change {change:.3g})"
            )
    val = out.val
    starts = _starts(mdp)
    means = kernels.weighted_means(val[starts], mdp.start_weight[starts])
    return Solution(
        r=costs[1:],
        action=out.action,
        values=val,
        expected_success=float(means[1]),
        expected_usage=means[2:].copy(),
        sweeps=int(sweeps),
        rule=rule,
    )


def _refs(out: Values) -> int:
    """References to the arrays of ``out`` (CPython's count, seen from here)."""
    return sys.getrefcount(out.val) + sys.getrefcount(out.action)


# what _refs counts for arrays that nothing but their Values holds
_UNHELD = _refs(Values(np.zeros(1), np.zeros(1, np.int8)))


def _outputs(mdp: MDP, n_col: int) -> Values:
    """The arrays an acyclic solve writes: those of an earlier solve of ``mdp`` that
    nothing holds any more (every ``Solution`` and view of them dropped: CPython's
    reference count), else new ones. New memory costs more than the pass's own writes:
    the kernel faults and zeroes it page by page, and the threads of the per-task pass
    wait on each other's faults, on the lock of the address space (measured at 2.2 M
    transitions: the per-task pass 7.2 ms into a reused array, 14.8 ms into a new one;
    serial 13.2 and 17.3 ms). The MDP keeps the last ``SPARE_SETS`` sets (``n x (2 +
    K)`` float64 and ``n`` int8 each), so that the chord search of ``search_budget``,
    which holds its two bracketing solutions while it solves a third, writes every
    solve into the memory of the one it dropped (measured on 60,000 tasks, 2.3 M
    states: 29.9 ms a solve into new memory, 20 ms into a kept set)."""
    shape = (mdp.n_states, n_col)
    pool = mdp.cache.pop("spares", [])  # one taker, even across threads
    for i, spare in enumerate(pool):
        if spare.val.shape == shape and _refs(spare) <= _UNHELD:
            pool.append(pool.pop(i))  # most recently used last
            break
    else:
        pool = [*pool, Values(np.empty(shape), np.empty(shape[0], np.int8))][-SPARE_SETS:]
    mdp.cache["spares"] = pool
    return pool[-1]


def _reused(mdp: MDP, key: str, shape: tuple) -> Values:
    """Arrays ``val`` (``shape``, float64) and ``action`` (``shape[:-1]``, int8) for a
    pass that writes every element and reads none before (the old values only feed a
    solve's change measure): those kept under ``mdp.cache[key]`` by the last call when
    nothing else holds them (every ``Solution`` and view of them dropped: CPython's
    reference count), else new ones, which are kept in their place. A kept block of
    more rows (a batch of more help costs) serves a smaller one by its first rows."""
    spare = mdp.cache.pop(key, None)  # one taker, even across threads
    fits = spare is not None and spare.val.shape[1:] == shape[1:]
    if not fits or spare.val.shape[0] < shape[0] or _refs(spare) > _UNHELD:
        spare = Values(np.empty(shape), np.empty(shape[:-1], np.int8))
    mdp.cache[key] = spare
    if spare.val.shape[0] == shape[0]:
        return spare
    return Values(spare.val[: shape[0]], spare.action[: shape[0]])


def _batched(mdp: MDP) -> bool:
    """Whether ``solve_costs`` runs the batched pass on ``mdp``."""
    return mdp.n_actions == 2 and mdp.acyclic and mdp.comp_ptr is not None


def _sweep_costs(mdp: MDP, rs, gamma: float, tie_tol: float, write: bool):
    """``parametric.sweep_costs`` over ``rs`` in groups: yields (r, start means (K, 3),
    values (K, n, 3), actions (K, n)), the last two empty unless ``write``."""
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    for r in rs:
        _costs(mdp, r)  # the same checks as solve
    biggest = int(np.diff(mdp.comp_ptr).max())
    group = max(1, BATCH_SCRATCH // (24 * biggest))
    starts = np.flatnonzero(mdp.start_weight != 0.0)
    n = mdp.n_states if write else 0
    for g in range(0, len(rs), group):
        r = np.array(rs[g : g + group], np.float64)
        # the last batch's block when its Solutions are gone (search_budgets drops it)
        vals, actions = _reused(mdp, "spare_block", (len(r), n, 3))
        start_vals = np.empty((len(starts), len(r), 3))
        _sweep_parts(
            mdp, r, float(gamma), float(tie_tol), starts, start_vals, Values(vals, actions)
        )
        yield r, parametric.start_means(starts, mdp.start_weight, start_vals), vals, actions
        del vals, actions  # (held here, they would never be free for the next group)


def _sweep_parts(mdp: MDP, r, gamma, tie_tol, starts, start_vals, out: Values) -> None:
    """``parametric.sweep_costs`` over every task, the tasks cut into one run of
    consecutive tasks per thread (about equal in states; the kernel releases the
    GIL): as many threads as ``free_cpus`` finds CPUs for, one on a busy machine.
    The runs write disjoint states and start rows, so the result is the one-call
    result bit for bit (``out``: the values and actions written, empty unless written)."""
    comp_ptr = mdp.comp_ptr
    free = free_cpus(numba.get_num_threads())
    n_parts = max(1, free if free is not None else numba.get_num_threads())
    cuts = np.searchsorted(comp_ptr, np.linspace(0, mdp.n_states, n_parts + 1)[1:-1])
    bounds = np.unique(np.r_[0, cuts, len(comp_ptr) - 1])
    g = mdp.graph

    def run(c0: int, c1: int) -> None:
        i0, i1 = np.searchsorted(starts, [comp_ptr[c0], comp_ptr[c1]])
        parametric.sweep_costs(
            comp_ptr[c0 : c1 + 1], g, r, gamma, tie_tol, starts[i0:i1], start_vals[i0:i1], out
        )

    if len(bounds) <= 2:
        run(0, len(comp_ptr) - 1)
        return
    with ThreadPoolExecutor(len(bounds) - 1) as ex:
        list(ex.map(run, bounds[:-1], bounds[1:]))


def solve_costs(mdp: MDP, rs, *, gamma: float, tie_tol: float = 1e-12) -> list[Solution]:
    """``[solve(mdp, r, gamma=gamma, tie_tol=tie_tol) for r in rs]``, bit for bit, in
    one backward pass per group of help costs (``parametric.sweep_costs``: each task
    backed up at every r while it is in cache).

    The batched pass covers the exact rule with one intervention on an acyclic graph
    laid out by task (``mdp.comp_ptr``); elsewhere this is the loop of solves. K
    Solutions take K * n * 25 bytes, as K solves' do; those of one group are views
    of one block of memory, which the next call on the same MDP writes into once the
    last of them is gone (``_reused``; ``search_budgets`` lets it go at its end).
    """
    rs = [float(r) for r in rs]
    if not _batched(mdp):
        return [solve(mdp, r, gamma=gamma, tie_tol=tie_tol) for r in rs]
    out = []
    for r, means, vals, actions in _sweep_costs(mdp, rs, gamma, tie_tol, True):
        for k in range(len(r)):
            out.append(
                Solution(
                    r=np.array([r[k]]),
                    action=actions[k],
                    values=vals[k],
                    expected_success=float(means[k, 1]),
                    expected_usage=means[k, 2:].copy(),
                    sweeps=1,
                    rule="exact",
                )
            )
    return out


def cost_means(mdp: MDP, rs, *, gamma: float, tie_tol: float = 1e-12) -> np.ndarray:
    """E[S] and E[U] (rows) of ``solve(mdp, r)`` at every ``r`` of ``rs``, bit for bit,
    from one pass that keeps no value per state (``solve_costs`` without the
    Solutions: the cost of a pass, not of K): (len(rs), 2)."""
    rs = [float(r) for r in rs]
    if not _batched(mdp):
        sols = [solve(mdp, r, gamma=gamma, tie_tol=tie_tol) for r in rs]
        return np.array([[s.expected_success, s.total_usage] for s in sols]).reshape(-1, 2)
    out = [m[:, 1:] for _, m, _, _ in _sweep_costs(mdp, rs, gamma, tie_tol, False)]
    return np.concatenate(out) if out else np.zeros((0, 2))


def _starts(mdp: MDP) -> np.ndarray:
    """The states of non-zero start weight, ascending (cached on ``mdp``): the means of
    a solve read these rows only."""
    starts = mdp.cache.get("starts")
    if starts is None:
        starts = mdp.cache["starts"] = np.flatnonzero(mdp.start_weight != 0.0)
    return starts


def _plan(mdp: MDP) -> dict:
    """The per-task chunk plan of ``mdp`` (cached on it)."""
    plan = mdp.cache.get("plan")
    if plan is None:
        n = mdp.n_states
        plan = {}
        if mdp.comp_ptr is not None:
            plan["chunks"] = Chunks(*pertask.chunk_plan(mdp.comp_ptr, TASK_CHUNK))
            biggest = int(np.diff(mdp.comp_ptr).max())
        else:
            biggest = n
        plan["levels_ok"] = biggest >= n // 2 and n >= PARALLEL_MIN_LEVEL * (len(mdp.block_ptr) - 1)
        mdp.cache["plan"] = plan
    return plan


def eligible_paths(mdp: MDP) -> list[str]:
    """The passes worth running on ``mdp`` with the current numba threads, serial
    first: ``tasks`` when there are at least two chunks of tasks, ``levels`` when
    one task holds most states and its levels are wide."""
    paths = ["serial"]
    if not mdp.acyclic or numba.get_num_threads() < 2:
        return paths
    plan = _plan(mdp)
    if "chunks" in plan and len(plan["chunks"].sched) >= 2:
        paths.append("tasks")
    if plan["levels_ok"]:
        paths.append("levels")
    return paths


def free_cpus(threads: int) -> int | None:
    """How many of ``threads`` numba threads would find a CPU free right now: the CPUs
    this process may use less the threads of other work that are runnable at this
    instant (the kernel's count in ``/proc/loadavg``: an instantaneous count, not the
    load average), clipped to ``[0, threads]``; None where the kernel does not say.

    The count is machine-wide, so it is taken against ``os.cpu_count()``: on a large
    node shared with others, a few free CPUs still count as free."""
    try:
        with open(LOADAVG, "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None
    cpus = os.cpu_count() or 1
    try:
        mine = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        mine = cpus
    others = running - 1  # this thread is running while it reads
    return max(0, min(threads, mine, cpus - others))


def choose_path(mdp: MDP, paths: list[str], context=None) -> str:
    """The eligible pass with the smallest measured time per solve on this MDP when
    the machine is in the same ``context`` (``free_cpus`` at the solve's start: times
    measured with both CPUs free never decide a solve that starts with none free).

    Each pass is timed on first use in a context; a pass is timed again once it has
    not run for its re-time interval (``RETIME_EVERY`` solves in that context,
    doubled each time it is re-timed and still loses by more than 10%, up to 32 times
    that), so a threaded pass that loses to the serial one on a busy machine is
    dropped after one solve and costs ever less to re-check, and is taken up again
    when it wins. With no CPU free (``context == 0``) the pass is serial, untimed: a
    second thread would only wait for a CPU (measured on 2 cores with two busy loops:
    the per-task pass 1.4x the serial one)."""
    if context == 0:
        return "serial"
    st = _timing(mdp, context)
    st["n"] += 1
    for p in paths:
        if p not in st["secs"] or st["n"] - st["last"][p] >= st["every"].get(p, RETIME_EVERY):
            return p
    return min(paths, key=lambda p: st["secs"][p])


def _timing(mdp: MDP, context) -> dict:
    table = mdp.cache.setdefault("timing", {})
    return table.setdefault(context, {"n": 0, "secs": {}, "last": {}, "every": {}})


def _record(mdp: MDP, path: str, secs: float, context=None) -> None:
    st = _timing(mdp, context)
    old = st["secs"].get(path)
    # averaged with the previous solve's time when that ran this pass too; a pass
    # re-timed after a pause takes the fresh time (the machine's load changes)
    ran_last = st["last"].get(path) == st["n"] - 1
    st["secs"][path] = 0.5 * (old + secs) if old is not None and ran_last else secs
    st["last"][path] = st["n"]
    best = min(st["secs"].values())
    if st["secs"][path] > 1.1 * best:
        st["every"][path] = min(2 * st["every"].get(path, RETIME_EVERY // 2), 32 * RETIME_EVERY)
    else:
        st["every"][path] = RETIME_EVERY


def _acyclic_pass(mdp: MDP, parallel, backup: Backup, out: Values) -> str:
    """One exact backward pass on an acyclic graph; returns the pass it ran."""
    if parallel is True:
        parallel = "auto"
    elif parallel is False:
        parallel = "serial"
    if parallel not in PATHS:
        raise ValueError(f"parallel must be a bool or one of {PATHS}, got {parallel!r}")
    plan = _plan(mdp)
    paths = eligible_paths(mdp)
    context = None
    if parallel == "auto" and len(paths) > 1:
        context = free_cpus(numba.get_num_threads())
        path = choose_path(mdp, paths, context)
    elif parallel == "auto":
        path = "serial"
    elif parallel == "tasks" and "chunks" not in plan:
        path = "serial"  # not laid out by task (e.g. a derived MDP)
    else:
        path = parallel
    # laid out by task, ``n - 1, ..., 0`` is reverse topological: no order array read
    order = NO_ORDER if mdp.comp_ptr is not None else mdp.order
    g = mdp.graph
    t = time.perf_counter()
    if path == "tasks":
        pertask.backward_chunks(numba.get_num_threads(), plan["chunks"], g, backup, out)
    elif path == "levels":
        kernels.backward_levels(mdp.order, mdp.block_ptr, PARALLEL_CHUNK, g, backup, out)
    else:
        kernels.backward_pass(order, g, backup, out)
    if parallel == "auto" and len(paths) > 1 and context != 0:  # context 0: serial, untimed
        _record(mdp, path, time.perf_counter() - t, context)
    passes = mdp.cache.setdefault("passes", {})  # which pass ran how often (diagnostics)
    passes[path] = passes.get(path, 0) + 1
    return path


def row_states(mdp: MDP) -> np.ndarray:
    """Internal state index of every state-action row."""
    return np.repeat(np.arange(mdp.n_states), np.diff(mdp.sa_ptr))


def score_rows(ds: Dataset) -> np.ndarray:
    """PRM estimates aligned with the MDP's rows; refuses a row without a score."""
    if ds.scores is None:
        raise DatasetError(
            f"{ds.path}: rule=paper needs scores.parquet (PRM estimates); "
            "write it with `python -m prm.score` or use rule=exact"
        )
    mdp = ds.mdp
    na = mdp.n_actions
    row_key = row_states(mdp) * na + mdp.sa_action
    sc = ds.scores
    sc_key = ds.index(sc["state_id"].to_numpy(np.int64)) * na + sc["action"].to_numpy(np.int64)
    order = np.argsort(sc_key, kind="stable")
    sorted_key = sc_key[order]
    dup = sorted_key[1:] == sorted_key[:-1]
    if dup.any():
        r = int(order[1:][dup].min())
        raise DatasetError(f"scores.parquet: row {r}: duplicate score for (state_id, action)")
    pos = np.minimum(np.searchsorted(sorted_key, row_key), len(sorted_key) - 1)
    missing = sorted_key[pos] != row_key
    if missing.any():
        j = int(np.argmax(missing))
        sid = ds.state_ids[row_key[j] // na]
        raise DatasetError(
            f"scores.parquet: column 'p_success': no score for state_id {sid}, action "
            f"{int(mdp.sa_action[j])}, an action observed in transitions.parquet"
        )
    return sc["p_success"].to_numpy(np.float64)[order[pos]]


def state_success(ds: Dataset, *, tol: float = 1e-12, max_iters: int = 100_000) -> np.ndarray:
    """S per state (internal index) under the behaviour policy of the data: at each
    state, actions are taken with their observed frequencies."""
    mdp = ds.mdp
    rs = row_states(mdp)
    totals = np.bincount(rs, weights=mdp.sa_count, minlength=mdp.n_states)
    pi_row = mdp.sa_count / totals[rs]
    val = np.zeros((mdp.n_states, mdp.n_actions + 1))  # S, M^1..M^K, flagged visits
    # with cycles and gamma = 1 this still converges: every observed state has a
    # path to an absorbing state (the episodes that visited it ended)
    flag = np.zeros(mdp.n_states)
    iters = 1 if mdp.acyclic else max_iters
    kf.evaluate_rows(mdp.order, mdp.graph, pi_row, flag, ds.gamma, tol, iters, val)
    return val[:, 0].copy()


def behavior_values(ds: Dataset) -> pd.DataFrame:
    """One row per observed (state, action): ``state_id, action, count, p_success``,
    the probability of eventual success after taking ``action`` at the state and
    then continuing as the data was collected (for tree-shaped data: the success
    rate of the episodes through that state-action)."""
    mdp = ds.mdp
    s = state_success(ds)
    contrib = mdp.tr_prob * s[mdp.tr_next]
    tr_rows = np.repeat(np.arange(mdp.n_rows), np.diff(mdp.tr_ptr))
    q = ds.gamma * np.bincount(tr_rows, weights=contrib, minlength=mdp.n_rows)
    return pd.DataFrame(
        {
            "state_id": ds.state_ids[row_states(mdp)],
            "action": mdp.sa_action.astype(np.int8),
            "count": mdp.sa_count,
            "p_success": np.clip(q, 0.0, 1.0),
        }
    )
