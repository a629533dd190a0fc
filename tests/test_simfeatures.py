"""The simulated agent on task features (collect/simfeatures.py, ``collect.fit_simulated
model=features``): the logit recovers the weights that made the data, reduces to the
outcome frequencies where it has only intercepts, never draws a repeat at turn 0, is
read back from its JSON and played by the fitted actor with the task's features; the
check against held-out episodes flags an agent that is wrong."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_simulate_fitted import CALLS, SPEC, TOOLS, Solution, _turn, _view

from collect.awm.protocol import parse_turn
from collect.fit_simulated import chain_check, task_features
from collect.rollout import EpisodeView
from collect.simfeatures import (
    FeatureAgent,
    agent_from_json,
    design,
    feature_names,
    fit_logit,
    logit_probs,
    outcome_mask,
)
from collect.simulate import OUTCOMES, FittedAgent, simulate_fitted_turn

K = len(OUTCOMES)
W_, STOP, REP, FMT = (OUTCOMES.index(x) for x in ("working", "stop", "repeat", "format_error"))


def _agent(weights: np.ndarray, on_path=(0.0, 1.0)) -> FeatureAgent:
    return FeatureAgent((0, 1, 2, 3, 5), 2, weights, on_path)


def _zero() -> np.ndarray:
    return np.zeros((len(feature_names(5, 2)), K))


def test_the_logit_recovers_the_weights_that_made_the_data():
    rng = np.random.default_rng(0)
    n, d = 40_000, 3
    x = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    w = np.zeros((d, K))
    w[:, STOP] = [-0.5, 1.0, 0.0]
    w[:, FMT] = [0.3, -0.7, 1.2]
    mask = np.ones((n, K), bool)
    mask[:, [1, 2, 5]] = False  # three outcomes that cannot happen here
    p = logit_probs(w, x, mask)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    got = fit_logit(x, y, mask, l2=0.0, base=W_)
    assert np.abs(got[:, [STOP, FMT]] - w[:, [STOP, FMT]]).max() < 0.06
    assert (got[:, W_] == 0).all()
    # a penalty pulls the slopes (not the intercepts) toward 0
    half = fit_logit(x, y, mask, l2=8_000.0, base=W_)
    shrunk = fit_logit(x, y, mask, l2=1e7, base=W_)
    slopes = lambda v: np.abs(v[1:, [STOP, FMT]])  # noqa: E731
    # the penalised norm falls as the penalty grows (ridge)
    assert (slopes(shrunk) < 0.01).all()
    assert np.linalg.norm(slopes(half)) < np.linalg.norm(slopes(got))


def test_intercepts_alone_give_the_outcome_frequencies_and_a_mask_gives_zero():
    # 6 turns: 3 working, 2 stop, 1 format error; repeat masked everywhere
    y = np.array([W_, W_, W_, STOP, STOP, FMT])
    x = np.ones((6, 1))
    mask = np.ones((6, K), bool)
    mask[:, REP] = False
    p = logit_probs(fit_logit(x, y, mask, l2=0.0, base=W_), x, mask)[0]
    want = np.zeros(K)
    want[[W_, STOP, FMT]] = [3 / 6, 2 / 6, 1 / 6]
    assert np.allclose(p, want, atol=1e-4)
    with pytest.raises(ValueError, match="masked"):
        fit_logit(x, np.array([REP] * 6), mask, l2=0.0)


def test_design_columns_and_the_turn0_mask():
    x = design([1, 0], [0, 4], [0, 2], [0, 5], [3, 12], [30, 60], 5, 2)
    names = feature_names(5, 2)
    row = dict(zip(names, x[1]))
    assert x.shape == (2, len(names)) and row["bucket 4"] == 1 and row["prev failed"] == 1
    assert row["run 2"] == 1 and row["run 1"] == 0  # a run of 5 is capped at 2
    assert np.isclose(row["log calls"], np.log(4)) and np.isclose(row["log tools"], np.log(2))
    assert row["help x log calls"] == 0 and dict(zip(names, x[0]))["log calls"] == 0
    mask = outcome_mask(np.array([0, 1]))
    assert not mask[0, REP] and mask[1].all()


def test_the_agent_reads_the_tasks_features_and_its_json_round_trips():
    w = _zero()
    w[feature_names(5, 2).index("log calls"), STOP] = 3.0  # long tasks: stop more
    a = _agent(w)
    short, long_ = (
        a.row(False, 1, "working", 0, n_calls=1),
        a.row(False, 1, "working", 0, n_calls=9),
    )
    assert long_[STOP] > 0.5 > short[STOP] and np.isclose(long_.sum(), 1)
    assert a.row(True, 0, "start", 0)[REP] == 0.0
    data = {
        "model": "features",
        "outcomes": list(OUTCOMES),
        "buckets": [0, 1, 2, 3, 5],
        "max_run": 2,
        "features": feature_names(5, 2),
        "weights": w.tolist(),
        "on_path": {"nohelp": 0.0, "help": 1.0},
    }
    back = agent_from_json(json.loads(json.dumps(data)))
    assert isinstance(back, FeatureAgent) and np.allclose(back.weights, w)
    with pytest.raises(ValueError, match="weights must be finite"):
        agent_from_json({**data, "weights": w[:-1].tolist()})
    with pytest.raises(ValueError, match="model must be table or features"):
        agent_from_json({**data, "model": "tree"})
    with pytest.raises(ValueError, match="model must be table, not 'features'"):
        FittedAgent.from_json(data)  # the table reader refuses a logit


def test_the_fitted_actor_plays_a_feature_agent_with_the_tasks_length():
    # short tasks: a working call (the next reference call: on_path nohelp 1); long: stop
    w = _zero()
    w[0, [OUTCOMES.index(x) for x in ("failed", "unknown_tool", "format_error", "repeat")]] = -30
    w[feature_names(5, 2).index("log calls"), STOP] = 20.0
    rng = np.random.default_rng(0)
    short = _view()  # CALLS: 2 reference calls, log(2/3) * 20 = -8: working
    turn = parse_turn(simulate_fitted_turn(short, rng, _agent(w, (1.0, 1.0))))
    assert turn.kind == "call_tool" and turn.tool_name == CALLS[0]["tool_name"]
    assert _turn(0, simulate_fitted_turn(short, rng, _agent(w, (1.0, 1.0)))).failure is None
    long_ = EpisodeView(SPEC, "do it", TOOLS, Solution(CALLS * 5), [], None)  # 10 calls: +24
    assert simulate_fitted_turn(long_, rng, _agent(w)) == "I have completed the task."


def _episodes(classes_per_episode, success, task_ids):
    """turns/eps tables as load_sources gives them, one class chain per episode."""
    rows, eps = [], []
    for e, (chain, ok, tid) in enumerate(zip(classes_per_episode, success, task_ids)):
        for t, c in enumerate(chain):
            rows.append((f"0:{e}", t, False, c, c, False, 0))
        eps.append((f"0:{e}", tid, 0, 0.0, ok, 2, 30, 10))
    turns = pd.DataFrame(
        rows, columns=["episode_id", "t", "helped", "turn_class", "outcome", "repeat", "repeats"]
    )
    eps = pd.DataFrame(
        eps,
        columns=[
            "episode_id",
            "task_id",
            "seed",
            "trigger_p",
            "success",
            "n_calls",
            "n_tools",
            "max_turns",
        ],
    )
    return turns, eps


def test_the_check_passes_an_agent_that_matches_and_flags_one_that_does_not():
    # real: every episode answers at turn 0 (a stop), none succeeds, 6 tasks
    turns, eps = _episodes([["stop"]] * 12, [False] * 12, [f"w_{i % 6}/0" for i in range(12)])
    stopper, erring = _zero(), _zero()
    stopper[0, STOP] = 40.0
    erring[0, FMT] = 40.0
    ok = chain_check(_agent(stopper), turns, eps, chains=20, boot=200)
    assert ok["inside"].all(), ok
    # no success anywhere: the row's interval is the episodes' Wilson one, not [0, 0]
    sr = ok.set_index("quantity").loc["success, p = 0"]
    assert sr["lo"] == 0.0 and sr["hi"] > 0.3
    bad = chain_check(_agent(erring), turns, eps, chains=20, boot=200)
    flagged = set(bad.loc[~bad["inside"], "quantity"])
    assert {"class stop", "class format_error", "ends on format error"} <= flagged


def test_task_features_of_the_shipped_worlds():
    f = task_features(pd.Series(["workflow_automation_1/0", "smart_home_1/3"]), None)
    assert f.loc["workflow_automation_1/0", "n_tools"] == 34
    assert f.loc["smart_home_1/3", "n_tools"] == 29
    assert (f["n_calls"] >= 1).all()
    with pytest.raises(ValueError, match="no reference solution"):
        task_features(pd.Series(["nowhere_1/0"]), None)


def test_the_command_fits_the_shipped_real_data_and_the_actor_loads_it(tmp_path):
    from collect.actors import load_fitted
    from collect.fit_simulated import FitSimulatedConfig, run_fit

    out = tmp_path / "features.json"
    cfg = FitSimulatedConfig(out=str(out), model="features", chains=50)
    fit = run_fit(cfg)
    assert fit["fit"]["episodes"] == 162 and fit["fit"]["tasks"] == 12  # seed 2 held out
    agent = load_fitted(str(out))
    assert isinstance(agent, FeatureAgent) and agent.on_path == (
        fit["on_path"]["nohelp"],
        fit["on_path"]["help"],
    )
    p = agent.probs([0, 1], [0, 3], [0, 1], [0, 1], [2, 8], [30, 40])
    assert np.allclose(p.sum(axis=1), 1) and p[0, REP] == 0
    with pytest.raises(ValueError, match="exists"):
        run_fit(cfg)
