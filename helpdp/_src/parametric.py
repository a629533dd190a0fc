"""Parametric backward pass: every state's optimal value as a function of the help
cost r, for one intervention on an acyclic graph. Arrays in, arrays out; numba
with ``cache=True``, Python bodies reachable via ``.py_func``.

For one intervention, ``V_s(r) = max_pi S^pi_s - r M^pi_s`` is convex and piecewise
linear in r >= 0. A state's function is stored as its pieces: piece ``i`` starts
at ``b[i]`` (``b[0] = 0``, increasing) and carries the S and M of the policy
optimal on ``[b[i], b[i+1])``. The backup is exact on pieces:

* an action's ``Q_a(r) = -r [a > 0] + gamma sum P_a V_s'(r)`` has the union of its
  successors' breakpoints; on each merged interval S and M are the same sums the
  fixed-r kernel (``kernels.sweep``) computes, in the same order;
* ``V_s = max(Q_nohelp, Q_help)`` splits an interval where the two lines cross.
  The tie rule is the fixed-r kernel's: help wins only where its value is larger
  by more than ``tie_tol``, so the split sits at ``(dS - tie_tol) / dM``, where the
  fixed-r solver changes its decision. (The exact crossing ``dS / dM`` would merge
  tasks that tie in exact arithmetic into one breakpoint, but misplace the policy
  at r = 0 when help now saves help later at equal success: there the solver
  keeps "less help now" up to r = tie_tol.)

Pieces with the same (S, M) as their left neighbour are merged. A component's
objective is the start-weighted sum of its start states' functions; its
breakpoints, with the jumps of E[U] and E[S] there, are the task's frontier.
The global frontier is the sum over components (``helpdp.frontier_merge``).
"""

import numpy as np
from numba import njit

from helpdp._src.bundles import Pieces, Sources
from helpdp._src.kernels import _u


@njit(cache=True)
def _grow(a, need):
    if need <= a.shape[0]:
        return a
    out = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _merge_room(m, srcs_lo, srcs_hi):
    """Pieces ``_merge_sum`` may append for these sources, at most."""
    room = 1
    for k in range(m):
        room += srcs_hi[k] - srcs_lo[k] - 1
    return room


@njit(cache=True)
def _merge_sum(m, srcs, add, gamma, src, out, n_out):
    """Append to the ``Pieces`` ``out`` from ``n_out`` the pieces of
    ``add * r-term + gamma * sum_k coef[k] f_k``, ``f_k`` the piece lists
    ``lo[k]:hi[k]`` (``srcs``, a ``bundles.Sources`` of at least ``m`` successors) of
    the ``Pieces`` ``src``; ``add`` is 1.0 for the help action (its own call), else
    0.0. ``out`` must have room for ``_merge_room`` more pieces. Returns the new
    ``n_out``. The sums run in the order of the fixed-r kernel."""
    srcs_lo, srcs_hi, coef, cur = srcs
    B, S, U = src
    ob, os_, ou = out
    for k in range(m):
        cur[k] = srcs_lo[k]
    r = 0.0
    while True:
        acc_s = 0.0
        acc_m = 0.0
        for k in range(m):
            acc_s += coef[k] * S[cur[k]]
        for k in range(m):
            acc_m += coef[k] * U[cur[k]]
        s_val = gamma * acc_s
        m_val = gamma * acc_m
        if add != 0.0:
            m_val += add
        ob[n_out] = r
        os_[n_out] = s_val
        ou[n_out] = m_val
        n_out += 1
        nb = np.inf
        for k in range(m):
            if cur[k] + 1 < srcs_hi[k]:
                nb = min(nb, B[cur[k] + 1])
        if nb == np.inf:
            break
        r = nb
        for k in range(m):
            while cur[k] + 1 < srcs_hi[k] and B[cur[k] + 1] <= r:
                cur[k] += 1
    return n_out


@njit(cache=True)
def _push(ob, os_, ou, n_out, base, x, s_val, m_val):
    """Append piece (x, s, m) to the list that starts at ``base``, unless it repeats
    the last piece's line; a piece starting where the last one started replaces it.
    The buffers must have room for it. Returns the new length."""
    if n_out > base and ob[n_out - 1] >= x:
        n_out -= 1
    if n_out > base and os_[n_out - 1] == s_val and ou[n_out - 1] == m_val:
        return n_out
    ob[n_out] = x
    os_[n_out] = s_val
    ou[n_out] = m_val
    return n_out + 1


@njit(cache=True)
def _envelope(t, ia, ea, ib, eb, tie_tol, out, n_out):
    """Upper envelope of the piece lists ``ia:ea`` (nohelp) and ``ib:eb`` (help) of
    the ``Pieces`` ``t``, appended to the ``Pieces`` ``out``, which must have room for
    ``2 * (ea - ia + eb - ib)`` more pieces: help wins where ``Lb - La > tie_tol``.
    Returns the new length."""
    tb, ts, tu = t
    ob, os_, ou = out
    base = n_out
    x = 0.0
    while True:
        na = tb[ia + 1] if ia + 1 < ea else np.inf
        nb = tb[ib + 1] if ib + 1 < eb else np.inf
        end = min(na, nb)
        d_s = ts[ib] - ts[ia]
        d_m = tu[ib] - tu[ia]
        dx = d_s - x * d_m
        if end == np.inf:
            de = d_s if d_m == 0.0 else (-np.inf if d_m > 0 else np.inf)
        else:
            de = d_s - end * d_m
        b_first = dx > tie_tol
        b_last = de > tie_tol
        if b_first == b_last:
            if b_first:
                n_out = _push(ob, os_, ou, n_out, base, x, ts[ib], tu[ib])
            else:
                n_out = _push(ob, os_, ou, n_out, base, x, ts[ia], tu[ia])
        else:
            rc = (d_s - tie_tol) / d_m
            if not rc > x:
                rc = x
            if b_first:
                n_out = _push(ob, os_, ou, n_out, base, x, ts[ib], tu[ib])
                if rc < end:
                    n_out = _push(ob, os_, ou, n_out, base, rc, ts[ia], tu[ia])
            else:
                n_out = _push(ob, os_, ou, n_out, base, x, ts[ia], tu[ia])
                if rc < end:
                    n_out = _push(ob, os_, ou, n_out, base, rc, ts[ib], tu[ib])
        if end == np.inf:
            break
        x = end
        if na <= end:
            ia += 1
        if nb <= end:
            ib += 1
    return n_out


@njit(cache=True)
def _room(a, b, c, need):
    """``(a, b, c)``, each grown (doubling) to hold at least ``need`` entries."""
    if need <= a.shape[0]:
        return a, b, c
    return _grow(a, need), _grow(b, need), _grow(c, need)


@njit(cache=True)
def _sizes(comp_ptr, comps, sa_ptr, tr_ptr):
    """``(max_deg, biggest)``: the most transitions of a row and the most states of a
    component among ``comps`` (a call takes a few tasks: their rows only)."""
    max_deg = 1
    biggest = 0
    for i in range(comps.shape[0]):
        c = comps[i]
        biggest = max(biggest, comp_ptr[c + 1] - comp_ptr[c])
        for j in range(sa_ptr[comp_ptr[c]], sa_ptr[comp_ptr[c + 1]]):
            max_deg = max(max_deg, tr_ptr[j + 1] - tr_ptr[j])
    return max_deg, biggest


@njit(cache=True)
def _start_sources(st, lo, hi, start_weight):
    """The start states of the component ``lo:hi`` as the ``Sources`` of its objective
    (their pieces ``st[s - lo]``, weighted by ``start_weight``), ascending."""
    n_start = 0
    for s in range(lo, hi):
        if start_weight[s] != 0.0:
            n_start += 1
    out = Sources(
        np.empty(n_start, np.int64),
        np.empty(n_start, np.int64),
        np.empty(n_start),
        np.empty(n_start, np.int64),
    )
    k = 0
    for s in range(lo, hi):
        if start_weight[s] != 0.0:
            out.lo[k] = st[s - lo, 0]
            out.hi[k] = st[s - lo, 1]
            out.coef[k] = start_weight[s]
            k += 1
    return out


@njit(cache=True, nogil=True)
def trace_components(comp_ptr, comps, g, start_weight, gamma, tie_tol, max_pieces):
    """The frontier of each component ``comps[i]`` (states ``comp_ptr[c]:comp_ptr[c+1]``,
    numbered topologically within the component; one intervention) of the model ``g``
    (a ``bundles.Graph``).

    Returns ``(ok, piece_ptr, b, s, u)``: component ``comps[i]``'s objective
    ``sum_start w_s V_s(r)`` has the pieces ``piece_ptr[i]:piece_ptr[i+1]`` (start
    r, start-weighted sums of S and M; not normalised). ``ok`` is False when some
    component needed more than ``max_pieces`` stored pieces (its trace is then
    left out: the caller falls back to the solve-based frontier).
    """
    sa_ptr, sa_action, tr_ptr, tr_next, tr_prob, terminal, success = g
    n_c = comps.shape[0]
    piece_ptr = np.zeros(n_c + 1, np.int64)
    rb = np.empty(16)
    rs = np.empty(16)
    ru = np.empty(16)
    n_res = 0
    # pool of the current component's state functions
    pb = np.empty(1024)
    ps = np.empty(1024)
    pu = np.empty(1024)
    tb = np.empty(64)  # temporary Q pieces of the help and nohelp rows
    ts = np.empty(64)
    tu = np.empty(64)
    max_deg, biggest = _sizes(comp_ptr, comps, sa_ptr, tr_ptr)
    s_lo = np.empty(max_deg, np.int64)  # per successor of a row: its pieces, weight
    s_hi = np.empty(max_deg, np.int64)
    coef = np.empty(max_deg)
    cur = np.empty(max_deg, np.int64)
    # pieces of state s: pool[st[s - lo, 0]:st[s - lo, 1]]
    st = np.empty((biggest, 2), np.int64)
    for i in range(n_c):
        c = comps[i]
        lo = comp_ptr[c]
        hi = comp_ptr[c + 1]
        n_pool = 0
        for s in range(hi - 1, lo - 1, -1):
            j0 = sa_ptr[s]
            j1 = sa_ptr[s + 1]
            if terminal[s] or j0 == j1:
                v = 1.0 if success[s] else 0.0
                if n_pool + 1 > pb.shape[0]:
                    pb, ps, pu = _room(pb, ps, pu, n_pool + 1)
                pb[n_pool] = 0.0
                ps[n_pool] = v
                pu[n_pool] = 0.0
                st[s - lo, 0] = n_pool
                st[s - lo, 1] = n_pool + 1
                n_pool += 1
                continue
            # Q pieces of each row (at most two: nohelp, help) into the buffer
            n_t = 0
            r_lo0 = r_hi0 = r_lo1 = r_hi1 = 0
            for j in range(j0, j1):
                t0 = tr_ptr[j]
                t1 = tr_ptr[j + 1]
                m = t1 - t0
                single = True
                for t in range(t0, t1):
                    nx = tr_next[t] - lo
                    s_lo[t - t0] = st[nx, 0]
                    s_hi[t - t0] = st[nx, 1]
                    coef[t - t0] = tr_prob[t]
                    if st[nx, 1] - st[nx, 0] > 1:
                        single = False
                row_start = n_t
                add = 1.0 if sa_action[j] > 0 else 0.0
                if single:  # one line: the fixed-r backup, no merge
                    acc_s = 0.0
                    acc_m = 0.0
                    for k in range(m):
                        acc_s += coef[k] * ps[s_lo[k]]
                    for k in range(m):
                        acc_m += coef[k] * pu[s_lo[k]]
                    m_val = gamma * acc_m
                    if add != 0.0:
                        m_val += add
                    if n_t + 1 > tb.shape[0]:
                        tb, ts, tu = _room(tb, ts, tu, n_t + 1)
                    tb[n_t] = 0.0
                    ts[n_t] = gamma * acc_s
                    tu[n_t] = m_val
                    n_t += 1
                else:
                    need = n_t + _merge_room(m, s_lo, s_hi)
                    if need > tb.shape[0]:
                        tb, ts, tu = _room(tb, ts, tu, need)
                    srcs, pool, tmp = (
                        Sources(s_lo, s_hi, coef, cur),
                        Pieces(pb, ps, pu),
                        Pieces(tb, ts, tu),
                    )
                    n_t = _merge_sum(m, srcs, add, gamma, pool, tmp, n_t)
                if j == j0:
                    r_lo0, r_hi0 = row_start, n_t
                else:
                    r_lo1, r_hi1 = row_start, n_t
            start = n_pool
            need = n_pool + 2 * n_t
            if need > pb.shape[0]:
                pb, ps, pu = _room(pb, ps, pu, need)
            if j1 - j0 == 1:
                for k in range(r_lo0, r_hi0):
                    n_pool = _push(pb, ps, pu, n_pool, start, tb[k], ts[k], tu[k])
            else:
                # rows sorted by action: nohelp first, help second (one intervention)
                tmp, pool = Pieces(tb, ts, tu), Pieces(pb, ps, pu)
                n_pool = _envelope(tmp, r_lo0, r_hi0, r_lo1, r_hi1, tie_tol, pool, n_pool)
            st[s - lo, 0] = start
            st[s - lo, 1] = n_pool
            if n_pool > max_pieces:
                return False, piece_ptr, rb[:n_res], rs[:n_res], ru[:n_res]
        # the component's objective: start-weighted sum of its start states
        starts = _start_sources(st, lo, hi, start_weight)
        n_start = starts.lo.shape[0]
        if n_start > 0:
            need = _merge_room(n_start, starts.lo, starts.hi)
            if need > tb.shape[0]:
                tb, ts, tu = _room(tb, ts, tu, need)
            pool, tmp = Pieces(pb, ps, pu), Pieces(tb, ts, tu)
            n_t = _merge_sum(n_start, starts, 0.0, 1.0, pool, tmp, 0)
            base = n_res
            if n_res + n_t > rb.shape[0]:
                rb, rs, ru = _room(rb, rs, ru, n_res + n_t)
            for k in range(n_t):
                n_res = _push(rb, rs, ru, n_res, base, tb[k], ts[k], tu[k])
        piece_ptr[i + 1] = n_res
    return True, piece_ptr, rb[:n_res].copy(), rs[:n_res].copy(), ru[:n_res].copy()


@njit(cache=True, nogil=True)
def sweep_costs(comp_ptr, g, r, gamma, tie_tol, starts, start_vals, out):
    """The fixed-r exact backward pass (``kernels.sweep`` with ``RULE_EXACT``, one
    intervention) at every help cost ``r[k]`` at once, component by component, on
    the model ``g`` (a ``bundles.Graph``).

    Components ``comp_ptr[c]:comp_ptr[c+1]`` are numbered topologically inside (as
    ``helpdp.data`` lays tasks out). A component's values at every r live in a
    scratch block of (its states, 3 K) while it is backed up (a task's block stays
    in cache for its successors' reads, and the inner loops run over k), and are
    written out as each state is final.
    Every row's V, S and M sums are formed at every r and the best row's kept (the
    fixed-r kernel sums S and M of the chosen row only: the same sums, in the same
    order), with the fixed-r tie rule, so the results equal K separate solves bit
    for bit. A state's first row is taken unscored (the fixed-r rule: q > -inf), so
    a state with one row is written without a comparison; indices are unsigned
    (``kernels._u``: no negative-index test at every access). Writes ``out`` (a
    ``bundles.Values``): ``val[k]`` ((n, 3): V, S, M per
    state) and ``action[k]`` ((n,) int8, -1 where no action applies), a (K, n, 3) and
    a (K, n) array; with n = 0 nothing is written per state (the pass then costs no
    memory per state and r). Always writes ``start_vals[i, k]`` (V, S, M of state
    ``starts[i]`` at ``r[k]``; ``starts`` ascending), from which ``start_means`` gives
    E[U], E[S] at every r.
    """
    sa_ptr, sa_action, tr_ptr, tr_next, tr_prob, terminal, success = g
    vals, actions = out
    write = vals.shape[1] > 0
    n_k = r.shape[0]
    biggest = 0
    for c in range(comp_ptr.shape[0] - 1):
        biggest = max(biggest, comp_ptr[c + 1] - comp_ptr[c])
    # row ls of buf: V at every r, then S, then M (indexed directly: array views
    # would cost reference counts per state)
    buf = np.empty((biggest, 3 * n_k))
    buf_a = np.empty((biggest, n_k), np.int8)
    acc_v = np.empty(n_k)
    acc_s = np.empty(n_k)
    acc_m = np.empty(n_k)
    i_start = 0
    for c in range(comp_ptr.shape[0] - 1):
        lo = comp_ptr[_u(c)]
        hi = comp_ptr[_u(c + 1)]
        for s in range(hi - 1, lo - 1, -1):
            ls = _u(s - lo)
            j0 = sa_ptr[_u(s)]
            j1 = sa_ptr[_u(s + 1)]
            if terminal[_u(s)] or j0 == j1:
                v = 1.0 if success[_u(s)] else 0.0
                for k in range(n_k):
                    buf[ls, _u(k)] = v
                    buf[ls, _u(n_k + k)] = v
                    buf[ls, _u(2 * n_k + k)] = 0.0
                    buf_a[ls, _u(k)] = -1
                if write:
                    for k in range(n_k):
                        vals[_u(k), _u(s), 0] = v
                        vals[_u(k), _u(s), 1] = v
                        vals[_u(k), _u(s), 2] = 0.0
                        actions[_u(k), _u(s)] = -1
                continue
            for j in range(j0, j1):
                a = sa_action[_u(j)]
                cost_on = a > 0
                own = 1.0 if a == 1 else 0.0
                first = j == j0  # the first row is taken (the fixed-r rule: q > -inf)
                t0 = tr_ptr[_u(j)]
                t1 = tr_ptr[_u(j + 1)]
                p = tr_prob[_u(t0)]
                nx = _u(tr_next[_u(t0)] - lo)
                if t1 - t0 > 1:  # 0.0 + p * x: the fixed-r sum's first step
                    for k in range(n_k):
                        acc_v[_u(k)] = 0.0 + p * buf[nx, _u(k)]
                        acc_s[_u(k)] = 0.0 + p * buf[nx, _u(n_k + k)]
                        acc_m[_u(k)] = 0.0 + p * buf[nx, _u(2 * n_k + k)]
                    for t in range(t0 + 1, t1):
                        p = tr_prob[_u(t)]
                        nx = _u(tr_next[_u(t)] - lo)
                        for k in range(n_k):
                            acc_v[_u(k)] += p * buf[nx, _u(k)]
                            acc_s[_u(k)] += p * buf[nx, _u(n_k + k)]
                            acc_m[_u(k)] += p * buf[nx, _u(2 * n_k + k)]
                for k in range(n_k):
                    ks = _u(n_k + k)
                    km = _u(2 * n_k + k)
                    if t1 - t0 == 1:  # one successor (most rows of a history tree)
                        q = -(r[_u(k)] if cost_on else 0.0) + gamma * (0.0 + p * buf[nx, _u(k)])
                        s_val = gamma * (0.0 + p * buf[nx, ks])
                        m_val = gamma * (0.0 + p * buf[nx, km])
                    else:
                        q = -(r[_u(k)] if cost_on else 0.0) + gamma * acc_v[_u(k)]
                        s_val = gamma * acc_s[_u(k)]
                        m_val = gamma * acc_m[_u(k)]
                    m_val = m_val + own if own != 0.0 else m_val
                    take = first or q > buf[ls, _u(k)] + tie_tol
                    buf[ls, _u(k)] = q if take else buf[ls, _u(k)]
                    buf[ls, ks] = s_val if take else buf[ls, ks]
                    buf[ls, km] = m_val if take else buf[ls, km]
                    buf_a[ls, _u(k)] = a if take else buf_a[ls, _u(k)]
            if write:
                for k in range(n_k):  # out as soon as final (the block is in cache now)
                    vals[_u(k), _u(s), 0] = buf[ls, _u(k)]
                    vals[_u(k), _u(s), 1] = buf[ls, _u(n_k + k)]
                    vals[_u(k), _u(s), 2] = buf[ls, _u(2 * n_k + k)]
                    actions[_u(k), _u(s)] = buf_a[ls, _u(k)]
        while i_start < starts.shape[0] and starts[_u(i_start)] < hi:  # this task's starts
            ls = _u(starts[_u(i_start)] - lo)
            for k in range(n_k):
                start_vals[_u(i_start), _u(k), 0] = buf[ls, _u(k)]
                start_vals[_u(i_start), _u(k), 1] = buf[ls, _u(n_k + k)]
                start_vals[_u(i_start), _u(k), 2] = buf[ls, _u(2 * n_k + k)]
            i_start += 1
    return 0


@njit(cache=True)
def start_means(starts, weights, start_vals):
    """``kernels.weighted_means`` of the solution at every ``r[k]`` from the values of
    its start states (``start_vals[i, k]`` of ``sweep_costs``; ``starts``: the
    states of non-zero weight, ascending), summed in the same order: (K, 3)."""
    n_k = start_vals.shape[1]
    out = np.zeros((n_k, 3))
    for k in range(n_k):
        total = 0.0
        for i in range(starts.shape[0]):
            w = weights[starts[i]]
            total += w
            for c in range(3):
                out[k, c] += w * start_vals[i, k, c]
        for c in range(3):
            out[k, c] /= total
    return out
