"""The DP kernels: hand-checked MDPs, brute force and LP references, monotonicity."""

import os
import subprocess
import sys

import numpy as np
import pytest
from dp_helpers import all_policies, evaluate, lp_optimum, make_dataset, make_frames, random_dag

from helpdp import behavior_values, from_frames, mix_budgets, search_budget, solve, state_success
from helpdp._src import kernels
from helpdp._src.bundles import Backup, Values

# one decision: nohelp succeeds w.p. 0.5, help w.p. 0.9 -> help iff r < 0.4
ONE_STEP = dict(
    n_states=3, transitions=[(0, 0, 1, 1), (0, 0, 2, 1), (0, 1, 1, 9), (0, 1, 2, 1)], success=(1,)
)


def _raw_backward(ds, r, rule=kernels.RULE_EXACT, p_row=np.zeros(0), gamma=1.0, py=False):
    m = ds.mdp
    val = np.zeros((m.n_states, 2 + m.n_actions - 1))
    act = np.full(m.n_states, -1, np.int8)
    fn = kernels.backward_pass.py_func if py else kernels.backward_pass
    costs = np.r_[0.0, np.atleast_1d(r)]
    fn(m.order, m.graph, Backup(p_row, costs, gamma, rule, 1e-12, 1e-9), Values(val, act))
    return val, act


@pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])
@pytest.mark.parametrize(
    ("r", "action", "S", "M"), [(0.3, 1, 0.9, 1.0), (0.5, 0, 0.5, 0.0), (0.4, 0, 0.5, 0.0)]
)
def test_one_step_by_hand(py, r, action, S, M):
    ds = make_dataset(**ONE_STEP)
    val, act = _raw_backward(ds, r, py=py)
    s0 = ds.index([7])[0]
    assert act[s0] == action  # r = 0.4 is a tie: less help wins
    assert val[s0, 1] == pytest.approx(S)
    assert val[s0, 2] == pytest.approx(M)
    assert val[s0, 0] == pytest.approx(max(0.5, 0.9 - r))


def test_two_steps_discounted_by_hand():
    # s0 -(nohelp)-> s1 ; s0 -(help)-> s1 w.p. 1. s1: nohelp -> success 0.2 / fail ;
    # help -> success 0.8 / fail. gamma = 0.9, r = 0.1.
    tr = [(0, 0, 1, 1), (0, 1, 1, 1), (1, 0, 2, 1), (1, 0, 3, 4), (1, 1, 2, 4), (1, 1, 3, 1)]
    ds = make_dataset(4, tr, success=(2,), gamma=0.9)
    sol = solve(ds.mdp, 0.1, gamma=0.9)
    i0, i1 = ds.index([7, 17])
    # at s1: nohelp 0.9*0.2 = 0.18 ; help -0.1 + 0.9*0.8 = 0.62 -> help
    assert sol.action[i1] == 1
    assert sol.values[i1, 0] == pytest.approx(0.62)
    # at s0 both actions lead to s1: nohelp 0.9*0.62 = 0.558 beats help 0.458
    assert sol.action[i0] == 0
    assert sol.values[i0, 1] == pytest.approx(0.9 * 0.9 * 0.8)  # S: success two steps later
    assert sol.values[i0, 2] == pytest.approx(0.9 * 1.0)  # M: one call, one step later
    assert sol.expected_success == pytest.approx(0.648)
    assert sol.expected_usage[0] == pytest.approx(0.9)


def test_start_states_weighted_by_episodes():
    # two start states: s0 (3 episodes, nohelp only, always succeeds) and s1 (1 episode, fails)
    ds = make_dataset(4, [(0, 0, 2, 3), (1, 0, 3, 1)], success=(2,), starts=(0, 1))
    assert solve(ds.mdp, 1.0, gamma=1.0).expected_success == pytest.approx(0.75)


def test_unobserved_action_is_unavailable():
    # only help was observed at s0: the policy must help whatever it costs
    ds = make_dataset(3, [(0, 1, 1, 1), (0, 1, 2, 1)], success=(1,))
    sol = solve(ds.mdp, 100.0, gamma=1.0)
    assert sol.action[ds.index([7])[0]] == 1
    assert sol.expected_usage[0] == 1.0


@pytest.mark.parametrize("seed", range(12))
def test_random_dags_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    frames = random_dag(rng, n_inner=int(rng.integers(2, 7)), gamma=float(rng.choice([1.0, 0.9])))
    ds = from_frames(*frames)
    evals = [(p, *evaluate(frames, p)) for p in all_policies(frames)]
    for r in [0.0, 0.05, 0.2, 0.7, 3.0]:
        sol = solve(ds.mdp, r, gamma=ds.gamma)
        best = max(s - r * u[0] for _, s, u in evals)
        assert sol.lagrangian() == pytest.approx(best, abs=1e-12)
        # ours is optimal, and among optimal policies it uses the least help
        mine = sol.action[ds.index(frames[1]["state_id"])]
        s_mine, u_mine = evaluate(frames, np.where(mine < 0, 0, mine))
        assert s_mine == pytest.approx(sol.expected_success, abs=1e-12)
        assert u_mine[0] == pytest.approx(sol.expected_usage[0], abs=1e-12)
        optimal_usage = [u[0] for _, s, u in evals if s - r * u[0] >= best - 1e-9]
        assert sol.expected_usage[0] <= min(optimal_usage) + 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_usage_non_increasing_in_r(seed):
    frames = random_dag(np.random.default_rng(100 + seed), n_inner=12, max_succ=4)
    ds = from_frames(*frames)
    rs = np.r_[0.0, np.geomspace(1e-4, 1e3, 60)]
    usage = [solve(ds.mdp, r, gamma=1.0).expected_usage[0] for r in rs]
    assert np.all(np.diff(usage) <= 1e-12)
    assert usage[0] > usage[-1]  # the data must make the test bite


@pytest.mark.parametrize("seed", range(10))
def test_budget_mixture_equals_lp_optimum(seed):
    rng = np.random.default_rng(200 + seed)
    frames = random_dag(rng, n_inner=8, max_succ=3, gamma=float(rng.choice([1.0, 0.95])))
    ds = from_frames(*frames)
    u_max = solve(ds.mdp, 0.0, gamma=ds.gamma).expected_usage[0]
    u_min = solve(ds.mdp, 1e9, gamma=ds.gamma).expected_usage[0]
    for frac in [0.1, 0.37, 0.8]:
        budget = u_min + frac * (u_max - u_min)
        res = search_budget(ds.mdp, budget, gamma=ds.gamma)
        assert res.expected_usage <= budget + 1e-9
        assert res.policy.total_usage <= budget + 1e-9
        assert res.expected_success == pytest.approx(lp_optimum(frames, [budget]), abs=1e-9)
        if res.more_help is not None:
            assert res.expected_usage == pytest.approx(budget, abs=1e-12)


def test_budget_not_binding_and_infeasible():
    ds = make_dataset(**ONE_STEP)
    res = search_budget(ds.mdp, 5.0, gamma=1.0)
    assert res.r == 0.0 and res.more_help is None and res.expected_success == pytest.approx(0.9)
    res = search_budget(ds.mdp, 0.25, gamma=1.0)
    assert res.r == pytest.approx(0.4)  # the breakpoint
    assert res.weight_more_help == pytest.approx(0.25)
    assert res.expected_success == pytest.approx(0.25 * 0.9 + 0.75 * 0.5)
    only_help = make_dataset(3, [(0, 1, 1, 1), (0, 1, 2, 1)], success=(1,))
    from helpdp import InfeasibleBudget

    with pytest.raises(InfeasibleBudget, match="below the least expert usage"):
        search_budget(only_help.mdp, 0.5, gamma=1.0)


def test_cycles_need_gamma_below_one():
    # s0 -nohelp-> s0 (retry, 1/2) or fail ; help -> success w.p. 0.5 / s0
    tr = [(0, 0, 0, 1), (0, 0, 2, 1), (0, 1, 1, 1), (0, 1, 0, 1)]
    frames = make_frames(3, tr, success=(1,), gamma=0.9)
    ds = from_frames(*frames)
    assert not ds.mdp.acyclic
    with pytest.raises(ValueError, match="cycles and gamma = 1"):
        solve(ds.mdp, 0.1, gamma=1.0)
    for r in [0.0, 0.1, 0.5]:
        sol = solve(ds.mdp, r, gamma=0.9, tol=1e-13)
        best = max(s - r * u[0] for s, u in (evaluate(frames, p) for p in all_policies(frames)))
        assert sol.lagrangian() == pytest.approx(best, abs=1e-10)
    # help forever: M = 1 + 0.9 * 0.5 * M -> M = 1 / 0.55 ; S = 0.9 * 0.5 + 0.45 S -> S = 0.45 / 0.55
    sol = solve(ds.mdp, 0.0, gamma=0.9, tol=1e-13)
    assert sol.expected_usage[0] == pytest.approx(1 / 0.55)
    assert sol.expected_success == pytest.approx(0.45 / 0.55)


def test_two_interventions_match_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(5):
        frames = random_dag(rng, n_inner=5, n_actions=3)
        ds = from_frames(*frames)
        evals = [(s, u) for s, u in (evaluate(frames, p) for p in all_policies(frames))]
        for r in [(0.1, 0.3), (0.5, 0.05), (2.0, 2.0)]:
            sol = solve(ds.mdp, r, gamma=1.0)
            best = max(s - np.dot(r, u) for s, u in evals)
            assert sol.lagrangian() == pytest.approx(best, abs=1e-12)


def test_kernels_without_jit_agree():
    """The whole solve, interpreted by Python (NUMBA_DISABLE_JIT), gives the same numbers."""
    code = (
        "import numpy as np, sys; sys.path.insert(0, 'tests');"
        "from dp_helpers import random_dag; from helpdp import from_frames, solve;"
        "ds = from_frames(*random_dag(np.random.default_rng(3), n_inner=9));"
        "s = solve(ds.mdp, 0.2, gamma=1.0); print(repr(s.expected_success), repr(float(s.expected_usage[0])))"
    )
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    root = os.path.dirname(os.path.dirname(__file__))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    s_py, u_py = map(float, out.stdout.split())
    ds = from_frames(*random_dag(np.random.default_rng(3), n_inner=9))
    sol = solve(ds.mdp, 0.2, gamma=1.0)
    assert s_py == sol.expected_success and u_py == sol.expected_usage[0]


def test_topological_order_py_func_matches_jit():
    ds = from_frames(*random_dag(np.random.default_rng(5), n_inner=10))
    m = ds.mdp
    args = (m.n_states, m.sa_ptr, m.tr_ptr, m.tr_next.astype(np.int64))
    o1, l1, a1 = kernels.topological_order(*args)
    o2, l2, a2 = kernels.topological_order.py_func(*args)
    assert a1 and a2 and np.array_equal(o1, o2) and np.array_equal(l1, l2)
    # after renumbering, every transition goes to a larger index and a deeper level
    rows = np.repeat(np.arange(m.n_states), np.diff(m.sa_ptr))
    src = np.repeat(rows, np.diff(m.tr_ptr))
    assert np.all(m.tr_next > src)
    level = np.empty(m.n_states, np.int64)
    for b in range(len(m.block_ptr) - 1):
        level[m.order[m.block_ptr[b] : m.block_ptr[b + 1]]] = b  # b = 0 is the deepest
    assert np.all(level[m.tr_next] < level[src])


def test_parallel_levels_equal_serial_pass():
    frames = random_dag(np.random.default_rng(9), n_inner=300, max_succ=4)
    m = from_frames(*frames).mdp
    outs = []
    for fn, extra in [(kernels.backward_pass, ()), (kernels.backward_levels, (m.block_ptr, 7))]:
        val = np.zeros((m.n_states, 3))
        act = np.full(m.n_states, -1, np.int8)
        backup = Backup(np.zeros(0), np.array([0.0, 0.05]), 1.0, 0, 1e-12, 1e-9)
        fn(m.order, *extra, m.graph, backup, Values(val, act))
        outs.append((val, act))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])


def test_behavior_values_are_monte_carlo_rates_on_a_tree():
    # s0 -nohelp-> s1 (2 episodes) or F (1); s0 -help-> S (1); s1 -nohelp-> S (1) or F (1)
    S, F = 2, 3
    tr = [(0, 0, 1, 2), (0, 0, F, 1), (0, 1, S, 1), (1, 0, S, 1), (1, 0, F, 1)]
    ds = make_dataset(4, tr, success=(S,))
    bv = behavior_values(ds).set_index(["state_id", "action"])
    assert bv.loc[(7, 0), "p_success"] == pytest.approx(1 / 3)  # 1 of 3 episodes succeeded
    assert bv.loc[(7, 0), "count"] == 3
    assert bv.loc[(7, 1), "p_success"] == 1.0
    assert bv.loc[(17, 0), "p_success"] == pytest.approx(0.5)
    assert state_success(ds)[ds.index([7])[0]] == pytest.approx(0.5)  # 2 of 4 episodes


@pytest.mark.parametrize("seed", range(6))
def test_mixture_for_two_budgets_equals_lp_optimum(seed):
    rng = np.random.default_rng(300 + seed)
    frames = random_dag(rng, n_inner=6, n_actions=3)
    ds = from_frames(*frames)
    top = solve(ds.mdp, 0.0, gamma=1.0).expected_usage
    low = solve(ds.mdp, 1e9, gamma=1.0).expected_usage
    for frac in [(0.3, 0.6), (0.8, 0.1)]:
        budgets = low + np.array(frac) * (top - low)
        pols, w, _ = mix_budgets(ds.mdp, budgets, gamma=1.0)
        assert len(pols) <= 3 and w.sum() == pytest.approx(1.0)
        usage = sum(wi * p.expected_usage for wi, p in zip(w, pols))
        assert np.all(usage <= budgets + 1e-9)
        success = sum(wi * p.expected_success for wi, p in zip(w, pols))
        assert success == pytest.approx(lp_optimum(frames, budgets), abs=1e-8)
