"""The per-task trace kernel on tasks with many pieces (its buffers grow), and
traced in batches of tasks as ``trace_breakpoints`` does: every vertex of the
frontier is the solve's policy at an r inside its interval."""

import numpy as np
import pytest
from pertask_helpers import assert_trace_jit_equals_py, random_tasks

from helpdp import from_frames, solve
from helpdp.trace import frontier_of


@pytest.mark.parametrize("seed", range(3))
def test_big_tasks_trace_to_the_solves(seed, monkeypatch):
    import sys

    m = from_frames(*random_tasks(seed, n_tasks=4, n_inner=(150, 250), max_succ=4)).mdp
    monkeypatch.setattr(sys.modules["helpdp.trace"], "TRACE_CHUNK", 20)  # a task a call
    fr = frontier_of(m, gamma=1.0)
    assert len(fr) > 20
    ends = np.array([fr.vertex(k).r_max for k in range(len(fr))])
    mids = np.r_[fr.starts[:-1] + 0.5 * (ends[:-1] - fr.starts[:-1]), fr.starts[-1] + 1.0]
    for k, r in enumerate(mids):
        sol = solve(m, r, gamma=1.0)
        assert sol.total_usage == pytest.approx(fr.usage[k], abs=1e-9)
        assert sol.expected_success == pytest.approx(fr.success[k], abs=1e-9)
    # one call over every task gives the pieces the batched calls gave
    assert_trace_jit_equals_py(m)
