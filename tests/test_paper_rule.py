"""rule=paper: the usage/policy iteration of Min et al. (2025) with PRM scores (docs/method.md, "The equations")."""

import numpy as np
import pandas as pd
import pytest
from dp_helpers import make_frames

from helpdp import DatasetError, from_frames, score_rows, search_budget, solve


def _with_scores(frames, p):
    """``p``: {(state index, action): p_success}."""
    manifest, states, trans = frames
    scores = pd.DataFrame(
        {
            "state_id": np.array([s * 10 + 7 for s, _ in p], np.int64),
            "action": np.array([a for _, a in p], np.int8),
            "p_success": np.array(list(p.values()), np.float64),
            "source": "test",
        }
    )
    return from_frames(manifest, states, trans, scores)


def _act(ds, r, **kw):
    sol = solve(ds.mdp, r, gamma=1.0, rule="paper", p_row=score_rows(ds), **kw)
    return int(sol.action[ds.index([7])[0]]), sol


def test_positive_dm_ratio_test():
    # dp = 0.4, dM = 0.9 * 1 - 0.5 * 0 = 0.9: help iff r < 0.444..., not r < 0.4 as exact says
    ds = _with_scores(
        make_frames(3, [(0, 0, 1, 1), (0, 0, 2, 1), (0, 1, 1, 9), (0, 1, 2, 1)], success=(1,)),
        {(0, 0): 0.5, (0, 1): 0.9},
    )
    assert _act(ds, 0.42)[0] == 1
    assert _act(ds, 0.45)[0] == 0
    assert solve(ds.mdp, 0.42, gamma=1.0).action[ds.index([7])[0]] == 0  # exact rule differs here


def test_negative_dm_help_saves_later_usage():
    # nohelp leads to s1 where only help was observed (M_nohelp = 1); help ends the episode
    # (M_help = 1). p_nohelp = 0.5, p_help = 0.4: dM = 0.4 - 0.5 = -0.1 < 0, dp = -0.1.
    # help iff dp - r dM > 0 iff r > 1: the naive ratio test "r < dp/dM = 1" is backwards.
    tr = [(0, 0, 1, 1), (0, 1, 2, 1), (0, 1, 3, 1), (1, 1, 2, 1), (1, 1, 3, 1)]
    ds = _with_scores(make_frames(4, tr, success=(2,)), {(0, 0): 0.5, (0, 1): 0.4, (1, 1): 0.5})
    assert _act(ds, 0.5)[0] == 0
    assert _act(ds, 2.0)[0] == 1
    # dp > 0 with dM < 0: help at every r. nohelp -> s1 -> s2, both help-only (M_nohelp = 2);
    # help ends the episode (M_help = 1). p_nohelp = 0.5, p_help = 0.6: dM = 0.6 - 1.0 = -0.4
    tr2 = [(0, 0, 1, 1), (0, 1, 3, 1), (1, 1, 2, 1), (2, 1, 3, 1)]
    ds = _with_scores(
        make_frames(4, tr2, success=(3,)), {(0, 0): 0.5, (0, 1): 0.6, (1, 1): 1.0, (2, 1): 1.0}
    )
    for r in [0.0, 0.3, 5.0, 1e6]:
        assert _act(ds, r)[0] == 1


def test_zero_dm_defaults_to_nohelp():
    # nohelp -> s1 -> s2, both help-only: M_nohelp = 2, p_nohelp = 0.5 ; help ends: M_help = 1,
    # p_help = 1.0: dM = 1 - 0.5 * 2 = 0 although dp = 0.5 > 0 -> nohelp (|dM| ~ 0)
    tr = [(0, 0, 1, 1), (0, 1, 3, 1), (1, 1, 2, 1), (2, 1, 3, 1)]
    ds = _with_scores(
        make_frames(4, tr, success=(3,)), {(0, 0): 0.5, (0, 1): 1.0, (1, 1): 1.0, (2, 1): 1.0}
    )
    assert _act(ds, 0.1)[0] == 0
    assert _act(ds, 0.1, dm_tol=-1.0)[0] == 1  # without the guard, help would win


def test_usage_and_success_reported_under_the_model():
    ds = _with_scores(
        make_frames(3, [(0, 0, 1, 1), (0, 0, 2, 1), (0, 1, 1, 9), (0, 1, 2, 1)], success=(1,)),
        {(0, 0): 0.5, (0, 1): 0.9},
    )
    _, sol = _act(ds, 0.1)
    assert sol.expected_usage[0] == 1.0
    assert sol.expected_success == pytest.approx(0.9)  # from counts, not from the PRM
    res = search_budget(ds.mdp, 0.5, gamma=1.0, rule="paper", p_row=score_rows(ds))
    assert res.expected_usage == pytest.approx(0.5)
    assert res.policy.total_usage == 0.0 and res.more_help.total_usage == 1.0


def test_missing_score_is_refused():
    frames = make_frames(3, [(0, 0, 1, 1), (0, 1, 2, 1)], success=(1,))
    ds = _with_scores(frames, {(0, 0): 0.5})
    with pytest.raises(
        DatasetError, match=r"scores.parquet: column 'p_success': no score for state_id 7, action 1"
    ):
        score_rows(ds)
    no_scores = from_frames(*frames)
    with pytest.raises(DatasetError, match="rule=paper needs scores.parquet"):
        score_rows(no_scores)
