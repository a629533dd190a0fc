"""Held-out verdicts with tasks as the unit (helpdp.evaluate.stats.task_ci, compare's
``*_tasks`` keys) and the slim episode table that ships beside each verdict."""

import numpy as np
import pandas as pd
import pytest

from helpdp.evaluate.stats import compare, episode_table, read_episode_table, task_ci


def _results():
    """The 81-pair verdict's shape: 3 tasks x 27 seeds; turns 0,3 beats turn 0 on one task
    only (12 of 27 seeds), the others tie."""
    rows = []
    for task, (k_rule, k_mine) in {"a/0": (0, 0), "b/0": (21, 21), "b/1": (0, 12)}.items():
        for s in range(27):
            for pol, k, calls in (("rule: turns 0", k_rule, 1), ("rule: turns 0,3", k_mine, 2)):
                rows.append(
                    {"policy": pol, "split": "test", "task_id": task, "seed": 300 + s,
                     "pair": f"{task}#{300 + s}", "success": int(s < k), "expert_calls": calls}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_task_ci_restates_the_verdict_about_tasks():
    r = _results()
    out = compare(r, "rule: turns 0,3", "test", [])
    m, lo, hi = out["vs rule: turns 0"]
    assert round(m, 3) == 0.148 and lo > 0  # for these tasks: settled
    t = out["vs rule: turns 0_tasks"]
    assert (round(t["lo"], 2), round(t["hi"], 2), t["df"], t["G"]) == (-0.49, 0.79, 2.0, 3)
    assert t["differ"] == 1 and t["top_share"] == 1.0 and not t["statement"]
    assert t["note"] == "no statement about other tasks (1 of 3 tasks differ)"
    # five tasks that differ: a statement is made
    d = np.r_[np.ones(5), np.zeros(5)]
    assert task_ci(d, np.r_[np.arange(5), np.arange(5)])["statement"]


def test_episode_table_round_trip(tmp_path):
    r = _results()
    t = episode_table(r)
    assert list(t.columns) == ["policy", "split", "task_id", "seed", "success", "expert_calls"]
    t.to_parquet(tmp_path / "episodes.parquet")
    back = read_episode_table(tmp_path / "episodes.parquet")
    a = compare(r, "rule: turns 0,3", "test", [])
    b = compare(back, "rule: turns 0,3", "test", [])
    assert a["vs rule: turns 0"] == b["vs rule: turns 0"]
    assert a["vs rule: turns 0_tasks"] == b["vs rule: turns 0_tasks"]
    t.loc[3, "success"] = 2
    t.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad.parquet: row 3: success is not 0 or 1"):
        read_episode_table(tmp_path / "bad.parquet")


def test_the_shipped_real_verdict_recomputes(tmp_path):
    """docs/results/real-actor.md's newest entry, from its shipped per-task counts
    (docs/results/tables/real-heldout-81pairs-counts.parquet): turns 0,3 - turn 0 for tasks
    like these +0.148 [-0.489, +0.786]; against the rules' hull at equal spend +0.028
    [-0.094, +0.151]; 1 of 3 tasks differs, so no statement about other tasks."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    table = root / "docs" / "results" / "tables" / "real-heldout-81pairs-counts.parquet"
    cmd = [sys.executable, "bench/real_actor.py", "--eval-report", "--from-table", str(table)]
    out = subprocess.run(cmd + ["--pool"], cwd=root, capture_output=True, text=True, check=True)
    text = out.stdout
    assert (
        "| rule: turns 0,3 (1.44) | rule: turn 0 | +0.148 [-0.489, +0.786] (df 2.0) | 1 of 3"
        in text
    )
    assert "+0.028 [-0.094, +0.151] (df 2.0) | 1 of 3 (100%) | 0.153 | 10 |" in text
    assert "no statement about other tasks (1 of 3 tasks differ)" in text


def test_an_evaluation_names_its_held_out_tasks_by_id():
    """``helpdp.evaluate task_ids=[...]`` runs the held-out tasks of a split chosen by
    world; without it the collection's own filter holds, cut to the worlds evaluated
    (the train worlds' ids do not follow an evaluation into the test worlds)."""
    from collect.config import collect_config
    from helpdp.evaluate.config import EvaluateConfig
    from helpdp.evaluate.harness import rerun_config

    rec = collect_config(
        ["out=x", "schedule.task_ids=[a_1/0,b_1/2]", "schedule.scenarios=[a_1,b_1]"]
    )
    ids = lambda **kw: rerun_config(rec, EvaluateConfig(**kw), 1).schedule.task_ids  # noqa: E731
    assert ids() == ["a_1/0", "b_1/2"]
    assert ids(task_ids=["c_1/4"], scenarios=["c_1"]) == ["c_1/4"]
    assert ids(scenarios=["b_1"]) == ["b_1/2"]
    assert ids(scenarios=["c_1"]) is None
    plain = collect_config(["out=x"])
    assert rerun_config(plain, EvaluateConfig(scenarios=["c_1"]), 1).schedule.task_ids is None
