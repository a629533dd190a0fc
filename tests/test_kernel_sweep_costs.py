"""parametric.sweep_costs's fast paths (a state's first row taken unscored, so a state
with one row is written without a comparison; unsigned indices) against a plain
transcription of the batched pass as it was before them (every row scored at every
r, ``take = first or q > best + tie_tol``): the same values, actions and start values
to the bit, for one to five help costs (ties at r = 0 and at an exact gain), one and
two rows per state, one and several successors, int32 and int64 indices, with and
without the per-state output."""

import numpy as np
import pytest

from helpdp._src import parametric
from helpdp._src.bundles import Graph, Values


def _reference(comp_ptr, g, r, gamma, tie_tol, starts, n):
    """The batched pass as before the fast paths, in plain Python: (val (K, n, 3),
    action (K, n), start values (len(starts), K, 3))."""
    n_k = len(r)
    val = np.full((n_k, n, 3), np.nan)
    act = np.full((n_k, n), 99, np.int8)
    for c in range(len(comp_ptr) - 1):
        for s in range(int(comp_ptr[c + 1]) - 1, int(comp_ptr[c]) - 1, -1):
            j0, j1 = int(g.sa_ptr[s]), int(g.sa_ptr[s + 1])
            if g.terminal[s] or j0 == j1:
                v = 1.0 if g.success[s] else 0.0
                val[:, s] = (v, v, 0.0)
                act[:, s] = -1
                continue
            for j in range(j0, j1):
                a = int(g.sa_action[j])
                own = 1.0 if a == 1 else 0.0
                trs = range(int(g.tr_ptr[j]), int(g.tr_ptr[j + 1]))
                for k in range(n_k):
                    acc = [0.0, 0.0, 0.0]
                    for t in trs:
                        for q in range(3):
                            acc[q] += g.tr_prob[t] * val[k, g.tr_next[t], q]
                    q = -(r[k] if a > 0 else 0.0) + gamma * acc[0]
                    m_val = gamma * acc[2]
                    m_val = m_val + own if own != 0.0 else m_val
                    if j == j0 or q > val[k, s, 0] + tie_tol:
                        val[k, s] = (q, gamma * acc[1], m_val)
                        act[k, s] = a
    return val, act, val[:, starts].transpose(1, 0, 2)


def _graph(rng, sizes, idx):
    """Tasks of ``sizes`` states, numbered topologically inside: a state has 0 to 2 rows
    (nohelp, help), a row 1 to 3 transitions to later states of its task; probabilities
    from small counts, so that ties in exact arithmetic occur."""
    comp_ptr = np.r_[0, np.cumsum(sizes)]
    n = int(comp_ptr[-1])
    terminal = rng.random(n) < 0.2
    terminal[comp_ptr[1:] - 1] = True
    sa_ptr, sa_action, tr_ptr, tr_next, tr_prob = [0], [], [0], [], []
    for c in range(len(sizes)):
        for s in range(int(comp_ptr[c]), int(comp_ptr[c + 1])):
            later = np.arange(s + 1, comp_ptr[c + 1])
            acts = [] if terminal[s] else [[0], [1], [0, 1], [0, 1]][rng.integers(0, 4)]
            for a in acts:
                k = int(rng.integers(1, 4)) if rng.random() < 0.4 else 1
                tr_next.extend(rng.choice(later, k))
                w = rng.integers(1, 4, k).astype(float)
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
    rows, deg = np.diff(g.sa_ptr), np.diff(g.tr_ptr)
    assert (rows == 1).any() and (rows == 2).any() and (deg == 1).any() and (deg > 1).any()
    return comp_ptr.astype(idx), g, n


@pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])
@pytest.mark.parametrize("idx", [np.int32, np.int64])
@pytest.mark.parametrize("n_k", [1, 2, 5])
def test_sweep_costs_matches_every_row_scored(py, idx, n_k):
    rng = np.random.default_rng(10 * n_k + (idx == np.int64))
    comp_ptr, g, n = _graph(rng, rng.integers(1, 25, 12), idx)
    r = np.array([0.0, 0.5, 0.25, 1e-13, 0.1][:n_k])
    starts = comp_ptr[:-1].astype(np.int64)
    fn = parametric.sweep_costs.py_func if py else parametric.sweep_costs
    for gamma, tie_tol in ((1.0, 1e-12), (0.9, 1e-12), (1.0, 0.0)):  # 0.0: exact ties
        ref_val, ref_act, ref_start = _reference(comp_ptr, g, r, gamma, tie_tol, starts, n)
        for write in (True, False):
            m = n if write else 0
            out = Values(np.full((n_k, m, 3), np.nan), np.full((n_k, m), 99, np.int8))
            start_vals = np.full((len(starts), n_k, 3), np.nan)
            fn(comp_ptr, g, r, gamma, tie_tol, starts, start_vals, out)
            assert np.array_equal(start_vals, ref_start)
            if write:
                assert np.array_equal(out.val, ref_val)
                assert np.array_equal(out.action, ref_act)
        assert (ref_act == 0).any() and (ref_act == 1).any()  # both actions chosen
