"""The loader's kernels (helpdp._src.pertask: id hashing, transition grouping, the
task layout, renumbering), jitted and via ``.py_func``, against plain numpy
references; and the compiled MDP against the loader before them, reimplemented
here with numpy sorts (bit for bit)."""

import numpy as np
import pandas as pd
import pytest
from dp_helpers import make_frames
from pertask_helpers import random_tasks

from helpdp import from_frames
from helpdp._src import kernels, pertask
from helpdp._src.bundles import Csr
from helpdp.data import DatasetError

JIT = pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])


def _f(name, py):
    fn = getattr(pertask, name)
    return fn.py_func if py else fn


def _id_sets(rng):
    """Key sets a hash table must spread: hashes, counters, strides of powers of two."""
    n = 300
    return [
        rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64),
        np.arange(n, dtype=np.int64),
        np.arange(n, dtype=np.int64) << 40,
        -np.arange(n, dtype=np.int64) * 7919 - 13,
    ]


@JIT
def test_id_table_finds_every_id_and_the_first_repeat(py):
    rng = np.random.default_rng(0)
    with np.errstate(over="ignore"):  # the hash multiplies modulo 2^64
        for ids in _id_sets(rng):
            table = np.zeros((pertask.id_table_rows(len(ids)), 2), np.int64)
            assert _f("id_table", py)(ids, table) == -1
            q = np.r_[ids[rng.integers(0, len(ids), 50)], ids[:3]]
            out = np.empty(len(q), np.int64)
            assert _f("id_lookup", py)(table, q, out) == -1
            assert np.array_equal(ids[out], q)
            # absent ids: -1, and the first absent row is reported
            absent = np.setdiff1d(np.r_[ids + 1, ids - 1], ids)[:2]
            q2 = np.r_[q[:5], absent[0], q[5:9], absent[1]]
            out2 = np.empty(len(q2), np.int64)
            assert _f("id_lookup", py)(table, q2, out2) == 5
            assert out2[5] == -1 and out2[-1] == -1 and np.array_equal(ids[out2[:5]], q[:5])
            # a repeated id: the first row repeating an earlier one; it keeps its first row
            dup = np.r_[ids[:10], ids[7], ids[10:20], ids[2]]
            table = np.zeros((pertask.id_table_rows(len(dup)), 2), np.int64)
            assert _f("id_table", py)(dup, table) == 10
            out3 = np.empty(1, np.int64)
            _f("id_lookup", py)(table, ids[7:8], out3)
            assert out3[0] == 7


@JIT
def test_radix_sorts_are_stable_argsorts(py):
    rng = np.random.default_rng(1)
    for keys in (
        rng.integers(-(2**62), 2**62, 500),
        rng.integers(0, 7, 500),
        np.zeros(5, np.int64),
        np.array([3], np.int64),
    ):
        ref = np.argsort(keys, kind="stable")
        k = keys.copy()
        n = len(k)
        idx = _f("radix_sort_into", py)(
            k,
            np.empty(n, np.uint64),
            np.empty(n, np.uint64),
            np.empty(n, np.int64),
            np.empty(n, np.int64),
        )
        assert np.array_equal(idx, ref) and np.array_equal(k, keys[ref])
        assert np.array_equal(_f("radix_argsort", py)(keys), ref)
        if keys.min() >= 0:
            a, b = rng.integers(0, 100, n), rng.integers(0, 100, n)
            sk, sa, sb = _f("radix_sort_pairs", py)(
                keys.copy(),
                a.copy(),
                b.copy(),
                np.empty(n, np.int64),
                np.empty(n, np.int64),
                np.empty(n, np.int64),
            )
            assert np.array_equal(sk, keys[ref])
            assert np.array_equal(sa, a[ref]) and np.array_equal(sb, b[ref])


def _rows_reference(src, act, dst, cnt, n, n_actions):
    """The loader's CSR arrays the way it built them before (one sort key)."""
    full = (src * n_actions + act) * n + dst
    o = np.argsort(full, kind="stable")
    full, cnt_s = full[o], cnt[o]
    key = full // n
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    row_count = np.add.reduceat(cnt_s, start)
    row_state = key[start] // n_actions
    tr_ptr = np.r_[start, len(key)]
    prob = cnt_s / np.repeat(row_count, np.diff(tr_ptr))
    sa_ptr = np.r_[0, np.cumsum(np.bincount(row_state, minlength=n))]
    visits = np.bincount(row_state, weights=row_count, minlength=n)
    return (
        sa_ptr,
        (key[start] % n_actions).astype(np.int8),
        row_count,
        tr_ptr,
        full % n,
        prob,
        visits,
    )


@JIT
@pytest.mark.parametrize("n_actions", [2, 3])
def test_grouped_transitions_match_one_sort_key(py, n_actions, monkeypatch):
    from helpdp import data

    for name in ("row_keys", "radix_sort_pairs", "count_rows", "fill_rows"):
        monkeypatch.setattr(pertask, name, _f(name, py))
    rng = np.random.default_rng(n_actions)
    n, m = 40, 300
    src = rng.integers(0, n, m)
    act = rng.integers(0, n_actions, m)
    dst = rng.integers(0, n, m)
    key = np.unique((src * n_actions + act) * n + dst)  # no repeats
    src, rem = np.divmod(key, n_actions * n)
    act, dst = rem // n, rem % n
    cnt = rng.integers(1, 9, len(src))
    ref = _rows_reference(src, act, dst, cnt, n, n_actions)
    for perm in (np.arange(len(src)), rng.permutation(len(src))):  # in order, shuffled
        s, a, d, c = src[perm], act[perm], dst[perm], cnt[perm]
        c.flags.writeable = False  # as pandas hands it over
        dup, csr, visits = data._group(s.copy(), a, d.copy(), c, n, n_actions)
        assert not dup
        for x, y in zip((*csr, visits), ref):
            assert np.array_equal(x, y) and x.dtype.kind == y.dtype.kind
    # a repeated (state, action, next) is found, in or out of order
    s, a, d = np.r_[src, src[4]], np.r_[act, act[4]], np.r_[dst, dst[4]]
    c = np.r_[cnt, 1]
    assert data._group(s.copy(), a, d.copy(), c, n, n_actions)[0]
    perm = rng.permutation(len(s))
    assert data._group(s[perm], a[perm], d[perm].copy(), c[perm], n, n_actions)[0]


def _layout_reference(n, sa_ptr, tr_ptr, tr_next):
    """The task layout the way the loader computed it before: topological order,
    union-find components, counting sorts by level and component."""
    topo, level, acyclic = kernels.topological_order(n, sa_ptr, tr_ptr, tr_next)
    if not acyclic:
        return None
    comp, n_comp = pertask.components(n, sa_ptr, tr_ptr, tr_next)
    n_levels = int(level.max()) + 1
    inv = pertask.counting_order(level, n_levels, topo)
    inv = pertask.counting_order(comp, n_comp, inv)
    comp_ptr = np.r_[0, np.cumsum(np.bincount(comp, minlength=n_comp))]
    new_level = level[inv]
    order = pertask.counting_order(n_levels - 1 - new_level, n_levels, np.arange(n))
    block_ptr = np.r_[0, np.cumsum(np.bincount(new_level, minlength=n_levels)[::-1])]
    return inv, comp_ptr, order, block_ptr


def _random_forest(rng, n, n_edges, cyclic=False):
    """Random edges between a few blocks of states (components), forward in a random
    numbering (acyclic) unless ``cyclic``; several sources and merges per block.
    Returns the CSR arrays, one row per state with successors."""
    block = np.sort(rng.integers(0, 5, n))
    rank = rng.permutation(n)
    edges = set()
    while len(edges) < n_edges:
        a, b = rng.integers(0, n, 2)
        if block[a] == block[b] and rank[a] < rank[b]:
            edges.add((int(a), int(b)))
    if cyclic:
        a, b = min(edges)
        edges.add((b, a))
    src, dst = np.array(sorted(edges)).T
    deg = np.bincount(src, minlength=n)
    sa_ptr = np.r_[0, np.cumsum(deg > 0)].astype(np.int64)
    tr_ptr = np.r_[0, np.cumsum(deg[deg > 0])].astype(np.int64)
    return sa_ptr, tr_ptr, dst.astype(np.int64)


@JIT
@pytest.mark.parametrize("seed", range(3))
def test_task_layout_matches_sorts_by_component_and_level(py, seed):
    rng = np.random.default_rng(seed)
    n = 60
    for cyclic in (False, True):
        sa_ptr, tr_ptr, tr_next = _random_forest(rng, n, 80, cyclic)
        ref = _layout_reference(n, sa_ptr, tr_ptr, tr_next)
        for dtype in (np.int32, np.int64):
            inv, order = np.empty(n, np.int64), np.empty(n, np.int64)
            node, work = np.zeros((n, 4), dtype), np.empty((4, n), np.int64)
            acyclic, comp_ptr, block_ptr = _f("task_layout", py)(
                n, sa_ptr, tr_ptr, tr_next, node, work, inv, order
            )
            assert acyclic == (ref is not None) == (not cyclic)
            if ref is not None:
                for x, y in zip((inv, comp_ptr, order, block_ptr), ref):
                    assert np.array_equal(x, y)


@JIT
def test_renumber_into_moves_every_edge(py):
    m = from_frames(*random_tasks(7, n_tasks=4)).mdp
    n = m.n_states
    inv = np.random.default_rng(0).permutation(n).astype(np.int64)
    old = Csr(m.sa_ptr, m.sa_action, m.sa_count, m.tr_ptr, m.tr_next, m.tr_prob)
    new = pertask.empty_csr(n, m.n_rows, m.n_transitions, np.int8, np.int64)
    assert new.sa_ptr.dtype == new.tr_ptr.dtype == np.int32  # 32-bit where the sizes allow
    new_of_old = np.empty(n, np.int64)
    _f("renumber_into", py)(inv, old, new, new_of_old)
    sa, act, cnt, tp, nx, pr = new
    assert np.array_equal(new_of_old[inv], np.arange(n))
    for i in range(n):  # new state i carries old state inv[i]'s rows, in order
        o = inv[i]
        assert np.array_equal(act[sa[i] : sa[i + 1]], m.sa_action[m.sa_ptr[o] : m.sa_ptr[o + 1]])
        t_old = slice(m.tr_ptr[m.sa_ptr[o]], m.tr_ptr[m.sa_ptr[o + 1]])
        t_new = slice(tp[sa[i]], tp[sa[i + 1]])
        assert np.array_equal(nx[t_new], new_of_old[m.tr_next[t_old]])
        assert np.array_equal(pr[t_new], m.tr_prob[t_old])


def _reference_mdp(manifest, states, trans):
    """The compiled MDP the way the loader built it before (sorts, reduceat,
    topological order, union-find, counting sorts, renumbering)."""
    na = len(manifest["actions"])
    sid = states["state_id"].to_numpy(np.int64)
    n = len(sid)
    pos = {v: i for i, v in enumerate(sid)}
    src = np.array([pos[v] for v in trans["state_id"]], np.int64)
    dst = np.array([pos[v] for v in trans["next_state_id"]], np.int64)
    act = trans["action"].to_numpy(np.int64)
    cnt = trans["count"].to_numpy(np.int64)
    sa_ptr, row_action, row_count, tr_ptr, tr_next, prob, visits = _rows_reference(
        src, act, dst, cnt, n, na
    )
    start_weight = np.where(states["is_start"].to_numpy(bool), visits, 0.0)
    inv, comp_ptr, order, block_ptr = _layout_reference(n, sa_ptr, tr_ptr, tr_next)
    out, _ = pertask.renumber(inv, Csr(sa_ptr, row_action, row_count, tr_ptr, tr_next, prob))
    terminal = states["terminal"].to_numpy(bool)
    success = states["success"].to_numpy(bool)
    return dict(
        sa_ptr=out[0],
        sa_action=out[1],
        sa_count=out[2],
        tr_ptr=out[3],
        tr_next=out[4],
        tr_prob=out[5],
        terminal=terminal[inv],
        success=success[inv],
        start_weight=start_weight[inv],
        order=order,
        block_ptr=block_ptr,
        comp_ptr=comp_ptr,
        state_ids=sid[inv],
    )


@pytest.mark.parametrize("seed", range(4))
def test_compiled_mdp_is_the_one_before(seed):
    frames = random_tasks(seed, n_tasks=7)
    ds = from_frames(*frames)
    ref = _reference_mdp(*frames)
    for name, want in ref.items():
        got = ds.state_ids if name == "state_ids" else getattr(ds.mdp, name)
        widths = ("tr_ptr", "sa_ptr", "comp_ptr", "block_ptr", "order")  # 32 or 64 bits
        assert got.dtype == want.dtype or name in widths
        assert np.array_equal(got, want), name
    # the id index, built on first use
    q = ds.state_ids[::3]
    assert np.array_equal(ds.index(q), np.arange(ds.mdp.n_states)[::3])
    with pytest.raises(KeyError, match="unknown state_id"):
        ds.index([int(ds.state_ids.max()) + 1])


def test_the_first_repeated_transition_row_is_named():
    tr = [(0, 0, 1, 1), (0, 0, 2, 1), (1, 0, 3, 1), (2, 1, 3, 2), (2, 0, 4, 1)]
    manifest, states, trans = make_frames(5, tr, success=(3,))
    rng = np.random.default_rng(3)
    for _ in range(5):
        extra = trans.iloc[rng.integers(0, len(trans), 3)]
        t = pd.concat([trans, extra], ignore_index=True)
        t = t.sample(frac=1.0, random_state=int(rng.integers(1 << 30)), ignore_index=True)
        key = list(zip(t["state_id"], t["action"], t["next_state_id"]))
        first = next(i for i, k in enumerate(key) if k in key[:i])
        with pytest.raises(DatasetError, match=rf"row {first}: duplicate \(state_id"):
            from_frames(manifest, states, t)
