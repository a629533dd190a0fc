"""The world clock: dataset code sees one fixed "now", so collection does not depend on
the date it runs on (nor on the host's clock or time zone)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from collect.awm.app import build_scenario_database
from collect.awm.clock import DEFAULT_CLOCK, WorldClock, faketime_library
from collect.awm.dataset import AWMDataset
from collect.awm.sandbox import AppWorker
from collect.collector import collect, collect_config
from collect.policy import coverage, evaluation_line
from collect.worlds import WORLDS_DIR
from helpdp.policies import TablePolicy

REPO = Path(__file__).resolve().parents[1]
TABLES = ("states", "transitions", "episodes", "steps")
DEMO_NOW = dt.datetime(2025, 6, 12, 12, tzinfo=dt.timezone.utc)


def test_where_now_comes_from(tmp_path):
    assert WorldClock.resolve("2025-06-12T12:00:00Z", None).now == DEMO_NOW
    assert WorldClock.resolve("2025-06-12T14:00:00+02:00", None).now == DEMO_NOW
    assert WorldClock.resolve("2025-06-12 12:00", None).iso() == "2025-06-12T12:00:00Z"
    demo = WorldClock.resolve(None, WORLDS_DIR)
    assert (demo.now, demo.source) == (DEMO_NOW, "dataset")  # collect/worlds/clock.txt
    assert AWMDataset(WORLDS_DIR).clock("") == demo
    other = WorldClock.resolve("", tmp_path)  # AWM data that states no "now"
    assert other.iso() == DEFAULT_CLOCK and other.source == "default"
    real = WorldClock.resolve("real", WORLDS_DIR)
    assert real.now is None and real.describe()["reproducible"] is False
    assert demo.describe()["reproducible"] is True and demo.describe()["now"] == demo.iso()
    with pytest.raises(ValueError, match="clock: 'yesterday' is not an ISO-8601 time"):
        WorldClock.resolve("yesterday", None)
    (tmp_path / "clock.txt").write_text("soon\n")
    with pytest.raises(ValueError, match=r"clock\.txt: 'soon' is not an ISO-8601 time"):
        WorldClock.resolve(None, tmp_path)


APP = """
import datetime, time
from fastapi import FastAPI
app = FastAPI()

@app.get("/now", operation_id="now")
def now() -> dict:
    return {"now": datetime.datetime.now().isoformat(), "utc": datetime.datetime.utcnow().isoformat(),
            "today": datetime.date.today().isoformat(), "time": time.time(),
            "dt_today": datetime.datetime.today().isoformat()}
"""


def test_apps_and_the_database_build_see_the_world_clock(tmp_path):
    clock = WorldClock.fixed("2031-02-03T04:05:06Z")
    scenario = AWMDataset(WORLDS_DIR).get("smart_home_1")
    schema = {
        "tables": [
            {
                "name": "t",
                "ddl": "CREATE TABLE t (id INTEGER PRIMARY KEY, due TEXT, "
                "made TEXT DEFAULT CURRENT_TIMESTAMP)",
            }
        ]
    }
    sample = {
        "tables": [
            {
                "table_name": "t",
                "insert_statements": [
                    "INSERT INTO t (id, due) VALUES (1, datetime('now', '+5 days'));",
                    "INSERT INTO t (id, due) VALUES (2, datetime('now', '-30 days', '+7 seconds'));",
                ],
            }
        ]
    }
    scenario.db_schema, scenario.sample_data = schema, sample
    path, report = build_scenario_database(scenario, tmp_path / "db", clock=clock)
    assert report.ok and report.rows_loaded == 2
    import sqlite3

    rows = sqlite3.connect(path).execute("SELECT id, due, made FROM t ORDER BY id").fetchall()
    assert rows == [
        (1, "2031-02-08 04:05:06", "2031-02-03 04:05:06"),
        (2, "2031-01-04 04:05:13", "2031-02-03 04:05:06"),
    ]
    app = AppWorker(workdir=tmp_path / "app", clock=clock)
    try:
        app.load(APP, None)
        seen = json.loads(app.request("GET", "/now")["text"])
    finally:
        app.close()
    assert seen == {
        "now": "2031-02-03T04:05:06",  # the workers run with TZ=UTC
        "utc": "2031-02-03T04:05:06",
        "today": "2031-02-03",
        "time": clock.now.timestamp(),
        "dt_today": "2031-02-03T04:05:06",
    }


def _under_system_date(date: str) -> dict[str, str]:
    """The environment of a process whose whole clock starts at ``date`` and runs on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKETIME", "LD_PRELOAD"))}
    env.update(LD_PRELOAD=str(faketime_library()), FAKETIME=f"@{date}", DONT_FAKE_MONOTONIC="1")
    return env


def _collect_on(date: str, out: Path, *overrides: str) -> Path:
    probe = subprocess.run(
        [sys.executable, "-c", "import datetime; print(datetime.date.today())"],
        env=_under_system_date(date),
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == date[:10]  # the collector itself runs on that date
    cmd = [sys.executable, "-m", "collect", f"out={out}", "progress=false", *overrides]
    run = subprocess.run(
        cmd, env=_under_system_date(date), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def _assert_same_tables(a: Path, b: Path) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(
            pd.read_parquet(a / f"{name}.parquet"), pd.read_parquet(b / f"{name}.parquet")
        )
    ma, mb = (json.loads((p / "manifest.json").read_text())["source"] for p in (a, b))
    assert ma["clock"] == mb["clock"]


@pytest.mark.slow
def test_demo_collection_is_the_same_on_any_date(tmp_path):
    args = ("state_key=db", "schedule.probabilities=[0.0,1.0]", "schedule.seeds=[0]")
    a = _collect_on("2019-03-04 05:06:07", tmp_path / "a", *args)
    b = _collect_on("2033-11-30 23:59:58", tmp_path / "b", *args)
    _assert_same_tables(a, b)
    texts = pd.read_parquet(a / "states.parquet")["text"]
    # apps wrote rows stamped with the world's "now" (not masked): same ids anyway
    assert texts.str.contains("2025-06-12 12:00:00").any()
    assert not texts.str.contains("<now>").any()
    manifest = json.loads((a / "manifest.json").read_text())["source"]
    assert manifest["clock"]["now"] == "2025-06-12T12:00:00Z"
    assert manifest["clock"]["source"] == "dataset" and manifest["clock"]["reproducible"]
    assert manifest["clock"]["library"].startswith("libfaketime ")


_STAMP = re.compile(r"'(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})(:\d{2})?'")


def _awm_style_world(dest: Path, scenario: str = "smart_home_1") -> Path:
    """A demo world whose seed data says ``datetime('now', '<N> seconds')``, as AWM's does.

    Each literal time becomes an offset from 2025-06-12 12:00:00 to the second, so on
    that clock the database is the original one (and the verifiers still apply).
    """
    dest.mkdir()
    for src in sorted(WORLDS_DIR.glob("gen_*.jsonl")):
        lines = []
        for line in src.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("scenario", rec.get("name")) != scenario:
                continue
            if src.name == "gen_sample.jsonl":
                for table in rec["sample_data"]["tables"]:
                    table["insert_statements"] = [
                        _STAMP.sub(_relative, s) for s in table["insert_statements"]
                    ]
            lines.append(json.dumps(rec))
        (dest / src.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "datetime('now'" in (dest / "gen_sample.jsonl").read_text()
    return dest


def _relative(m: re.Match) -> str:
    when = dt.datetime.fromisoformat(f"{m.group(1)} {m.group(2)}{m.group(3) or ':00'}")
    seconds = int((when - DEMO_NOW.replace(tzinfo=None)).total_seconds())
    return f"datetime('now', '{seconds:+d} seconds')"


@pytest.mark.slow
def test_awm_style_world_keeps_its_ids_and_its_policy_finds_them(tmp_path):
    world = _awm_style_world(tmp_path / "world")
    common = (
        f"worlds={world}",
        "clock=2025-06-12T12:00:00Z",
        "state_key=db",
        "executor.workers=1",
        "progress=false",
    )
    train = ("schedule.probabilities=[0.0,0.5,1.0]", "schedule.seeds=[0]")
    a = _collect_on("2020-01-01 00:00:00", tmp_path / "a", *common, *train)
    b = _collect_on("2030-06-15 12:34:56", tmp_path / "b", *common, *train)
    _assert_same_tables(a, b)

    search = subprocess.run(
        [sys.executable, "-m", "helpdp.search", f"data={a}", "budget=1.0", f"out={tmp_path / 's'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert search.returncode == 0, search.stderr[-2000:]
    # the policy, evaluated on fresh seeds today, finds the collected states
    ev = collect(
        collect_config(
            [
                f"out={tmp_path / 'ev'}",
                f"policy={tmp_path / 's'}",
                *common,
                "schedule.probabilities=[0.0]",
                "schedule.seeds=[11]",
            ]
        )
    ).out
    policy = TablePolicy.load(tmp_path / "s")
    ev_states = pd.read_parquet(ev / "states.parquet")
    starts = set(ev_states.loc[ev_states["is_start"], "state_id"])
    assert starts and starts <= policy.known()
    steps = pd.read_parquet(ev / "steps.parquet")
    line = evaluation_line(policy, pd.read_parquet(ev / "episodes.parquet"), steps)
    assert f"coverage {coverage(policy, steps):.1%}" in line
    assert coverage(policy, steps) >= steps["t"].eq(0).mean()  # every first decision is known


def test_the_preloaded_library_is_found_by_its_real_path(tmp_path, monkeypatch):
    """A venv reached through a symlink (a CI cache): the sandbox mounts real paths only,
    so the LD_PRELOAD path the workers get must be the library's resolved path."""
    import importlib.util
    from types import SimpleNamespace

    real = faketime_library()
    package = real.parents[3]  # .../libfaketime (vendor/libfaketime/src/libfaketime.so.1)
    (tmp_path / "cache").symlink_to(package.parent, target_is_directory=True)
    linked = tmp_path / "cache" / package.name
    assert (linked / "vendor/libfaketime/src/libfaketime.so.1").is_file()
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name: SimpleNamespace(submodule_search_locations=[str(linked)]),
    )
    found = faketime_library()
    assert found == real and found == found.resolve() and tmp_path not in found.parents
