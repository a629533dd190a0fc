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
        )
        for e in range(n_episodes)
        for t in range(depth)
    ]


def test_every_policy_satisfies_the_interface():
    for p in (
        Never(),
        Always(),
        RandomStates(0.3),
        RandomEpisodes(0.3),
        TurnZero(),
        AtTurns([2]),
        AfterFailure(),
        TurnZeroOrAfterFailure(),
        TablePolicy({}),
        ScorePolicy(lambda v: np.zeros(len(v)), 0.5),
    ):
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


SMALL = [
    "schedule.scenarios=[smart_home_1]",
    "schedule.max_tasks=3",
    "schedule.probabilities=[0.0]",
    "schedule.seeds=[0,1]",
    "progress=false",
    "executor.workers=1",
]


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


# --- event rules, the registry, the stage-2 design (issue 32) ------------------------


def test_event_rules_and_budget():
    from helpdp.policies import TurnZeroThen

    v = [
        StateView(1, "w/0", 0, "", last_class=None),
        StateView(2, "w/0", 1, "", last_class="working", repeats=1),
        StateView(3, "w/0", 2, "", last_class="failed", calls=1),
        StateView(4, "w/0", 3, "", last_class="working", repeats=2, calls=2),
        StateView(5, "w/0", 4, "", last_class="unknown_tool", context_tokens=5000, calls=1),
    ]
    assert list(TurnZeroThen(("repeat",)).decide(v)) == [1, 1, 0, 1, 0]
    assert list(TurnZeroThen(("loop", "failed")).decide(v)) == [1, 0, 1, 1, 0]
    assert list(TurnZeroThen(("repeat",), max_calls=2).decide(v)) == [1, 1, 0, 0, 0]
    assert list(TurnZeroThen(("context:4000",), turn0=False).decide(v)) == [0, 0, 0, 0, 1]
    assert list(TurnZeroThen(("unknown_tool", "turn:2")).decide(v)) == [1, 0, 1, 0, 1]


def test_build_policy_names(tmp_path):
    from helpdp.policies import TriggerRandomised, TurnZeroThen, build_policy

    assert isinstance(build_policy("never"), Never) and isinstance(build_policy("always"), Always)
    assert isinstance(build_policy("turn0"), TurnZero)
    assert build_policy("turns:0,2").turns == (0, 2)
    assert isinstance(build_policy("after:failure"), AfterFailure)
    assert isinstance(build_policy("turn0+after:failure"), TurnZeroOrAfterFailure)
    p = build_policy("turn0+after:repeat,failed+max:2")
    assert isinstance(p, TurnZeroThen) and p.events == ("repeat", "failed") and p.max_calls == 2
    assert not build_policy("after:loop").turn0
    assert build_policy("random:0.3", seed=4) == RandomStates(0.3, seed=4)
    assert build_policy("random_episodes:0.2") == RandomEpisodes(0.2)
    t = build_policy({"kind": "triggers", "base": "turn0", "events": ["repeat"], "q": 0.25})
    assert isinstance(t, TriggerRandomised) and t.spec()["base"] == "turn0"
    assert build_policy(t.spec()).spec() == t.spec()
    for bad in ("sometimes", "turn0+after:loops", "random:x", "turn0+after:repeat+max:0"):
        with pytest.raises(ValueError):
            build_policy(bad)
    sel = tmp_path / "selected.json"
    sel.write_text('{"policy": {"kind": "never"}}')
    with pytest.raises(ValueError, match="needs load_json"):
        build_policy(str(sel))
    assert build_policy(str(sel), load_json=lambda p, seed: Never()) == Never()
    with pytest.raises(ValueError, match="mixes per episode"):
        TriggerRandomised(RandomEpisodes(0.5), ("repeat",), 0.5)


def test_trigger_randomised_probabilities_and_draws():
    from helpdp.policies import TriggerRandomised

    pol = TriggerRandomised("turn0", ("failed",), 0.3, seed=2)
    v = [
        StateView(
            e * 10 + t,
            "w/0",
            t,
            "",
            episode_id=e,
            last_class=None if t == 0 else ("failed" if t == 2 else "working"),
        )
        for e in range(2000)
        for t in range(4)
    ]
    probs = pol.action_probs(v, 2).reshape(2000, 4, 2)[0]
    assert np.allclose(probs[:, 1], [1.0, 0.0, 0.3, 0.0])
    d = pol.decide(v).reshape(2000, 4)
    assert (d[:, 0] == 1).all() and (d[:, [1, 3]] == 0).all()
    assert abs(d[:, 2].mean() - 0.3) < 0.03  # the draws have the design's rate
    assert np.array_equal(
        d, pol.decide(v).reshape(2000, 4)
    )  # a pure function of (seed, episode, turn)


def _two_stage():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import two_stage

    return two_stage


def test_is_with_the_mixture_behaviour_is_unbiased_for_a_trigger_rule():
    """Stage 2 alone and stage 1 + stage 2 merged: plain IS of "turn 0, then after a
    failed turn" (which deviates from the base only at the triggers) averages to the
    exact value over 60 fixed-seed collections (within 3.5 standard errors)."""
    from helpdp.ope import estimate, load_logged
    from helpdp.policies import TriggerRandomised, TurnZeroThen

    ts = _two_stage()
    world = ts.EventWorld()
    b = TurnZeroThen(("failed",))
    exact = world.exact(b)[0]
    design = TriggerRandomised("turn0", ("failed",), 0.5)
    alone, merged = [], []
    for r in range(60):
        s2 = ts.collect_design(world, design, 10, seed=r)
        alone.append(ts.is_values(load_logged(s2), b)[0])
        m = load_logged(ts.join(world.collect(seeds=2, seed=r), s2))
        assert m.mix.shape[1] == 8 and len(m.designs) == 1  # 7 trigger vectors + the design
        merged.append(ts.is_values(m, b)[0])
    for vals in (np.array(alone), np.array(merged)):
        se = vals.std(ddof=1) / np.sqrt(len(vals))
        assert abs(vals.mean() - exact) < 3.5 * se and se < 0.03
    # the estimator of helpdp.ope reads the same mixture
    est = estimate(b, m, estimators=("is",), n_boot=10)
    assert est.get("is", "SR")[0] == pytest.approx(merged[-1], abs=1e-9)


def test_logged_p_help_must_match_the_design():
    from helpdp.data import from_frames
    from helpdp.ope import load_logged
    from helpdp.policies import TriggerRandomised

    ts = _two_stage()
    world = ts.EventWorld()
    ds = ts.collect_design(world, TriggerRandomised("turn0", ("failed",), 0.5), 3, seed=1)
    st = ds.steps.copy()
    st.loc[st["t"] == 0, "p_help"] = 0.5  # the base helps at turn 0 with probability 1
    bad = from_frames(ds.manifest, ds.states, ds.transitions, None, episodes=ds.episodes, steps=st)
    with pytest.raises(ValueError, match="p_help 0.5 does not match"):
        load_logged(bad)


def test_policy_spec_rebuilds_every_registry_policy():
    from helpdp.policies import TriggerRandomised, TurnZeroThen, build_policy, policy_spec

    names = [
        "never",
        "always",
        "turn0",
        "turns:0,2",
        "after:failure",
        "turn0+after:failure",
        "turn0+after:repeat",
        "turn0+after:loop+max:2",
        "after:unknown_tool",
        "turn0+after:repeat,failed,unknown_tool+max:3",
        "random:0.3",
        "random_episodes:0.25",
    ]
    views = [
        StateView(t, "w/0", t, "", episode_id=e, last_class=c, repeats=r, calls=n)
        for e in range(20)
        for t, c, r, n in [
            (0, None, 0, 0),
            (1, "working", 1, 1),
            (2, "failed", 2, 2),
            (3, "unknown_tool", 0, 1),
        ]
    ]
    for name in names:
        pol = build_policy(name, seed=3)
        assert policy_spec(pol) == name
        back = build_policy(policy_spec(pol), seed=3)
        assert (back.decide(views) == pol.decide(views)).all(), name
    # built directly, without a spec: the canonical name
    assert policy_spec(TurnZeroThen(("loop", "failed"), 2)) == "turn0+after:loop,failed+max:2"
    assert policy_spec(TurnZeroThen(("context:4000",), turn0=False)) == "after:context:4000"
    assert build_policy("after:context:4000").events == ("context:4000",)
    assert policy_spec(AtTurns((3, 0))) == "turns:0,3"
    assert policy_spec(RandomStates(0.1)) == "random:0.1"
    trig = TriggerRandomised("turn0", ("failed",), 0.5)
    assert policy_spec(trig) == trig.spec()
    assert policy_spec(ScorePolicy(lambda v: np.zeros(len(v)), 0.0)) is None
