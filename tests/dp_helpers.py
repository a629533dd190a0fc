"""Small MDP builders and independent references (dense linear algebra, LP) for
testing the DP. Nothing here uses helpdp's kernels."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from helpdp import build_manifest, from_frames


def make_frames(
    n_states, transitions, success=(), starts=(0,), actions=("nohelp", "expert"), gamma=1.0
):
    """``transitions``: list of (s, a, s', count); states with no outgoing
    transitions that appear in ``success`` or are targets are terminal."""
    src = {t[0] for t in transitions}
    states = pd.DataFrame(
        {
            "state_id": np.arange(n_states, dtype=np.int64) * 10 + 7,  # ids != indices on purpose
            "task_id": ["t"] * n_states,
            "depth": np.zeros(n_states, np.int32),
            "is_start": [s in starts for s in range(n_states)],
            "terminal": [s not in src for s in range(n_states)],
            "success": [s in success for s in range(n_states)],
            "text": [""] * n_states,
        }
    )
    tr = np.array(transitions, dtype=np.int64).reshape(-1, 4)
    trans = pd.DataFrame(
        {
            "state_id": tr[:, 0] * 10 + 7,
            "action": tr[:, 1].astype(np.int8),
            "next_state_id": tr[:, 2] * 10 + 7,
            "count": tr[:, 3],
        }
    )
    manifest = build_manifest(actions, gamma=gamma)
    return manifest, states, trans


def make_dataset(*args, **kw):
    return from_frames(*make_frames(*args, **kw))


def random_dag(rng, n_inner=6, n_actions=2, max_succ=3, p_missing=0.2, gamma=1.0):
    """A random layered DAG: inner states 0..n_inner-1 (edges only go forward), then
    two terminal states (success, failure); state 0 is the start."""
    succ, fail = n_inner, n_inner + 1
    trans = []
    for s in range(n_inner):
        for a in range(n_actions):
            if a > 0 and rng.random() < p_missing:
                continue  # action never observed here
            pool = np.r_[np.arange(s + 1, n_inner), [succ, fail]]
            size = min(int(rng.integers(1, max_succ + 1)), len(pool))
            targets = rng.choice(pool, size=size, replace=False)
            for t in np.unique(targets):
                trans.append((s, a, int(t), int(rng.integers(1, 6))))
    starts = (0, 1) if n_inner > 1 else (0,)
    acts = ("nohelp",) + tuple(f"i{k}" for k in range(1, n_actions))
    return make_frames(
        n_inner + 2, trans, success=(succ,), starts=starts, actions=acts, gamma=gamma
    )


def _model(manifest, states, trans):
    n = len(states)
    idx = {sid: i for i, sid in enumerate(states["state_id"])}
    na = len(manifest["actions"])
    P = np.zeros((na, n, n))
    avail = np.zeros((n, na), bool)
    for s, a, s2, c in trans[["state_id", "action", "next_state_id", "count"]].itertuples(
        index=False
    ):
        P[a, idx[s], idx[s2]] += c
        avail[idx[s], a] = True
    tot = P.sum(axis=2, keepdims=True)
    P = np.divide(P, tot, out=np.zeros_like(P), where=tot > 0)
    term = states["terminal"].to_numpy()
    succ = states["success"].to_numpy().astype(float)
    w = np.where(states["is_start"].to_numpy(), tot.sum(axis=0)[:, 0], 0.0)
    return P, avail, term, succ, w / w.sum()


def evaluate(frames, policy):
    """(E[S], E[U^1..K]) of a deterministic ``policy`` (action per state; ignored at
    terminal states) by solving the linear systems directly."""
    manifest, states, trans = frames
    P, avail, term, succ, mu = _model(*frames)
    n = len(states)
    gamma = manifest["gamma"]
    Ppi = np.zeros((n, n))
    use = np.zeros((n, P.shape[0] - 1))
    for s in range(n):
        if not term[s] and avail[s].any():
            a = policy[s]
            Ppi[s] = P[a, s]
            if a > 0:
                use[s, a - 1] = 1.0
    A = np.eye(n) - gamma * Ppi
    S = np.linalg.solve(A, np.where(term, succ, 0.0))
    M = np.linalg.solve(A, use)
    return float(mu @ S), mu @ M


def all_policies(frames):
    """Every deterministic policy over observed actions (small MDPs only)."""
    _, states, _ = frames
    P, avail, term, _, _ = _model(*frames)
    choices = [np.flatnonzero(avail[s]) if avail[s].any() else [0] for s in range(len(states))]
    for combo in itertools.product(*choices):
        yield np.array(combo)


def lp_optimum(frames, budgets):
    """Max E[S] over all (randomized) policies with E[U^k] <= budgets[k]: the
    occupancy-measure LP."""
    manifest, states, trans = frames
    P, avail, term, succ, mu = _model(*frames)
    gamma = manifest["gamma"]
    n, na = len(states), P.shape[0]
    var = [(s, a) for s in range(n) for a in range(na) if avail[s, a] and not term[s]]
    col = {v: i for i, v in enumerate(var)}
    rows = [s for s in range(n) if not term[s] and avail[s].any()]
    A_eq = np.zeros((len(rows), len(var)))
    b_eq = np.zeros(len(rows))
    for i, s in enumerate(rows):
        b_eq[i] = mu[s]
        for a in range(na):
            if (s, a) in col:
                A_eq[i, col[(s, a)]] += 1.0
        for (s2, a), j in col.items():
            A_eq[i, j] -= gamma * P[a, s2, s]
    c = np.array([-gamma * P[a, s] @ np.where(term, succ, 0.0) for s, a in var])
    A_ub = np.zeros((na - 1, len(var)))
    for (_s, a), j in col.items():
        if a > 0:
            A_ub[a - 1, j] = 1.0
    res = linprog(
        c,
        A_ub=A_ub,
        b_ub=np.asarray(budgets, float),
        A_eq=A_eq,
        b_eq=b_eq,
        bounds=(0, None),
        method="highs",
    )
    assert res.status == 0, res.message
    start_term = float(mu @ np.where(term, succ, 0.0))
    return -res.fun + start_term
