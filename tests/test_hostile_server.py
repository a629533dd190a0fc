"""Slowloris against both servers (``python -m collect.awm.serve`` and
``python -m collect.awm.openenv_server``).

The bearer token is in a request's headers, so until they are in any client may hold a
connection. 1,100 connections that never finished their headers used up a server's
file descriptors (uvicorn has no header timeout: its keep-alive timer stops at the first
byte) and honest requests failed 5 of 5 over 55 s. Here, scaled to a test, for each
server (the OpenEnv one where ``openenv`` is installed):

* the command itself, under an open-file limit of 256, against 300 idle half-header
  connections: an honest request with the token still gets its answer (before the
  connection limits it hung: the server could not accept it);
* in process, with the limits lowered by config (50 connections, 20 of one client):
  connections of one address beyond 20, then of all beyond 50, close the oldest ones
  still waiting for their headers, an honest request still succeeds, the idle ones are
  closed after the header timeout, and the next request works; a WebSocket session
  (OpenEnv's own client) outlives the header timeout.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import resource
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from awm_helpers import served

from collect.awm.env import EnvConfig, EnvPool
from collect.worlds import WORLDS_DIR

needs_openenv = pytest.mark.skipif(
    importlib.util.find_spec("openenv") is None, reason="needs the openenv extra"
)
#: the two servers: the plain one and, where openenv is installed, the OpenEnv one
SERVERS = ["serve", pytest.param("openenv", marks=needs_openenv)]

TOKEN = "slowloris-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROOT = Path(__file__).resolve().parent.parent
HALF = b"GET /capacity HTTP/1.1\r\nHost: x\r\nX-Slow: "  # never ends its headers


def _idle(url: str, n: int, source: str = "127.0.0.1") -> list[socket.socket]:
    host, port = url.rsplit("//", 1)[1].split(":")
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source, 0))
        s.settimeout(10)
        s.connect((host, int(port)))
        s.sendall(HALF)
        out.append(s)
    return out


def _closed_by_server(s: socket.socket) -> bool:
    """The server closed ``s`` (EOF or reset); False while it is open and silent."""
    readable, _, _ = select.select([s], [], [], 0)
    if not readable:
        return False
    try:
        return s.recv(1 << 16, socket.MSG_PEEK) == b""
    except OSError as e:
        return e.errno in (errno.ECONNRESET, errno.EPIPE)


def _wait_closed(socks: list[socket.socket], n: int, within_s: float) -> int:
    """How many of ``socks`` the server has closed, once that is ``n`` (or the deadline)."""
    deadline = time.monotonic() + within_s
    while True:
        closed = sum(_closed_by_server(s) for s in socks)
        if closed >= n or time.monotonic() > deadline:
            return closed
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def _command_answers_through_idle_connections(module: str, tmp_path: Path) -> None:
    """``python -m module`` under an open-file limit of 256: 300 idle half-header
    connections, then an honest request (answered) and one without the token (refused)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({"HELPDP_SERVE_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)})
    args = [sys.executable, "-m", module, f"port={port}"]
    args += ["scenarios=[smart_home_1]", f"env.work_root={tmp_path / 'work'}"]
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_low_nofile
    )
    idle: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 600  # importing openenv is slow on a loaded machine
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        idle = _idle(url, 300)  # more than the server's 256 descriptors
        reply = httpx.get(f"{url}/capacity", headers=AUTH, timeout=20)
        assert reply.status_code == 200, reply.text
        assert reply.json()["active_sessions"] == 0
        refused = httpx.get(f"{url}/capacity", timeout=20)  # no token: refused, answered
        assert refused.status_code == 401
        for s in idle:
            s.close()
        again = httpx.get(f"{url}/capacity", headers=AUTH, timeout=20)  # once they are gone
        assert again.status_code == 200, again.text
        assert proc.poll() is None
    finally:
        for s in idle:
            s.close()
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    text = (tmp_path / "server.log").read_text()
    assert "Too many open files" not in text, text[-2000:]
    assert "connection limits (max_connections=128" in text, text[-2000:]  # half of 256


@needs_openenv
def test_the_command_answers_an_honest_request_through_300_idle_connections(tmp_path):
    _command_answers_through_idle_connections("collect.awm.openenv_server", tmp_path)


def test_the_plain_command_answers_an_honest_request_through_300_idle_connections(tmp_path):
    _command_answers_through_idle_connections("collect.awm.serve", tmp_path)


@pytest.fixture()
def pool(tmp_path):
    config = EnvConfig(expert_enabled=False, work_root=str(tmp_path / "work"))
    with EnvPool(WORLDS_DIR, config, scenarios=["smart_home_1"]) as pool:
        yield pool


def _server(pool, header_timeout_s: float, kind: str = "openenv"):
    """The uvicorn config of server ``kind`` (``serve``: collect.awm.serve's app,
    ``openenv``: the OpenEnv one) with lowered connection limits, and its protocol."""
    from collect.awm.http_guard import ConnectionLimits
    from collect.awm.serve import ServeConfig, create_app, uvicorn_config

    limits = ConnectionLimits(
        header_timeout_s=header_timeout_s, max_connections=50, max_connections_per_client=20
    )
    config = ServeConfig(max_sessions=2, connections=limits)
    if kind == "openenv":
        from collect.awm.openenv_server import create_openenv_app as create_app
    uv = uvicorn_config(create_app(pool, config, token=TOKEN), config, lifespan="off")
    return uv, uv.http


@pytest.mark.parametrize("kind", SERVERS)
def test_idle_connections_make_room_for_honest_ones_within_both_caps(pool, kind):
    uv, protocol = _server(pool, header_timeout_s=600.0, kind=kind)  # no timeout within the test
    with served(uv) as url:
        one = _idle(url, 30)  # one address, cap 20: each one past 20 closes the oldest
        assert _wait_closed(one, 10, 20) == 10
        assert [_closed_by_server(s) for s in one] == [True] * 10 + [False] * 20
        others = [s for i in range(2, 5) for s in _idle(url, 15, f"127.0.0.{i}")]
        # 20 + 45 = 65 over the cap of 50: the 15 oldest waiting connections are closed
        assert _wait_closed(one + others, 25, 20) == 25
        assert not any(_closed_by_server(s) for s in others)  # the oldest were one's
        reply = httpx.get(f"{url}/capacity", headers=AUTH, timeout=20)
        assert reply.status_code == 200 and reply.json()["max_sessions"] == 2
        assert _wait_closed(one + others, 26, 20) == 26  # room made for it, once more
        assert protocol.closed["evicted"] == 26 and protocol.max_connections == 50
        for s in one + others:
            s.close()


@pytest.mark.parametrize("kind", SERVERS)
def test_idle_connections_are_closed_after_the_header_timeout(pool, kind):
    uv, protocol = _server(pool, header_timeout_s=1.0, kind=kind)
    with served(uv) as url:
        idle = _idle(url, 15)
        assert _wait_closed(idle, 15, 30) == 15
        assert protocol.closed["header_timeout"] == 15 and protocol.closed["evicted"] == 0
        with httpx.Client(base_url=url, headers=AUTH, timeout=20) as client:
            assert client.get("/capacity").status_code == 200  # the next request works
            assert client.get("/capacity").json()["active_sessions"] == 0  # kept alive
        for s in idle:
            s.close()


@needs_openenv
def test_a_websocket_session_outlives_the_header_timeout(pool):
    from openenv.core.env_server.mcp_types import ListToolsAction
    from openenv.core.mcp_client import MCPToolClient

    uv, protocol = _server(pool, header_timeout_s=1.0)
    with served(uv) as url:
        client = MCPToolClient(base_url=url, headers=AUTH, message_timeout_s=120.0).sync()
        with client as env:
            obs = env.reset(scenario="smart_home_1", task_idx=0).observation
            assert {**obs.model_dump(), **(obs.model_extra or {})}["reward_type"] == "reset_ok"
            idle = _idle(url, 3)
            assert _wait_closed(idle, 3, 30) == 3  # the header timeout has passed since
            tools = env.step(ListToolsAction())  # the upgraded socket was left alone
            assert len(tools.observation.tools) == 29
        # the three, and the client's idle keep-alive HTTP connections (its /mcp calls)
        assert protocol.closed["header_timeout"] >= 3 and protocol.closed["evicted"] == 0
        for s in idle:
            s.close()
