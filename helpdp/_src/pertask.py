"""Per-task kernels: the loader's (state ids by hashing, transitions grouped into
CSR rows, connected components and the task-contiguous layout in one breadth-first
pass, renumbering) and the backward pass over tasks with dynamic scheduling. Arrays
in, arrays out; every function is numba-jitted with ``cache=True`` and its Python
body reachable via ``.py_func``.

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
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from helpdp._src.bundles import Csr, index_dtype
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


@intrinsic
def _prefetch_intrinsic(typingctx, arr, idx):
    """Hint the CPU to fetch the cache line of ``arr[idx]`` (``arr[idx, 0]``...)."""
    if not isinstance(arr, types.Array):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        first = context.cast(builder, args[1], sig.args[1], types.intp)
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer(
            context, builder, sig.args[0], ary, [first] + [zero] * (sig.args[0].ndim - 1)
        )
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # read, high temporal locality, data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


if numba.config.DISABLE_JIT:  # pragma: no cover - the interpreted fallback

    def prefetch(arr, idx):
        pass

else:

    @njit(cache=True)
    def prefetch(arr, idx):
        """Start loading the cache line of row ``idx`` of ``arr`` (a hint: no effect
        on results). Hash probes and gathers at random issue it a few iterations
        ahead, so that their cache misses overlap."""
        _prefetch_intrinsic(arr, idx)


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
def backward_chunks(n_workers, chunks, g, b, out):
    """The backward pass of an acyclic, task-contiguous graph, chunk by chunk.

    Every component is numbered topologically, so ``n - 1, ..., 0`` is reverse
    topological and each chunk is swept from its last state down (``sweep`` with
    no order array). ``n_workers`` is ``numba.get_num_threads()`` (passed in:
    reading it inside would keep numba from caching the kernel); ``chunks`` is a
    ``bundles.Chunks`` (whole components). Each numba thread takes the next chunk
    of ``chunks.sched`` from a shared counter and backs it up serially. Results are
    identical to the serial pass. Returns the largest change of any value.
    """
    n = g.terminal.shape[0]
    no_order = np.zeros(0, np.int64)
    n_chunks = chunks.sched.shape[0]
    counter = np.zeros(1, np.int64)
    changes = np.zeros(n_chunks)
    for _w in prange(n_workers):
        while True:
            i = fetch_add(counter, 0, 1)
            if i >= n_chunks:
                break
            c = chunks.sched[i]
            changes[c] = sweep(no_order, n - chunks.hi[c], n - chunks.lo[c], g, b, out)
    return changes.max() if n_chunks > 0 else 0.0


# --- the loader's kernels (helpdp.data). Large arrays that are read or written at
# random come from the caller: numpy asks the kernel for transparent huge pages on
# them, numba's allocator does not, and on a virtual machine a TLB miss costs a
# two-level page walk (measured: the radix sort of 10^7 keys 0.40 -> 0.21 CPU-s).


@njit(cache=True)
def radix_sort_into(keys, k, k2, idx, i2):
    """Stable sort of int64 ``keys`` in place; returns the stable argsort (one of
    ``idx``, ``i2``). ``k``, ``k2`` (uint64), ``idx``, ``i2`` (int64) are scratch of
    the keys' length. LSD radix sort on 11-bit digits (2048 buckets stay in L1),
    keys carried along so every pass reads sequentially, passes where every key has
    the same digit skipped: O(n) per pass where ``np.argsort`` of 10^7 int64 is a
    comparison sort."""
    n = keys.shape[0]
    for i in range(n):
        idx[i] = i
    if n < 2:
        return idx
    lo = keys.min()
    for i in range(n):
        k[i] = np.uint64(keys[i] - lo)
    n_pass = 6  # 66 bits
    hist = np.zeros((n_pass, 2048), np.int64)
    mask = np.uint64(2047)
    for i in range(n):
        v = k[i]
        for p in range(n_pass):
            hist[p, (v >> np.uint64(11 * p)) & mask] += 1
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
    for i in range(n):
        keys[i] = np.int64(k[i]) + lo
    return idx


@njit(cache=True)
def radix_argsort(keys):
    """Stable argsort of int64 ``keys`` (``radix_sort_into`` on fresh scratch)."""
    n = keys.shape[0]
    tmp = keys.copy()
    k = np.empty(n, np.uint64)
    k2 = np.empty(n, np.uint64)
    return radix_sort_into(tmp, k, k2, np.empty(n, np.int64), np.empty(n, np.int64))


_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


def id_table_rows(n: int) -> int:
    """Rows of ``id_table``'s table for ``n`` ids: a power of two, at most 3/4 full."""
    rows = 16
    while rows * 3 < 4 * n:
        rows *= 2
    return rows


@njit(cache=True)
def _hash_slot(key, shift):
    """Top bits of the 64-bit finaliser of MurmurHash3 of ``key``: any key set,
    hashes or counters, spreads over the table."""
    h = np.uint64(key)
    h ^= h >> _S33
    h *= _MIX1
    h ^= h >> _S33
    h *= _MIX2
    h ^= h >> _S33
    return np.int64(h >> np.uint64(shift))


@njit(cache=True)
def _shift(table):
    bits = 0
    while (1 << bits) < table.shape[0]:
        bits += 1
    return 64 - bits


PREFETCH = 16  # hash probes issued ahead of use (measured: 10^7 probes -22% CPU)


@njit(cache=True)
def id_table(ids, table):
    """Fill ``table`` (zeros, ``(id_table_rows(len(ids)), 2)`` int64) as an
    open-addressing hash table of ``ids`` (linear probing): a row holds an id and
    1 + its row in ``ids`` (0: empty), side by side, so that a probe reads one cache
    line. Returns the first row of ``ids`` repeating an earlier row's id (-1 when
    none); a repeated id keeps its first row."""
    shift = _shift(table)
    mask = table.shape[0] - 1
    n = ids.shape[0]
    first_dup = -1
    for i in range(n):
        if i + PREFETCH < n:
            prefetch(table, _hash_slot(ids[i + PREFETCH], shift))
        key = ids[i]
        s = _hash_slot(key, shift)
        while True:
            if table[s, 1] == 0:
                table[s, 0] = key
                table[s, 1] = i + 1
                break
            if table[s, 0] == key:
                if first_dup < 0:
                    first_dup = i
                break
            s = (s + 1) & mask
    return first_dup


@njit(cache=True, nogil=True)
def id_lookup(table, queries, out):
    """``out[i]``: the row of ``queries[i]`` in the ids of ``id_table`` (-1 when
    absent). Returns the first query row whose id is absent (-1 when none).
    Releases the GIL: lookups of several columns may run side by side."""
    shift = _shift(table)
    mask = table.shape[0] - 1
    m = queries.shape[0]
    first_missing = -1
    for i in range(m):
        if i + PREFETCH < m:
            prefetch(table, _hash_slot(queries[i + PREFETCH], shift))
        key = queries[i]
        s = _hash_slot(key, shift)
        while True:
            v = table[s, 1]
            if v == 0:
                out[i] = -1
                if first_missing < 0:
                    first_missing = i
                break
            if table[s, 0] == key:
                out[i] = v - 1
                break
            s = (s + 1) & mask
    return first_missing


@njit(cache=True)
def row_keys(src, act, dst, a_bits, key):
    """``key[i] = src[i] << a_bits | act[i]`` (the (state, action) row); returns
    whether the transitions are already in (state, action, next state) order."""
    in_order = True
    prev = -1
    prev_d = -1
    for i in range(src.shape[0]):
        k = (src[i] << a_bits) | act[i]
        key[i] = k
        d = dst[i]
        if k < prev or (k == prev and d < prev_d):
            in_order = False
        prev = k
        prev_d = d
    return in_order


@njit(cache=True)
def radix_sort_pairs(key, a, b, key2, a2, b2):
    """Stable sort of the non-negative int64 ``key`` carrying ``a`` and ``b`` along
    (LSD radix sort: as few passes of at most 11-bit digits as the largest key
    needs, digits of equal width; ``key2``, ``a2``, ``b2`` are scratch of the same
    length). Returns the sorted ``(key, a, b)`` (the inputs or the scratch)."""
    n = key.shape[0]
    top = 0
    for i in range(n):
        top = max(top, key[i])
    bits = 1
    while (1 << bits) <= top:
        bits += 1
    n_pass = (bits + 10) // 11
    width = (bits + n_pass - 1) // n_pass
    n_dig = 1 << width
    hist = np.zeros((n_pass, n_dig), np.int64)
    for i in range(n):
        v = key[i]
        for p in range(n_pass):
            hist[p, (v >> (width * p)) & (n_dig - 1)] += 1
    for p in range(n_pass):
        off = np.empty(n_dig, np.int64)
        acc = 0
        for d in range(n_dig):
            off[d] = acc
            acc += hist[p, d]
        sh = width * p
        for i in range(n):
            v = key[i]
            d = (v >> sh) & (n_dig - 1)
            j = off[d]
            off[d] = j + 1
            key2[j] = v
            a2[j] = a[i]
            b2[j] = b[i]
        key, key2 = key2, key
        a, a2 = a2, a
        b, b2 = b2, b
    return key, a, b


@njit(cache=True)
def count_rows(key):
    """Distinct values of the sorted ``key``."""
    n_rows = 0
    for i in range(key.shape[0]):
        if i == 0 or key[i] != key[i - 1]:
            n_rows += 1
    return n_rows


@njit(cache=True)
def _sort_row(nxt, cnt, lo, hi):
    """Sort the transitions ``lo:hi`` of one (state, action) row by ``nxt``,
    carrying ``cnt`` along."""
    if hi - lo <= 24:
        for a in range(lo + 1, hi):
            d = nxt[a]
            c = cnt[a]
            b = a - 1
            while b >= lo and nxt[b] > d:
                nxt[b + 1] = nxt[b]
                cnt[b + 1] = cnt[b]
                b -= 1
            nxt[b + 1] = d
            cnt[b + 1] = c
    else:
        p = np.argsort(nxt[lo:hi], kind="mergesort")
        nxt[lo:hi] = nxt[lo:hi][p]
        cnt[lo:hi] = cnt[lo:hi][p]


@njit(cache=True)
def fill_rows(key, nxt, cnt, a_bits, sort_rows, out):
    """The state -> (state, action) row -> transition CSR arrays of transitions
    sorted by ``key`` (``row_keys``), with next state ``nxt`` and count ``cnt``;
    with ``sort_rows`` each row is first sorted by ``nxt`` (in place). Fills the
    ``bundles.Rows`` ``out``: ``sa_ptr`` (zeros, n + 1), ``row_action``,
    ``row_count``, ``tr_ptr`` (``count_rows(key)`` rows, + 1), ``tr_prob`` (count /
    row count), ``visits`` (zeros, n: the row counts of each state summed row by
    row, float64). Returns whether some (state, action, next state) repeats."""
    sa_ptr, row_action, row_count, tr_ptr, tr_prob, visits = out
    m = key.shape[0]
    a_mask = (1 << a_bits) - 1
    dup = False
    n_rows = row_action.shape[0]
    lo = 0
    for j in range(n_rows):
        hi = lo + 1
        while hi < m and key[hi] == key[lo]:
            hi += 1
        if sort_rows and hi - lo > 1:
            _sort_row(nxt, cnt, lo, hi)
        rc = cnt[lo]
        for k in range(lo + 1, hi):
            rc += cnt[k]
            if nxt[k] == nxt[k - 1]:
                dup = True
        s = key[lo] >> a_bits
        row_action[j] = key[lo] & a_mask
        row_count[j] = rc
        tr_ptr[j] = lo
        sa_ptr[s + 1] += 1
        visits[s] += rc
        for k in range(lo, hi):
            tr_prob[k] = cnt[k] / rc
        lo = hi
    tr_ptr[n_rows] = m
    for s in range(sa_ptr.shape[0] - 1):
        sa_ptr[s + 1] += sa_ptr[s]
    return dup


@njit(cache=True)
def _root(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]  # path halving
        x = parent[x]
    return x


@njit(cache=True)
def _kahn(n, sa_ptr, tr_ptr, tr_next, node, topo, pos_level, pos_label):
    """Kahn's algorithm with a FIFO queue, as ``kernels.topological_order``, labelling
    weakly connected components on the way: a start state opens a label, a
    successor takes its first parent's, an edge between two labels joins them.
    ``node[s]`` (zeros) holds in-degree, level and 1 + label of ``s``, in one cache
    line; per topological position ``pos_level``, ``pos_label``. The CSR reads of
    the states 8 to 24 places ahead in the queue are prefetched, stage by stage.
    Returns ``(n_done, parent)`` (``parent``: the union-find over labels)."""
    m = tr_next.shape[0]
    for t in range(m):
        if t + PREFETCH < m:
            prefetch(node, tr_next[t + PREFETCH])
        node[tr_next[t], 0] += 1
    tail = 0
    for s in range(n):
        if node[s, 0] == 0:
            topo[tail] = s
            node[s, 2] = tail + 1
            pos_level[tail] = 0
            pos_label[tail] = tail
            tail += 1
    parent = np.arange(tail)
    head = 0
    while head < tail:
        if head + 24 < tail:
            prefetch(sa_ptr, topo[head + 24])
        if head + 16 < tail:
            prefetch(tr_ptr, sa_ptr[topo[head + 16]])
        if head + 8 < tail:
            prefetch(tr_next, tr_ptr[sa_ptr[topo[head + 8]]])
        s = topo[head]
        ls = pos_level[head] + 1
        lab = pos_label[head]
        head += 1
        t0 = tr_ptr[sa_ptr[s]]
        t1 = tr_ptr[sa_ptr[s + 1]]
        for t in range(t0, t1):
            prefetch(node, tr_next[t])
        for t in range(t0, t1):
            nxt = tr_next[t]
            if ls > node[nxt, 1]:
                node[nxt, 1] = ls
            other = node[nxt, 2] - 1
            if other < 0:  # the first parent passes its label on
                node[nxt, 2] = lab + 1
            elif other != lab:  # a later one joins the two
                a = _root(parent, lab)
                b = _root(parent, other)
                if a < b:
                    parent[b] = a
                elif b < a:
                    parent[a] = b
            node[nxt, 0] -= 1
            if node[nxt, 0] == 0:
                topo[tail] = nxt
                pos_level[tail] = node[nxt, 1]
                pos_label[tail] = node[nxt, 2] - 1
                tail += 1
    return tail, parent


@njit(cache=True)
def task_layout(n, sa_ptr, tr_ptr, tr_next, node, work, inv, order):
    """The task-by-task layout of an acyclic transition graph, in one breadth-first
    pass (``_kahn``).

    Components (tasks) are numbered in the order of their smallest state index;
    the new numbering lists them one after the other, each level by level
    (longest distance from a start), in topological (breadth-first) order within a
    level: the stable sort of the topological order by (component, level).
    ``node`` (zeros, (n, 4), int32 or int64 to hold the largest in-degree) and
    ``work`` ((4, n) int64) are scratch. Fills ``inv`` (new state
    ``i`` is old state ``inv[i]``) and ``order`` (the new states level by level,
    deepest first, ascending within a level). Returns ``(acyclic, comp_ptr,
    block_ptr)``: component ``c`` is new states ``comp_ptr[c]:comp_ptr[c+1]``, level
    ``b`` of ``order`` is ``order[block_ptr[b]:block_ptr[b+1]]``. With a cycle only
    ``acyclic`` (False) is meaningful.
    """
    topo, pos_level, pos_label, pos_comp = work[0], work[1], work[2], work[3]
    done, parent = _kahn(n, sa_ptr, tr_ptr, tr_next, node, topo, pos_level, pos_label)
    empty = np.zeros(0, np.int64)
    if done < n:
        return False, empty, empty
    n_levels = 1
    for i in range(n):
        n_levels = max(n_levels, pos_level[i] + 1)
    comp_of = np.full(parent.shape[0], -1, np.int64)
    n_comp = 0
    for s in range(n):  # components by smallest state index
        r = _root(parent, node[s, 2] - 1)
        if comp_of[r] < 0:
            comp_of[r] = n_comp
            n_comp += 1
    comp_ptr = np.zeros(n_comp + 1, np.int64)
    for i in range(n):
        c = comp_of[_root(parent, pos_label[i])]
        pos_comp[i] = c
        comp_ptr[c + 1] += 1
    for c in range(n_comp):
        comp_ptr[c + 1] += comp_ptr[c]
    new_level = pos_label  # free from here on
    if n_comp * n_levels > 4 * n + 4096:  # many pairs: by level, then by component
        p = counting_order(pos_comp, n_comp, counting_order(pos_level, n_levels, np.arange(n)))
        for i in range(n):
            inv[i] = topo[p[i]]
            new_level[i] = pos_level[p[i]]
    else:  # one counting pass over (component, level) pairs
        n_keys = n_comp * n_levels
        cnt = np.zeros(n_keys + 1, np.int64)
        for i in range(n):
            cnt[pos_comp[i] * n_levels + pos_level[i] + 1] += 1
        for k in range(n_keys):
            cnt[k + 1] += cnt[k]
        for i in range(n):
            k = pos_comp[i] * n_levels + pos_level[i]
            j = cnt[k]
            cnt[k] = j + 1
            inv[j] = topo[i]
            new_level[j] = pos_level[i]
    block_ptr = np.zeros(n_levels + 1, np.int64)
    for i in range(n):
        block_ptr[n_levels - new_level[i]] += 1
    for b in range(n_levels):
        block_ptr[b + 1] += block_ptr[b]
    fill = block_ptr[:-1].copy()
    for i in range(n):
        b = n_levels - 1 - new_level[i]
        order[fill[b]] = i
        fill[b] += 1
    return True, comp_ptr, block_ptr


@njit(cache=True)
def renumber_into(inv, old, new, new_of_old):
    """The CSR arrays ``old`` (a ``bundles.Csr``) with states renumbered into ``new``
    (a ``Csr`` of the same sizes: ``sa_ptr`` n + 1, ``tr_ptr`` rows + 1): new state
    ``i`` is old state ``inv[i]``. Rows keep their order within a state, transitions
    within a row. Fills ``new_of_old`` (n) and ``new``."""
    sa_ptr, sa_action, sa_count, tr_ptr, tr_next, tr_prob = old
    nsa, nact, ncnt, ntr, nnext, nprob = new
    n = inv.shape[0]
    for i in range(n):
        new_of_old[inv[i]] = i
    j_new = 0
    t_new = 0
    nsa[0] = 0
    ntr[0] = 0
    for i in range(n):
        if i + 24 < n:  # the reads of the states ahead, stage by stage
            prefetch(sa_ptr, inv[i + 24])
        if i + 16 < n:
            prefetch(tr_ptr, sa_ptr[inv[i + 16]])
        if i + 8 < n:
            t8 = tr_ptr[sa_ptr[inv[i + 8]]]
            prefetch(tr_next, t8)
            prefetch(tr_prob, t8)
        o = inv[i]
        for t in range(tr_ptr[sa_ptr[o]], tr_ptr[sa_ptr[o + 1]]):
            prefetch(new_of_old, tr_next[t])
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


def empty_csr(n, n_rows, n_tr, action_dtype, count_dtype):
    """A ``bundles.Csr`` of fresh arrays for ``n`` states, ``n_rows`` rows and ``n_tr``
    transitions: pointers int32 where the sizes allow (``bundles.index_dtype``),
    ``tr_next`` int32, ``tr_prob`` float64. Refuses ``n`` of 2^31 or more (a
    successor index is int32)."""
    if n >= 2**31:
        raise ValueError(f"{n} states: at most 2^31 - 1 are supported (int32 successor index)")
    return Csr(
        np.empty(n + 1, index_dtype(n_rows)),
        np.empty(n_rows, action_dtype),
        np.empty(n_rows, count_dtype),
        np.empty(n_rows + 1, index_dtype(n_tr)),
        np.empty(n_tr, np.int32),
        np.empty(n_tr, np.float64),
    )


def renumber(inv, old):
    """``renumber_into`` on fresh arrays (``empty_csr``). Returns ``(new, new_of_old)``."""
    n = inv.shape[0]
    rows, tr = old.sa_action.shape[0], old.tr_next.shape[0]
    new = empty_csr(n, rows, tr, old.sa_action.dtype, old.sa_count.dtype)
    new_of_old = np.empty(n, np.int64)
    renumber_into(inv, old, new, new_of_old)
    return new, new_of_old


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
    """Weakly connected components of the transition graph (union-find over every
    edge; the reference for ``task_layout``'s, which finds them during its pass).

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
