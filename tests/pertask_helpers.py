"""Multi-task datasets for the per-task tests: several small MDPs side by side,
each its own task (disconnected components)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from dp_helpers import make_frames, random_dag

from helpdp import build_manifest


def side_by_side(frames_list, gamma=1.0):
    """One dataset with the tasks ``frames_list`` (each (manifest, states, trans));
    task k's ids are shifted by k * 10^6 and its task_id is ``task_k``."""
    states, trans = [], []
    for k, (_, st, tr) in enumerate(frames_list):
        off = k * 1_000_000
        st = st.assign(state_id=st["state_id"] + off, task_id=f"task_{k}")
        tr = tr.assign(state_id=tr["state_id"] + off, next_state_id=tr["next_state_id"] + off)
        states.append(st)
        trans.append(tr)
    actions = frames_list[0][0]["actions"]
    manifest = build_manifest(actions, gamma=gamma)
    # shuffle the transitions as collection order would
    tr = pd.concat(trans, ignore_index=True)
    tr = tr.sample(frac=1.0, random_state=0, ignore_index=True)
    return manifest, pd.concat(states, ignore_index=True), tr


def random_tasks(seed, n_tasks=5, n_inner=(3, 9), gamma=1.0, max_succ=3):
    rng = np.random.default_rng(seed)
    return side_by_side(
        [
            random_dag(rng, n_inner=int(rng.integers(*n_inner)), max_succ=max_succ, gamma=gamma)
            for _ in range(n_tasks)
        ],
        gamma=gamma,
    )


def two_decisions(gain_a, gain_b):
    """A task whose start (nohelp only) leads to two states with one decision each:
    help raises success by ``gain_a`` (resp. ``gain_b``, multiples of 0.1) for one
    call. States: 0 start, 1 and 2 the decisions, 3 success, 4 failure."""
    tr = [(0, 0, 1, 1), (0, 0, 2, 1)]
    for s, g in ((1, gain_a), (2, gain_b)):
        k = int(round(g * 10))
        tr += [(s, 0, 3, 1), (s, 0, 4, 9)]  # nohelp: success 0.1
        tr += [(s, 1, 3, 1 + k)] + ([(s, 1, 4, 9 - k)] if k < 9 else [])
    return make_frames(5, tr, success=(3,), starts=(0,))


def assert_trace_jit_equals_py(m, comps=None) -> None:
    """``parametric.trace_components`` over ``comps`` (every task by default) gives the
    same pieces jitted and as plain Python."""
    from helpdp._src import parametric

    comps = np.arange(len(m.comp_ptr) - 1, dtype=np.int64) if comps is None else comps
    args = (m.comp_ptr, comps, m.graph, m.start_weight, 1.0, 1e-12, 1 << 20)
    a = parametric.trace_components(*args)
    b = parametric.trace_components.py_func(*args)
    assert a[0] and b[0]
    for x, y in zip(a[1:], b[1:]):
        assert np.array_equal(x, y)
