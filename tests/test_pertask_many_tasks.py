"""The DP at AWM-1K's shape: many short tasks, about one transition per state.

``kernels.sweep`` backs up a state of one row and one transition without the loops of
the general backup (the same numbers to the bit), a chord search writes each solve
into the memory of a solution it dropped (``solve._outputs`` keeps ``SPARE_SETS``)."""

import sys

import numpy as np
import pytest
from test_kernel_sweep import _reference

from helpdp import demo_dataset_path, from_frames, load_dataset, search_budget, solve
from helpdp._src import kernels
from helpdp._src.bundles import Backup, Graph, Values

solve_mod = sys.modules["helpdp.solve"]


def _chains(rng, n_tasks, depth=6, idx=np.int32):
    """A forest of short tasks numbered as the loader lays them out (each task's
        states after its parents): a chain of one-row, one-transition states, with now and
        then a state of two rows (help keeps to the chain, no help may jump to its end) or
    a row of two transitions."""
    sa_ptr, sa_action, tr_ptr, tr_next, tr_prob, terminal = [0], [], [0], [], [], []
    n = 0
    for _ in range(n_tasks):
        length = int(rng.integers(2, depth + 1))
        for d in range(length):
            s = n + d
            last = d == length - 1
            terminal.append(last)
            if not last:
                kind = rng.random()
                acts = [0, 1] if kind < 0.1 else [int(rng.random() < 0.5)]
                for a in acts:
                    succ = [s + 1] if kind > 0.2 or a == 1 else [s + 1, n + length - 1]
                    succ = sorted(set(succ))
                    tr_next.extend(succ)
                    w = rng.random(len(succ)) + 0.1
                    tr_prob.extend(w / w.sum())
                    sa_action.append(a)
                    tr_ptr.append(len(tr_next))
            sa_ptr.append(len(sa_action))
        n += length
    terminal = np.array(terminal)
    return Graph(
        np.array(sa_ptr, idx),
        np.array(sa_action, np.int8),
        np.array(tr_ptr, idx),
        np.array(tr_next, np.int32),
        np.array(tr_prob),
        terminal,
        terminal & (rng.random(n) < 0.5),
    )


def _fast_states(g) -> np.ndarray:
    """States the sweep backs up without its loops: non-terminal, one row, one transition."""
    one = (np.diff(g.sa_ptr) == 1) & ~g.terminal
    one[one] &= np.diff(g.tr_ptr)[g.sa_ptr[:-1][one]] == 1
    return one


@pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])
@pytest.mark.parametrize("idx", [np.int32, np.int64])
@pytest.mark.parametrize("rule", [kernels.RULE_EXACT, kernels.RULE_PAPER])
def test_one_transition_states_back_up_as_the_general_code(py, idx, rule):
    rng = np.random.default_rng(7 + rule + 2 * (idx == np.int64))
    g = _chains(rng, 80, idx=idx)
    n = g.terminal.shape[0]
    fast = _fast_states(g)
    assert 0.5 < fast.mean() < 0.9  # both the short path and the general one bite
    p_row = rng.uniform(0.1, 0.9, g.sa_action.shape[0]) if rule else np.zeros(0)
    b = Backup(p_row, np.array([0.0, 0.13]), 0.95, rule, 1e-12, 1e-9)
    no_order = np.zeros(0, np.int64)
    fn = kernels.backward_pass.py_func if py else kernels.backward_pass
    val0 = rng.random((n, 3))  # not zeros: the change of every value counts
    out = Values(val0.copy(), np.full(n, -1, np.int8))
    ref_val, ref_act = val0.copy(), np.full(n, -1, np.int8)
    change = fn(no_order, g, b, out)
    assert change == _reference(no_order, g, b, ref_val, ref_act)
    assert np.array_equal(out.val, ref_val) and np.array_equal(out.action, ref_act)
    assert set(out.action[fast].tolist()) == {0, 1}
    # by hand at one state of the short path: V = -r [a = 1] + gamma V', S = gamma S'
    s = int(np.flatnonzero(fast & (out.action == 1))[0])
    nxt = g.tr_next[g.tr_ptr[g.sa_ptr[s]]]
    assert out.val[s, 1] == 0.95 * out.val[nxt, 1]
    assert out.val[s, 2] == 0.95 * out.val[nxt, 2] + 1.0
    if rule == kernels.RULE_EXACT:
        assert out.val[s, 0] == -0.13 + 0.95 * out.val[nxt, 0]


def _forest_mdp(seed=3, n_tasks=40):
    from dp_helpers import make_frames

    rng = np.random.default_rng(seed)
    g = _chains(rng, n_tasks)
    rows = np.repeat(np.arange(len(g.terminal)), np.diff(g.sa_ptr))
    tr_rows = np.repeat(np.arange(len(g.sa_action)), np.diff(g.tr_ptr))
    counts = rng.integers(1, 5, len(g.tr_next))
    trans = [
        (int(rows[j]), int(g.sa_action[j]), int(t), int(c))
        for j, t, c in zip(tr_rows, g.tr_next, counts)
    ]
    n = len(g.terminal)
    success = tuple(np.flatnonzero(g.success).tolist())
    starts = tuple(sorted(set(range(n)) - set(g.tr_next.tolist())))
    return from_frames(*make_frames(n, trans, success=success, starts=starts)).mdp


def test_a_chord_search_writes_every_solve_into_memory_it_dropped():
    """The search holds two bracketing solutions while it solves a third: with one kept
    set every solve took new memory (faulted in page by page, the threads waiting on
    each other); with SPARE_SETS = 3 no solve after the first three does, and a solve
    never writes into arrays a Solution still holds."""
    m, other = _forest_mdp(), _forest_mdp()  # other: the reference solves' MDP
    held = [solve(m, r, gamma=1.0) for r in (0.0, 1.0)]
    third = solve(m, 0.5, gamma=1.0)
    addrs = {s.values.ctypes.data for s in (*held, third)}
    assert len(addrs) == 3
    for k in range(6):  # a chord search's pattern: keep two, drop the oldest
        ref = [(s.values.copy(), s.action.copy()) for s in held]
        dropped = held.pop(0)
        held.append(third)
        del dropped
        third = solve(m, 0.1 + 0.05 * k, gamma=1.0)
        assert third.values.ctypes.data in addrs  # reused, no new memory
        assert third.values.ctypes.data not in {s.values.ctypes.data for s in held}
        v, a = ref[1]  # the solution kept from before: not written over
        assert np.array_equal(held[0].values, v) and np.array_equal(held[0].action, a)
        fresh = solve(other, 0.1 + 0.05 * k, gamma=1.0, parallel="serial")
        assert np.array_equal(third.values, fresh.values)
    assert len(m.cache["spares"]) == solve_mod.SPARE_SETS
    m = load_dataset(demo_dataset_path()).mdp
    u0, u1 = (solve(m, r, gamma=1.0).total_usage for r in (0.0, 1e9))
    m.cache.pop("spares")
    res = search_budget(m, 0.5 * (u0 + u1), gamma=1.0, method="solves")
    assert res.solves >= 5
    assert len(m.cache["spares"]) == solve_mod.SPARE_SETS  # 3 sets served every solve
