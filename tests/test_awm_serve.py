"""Remote environments: a real uvicorn server on 127.0.0.1 and the real HTTP and WebSocket clients."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from collect.awm.env import EnvConfig, EnvPool
from collect.awm.protocol import format_call_tool
from collect.awm.serve import AsyncEnvClient, EnvClient, ServeConfig, create_app

APP = """
import os
from fastapi import FastAPI
from pydantic import BaseModel
from sqlalchemy import create_engine, text

engine = create_engine(os.getenv("DATABASE_PATH"))
app = FastAPI()


class Note(BaseModel):
    body: str


@app.get("/notes", operation_id="list_notes", summary="List notes")
def list_notes():
    with engine.connect() as c:
        return {"notes": [r[0] for r in c.execute(text("SELECT body FROM notes ORDER BY id"))]}


@app.post("/notes", operation_id="add_note", summary="Add a note")
def add_note(note: Note):
    with engine.begin() as c:
        c.execute(text("INSERT INTO notes (body) VALUES (:b)"), {"b": note.body})
    return {"added": note.body}


@app.post("/verify", operation_id="verify")
def verify():
    with engine.begin() as c:
        c.execute(text("INSERT INTO notes (body) VALUES ('remember the milk')"))
    return {"result": "complete"}
"""

VERIFIER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    rows = sqlite3.connect(final_db_path).execute("SELECT body FROM notes").fetchall()
    return {"result": "complete" if ("remember the milk",) in rows else "others"}
"""


def _world(root: Path) -> Path:
    task = "Add a note saying 'remember the milk'."
    records = {
        "gen_tasks.jsonl": {"scenario": "notes_1", "tasks": [task]},
        "gen_db.jsonl": {
            "scenario": "notes_1",
            "db_schema": {
                "tables": [
                    {
                        "name": "notes",
                        "ddl": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
                        "indexes": [],
                    }
                ]
            },
        },
        "gen_sample.jsonl": {
            "scenario": "notes_1",
            "sample_data": {
                "tables": [
                    {
                        "table_name": "notes",
                        "insert_statements": ["INSERT INTO notes (body) VALUES ('first')"],
                    }
                ]
            },
        },
        "gen_envs.jsonl": {"scenario": "notes_1", "db_path": "n.db", "full_code": APP},
        "gen_verifier.pure_code.jsonl": {
            "scenario": "notes_1",
            "task_idx": 0,
            "task": task,
            "verification": {"code": VERIFIER},
        },
    }
    root.mkdir(parents=True, exist_ok=True)
    for name, record in records.items():
        (root / name).write_text(json.dumps(record) + "\n")
    return root


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    import uvicorn

    root = tmp_path_factory.mktemp("serve")
    pool = EnvPool(_world(root / "data"), EnvConfig(work_root=str(root / "work")))
    app = create_app(pool, ServeConfig(max_sessions=4))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()
    pool.close()


def _call(tool, arguments):
    return format_call_tool(tool, arguments)


def test_http_round_trip(server_url):
    with EnvClient(server_url) as client:
        assert client.health() == {"status": "healthy"}
        assert client.scenarios() == [{"name": "notes_1", "tasks": 1}]
        first = client.reset("notes_1", 0)
        assert first["done"] is False and first["session_id"]
        assert first["observation"]["task"] == "Add a note saying 'remember the milk'."
        assert first["observation"]["messages"][0]["role"] == "system"
        tools = client.list_tools()
        assert [t["name"] for t in tools["observation"]["tools"]] == ["list_notes", "add_note"]
        hidden = client.call_tool("verify", {})
        assert hidden["observation"]["metadata"]["failure"] == "unknown_tool"
        assert (
            client.step(_call("mcp_tool_verify", {}))["observation"]["metadata"]["failure"]
            == "unknown_tool"
        )
        added = client.step(_call("add_note", {"body": "remember the milk"}))
        assert added["done"] is False and json.loads(added["observation"]["text"]) == {
            "added": "remember the milk"
        }
        notes = client.call_tool("list_notes", "{}")
        assert json.loads(notes["observation"]["text"]) == {"notes": ["first", "remember the milk"]}
        final = client.step("I added the note.")
        assert final["done"] is True and final["reward"] == 1.0
        assert final["observation"]["metadata"]["outcome"] == "complete"
        state = client.state()
        assert (
            state["step_count"] == 6 and state["done"] and state["failures"] == {"unknown_tool": 2}
        )
        # a new episode starts from the seeded database again
        client.reset("notes_1", 0)
        again = client.call_tool("list_notes", {})
        assert json.loads(again["observation"]["text"]) == {"notes": ["first"]}
        with pytest.raises(RuntimeError, match="404"):
            client.reset("no_such_scenario", 0)


def test_http_errors_are_clear(server_url):
    import httpx

    with httpx.Client(base_url=server_url) as http:
        r = http.post("/step", json={"session_id": "nope", "action": {"type": "list_tools"}})
        assert r.status_code == 404 and "call /reset first" in r.json()["detail"]


def test_websocket_round_trip(server_url):
    async def episode():
        async with AsyncEnvClient(server_url) as client:
            first = await client.reset("notes_1", 0)
            assert first["observation"]["scenario"] == "notes_1"
            bad = await client.step("<tool_call>{not json}</tool_call>")
            return first, bad, await client.state()

    first, bad, state = asyncio.run(episode())
    assert bad["done"] is True and bad["reward"] == -1.0
    assert bad["observation"]["metadata"]["failure"] == "invalid_json"
    assert state["format_errors"] == 1

    async def solved():
        async with AsyncEnvClient(server_url) as client:
            await client.reset("notes_1", 0)
            await client.act(
                {
                    "type": "call_tool",
                    "tool_name": "add_note",
                    "arguments": {"body": "remember the milk"},
                }
            )
            return await client.step("done")

    final = asyncio.run(solved())
    assert final["done"] and final["reward"] == 1.0
