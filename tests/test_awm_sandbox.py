"""Hostile dataset code: an app and verifiers that try to escape are stopped, clearly, and the next episode runs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from collect.awm.app import build_scenario_database
from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.protocol import Failure, format_call_tool
from collect.awm.sandbox import SandboxError, SandboxLimits, VerifierPool

HOSTILE_APP = """
import os
from fastapi import FastAPI, Body
from sqlalchemy import create_engine, text

engine = create_engine(os.getenv("DATABASE_PATH", "sqlite:///nowhere.db"))
app = FastAPI()


@app.get("/ok", operation_id="ok")
def ok():
    with engine.connect() as c:
        n = c.execute(text("SELECT count(*) FROM items")).scalar()
    return {"items": n, "cwd": os.getcwd()}


@app.post("/items", operation_id="add_item")
def add_item(name: str = Body(..., embed=True)):
    with engine.begin() as c:
        c.execute(text("INSERT INTO items (name) VALUES (:n)"), {"n": name})
    return {"added": name}


@app.get("/read", operation_id="read_file")
def read_file(path: str):
    return {"text": open(path).read()}


@app.get("/write", operation_id="write_file")
def write_file(path: str):
    with open(path, "w") as fh:
        fh.write("pwned")
    return {}


@app.get("/subprocess", operation_id="import_subprocess")
def import_subprocess():
    import subprocess
    return {"out": subprocess.check_output(["id"]).decode()}


@app.get("/popen", operation_id="popen_bypass")
def popen_bypass():
    popen = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "Popen"][0]
    popen(["id"])
    return {}


@app.get("/system", operation_id="os_system")
def os_system():
    return {"rc": os.system("id")}


@app.get("/socket", operation_id="import_socket")
def import_socket():
    import socket
    return {}


@app.get("/socket2", operation_id="socket_bypass")
def socket_bypass():
    sock = [c for c in ().__class__.__base__.__subclasses__() if c.__module__ == "_socket" and c.__name__ == "socket"][0]
    s = sock(2, 1)
    s.connect(("93.184.216.34", 80))
    return {}


@app.get("/attach", operation_id="attach_db")
def attach_db(path: str):
    with engine.connect() as c:
        c.execute(text(f"ATTACH DATABASE '{path}' AS other"))
    return {}


@app.get("/loop", operation_id="loop_forever")
async def loop_forever():
    while True:
        pass


@app.get("/alloc", operation_id="allocate")
def allocate():
    hoard = []
    while True:
        hoard.append(bytes(256 * 2**20))
"""

GOOD_VERIFIER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    names = {r[0] for r in conn.execute("SELECT name FROM items")}
    conn.close()
    return {"result": "complete" if "gadget" in names else "others"}
"""


def _write_world(root: Path, app_code: str) -> Path:
    records = {
        "gen_tasks.jsonl": {
            "scenario": "hostile_1",
            "tasks": ["Add an item named gadget.", "Count the items."],
        },
        "gen_db.jsonl": {
            "scenario": "hostile_1",
            "db_schema": {
                "tables": [
                    {
                        "name": "items",
                        "ddl": "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
                        "indexes": [],
                    }
                ]
            },
        },
        "gen_sample.jsonl": {
            "scenario": "hostile_1",
            "sample_data": {
                "tables": [
                    {
                        "table_name": "items",
                        "insert_statements": ["INSERT INTO items (name) VALUES ('widget')"],
                    }
                ]
            },
        },
        "gen_envs.jsonl": {"scenario": "hostile_1", "db_path": "x.db", "full_code": app_code},
    }
    root.mkdir(parents=True, exist_ok=True)
    for name, record in records.items():
        (root / name).write_text(json.dumps(record) + "\n")
    verifiers = [
        {"scenario": "hostile_1", "task_idx": i, "task": t, "verification": {"code": GOOD_VERIFIER}}
        for i, t in enumerate(records["gen_tasks.jsonl"]["tasks"])
    ]
    (root / "gen_verifier.pure_code.jsonl").write_text(
        "".join(json.dumps(v) + "\n" for v in verifiers)
    )
    return root


def _call(tool, arguments):
    return format_call_tool(tool, arguments)


LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=1.5, start_timeout_s=30)


@pytest.fixture(scope="module")
def hostile_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    scenario = AWMDataset(_write_world(root / "data", HOSTILE_APP)).get("hostile_1")
    env = AWMEnv(
        scenario, EnvConfig(sandbox=LIMITS, verifier_sandbox=LIMITS), work_root=root / "work"
    )
    yield env, root
    env.close()


def test_hostile_app_file_process_and_network_access_is_refused(hostile_env):
    env, root = hostile_env
    secret = root / "secret.txt"
    secret.write_text("top secret")
    env.reset(0)
    assert env.app.worker.hello["netns"] or env.app.worker.hello["netns_error"]
    cases = [
        (
            "read_file",
            {"path": "/etc/passwd"},
            "sandbox: opening of '/etc/passwd' (outside the allowed directories) refused",
        ),
        ("read_file", {"path": str(secret)}, "outside the allowed directories"),
        ("write_file", {"path": str(root / "pwned.txt")}, "opening for writing"),
        ("import_subprocess", {}, "import of 'subprocess' is not allowed"),
        ("popen_bypass", {}, "sandbox: subprocess.Popen refused"),
        ("os_system", {}, "module 'os' has no attribute 'system'"),
        ("import_socket", {}, "import of 'socket' is not allowed"),
        ("socket_bypass", {}, "sandbox: socket creation (family 2) refused"),
        ("attach_db", {"path": str(root / "other.db")}, "not authorized"),
    ]
    for tool, args, message in cases:
        result = env.step(_call(tool, args))
        assert not result.done, tool
        assert result.info["failure"] == Failure.SERVER_ERROR.value, (tool, result.observation)
        assert message in result.observation, (tool, result.observation)
    assert not (root / "pwned.txt").exists() and not (root / "other.db").exists()
    # the worker survived all of that: the episode goes on and completes
    assert env.step(_call("ok", {})).info["status_code"] == 200
    env.step(_call("add_item", {"name": "gadget"}))
    final = env.step("Added the gadget.")
    assert final.done and final.info["outcome"] == "complete" and final.reward == 1.0
    assert final.info["failures"] == {"server_error": 9}


@pytest.mark.parametrize(
    ("tool", "kind", "message"),
    [
        (
            "loop_forever",
            "timeout",
            "timed out after 1.5 s during request (wall-clock limit); worker killed",
        ),
        ("allocate", "memory", "worker ran out of memory (RLIMIT_AS 1024 MiB) during request"),
    ],
)
def test_hostile_app_that_hangs_or_hoards_is_killed_and_replaced(hostile_env, tool, kind, message):
    env, _ = hostile_env
    env.reset(0)
    old_pid = env.app.worker.pid
    result = env.step(_call(tool, {}))
    assert (
        result.done and result.info["outcome"] == "server_error" and result.info["valid"] is False
    )
    assert result.reward == 0.0
    assert message in result.observation, result.observation
    assert env.app is None  # killed
    # the next episode runs on a fresh worker with a fresh database
    env.reset(1)
    assert env.app.worker.pid != old_pid
    ok = env.step(_call("ok", {}))
    assert ok.info["status_code"] == 200 and json.loads(ok.observation)["items"] == 1


def test_app_that_imports_subprocess_at_load_time_is_refused(tmp_path):
    code = "import subprocess\n" + HOSTILE_APP
    scenario = AWMDataset(_write_world(tmp_path / "data", code)).get("hostile_1")
    with AWMEnv(scenario, EnvConfig(sandbox=LIMITS), work_root=tmp_path / "work") as env:
        with pytest.raises(SandboxError) as err:
            env.reset(0)
        assert err.value.kind == "load_error"
        assert (
            "app failed to load: ImportError: sandbox: import of 'subprocess' is not allowed (line 1: import subprocess)"
            in str(err.value)
        )


HOSTILE_VERIFIERS = {
    "reads_passwd": (
        "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
        "    return {'result': open('/etc/passwd').read()[:10]}\n",
        "error",
        "sandbox: opening of '/etc/passwd' (outside the allowed directories) refused",
    ),
    "imports_subprocess": (
        "import subprocess\n"
        "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
        "    return {'result': 'complete'}\n",
        "error",
        "ImportError: sandbox: import of 'subprocess' is not allowed (line 1",
    ),
    "imports_socket": (
        "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
        "    import socket\n"
        "    socket.create_connection(('example.com', 80))\n",
        "error",
        "import of 'socket' is not allowed",
    ),
    "writes_db": (
        "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
        "    import sqlite3\n"
        "    c = sqlite3.connect(final_db_path)\n"
        "    c.execute(\"INSERT INTO items (name) VALUES ('gadget')\")\n"
        "    c.commit()\n"
        "    return {'result': 'complete'}\n",
        "error",
        "not authorized",
    ),
    "loops": (
        "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
        "    while True:\n        pass\n",
        "timeout",
        "timed out after 1.5 s during verify",
    ),
    "hoards": (
        "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
        "    x = []\n    while True:\n        x.append(bytes(2**26))\n",
        "memory",
        "worker ran out of memory",
    ),
    "bad_result": (
        "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
        "    return 'yes'\n",
        "invalid_result",
        "expected {'result': 'complete'|'others'}",
    ),
}


def test_hostile_verifiers_are_stopped_and_the_next_verifier_runs(tmp_path):
    scenario = AWMDataset(_write_world(tmp_path / "data", HOSTILE_APP)).get("hostile_1")
    db, _ = build_scenario_database(scenario, tmp_path / "db")
    limits = SandboxLimits(memory_mb=512, call_timeout_s=1.5)
    with VerifierPool(1, limits, work_root=tmp_path / "pool") as pool:
        for name, (code, status, message) in HOSTILE_VERIFIERS.items():
            outcome = pool.run(code, initial_db=db, final_db=db)
            assert outcome.status == status, (name, outcome)
            assert message in outcome.message, (name, outcome.message)
            good = pool.run(GOOD_VERIFIER, initial_db=db, final_db=db)
            assert good.ok and good.label == "others", (name, good)
    assert (tmp_path / "db" / "initial.db").exists()


def test_a_worker_that_dies_marks_the_episode_server_error_and_is_replaced(hostile_env):
    import os
    import signal
    import time

    env, _ = hostile_env
    env.reset(0)
    os.kill(env.app.worker.pid, signal.SIGKILL)  # stands in for a segfault or the OOM killer
    while env.app.alive:  # let the death be noticed before the next call
        time.sleep(0.01)
    result = env.step(_call("ok", {}))
    assert result.done and result.info["outcome"] == "server_error"
    assert "worker killed (SIGKILL) during request" in result.observation
    env.reset(0)
    assert env.step(_call("ok", {})).info["status_code"] == 200


def test_cpu_time_limit_kills_a_spinning_verifier(tmp_path):
    scenario = AWMDataset(_write_world(tmp_path / "data", HOSTILE_APP)).get("hostile_1")
    db, _ = build_scenario_database(scenario, tmp_path / "db")
    spin = HOSTILE_VERIFIERS["loops"][0]
    limits = SandboxLimits(memory_mb=512, cpu_seconds=1, call_timeout_s=20)
    with VerifierPool(1, limits, work_root=tmp_path / "pool") as pool:
        outcome = pool.run(spin, initial_db=db, final_db=db)
        assert outcome.status == "cpu" and "CPU time limit exceeded (RLIMIT_CPU)" in outcome.message
        assert outcome.seconds < 10
        assert pool.run(GOOD_VERIFIER, initial_db=db, final_db=db).ok


def test_a_world_whose_app_does_not_load_is_recorded_not_lost(tmp_path):
    """The app fails to load on every attempt (the world's fault, not the runtime's): the
    collection records its episodes as server_error and publishes, rather than rerunning
    them and exiting 2 on every rerun."""
    from collect.collector import collect, collect_config
    from collect.rollout import environment_error
    from collect.worker import runtime_failed
    from collect.worlds import WORLDS_DIR

    broken = _write_world(tmp_path / "broken", "import subprocess\n" + HOSTILE_APP)
    data = tmp_path / "data"  # the shipped worlds, and hostile_1 beside them
    data.mkdir()
    for src in WORLDS_DIR.glob("*.jsonl"):
        extra = broken / src.name
        text = src.read_text() + (extra.read_text() if extra.is_file() else "")
        (data / src.name).write_text(text)
    (data / "clock.txt").write_text((WORLDS_DIR / "clock.txt").read_text())
    with open(data / "gen_solutions.jsonl", "a") as f:  # the simulated actor's references
        for i in range(2):
            f.write(json.dumps({"scenario": "hostile_1", "task_idx": i, "calls": []}) + "\n")
    cfg = collect_config(
        [
            f"out={tmp_path / 'out'}",
            f"worlds={data}",
            "schedule.scenarios=[hostile_1,smart_home_1]",
            "schedule.max_tasks=2",
            "schedule.probabilities=[0.0]",
            "schedule.seeds=[0]",
            "executor.workers=1",
            "executor.episode_retries=2",
            "progress=false",
            f"env.work_root={tmp_path / 'scratch'}",
        ]
    )
    result = collect(cfg)
    ep = pd.read_parquet(tmp_path / "out" / "episodes.parquet").set_index("scenario")
    assert result.episodes == 4
    assert (ep.loc["hostile_1", "outcome"] == "server_error").all()
    assert ep.loc["hostile_1", "error"].str.startswith("world failed to start: SandboxError(").all()
    assert (ep.loc["smart_home_1", "outcome"] != "server_error").all()
    # a runtime's failure keeps its wording (rerun, and lost if it stays)
    crashed = environment_error("failed to start", SandboxError("crashed", "worker exited"))
    log = type("Log", (), {"episode": {"outcome": "server_error", "error": crashed}})
    assert runtime_failed(log)
