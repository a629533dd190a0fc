"""A collection of the demo worlds with the simulated actor: the written dataset keeps the
contract, helpdp loads and searches it, the simulated actor behaves like a weak agent,
the history key gives a tree, and the demo is byte-for-byte reproducible."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

import helpdp
from collect.collector import collect, collect_config, collect_demo

TABLES = ("states", "transitions", "episodes", "steps")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("collect")
    cfg = collect_config(
        [
            f"out={root / 'ds'}",
            "schedule.probabilities=[0.0,0.5,1.0]",
            "schedule.seeds=[0,1]",
            "executor.workers=2",
            "progress=false",
            f"env.work_root={root / 'work'}",
        ]
    )
    result = collect(cfg)
    return root / "ds", result


def test_dataset_keeps_the_contract(small):
    out, result = small
    ds = helpdp.load_dataset(out)
    assert result.episodes == 3 * 10 * 3 * 2
    manifest = json.loads((out / "manifest.json").read_text())
    assert (
        manifest["actions"] == ["nohelp", "oracle"] and manifest["format"] == helpdp.FORMAT_VERSION
    )
    assert manifest["gamma"] == 1.0
    src = manifest["source"]
    assert src["actor"] == "simulated" and src["state_key"] == "history"
    assert src["versions"]["python"] and src["versions"]["pyarrow"]
    assert "git_sha" in src and src["config"]["schedule"]["seeds"] == [0, 1]
    text = json.dumps(src)
    assert str(out.parent) not in text and "/tmp" not in text  # no machine paths
    schema = {n: pq.read_schema(out / f"{n}.parquet") for n in TABLES}
    assert str(schema["states"].field("state_id").type) == "int64"
    assert str(schema["states"].field("depth").type) == "int32"
    assert str(schema["transitions"].field("action").type) == "int8"
    assert str(schema["transitions"].field("count").type) == "int64"
    ep = ds.episodes
    for col in [
        "episode_id",
        "task_id",
        "split",
        "seed",
        "trigger_p",
        "steps",
        "success",
        "reward",
        "reward_type",
        "expert_calls",
        "blind_calls",
        "recovery_calls",
        "format_errors",
        "tokens",
        "outcome",
        "p_oracle",
        "calls_oracle",
    ]:
        assert col in ep.columns, col
    assert (ep["blind_calls"] + ep["recovery_calls"] == ep["expert_calls"]).all()
    assert set(ep["split"]) == {"train", "validation", "test"}
    assert ep.groupby("task_id")["split"].nunique().max() == 1
    assert (ep.loc[ep.success, "outcome"] == "complete").all()
    assert (ep["tokens"] > 0).all()
    st = ds.steps
    assert len(st) == result.steps == ep["steps"].sum()
    assert st.groupby("episode_id")["t"].apply(lambda t: list(t) == list(range(len(t)))).all()
    # the counts are the steps
    tr = ds.transitions
    assert tr["count"].sum() == len(st)
    # schedule: p=0 never helps, p=1 always helps (the oracle has no call limit)
    merged = st.merge(ep[["episode_id", "trigger_p"]], on="episode_id")
    help_rate = merged.groupby("trigger_p")["action"].apply(lambda a: (a != 0).mean())
    assert help_rate[0.0] == 0 and help_rate[1.0] == 1 and 0.3 < help_rate[0.5] < 0.7
    # every episode starts at a start state and ends in a terminal one
    states = ds.states.set_index("state_id")
    first = st.groupby("episode_id").head(1)
    last = st.groupby("episode_id").tail(1)
    assert states.loc[first["state_id"], "is_start"].all()
    assert states.loc[last["next_state_id"], "terminal"].all()
    ok = states.loc[last["next_state_id"], "success"].to_numpy()
    assert (ok == ep.set_index("episode_id").loc[last["episode_id"], "success"].to_numpy()).all()
    # texts: what the actor saw, the task first
    text = states["text"]
    assert (text.str.len() > 0).all()
    tasks = {r.task_id: r for r in ep.itertuples()}
    assert tasks  # non-empty


def test_helpdp_search_runs_on_the_collection(small, tmp_path):
    out, _ = small
    cmd = [sys.executable, "-m", "helpdp.search", f"data={out}", "budget=1.0", f"out={tmp_path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "search.json").read_text())
    assert res["expected_usage"] <= 1.0 + 1e-9
    assert 0 < res["expected_success"] <= 1
    policy = pd.read_parquet(tmp_path / "policy.parquet")
    assert len(policy) > 0


def test_history_key_gives_a_tree(small):
    out, _ = small
    ds = helpdp.load_dataset(out)
    tr = ds.transitions
    parents = tr.groupby("next_state_id")[["state_id", "action"]].apply(
        lambda g: len(g.drop_duplicates())
    )
    assert parents.max() == 1
    depth = ds.states.set_index("state_id")["depth"]
    assert (
        depth.loc[tr["next_state_id"]].to_numpy() == depth.loc[tr["state_id"]].to_numpy() + 1
    ).all()
    assert not (ds.states["is_start"] & (ds.states["depth"] != 0)).any()
    # start states: one per task, shared by all its episodes
    starts = ds.states[ds.states.is_start]
    assert starts["task_id"].is_unique and len(starts) == 30


def test_simulated_actor_is_a_weak_agent(small):
    out, _ = small
    ds = helpdp.load_dataset(out)
    ep, st = ds.episodes, ds.steps
    by_p = ep.groupby("trigger_p")["success"].mean()
    assert by_p[0.0] < by_p[0.5] < by_p[1.0]
    assert by_p[1.0] - by_p[0.0] > 0.25
    assert 0.2 < by_p[0.0] < 0.75  # neither hopeless nor solved
    # harder tasks (more reference calls) fail more often without help
    alone = ep[ep.trigger_p == 0.0]
    assert (
        alone[alone.task_idx <= 2].success.mean() > alone[alone.task_idx >= 7].success.mean() + 0.2
    )
    # format errors fall as the episode proceeds
    early, late = st[st.t <= 1]["format_error"].mean(), st[st.t >= 3]["format_error"].mean()
    assert early > 1.5 * late > 0
    # real turns through the real parser and environment
    assert {"list_tools", "call_tool", "final", "invalid"} <= set(st["kind"])
    assert {"invalid_arguments", "unknown_meta_function"} <= set(st["failure"].dropna())
    assert (ep["outcome"] == "format_error").sum() > 0 and (ep["outcome"] == "others").sum() > 0
    # loops: a failed call repeated on the next turn (same tool), without help
    s = st.sort_values(["episode_id", "t"]).reset_index(drop=True)
    nxt = s.groupby("episode_id").shift(-1)
    repeat = (
        s["failure"].notna()
        & (nxt["tool_name"] == s["tool_name"])
        & (nxt["failure"] == s["failure"])
    )
    assert repeat.sum() > 5
    # help after an error counts as recovery
    assert ep["recovery_calls"].sum() > 0 and ep["blind_calls"].sum() > 0


def test_demo_is_byte_identical(tmp_path):
    quick = [
        "schedule.max_tasks=2",
        "schedule.probabilities=[0.0,0.5,1.0]",
        "schedule.seeds=[0,1]",
        "progress=false",
    ]
    a = collect_demo(tmp_path / "a", quick + ["executor.workers=1"])
    b = collect_demo(tmp_path / "b", quick + ["executor.workers=2", "executor.shard_size=3"])
    assert a.episodes == b.episodes == 3 * 2 * 3 * 2
    for name in TABLES:
        assert (tmp_path / "a" / f"{name}.parquet").read_bytes() == (
            tmp_path / "b" / f"{name}.parquet"
        ).read_bytes(), name
    ma = json.loads((tmp_path / "a" / "manifest.json").read_text())
    mb = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert ma["source"]["summary"] == mb["source"]["summary"]
    # the only time in the provenance is the worlds' fixed clock, never the run's own
    clock = ma["source"].pop("clock")
    assert clock["now"] == ma["source"]["config"].pop("clock") == "2025-06-12T12:00:00Z"
    assert not re.search(r"\d{4}-\d{2}-\d{2}|\d\d:\d\d:\d\d", json.dumps(ma["source"]))


def test_rerun_reaggregates_without_collecting(small):
    out, first = small
    before = {n: (out / f"{n}.parquet").read_bytes() for n in TABLES}
    cfg = collect_config(
        [
            f"out={out}",
            "schedule.probabilities=[0.0,0.5,1.0]",
            "schedule.seeds=[0,1]",
            "progress=false",
        ]
    )
    again = collect(cfg)
    assert again.shards_run == 0 and again.shards_total == first.shards_total
    assert {n: (out / f"{n}.parquet").read_bytes() for n in TABLES} == before
    other = collect_config([f"out={out}", "schedule.seeds=[5]", "progress=false"])
    with pytest.raises(RuntimeError, match="another collection"):
        collect(other)
