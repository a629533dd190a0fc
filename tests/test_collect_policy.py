"""Evaluating a budgeted help policy in the environments (collect policy=...)."""

import json

import numpy as np
import pandas as pd
import pytest

from collect.collector import collect, collect_config
from collect.policy import coverage, evaluation_line
from helpdp.policies import StateView, TablePolicy

SMALL = [
    "schedule.scenarios=[smart_home_1]",
    "schedule.max_tasks=3",
    "schedule.probabilities=[0.0]",
    "schedule.seeds=[0,1]",
    "state_key=db",
    "progress=false",
    "executor.workers=1",
]


def _write_search(path, rows, more_rows=None, weight=None):
    path.mkdir()
    mixture = None
    if more_rows is not None:
        mixture = {
            "r": 0.1,
            "weight_more_help": weight,
            "more_help": {"expected_usage": 2.0, "expected_success": 0.9},
            "less_help": {"expected_usage": 0.0, "expected_success": 0.5},
        }
        pd.DataFrame(more_rows).to_parquet(path / "policy_more_help.parquet")
    pd.DataFrame(rows).to_parquet(path / "policy.parquet")
    (path / "search.json").write_text(
        json.dumps(
            {
                "budget": 1.0,
                "r": 0.1,
                "expected_usage": 1.0,
                "expected_success": 0.7,
                "mixture": mixture,
            }
        )
    )


def test_policy_drives_the_expert_calls(tmp_path):
    data = collect(collect_config([f"out={tmp_path / 'data'}", *SMALL])).out
    states = pd.read_parquet(data / "states.parquet")
    live = states.loc[~states["terminal"], "state_id"].to_numpy()
    starts = set(states.loc[states["is_start"], "state_id"])
    # help at every state of the data: the episodes (same seeds) start in those states, so
    # each calls the expert at its first turn; after that the help changed the path, the
    # states are new to the policy and get nohelp
    _write_search(tmp_path / "help", {"state_id": live, "action": np.ones(len(live), np.int8)})
    ev = collect(
        collect_config([f"out={tmp_path / 'ev'}", f"policy={tmp_path / 'help'}", *SMALL])
    ).out
    steps = pd.read_parquet(ev / "steps.parquet")
    first = steps[steps["t"] == 0]
    assert set(first["state_id"]) <= starts and (first["action"] == 1).all()
    assert (steps.loc[steps["t"] > 0, "action"] == 0).mean() > 0.5
    # an empty policy never calls
    _write_search(
        tmp_path / "none", {"state_id": np.zeros(0, np.int64), "action": np.zeros(0, np.int8)}
    )
    ev0 = collect(
        collect_config([f"out={tmp_path / 'ev0'}", f"policy={tmp_path / 'none'}", *SMALL])
    ).out
    assert pd.read_parquet(ev0 / "episodes.parquet")["expert_calls"].sum() == 0


def test_mixture_is_drawn_per_episode(tmp_path):
    _write_search(
        tmp_path / "mix", {"state_id": [1], "action": [0]}, {"state_id": [1], "action": [1]}, 0.3
    )
    pol = TablePolicy.load(tmp_path / "mix")
    picks = [pol.decide([StateView(1, "w/0", 0, "", episode_id=i)])[0] for i in range(2000)]
    assert abs(np.mean(picks) - 0.3) < 0.04
    # the draw is per episode: every state of one episode follows the same table
    assert {pol.table_for(7) is pol.table_for(7) for _ in range(3)} == {True}
    episodes = pd.DataFrame({"success": [True, False], "expert_calls": [1, 0]})
    line = evaluation_line(pol, episodes, pd.DataFrame({"state_id": [1, 1, 1, 2]}))
    assert "success 0.500" in line and "E[S] 0.700 predicted" in line
    assert "coverage 75.0%" in line and "warning" not in line
    low = evaluation_line(pol, episodes, pd.DataFrame({"state_id": [1, 2, 3]}))
    assert "coverage 33.3%" in low and "warning: the policy knows only 33.3%" in low
    assert coverage(pol, pd.DataFrame({"state_id": [2]})) == 0.0


def test_the_candidates_design_runs_each_candidate_on_its_own_episodes(tmp_path, capsys):
    from collect.cli import run_cli
    from collect.policy import candidate_rates, load_help_policy
    from helpdp.policies import AtTurns, Never
    from helpdp.select import policy_json

    files = []
    for name, pol in (("never", Never()), ("turn0", AtTurns((0,)))):
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps({"policy": policy_json(pol)}))
        files.append(str(f))
    cands = f"policy=[{files[0]},{files[1]}]"
    cfg = collect_config(
        [
            f"out={tmp_path / 'ev'}",
            cands,
            "collect/schedule=candidates",
            *SMALL,
            "schedule.seeds=[0,1,2,3]",
        ]
    )
    assert cfg.schedule.probabilities == [0.0]
    run_cli(cfg)
    episodes = pd.read_parquet(tmp_path / "ev" / "episodes.parquet")
    steps = pd.read_parquet(tmp_path / "ev" / "steps.parquet")
    policy = load_help_policy(files)
    assert policy.name == "candidates: never, rule: turns 0"
    pick = np.array([policy._pick(int(e)) for e in episodes["episode_id"]])
    assert set(pick) == {0, 1}  # 12 episodes: both drawn
    calls = episodes.set_index("episode_id")["expert_calls"]
    first = steps[steps["t"] == 0].set_index("episode_id")["action"]
    for eid, k in zip(episodes["episode_id"], pick):
        assert calls[eid] == k and first[eid] == k  # never: 0 calls; turn 0: exactly one, first
    rates = candidate_rates(policy, episodes)
    assert rates["episodes"].tolist() == [int((pick == 0).sum()), int((pick == 1).sum())]
    assert rates["U"].tolist() == [0.0, 1.0]
    out = capsys.readouterr().out
    assert "the candidates, each on its own episodes" in out and "rule: turns 0:" in out
    with pytest.raises(ValueError, match="at least two"):
        load_help_policy([files[0]])
    with pytest.raises(FileNotFoundError, match="neither the out= of python -m helpdp.search"):
        load_help_policy(str(tmp_path))
