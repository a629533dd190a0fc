"""Numeric kernels of the help-policy dynamic program: arrays in, arrays out.

No I/O, no config, no pandas. Every function is numba-jitted with ``cache=True``;
the plain Python body stays reachable through ``.py_func`` for tests.

The MDP is stored as two nested CSR structures (see ``helpdp.data.MDP``), handed
to the kernels as one ``bundles.Graph``:

* state ``s`` owns the state-action rows ``sa_ptr[s] : sa_ptr[s + 1]``, sorted by
  action ascending (so "less help" comes first); ``sa_action[j]`` is the action of
  row ``j`` (0 = nohelp, k >= 1 = intervention k);
* row ``j`` owns the transitions ``tr_ptr[j] : tr_ptr[j + 1]`` with successor
  ``tr_next[t]`` (int32 index) and probability ``tr_prob[t]``.

Values are stored interleaved, one row per state, for locality of the random reads
of successors: ``val[s, 0] = V``, ``val[s, 1] = S`` (discounted success),
``val[s, 2 + k - 1] = M^k`` (discounted number of calls of intervention k).
``costs[a]`` is the cost of action ``a`` (``costs[0] == 0``).

Two action-selection rules share one sweep:

* ``RULE_EXACT``: the Lagrangian Bellman backup of docs/method.md, "The equations",
  ``Q_a = -costs[a] + gamma * sum P_a V'``.
* ``RULE_PAPER``: the usage/policy iteration of Min et al. (2025, Sec. 5.2), which
  scores an action by a process reward model's success estimate ``p_a`` and the
  usage it leads to, ``Q_a = p_a * (1 - sum_k r_k M^k_a)`` with
  ``M^k_a = [a == k] + gamma * sum P_a M^k'``. For one intervention this is the
  paper's test "help iff r < dp / dM" with ``dp = p_help - p_nohelp`` and
  ``dM = p_help M_help - p_nohelp M_nohelp``, evaluated as the linear inequality
  ``dp - r dM > 0`` so that ``dM <= 0`` (help lowers later usage) is handled: then
  help wins for every r when ``dp > 0``. As the contract says, ``|dM| <= dm_tol``
  defaults to the less-help action. It differs from ``RULE_EXACT`` in three ways:
  (1) success comes from the PRM (the success of continuing *as the data was
  collected*), not from the DP's own S under the new policy; (2) usage is paid
  only on success (``p * r * M``), the reward of Min et al. (2025) "1 - r * usage on success";
  (3) it is a fixed-point iteration with no optimality guarantee, hence
  ``max_iters``. S and M are still computed under the model for the chosen policy,
  so both rules report E[U] and E[S] the same way.

Ties go to the action with less help: a later row replaces the best only when its
score is larger by more than ``tie_tol``.
"""

import numpy as np
from numba import njit, prange

RULE_EXACT = 0
RULE_PAPER = 1


@njit(cache=True)
def _u(i):
    """``i`` as an unsigned array index. numba lets a signed index count from the end
    (``a[-1]``): a test and an add at every access. No index of the kernels is
    negative, and an unsigned one skips them (measured with bench/dp_callgrind.py:
    about a third of the serial pass). No arithmetic on the result: numba types an
    unsigned and a signed integer together as float64."""
    return np.uint64(i)


@njit(cache=True)
def sweep(order, lo, hi, g, b, out):
    """Back up the states ``order[lo:hi]`` in place, in that order (an empty ``order``
    stands for ``n - 1, ..., 0``: the per-task pass reads no order array).

    ``g`` is the model (``bundles.Graph``), ``b`` the rule (``bundles.Backup``),
    ``out`` the ``bundles.Values`` written: ``val`` (n, 2 + K) and ``action`` (n,)
    int8 (-1 where no action applies). Exact on acyclic graphs when the order is
    reverse topological (every successor is backed up before its parents). Returns
    the largest absolute change of any value (the convergence measure of repeated
    sweeps).

    The state backup is written inline, not as a called function: a call per
    state passing 16 arrays made the sweep 3x slower. A state with one row takes it
    without scoring it; V (exact rule), S and M^1 of the chosen row are summed in one
    loop over its transitions, M^k for k >= 2 in a loop each. Every sum runs over the
    transitions in order, as a loop of its own would: the same numbers to the bit.
    """
    sa_ptr, sa_action, tr_ptr, tr_next, tr_prob, terminal, success = g
    p_row, costs, gamma, rule, tie_tol, dm_tol = b
    val, action = out
    n_col = val.shape[1]  # 2 + K
    n_int = n_col - 2
    c_m1 = min(n_col - 1, 2)  # the column of M^1 (K >= 1; S's when K = 0, unused)
    n_last = terminal.shape[0] - 1
    by_index = order.shape[0] == 0
    change = 0.0
    for i in range(lo, hi):
        s = _u(n_last - i) if by_index else _u(order[_u(i)])
        old_v = val[s, 0]
        old_s = val[s, 1]
        j0 = sa_ptr[s]
        j1 = sa_ptr[s + _u(1)]
        if terminal[s] or j0 == j1:
            # terminal: its outcome. A non-terminal state with no observed action
            # (a truncated episode): no success was observed beyond it -> failure.
            v = 1.0 if success[s] else 0.0
            val[s, 0] = v
            val[s, 1] = v
            if n_int > 0:  # M^1 apart from the loop over the others: K = 1 has no loop
                change = max(change, abs(val[s, 2]))
                val[s, 2] = 0.0
            for c in range(3, n_col):
                change = max(change, abs(val[s, c]))
                val[s, c] = 0.0
            action[s] = -1
            change = max(change, max(abs(v - old_v), abs(v - old_s)))
            continue
        t0 = tr_ptr[_u(j0)]
        if n_col == 3 and j1 - j0 == 1 and tr_ptr[_u(j0 + 1)] - t0 == 1:
            # one row, one transition (most states of a history tree): the code below
            # without its loops of one iteration, the same operations to the bit
            a = sa_action[_u(j0)]
            p = tr_prob[_u(t0)]
            nxt = _u(tr_next[_u(t0)])
            s_new = gamma * (0.0 + p * val[nxt, 1])
            mk = gamma * (0.0 + p * val[nxt, 2]) + (1.0 if a == 1 else 0.0)
            v_new = s_new - costs[1] * mk
            if rule == RULE_EXACT:
                v_new = -costs[_u(a)] + gamma * (0.0 + p * val[nxt, 0])
            change = max(change, abs(mk - val[s, 2]))
            val[s, 0], val[s, 1], val[s, 2], action[s] = v_new, s_new, mk, a
            change = max(change, max(abs(v_new - old_v), abs(s_new - old_s)))
            continue
        best_j = j0  # the only row, if one
        best_q = 0.0
        if j1 - j0 > 1:
            best_j = -1
            best_q = -np.inf
            best_m = 0.0  # success-weighted usage p_a * sum_k M^k_a of the best row (paper)
            for j in range(j0, j1):
                a = sa_action[_u(j)]
                if rule == RULE_EXACT:
                    acc = 0.0
                    for t in range(tr_ptr[_u(j)], tr_ptr[_u(j + 1)]):
                        acc += tr_prob[_u(t)] * val[_u(tr_next[_u(t)]), 0]
                    q = -costs[_u(a)] + gamma * acc
                    if q > best_q + tie_tol:
                        best_q = q
                        best_j = j
                else:
                    # usage after taking a, then following the current policy:
                    # cost-weighted (rm = sum_k r_k M^k_a) and plain (um = sum_k M^k_a)
                    rm = costs[_u(a)]
                    um = 1.0 if a > 0 else 0.0
                    for t in range(tr_ptr[_u(j)], tr_ptr[_u(j + 1)]):
                        nxt = _u(tr_next[_u(t)])
                        gp = gamma * tr_prob[_u(t)]
                        for k in range(n_int):
                            rm += gp * costs[k + 1] * val[nxt, 2 + k]
                            um += gp * val[nxt, 2 + k]
                    p = p_row[_u(j)]
                    q = p * (1.0 - rm)
                    m = p * um
                    if best_j < 0 or (q > best_q + tie_tol and abs(m - best_m) > dm_tol):
                        best_q = q
                        best_j = j
                        best_m = m
        a = sa_action[_u(best_j)]
        t0 = tr_ptr[_u(best_j)]
        t1 = tr_ptr[_u(best_j + 1)]
        # V, S and M^1 of the chosen row, one read of its transitions (V only used
        # where it was not summed above: one row, exact rule)
        acc_v = 0.0
        acc_s = 0.0
        acc_m = 0.0
        for t in range(t0, t1):
            p = tr_prob[_u(t)]
            nxt = _u(tr_next[_u(t)])
            acc_v += p * val[nxt, 0]
            acc_s += p * val[nxt, 1]
            acc_m += p * val[nxt, c_m1]
        if j1 - j0 == 1:
            best_q = -costs[_u(a)] + gamma * acc_v
        s_new = gamma * acc_s
        v_new = s_new
        if n_int > 0:
            mk = gamma * acc_m
            if a == 1:
                mk += 1.0
            change = max(change, abs(mk - val[s, 2]))
            val[s, 2] = mk
            v_new -= costs[1] * mk
        for c in range(3, n_col):  # M^2, M^3, ...: a read of the row each
            acc_m = 0.0
            for t in range(t0, t1):
                acc_m += tr_prob[_u(t)] * val[_u(tr_next[_u(t)]), c]
            mk = gamma * acc_m
            if a == c - 1:
                mk += 1.0
            change = max(change, abs(mk - val[s, c]))
            val[s, c] = mk
            v_new -= costs[c - 1] * mk
        if rule == RULE_EXACT:
            v_new = best_q
        val[s, 0] = v_new
        val[s, 1] = s_new
        action[s] = a
        change = max(change, max(abs(v_new - old_v), abs(s_new - old_s)))
    return change


@njit(cache=True)
def backward_pass(order, g, b, out):
    """One serial sweep over all of ``order`` (see ``sweep``; empty: ``n - 1, ..., 0``)."""
    n = order.shape[0] if order.shape[0] > 0 else g.terminal.shape[0]
    return sweep(order, 0, n, g, b, out)


@njit(cache=True, parallel=True)
def backward_levels(order, block_ptr, chunk, g, b, out):
    """The backward pass of an acyclic graph, in parallel within each level.

    ``order[block_ptr[b]:block_ptr[b + 1]]`` holds the states of one level (equal
    longest distance from a start), deepest level first. No edge joins two states
    of a level, so each block's states are backed up concurrently, in chunks of
    ``chunk`` states; results are identical to the serial pass.
    """
    change = 0.0
    for lev in range(block_ptr.shape[0] - 1):
        lo = block_ptr[lev]
        hi = block_ptr[lev + 1]
        n_chunks = (hi - lo + chunk - 1) // chunk
        ch = np.zeros(n_chunks)
        for c in prange(n_chunks):
            c0 = lo + c * chunk
            ch[c] = sweep(order, c0, min(hi, c0 + chunk), g, b, out)
        if n_chunks > 0:
            change = max(change, ch.max())
    return change


@njit(cache=True)
def iterate_sweeps(order, g, b, tol, max_iters, out):
    """Gauss-Seidel sweeps until the largest change of V, S and M is below ``tol``.

    For graphs with cycles (``gamma < 1`` guarantees convergence of the exact
    rule). Returns ``(sweeps, last_change)``; the caller decides whether a run
    that hit ``max_iters`` is acceptable.
    """
    change = np.inf
    it = 0
    while it < max_iters:
        it += 1
        change = backward_pass(order, g, b, out)
        if change < tol:
            break
    return it, change


@njit(cache=True)
def topological_order(n, sa_ptr, tr_ptr, tr_next):
    """Kahn's algorithm with a FIFO queue (breadth-first: children get numbers near
    their parents). Returns ``(order, level, acyclic)``: ``order`` lists parents
    before children and has length ``n`` only when the graph is acyclic;
    ``level[s]`` is the longest distance from a state without parents."""
    indeg = np.zeros(n, np.int64)
    for t in range(tr_next.shape[0]):
        indeg[tr_next[t]] += 1
    order = np.empty(n, np.int64)
    level = np.zeros(n, np.int64)
    head = 0
    tail = 0
    for s in range(n):
        if indeg[s] == 0:
            order[tail] = s
            tail += 1
    while head < tail:
        s = order[head]
        head += 1
        for t in range(tr_ptr[sa_ptr[s]], tr_ptr[sa_ptr[s + 1]]):
            nxt = tr_next[t]
            if level[s] + 1 > level[nxt]:
                level[nxt] = level[s] + 1
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                order[tail] = nxt
                tail += 1
    return order[:tail], level, tail == n


@njit(cache=True)
def weighted_means(val, weights):
    """Weighted column means of ``val`` (n, w) with ``weights`` (n,)."""
    out = np.zeros(val.shape[1])
    total = 0.0
    for s in range(val.shape[0]):
        w = weights[s]
        if w != 0.0:
            total += w
            for c in range(val.shape[1]):
                out[c] += w * val[s, c]
    for c in range(val.shape[1]):
        out[c] /= total
    return out
