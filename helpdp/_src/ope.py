"""Numeric kernels of off-policy evaluation: arrays in, arrays out (plain numpy).

Layout: the logged steps of all episodes are one flat array, episode ``e`` owning
steps ``ep_ptr[e]:ep_ptr[e + 1]`` in turn order (an episode may have no step).
Probabilities are per step; a *prefix* is the product of a step's probability and
those of the earlier steps of its episode (inclusive). No I/O, no pandas.

* :func:`trigger_action_probs`: the collector's action distribution under one
  trigger vector (independent triggers, a uniform tie-break among those that fire);
* :func:`segment_prefix`: per-episode cumulative products, zeros handled exactly;
* :func:`ratios`: the per-decision importance ratios ``rho_t`` of a target that is a
  mixture (per episode) of components, against a behaviour that is a mixture of
  trigger vectors (the balance heuristic): ``rho_t = sum_c w_c prod pi_c / sum_j
  c_j prod mu_j``, both over the steps up to ``t``;
* :func:`episode_terms`: the per-episode terms of trajectory IS, per-decision IS and
  doubly robust estimation; :func:`padded` lays per-step values out per (episode,
  turn) for the weighted (self-normalised) estimators; :func:`weighted_dr` (and
  :func:`weighted_dr_groups`, every task at once);
* :func:`stratified_counts`: bootstrap replicate counts that resample episodes within
  strata (so each task's design, and with it the balance heuristic's weights, holds);
* :func:`fit_q`: a pooled tabular Q model with back-off, evaluated backwards by turn:
  the doubly robust estimator's control variate;
* :func:`t_interval`: the Student-t interval of a mean over independent units (tasks);
  :func:`jackknife_groups` and :func:`jackknife_pseudo`: the delete-a-group jackknife's
  groups of tasks and its per-task pseudo-values; :func:`differs`: the episodes where two policies' action distributions differ.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np


def trigger_action_probs(p: np.ndarray, available: np.ndarray | None = None) -> np.ndarray:
    """``(J, K + 1)``: P(action) under each trigger vector ``p[j]`` (``(J, K)``).

    Every available intervention fires independently with its probability; when
    several fire one is chosen uniformly (``collect.schedule.draw_action``); none
    firing is action 0. ``available`` (``(K,)`` bool) masks interventions out of calls.
    """
    p = np.asarray(p, np.float64)
    j, k = p.shape
    if available is None:
        available = np.ones(k, bool)
    q = np.where(available, p, 0.0)
    out = np.zeros((j, k + 1))
    for fired in itertools.product((0, 1), repeat=k):
        f = np.asarray(fired, bool)
        prob = np.prod(np.where(f, q, 1.0 - q), axis=1)
        n = int(f.sum())
        if n == 0:
            out[:, 0] += prob
        else:
            out[:, 1:] += prob[:, None] * f[None, :] / n
    return out


def segment_prefix(ep_ptr: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Inclusive cumulative products of ``x`` (``(n, C)``, >= 0) within each episode."""
    x = np.asarray(x, np.float64)
    n = x.shape[0]
    if n == 0:
        return x.copy()
    lens = np.diff(ep_ptr)
    zero = x <= 0.0
    logs = np.log(np.where(zero, 1.0, x))
    start = np.repeat(ep_ptr[:-1], lens)
    cs = np.cumsum(logs, axis=0)
    cz = np.cumsum(zero, axis=0)
    base_l = np.vstack([np.zeros((1, x.shape[1])), cs])[start]
    base_z = np.vstack([np.zeros((1, x.shape[1]), np.int64), cz])[start]
    return np.exp(cs - base_l) * ((cz - base_z) == 0)


def exclusive(ep_ptr: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    """The prefix before each step (1 at an episode's first step)."""
    out = np.ones_like(prefix)
    if prefix.shape[0]:
        out[1:] = prefix[:-1]
        out[ep_ptr[:-1][np.diff(ep_ptr) > 0]] = 1.0
    return out


def ratios(
    ep_ptr: np.ndarray,
    mu_steps: np.ndarray,
    mix_weights: np.ndarray,
    pi_steps: np.ndarray,
    comp_weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-decision importance ratios ``(rho_t, rho_{t-1})`` per step.

    ``mu_steps`` ``(n, J)``: P(logged action) under each trigger vector;
    ``mix_weights`` ``(n_ep, J)``: the share of each vector in the episode's stratum
    (the balance heuristic's behaviour is that mixture); ``pi_steps`` ``(n, C)``:
    P(logged action) under each target component; ``comp_weights`` ``(C,)``.
    Raises where a logged step has probability 0 under the behaviour mixture.
    """
    lens = np.diff(ep_ptr)
    ep_of = np.repeat(np.arange(len(lens)), lens)
    b = (segment_prefix(ep_ptr, mu_steps) * mix_weights[ep_of]).sum(axis=1)
    bad = b <= 0.0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"step {i}: the logged action has probability 0 under the schedule")
    t = segment_prefix(ep_ptr, pi_steps) @ np.asarray(comp_weights, np.float64)
    rho = t / b
    return rho, exclusive(ep_ptr, rho[:, None])[:, 0]


def episode_sum(ep_ptr: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Sum of per-step ``x`` within each episode (0 for an episode without steps)."""
    lens = np.diff(ep_ptr)
    return np.bincount(np.repeat(np.arange(len(lens)), lens), weights=x, minlength=len(lens))


def last_of(ep_ptr: np.ndarray, x: np.ndarray, empty: float = 1.0) -> np.ndarray:
    """Per episode, ``x`` at its last step (``empty`` without steps)."""
    lens = np.diff(ep_ptr)
    out = np.full(len(lens), float(empty))
    has = lens > 0
    out[has] = x[ep_ptr[1:][has] - 1]
    return out


def next_values(ep_ptr: np.ndarray, v: np.ndarray, terminal_value: np.ndarray) -> np.ndarray:
    """Per step, ``v`` of the next step of the same episode, or the episode's
    ``terminal_value`` at its last step."""
    nxt = np.empty_like(v)
    if len(v):
        nxt[:-1] = v[1:]
        lens = np.diff(ep_ptr)
        has = lens > 0
        nxt[ep_ptr[1:][has] - 1] = terminal_value[has]
    return nxt


def episode_terms(ep_ptr, rho, reward, terminal_value, q_taken, v, v0) -> dict[str, np.ndarray]:
    """Per-episode terms of one quantity (success: ``reward`` 0 and ``terminal_value``
    the outcome; usage of intervention k: ``reward`` = 1[a_t = k], ``terminal_value`` 0).

    ``is``: rho_T (R + terminal); ``pdis``: sum_t rho_t r_t + rho_T terminal; ``dr``:
    V(s_0) + sum_t rho_t (r_t + V(s_{t+1}) - Q(s_t, a_t)) (Jiang & Li 2016), with the
    model's ``q_taken`` (Q at the logged action), ``v`` (V under the target at each
    step) and ``v0`` per episode (V at the start; the outcome where no step was taken).
    ``dm``: ``v0`` alone.
    """
    w = last_of(ep_ptr, rho, 1.0)
    ret = episode_sum(ep_ptr, reward) + terminal_value
    pd_terms = episode_sum(ep_ptr, rho * reward) + w * terminal_value
    v_next = next_values(ep_ptr, v, terminal_value)
    dr = v0 + episode_sum(ep_ptr, rho * (reward + v_next - q_taken))
    return {"is": w * ret, "pdis": pd_terms, "dr": dr, "dm": np.asarray(v0, np.float64), "w": w}


def padded(ep_ptr: np.ndarray, x: np.ndarray, fill_last: bool) -> np.ndarray:
    """``(n_ep, H)``: per-step ``x`` at (episode, turn index); after an episode ends,
    its last value (``fill_last``: ratios stay) or 0 (terms)."""
    lens = np.diff(ep_ptr)
    h = max(int(lens.max()) if len(lens) else 0, 1)
    out = np.zeros((len(lens), h))
    ep_of = np.repeat(np.arange(len(lens)), lens)
    pos = np.arange(len(x)) - np.repeat(ep_ptr[:-1], lens)
    out[ep_of, pos] = x
    if fill_last:
        last = last_of(ep_ptr, x, 1.0)
        mask = np.arange(h)[None, :] >= lens[:, None]
        out = np.where(mask, last[:, None], out)
    return out


def weighted_dr(counts: np.ndarray, v0: np.ndarray, rho_pad: np.ndarray, d_pad: np.ndarray):
    """Weighted doubly robust (Thomas & Brunskill 2016) of one stratum group under
    bootstrap replicate ``counts`` (``(B, n)``): mean V(s_0) + sum_t sum_i w_t^i d_t^i,
    with ``w_t^i = m_i rho_t^i / sum_j m_j rho_t^j`` (0 where no episode agrees)."""
    m = np.asarray(counts, np.float64)
    base = (m @ v0) / m.sum(axis=1)
    num = m @ (rho_pad * d_pad)
    den = m @ rho_pad
    corr = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return base + corr.sum(axis=1)


def group_matrix(codes: np.ndarray):
    """Episodes x groups (tasks), one-hot, for ``counts @ g`` (per-group sums of each
    replicate); a ``scipy.sparse`` array past 2^22 cells (10,000 tasks of 70,000 episodes
    made the dense one 5.6 GB; the product is an ndarray either way)."""
    codes = np.asarray(codes, np.int64)
    n, k = len(codes), int(codes.max()) + 1
    if n * k > 1 << 22:
        from scipy.sparse import csr_array

        return csr_array((np.ones(n), (np.arange(n), codes)), shape=(n, k))
    g = np.zeros((n, k))
    g[np.arange(n), codes] = 1.0
    return g


def group_order(group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, starts)``: the episodes sorted by group (stably: each group's in their
    own order) and where each group's run begins; every group must have a member (the
    codes of ``np.unique``), so no run is empty."""
    group = np.asarray(group, np.int64)
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(n_groups))
    if len(group) and (np.diff(np.r_[starts, len(group)]) == 0).any():
        raise ValueError("group_order: a group without a member")
    return order, starts


def weighted_dr_groups(counts, v0, rho_pad, d_pad, order, starts) -> np.ndarray:
    """:func:`weighted_dr` of every group at once: ``(B, K)``, group ``k`` the episodes
    ``order[starts[k]:starts[k + 1]]`` (:func:`group_order`). Linear in the episodes
    (a mask per group made it episodes x groups); equal to the per-group loop to rounding
    (sums taken in another order). A group no replicate draws: NaN or inf (its mean of
    no episode), as :func:`weighted_dr`."""
    m = np.asarray(counts, np.float64)[:, order]
    v0, rho, d = np.asarray(v0)[order], rho_pad[order], d_pad[order]
    rd = rho * d
    out = np.empty((m.shape[0], len(starts)))
    with np.errstate(invalid="ignore", divide="ignore"):
        for b in range(m.shape[0]):  # replicates one at a time: (K, H) each, not (B, K, H)
            mb = m[b]
            base = np.add.reduceat(mb * v0, starts) / np.add.reduceat(mb, starts)
            num = np.add.reduceat(mb[:, None] * rd, starts, axis=0)
            den = np.add.reduceat(mb[:, None] * rho, starts, axis=0)
            out[b] = base + np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0).sum(axis=1)
    return out


def stratified_counts(strata: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """``(b, n)`` replicate counts: within each stratum, its episodes drawn with
    replacement as many times as it has episodes."""
    strata = np.asarray(strata)
    n = len(strata)
    out = np.zeros((b, n), np.int64)
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        draws = rng.integers(0, len(idx), size=(b, len(idx)))
        np.add.at(out, (np.arange(b)[:, None], idx[draws]), 1)
    return out


def group_counts(group: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """``(b, n)`` replicate counts that resample whole groups (e.g. tasks): each
    drawn group contributes all its episodes once per draw."""
    group = np.asarray(group)
    uniq, inv = np.unique(group, return_inverse=True)
    draws = rng.integers(0, len(uniq), size=(b, len(uniq)))
    times = np.zeros((b, len(uniq)), np.int64)
    np.add.at(times, (np.arange(b)[:, None], draws), 1)
    return times[:, inv]


def _codes(*cols: np.ndarray) -> np.ndarray:
    """One integer code per distinct row of the columns (first-seen order irrelevant)."""
    stacked = np.stack([np.asarray(c, np.int64) for c in cols], axis=1)
    return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1)


def q_layout(t: np.ndarray, keys: list[np.ndarray]) -> list:
    """The grouping :func:`fit_q` needs, which depends on the keys alone (not on the
    policy, the quantity or the fold): per turn, backwards, ``(at, rungs)`` with ``at``
    the turn's steps and ``rungs`` coarse to fine, ``(inv, n)``: each step's group among
    the ``n`` distinct keys of the turn at that rung. Compute once, pass to every fit."""
    codes = [_codes(t, *keys[i:]) for i in range(len(keys))]  # fine -> coarse, all with t
    out = []
    for turn in np.unique(t)[::-1]:
        at = np.flatnonzero(t == turn)
        rungs = []
        for code in codes[::-1]:
            uc, inv = np.unique(code[at], return_inverse=True)
            rungs.append((inv.reshape(-1), len(uc)))
        out.append((at, rungs))
    return out


class Steps(NamedTuple):
    """The logged steps :func:`fit_q` fits on (one entry per step, ``(n, ...)``)."""

    t: np.ndarray  # the turn of each step
    keys: list  # key columns (see fit_q)
    action: np.ndarray  # the logged action
    reward: np.ndarray  # (n, n_actions) each action's immediate reward
    next_index: np.ndarray  # the next step (-1: terminal)
    terminal_value: np.ndarray  # the value after a terminal step


def fit_q(
    steps: Steps,
    target: np.ndarray,
    fit: np.ndarray,
    n_actions: int,
    prior: float = 2.0,
    layout: list | None = None,
) -> np.ndarray:
    """A tabular Q model of the target policy, fitted on the steps with ``fit`` true
    and evaluated at every step: ``(n, n_actions)`` Q(h_t, a). The fields of
    ``steps`` (a :class:`Steps`) are described below.

    ``reward`` ``(n, n_actions)``: each action's immediate reward at each step, known
    exactly (usage of intervention k: 1 in column k; success: 0), so Q(h, a) =
    ``reward[h, a]`` + C(h, a) and only the continuation C is estimated. (Fitting the
    known reward too lets the back-off lend one action's reward to another where an
    action was never logged at a turn: a deterministic rule's usage then came out far
    from its exact value.)

    ``keys`` are key columns; rung i keys a step by its turn ``t`` and ``keys[i:]``,
    so rung 0 is the finest and each later rung drops the leftmost column (put the
    task first to pool across tasks first). At each turn, backwards, C at a rung is
    the mean of V(next) over the fitted steps with that key and action,
    shrunk towards the next-coarser rung's C with ``prior`` pseudo-visits (the
    coarsest towards the turn's mean for that action). ``next_index``: the step's next step
    (-1: terminal, value ``terminal_value``). V of a step is ``sum_a pibar(a|key)
    Q(key, a)``, ``pibar`` the target's mean action probabilities (``target``, ``(n,
    n_actions)``) over the fitted steps of its finest key (its own where none).
    ``layout``: :func:`q_layout` of ``(t, keys)`` (computed here when None).
    """
    t, keys, action, reward, next_index, terminal_value = steps
    n = len(t)
    reward = np.asarray(reward, np.float64)
    if reward.shape != (n, n_actions):
        raise ValueError(f"reward: shape {reward.shape}, expected {(n, n_actions)}")
    q = np.zeros((n, n_actions))
    v = np.zeros(n)
    if layout is None:
        layout = q_layout(t, keys)
    fit = np.asarray(fit, bool)
    for at, rungs in layout:
        nxt = next_index[at]
        y = np.where(nxt >= 0, v[np.maximum(nxt, 0)], terminal_value[at])
        f = fit[at]
        # coarse to fine; the estimate of each rung is the prior for the next finer one
        fy, fa = y[f], action[at][f]
        overall = fy.mean() if len(fy) else 0.0
        per_a = np.bincount(fa, weights=fy, minlength=n_actions)
        n_a = np.bincount(fa, minlength=n_actions)
        per_a = np.where(n_a > 0, per_a / np.maximum(n_a, 1), overall)
        est = np.tile(per_a, (len(at), 1))
        for inv, n_uc in rungs:
            s = np.zeros((n_uc, n_actions))
            m = np.zeros((n_uc, n_actions))
            np.add.at(s, (inv[f], fa), fy)
            np.add.at(m, (inv[f], fa), 1.0)
            # est[i] is the prior for row i; rows sharing a key share their prior
            prior_val = np.zeros((n_uc, n_actions))
            np.add.at(prior_val, inv, est)
            prior_val /= np.bincount(inv, minlength=n_uc)[:, None]
            est = ((s + prior * prior_val) / (m + prior))[inv]
        est = est + reward[at]
        q[at] = est
        # V under the target's mean action probabilities at the finest key
        inv, n_uc = rungs[-1]
        pbar = np.zeros((n_uc, n_actions))
        cnt = np.zeros(n_uc)
        np.add.at(pbar, inv[f], target[at][f])
        np.add.at(cnt, inv[f], 1.0)
        own = target[at]
        pb = np.where(cnt[inv, None] > 0, pbar[inv] / np.maximum(cnt[inv, None], 1.0), own)
        v[at] = (pb * est).sum(axis=1)
    return q


def t_interval(x: np.ndarray, level: float) -> tuple[float, float, float, int]:
    """``(mean, lo, hi, k)`` of the finite entries of ``x`` (one estimate per independent
    unit, e.g. per task): the mean and its Student-t interval at ``level``,
    mean -/+ t_{k-1} sd / sqrt(k) (no interval below two units)."""
    from scipy.stats import t as student_t

    x = np.asarray(x, np.float64)
    x = x[np.isfinite(x)]
    k = len(x)
    if k == 0:
        return float("nan"), float("nan"), float("nan"), 0
    m = float(x.mean())
    if k < 2:
        return m, float("nan"), float("nan"), 1
    half = float(student_t.ppf(0.5 + level / 2, k - 1) * x.std(ddof=1) / np.sqrt(k))
    return m, m - half, m + half, k


def jackknife_groups(n_units: int, max_groups: int) -> np.ndarray:
    """``(n_units,)`` the jackknife group of each unit (tasks, in sorted order): each
    unit its own group up to ``max_groups`` units (the delete-one jackknife), else dealt
    round-robin into ``max_groups`` groups (sizes differ by at most one).

    >>> jackknife_groups(3, 4).tolist(), jackknife_groups(5, 2).tolist()
    ([0, 1, 2], [0, 1, 0, 1, 0])
    """
    if max_groups < 2:
        raise ValueError(f"max_groups must be >= 2, got {max_groups}")
    idx = np.arange(n_units, dtype=np.int64)
    return idx if n_units <= max_groups else idx % max_groups


def jackknife_pseudo(vals: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Per-unit pseudo-values of the delete-a-group jackknife of a mean whose terms share a
    fitted model: ``vals + mean(shift) - shift`` over the units where both are finite
    (NaN elsewhere; ``vals`` itself below two such units).

    ``shift[j]`` is ``I_g / m_g`` for unit ``j`` of group ``g`` (``m_g`` units): ``I_g`` the
    summed change of the other units' values when the model is refitted without group
    ``g``. Each group's sum of pseudo-values is then its own values' sum plus its
    share of the mean shift minus ``I_g``, so the cluster-robust variance over the groups
    is the jackknife's. With one unit per group these are exactly the delete-one
    pseudo-values ``theta + (k - 1)(mean(theta_(-.)) - theta_(-j))``: write ``theta_(-j) =
    (k theta - v_j) / (k - 1) + D_j`` with ``D_j`` the mean change of the others, then
    ``I_j = (k - 1) D_j``. A model that does not move (``shift`` 0): ``vals``.

    >>> jackknife_pseudo(np.array([1.0, 2.0, 3.0]), np.array([0.3, 0.0, -0.3])).tolist()
    [0.7, 2.0, 3.3]
    """
    vals = np.asarray(vals, np.float64)
    shift = np.asarray(shift, np.float64)
    ok = np.isfinite(vals) & np.isfinite(shift)
    if int(ok.sum()) < 2:
        return vals
    out = np.full_like(vals, np.nan)
    out[ok] = vals[ok] + shift[ok].mean() - shift[ok]
    return out


def differs(ep_ptr: np.ndarray, dist_a: np.ndarray, dist_b: np.ndarray, tol: float = 1e-9):
    """Per episode: whether two policies' action distributions (``(n, A)`` per step)
    differ at some step of it."""
    step = np.abs(np.asarray(dist_a) - np.asarray(dist_b)).max(axis=1) > tol
    return episode_sum(ep_ptr, step.astype(np.float64)) > 0
