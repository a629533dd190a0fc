"""bench/fitted_world.py: the fitted agent's world, its exact values checked by hand on a
two-turn table, against its own episodes for the shipped agents, and its logged steps read
back by ``load_logged`` as the views it decided on."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import safe_select  # noqa: E402
from bench.fitted_world import PREV, FittedWorld, load_agent  # noqa: E402
from collect.simulate import FittedAgent  # noqa: E402
from helpdp.ope import load_logged  # noqa: E402
from helpdp.policies import AtTurns, Never, TurnZeroThen  # noqa: E402


def _hand_agent() -> FittedAgent:
    """Turn 0: working 0.5, stop 0.5. Later: working 0.2, failed 0.1, unknown_tool 0.1,
    format_error 0.1, stop 0.4, repeat 0.1; the same with and without help. A working
    call makes progress only with help (on_path 0, 1)."""
    start = [0.5, 0, 0, 0, 0.5, 0]
    later = [0.2, 0.1, 0.1, 0.1, 0.4, 0.1]
    probs = {}
    for h in (0, 1):
        probs[f"{h}|0|start|0"] = np.array(start)
        for prev in PREV[1:]:
            for r in range(3):
                probs[f"{h}|0|{prev}|{r}"] = np.array(later)
    return FittedAgent((0,), 2, probs, (0.0, 1.0))


def test_exact_values_by_hand_on_a_two_and_three_turn_table():
    agent = _hand_agent()
    w2 = FittedWorld(agent, (1,), (30,), horizon=2)
    # always: help at 0 makes the call with p 0.5, then a stop at 1 succeeds (0.4)
    assert np.allclose(w2.exact(AtTurns((0, 1))), (0.5 * 0.4, 1 + 0.5))
    # turn 0 alone: the same success, one call
    assert np.allclose(w2.exact(AtTurns((0,))), (0.2, 1.0))
    # turn 1 alone: the call is made at the last turn, too late to stop after it
    assert np.allclose(w2.exact(AtTurns((1,))), (0.0, 0.5))
    assert w2.exact(Never()) == (0.0, 0.0)
    # three turns, help at turn 1: working at 1 (0.5 * 0.2), then a stop at 2 (0.4)
    w3 = FittedWorld(agent, (1,), (30,), horizon=3)
    assert np.allclose(w3.exact(AtTurns((1,))), (0.5 * 0.2 * 0.4, 0.5))
    # after a working turn (an event rule): helps at 0 and at 1 after working at 0
    s, u = w3.exact(TurnZeroThen(("working",)))
    # success: k = 1 at turn 0 (0.5); then stop at 1 (0.4), or a non-ending turn at 1
    # (working, failed, unknown, repeat: 0.5) and a stop at 2 (0.4)
    assert np.isclose(s, 0.5 * (0.4 + 0.5 * 0.4))
    # calls: 1 + 0.5 at turn 1 + at turn 2 after a working turn 1 or a repeat of the
    # working turn 0 (a repeat keeps the class): 0.5 * (0.2 + 0.1)
    assert np.isclose(u, 1 + 0.5 + 0.5 * (0.2 + 0.1))
    # two tasks weigh equally; a task of two calls is never solved in two turns
    assert np.allclose(FittedWorld(agent, (1, 2), (30, 30), horizon=2).exact(AtTurns((0, 1))),
                       (0.1, 1.5))  # fmt: skip


@pytest.mark.parametrize("kind", ["table", "features"])
def test_exact_matches_the_worlds_own_episodes(kind):
    w = FittedWorld(load_agent(kind), (1, 2, 4), (30, 40, 45))
    for pol in (AtTurns((0, 2)), TurnZeroThen(("failed", "repeat"))):
        s, u = w.exact(pol)
        ok, calls = w.run(pol, 2000, seed=3)
        n = len(ok)
        assert abs(ok.mean() - s) < 4.5 * max(ok.std(), 0.05) / np.sqrt(n)
        assert abs(calls.mean() - u) < 4.5 * max(calls.std(), 0.05) / np.sqrt(n)


def test_a_policy_reading_what_the_state_does_not_hold_is_refused():
    w = FittedWorld(_hand_agent(), (1,), (30,), horizon=3)
    capped = TurnZeroThen(("working",), max_calls=1)  # reads the episode's calls
    with pytest.raises(ValueError, match="errors, calls, past states"):
        w.exact(capped)


def test_the_logged_steps_read_back_as_the_views_decided_on():
    w = FittedWorld(load_agent("table"), (2, 3), (35, 40))
    rng = np.random.default_rng(5)
    seen, episodes = [], []
    for eid in range(1, 41):

        def decide(v, seen=seen):
            seen.append(v)
            return 0.5

        episodes.append((eid % 2, "train", eid, 0.5, None, w._episode(eid % 2, decide, rng, eid)))
    ds = w._dataset(episodes, "test", design=False)
    logged = load_logged(ds)
    views = logged.views()
    assert len(views) == len(seen) > 40
    fields = ("state_id", "depth", "last_failure", "errors", "last_help", "last_class",
              "calls")  # fmt: skip
    for mine, back in zip(seen, views):
        assert [getattr(mine, f) for f in fields] == [getattr(back, f) for f in fields]
        # the state caps the repeat run (the rungs' and the agent's cap); the log does not
        assert mine.repeats == min(back.repeats, w.run_cap)
    assert any(v.repeats > w.run_cap for v in views)  # the cap was met
    # repeats were drawn and read back (the chain's loops are in the data)
    assert any(v.repeats >= 1 for v in views)
    assert {"working", "failed", "unknown_tool"} <= {v.last_class for v in views}


def test_a_fitted_world_runs_the_whole_protocol():
    rows = safe_select.one_world(0, 8, False, (2.0,), kind="features")
    (r,) = rows
    assert r["kind"] == "features" and np.isfinite(r["gap"]) and 0 <= r["SR"] <= 1
    assert np.isfinite(r["advantage"])
