"""The environment server under attack.

One real uvicorn server on 127.0.0.1 with a bearer token and small limits. Each
attack must fail, and the server must stay usable: the next session runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import websockets
from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world, served

from collect.awm.client import AsyncEnvClient, EnvClient
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.http_guard import is_loopback
from collect.awm.serve import (
    ServeConfig,
    _Server,
    check_bind,
    create_app,
    serve,
    uvicorn_config,
)
from collect.awm.wire import public_info

TOKEN = "test-" + secrets.token_urlsafe(16)
CANARY = "canary-" + secrets.token_hex(8)  # a secret in the server's environment
MARKER = "VERIFIER-DETAIL-7f3a"  # anything a verifier returns beyond its verdict
LIMIT = 64 * 1024

APP = (
    NOTES_APP
    + """

@app.post("/slow_note", operation_id="slow_note", summary="Add a note, slowly")
def slow_note(note: Note):
    time.sleep(1.0)
    with engine.begin() as c:
        c.execute(text("INSERT INTO notes (body) VALUES (:b)"), {"b": note.body})
    return {"added": note.body}
"""
)

# returns the environment it sees (and the parent's, if it can read it) with its verdict
LEAKY = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import os
    seen = {"marker": "MARKER", "env": dict(os.environ)}
    try:
        seen["parent"] = open(f"/proc/{os.getppid()}/environ").read()
    except BaseException as e:
        seen["parent_error"] = "MARKER " + repr(e)
    return {"result": "complete", "details": seen, "message": "MARKER", "traceback": "MARKER"}
""".replace("MARKER", MARKER)

# fails with the environment in its error message (a traceback for the server's log)
CRASHING = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import os
    raise RuntimeError("MARKER " + repr(dict(os.environ)))
""".replace("MARKER", MARKER)

TASKS = [MILK_TASK, "Leak the environment.", "Crash."]


def _world(root: Path) -> Path:
    verifiers = (MILK_VERIFIER, LEAKY, CRASHING)
    return notes_world(root, {"notes_1": APP}, list(zip(TASKS, verifiers, strict=True)))


CONFIG = ServeConfig(
    max_sessions=6, max_sessions_per_client=3, max_body_bytes=LIMIT, token_env="HELPDP_TEST_TOKEN"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):

    os.environ["HELPDP_SERVE_TEST_CANARY"] = CANARY
    root = tmp_path_factory.mktemp("serve")
    pool = EnvPool(_world(root / "data"), EnvConfig(work_root=str(root / "work")))
    app = create_app(pool, CONFIG, token=TOKEN)
    with served(uvicorn_config(app, CONFIG, lifespan="off")) as url:
        yield url, app, pool
    pool.close()
    os.environ.pop("HELPDP_SERVE_TEST_CANARY", None)


@pytest.fixture
def url(server):
    yield server[0]
    sessions = server[1].state.server.sessions
    assert not sessions, f"a test left {len(sessions)} sessions open"


def _http(url: str, token: str | None = TOKEN) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def _usable(url: str) -> None:
    """The server still runs a whole episode."""
    with EnvClient(url, token=TOKEN) as client:
        client.reset("notes_1", 0)
        client.call_tool("add_note", {"body": "remember the milk"})
        final = client.step("done")
        assert final["done"] and final["reward"] == 1.0


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# ---------------------------------------------------------------------------
# sessions
# ---------------------------------------------------------------------------


def test_session_ids_are_made_by_the_server_and_cannot_be_chosen(url):
    with _http(url) as http:
        for chosen in ("mine", "a" * 43, ""):
            r = http.post("/reset", json={"scenario": "notes_1", "session_id": chosen})
            assert r.status_code == 404 and "unknown session" in r.json()["detail"], chosen
        a = http.post("/reset", json={"scenario": "notes_1"}).json()["session_id"]
        b = http.post("/reset", json={"scenario": "notes_1"}).json()["session_id"]
        assert a != b and len(a) >= 40 and len(b) >= 40
        # the holder may reuse its session; a made-up id reaches nothing
        assert http.post("/reset", json={"scenario": "notes_1", "session_id": a}).status_code == 200
        r = http.post("/step", json={"session_id": a[:-1] + "x", "action": {"type": "list_tools"}})
        assert r.status_code == 404
        assert http.get("/state", params={"session_id": "x"}).status_code == 404
        assert http.post("/close", json={"session_id": "x"}).json() == {"closed": False}
        for sid in (a, b):
            assert http.post("/close", json={"session_id": sid}).json() == {"closed": True}
    _usable(url)


def test_a_websocket_session_cannot_be_driven_or_closed_over_http(url):
    def notes(reply) -> list[str]:
        return json.loads(reply["observation"]["text"])["notes"]

    async def attack():
        async with AsyncEnvClient(url, token=TOKEN) as owner:
            first = await owner.reset("notes_1", 0)
            sid = first["session_id"]
            with _http(url) as http:
                step = {"session_id": sid, "action": {"type": "call_tool", "tool_name": "add_note"}}
                assert http.post("/step", json=step).status_code == 404
                # the old attack: close it over HTTP, so that the next /reset gets its
                # environment while the socket still drives it
                assert http.post("/close", json={"session_id": sid}).json() == {"closed": False}
                r = http.post("/reset", json={"scenario": "notes_1", "session_id": sid})
                assert r.status_code == 404
            with EnvClient(url, token=TOKEN) as other:
                other.reset("notes_1", 0)
                add = {"type": "call_tool", "tool_name": "add_note", "arguments": {"body": "A"}}
                await owner.act(add)
                assert notes(other.call_tool("list_notes")) == ["first"]
                mine = await owner.act({"type": "call_tool", "tool_name": "list_notes"})
                assert notes(mine) == ["first", "A"]

    asyncio.run(attack())
    _usable(url)


def test_close_invalidates_the_environment_even_mid_step(url, server):
    app, pool = server[1], server[2]
    with _http(url) as a:
        sid = a.post("/reset", json={"scenario": "notes_1"}).json()["session_id"]
        env = app.state.server.sessions[sid].env
        slow = {
            "session_id": sid,
            "action": {"type": "call_tool", "tool_name": "slow_note", "arguments": {"body": "A"}},
        }
        replies: list[httpx.Response] = []
        in_flight = threading.Thread(target=lambda: replies.append(a.post("/step", json=slow)))
        in_flight.start()
        # wait until the slow tool call holds the session (an event, not a guess of time)
        session = app.state.server.sessions[sid]
        for _ in range(3000):
            if session.lock.locked() or not in_flight.is_alive():
                break
            time.sleep(0.01)
        assert session.lock.locked(), "the slow tool call never started"
        assert a.post("/close", json={"session_id": sid}).json() == {"closed": True}
        # still in use: not handed to anyone
        assert all(env is not e for e in pool._idle.get("notes_1", []))
        # the closed session answers nothing more
        late = {"session_id": sid, "action": {"type": "call_tool", "tool_name": "list_notes"}}
        assert a.post("/step", json=late).status_code == 404
        # another client starts while A's call still runs: it never sees A's episode
        with EnvClient(url, token=TOKEN) as b:
            b.reset("notes_1", 0)
            in_flight.join(timeout=30)
            assert replies and replies[0].status_code == 200  # the call in flight finished
            assert json.loads(b.call_tool("list_notes")["observation"]["text"]) == {
                "notes": ["first"]
            }
            assert a.post("/step", json=late).status_code == 404
            b.call_tool("add_note", {"body": "remember the milk"})
            assert b.step("done")["reward"] == 1.0
    # once nobody holds it, the environment goes back to the pool (and is reset on reuse)
    assert any(env is e for e in pool._idle.get("notes_1", []))
    _usable(url)


def test_per_client_session_cap(url):
    with _http(url) as http:
        sids = []
        for _ in range(CONFIG.max_sessions_per_client):
            r = http.post("/reset", json={"scenario": "notes_1"})
            assert r.status_code == 200
            sids.append(r.json()["session_id"])
        r = http.post("/reset", json={"scenario": "notes_1"})
        assert r.status_code == 429 and "max_sessions_per_client" in r.json()["detail"]
        http.post("/close", json={"session_id": sids.pop()})
        r = http.post("/reset", json={"scenario": "notes_1"})
        assert r.status_code == 200
        sids.append(r.json()["session_id"])
        for sid in sids:
            http.post("/close", json={"session_id": sid})
    _usable(url)


def test_global_and_per_client_caps_count_clients_apart():
    server = _Server(pool=None, config=ServeConfig(max_sessions=4, max_sessions_per_client=2))
    from collect.awm.wire import SessionError

    server.open("10.0.0.1", "http")
    server.open("10.0.0.1", "ws")
    with pytest.raises(SessionError) as err:
        server.open("10.0.0.1", "http")
    assert err.value.status == 429
    server.open("10.0.0.2", "http")
    server.open("10.0.0.3", "http")
    with pytest.raises(SessionError) as err:
        server.open("10.0.0.4", "http")
    assert err.value.status == 503
    # a session answers only to its own client and kind
    sid = next(iter(server.sessions))
    owner = server.sessions[sid]
    assert server.get(sid, owner.client, owner.kind) is owner
    with pytest.raises(SessionError):
        server.get(sid, "10.0.0.9", owner.kind)


# ---------------------------------------------------------------------------
# sizes
# ---------------------------------------------------------------------------


def _raw_post(port: int, headers: str, chunks, limit_mb: int = 400) -> tuple[bytes, int]:
    """Send a request by hand; returns (what came back, bytes of body sent)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(headers.encode())
        try:
            for chunk in chunks:
                s.sendall(chunk)
                sent += len(chunk)
                if sent > limit_mb * 2**20:
                    break
        except OSError:
            pass  # the server closed the connection: what it said is below
        reply = b""
        try:
            while data := s.recv(65536):
                reply += data
        except OSError:
            pass
    return reply, sent


def test_oversized_bodies_are_refused_without_buffering(url):
    port = int(url.rsplit(":", 1)[1])
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    block = b" " * 2**20
    before = _rss_mb()
    # a declared 400 MB body: refused from the header, nothing read
    reply, sent = _raw_post(
        port,
        "POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{auth}Content-Length: {400 * 2**20}\r\n\r\n",
        (block for _ in range(400)),
    )
    assert b" 413 " in reply.split(b"\r\n", 1)[0] or not reply
    assert sent < 400 * 2**20
    # a chunked body that never ends: counted while it streams, cut at the limit
    chunk = b"%x\r\n%s\r\n" % (len(block), block)
    reply, sent = _raw_post(
        port,
        "POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{auth}Transfer-Encoding: chunked\r\n\r\n",
        (chunk for _ in range(400)),
    )
    assert b" 413 " in reply.split(b"\r\n", 1)[0] or not reply
    assert sent < 400 * 2**20
    assert _rss_mb() - before < 100
    with _http(url) as http:
        r = http.post("/reset", content=b"{" + b" " * (LIMIT + 10) + b"}")
        assert r.status_code == 413
        deep = "[" * (LIMIT // 2) + "]" * (LIMIT // 2)  # within the limit, absurdly nested
        r = http.post("/step", content=deep.encode(), headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500
    _usable(url)


def test_oversized_websocket_messages_close_the_connection(url):
    async def attack():
        async with AsyncEnvClient(url, token=TOKEN) as client:
            await client.reset("notes_1", 0)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await client.act({"type": "turn", "text": "x" * (LIMIT * 4)})
            assert closed.value.rcvd is None or closed.value.rcvd.code == 1009
            client._ws = None
        async with AsyncEnvClient(url, token=TOKEN) as client:
            first = await client.reset("notes_1", 0)
            deep = "[" * (LIMIT // 3) + "]" * (LIMIT // 3)
            await client._ws.send(deep)
            reply = json.loads(await client._ws.recv())
            assert reply["type"] == "error"
            await client._ws.send(json.dumps({"type": "reset", "data": ["not", "a", "dict"]}))
            assert json.loads(await client._ws.recv())["type"] == "error"
            return first

    assert asyncio.run(attack())["observation"]["scenario"] == "notes_1"
    _usable(url)


# ---------------------------------------------------------------------------
# what clients see
# ---------------------------------------------------------------------------


def test_verifier_details_and_server_secrets_never_reach_the_client(url, server):
    seen: list[str] = []
    kept = []  # what the server itself holds
    with EnvClient(url, token=TOKEN) as client:
        for task_idx in (1, 2):
            seen.append(json.dumps(client.reset("notes_1", task_idx)))
            final = client.step("I am done.")
            seen.append(json.dumps(final))
            seen.append(json.dumps(client.state()))
            kept += [e.last_verification for e in server[2]._all if e.last_verification]
            meta = final["observation"]["metadata"]
            if task_idx == 1:
                assert meta["outcome"] == "complete" and final["reward"] == 1.0
            else:
                assert meta["outcome"] == "verifier_error" and meta["valid"] is False
            assert set(meta["verification"]) <= {"mode", "status"}

    async def over_ws():
        async with AsyncEnvClient(url, token=TOKEN) as client:
            out = [await client.reset("notes_1", 1), await client.step("done")]
            out += [await client.reset("notes_1", 2), await client.step("done")]
            return out

    seen.extend(json.dumps(r) for r in asyncio.run(over_ws()))
    # the verifiers did return the details (to the server), which kept them
    assert any(MARKER in json.dumps(v.detail) for v in kept if v.detail)
    assert any(MARKER in v.message for v in kept if v.message)
    text = "\n".join(seen)
    assert CANARY not in text and MARKER not in text and TOKEN not in text
    assert "Traceback" not in text and "RuntimeError" not in text
    _usable(url)


def test_public_info_keeps_only_listed_keys():
    info = {
        "outcome": "complete",
        "valid": True,
        "turn": 3,
        "verification": {
            "outcome": "complete",
            "mode": "code",
            "status": "ok",
            "detail": {"env": CANARY},
            "message": f"Traceback ... {CANARY}",
        },
        "new_key_added_later": CANARY,
    }
    out = public_info(info)
    assert out == {
        "outcome": "complete",
        "valid": True,
        "turn": 3,
        "verification": {"mode": "code", "status": "ok"},
    }
    weird = public_info({"verification": {"mode": "code", "status": f"bad {CANARY}"}})
    assert weird == {"verification": {"mode": "code"}}


# ---------------------------------------------------------------------------
# authentication
# ---------------------------------------------------------------------------


def test_bearer_token_is_required(url):
    for token in (None, "wrong", TOKEN + "x", TOKEN[:-1]):
        with _http(url, token) as http:
            assert http.get("/health").json() == {"status": "healthy"}  # liveness only
            for r in (
                http.get("/scenarios"),
                http.get("/schema"),
                http.post("/reset", json={"scenario": "notes_1"}),
                http.post("/step", json={"session_id": "x", "action": {}}),
            ):
                assert r.status_code == 401, (token, r.request.url)
                assert "bearer token" in r.json()["detail"]
                assert r.headers["www-authenticate"] == "Bearer"

    async def ws_without(token):
        with pytest.raises(websockets.InvalidStatus) as err:
            async with AsyncEnvClient(url, token=token) as client:
                await client.reset("notes_1", 0)
        return err.value.response.status_code

    assert asyncio.run(ws_without("wrong")) == 403
    assert asyncio.run(ws_without("")) == 403
    _usable(url)


def test_non_loopback_bind_needs_a_token(monkeypatch):
    monkeypatch.delenv("HELPDP_TEST_TOKEN", raising=False)
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert is_loopback(host), host
        assert check_bind(ServeConfig(host=host, token_env="HELPDP_TEST_TOKEN")) is None
    for host in ("0.0.0.0", "::", "10.1.2.3", "example.org"):
        assert not is_loopback(host), host
        with pytest.raises(ValueError, match="HELPDP_TEST_TOKEN"):
            check_bind(ServeConfig(host=host, token_env="HELPDP_TEST_TOKEN"))
    # serve() refuses before it builds anything
    with pytest.raises(ValueError, match="reachable from other machines"):
        serve(ServeConfig(host="0.0.0.0", token_env="HELPDP_TEST_TOKEN", data="/nonexistent"))
    monkeypatch.setenv("HELPDP_TEST_TOKEN", "  s3cret  ")
    assert check_bind(ServeConfig(host="0.0.0.0", token_env="HELPDP_TEST_TOKEN")) == "s3cret"


def test_token_from_the_environment_is_enforced_on_loopback(server, monkeypatch):
    from starlette.testclient import TestClient

    monkeypatch.setenv("HELPDP_TEST_TOKEN", "env-token")
    app = create_app(server[2], CONFIG)  # the token is read from token_env
    with TestClient(app) as plain:
        assert plain.get("/scenarios").status_code == 401
    with TestClient(app, headers={"Authorization": "Bearer env-token"}) as authed:
        assert authed.get("/scenarios").json()["scenarios"] == [{"name": "notes_1", "tasks": 3}]
    monkeypatch.delenv("HELPDP_TEST_TOKEN")
    with TestClient(create_app(server[2], CONFIG)) as open_loopback:
        assert open_loopback.get("/scenarios").status_code == 200
