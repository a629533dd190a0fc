"""Honest forecasts (helpdp.forecast): policy evaluation, cross-fitting, pessimism."""

import numpy as np
import pandas as pd
import pytest
from toy_prm import write_episodes

from helpdp import demo_dataset_path, from_frames, load_dataset, search_budget
from helpdp._src import forecast as kf
from helpdp.contract import build_manifest
from helpdp.forecast import (
    cross_fit,
    pessimistic_mdp,
    pessimistic_search,
    policy_rows,
    policy_value,
    split_episodes,
    transfer_policy,
)
from helpdp.subset import episode_subset

MANIFEST = build_manifest(["nohelp", "expert"])


def _frames(rows, n_states, terminal, success):
    st = pd.DataFrame(
        {
            "state_id": np.arange(n_states, dtype=np.int64),
            "task_id": "t",
            "depth": np.zeros(n_states, np.int32),
            "is_start": np.arange(n_states) == 0,
            "terminal": np.isin(np.arange(n_states), terminal),
            "success": np.isin(np.arange(n_states), success),
            "text": "",
        }
    )
    tr = pd.DataFrame(rows, columns=["state_id", "action", "next_state_id", "count"]).astype(
        {"state_id": "int64", "action": "int8", "next_state_id": "int64", "count": "int64"}
    )
    return from_frames(MANIFEST, st, tr)


@pytest.fixture
def coin():
    """s0: nohelp -> win (1) / lose (1); help -> win (3) / lose (1); win=1, lose=2."""
    rows = [(0, 0, 1, 1), (0, 0, 2, 1), (0, 1, 1, 3), (0, 1, 2, 1)]
    return _frames(rows, 3, [1, 2], [1])


@pytest.mark.parametrize("jit", [True, False])
def test_evaluate_fixed_and_mixed_policies_by_hand(coin, jit):
    mdp = coin.mdp
    s0 = int(coin.index([0])[0])
    act = np.full(mdp.n_states, -1, np.int8)
    act[s0] = 0
    v = policy_value(mdp, policy_rows(mdp, act), gamma=1.0)
    assert v.expected_success == pytest.approx(0.5) and v.total_usage == 0.0
    act[s0] = 1
    v = policy_value(mdp, policy_rows(mdp, act), gamma=1.0)
    assert v.expected_success == pytest.approx(0.75) and v.total_usage == pytest.approx(1.0)
    # half and half, with the kernel itself (jitted or plain Python)
    fn = kf.evaluate_rows if jit else kf.evaluate_rows.py_func
    val = np.zeros((mdp.n_states, 3))
    half, no_flag = np.full(mdp.n_rows, 0.5), np.zeros(mdp.n_states)
    fn(mdp.order, mdp.graph, half, no_flag, 1.0, 1e-12, 1, val)
    assert val[s0, 0] == pytest.approx(0.625) and val[s0, 1] == pytest.approx(0.5)


def test_reachable_follows_only_the_policy_rows():
    # 0 -nohelp-> 1 -> 3 (win); 0 -help-> 2 -> 4 (lose)
    rows = [(0, 0, 1, 1), (0, 1, 2, 1), (1, 0, 3, 1), (2, 0, 4, 1)]
    ds = _frames(rows, 5, [3, 4], [3])
    mdp = ds.mdp
    act = np.zeros(mdp.n_states, np.int8)
    pi = policy_rows(mdp, act)
    seen = kf.reachable(mdp.start_weight > 0, mdp.sa_ptr, mdp.tr_ptr, mdp.tr_next, pi)
    assert sorted(ds.state_ids[seen].tolist()) == [0, 1, 3]


def test_pessimistic_mdp_sends_kappa_pseudo_visits_to_failure(coin):
    pm = pessimistic_mdp(coin.mdp, 1.0)
    assert pm.n_states == coin.mdp.n_states + 1 and pm.terminal[-1] and not pm.success[-1]
    # nohelp (n=2): keeps 2/3; help (n=4): keeps 4/5
    res0 = pessimistic_search(coin, 0.0, 1.0)
    assert res0["pessimistic_success"] == pytest.approx(0.5 * 2 / 3)
    assert res0["plain_model_success"] == pytest.approx(0.5)
    res1 = pessimistic_search(coin, 1.0, 1.0)
    assert res1["pessimistic_success"] == pytest.approx(0.75 * 4 / 5)
    assert res1["pessimistic_usage"] == pytest.approx(1.0)
    # states with a single action are left alone unless choices_only=False
    rows = [(0, 0, 1, 1)]
    single = _frames(rows, 2, [1], [1])
    assert pessimistic_search(single, 0.0, 1.0)["pessimistic_success"] == pytest.approx(1.0)
    pm_all = pessimistic_mdp(single.mdp, 1.0, choices_only=False)
    assert pm_all.tr_prob.tolist() == pytest.approx([0.5, 0.5])


@pytest.fixture
def lucky(tmp_path):
    """One task, one choice, both actions worth 0.5; each seen once winning and
    once losing: e0 nohelp win, e1 nohelp lose, e2 help win, e3 help lose."""
    states = {
        "s0": {"task_id": "t", "depth": 0},
        "win": {"task_id": "t", "depth": 1, "terminal": True, "success": True},
        "lose": {"task_id": "t", "depth": 1, "terminal": True},
    }
    eps = [
        {"task_id": "t", "path": ["s0", a, end]}
        for a, end in [(0, "win"), (0, "lose"), (1, "win"), (1, "lose")]
    ]
    return load_dataset(write_episodes(tmp_path / "lucky", states, eps))


def test_cross_fitting_undoes_the_winners_curse_by_hand(lucky):
    # fit on {e0, e3}: nohelp looks perfect (1.0), help hopeless (0.0)
    fit, held = episode_subset(lucky, [0, 3]), episode_subset(lucky, [1, 2])
    res = search_budget(fit.mdp, 1.0, gamma=1.0)
    assert res.expected_success == 1.0
    pi_row, flag = transfer_policy(fit, res.policy.action, held)
    v = policy_value(held.mdp, pi_row, gamma=1.0, flag=flag)
    assert v.expected_success == 0.0 and v.fallback == 0.0  # nohelp lost in the other half
    fold_of = pd.Series([0, 1, 1, 0], index=[0, 1, 2, 3])
    cf = cross_fit(lucky, 1.0, fold_of=fold_of)
    assert cf.table["insample_success"].tolist() == [1.0, 1.0]
    assert cf.expected_success == 0.0 and cf.expected_usage == pytest.approx(0.5)
    # the full-data DP says 0.5 (no choice beats a coin here)
    assert search_budget(lucky.mdp, 1.0, gamma=1.0).expected_success == pytest.approx(0.5)


def test_transfer_falls_back_on_behaviour_where_the_action_was_not_seen(lucky):
    fit, held = episode_subset(lucky, [0, 1]), episode_subset(lucky, [2, 3])
    res = search_budget(fit.mdp, 1.0, gamma=1.0)  # only nohelp observed -> nohelp
    pi_row, flag = transfer_policy(fit, res.policy.action, held)
    v = policy_value(held.mdp, pi_row, gamma=1.0, flag=flag)
    assert v.fallback == 1.0 and v.expected_success == pytest.approx(0.5)
    assert v.total_usage == pytest.approx(1.0)  # the behaviour there is help


def test_split_episodes_balances_each_stratum(lucky):
    f = split_episodes(lucky, 2, seed=3)
    assert sorted(f.index) == [0, 1, 2, 3] and f.value_counts().tolist() == [2, 2]


def test_split_episodes_keeps_a_stage2_design_a_stratum_of_its_own(lucky):
    """Two grid episodes and two of a stage-2 design, all at trigger_p 0.5: every seed
    deals each design's pair one to a fold (one stratum of four could put a pair in one)."""
    import dataclasses

    eps = lucky.episodes.copy()
    eps["trigger_p"] = 0.5
    eps["design"] = [None, None, '{"kind":"triggers"}', '{"kind":"triggers"}']
    ds = dataclasses.replace(lucky, episodes=eps)
    for seed in range(20):
        f = split_episodes(ds, 2, seed=seed)
        assert f[0] != f[1] and f[2] != f[3], (seed, f.tolist())


def test_cross_fit_on_the_demo_is_below_the_dp_forecast():
    ds = load_dataset(demo_dataset_path())
    dp = search_budget(ds.mdp, 1.0, gamma=ds.gamma)
    cf = cross_fit(ds, 1.0, repeats=1).summary()
    assert cf["heldout_success"] < dp.expected_success - 0.1
    assert 0.4 < cf["heldout_success"] < 0.8 and cf["folds"] == 2


@pytest.mark.parametrize("jit", [True, False])
def test_evaluate_rows_on_a_cycle_and_state_success(jit):
    """s0 -nohelp-> s0 (1) | win (1); s0 -help-> win (1); gamma 0.9: sweeps to tol,
    the kernel jitted and as Python, against the fixed points solved by hand."""
    from helpdp import state_success

    rows = [(0, 0, 0, 1), (0, 0, 1, 1), (0, 1, 1, 1)]
    ds = _frames(rows, 2, [1], [1])
    ds = from_frames({**MANIFEST, "gamma": 0.9}, ds.states, ds.transitions)
    mdp = ds.mdp
    s0 = int(ds.index([0])[0])
    fn = kf.evaluate_rows if jit else kf.evaluate_rows.py_func
    val = np.zeros((mdp.n_states, 3))
    half, flag = np.full(mdp.n_rows, 0.5), np.ones(mdp.n_states)
    sweeps = fn(mdp.order, mdp.graph, half, flag, 0.9, 1e-13, 10_000, val)
    assert not mdp.acyclic and sweeps > 1
    # S = 0.5 * 0.9 * (S / 2 + 1 / 2) + 0.5 * 0.9;  M = 0.5 + 0.5 * 0.9 * M / 2;
    # F (visits to flagged states, every state here) = 1 + 0.5 * 0.9 * F / 2 at s0
    assert val[s0, 0] == pytest.approx(0.675 / 0.775, abs=1e-12)
    assert val[s0, 1] == pytest.approx(0.5 / 0.775, abs=1e-12)
    assert val[s0, 2] == pytest.approx(1 / 0.775, abs=1e-12)
    # state_success evaluates the data's behaviour (action frequencies: 2/3 nohelp)
    # with the same kernel: S = 0.9 * (2/3 * (S / 2 + 1 / 2) + 1/3)
    assert state_success(ds)[s0] == pytest.approx(0.6 / 0.7, abs=1e-10)


def test_a_policy_over_its_budget_is_flagged():
    from helpdp.forecast import over_budget

    lines = over_budget(1.0, {"cross-fitted (held-out)": 1.299, "OPE (held-out)": 1.04})
    assert lines == [
        "budget 1: OVER BUDGET: the cross-fitted (held-out) policy spends E[U]=1.299 "
        "calls/episode, 30% over the budget"
    ]
    assert over_budget(2.0, {"x": 2.1}) == [] and over_budget(2.0, {"x": None}) == []


def test_the_frontier_plots_random_help_from_the_grids_episodes_only():
    from helpdp.pareto import random_help_curve

    eps = pd.DataFrame(
        {
            "trigger_p": [0.0, 0.0, 0.5, 0.5, 0.5, 0.5],
            "expert_calls": [0, 0, 1, 3, 1, 1],
            "success": [False, True, True, True, False, False],
            "design": [None, None, None, None, '{"kind":"triggers"}', '{"kind":"triggers"}'],
        }
    )
    curve = random_help_curve(eps)
    assert curve.index.tolist() == [0.0, 0.5]
    assert curve.loc[0.5].tolist() == [2.0, 1.0]  # the stage-2 rows (1 call, failed) left out
    assert random_help_curve(eps.drop(columns="design")).loc[0.5].tolist() == [1.5, 0.5]
    assert random_help_curve(eps[eps["design"].notna()]) is None
    assert random_help_curve(None) is None
