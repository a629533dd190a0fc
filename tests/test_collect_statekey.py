"""State keys: ids stable across runs and machines, ``history`` a tree, ``db`` merging
paths that reach the same database state, ``db_help`` splitting them by remembered help."""

from __future__ import annotations

import pandas as pd
import pytest

import helpdp
from collect.collector import collect, collect_config
from collect.statekey import (
    DbHelpKeys,
    DbKeys,
    HistoryKeys,
    canonical_action,
    id_of,
    make_keys,
)

TABLES = ("states", "transitions", "episodes", "steps")


def test_keys_are_pure_functions_of_content():
    h = HistoryKeys()
    s0, c0 = h.start("w/1")
    assert (s0, c0) == h.start("w/1") and s0 != h.start("w/2")[0]
    el = {
        "help": 0,
        "help_text": "",
        "action": {"kind": "list_tools", "args": None},
        "observation": "x",
    }
    s1, c1 = h.step(c0, "w/1", 1, el)
    assert (s1, c1) == h.step(c0, "w/1", 1, dict(el))
    assert s1 != h.step(c0, "w/1", 1, {**el, "help": 1})[0]
    t_ok = h.terminal(c1, "w/1", 2, el, "final", "complete")
    assert t_ok != h.terminal(c1, "w/1", 2, el, "final", "others") != h.step(c1, "w/1", 2, el)[0]
    d = DbKeys()
    a = d.step(b"", "w/1", 3, {"observation": "o"}, "digest")[0]
    assert a == d.step(b"other chain", "w/1", 3, {"observation": "o", "help": 1}, "digest")[0]
    assert a != d.step(b"", "w/1", 4, {"observation": "o"}, "digest")[0]
    assert a != d.step(b"", "w/1", 3, {"observation": "o"}, "digest2")[0]
    assert -(2**63) <= id_of(b"\xff" * 32) < 0
    with pytest.raises(ValueError):
        make_keys("tree")
    call = {"kind": "call_tool", "tool_name": "t", "arguments": {"a": 1}, "failure": None}
    assert canonical_action(call, "thinking...\n<tool_call>...") == canonical_action(
        call, "other words"
    )


def test_db_help_key_tracks_the_age_of_the_latest_help():
    k = DbHelpKeys(2)
    s0, c0 = k.start("w/1", "d0")
    assert c0[-1] == 0 and s0 != DbKeys().start("w/1", "d0")[0]
    plain, helped = {"help": 0, "observation": "o"}, {"help": 1, "observation": "o"}

    def walk(helps):
        chain, ages, ids = c0, [], []
        for depth, h in enumerate(helps, start=1):
            sid, chain = k.step(chain, "w/1", depth, helped if h else plain, "d")
            ages.append(chain[-1])
            ids.append(sid)
        return ages, ids

    # age 1 after help, growing each turn, forgotten (0) past the window of 2
    assert walk([1, 0, 0, 0])[0] == [1, 2, 0, 0]
    assert walk([0, 1, 1, 0])[0] == [0, 1, 1, 2]
    # same world, same turn: the helped path's state differs while the help is remembered,
    # and merges with the never-helped path once it is forgotten
    (_, a), (_, b) = walk([1, 0, 0, 0]), walk([0, 0, 0, 0])
    assert [x != y for x, y in zip(a, b)] == [True, True, False, False]
    # the key is the db key's content plus the age: one byte of chain after the digest
    assert len(c0) == 33
    # window 0: help is never remembered, so helped and unhelped paths merge at once
    k0 = DbHelpKeys(0)
    c = k0.start("w/1", "d0")[1]
    assert k0.step(c, "w/1", 1, helped, "d")[0] == k0.step(c, "w/1", 1, plain, "d")[0]
    with pytest.raises(ValueError, match="help_window"):
        DbHelpKeys(-1)
    assert isinstance(make_keys("db_help", 5), DbHelpKeys) and make_keys("db_help", 5).window == 5


def _run(out, key, workers, work):
    cfg = collect_config(
        [
            f"out={out}",
            f"state_key={key}",
            f"executor.workers={workers}",
            "executor.shard_size=4",
            "schedule.scenarios=[workflow_automation_1,smart_home_1]",
            "schedule.tasks=[0,1,4]",
            "schedule.probabilities=[0.0,0.5,1.0]",
            "schedule.seeds=[0,1]",
            "progress=false",
            f"env.work_root={work}",
        ]
    )
    return collect(cfg)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    return {
        (key, w): (_run(root / f"{key}-{w}", key, w, root / "work"), root / f"{key}-{w}")
        for key, w in [("history", 1), ("history", 2), ("db", 1), ("db", 2), ("db_help", 1)]
    }


def test_ids_are_stable_across_runs(runs):
    for key in ("history", "db"):
        (_, a), (_, b) = runs[(key, 1)], runs[(key, 2)]
        for name in TABLES:
            assert (a / f"{name}.parquet").read_bytes() == (b / f"{name}.parquet").read_bytes(), (
                key,
                name,
            )
        helpdp.load_dataset(a)


def test_db_key_merges_paths_to_the_same_database_state(runs):
    (rh, hist), (rd, db) = runs[("history", 1)], runs[("db", 1)]
    assert rh.steps == rd.steps and rd.states < rh.states
    dsh, dsd = helpdp.load_dataset(hist), helpdp.load_dataset(db)
    # same episodes, same steps: pair up the state each key gave every step
    sh = dsh.steps.set_index(["episode_id", "t"])["next_state_id"]
    sd = dsd.steps.set_index(["episode_id", "t"])["next_state_id"]
    pair = pd.DataFrame({"h": sh, "d": sd.reindex(sh.index)})
    assert pair["d"].notna().all()
    # every history state maps to one db state (db only merges), and some db states
    # hold several histories (e.g. a helped and an unhelped path with the same calls)
    assert pair.groupby("h")["d"].nunique().max() == 1
    merged = pair.groupby("d")["h"].nunique()
    assert (merged > 1).sum() > 10
    # the db graph is a DAG with more data per state
    assert dsd.mdp.acyclic
    per_state = dsd.transitions.groupby("state_id")["count"].sum().mean()
    assert per_state > dsh.transitions.groupby("state_id")["count"].sum().mean()
    # a merged state has one task and one depth
    states = dsd.states.set_index("state_id")
    depth_of_step = dsd.steps.assign(depth=dsd.steps["t"] + 1)
    assert (
        states.loc[depth_of_step["next_state_id"], "depth"].to_numpy() == depth_of_step["depth"]
    ).all()


def test_db_help_key_splits_db_states_by_the_help_the_actor_remembers(runs):
    (rd, db), (rc, ctx) = runs[("db", 1)], runs[("db_help", 1)]
    assert rc.steps == rd.steps and rd.states < rc.states
    dsd, dsc = helpdp.load_dataset(db), helpdp.load_dataset(ctx)
    assert dsc.mdp.acyclic
    steps = dsd.steps.sort_values(["episode_id", "t"])
    # the age of the latest help at each next state (window 3, the default)
    ages = []
    for _, ep in steps.groupby("episode_id", sort=False):
        age = 0
        for a in ep["action"]:
            age = 1 if a else (age + 1 if age else 0)
            age = age if age <= 3 else 0
            ages.append(age)
    key = steps.assign(age=ages).set_index(["episode_id", "t"])
    key["c"] = dsc.steps.set_index(["episode_id", "t"])["next_state_id"].reindex(key.index)
    nonterminal = ~dsd.states.set_index("state_id").loc[key["next_state_id"], "terminal"].to_numpy()
    key = key[nonterminal]
    # (db state, age) and the db_help state name each other one to one
    assert key.groupby(["next_state_id", "age"])["c"].nunique().max() == 1
    assert key.groupby("c")[["next_state_id", "age"]].nunique().max().max() == 1
    # and some db states are split: a helped and an unhelped path that met
    assert (key.groupby("next_state_id")["c"].nunique() > 1).sum() > 5
