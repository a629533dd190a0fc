"""Self-regulation: threshold choice, episode scores, the PRM-thresholding policy."""

import numpy as np
import pandas as pd
import pytest
from toy_prm import write_episodes

from helpdp import load_dataset
from prm import PRMThresholdPolicy, classification, episode_failure_scores, pick_threshold
from prm.train import fit_prm


def test_pick_threshold_toy():
    # failure scores of 6 validation episodes; the best rule is "success iff score <= 0.5"
    score = [0.1, 0.2, 0.45, 0.55, 0.8, 0.9]
    success = [1, 1, 1, 0, 0, 0]
    theta = pick_threshold(score, success)
    assert theta == pytest.approx(0.5)
    m = classification(score, success, theta)
    assert m["accuracy"] == 1.0 and m["precision"] == 1.0 and m["recall"] == 1.0
    # one success among failures at a high score: best is still 0.5 (5/6), not 0.85 (5/6 too, later)
    assert pick_threshold([0.1, 0.2, 0.45, 0.55, 0.8, 0.9], [1, 1, 1, 0, 1, 0]) == pytest.approx(
        0.5
    )
    # all successes: predict success everywhere
    assert pick_threshold([0.3, 0.6], [1, 1]) == 0.6
    # all failures: a threshold below every score
    assert pick_threshold([0.3, 0.6], [0, 0]) < 0.3


def test_classification_counts():
    m = classification([0.1, 0.2, 0.7, 0.9], [1, 0, 1, 0], 0.5)
    # predicted success: first two; tp = 1
    assert m == pytest.approx(
        {"accuracy": 0.5, "precision": 0.5, "recall": 0.5, "episodes": 4, "success_rate": 0.5}
    )


def test_threshold_policy_fraction():
    ids = np.array([10, 11, 12, 13, 14, 15, 16, 17, 18, 19])
    p = np.array([0.9, 0.1, 0.5, 0.3, 0.8, 0.2, 0.7, 0.6, 0.4, 0.95])
    pol = PRMThresholdPolicy.from_scores(ids, p, 0.3)
    assert sorted(ids[pol.action == 1]) == [11, 13, 15]  # the three lowest p_nohelp
    assert pol.threshold == pytest.approx(0.3)
    assert pol([13, 10]).tolist() == [1, 0]
    with pytest.raises(KeyError):
        pol([99])
    assert (PRMThresholdPolicy.from_scores(ids, p, 0.1).action == 1).sum() == 1
    # nohelp observed everywhere, help only at 11 and 13: help at 15 was never observed
    observed = pd.DataFrame({"state_id": [*ids, 11, 13], "action": [0] * 10 + [1, 1]})
    assert PRMThresholdPolicy.from_scores(
        ids, p, 0.3, observed_pairs=observed
    ).observed.tolist() == [
        True,
        True,
        True,
        True,
        True,
        False,
        True,
        True,
        True,
        True,
    ]


def test_episode_failure_scores(tmp_path):
    states = {
        "a0": {"task_id": "A", "depth": 0, "text": "a"},
        "a1": {"task_id": "A", "depth": 1, "text": "a1"},
        "b0": {"task_id": "B", "depth": 0, "text": "b"},
        "win": {"task_id": "A", "depth": 2, "terminal": True, "success": True},
        "lose": {"task_id": "A", "depth": 2, "terminal": True, "success": False},
        "bwin": {"task_id": "B", "depth": 1, "terminal": True, "success": True},
    }
    eps = [
        {"task_id": "A", "split": "train", "path": ["a0", 0, "a1", 0, "win"]},
        {"task_id": "A", "split": "train", "path": ["a0", 0, "a1", 0, "lose"]},
        {"task_id": "B", "split": "validation", "path": ["b0", 1, "bwin"]},
    ]
    ds = load_dataset(write_episodes(tmp_path / "d", states, eps))
    prm, _ = fit_prm(
        ds,
        {"prm": {"kind": "tabular", "prior_strength": 0.0}, "fit_splits": ["train", "validation"]},
    )
    out = episode_failure_scores(prm, ds).set_index("episode_id")
    # p_nohelp(a0) = p_nohelp(a1) = 1/2 (raw rates): max(1 - p) = 0.5 for both A episodes
    assert out.loc[0, "score"] == pytest.approx(0.5) and out.loc[1, "score"] == pytest.approx(0.5)
    assert out["success"].tolist() == [True, False, True]
    assert out["split"].tolist() == ["train", "train", "validation"]
    # b0 never took nohelp: p_nohelp backs off to the state's value (1.0), score 0
    assert out.loc[2, "score"] == pytest.approx(0.0)
