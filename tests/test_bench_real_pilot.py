"""bench/real_pilot_report.py on hand-made shards: the pairing, the task classes, the
intervals with tasks as the unit and the sizing, numbers checked by hand."""

import hashlib
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import real_pilot_report as rpr  # noqa: E402
from helpdp.intervals import tasks_needed  # noqa: E402


def _shard(root: Path, i: int, task: str, seed: int, p: float, success: bool) -> Path:
    d = root / "shards" / f"{i:06d}"
    d.mkdir(parents=True)
    row = {
        "episode_id": i,
        "task_id": task,
        "scenario": task.split("/")[0],
        "task_idx": int(task.split("/")[1]),
        "seed": seed,
        "trigger_p": [p],
        "success": success,
        "end_reason": "final",
        "expert_calls": int(p > 0),
        "steps": 2,
    }
    pd.DataFrame([row]).to_parquet(d / "episodes.parquet")
    sha = hashlib.sha256((d / "episodes.parquet").read_bytes()).hexdigest()
    (d / "meta.json").write_text(json.dumps({"sha256": {"episodes.parquet": sha}}))
    return d


@pytest.fixture
def pilot(tmp_path):
    # a/0: never solved; b/0: solved with help only (2 of 2); c/0: help solves 1 of 2,
    # no help 1 of 2; d/0 has p=0 of seed 0 only (a stopped run): left out
    outcomes = {
        "a/0": [(0, 0), (0, 0)],
        "b/0": [(0, 1), (0, 1)],
        "c/0": [(1, 0), (0, 1)],
    }
    i = 0
    for task, seeds in outcomes.items():
        for seed, (s0, s1) in enumerate(seeds):
            _shard(tmp_path, i, task, seed, 0.0, bool(s0))
            _shard(tmp_path, i + 1, task, seed, 1.0, bool(s1))
            i += 2
    _shard(tmp_path, i, "d/0", 0, 0.0, True)
    return tmp_path


def test_pairs_classes_and_task_level_intervals(pilot):
    eps, times = rpr.load_pilot(pilot)
    assert len(eps) == 13 and len(times) == 13
    s = rpr.summary(eps, {"a/0": 1, "b/0": 2, "c/0": 2})
    assert s["pairs"] == 6 and s["tasks"] == 3  # d/0's lone episode has no pair
    assert s["kinds"] == {"never": 1, "varies": 2, "always": 0}
    assert s["varying_tasks"] == ["b/0", "c/0"]
    # SR always: task means 0, 1, 0.5 -> mean 0.5, t(2 df) interval cut to [0, 1]
    r = s["sr_always"]
    assert r["mean"] == pytest.approx(0.5) and r["tasks"] == 3
    half = 4.302652729911275 * 0.5 / math.sqrt(3)
    assert r["lo"] == 0.0 and r["hi"] == pytest.approx(min(0.5 + half, 1.0))
    # always - never: task means 0, 1, 0
    assert s["help_effect"]["mean"] == pytest.approx(1 / 3)
    assert s["by_calls"][2] == {"tasks": 2, "sr_never": 0.25, "sr_always": 0.75}


def test_sizing_by_hand(pilot):
    eps, _ = rpr.load_pilot(pilot)
    rows = rpr.sizing(rpr.task_table(rpr.paired(eps)), rpr.paired(eps))
    # the varying tasks pool 2/4 each: sigma_w^2 = 2 * 0.5 * 0.5 = 0.5; their help effects
    # (1 and 0) vary: var 0.5, less their noise (0 and 2 / 2 seeds, mean 0.5) -> 0
    row = next(r for r in rows if (r["share"], r["diverge"], r["seeds"]) == (0.25, 0.3, 8))
    assert row["sd_task"] == pytest.approx(math.sqrt(0.3 * 0.5 / 8))
    assert row["tasks"] == tasks_needed(row["sd_task"], 0.05)
    assert row["episodes_per_policy"] == row["tasks"] * 8
    text = rpr.render(rpr.summary(eps))
    assert "tasks never solved 1, solved in some episodes only 2, always solved 0" in text


def test_a_damaged_shard_is_named(pilot):
    ep = pilot / "shards" / "000002" / "episodes.parquet"
    ep.write_bytes(ep.read_bytes() + b"x")
    with pytest.raises(SystemExit, match="000002/episodes.parquet: missing or not the sha256"):
        rpr.load_pilot(pilot)


def test_json_out_is_refused_when_it_exists(pilot, tmp_path, capsys):
    taken = tmp_path / "mine.json"
    taken.write_text("keep")
    with pytest.raises(SystemExit):
        rpr.main([str(pilot), "--json", str(taken)])
    assert taken.read_text() == "keep"
    fresh = tmp_path / "new.json"
    assert rpr.main([str(pilot), "--json", str(fresh)]) == 0
    assert json.loads(fresh.read_text())["pairs"] == 6


def _eps(rows):
    return pd.DataFrame(rows, columns=["task_id", "p", "success"])


def test_candidates_follow_the_amended_split_rule():
    eps = _eps(
        [("w/0", 0.0, False), ("w/0", 0.0, False), ("w/0", 1.0, True), ("w/0", 1.0, False)]
        + [("w/1", 1.0, True), ("w/1", 1.0, True)]  # unhelped not run: presumed to fail
        + [("w/2", p, True) for p in (0.0, 0.0, 1.0, 1.0)]  # always solved
        + [("w/3", 1.0, False), ("w/3", 1.0, False)]  # never solved
        + [("v/0", 1.0, True), ("v/0", 0.0, True)]  # one seed, both solved: seed 1 to come
        + [("v/1", 0.0, False)]  # no helped episode yet: not a task of the table
    )
    c = rpr.candidates(eps)
    assert sorted(c.index) == ["v/0", "w/0", "w/1", "w/2", "w/3"]
    assert sorted(c.index[c["candidate"]]) == ["w/0", "w/1"]
    assert c.loc["w/1", ["n0", "k0", "n1", "k1"]].tolist() == [0, 0, 2, 2]
    # v/0 is solved in both of its episodes and each arm has run as often: not yet
    assert not c.loc["v/0", "candidate"]


def test_the_split_rule_takes_worlds_in_sha256_order():
    worlds = [f"w{i}" for i in range(6)]
    order = rpr.world_rank(worlds)
    assert order == sorted(worlds, key=lambda w: hashlib.sha256(w.encode()).hexdigest())
    # 5 candidates in each world: 30 test candidates take 6 worlds, all of them
    rows = [(f"{w}/{j}", 1.0, True) for w in worlds for j in range(5)]
    c = rpr.candidates(_eps(rows))
    sp = rpr.choose_splits(c, worlds, min_test=10)
    assert sp["test_worlds"] == order[:2] and sp["test_candidates"] == 10
    assert sp["train_candidates"] == 20 and not sp["extend"]
    # more than half of the candidates in the test worlds: the rule extends the pilot
    sp = rpr.choose_splits(c, worlds, min_test=16)
    assert sp["test_worlds"] == order[:4] and sp["extend"]
    assert rpr.choose_splits(c, worlds, min_test=31)["extend"]  # never enough
    # the lists a collection reads: every candidate in one of them, by its world
    sp = rpr.choose_splits(c, worlds, min_test=10)
    assert sp["train_worlds"] == order[2:]
    assert sp["test_tasks"] == sorted(f"{w}/{j}" for w in order[:2] for j in range(5))
    assert len(sp["train_tasks"]) == 20 and not set(sp["train_tasks"]) & set(sp["test_tasks"])


def test_the_split_record_waits_for_the_whole_helped_arm():
    worlds = [f"w{i}" for i in range(6)]
    one = [(f"{w}/{j}", 1.0, True) for w in worlds for j in range(5)]
    c = rpr.candidates(_eps(one))
    s = {"episodes": 30, "helped": {"episodes": 30, "tasks": 30}}
    s["splits"] = rpr.choose_splits(c, worlds, min_test=10)
    with pytest.raises(ValueError, match="the helped arm holds 30 of 60 episodes"):
        rpr.split_record(s)
    s["helped"]["episodes"] = 60
    rec = rpr.split_record(s)
    assert rec["test_worlds"] == rpr.world_rank(worlds)[:2] and len(rec["train_tasks"]) == 20
    s["splits"] = rpr.choose_splits(c, worlds, min_test=16)
    with pytest.raises(ValueError, match="hold 20 of 30 candidates: the rule extends"):
        rpr.split_record(s)


def test_splits_out_needs_worlds_and_a_complete_arm(pilot, tmp_path, capsys):
    worlds = tmp_path / "worlds"
    worlds.mkdir()
    sols = [{"scenario": t[0], "task_idx": 0, "calls": [{}]} for t in "abcd"]
    (worlds / "gen_solutions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sols))
    out = tmp_path / "splits.json"
    with pytest.raises(SystemExit):
        rpr.main([str(pilot), "--splits", str(out)])
    # the fixture's helped arm is complete (2 seeds of a, b, c), but its 2 candidates
    # cannot give 30 test candidates: nothing is written
    assert rpr.main([str(pilot), "--worlds", str(worlds), "--splits", str(out)]) == 1
    assert "the rule extends the pilot" in capsys.readouterr().err and not out.exists()
