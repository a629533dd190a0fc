"""helpdp.select: candidates fitted on one fold of tasks, valued off-policy on the other."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpdp.policies import AtTurns, Never, StateView
from helpdp.select import MixturePolicy, SelectConfig, _hull_at, load_policy, policy_json, select
from helpdp.synthetic import HelpWorld

WORLD = HelpWorld(difficulty=(0.1, 0.3, 0.5, 0.2, 0.4, 0.25))


def test_hull_picks_a_mixture_that_spends_the_budget():
    pts = pd.DataFrame({"U": [0.0, 1.0, 2.0, 1.5], "SR": [0.5, 0.75, 0.9, 0.72]})
    pick = _hull_at(pts, 1.5)
    assert sorted(i for _, i in pick) == [1, 2]
    assert [w for w, _ in sorted(pick, key=lambda x: x[1])] == pytest.approx([0.5, 0.5])
    assert _hull_at(pts, 2.5) == [(1.0, 2)]
    assert _hull_at(pts.assign(U=pts["U"] + 1), 0.5) is None


def test_selection_on_a_world_with_known_values(tmp_path):
    ds = WORLD.collect(seeds=20, seed=5)
    cfg = SelectConfig(
        splits=["train"], rungs=["turn", "turn_age"], rules=[[0], [0, 3], [0, 5]], n_boot=100,
        out=str(tmp_path),
    )  # fmt: skip
    rec = select(ds, cfg, 1.0, log=lambda *_: None)
    cands = rec.pop("_candidates")
    rec.pop("_per_fold")
    assert set(cands["candidate"]) == {
        "never",
        "rule: turns 0",
        "rule: turns 0,3",
        "rule: turns 0,5",
        "turn",
        "turn_age",
    }
    # 6 tasks: fewer than min_tasks, so the folds' episode bootstraps; differences from turn 0
    assert rec["ope"]["unit"] == "episode" and rec["ope"]["reference"] == "rule: turns 0"
    c = cands.set_index("candidate")
    assert c.loc["rule: turns 0", "dSR"] == 0.0 and c.loc["rule: turns 0", "supported"]
    # a call at turn 5 (the last turn): few agreeing episodes get there without help
    assert c.loc["rule: turns 0,5", "support"] < cfg.min_support
    assert not c.loc["rule: turns 0,5", "supported"]
    assert all(c.loc[p["candidate"], "supported"] for p in rec["components"])
    assert {r["candidate"] for r in rec["candidates"]} == set(c.index)
    (tmp_path / "selected.json").write_text(json.dumps(rec))
    pol = load_policy(tmp_path)
    assert pol.name.startswith("selected (budget 1): ")
    s, u = WORLD.exact(pol)
    s_rule, _ = WORLD.exact(AtTurns((0,)))  # the best rule at one call
    assert u <= 1.0 + 0.1  # the budget holds in the world, not only in the estimate
    assert s >= s_rule - 0.02
    o = rec["ope"]
    assert o["SR_lo"] <= s <= o["SR_hi"]
    assert rec["insample_model"]["expected_usage"] == pytest.approx(1.0)
    # what helpdp.search prints is the model's in-sample value, above the policy's exact one
    assert rec["insample_model"]["expected_success"] > s


def test_estimators_that_do_not_cover_are_refused(tmp_path):
    for est in ("snis", "dm"):
        with pytest.raises(ValueError, match=f"estimator: '{est}': .*coverage"):
            select(None, SelectConfig(estimator=est, out=str(tmp_path)), 1.0)
    with pytest.raises(ValueError, match="estimator: 'x': not one of"):
        select(None, SelectConfig(estimator="x", out=str(tmp_path)), 1.0)


def test_policy_json_round_trip_and_errors(tmp_path):
    mix = MixturePolicy([(0.4, Never()), (0.6, AtTurns((0, 3)))], seed=3)
    views = [StateView(1, "t/0", t, "", episode_id=e) for e in range(100) for t in (0, 3)]
    (tmp_path / "selected.json").write_text(json.dumps({"budget": 1.0, "policy": policy_json(mix)}))
    back = load_policy(tmp_path / "selected.json", seed=3)
    assert (back.decide(views) == mix.decide(views)).all()
    share = mix.decide(views)[::2].mean()  # turn 0: helped in the episodes drawing the rule
    assert 0.45 < share < 0.75
    assert [w for w, _ in back.components()] == pytest.approx([0.4, 0.6])
    (tmp_path / "bad.json").write_text(json.dumps({"policy": {"kind": "table"}}))
    with pytest.raises(ValueError, match="field 'kind': 'table' is not never, rule"):
        load_policy(tmp_path / "bad.json")
    (tmp_path / "nopol.json").write_text("{}")
    with pytest.raises(ValueError, match="no field 'policy'"):
        load_policy(tmp_path / "nopol.json")
    with pytest.raises(FileNotFoundError, match="helpdp.select"):
        load_policy(tmp_path / "missing")
    with pytest.raises(ValueError, match="sum to 1"):
        MixturePolicy([(0.5, Never())])


def test_run_select_on_the_demo(tmp_path, capsys):
    from helpdp.select import run_select

    cfg = SelectConfig(
        budget=[1.0], rungs=["turn_age"], rules=[[0]], n_boot=30, out=str(tmp_path)
    )  # fmt: skip
    (rec,) = run_select(cfg)
    out = capsys.readouterr().out
    assert "budget 1: selected " in out and "in-sample model (helpdp.search" in out
    saved = json.loads((tmp_path / "budget=1" / "selected.json").read_text())
    assert saved["policy"] == rec["policy"]
    per_fold = pd.read_csv(tmp_path / "budget=1" / "candidates.csv")
    assert set(per_fold["fold"]) == {0, 1}
    assert np.isfinite(per_fold["SR"]).all()
    with pytest.raises(ValueError, match="rungs: unknown rung 'x'"):
        run_select(SelectConfig(rungs=["x"], out=str(tmp_path)))
