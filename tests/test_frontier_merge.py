"""Per-task frontiers and their sum: the merge, budget queries, and agreement with
the solve-based search on every budget (demo, synthetic, random multi-task MDPs)."""

import numpy as np
import pytest
from dp_helpers import lp_optimum
from pertask_helpers import assert_trace_jit_equals_py, random_tasks, side_by_side, two_decisions

from helpdp import (
    InfeasibleBudget,
    demo_dataset_path,
    from_frames,
    frontier,
    generate_synthetic,
    load_dataset,
    search_budget,
)
from helpdp._src import parametric
from helpdp.subset import task_subset
from helpdp.synthetic import SyntheticParams
from helpdp.trace import Breakpoints, TracedFrontier, frontier_of, trace_breakpoints

# three tasks, two decisions each; help gains (= the breakpoints in r):
# task 0: 0.2, 0.6 ; task 1: 0.4, 0.8 ; task 2: 0.3, 0.5
GAINS = [(0.2, 0.6), (0.4, 0.8), (0.3, 0.5)]


def _toy():
    return from_frames(*side_by_side([two_decisions(*g) for g in GAINS]))


def test_three_tasks_interleave_on_the_global_frontier():
    ds = _toy()
    m = ds.mdp
    assert len(m.comp_ptr) - 1 == 3
    fr = frontier_of(m, gamma=1.0)
    # the global order interleaves the tasks: 0, 2, 1, 2, 0, 1
    assert fr.starts == pytest.approx([0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8], abs=1e-9)
    # each breakpoint drops one decision (half of one task's episodes: 1/6 call each)
    assert fr.usage == pytest.approx(1 - np.arange(7) / 6, abs=1e-12)
    # success: 0.1 everywhere without help; each decision kept adds gain / 6
    kept = [0.2, 0.3, 0.4, 0.5, 0.6, 0.8]
    assert fr.success == pytest.approx([0.1 + sum(kept[k:]) / 6 for k in range(7)], abs=1e-12)
    # the breakpoint r = 0.3 belongs to task 2: the mixture randomises there only
    res = search_budget(m, 0.75, gamma=1.0)
    assert res.r == pytest.approx(0.3) and res.weight_more_help == pytest.approx(0.5)
    assert res.expected_usage == pytest.approx(0.75)
    assert res.expected_success == pytest.approx(0.1 + (0.3 / 2 + 0.4 + 0.5 + 0.6 + 0.8) / 6)
    differ = np.flatnonzero(res.policy.action != res.more_help.action)
    task = ds.states.set_index("state_id").loc[ds.state_ids[differ], "task_id"]
    assert set(task) == {"task_2"} and len(differ) == 1
    # a budget at a vertex needs no mixture; below the least usage: infeasible
    res = search_budget(m, 0.5, gamma=1.0)
    assert res.more_help is None and res.r == pytest.approx(0.4)
    assert search_budget(m, 0.0, gamma=1.0).r == pytest.approx(0.8)


def test_merging_groups_of_tasks_equals_the_whole():
    ds = _toy()
    whole = trace_breakpoints(ds.mdp, gamma=1.0)
    parts = [
        trace_breakpoints(task_subset(ds, t).mdp, gamma=1.0)
        for t in (["task_0"], ["task_1", "task_2"])
    ]
    merged = Breakpoints.merge(parts)
    assert merged.n_tasks == whole.n_tasks == 3 and merged.weight == whole.weight
    a, b = TracedFrontier.from_breakpoints(whole), TracedFrontier.from_breakpoints(merged)
    assert np.array_equal(a.starts, b.starts)
    assert a.usage == pytest.approx(b.usage, abs=1e-15)
    assert a.success == pytest.approx(b.success, abs=1e-15)


def _compare_every_budget(m, gamma):
    """The trace-based search against the solve-based one at every vertex usage of
    the frontier, between vertices, above the largest and below the least."""
    old = frontier(m, gamma=gamma, progress=False, method="solves").table
    u = old["expected_usage"].to_numpy()
    budgets = np.r_[u, (u[1:] + u[:-1]) / 2, u[-1] + 0.5, u[0] * 0.999 if u[0] > 0 else 0.0]
    n_checked = 0
    for b in budgets:
        try:
            ref = search_budget(m, float(b), gamma=gamma, method="solves")
        except InfeasibleBudget:
            with pytest.raises(InfeasibleBudget):
                search_budget(m, float(b), gamma=gamma, method="frontier")
            continue
        new = search_budget(m, float(b), gamma=gamma, method="frontier")
        assert new.expected_usage == pytest.approx(ref.expected_usage, abs=1e-9), b
        assert new.expected_success == pytest.approx(ref.expected_success, abs=1e-9), b
        assert new.policy.total_usage <= b + 1e-9
        n_checked += 1
    assert n_checked >= len(u)
    # and the frontier tables give the same success at every budget
    new_fr = frontier(m, gamma=gamma, progress=False)
    assert new_fr.solves <= 1
    for b in np.linspace(u[0], u[-1], 41):
        assert new_fr.success_at(b) == pytest.approx(
            np.interp(b, u, old["expected_success"]), abs=1e-9
        )


def test_every_budget_of_the_demo():
    ds = load_dataset(demo_dataset_path())
    _compare_every_budget(ds.mdp, ds.gamma)


@pytest.mark.parametrize(
    "params",
    [SyntheticParams(n_tasks=12), SyntheticParams(n_tasks=8, seed=7, episodes_per_seed=3)],
    ids=["synthetic-12", "synthetic-8"],
)
def test_every_budget_of_synthetic_data(params):
    ds = from_frames(*generate_synthetic(params)[:3])
    _compare_every_budget(ds.mdp, ds.gamma)


@pytest.mark.parametrize("seed", range(6))
def test_random_multitask_mixture_equals_lp_optimum(seed):
    gamma = 0.95 if seed % 2 else 1.0
    frames = random_tasks(40 + seed, n_tasks=3, n_inner=(4, 7), gamma=gamma)
    ds = from_frames(*frames)
    fr = frontier_of(ds.mdp, gamma=gamma)
    lo, hi = fr.usage[-1], fr.usage[0]
    assert hi > lo  # the data must make the test bite
    for frac in [0.1, 0.37, 0.8]:
        budget = lo + frac * (hi - lo)
        res = search_budget(ds.mdp, budget, gamma=gamma)
        assert res.expected_usage <= budget + 1e-9
        assert res.expected_success == pytest.approx(lp_optimum(frames, [budget]), abs=1e-9)


def test_trace_kernel_py_func_matches_jit():
    m = from_frames(*random_tasks(9, n_tasks=4)).mdp
    assert_trace_jit_equals_py(m)
    comps = np.arange(4, dtype=np.int64)
    # too many pieces for the cap: refused, the caller falls back to solves
    assert not parametric.trace_components(
        m.comp_ptr, comps, m.graph, m.start_weight, 1.0, 1e-12, 2
    )[0]


def test_search_falls_back_where_the_trace_does_not_apply():
    ds = _toy()
    with pytest.raises(ValueError, match="method must be"):
        search_budget(ds.mdp, 0.5, gamma=1.0, method="fast")
    ref = search_budget(ds.mdp, 0.75, gamma=1.0, method="solves")
    assert ref.solves > 3
    assert search_budget(ds.mdp, 0.75, gamma=1.0).expected_success == pytest.approx(
        ref.expected_success, abs=1e-12
    )


def test_breakpoints_a_rounding_apart_are_one_global_breakpoint():
    """Three tasks switch at r = 1/3 in exact arithmetic, a few ulps apart in floats
    (as at 10^7 transitions): one global breakpoint spanning them, placed at their
    largest r, and the vertex before it ends at their smallest r, so a solve in the
    middle of either neighbouring interval reproduces its vertex."""
    third = [1 / 3 - 3.3e-13, 1 / 3 - 3.3e-13 + 1e-16, 1 / 3 - 2.9e-13]
    r = np.array([0.2, *third, 0.5])
    bp = Breakpoints(
        weight=4.0,
        base_success=2.0,
        base_usage=4.0,
        r=r,
        d_success=np.full(5, -0.1),
        d_usage=np.full(5, -0.5),
        n_tasks=5,
    )
    fr = TracedFrontier.from_breakpoints(bp)
    assert fr.starts.tolist() == [0.0, 0.2, third[2], 0.5]
    assert [fr.vertex(k).r_max for k in range(4)] == [0.2, third[0], 0.5, np.inf]
    assert fr.usage == pytest.approx([1.0, 0.875, 0.5, 0.375], abs=1e-15)
    assert fr.success == pytest.approx([0.5, 0.475, 0.4, 0.375], abs=1e-15)
    # 0.2 and 0.5 stay apart: 1e-11 is relative to r, and they are 0.3 apart
    q = fr.query(0.7)
    assert q.r == third[2] and q.less_help.expected_usage == 0.5
    assert q.more_help.expected_usage == 0.875 and q.weight_more_help == pytest.approx(0.2 / 0.375)
