"""``python -m helpdp.collect.awm.serve``: AWM environments over HTTP/WebSocket, OpenEnv-style.

Lets a GPU trainer drive episodes on CPU hosts. The server owns an
:class:`~helpdp.collect.awm.env.EnvPool`; every session holds one environment.

HTTP (shapes follow OpenEnv's ``HTTPEnvServer``)::

    GET  /health                      {"status": "healthy"} (no token needed)
    GET  /schema                      JSON schemas of action / observation / state
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
  ``max_sessions`` in all and ``max_sessions_per_client`` per client address.
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
import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.collect.awm.clock import clock_field
from helpdp.collect.awm.dataset import AWMDataset
from helpdp.collect.awm.env import AWMEnv, EnvConfig, EnvPool, StepResult
from helpdp.collect.awm.protocol import Action, Failure, parse_turn
from helpdp.collect.worlds import WORLDS_DIR

__all__ = [
    "AsyncEnvClient",
    "DEFAULT_TOKEN_ENV",
    "EnvClient",
    "ServeConfig",
    "create_app",
    "check_bind",
    "serve",
    "trusted_proxies",
    "uvicorn_config",
]

DEFAULT_TOKEN_ENV = "HELPDP_SERVE_TOKEN"
_log = logging.getLogger("helpdp.collect.awm.serve")


@dataclass
class ServeConfig:
    """``python -m helpdp.collect.awm.serve``: serve AWM environments to remote trainers."""

    data: str | None = _f(
        None, "AWM-format directory; null: the demo worlds in helpdp/collect/worlds/"
    )
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
    env: EnvConfig = _f(EnvConfig(), "episode rules, sandbox limits, rewards, judge")
    clock: str = clock_field()


class SessionError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class _Session:
    sid: str
    client: str  # the client's address: a session answers only to it
    kind: str  # "http" or "ws": a WebSocket session is reachable only through its socket
    env: AWMEnv | None = None
    closed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)


# ---------------------------------------------------------------------------
# the wire format (pydantic: validated on the way in, its JSON Schema at /schema)
# ---------------------------------------------------------------------------


class TurnAction(BaseModel):
    """A model turn with the full protocol (tags, final answer)."""

    type: Literal["turn"]
    text: str


class ListToolsAction(BaseModel):
    """OpenEnv's ListToolsAction."""

    type: Literal["list_tools"]


class CallToolAction(BaseModel):
    """One tool call; ``arguments`` an object or its JSON text."""

    type: Literal["call_tool"]
    tool_name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class AskExpertAction(BaseModel):
    """The ``ask_expert`` meta-function."""

    type: Literal["ask_expert"]
    arguments: dict[str, Any] | None = None


ActionModel = Annotated[
    TurnAction | ListToolsAction | CallToolAction | AskExpertAction, Field(discriminator="type")
]
_ACTION = TypeAdapter(ActionModel)


class Observation(BaseModel):
    """What a step returns under ``observation``."""

    text: str
    done: bool
    reward: float | None
    metadata: dict[str, Any]
    tools: list[dict[str, Any]] | None = None


class EpisodeState(BaseModel):
    """``GET /state``."""

    episode_id: str | None
    step_count: int
    scenario: str | None = None
    task_idx: int | None = None
    done: bool | None = None
    format_errors: int | None = None
    failures: dict[str, int] | None = None


def _request_error(e: ValidationError) -> str:
    """One line naming the first problem of a refused action."""
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()) if not str(p).endswith("Action"))
    return f"invalid action: {where + ': ' if where else ''}{err.get('msg', 'invalid')}"


def action_from_dict(data: Any, *, expert_enabled: bool = True) -> Action:
    """A JSON action (:data:`ActionModel`) as a protocol :class:`Action`.

    A request that is not an action is refused (:class:`SessionError` 422, naming the
    problem); an action whose content breaks the protocol (a turn without a valid tool
    call, arguments that are not JSON, an empty tool name, ``ask_expert`` while the
    expert is off) is the agent's: an invalid action, answered as a step.
    """
    try:
        action = _ACTION.validate_python(data)
    except ValidationError as e:
        raise SessionError(422, _request_error(e)) from None
    if isinstance(action, TurnAction):
        return parse_turn(action.text, expert_enabled=expert_enabled)
    if isinstance(action, ListToolsAction):
        return Action("list_tools")
    if isinstance(action, CallToolAction):
        arguments = action.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError) as e:
                return Action(
                    "invalid", failure=Failure.INVALID_JSON, message=f"arguments are not JSON: {e}"
                )
        if not action.tool_name.strip():
            return Action(
                "invalid", failure=Failure.INVALID_ARGUMENTS, message="call_tool needs a tool_name"
            )
        return Action("call_tool", tool_name=action.tool_name.strip(), arguments=arguments)
    if expert_enabled:
        return Action("ask_expert", arguments=action.arguments or {})
    return Action(
        "invalid",
        failure=Failure.UNKNOWN_META_FUNCTION,
        message="unknown action type 'ask_expert'",
    )


#: step metadata a client may see; anything else (the verifier's result, messages and
#: tracebacks under ``verification``, keys added later) stays on the server
_PUBLIC_INFO = (
    "turn",
    "action",
    "failure",
    "status_code",
    "format_error",
    "latency_ms",
    "app_ms",
    "truncated",
    "final_answer",
    "ask_expert",
    "outcome",
    "valid",
    "format_errors",
    "failures",
    "turns",
    "tool_calls",
    "expert_calls",
    "episode_id",
    "scenario",
    "task_idx",
)
_WORD = re.compile(r"^[a-z_]{1,32}$")


def public_info(info: dict[str, Any]) -> dict[str, Any]:
    """The part of a step's ``info`` that may leave the server (see :data:`_PUBLIC_INFO`)."""
    out = {k: info[k] for k in _PUBLIC_INFO if k in info}
    verification = info.get("verification")
    if isinstance(verification, dict):  # how it was verified, by fixed words only
        out["verification"] = {
            k: verification[k]
            for k in ("mode", "status")
            if isinstance(verification.get(k), str) and _WORD.match(verification[k])
        }
    return out


def _observation(result: StepResult, env: AWMEnv, action: Action) -> dict[str, Any]:
    obs: dict[str, Any] = {
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


async def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
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

    def get(self, sid: Any, client: str, kind: str = "http") -> _Session:
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
    async def reset(self, data: dict[str, Any], session: _Session) -> dict[str, Any]:
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

    async def step(self, data: dict[str, Any], session: _Session) -> dict[str, Any]:
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

    def state(self, session: _Session) -> dict[str, Any]:
        if session.closed:
            raise SessionError(404, "unknown session: call /reset first")
        session.last_used = time.monotonic()
        if session.env is None:
            return {"episode_id": None, "step_count": 0, "session_id": session.sid}
        return {**session.env.state(), "session_id": session.sid}


def _kind(e: BaseException) -> str:
    """What may be told about a failure: the sandbox's kind of error, not its text."""
    kind = getattr(e, "kind", None)
    return f" ({kind})" if isinstance(kind, str) and _WORD.match(kind) else ""


# ---------------------------------------------------------------------------
# the guard: bearer token and size limits, before any body is read
# ---------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """True for an address that only this machine can reach (``localhost`` included)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _read_token(config: ServeConfig) -> str | None:
    token = os.environ.get(config.token_env, "") if config.token_env else ""
    return token.strip() or None


class _Guard:
    """ASGI middleware: checks the bearer token of every request and WebSocket handshake
    (``/health`` excepted), and limits request bodies and WebSocket messages to
    ``max_bytes`` without buffering more than that."""

    def __init__(self, app: Any, token: str | None, max_bytes: int):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_bytes = max_bytes

    def _authorized(self, scope: dict) -> bool:
        if self.expected is None or scope.get("path") == "/health":
            return True
        given = b""
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                given = value
        return hmac.compare_digest(given, self.expected)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: dict, receive: Any, send: Any) -> None:
        if not self._authorized(scope):
            # read (and drop) a body within the limit first: closing a connection with an
            # unread request body in it resets it, and the client may never see the 401
            drained = await _drain(receive, self.max_bytes)
            await _refuse(
                send, 401, "missing or wrong bearer token", bearer=True, close=not drained
            )
            return
        length = None
        for name, value in scope.get("headers") or []:
            if name.lower() == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await _refuse(send, 400, "bad Content-Length")
                    return
        if length is not None and length > self.max_bytes:
            await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
            return
        # count what arrives (chunked bodies, or a Content-Length that lies), keep at most
        # max_bytes, then replay it to the app
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _websocket(self, scope: dict, receive: Any, send: Any) -> None:
        if not self._authorized(scope):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})  # -> HTTP 403
            return

        async def bounded() -> dict:
            message = await receive()
            if message["type"] == "websocket.receive":
                data = message.get("bytes") or b""
                text = message.get("text")
                size = len(text.encode("utf-8", "surrogatepass")) if text else len(data)
                if size > self.max_bytes:
                    with contextlib.suppress(Exception):
                        await send({"type": "websocket.close", "code": 1009})
                    return {"type": "websocket.disconnect", "code": 1009}
            return message

        await self.app(scope, bounded, send)


async def _drain(receive: Any, limit: int) -> bool:
    """Read a request body to its end and drop it; False when it exceeds ``limit``
    bytes or the client went away (then the connection is closed instead)."""
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return False
        size += len(message.get("body", b""))
        if size > limit:
            return False
        if not message.get("more_body", False):
            return True


async def _refuse(
    send: Any, status: int, message: str, *, bearer: bool = False, close: bool = True
) -> None:
    headers = [(b"content-type", b"application/json")]
    if close:
        headers.append((b"connection", b"close"))
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": message}).encode()})


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
    app.add_middleware(_Guard, token=token, max_bytes=config.max_body_bytes)

    @app.exception_handler(SessionError)
    async def _session_error(_request, exc: SessionError):
        return JSONResponse(status_code=exc.status, content={"detail": exc.message})

    @app.get("/health")
    async def health() -> dict:
        return {"status": "healthy"}

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


SCHEMA = {
    "action": _ACTION.json_schema(),
    "observation": Observation.model_json_schema(),
    "state": EpisodeState.model_json_schema(),
}


# ---------------------------------------------------------------------------
# clients
# ---------------------------------------------------------------------------


def _auth_headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get(DEFAULT_TOKEN_ENV, "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


class EnvClient:
    """Blocking HTTP client of :func:`create_app`'s server (one session).

    ``token``: the server's bearer token; None: ``$HELPDP_SERVE_TOKEN`` if set.
    ``session_id``: a session this client already holds (ids are made by the server).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 120.0,
        session_id: str | None = None,
        token: str | None = None,
    ):
        import httpx

        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout, headers=_auth_headers(token)
        )
        self.session_id = session_id

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.post(path, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def _get(self, path: str, **params: Any) -> dict[str, Any]:
        response = self._http.get(path, params=params or None)
        if response.status_code >= 400:
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def health(self) -> dict[str, Any]:
        return self._get("/health")

    def scenarios(self) -> list[dict[str, Any]]:
        return self._get("/scenarios")["scenarios"]

    def reset(
        self, scenario: str | None = None, task_idx: int = 0, **kwargs: Any
    ) -> dict[str, Any]:
        body = {"scenario": scenario, "task_idx": task_idx, **kwargs}
        if self.session_id:
            body["session_id"] = self.session_id
        reply = self._post("/reset", body)
        self.session_id = reply["session_id"]
        return reply

    def step(self, text: str) -> dict[str, Any]:
        """One model turn (tool-call tags or a final answer)."""
        return self.act({"type": "turn", "text": text})

    def list_tools(self) -> dict[str, Any]:
        return self.act({"type": "list_tools"})

    def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | str | None = None
    ) -> dict[str, Any]:
        return self.act({"type": "call_tool", "tool_name": tool_name, "arguments": arguments or {}})

    def act(self, action: dict[str, Any]) -> dict[str, Any]:
        return self._post("/step", {"action": action, "session_id": self.session_id})

    def state(self) -> dict[str, Any]:
        return self._get("/state", session_id=self.session_id)

    def close(self) -> None:
        if self.session_id:
            with contextlib.suppress(Exception):
                self._post("/close", {"session_id": self.session_id})
        self._http.close()

    def __enter__(self) -> EnvClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncEnvClient:
    """Asyncio WebSocket client (one session per connection); use ``async with``.

    ``token``: the server's bearer token; None: ``$HELPDP_SERVE_TOKEN`` if set.
    """

    def __init__(self, url: str, *, timeout: float = 120.0, token: str | None = None):
        self.url = url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/")
        if not self.url.endswith("/ws"):
            self.url += "/ws"
        self.timeout = timeout
        self._headers = _auth_headers(token)
        self._ws = None

    async def __aenter__(self) -> AsyncEnvClient:
        import websockets

        self._ws = await websockets.connect(
            self.url,
            open_timeout=self.timeout,
            max_size=2**26,
            additional_headers=self._headers or None,
        )
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _call(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self._ws is not None, "use 'async with AsyncEnvClient(...)'"
        await self._ws.send(json.dumps({"type": kind, "data": data or {}}))
        reply = json.loads(await asyncio.wait_for(self._ws.recv(), self.timeout))
        if reply.get("type") == "error":
            raise RuntimeError(reply["data"].get("message"))
        return reply["data"]

    async def reset(
        self, scenario: str | None = None, task_idx: int = 0, **kwargs: Any
    ) -> dict[str, Any]:
        return await self._call("reset", {"scenario": scenario, "task_idx": task_idx, **kwargs})

    async def step(self, text: str) -> dict[str, Any]:
        return await self._call("step", {"type": "turn", "text": text})

    async def act(self, action: dict[str, Any]) -> dict[str, Any]:
        return await self._call("step", action)

    async def state(self) -> dict[str, Any]:
        return await self._call("state")

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.send(json.dumps({"type": "close"}))
            await self._ws.close()
            self._ws = None


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


def uvicorn_config(app: Any, config: ServeConfig, **overrides: Any):
    """The ``uvicorn.Config`` that serves ``app`` with ``config``'s limits (WebSocket
    messages over ``max_body_bytes`` are refused by the protocol, before buffering)."""
    import uvicorn

    proxies = trusted_proxies(config)
    kwargs: dict[str, Any] = {
        "host": config.host,
        "port": config.port,
        "log_level": "warning",
        "ws_max_size": config.max_body_bytes,
        "server_header": False,
        # the client address is the socket's unless a proxy is named (never from the
        # FORWARDED_ALLOW_IPS environment variable, which uvicorn reads otherwise)
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": proxies or [],
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


def serve(config: ServeConfig) -> None:
    """Run the server until interrupted (blocking)."""
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
        app = create_app(pool, config, token=token or "")
        print(
            f"serving {len(pool.names())} scenarios on http://{config.host}:{config.port}"
            + (" (bearer token required)" if token else " (no token: loopback only)"),
            flush=True,
        )
        uvicorn.Server(uvicorn_config(app, config)).run()
    finally:
        pool.close()


def main() -> None:
    """``python -m helpdp.collect.awm.serve``."""
    from helpdp.collect.awm.sandbox import COMMAND_ERRORS

    run_app(
        "helpdp.collect.awm.serve",
        ServeConfig,
        serve,
        config_name="serve",
        errors=COMMAND_ERRORS,
        instance=True,
    )


if __name__ == "__main__":
    sys.exit(main())
