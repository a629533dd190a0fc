"""Numeric kernels of policy evaluation and reachability: arrays in, arrays out.

Same CSR layout as ``helpdp._src.kernels`` (see there; a ``bundles.Graph``): state ``s`` owns rows
``sa_ptr[s]:sa_ptr[s + 1]`` (actions ascending), row ``j`` owns transitions
``tr_ptr[j]:tr_ptr[j + 1]``. A *row policy* ``pi_row`` gives the probability of
taking each row's action at its state (a deterministic policy is 0/1 per row;
the rows of a state sum to 1, or to 0 where the policy has nothing to do there,
which then counts as failure, like a non-terminal state without observed
actions). ``evaluate_rows`` also gives ``helpdp.state_success`` (the data's
behaviour policy: action frequencies as ``pi_row``). No I/O, no pandas; numba-jitted with ``cache=True`` (``.py_func`` for
tests).
"""

import numpy as np
from numba import njit


@njit(cache=True)
def evaluate_rows(order, g, pi_row, flag, gamma, tol, max_iters, val):
    """Policy evaluation of the row policy ``pi_row`` on the model ``g`` (a
    ``bundles.Graph``); writes ``val`` (n, 2 + K):
    ``val[s, 0] = S`` (discounted success), ``val[s, k] = M^k`` (discounted calls
    of intervention k, k = 1..K), the quantities of docs/method.md, "The equations" for a fixed,
    possibly stochastic, policy, and ``val[s, K + 1] = F``, the expected discounted
    number of visits to states with ``flag[s] = 1`` (e.g. where the policy had to
    fall back on the data's behaviour).

    One sweep is exact when ``order`` is reverse topological (acyclic graphs);
    otherwise sweeps repeat until the largest change is below ``tol`` or
    ``max_iters`` sweeps ran. Returns the number of sweeps.
    """
    sa_ptr, sa_action, tr_ptr, tr_next, tr_prob, terminal, success = g
    n_col = val.shape[1]
    acc = np.zeros(n_col)
    it = 0
    while it < max_iters:
        it += 1
        change = 0.0
        for i in range(order.shape[0]):
            s = order[i]
            for c in range(n_col):
                acc[c] = 0.0
            if terminal[s]:
                acc[0] = 1.0 if success[s] else 0.0
            else:
                acc[n_col - 1] = flag[s]
                for j in range(sa_ptr[s], sa_ptr[s + 1]):
                    w = pi_row[j]
                    if w == 0.0:
                        continue
                    a = sa_action[j]
                    if a > 0:
                        acc[a] += w
                    for t in range(tr_ptr[j], tr_ptr[j + 1]):
                        gp = w * gamma * tr_prob[t]
                        nxt = tr_next[t]
                        for c in range(n_col):
                            acc[c] += gp * val[nxt, c]
            for c in range(n_col):
                change = max(change, abs(acc[c] - val[s, c]))
                val[s, c] = acc[c]
        if change < tol:
            break
    return it


@njit(cache=True)
def reachable(start, sa_ptr, tr_ptr, tr_next, pi_row):
    """States reachable from the states with ``start[s]`` true by following rows
    with ``pi_row > 0`` through observed transitions (depth-first, any graph)."""
    n = start.shape[0]
    seen = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    top = 0
    for s in range(n):
        if start[s]:
            seen[s] = True
            stack[top] = s
            top += 1
    while top > 0:
        top -= 1
        s = stack[top]
        for j in range(sa_ptr[s], sa_ptr[s + 1]):
            if pi_row[j] <= 0.0:
                continue
            for t in range(tr_ptr[j], tr_ptr[j + 1]):
                nxt = tr_next[t]
                if not seen[nxt]:
                    seen[nxt] = True
                    stack[top] = nxt
                    top += 1
    return seen


def deterministic_rows(sa_ptr, sa_action, action):
    """The row policy of a deterministic per-state ``action`` (int, -1: none): 1 on
    the row of the chosen action, 0 elsewhere (also 0 where that action has no row)."""
    n_rows = sa_action.shape[0]
    row_state = np.repeat(np.arange(sa_ptr.shape[0] - 1), np.diff(sa_ptr))
    return (
        (sa_action.astype(np.int64) == np.asarray(action, np.int64)[row_state])
        .astype(np.float64)
        .reshape(n_rows)
    )
