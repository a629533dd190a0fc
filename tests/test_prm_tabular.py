"""The tabular PRM against rates computed by hand on a five-episode dataset."""

import numpy as np
import pytest
from toy_prm import write_episodes

from helpdp import load_dataset
from prm import ActorMismatchError, TabularPRM, build_examples, load_prm, task_splits
from prm.train import fit_prm

STATES = {
    "s0": {"task_id": "A", "depth": 0, "text": "start"},
    "s1": {"task_id": "A", "depth": 1, "text": "went on"},
    "s2": {"task_id": "A", "depth": 1, "text": "asked"},
    "win": {"task_id": "A", "depth": 2, "terminal": True, "success": True, "text": "won"},
    "lose": {"task_id": "A", "depth": 2, "terminal": True, "success": False, "text": "lost"},
}
PATHS = [
    ["s0", 0, "s1", 0, "win"],
    ["s0", 0, "s1", 1, "win"],
    ["s0", 0, "s1", 0, "lose"],
    ["s0", 1, "s2", 0, "lose"],
    ["s0", 0, "s1", 0, "win"],
]


@pytest.fixture
def hand(tmp_path):
    eps = [{"task_id": "A", "split": "train", "path": p} for p in PATHS]
    return load_dataset(write_episodes(tmp_path / "hand", STATES, eps))


def test_examples_one_row_per_state_action(hand):
    ex = build_examples(hand, task_splits(hand)).frame.set_index(["state_id", "action"])
    # (state, action): (visits, successes) counted from PATHS by hand
    expected = {(0, 0): (4, 3), (0, 1): (1, 0), (1, 0): (3, 2), (1, 1): (1, 1), (2, 0): (1, 0)}
    assert len(ex) == len(expected)
    for key, (n, k) in expected.items():
        assert ex.loc[key, "n"] == n and ex.loc[key, "k"] == k
        assert ex.loc[key, "label"] == pytest.approx(k / n)
        assert ex.loc[key, "weight"] == pytest.approx(n / (n + 1))  # saturating, n0 = 1


def test_tabular_matches_hand_computed_rates(hand, tmp_path):
    alpha = 2.0
    prm, _ = fit_prm(hand, {"prm": {"kind": "tabular", "prior_strength": alpha}})
    overall = 6 / 10  # successes / visits over all five pairs
    g0 = (5 + alpha * overall) / (8 + alpha)  # nohelp: 5 successes in 8 visits -> 0.62
    g1 = (1 + alpha * overall) / (2 + alpha)  # help: 1 in 2 -> 0.55
    g0_d0 = (3 + alpha * g0) / (4 + alpha)
    g0_d1 = (2 + alpha * g0) / (4 + alpha)
    g1_d0 = (0 + alpha * g1) / (1 + alpha)
    g1_d1 = (1 + alpha * g1) / (1 + alpha)
    # behaviour-policy values by hand: V(s1) = 3/4 * 2/3 + 1/4 * 1, V(s2) = 0, V(s0) = 4/5 * V(s1)
    v1, v2 = 0.75, 0.0
    v0 = 4 / 5 * v1
    n_s = {0: 5, 1: 4, 2: 1}

    def p(k, n, v, ns, g):
        m = (ns * v + alpha * g) / (ns + alpha)
        return (k + alpha * m) / (n + alpha)

    expected = {
        (0, 0): p(3, 4, v0, n_s[0], g0_d0),
        (0, 1): p(0, 1, v0, n_s[0], g1_d0),
        (1, 0): p(2, 3, v1, n_s[1], g0_d1),
        (1, 1): p(1, 1, v1, n_s[1], g1_d1),
        (2, 0): p(0, 1, v2, n_s[2], g0_d1),
        (2, 1): p(0, 0, v2, n_s[2], g1_d1),  # help never taken at s2: the prior mean
    }
    keys = list(expected)
    got = prm.predict(hand, [s for s, _ in keys], [a for _, a in keys])
    np.testing.assert_allclose(got, [expected[k] for k in keys], rtol=1e-12)
    assert expected[(0, 0)] == pytest.approx(0.7101587, abs=1e-6)  # the arithmetic, once, by hand
    # save -> load gives the same numbers
    again = load_prm(prm.save(tmp_path / "tab"))
    np.testing.assert_allclose(again.predict(hand, [s for s, _ in keys], [a for _, a in keys]), got)
    # with prior strength 0 the estimate is the raw Monte-Carlo rate
    raw, _ = fit_prm(hand, {"prm": {"kind": "tabular", "prior_strength": 0.0}})
    np.testing.assert_allclose(
        raw.predict(hand, [0, 0, 1, 1, 2], [0, 1, 0, 1, 0]), [3 / 4, 0, 2 / 3, 1, 0]
    )


def test_unseen_dataset_backs_off_to_depth_rates(hand, tmp_path):
    prm, _ = fit_prm(hand, {"prm": {"kind": "tabular", "prior_strength": 2.0}})
    states = {**STATES, "s1": {**STATES["s1"], "text": "something else"}}
    eps = [{"task_id": "A", "split": "train", "path": p} for p in PATHS[:2]]
    other = load_dataset(write_episodes(tmp_path / "other", states, eps))
    got = prm.predict(other, [0, 1], [0, 0])
    assert got[0] == pytest.approx(prm.backoff(np.array([0]), np.array([0]))[0])
    assert got[1] == pytest.approx(prm.backoff(np.array([0]), np.array([1]))[0])


def test_actor_check_refuses_other_actor(hand, tmp_path):
    prm, _ = fit_prm(hand, {"prm": {"kind": "tabular"}})
    eps = [{"task_id": "A", "split": "train", "path": p} for p in PATHS]
    other = load_dataset(write_episodes(tmp_path / "b", STATES, eps, actor="another-model"))
    with pytest.raises(ActorMismatchError, match="another-model"):
        prm.predict(other, [0], [0])
    assert prm.predict(other, [0], [0], allow_other_actor=True).shape == (1,)
    renamed = load_dataset(
        write_episodes(tmp_path / "c", STATES, eps, actions=("nohelp", "oracle"))
    )
    with pytest.raises(ValueError, match="oracle"):
        prm.predict(renamed, [0], [0])


def test_dp_labels_without_steps(hand, tmp_path):
    """Without steps.parquet the labels are the DP's behaviour values (equal here)."""
    ex_mc = build_examples(hand, task_splits(hand), label_source="episodes").frame
    ex_dp = build_examples(hand, task_splits(hand), label_source="dp").frame
    np.testing.assert_allclose(ex_dp["n"], ex_mc["n"])
    np.testing.assert_allclose(ex_dp["label"], ex_mc["label"], atol=1e-12)
    # and a PRM fitted on the DP's labels, without a prior, predicts them back
    ex = build_examples(hand, task_splits(hand), label_source="dp")
    fitted = TabularPRM.fit(hand, ex, prior_strength=0.0)
    rows = ex.frame
    sid, act = rows["state_id"].to_numpy(), rows["action"].to_numpy()
    got = fitted.predict(hand, sid, act, allow_other_actor=True)
    np.testing.assert_allclose(got, rows["label"], atol=1e-9)
