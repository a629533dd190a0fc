"""The off-policy intervals cover the exact value at the shipped design (small size).

``bench/ope_coverage.py`` on ``helpdp.synthetic.HelpWorld``, 12 tasks x 7 trigger
probabilities x 3 seeds (the real-actor collection's shape), 20 collections with fixed
seeds, the two hardest policies ("turns 0,3" and "turn 0 + after a failure"): the
shipped interval (``unit="task"``: Student-t with the delete-one-task jackknife, the
control variate refitted without the task) covers SR, U and the paired differences from
the turn-0 rule for ``dr`` and ``wdr``; the t interval of the tasks' own estimates
(the model held fixed) and the within-stratum bootstrap shipped until 2026-11-28 do not. The
full table (200 collections, 3 and 10 seeds) is in docs/results/ope.md.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from helpdp.policies import AtTurns, TurnZeroOrAfterFailure

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("ope_coverage", ROOT / "bench/ope_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cells():
    bench = _bench()
    res = bench.run(
        20,
        3,
        methods=("task-jk", "task-gjk", "task-t", "stratum"),
        estimators=("dr", "wdr"),
        n_boot=50,
        seed=1,
        pols=[AtTurns((0, 3)), TurnZeroOrAfterFailure()],
        groups=4,
    )
    assert res["episodes"] == 12 * 7 * 3
    return {(c["method"], c["estimator"], c["policy"], c["quantity"]): c for c in res["cells"]}


POLICIES = ("rule: turns 0,3", "rule: turn 0 + after failure")


def test_jackknife_intervals_cover_and_the_fixed_model_ones_do_not(cells):
    for est in ("dr", "wdr"):
        for pol in POLICIES:
            for q in ("SR", "U", "dSR", "dU"):
                assert cells[("task-jk", est, pol, q)]["coverage"] >= COVER, (est, pol, q)
    # wdr's tasks share the pooled control variate's error: the t interval of the tasks'
    # own estimates misses it (measured 0.80 and 0.85 here; 0.78 over 200 collections)
    assert cells[("task-t", "wdr", "rule: turns 0,3", "SR")]["coverage"] <= COVER_T
    assert cells[("task-t", "wdr", "rule: turns 0,3", "dSR")]["coverage"] <= COVER_T
    # the stratified episode bootstrap (strata of 3 episodes, the model fixed): 0.50-0.70
    assert cells[("stratum", "wdr", "rule: turns 0,3", "dSR")]["coverage"] <= COVER_OLD
    assert cells[("stratum", "dr", "rule: turns 0,3", "dSR")]["coverage"] <= COVER_OLD
    # the jackknife pays with width: wdr's intervals ~1.5x the fixed-model ones, still
    # narrower than dr's
    for pol in POLICIES:
        jk = cells[("task-jk", "wdr", pol, "SR")]["half_width"]
        assert cells[("task-t", "wdr", pol, "SR")]["half_width"] < jk
        assert jk < cells[("task-jk", "dr", pol, "SR")]["half_width"]


def test_the_delete_a_group_jackknife_covers_too(cells):
    # 4 groups of 3 tasks (the jackknife above JACKKNIFE_GROUPS tasks, here forced):
    # t_3 and one refit per group, so wider than the delete-one jackknife, and it covers
    # (measured 0.90-1.00; at 60 tasks in 10 groups over 200 collections: docs/ope.md)
    for est in ("dr", "wdr"):
        for pol in POLICIES:
            for q in ("SR", "U", "dSR", "dU"):
                assert cells[("task-gjk", est, pol, q)]["coverage"] >= COVER, (est, pol, q)
    for pol in POLICIES:
        gjk = cells[("task-gjk", "wdr", pol, "SR")]["half_width"]
        assert cells[("task-jk", "wdr", pol, "SR")]["half_width"] < gjk


#: 20 collections: one miss in 20 moves a coverage by 0.05 (measured: 0.90-1.00)
COVER = 0.90
COVER_T = 0.85
COVER_OLD = 0.70
