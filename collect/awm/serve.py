"""``python -m collect.awm.serve``: AWM environments over HTTP/WebSocket, OpenEnv-style.

Lets a GPU trainer drive episodes on CPU hosts. The server owns an
:class:`~collect.awm.env.EnvPool`; every session holds one environment.
Its parts: the sessions and routes and the command line (here), the wire format
(:mod:`~collect.awm.wire`), the guard of the bearer token and size limits
(:mod:`~collect.awm.http_guard`) and the clients (:mod:`~collect.awm.client`:
``EnvClient`` over HTTP, ``AsyncEnvClient`` over WebSocket).

HTTP (shapes follow OpenEnv's ``HTTPEnvServer``)::

    GET  /health                      {"status": "healthy"} (no token needed)
    GET  /schema                      JSON schemas of action / observation / state
    GET  /capacity                    {max_sessions, max_sessions_per_client, active_sessions}
    GET  /scenarios                   harness only: served scenarios and task counts
    POST /reset  {scenario, task_idx?, episode_id?, session_id?}
         -> {"observation": {...}, "reward": null, "done": false, "session_id": "..."}
    POST /step   {"action": ACTION, "session_id": "..."}
         -> {"observation": {...}, "reward": float|null, "done": bool}
    GET  /state?session_id=...        episode state (step_count, format_errors, ...)
    POST /close  {"session_id": "..."}

    ACTION = {"type": "turn", "text": "<model output>"}          full protocol (tags, final answer)
           | {"type": "list_tools"}                               OpenEnv ListToolsAction
           | {"type": "call_tool", "tool_name": "...", "arguments": {...} | "<json>"}
           | {"type": "ask_expert", "arguments": {...}}

    observation = {"text": str, "done": bool, "reward": float|null, "metadata": info,
                   "tools": [...] (list_tools only)}; reset's observation carries
                   episode_id, scenario, task_idx, task, system_prompt, messages.

WebSocket ``/ws`` (one session per connection): send ``{"type": "reset"|"step"|
"state"|"close", "data": {...}}`` (``step``'s data is the ACTION), receive
``{"type": "observation"|"state"|"error", "data": {...}}``.

Verification and scenario listing are not actions: the agent can reach only
the app's visible tools (hidden names such as ``verify``/``done`` are refused
whatever way they are sent).

Security (the environments run dataset code; the clients are remote):

- **Sessions** get server-made, unguessable ids (``secrets.token_urlsafe``). ``/reset``
  without a ``session_id`` opens one; with one it must be a live session of the same
  client (an unknown id is refused, never adopted). A WebSocket session is reachable
  only through its connection. A closed or expired session is invalidated: its
  environment goes back to the pool only once no request is using it.
- **Authentication**: a bearer token (``Authorization: Bearer <token>``) read from the
  environment variable named by ``token_env``; required to bind a non-loopback host,
  enforced on loopback when set; compared in constant time.
- **Limits**: request bodies and WebSocket messages of at most ``max_body_bytes``
  (refused from ``Content-Length``, else counted while streaming: never buffered);
  ``max_sessions`` in all and ``max_sessions_per_client`` per client address (a
  WebSocket session is freed the moment its connection ends; an HTTP one at ``/close``
  or after ``session_idle_s``).
- **Connections** (below the app, before any header is read: the token is in the
  headers): ``connections.*``, :func:`~collect.awm.http_guard.guarded_protocol` (a header
  timeout, a cap below the open-file limit, a cap per client address), so connections
  that never finish their headers (slowloris) cannot use up the server's descriptors.
- **Client address**: the socket's peer. ``X-Forwarded-For`` is believed only from a
  reverse proxy listed in ``trusted_proxies`` (empty by default; uvicorn's own default
  would believe it from loopback, so any local token holder could claim many addresses).
- **What clients see**: the outcome, validity and reward of a verification, never the
  verifier's result, messages or tracebacks; errors of the server name a kind, not
  worker output (details go to the server log).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from fastapi import Body, FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from collect.awm.clock import clock_field
from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig, EnvPool
from collect.awm.episode import StepResult
from collect.awm.http_guard import (
    DEFAULT_TOKEN_ENV,
    ConnectionLimits,
    _Guard,
    guarded_protocol,
    is_loopback,
    listen_backlog,
)
from collect.awm.protocol import Action
from collect.awm.sandbox import COMMAND_ERRORS
from collect.awm.wire import SCHEMA, SessionError, _kind, action_from_dict, public_info
from collect.worlds import WORLDS_DIR
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

R = TypeVar("R")

__all__ = [
    "ServeConfig",
    "create_app",
    "check_bind",
    "serve",
    "trusted_proxies",
    "uvicorn_config",
]

_log = logging.getLogger("collect.awm.serve")


@dataclass
class ServeConfig:
    """``python -m collect.awm.serve``: serve AWM environments to remote trainers."""

    data: str | None = _f(None, "AWM-format directory; null: the demo worlds in collect/worlds/")
    scenarios: list[str] = _f([], "serve only these scenarios; empty: all that can run")
    host: str = _f(
        "127.0.0.1",
        "interface to bind (0.0.0.0 to accept remote trainers: then a token is required)",
    )
    port: int = _f(8000, "TCP port")
    token_env: str = _f(
        DEFAULT_TOKEN_ENV,
        "name of the environment variable holding the bearer token clients must send "
        "(Authorization: Bearer ...); required for a non-loopback host, enforced when set",
    )
    max_sessions: int = _f(16, "concurrent sessions (each holds one app worker process)")
    max_sessions_per_client: int = _f(8, "concurrent sessions of one client (IP address)")
    trusted_proxies: list[str] = _f(
        [],
        "addresses (or CIDR ranges) of reverse proxies whose X-Forwarded-For/-Proto headers "
        "name the client; empty: the client is the socket's peer and those headers are ignored",
    )
    max_body_bytes: int = _f(
        1 << 20, "largest HTTP request body or WebSocket message, bytes (larger: refused)"
    )
    session_idle_s: float = _f(900.0, "close sessions idle for this long, s")
    connections: ConnectionLimits = _f(
        ConnectionLimits(),
        "limits on TCP connections, held before a request's headers (and its token) are read",
    )
    env: EnvConfig = _f(EnvConfig(), "episode rules, sandbox limits, rewards, judge")
    clock: str = clock_field()


@dataclass
class _Session:
    sid: str
    client: str  # the client's address: a session answers only to it
    kind: str  # "http" or "ws": a WebSocket session is reachable only through its socket
    env: AWMEnv | None = None
    closed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)


def _observation(result: StepResult, env: AWMEnv, action: Action) -> dict[str, JSON]:
    obs: dict[str, JSON] = {
        "text": result.observation,
        "done": result.done,
        "reward": result.reward,
        "metadata": public_info(result.info),
    }
    if action.kind == "list_tools":
        obs["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in env.tools
        ]
    if action.kind == "call_tool":
        obs["tool_name"] = action.tool_name
    return obs


async def _in_thread(fn: Callable[..., R], *args: object, **kwargs: object) -> R:
    """``asyncio.to_thread`` that, when cancelled, still waits for the thread (which cannot
    be stopped): the caller keeps its session lock while the environment is in use."""
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
        except BaseException:  # noqa: BLE001 - the thread's own error, raised below
            break
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


class _Server:
    def __init__(self, pool: EnvPool, config: ServeConfig):
        self.pool = pool
        self.config = config
        self.sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    # -- sessions -----------------------------------------------------------------------
    def open(self, client: str, kind: str) -> _Session:
        """A new session with a server-made id, within the global and per-client caps."""
        with self._lock:
            self._expire()
            if len(self.sessions) >= self.config.max_sessions:
                raise SessionError(
                    503, f"too many sessions ({self.config.max_sessions}); close one first"
                )
            mine = sum(1 for s in self.sessions.values() if s.client == client)
            if mine >= self.config.max_sessions_per_client:
                raise SessionError(
                    429,
                    f"this client holds {mine} sessions "
                    f"(max_sessions_per_client={self.config.max_sessions_per_client}); "
                    "close one first",
                )
            session = _Session(secrets.token_urlsafe(32), client, kind)
            self.sessions[session.sid] = session
            return session

    def get(self, sid: JSON, client: str, kind: str = "http") -> _Session:
        """The live session ``sid`` of this client (one answer for every kind of miss)."""
        with self._lock:
            session = self.sessions.get(sid) if isinstance(sid, str) else None
        if session is None or session.client != client or session.kind != kind:
            raise SessionError(404, "unknown session: call /reset first")
        return session

    def _invalidate(self, session: _Session) -> None:
        """Mark ``session`` closed; its environment goes back to the pool only when no
        request holds the session (else the request that holds it returns it)."""
        session.closed = True
        if not session.lock.locked():
            self._retire(session)

    def _retire(self, session: _Session) -> None:
        env, session.env = session.env, None
        if env is not None:
            self.pool.release(env)

    def _expire(self) -> None:
        now = time.monotonic()
        for sid, s in list(self.sessions.items()):
            if now - s.last_used > self.config.session_idle_s and not s.lock.locked():
                self.sessions.pop(sid)
                self._invalidate(s)

    def close_session(self, session: _Session) -> None:
        with self._lock:
            if self.sessions.get(session.sid) is session:
                del self.sessions[session.sid]
        self._invalidate(session)

    @contextlib.asynccontextmanager
    async def _use(self, session: _Session):
        """Hold the session for one request; refuse a closed one, and return the
        environment of one closed meanwhile."""
        async with session.lock:
            try:
                if session.closed:
                    raise SessionError(404, "unknown session: call /reset first")
                session.last_used = time.monotonic()
                yield
            finally:
                if session.closed:
                    self._retire(session)

    # -- episodes -----------------------------------------------------------------------
    async def reset(self, data: dict[str, JSON], session: _Session) -> dict[str, JSON]:
        scenario = data.get("scenario")
        names = self.pool.names()
        if scenario is None and len(names) == 1:
            scenario = names[0]
        if not isinstance(scenario, str) or scenario not in names:
            raise SessionError(404, f"unknown scenario {str(scenario)[:100]!r}")
        try:
            task_idx = int(data.get("task_idx", 0))
        except (TypeError, ValueError):
            raise SessionError(422, "task_idx must be an integer") from None
        task, episode_id = data.get("task"), data.get("episode_id")
        if not isinstance(task, str | None) or not isinstance(episode_id, str | None):
            raise SessionError(422, "task and episode_id must be strings")
        async with self._use(session):
            if session.env is not None and session.env.scenario.name != scenario:
                self.pool.release(session.env)
                session.env = None
            if session.env is None:
                try:
                    session.env = await _in_thread(self.pool.acquire, scenario)
                except Exception as e:  # noqa: BLE001
                    _log.warning("cannot start %s: %r", scenario, e)
                    raise SessionError(500, f"cannot start {scenario}{_kind(e)}") from None
            env = session.env
            try:
                first = await _in_thread(env.reset, task_idx, task=task, episode_id=episode_id)
            except IndexError:
                raise SessionError(404, f"no task {task_idx} in {scenario}") from None
            except Exception as e:  # noqa: BLE001 - worker failed to start
                _log.warning("reset of %s failed: %r", scenario, e)
                raise SessionError(500, f"reset failed{_kind(e)}") from None
        return {
            "observation": {
                **first.as_dict(),
                "text": first.task,
                "done": False,
                "reward": None,
                "metadata": {},
            },
            "reward": None,
            "done": False,
            "session_id": session.sid,
        }

    async def step(self, data: dict[str, JSON], session: _Session) -> dict[str, JSON]:
        action_data = data.get("action", data)
        async with self._use(session):
            env = session.env
            if env is None or env.done:
                raise SessionError(409, "no episode in progress: call reset first")
            action = action_from_dict(action_data, expert_enabled=env.config.expert_enabled)
            turn_text = action_data.get("text") if isinstance(action_data, dict) else None
            if not isinstance(turn_text, str | None):
                turn_text = None
            result = await _in_thread(env.act, action, turn_text=turn_text)
            observation = _observation(result, env, action)
        return {"observation": observation, "reward": result.reward, "done": result.done}

    def state(self, session: _Session) -> dict[str, JSON]:
        if session.closed:
            raise SessionError(404, "unknown session: call /reset first")
        session.last_used = time.monotonic()
        if session.env is None:
            return {"episode_id": None, "step_count": 0, "session_id": session.sid}
        return {**session.env.state(), "session_id": session.sid}


def _read_token(config: ServeConfig) -> str | None:
    token = os.environ.get(config.token_env, "") if config.token_env else ""
    return token.strip() or None


def _client(conn: Request | WebSocket) -> str:
    return conn.client.host if conn.client else "unknown"


def create_app(pool: EnvPool, config: ServeConfig | None = None, *, token: str | None = None):
    """The ASGI app serving ``pool`` (the caller owns and closes the pool).

    ``token``: the bearer token clients must send; None: read from the environment
    variable ``config.token_env`` (unset or empty: no token is asked for).
    """
    config = config or ServeConfig()
    token = token if token is not None else _read_token(config)
    server = _Server(pool, config)
    app = FastAPI(title="helpdp AWM environment server", version="1.0")
    app.state.server = server
    app.add_middleware(
        _Guard,
        token=token,
        max_bytes=config.max_body_bytes,
        drain_timeout_s=config.connections.header_timeout_s,  # a refused request's body
    )

    @app.exception_handler(SessionError)
    async def _session_error(_request, exc: SessionError):
        return JSONResponse(status_code=exc.status, content={"detail": exc.message})

    @app.get("/health")
    async def health() -> dict:
        return {"status": "healthy"}

    @app.get("/capacity")
    async def capacity() -> dict:
        with server._lock:
            server._expire()
            active = len(server.sessions)
        return {
            "max_sessions": config.max_sessions,
            "max_sessions_per_client": config.max_sessions_per_client,
            "active_sessions": active,
        }

    @app.get("/scenarios")
    async def scenarios() -> dict:
        out = []
        for name in pool.names():
            pieces = pool.dataset.pieces(name)
            if {"env", "db", "tasks"} <= pieces:
                out.append({"name": name, "tasks": pool.scenario(name).n_tasks})
        return {"scenarios": out}

    @app.get("/schema")
    async def schema() -> dict:
        return SCHEMA

    @app.post("/reset")
    async def reset(request: Request, body: dict = Body(default_factory=dict)) -> dict:  # noqa: B008
        client = _client(request)
        sid = body.get("session_id")
        if sid is None:
            session = server.open(client, "http")
            try:
                return await server.reset(body, session)
            except SessionError:
                server.close_session(session)  # a failed first reset leaves no session behind
                raise
        return await server.reset(body, server.get(sid, client))

    @app.post("/step")
    async def step(request: Request, body: dict = Body(...)) -> dict:  # noqa: B008
        return await server.step(body, server.get(body.get("session_id"), _client(request)))

    @app.get("/state")
    async def state(request: Request, session_id: str = Query(...)) -> dict:  # noqa: B008
        return server.state(server.get(session_id, _client(request)))

    @app.post("/close")
    async def close(request: Request, body: dict = Body(...)) -> dict:  # noqa: B008
        try:
            session = server.get(body.get("session_id"), _client(request))
        except SessionError:
            return {"closed": False}
        server.close_session(session)
        return {"closed": True}

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        session: _Session | None = None
        try:
            while True:
                try:
                    message = json.loads(await socket.receive_text())
                except (ValueError, RecursionError):
                    await socket.send_json(
                        {"type": "error", "data": {"message": "message is not JSON"}}
                    )
                    continue
                kind = message.get("type") if isinstance(message, dict) else None
                data = (message.get("data") if isinstance(message, dict) else None) or {}
                try:
                    if not isinstance(data, dict):
                        raise SessionError(400, "data must be a JSON object")
                    if kind == "reset":
                        if session is None or session.closed:
                            session = server.open(_client(socket), "ws")
                        reply = {"type": "observation", "data": await server.reset(data, session)}
                    elif kind == "step":
                        if session is None:
                            raise SessionError(409, "no episode in progress: send reset first")
                        reply = {
                            "type": "observation",
                            "data": await server.step({"action": data}, session),
                        }
                    elif kind == "state":
                        reply = {"type": "state", "data": server.state(session) if session else {}}
                    elif kind == "close":
                        break
                    else:
                        raise SessionError(400, f"unknown message type {str(kind)[:50]!r}")
                except SessionError as e:
                    reply = {"type": "error", "data": {"message": e.message, "status": e.status}}
                await socket.send_json(reply)
        except WebSocketDisconnect:
            pass
        finally:
            if session is not None:
                server.close_session(session)
            with contextlib.suppress(Exception):
                await socket.close()

    return app


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


def uvicorn_config(app: ASGIApp, config: ServeConfig, **overrides: object) -> uvicorn.Config:
    """The ``uvicorn.Config`` that serves ``app`` with ``config``'s limits: WebSocket
    messages over ``max_body_bytes`` are refused by the protocol, before buffering;
    uvicorn's HTTP protocol (the one ``http=auto`` picks) holds ``config.connections``
    (:func:`~collect.awm.http_guard.guarded_protocol`) and the listen backlog is kept
    within the open-file limit (:func:`~collect.awm.http_guard.listen_backlog`).
    ``overrides``: more ``uvicorn.Config`` arguments (an ``http`` given here replaces
    the guarded protocol)."""
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    proxies = trusted_proxies(config)
    kwargs: dict[str, object] = {
        "host": config.host,
        "port": config.port,
        "log_level": "warning",
        "ws_max_size": config.max_body_bytes,
        "server_header": False,
        # the client address is the socket's unless a proxy is named (never from the
        # FORWARDED_ALLOW_IPS environment variable, which uvicorn reads otherwise)
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": proxies or [],
        "http": guarded_protocol(AutoHTTPProtocol, config.connections),
        "backlog": listen_backlog(),  # what one accept burst may take
        **overrides,
    }
    return uvicorn.Config(app, **kwargs)


def trusted_proxies(config: ServeConfig) -> list[str]:
    """``config.trusted_proxies`` checked: IP addresses or networks only (``ValueError``
    naming the entry otherwise; ``*`` is refused: it would let any client name itself)."""
    out = []
    for entry in config.trusted_proxies:
        text = str(entry).strip()
        try:
            ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(
                f"trusted_proxies: {text!r} is not an IP address or network (CIDR); list "
                "the reverse proxies whose X-Forwarded-For is to be believed"
            ) from None
        out.append(text)
    return out


def check_bind(config: ServeConfig) -> str | None:
    """The bearer token to enforce; raises ``ValueError`` for a non-loopback host
    without one, or for a ``trusted_proxies`` entry that is not an address."""
    trusted_proxies(config)
    token = _read_token(config)
    if token is None and not is_loopback(config.host):
        raise ValueError(
            f"host={config.host} is reachable from other machines: set a bearer token in "
            f"the environment variable {config.token_env or DEFAULT_TOKEN_ENV!r} "
            "(token_env names it), e.g. export "
            f"{config.token_env or DEFAULT_TOKEN_ENV}=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return token


def run_server(config: ServeConfig, make_app: Callable[..., ASGIApp], what: str) -> None:
    """Serve ``make_app(pool, config, token=...)`` until interrupted (blocking): the bind
    checked first, the pool built on ``config``'s worlds and closed on the way out
    (``what``: how the start line names the service)."""
    import signal

    import uvicorn

    token = check_bind(config)  # before anything starts
    # uvicorn re-raises SIGTERM after its graceful shutdown; exit through Python so
    # that the pool's workers and files are cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    dataset = AWMDataset(config.data or WORLDS_DIR)
    pool = EnvPool(
        dataset, config.env, scenarios=config.scenarios or None, clock=dataset.clock(config.clock)
    )
    try:
        app = make_app(pool, config, token=token or "")
        print(
            f"serving {len(pool.names())} scenarios{what} on http://{config.host}:{config.port}"
            + (" (bearer token required)" if token else " (no token: loopback only)"),
            flush=True,
        )
        uvicorn.Server(uvicorn_config(app, config)).run()
    finally:
        pool.close()


def serve(config: ServeConfig) -> None:
    """Run the server until interrupted (blocking)."""
    run_server(config, create_app, "")


def main() -> None:
    """``python -m collect.awm.serve``."""

    run_app(
        "collect.awm.serve",
        ServeConfig,
        serve,
        config_name="serve",
        errors=COMMAND_ERRORS,
    )


if __name__ == "__main__":
    sys.exit(main())
