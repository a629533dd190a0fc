"""Thin, checked wrappers around the kernels: one solve at fixed help costs r.

``solve(mdp, r)`` is the Lagrangian value iteration (``rule="exact"``) or the
paper's usage/policy iteration with PRM scores (``rule="paper"``), returning a
``Solution``: the deterministic policy, per-state V, S and M^k, and the start-state
means E[S] and E[U^k] (CONTRACT section 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd

from helpdp._src import forecast as kf
from helpdp._src import kernels
from helpdp.data import MDP, Dataset, DatasetError

RULES = ("exact", "paper")
# mean states per level below which the serial pass is used: a parallel region per
# level only pays off on wide levels, and on a busy machine small regions wait for
# descheduled threads (measured: 10^6 transitions, 17 levels, 7 ms quiet, 200 ms busy)
PARALLEL_MIN_LEVEL = 65536
PARALLEL_CHUNK = 2048  # states per parallel task


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
    parallel: bool = True,
) -> Solution:
    """Solve at help costs ``r`` (scalar, or one per intervention).

    On acyclic graphs one reverse-topological sweep is exact. With cycles the
    sweeps repeat until the largest change is below ``tol``; ``gamma == 1`` is
    refused there, since value iteration need not converge. ``rule="paper"``
    needs ``p_row`` (a PRM success estimate per state-action row, see
    ``score_rows``); on cyclic graphs it stops after ``max_iters`` sweeps, as in
    the paper's iteration. ``parallel`` backs up the states of each level of an
    acyclic graph on all numba threads when levels are wide enough to pay off
    (same numbers as the serial pass).
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
    val = np.zeros((mdp.n_states, 2 + k))
    action = np.full(mdp.n_states, -1, np.int8)
    args = (
        mdp.order, mdp.sa_ptr, mdp.sa_action, mdp.tr_ptr, mdp.tr_next, mdp.tr_prob,
        mdp.terminal, mdp.success, p_row, costs, float(gamma), rule_id, tie_tol, dm_tol,
    )  # fmt: skip
    if mdp.acyclic:
        n_levels = len(mdp.block_ptr) - 1
        if (
            parallel
            and numba.get_num_threads() > 1
            and mdp.n_states >= PARALLEL_MIN_LEVEL * n_levels
        ):
            kernels.backward_levels(
                mdp.order, mdp.block_ptr, PARALLEL_CHUNK, *args[1:], val, action
            )
        else:
            kernels.backward_pass(*args, val, action)
        sweeps = 1
    else:
        if gamma >= 1.0:
            raise ValueError(
                "the transition graph has cycles and gamma = 1: value iteration is not "
                "guaranteed to converge; pass gamma < 1 (e.g. gamma=0.99)"
            )
        sweeps, change = kernels.iterate_sweeps(*args, tol, max_iters, val, action)
        if change >= tol and rule == "exact":
            raise RuntimeError(
                f"value iteration did not reach tol={tol} in {max_iters} sweeps (last change {change:.3g})"
            )
    means = kernels.weighted_means(val, mdp.start_weight)
    return Solution(
        r=costs[1:],
        action=action,
        values=val,
        expected_success=float(means[1]),
        expected_usage=means[2:].copy(),
        sweeps=int(sweeps),
        rule=rule,
    )


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
    kf.evaluate_rows(
        mdp.order, mdp.sa_ptr, mdp.sa_action, mdp.tr_ptr, mdp.tr_next, mdp.tr_prob,
        mdp.terminal, mdp.success, pi_row, np.zeros(mdp.n_states), ds.gamma, tol,
        1 if mdp.acyclic else max_iters, val,
    )  # fmt: skip
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
