"""Remote environments: a real uvicorn server on 127.0.0.1 and the real HTTP and WebSocket clients."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world, served

from collect.awm.client import AsyncEnvClient, EnvClient
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.protocol import format_call_tool
from collect.awm.serve import ServeConfig, create_app

APP = (
    NOTES_APP
    + """

@app.post("/verify", operation_id="verify")
def verify():
    with engine.begin() as c:
        c.execute(text("INSERT INTO notes (body) VALUES ('remember the milk')"))
    return {"result": "complete"}
"""
)


def _world(root: Path) -> Path:
    return notes_world(root, {"notes_1": APP}, [(MILK_TASK, MILK_VERIFIER)])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    import uvicorn

    root = tmp_path_factory.mktemp("serve")
    pool = EnvPool(_world(root / "data"), EnvConfig(work_root=str(root / "work")))
    app = create_app(pool, ServeConfig(max_sessions=4))
    with served(uvicorn.Config(app, log_level="warning", lifespan="off")) as url:
        yield url
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
