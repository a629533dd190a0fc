"""Many help costs in one pass (``parametric.sweep_costs``, ``solve_costs``) and the
budget sweep built on it (``search_budgets``): the same numbers, bit for bit, as a
solve per cost and a search per budget."""

import json

import numpy as np
import pytest
from dp_helpers import make_frames, random_dag
from pertask_helpers import random_tasks, side_by_side, two_decisions

from helpdp import demo_dataset_path, from_frames, load_dataset, search_budget, solve
from helpdp._src import kernels, parametric
from helpdp._src.bundles import Values
from helpdp.budget import InfeasibleBudget, search_budgets, write_result
from helpdp.solve import cost_means, solve_costs

COSTS = [0.0, 1e-13, 0.05, 0.1, 0.1 + 1e-12, 0.3, 1.0, 7.0, 1e9]


def _same(a, b):
    assert np.array_equal(a.action, b.action)
    assert np.array_equal(a.values, b.values)
    assert a.expected_success == b.expected_success
    assert np.array_equal(a.expected_usage, b.expected_usage) and np.array_equal(a.r, b.r)


def _tied():
    # two tasks where help gains exactly what a cost of 0.1 takes: ties at r = 0.1
    return side_by_side([two_decisions(0.1, 0.1), two_decisions(0.2, 0.1)])


@pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])
@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_sweep_costs_equals_a_solve_per_cost(py, gamma):
    for frames in (random_tasks(4, n_tasks=6, gamma=gamma), _tied()):
        m = from_frames(*frames).mdp
        r = np.array(COSTS)
        starts = np.flatnonzero(m.start_weight != 0.0)
        fn = parametric.sweep_costs.py_func if py else parametric.sweep_costs
        mfn = parametric.start_means.py_func if py else parametric.start_means
        for write in (True, False):
            n = m.n_states if write else 0
            vals = np.empty((len(r), n, 3))
            actions = np.empty((len(r), n), np.int8)
            start_vals = np.empty((len(starts), len(r), 3))
            fn(m.comp_ptr, m.graph, r, gamma, 1e-12, starts, start_vals, Values(vals, actions))
            means = mfn(starts, m.start_weight, start_vals)
            for k, rk in enumerate(r):
                ref = solve(m, rk, gamma=gamma, parallel="serial")
                assert np.array_equal(start_vals[:, k], ref.values[starts])
                assert np.array_equal(means[k], kernels.weighted_means(ref.values, m.start_weight))
                if write:
                    assert np.array_equal(vals[k], ref.values)
                    assert np.array_equal(actions[k], ref.action)
            if write:
                assert len({a.tobytes() for a in actions}) > 2  # the costs change the policy


def test_cost_means_are_the_solves_means():
    m = from_frames(*random_tasks(9, n_tasks=5)).mdp
    got = cost_means(m, COSTS, gamma=1.0)
    for (e_s, e_u), rk in zip(got, COSTS):
        ref = solve(m, rk, gamma=1.0)
        assert e_s == ref.expected_success and e_u == ref.total_usage
    assert cost_means(m, [], gamma=1.0).shape == (0, 2)
    frames = random_dag(np.random.default_rng(2), n_inner=6, n_actions=3)  # a solve each
    m3 = from_frames(*frames).mdp
    (e_s, e_u), ref = cost_means(m3, [0.3], gamma=1.0)[0], solve(m3, 0.3, gamma=1.0)
    assert e_s == ref.expected_success and e_u == ref.total_usage


def test_solve_costs_groups_and_falls_back(monkeypatch):
    import sys

    m = from_frames(*random_tasks(8, n_tasks=5)).mdp
    monkeypatch.setattr(sys.modules["helpdp.solve"], "BATCH_SCRATCH", 1)  # one cost a pass
    for a, rk in zip(solve_costs(m, COSTS, gamma=1.0), COSTS):
        _same(a, solve(m, rk, gamma=1.0))
    assert solve_costs(m, [], gamma=1.0) == []
    with pytest.raises(ValueError, match="help costs must be finite"):
        solve_costs(m, [0.1, -1.0], gamma=1.0)
    # more than one intervention, or cycles: a solve per cost
    frames = random_dag(np.random.default_rng(2), n_inner=6, n_actions=3)
    m3 = from_frames(*frames).mdp
    for a, rk in zip(solve_costs(m3, [0.0, 0.4], gamma=1.0), [0.0, 0.4]):
        _same(a, solve(m3, rk, gamma=1.0))
    cyc = from_frames(*make_frames(3, [(0, 0, 1, 1), (1, 0, 0, 1), (1, 1, 2, 1)], success=(2,)))
    assert not cyc.mdp.acyclic
    for a, rk in zip(solve_costs(cyc.mdp, [0.2], gamma=0.9), [0.2]):
        _same(a, solve(cyc.mdp, rk, gamma=0.9))


def _same_result(a, b):
    assert (a.budget, a.r, a.weight_more_help, a.rule, a.gamma) == (
        b.budget,
        b.r,
        b.weight_more_help,
        b.rule,
        b.gamma,
    )
    _same(a.policy, b.policy)
    assert (a.more_help is None) == (b.more_help is None)
    if a.more_help is not None:
        _same(a.more_help, b.more_help)


@pytest.mark.parametrize("batch_bytes", [1, 1 << 30])
def test_search_budgets_equals_a_search_per_budget(batch_bytes, monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules["helpdp.budget"], "SWEEP_BATCH_BYTES", batch_bytes)
    ds = load_dataset(demo_dataset_path())
    m = ds.mdp
    u0 = solve(m, 0.0, gamma=1.0).total_usage
    u1 = solve(m, 1e9, gamma=1.0).total_usage  # the least usage the data allows
    budgets = [u1, 0.3, 0.5, 1.0, 1.0, 2.0, u0, u0 + 1.0] + list(np.linspace(u1, u0, 9))
    logs = []
    got = list(search_budgets(m, budgets, gamma=1.0, log=logs.append))
    assert len(got) == len(budgets)
    for a, b in zip(got, budgets):
        _same_result(a, search_budget(m, b, gamma=1.0))
    assert any("(batched)" in line for line in logs)
    # where a batched policy disagrees with the frontier, the solve search answers
    monkeypatch.setattr(sys.modules["helpdp.budget"], "FRONTIER_CHECK_TOL", -1.0)
    for a, b in zip(search_budgets(m, budgets[:3], gamma=1.0), budgets[:3]):
        _same_result(a, search_budget(m, b, gamma=1.0, method="solves"))


def test_a_sweep_dropping_each_result_reuses_one_block(monkeypatch):
    """A consumer that drops each result before the next (as the command line does) gets
    every batch written into the last batch's block, with the same numbers; the block
    goes with the sweep. (Held results are never written over: the test above holds
    every result of one-budget batches.)"""
    import sys

    budget_mod = sys.modules["helpdp.budget"]
    monkeypatch.setattr(budget_mod, "SWEEP_BATCH_BYTES", 1)  # one budget per batch
    m = load_dataset(demo_dataset_path()).mdp
    budgets = [0.3, 0.5, 1.0, 2.0]
    want = [search_budget(m, b, gamma=1.0) for b in budgets]
    m.cache.pop("spare_block", None)
    blocks = []
    results = search_budgets(m, budgets, gamma=1.0)
    for ref in want:  # (not zip: its reused tuple holds the last result a step longer)
        res = next(results)
        _same_result(res, ref)
        blocks.append(m.cache["spare_block"].val.ctypes.data)
        del res
    assert next(results, None) is None
    assert len(blocks) == 4 and len(set(blocks)) == 1
    assert "spare_block" not in m.cache


def test_search_budgets_stops_at_an_infeasible_budget():
    # state 1 was only ever observed with help: usage >= 0.5 whatever r
    tr = [(0, 0, 1, 1), (0, 0, 2, 1), (1, 1, 2, 1)]
    m = from_frames(*make_frames(3, tr, success=(2,))).mdp
    gen = search_budgets(m, [1.0, 0.7, 0.1, 2.0], gamma=1.0)
    assert [r.budget for r in (next(gen), next(gen))] == [1.0, 0.7]
    with pytest.raises(InfeasibleBudget, match="budget 0.1 is below"):
        next(gen)
    with pytest.raises(ValueError, match="finite number"):
        list(search_budgets(m, [1.0, float("nan")], gamma=1.0))


def test_other_methods_and_rules_search_budget_by_budget():
    m = from_frames(*random_tasks(2, n_tasks=4)).mdp
    for a, b in zip(search_budgets(m, [0.2, 0.4], gamma=1.0, method="solves"), [0.2, 0.4]):
        _same_result(a, search_budget(m, b, gamma=1.0, method="solves"))
    frames = random_dag(np.random.default_rng(2), n_inner=6, n_actions=3)
    with pytest.raises(ValueError, match="one intervention"):
        next(search_budgets(from_frames(*frames).mdp, [0.2], gamma=1.0))


def test_the_sweep_writes_the_files_a_search_per_budget_writes(tmp_path):
    ds = load_dataset(demo_dataset_path())
    budgets = [0.5, 1.0, 2.0]
    for b, res in zip(budgets, search_budgets(ds.mdp, budgets, gamma=1.0)):
        write_result(ds, res, tmp_path / "sweep" / str(b))
        write_result(ds, search_budget(ds.mdp, b, gamma=1.0), tmp_path / "each" / str(b))
    for b in budgets:
        for f in ("policy.parquet", "policy_more_help.parquet"):
            one, two = tmp_path / "sweep" / str(b) / f, tmp_path / "each" / str(b) / f
            assert one.read_bytes() == two.read_bytes()
        js = [
            json.loads((tmp_path / d / str(b) / "search.json").read_text())
            for d in ("sweep", "each")
        ]
        for j in js:
            j.pop("seconds")
            j.pop("solves")
        assert js[0] == js[1]


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_the_sweep_cut_into_runs_of_tasks_per_thread_is_bit_identical(parts, monkeypatch):
    import sys

    solve_mod = sys.modules["helpdp.solve"]
    monkeypatch.setattr(solve_mod, "free_cpus", lambda threads: parts)
    m = from_frames(*random_tasks(9, n_tasks=11)).mdp
    for got, r in zip(solve_costs(m, COSTS, gamma=1.0), COSTS):
        _same(got, solve(m, r, gamma=1.0, parallel="serial"))
    means = cost_means(m, COSTS, gamma=1.0)
    ref = [solve(m, r, gamma=1.0, parallel="serial") for r in COSTS]
    assert means.tolist() == [[s.expected_success, s.total_usage] for s in ref]
