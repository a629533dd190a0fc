"""Per-task kernels: connected components, the task-contiguous layout, the backward
pass over tasks with dynamic scheduling. Arrays in, arrays out; every function is
numba-jitted with ``cache=True`` and its Python body reachable via ``.py_func``.

States of different tasks never connect, so the transition graph is a union of
components. ``helpdp.data`` numbers states so that each component is one
contiguous range ``comp_ptr[c]:comp_ptr[c + 1]``, topologically ordered inside
(parents before children). A backward pass may then run component by component,
each serially, with components handed to threads on demand: no barrier but the
end of the pass, so a descheduled thread delays one chunk, not every level.

Dynamic scheduling: numba's OpenMP/workqueue layers split a ``prange`` statically,
whatever ``set_parallel_chunksize`` says (measured: 32/32 iterations per thread
under load). ``backward_chunks`` therefore runs one ``prange`` iteration per
thread, and each thread takes the next chunk from a shared counter with an
atomic fetch-and-add (an LLVM ``atomicrmw``), largest chunks first.
"""

import numba
import numpy as np
from numba import njit, prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from helpdp._src.kernels import sweep


@intrinsic
def _atomic_fetch_add(typingctx, arr, idx, val):
    """``old = arr[idx]; arr[idx] += val; return old`` as one atomic step (int64)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None
    sig = types.int64(arr, idx, val)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
        v = context.cast(builder, args[2], sig.args[2], types.int64)
        return builder.atomic_rmw("add", ptr, v, "seq_cst")

    return sig, codegen


if numba.config.DISABLE_JIT:  # pragma: no cover - the interpreted fallback

    def fetch_add(arr, idx, val):
        old = arr[idx]
        arr[idx] += val
        return old

else:

    @njit(cache=True)
    def fetch_add(arr, idx, val):
        """Atomic ``arr[idx] += val``, returning the old value (int64 arrays)."""
        return _atomic_fetch_add(arr, idx, val)


@njit(cache=True)
def _find(parent, x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@njit(cache=True)
def components(n, sa_ptr, tr_ptr, tr_next):
    """Weakly connected components of the transition graph (union-find).

    Returns ``(label, n_comp)``: ``label[s]`` numbers components 0.. in the order
    of their smallest state index.
    """
    parent = np.arange(n)
    for s in range(n):
        for t in range(tr_ptr[sa_ptr[s]], tr_ptr[sa_ptr[s + 1]]):
            a = _find(parent, s)
            b = _find(parent, tr_next[t])
            if a != b:
                if a < b:
                    parent[b] = a
                else:
                    parent[a] = b
    label = np.empty(n, np.int64)
    n_comp = 0
    for s in range(n):
        r = _find(parent, s)
        if r == s:
            label[s] = n_comp
            n_comp += 1
        else:
            label[s] = label[r]  # r < s: labelled already
    return label, n_comp


@njit(cache=True)
def counting_order(keys, n_keys, order):
    """``order`` stably re-sorted by ``keys[order]`` (keys in 0..n_keys-1), O(n)."""
    cnt = np.zeros(n_keys + 1, np.int64)
    for i in range(order.shape[0]):
        cnt[keys[order[i]] + 1] += 1
    for k in range(n_keys):
        cnt[k + 1] += cnt[k]
    out = np.empty_like(order)
    for i in range(order.shape[0]):
        k = keys[order[i]]
        out[cnt[k]] = order[i]
        cnt[k] += 1
    return out


@njit(cache=True)
def renumber(inv, sa_ptr, sa_action, sa_count, tr_ptr, tr_next, tr_prob):
    """The CSR arrays with states renumbered: new state ``i`` is old state
    ``inv[i]``. Rows keep their order within a state, transitions within a row.

    Returns ``(sa_ptr, sa_action, sa_count, tr_ptr, tr_next, tr_prob)`` (tr_next int32).
    """
    n = inv.shape[0]
    new_of_old = np.empty(n, np.int64)
    for i in range(n):
        new_of_old[inv[i]] = i
    n_rows = sa_action.shape[0]
    n_tr = tr_next.shape[0]
    nsa = np.empty(n + 1, np.int64)
    ntr = np.empty(n_rows + 1, np.int64)
    nact = np.empty(n_rows, sa_action.dtype)
    ncnt = np.empty(n_rows, sa_count.dtype)
    nnext = np.empty(n_tr, np.int32)
    nprob = np.empty(n_tr, np.float64)
    j_new = 0
    t_new = 0
    nsa[0] = 0
    ntr[0] = 0
    for i in range(n):
        o = inv[i]
        for j in range(sa_ptr[o], sa_ptr[o + 1]):
            nact[j_new] = sa_action[j]
            ncnt[j_new] = sa_count[j]
            for t in range(tr_ptr[j], tr_ptr[j + 1]):
                nnext[t_new] = new_of_old[tr_next[t]]
                nprob[t_new] = tr_prob[t]
                t_new += 1
            j_new += 1
            ntr[j_new] = t_new
        nsa[i + 1] = j_new
    return nsa, nact, ncnt, ntr, nnext, nprob, new_of_old


@njit(cache=True)
def chunk_starts(comp_ptr, target):
    """Indices of the components that start a chunk: consecutive components are
    grouped until the chunk holds at least ``target`` states."""
    n_c = comp_ptr.shape[0] - 1
    out = np.empty(n_c, np.int64)
    k = 0
    size = target
    for c in range(n_c):
        if size >= target:
            out[k] = c
            k += 1
            size = 0
        size += comp_ptr[c + 1] - comp_ptr[c]
    return out[:k]


def chunk_plan(comp_ptr, target):
    """Group consecutive components into chunks of at least ``target`` states (a
    component larger than that is a chunk of its own). Returns ``(lo, hi, sched)``:
    chunk ``c`` holds states ``lo[c]:hi[c]``; ``sched`` lists chunks largest first."""
    comp_ptr = np.asarray(comp_ptr, np.int64)
    starts = chunk_starts(comp_ptr, max(int(target), 1))
    lo = comp_ptr[starts]
    hi = np.r_[comp_ptr[starts[1:]], comp_ptr[-1]]
    sched = np.argsort(-(hi - lo), kind="stable")
    return lo.astype(np.int64), hi.astype(np.int64), sched.astype(np.int64)


@njit(cache=True, parallel=True)
def backward_chunks(
    n_workers, rev, chunk_lo, chunk_hi, chunk_order, sa_ptr, sa_action, tr_ptr, tr_next, tr_prob, terminal,
    success, p_row, costs, gamma, rule, tie_tol, dm_tol, val, action,
):  # fmt: skip
    """The backward pass of an acyclic, task-contiguous graph, chunk by chunk.

    ``rev`` is ``n-1, ..., 0`` (reverse topological when every component is
    numbered topologically); ``n_workers`` is ``numba.get_num_threads()`` (passed
    in: reading it inside would keep numba from caching the kernel); chunk ``c`` holds states ``chunk_lo[c]:chunk_hi[c]``
    (whole components). Each numba thread takes the next chunk of ``chunk_order`` from a
    shared counter and backs it up serially (``sweep``). Results are identical to
    the serial pass. Returns the largest change of any value.
    """
    n = rev.shape[0]
    n_chunks = chunk_order.shape[0]
    counter = np.zeros(1, np.int64)
    changes = np.zeros(n_chunks)
    for _w in prange(n_workers):
        while True:
            i = fetch_add(counter, 0, 1)
            if i >= n_chunks:
                break
            c = chunk_order[i]
            changes[c] = sweep(
                rev, n - chunk_hi[c], n - chunk_lo[c], sa_ptr, sa_action, tr_ptr, tr_next,
                tr_prob, terminal, success, p_row, costs, gamma, rule, tie_tol, dm_tol, val,
                action,
            )  # fmt: skip
    return changes.max() if n_chunks > 0 else 0.0


@njit(cache=True)
def radix_argsort(keys):
    """Stable argsort of int64 ``keys``: LSD radix sort on 11-bit digits (2048
    buckets stay in L1), keys carried along so every pass reads sequentially,
    passes where every key has the same digit skipped. O(n) per pass where
    ``np.argsort`` of 10^7 int64 is a comparison sort."""
    n = keys.shape[0]
    idx = np.arange(n)
    if n < 2:
        return idx
    lo = keys.min()
    k = np.empty(n, np.uint64)
    for i in range(n):
        k[i] = np.uint64(keys[i] - lo)
    n_pass = 6  # 66 bits
    hist = np.zeros((n_pass, 2048), np.int64)
    mask = np.uint64(2047)
    for i in range(n):
        v = k[i]
        for p in range(n_pass):
            hist[p, (v >> np.uint64(11 * p)) & mask] += 1
    k2 = np.empty(n, np.uint64)
    i2 = np.empty(n, np.int64)
    for p in range(n_pass):
        h = hist[p]
        if h.max() == n:
            continue  # one digit value: the pass changes nothing
        off = np.empty(2048, np.int64)
        acc = 0
        for d in range(2048):
            off[d] = acc
            acc += h[d]
        sh = np.uint64(11 * p)
        for i in range(n):
            v = k[i]
            d = (v >> sh) & mask
            pos = off[d]
            off[d] = pos + 1
            k2[pos] = v
            i2[pos] = idx[i]
        k, k2 = k2, k
        idx, i2 = i2, idx
    return idx


@njit(cache=True)
def sorted_lookup(id_sorted, perm, queries, q_order):
    """Position in the original table of each query id: ``id_sorted`` (sorted ids),
    ``perm`` (their original rows), ``q_order`` (argsort of ``queries``). A linear
    merge of the two sorted sequences. Returns ``(out, first_missing)``, the
    latter the smallest query row whose id is absent (-1 when none)."""
    out = np.empty(queries.shape[0], np.int64)
    first_missing = -1
    p = 0
    n = id_sorted.shape[0]
    for k in range(q_order.shape[0]):
        i = q_order[k]
        q = queries[i]
        while p < n and id_sorted[p] < q:
            p += 1
        if p < n and id_sorted[p] == q:
            out[i] = perm[p]
        else:
            out[i] = -1
            if first_missing < 0 or i < first_missing:
                first_missing = i
    return out, first_missing
