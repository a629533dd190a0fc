"""The collector leaves out a task whose untouched database already passes its verifier
(``python -m collect.awm.check``'s do-nothing check, run before the plan is made) unless
``include_trivial_tasks=true``; the tasks left out are named in one line and in the
manifest's ``skipped_tasks``. The option is not part of the shards' fingerprint (the
plan's episode ids say what it changed), so a collection with no trivial task plans and
resumes as before, and shards planned with the trivial tasks resume with them.

The world: the notes app, task 0 honest (complete once the milk note is added), task 1
trivial (complete while the seed note 'first' is there, as it is before any call).
"""

from __future__ import annotations

import json

import pandas as pd
from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world

from collect.collector import collect, collect_config
from collect.config import source_config
from collect.plan import fingerprint_config, plan_shards

TRIVIAL_VERIFIER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    rows = sqlite3.connect(final_db_path).execute("SELECT body FROM notes").fetchall()
    return {"result": "complete" if ("first",) in rows else "others"}
"""
MILK_CALL = {"tool_name": "add_note", "arguments": {"body": "remember the milk"}}


def _world(tmp_path):
    tasks = [(MILK_TASK, MILK_VERIFIER), ("Keep the first note.", TRIVIAL_VERIFIER)]
    data = notes_world(tmp_path / "data", {"notes_1": NOTES_APP}, tasks)
    with open(data / "gen_solutions.jsonl", "w") as f:  # the simulated actor's references
        for i, calls in enumerate(([MILK_CALL], [])):
            f.write(json.dumps({"scenario": "notes_1", "task_idx": i, "calls": calls}) + "\n")
    return data


def _config(tmp_path, data, out, *extra):
    return collect_config(
        [
            f"out={tmp_path / out}",
            f"worlds={data}",
            "schedule.probabilities=[0.0]",
            "schedule.seeds=[0]",
            "executor.workers=1",
            "progress=false",
            f"env.work_root={tmp_path / 'scratch'}",
            *extra,
        ]
    )


def _tasks(out):
    return sorted(pd.read_parquet(out / "episodes.parquet")["task_idx"].unique().tolist())


def test_a_trivial_task_is_left_out_unless_asked(tmp_path, capfd):
    data = _world(tmp_path)
    skipping = _config(tmp_path, data, "skip")
    plan = plan_shards(skipping)
    assert plan.trivial == ["notes_1/1"]
    assert {s.task_id for s in plan.specs} == {"notes_1/0"}
    result = collect(skipping)
    err = capfd.readouterr().err
    assert (
        "collect: left out 1 task(s) whose verifier says complete on the untouched database "
        "(include_trivial_tasks=true keeps them): notes_1/1" in err
    ), err
    assert _tasks(result.out) == [0]
    skipped = json.loads((result.out / "manifest.json").read_text())["source"]["skipped_tasks"]
    assert skipped == [
        "notes_1/1: trivial (its verifier says complete on the untouched database, given "
        "no final answer)"
    ], skipped

    keeping = _config(tmp_path, data, "keep", "include_trivial_tasks=true")
    assert plan_shards(keeping).trivial == []
    result = collect(keeping)
    assert "left out" not in capfd.readouterr().err
    assert _tasks(result.out) == [0, 1]
    manifest = json.loads((result.out / "manifest.json").read_text())["source"]
    assert manifest["skipped_tasks"] == [] and manifest["config"]["include_trivial_tasks"]


def test_the_option_is_no_part_of_the_fingerprint(tmp_path, capfd):
    """Without a trivial task the plan is the same either way (and the default records no
    field in the manifest's config, as before it); shards planned with the trivial task
    kept resume with it when the option is left at its default."""
    data = _world(tmp_path)
    honest = ["schedule.tasks=[0]"]
    a = plan_shards(_config(tmp_path, data, "a", *honest))
    b = plan_shards(_config(tmp_path, data, "a", *honest, "include_trivial_tasks=true"))
    assert a.fingerprint == b.fingerprint and a.trivial == b.trivial == []
    assert "include_trivial_tasks" not in fingerprint_config(_config(tmp_path, data, "a"))
    assert "include_trivial_tasks" not in source_config(_config(tmp_path, data, "a"))

    first = collect(_config(tmp_path, data, "old", "include_trivial_tasks=true"))
    capfd.readouterr()
    again = collect(_config(tmp_path, data, "old"))
    err = capfd.readouterr().err
    assert "with its 1 trivial task(s): its shards were planned with them" in err, err
    assert again.shards_run == 0 and _tasks(again.out) == [0, 1], again
    assert first.summary["episodes"] == again.summary["episodes"] == 2


def test_a_resume_runs_no_verifier_of_the_do_nothing_check_again(tmp_path, monkeypatch):
    """The collector keeps its plan's do-nothing verdicts in ``shards/untouched.json`` (by
    a digest of database, verifier and clock); the next plan of the same ``out`` reads them
    and runs no verifier again. A malformed file is ignored (the verifiers run); the file
    goes with the shards."""
    import collect.plan as plan_mod

    data = _world(tmp_path)
    cfg = _config(tmp_path, data, "kept")  # keep_shards: true by default
    collect(cfg)
    path = tmp_path / "kept" / "shards" / plan_mod.UNTOUCHED_FILE
    record = json.loads(path.read_text())
    assert record["version"] == 1 and len(record["verdicts"]) == 2
    assert sorted(v is None for v in record["verdicts"].values()) == [False, True]

    runs = []
    monkeypatch.setattr(plan_mod, "_UNTOUCHED", {})  # a new process: nothing in memory
    monkeypatch.setattr(plan_mod, "_run_untouched", lambda *a: runs.append(a))
    again = plan_shards(cfg)
    assert runs == [] and again.trivial == ["notes_1/1"] and again.untouched == record["verdicts"]

    path.write_text('{"version": 1, "verdicts": [1, 2]}')  # malformed: ignored, run again
    monkeypatch.setattr(plan_mod, "_UNTOUCHED", {})
    plan_shards(cfg)
    assert len(runs) == 1 and sorted(runs[0][1]["notes_1"][1]) == [0, 1]

    monkeypatch.undo()
    done = collect(_config(tmp_path, data, "gone", "keep_shards=false"))
    assert not (done.out / "shards").exists()  # removed with the shards after publishing
