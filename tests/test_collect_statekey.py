"""State keys: ids stable across runs and machines, ``history`` a tree, ``db`` merging
paths that reach the same database state."""

from __future__ import annotations

import pandas as pd
import pytest

import helpdp
from collect.collector import collect, collect_config
from collect.statekey import (
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
        for key in ("history", "db")
        for w in (1, 2)
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
