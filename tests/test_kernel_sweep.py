"""kernels.sweep's fast paths (one row taken unscored; V, S and M^1 of the chosen row
summed in one loop; unsigned indices) against a plain transcription of the backup with
one loop per quantity: the same values, actions and change to the bit, for one to
three interventions, both rules, one and several rows per state, int32 and int64
indices, acyclic (one pass) and cyclic (repeated sweeps) graphs."""

import numpy as np
import pytest

from helpdp._src import kernels
from helpdp._src.bundles import Backup, Graph, Values


def _reference(order, g, b, val, action):
    """One sweep as the kernel computed it before the fast paths: every row scored,
    S and each M^k summed in a loop of its own over the chosen row's transitions."""
    p_row, costs, gamma, rule, tie_tol, dm_tol = b
    n_int = val.shape[1] - 2
    n = g.terminal.shape[0]
    states = range(n - 1, -1, -1) if order.shape[0] == 0 else [int(s) for s in order]
    change = 0.0
    for s in states:
        old_v, old_s = val[s, 0], val[s, 1]
        j0, j1 = int(g.sa_ptr[s]), int(g.sa_ptr[s + 1])
        if g.terminal[s] or j0 == j1:
            v = 1.0 if g.success[s] else 0.0
            val[s, 0] = val[s, 1] = v
            for k in range(n_int):
                change = max(change, abs(val[s, 2 + k]))
                val[s, 2 + k] = 0.0
            action[s] = -1
            change = max(change, max(abs(v - old_v), abs(v - old_s)))
            continue
        best_j, best_q, best_m = -1, -np.inf, 0.0
        for j in range(j0, j1):
            a = int(g.sa_action[j])
            trs = range(int(g.tr_ptr[j]), int(g.tr_ptr[j + 1]))
            if rule == kernels.RULE_EXACT:
                acc = 0.0
                for t in trs:
                    acc += g.tr_prob[t] * val[g.tr_next[t], 0]
                q = -costs[a] + gamma * acc
                if q > best_q + tie_tol:
                    best_q, best_j = q, j
            else:
                rm, um = costs[a], (1.0 if a > 0 else 0.0)
                for t in trs:
                    gp = gamma * g.tr_prob[t]
                    for k in range(n_int):
                        rm += gp * costs[k + 1] * val[g.tr_next[t], 2 + k]
                        um += gp * val[g.tr_next[t], 2 + k]
                q, m = p_row[j] * (1.0 - rm), p_row[j] * um
                if best_j < 0 or (q > best_q + tie_tol and abs(m - best_m) > dm_tol):
                    best_q, best_j, best_m = q, j, m
        a = int(g.sa_action[best_j])
        trs = range(int(g.tr_ptr[best_j]), int(g.tr_ptr[best_j + 1]))
        acc_s = 0.0
        for t in trs:
            acc_s += g.tr_prob[t] * val[g.tr_next[t], 1]
        s_new = gamma * acc_s
        v_new = s_new
        for k in range(n_int):
            acc_m = 0.0
            for t in trs:
                acc_m += g.tr_prob[t] * val[g.tr_next[t], 2 + k]
            mk = gamma * acc_m + (1.0 if a == k + 1 else 0.0)
            change = max(change, abs(mk - val[s, 2 + k]))
            val[s, 2 + k] = mk
            v_new -= costs[k + 1] * mk
        if rule == kernels.RULE_EXACT:
            v_new = best_q
        val[s, 0], val[s, 1], action[s] = v_new, s_new, a
        change = max(change, max(abs(v_new - old_v), abs(s_new - old_s)))
    return change


def _graph(rng, n, n_int, cyclic, idx):
    """A random model: a state has 0 to n_int + 1 rows (actions ascending), a row 1 to
    3 transitions to later states (acyclic) or to any state (cyclic)."""
    terminal = rng.random(n) < 0.25
    terminal[-1] = True
    sa_ptr, sa_action, tr_ptr, tr_next, tr_prob = [0], [], [0], [], []
    for s in range(n):
        later = np.arange(s + 1, n)
        acts = [] if terminal[s] or (not cyclic and later.size == 0) else rng.permutation(n_int + 1)
        for a in sorted(acts[: rng.integers(0, n_int + 2)]):
            k = int(rng.integers(1, 4))
            tr_next.extend(rng.integers(0, n, k) if cyclic else rng.choice(later, k))
            w = rng.random(k) + 0.1
            tr_prob.extend(w / w.sum())
            sa_action.append(a)
            tr_ptr.append(len(tr_next))
        sa_ptr.append(len(sa_action))
    g = Graph(
        np.array(sa_ptr, idx),
        np.array(sa_action, np.int8),
        np.array(tr_ptr, idx),
        np.array(tr_next, idx),
        np.array(tr_prob),
        terminal,
        terminal & (rng.random(n) < 0.5),
    )
    assert (np.diff(g.sa_ptr) == 1).any() and (np.diff(g.sa_ptr) > 1).any()  # both paths
    return g


@pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])
@pytest.mark.parametrize("idx", [np.int32, np.int64])
@pytest.mark.parametrize("rule", [kernels.RULE_EXACT, kernels.RULE_PAPER])
@pytest.mark.parametrize("n_int", [1, 2, 3])
def test_sweep_matches_one_loop_per_quantity(py, idx, rule, n_int):
    rng = np.random.default_rng(1000 * n_int + 10 * rule + (idx == np.int64))
    for cyclic in (False, True):
        g = _graph(rng, 60, n_int, cyclic, idx)
        costs = np.r_[0.0, rng.uniform(0.0, 0.6, n_int)]
        p_row = rng.uniform(0.1, 0.9, g.sa_action.shape[0]) if rule else np.zeros(0)
        b = Backup(p_row, costs, 0.9 if cyclic else 1.0, rule, 1e-12, 1e-9)
        order = rng.permutation(60).astype(idx) if cyclic else np.zeros(0, np.int64)
        fn = kernels.backward_pass.py_func if py else kernels.backward_pass
        val0 = rng.random((60, 2 + n_int))  # not zeros: the change of every value counts
        out = Values(val0.copy(), np.full(60, -1, np.int8))
        ref_val, ref_act = val0.copy(), np.full(60, -1, np.int8)
        for _ in range(3 if cyclic else 1):
            change = fn(order, g, b, out)
            assert change == _reference(order, g, b, ref_val, ref_act)
            assert np.array_equal(out.val, ref_val)
            assert np.array_equal(out.action, ref_act)
        assert (out.action > 0).any() and (out.action == 0).any()  # both actions chosen
