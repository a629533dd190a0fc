"""Help policies (helpdp.policies): the interface, each policy's decisions, and a policy
driving the collector in place of the random schedule."""

import numpy as np
import pandas as pd
import pytest

from helpdp.policies import (
    AfterFailure,
    Always,
    AtTurns,
    HelpPolicy,
    Never,
    RandomEpisodes,
    RandomStates,
    ScorePolicy,
    StateView,
    TablePolicy,
    TurnZero,
    TurnZeroOrAfterFailure,
    safe_decide,
)


def views(n_episodes=400, depth=5):
    return [
        StateView(
            e * 100 + t,
            f"w/{e % 7}",
            t,
            f"text {e} {t}",
            episode_id=e,
            last_failure="tool_error" if t % 2 else None,
            errors=t // 2,
        )  # fmt: skip
        for e in range(n_episodes)
        for t in range(depth)
    ]


def test_every_policy_satisfies_the_interface():
    for p in (Never(), Always(), RandomStates(0.3), RandomEpisodes(0.3), TurnZero(), AtTurns([2]),
              AfterFailure(), TurnZeroOrAfterFailure(), TablePolicy({}),
              ScorePolicy(lambda v: np.zeros(len(v)), 0.5)):  # fmt: skip
        assert isinstance(p, HelpPolicy) and p.name
        out = p.decide(views(2))
        assert out.dtype == np.int8 and out.shape == (10,)
        assert p.decide([]).shape == (0,)


def test_random_policies_are_pure_and_have_their_rate():
    v = views()
    a = RandomStates(0.3, seed=1).decide(v)
    assert np.array_equal(a, RandomStates(0.3, seed=1).decide(v))  # common random numbers
    assert np.array_equal(a[::-1], RandomStates(0.3, seed=1).decide(v[::-1]))  # order-free
    assert abs(a.mean() - 0.3) < 0.03 and not np.array_equal(a, RandomStates(0.3, 2).decide(v))
    ep = RandomEpisodes(0.25, seed=1).decide(v).reshape(400, 5)
    assert (ep.min(1) == ep.max(1)).all()  # all turns of an episode, or none
    assert abs(ep[:, 0].mean() - 0.25) < 0.05
    assert RandomStates(0.0).decide(v).sum() == 0 and RandomStates(1.0).decide(v).all()


def test_hand_written_rules():
    v = views(1, 4)  # turns 0..3; turns 1 and 3 follow a failure
    assert TurnZero().decide(v).tolist() == [1, 0, 0, 0]
    assert AfterFailure().decide(v).tolist() == [0, 1, 0, 1]
    assert TurnZeroOrAfterFailure().decide(v).tolist() == [1, 1, 0, 1]
    assert Always(action=2).decide(v).tolist() == [2, 2, 2, 2]
    assert AtTurns((3, 0, 3)).decide(v).tolist() == [1, 0, 0, 1]
    assert AtTurns((3, 0)).name == "rule: turns 0,3" and AtTurns([1]).turns == (1,)
    assert AtTurns([0]).decide(v).tolist() == TurnZero().decide(v).tolist()
    for bad in ([], [-1]):
        with pytest.raises(ValueError, match="turns"):
            AtTurns(bad)


def test_table_policy_fallback_mixture_and_coverage():
    v = views(1, 4)  # state ids 0, 1, 2, 3
    pol = TablePolicy({0: 1, 1: 0}, fallback=TurnZeroOrAfterFailure())
    assert pol.decide(v).tolist() == [1, 0, 0, 1]  # 2 and 3 unknown: the fallback decides
    assert pol.coverage() == 0.5 and pol.known() == {0, 1}
    mix = TablePolicy({0: 0}, {0: 1}, 0.3, seed=5)
    draws = [mix.decide([StateView(0, "w", 0, "", episode_id=e)])[0] for e in range(3000)]
    assert abs(np.mean(draws) - 0.3) < 0.03


def test_score_policy_calibrates_to_a_share_of_states():
    v = views(200, 5)
    score = lambda vs: np.array([uniform_score(x) for x in vs])  # noqa: E731
    pol = ScorePolicy.calibrated(score, v, 0.1, name="prm 10%")
    assert abs(pol.decide(v).mean() - 0.1) < 0.01
    assert abs(ScorePolicy.calibrated(score, v, 0.3).decide(v).mean() - 0.3) < 0.01


def uniform_score(v: StateView) -> float:
    return (v.state_id * 2654435761 % 2**32) / 2**32


class Broken:
    name = "broken"

    def __init__(self, mode):
        self.mode = mode

    def decide(self, views):
        if self.mode == "raise":
            raise RuntimeError("model server down")
        return np.array([1] * (len(views) + 1)) if self.mode == "shape" else -np.ones(len(views))


@pytest.mark.parametrize("mode", ["raise", "shape", "negative"])
def test_a_failing_policy_falls_back_to_nohelp(mode):
    out, err = safe_decide(Broken(mode), views(1, 3))
    assert out.tolist() == [0, 0, 0] and err
    ok, none = safe_decide(TurnZero(), views(1, 3))
    assert ok.tolist() == [1, 0, 0] and none is None


SMALL = ["schedule.scenarios=[smart_home_1]", "schedule.max_tasks=3", "schedule.probabilities=[0.0]",
         "schedule.seeds=[0,1]", "progress=false", "executor.workers=1"]  # fmt: skip


def test_a_policy_object_drives_the_collector(tmp_path):
    from collect.collector import collect, collect_config

    out = collect(collect_config([f"out={tmp_path / 'a'}", *SMALL]), help_policy=TurnZero()).out
    steps = pd.read_parquet(out / "steps.parquet")
    assert (steps["action"] == (steps["t"] == 0)).all()  # help exactly at turn 0
    import json

    assert json.loads((out / "manifest.json").read_text())["source"]["help_policy"] == (
        "rule: turn 0"
    )
    # a policy that raises: every episode still runs, with nohelp, and the errors are counted
    bad = collect(collect_config([f"out={tmp_path / 'b'}", *SMALL]), help_policy=Broken("raise"))
    ep = pd.read_parquet(bad.out / "episodes.parquet")
    assert len(ep) == 6 and ep["expert_calls"].sum() == 0
    assert (ep["policy_errors"] == ep["steps"]).all() and ep["policy_errors"].sum() > 0
