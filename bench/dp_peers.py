"""The solvers a user might pick instead of helpdp's DP, fed the same MDP
(``bench/dp.py`` times them in the same run): vectorised ``scipy.sparse`` value
iteration, and ``pymdptoolbox`` / ``mdpsolver`` where installed from PyPI."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import scipy.sparse as sp


def scipy_vi(mdp, r: float, gamma: float, tol: float = 1e-10):
    """The baseline a user would write: vectorized sparse value iteration on V."""
    rows = np.repeat(np.arange(mdp.n_rows), np.diff(mdp.tr_ptr))
    P = sp.csr_matrix((mdp.tr_prob, (rows, mdp.tr_next)), shape=(mdp.n_rows, mdp.n_states))
    cost = np.where(mdp.sa_action > 0, r, 0.0)
    has = np.diff(mdp.sa_ptr) > 0
    starts = mdp.sa_ptr[:-1][has]
    term_v = np.where(mdp.success, 1.0, 0.0)

    def run():
        v = term_v.copy()
        for it in range(10_000):
            q = gamma * (P @ v) - cost
            new = term_v.copy()
            new[has] = np.maximum.reduceat(q, starts)
            if np.max(np.abs(new - v)) < tol:
                return new, it + 1
            v = new
        raise RuntimeError("no convergence")

    return run


def third_party_inputs(mdp, r: float):
    """Every action at every state; unobserved actions copy nohelp at cost 1e6."""
    n = mdp.n_states
    rows = np.repeat(np.arange(mdp.n_rows), np.diff(mdp.tr_ptr))
    row_state = np.repeat(np.arange(n), np.diff(mdp.sa_ptr))
    mats, rewards = [], np.zeros((n, 2))
    succ = mdp.success.astype(float)
    for a in (0, 1):
        sel = mdp.sa_action == a
        row_of_state = np.full(n, -1)
        row_of_state[row_state[sel]] = np.flatnonzero(sel)
        fallback = np.full(n, -1)
        fallback[row_state[mdp.sa_action == 0]] = np.flatnonzero(mdp.sa_action == 0)
        use = np.where(row_of_state >= 0, row_of_state, fallback)
        i, j, p = [], [], []
        mask = np.isin(rows, use[use >= 0])
        src_state = row_state[rows[mask]]
        i.append(src_state)
        j.append(mdp.tr_next[mask])
        p.append(mdp.tr_prob[mask])
        absorbing = np.flatnonzero(use < 0)
        i.append(absorbing)
        j.append(absorbing)
        p.append(np.ones(absorbing.size))
        M = sp.csr_matrix((np.concatenate(p), (np.concatenate(i), np.concatenate(j))), shape=(n, n))
        mats.append(M)
        imm = M @ np.where(mdp.terminal, succ, 0.0)
        imm[absorbing] = 0.0
        cost = (r if a else 0.0) + np.where((row_of_state < 0) & (use >= 0), 1e6, 0.0)
        rewards[:, a] = imm - np.where(use >= 0, cost, 0.0)
    return mats, rewards


TOOLBOX = "pymdptoolbox ValueIteration"
MDPSOLVER = "mdpsolver value iteration, OpenMP"


def third_party_solvers(mdp, r: float, gamma: float) -> dict:
    """The installed peers as ``{name: (solve, gamma)}``: each ``solve()`` runs one
    solve on inputs built here, once (the build is not timed). ``gamma`` is the
    discount each runs at: pymdptoolbox at 1 (with gamma < 1 its constructor bounds
    the iteration count with a Python loop over states, minutes at 10^6; our graphs
    converge without it), mdpsolver at ``gamma`` (its value iteration needs < 1)."""
    mats, rewards = third_party_inputs(mdp, r)
    out = {}
    try:
        import mdptoolbox.mdp

        # its input check densifies sparse matrices (S x S floats): skip it, the
        # matrices are stochastic by construction
        mdptoolbox.mdp._util.check = lambda P, R: None

        def toolbox():
            # (it prints a convergence warning at gamma 1 on every construction)
            with contextlib.redirect_stdout(io.StringIO()):
                vi = mdptoolbox.mdp.ValueIteration(
                    mats, rewards, 1.0, epsilon=1e-6, max_iter=10_000
                )
            vi.run()

        out[TOOLBOX] = (toolbox, 1.0)
    except ImportError:
        pass
    try:
        import mdpsolver

        elem = []
        for a, M in enumerate(mats):
            coo = M.tocoo()
            elem.append(np.c_[coo.row, np.full(coo.nnz, a), coo.col, coo.data])
        tran = np.concatenate(elem).tolist()
        for e in tran:
            e[0], e[1], e[2] = int(e[0]), int(e[1]), int(e[2])
        rew = [[int(s), a, float(rewards[s, a])] for s in range(mdp.n_states) for a in (0, 1)]
        m = mdpsolver.model()
        m.mdp(discount=gamma, rewardsElementwise=rew, tranMatElementwise=tran)
        del tran, rew

        def solver():
            m.solve(algorithm="vi", tolerance=1e-6, update="standard", parallel=True)

        out[MDPSOLVER] = (solver, gamma)
    except ImportError:
        pass
    return out


MISSING = {TOOLBOX: "pip install pymdptoolbox", MDPSOLVER: "pip install mdpsolver"}
