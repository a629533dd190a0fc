"""``python -m collect.serve``: AWM environments over HTTP/WebSocket, OpenEnv-style.

Lets a GPU trainer drive episodes on CPU hosts. The server owns an
:class:`~collect.env.EnvPool`; every session holds one environment.

HTTP (shapes follow OpenEnv's ``HTTPEnvServer``)::

    GET  /health                      {"status": "healthy"}
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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Body, FastAPI, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from collect.awm import AWMDataset
from collect.clock import clock_field
from collect.env import AWMEnv, EnvConfig, EnvPool, StepResult
from collect.protocol import Action, Failure, parse_turn
from helpdp.config import doc_field as _f
from helpdp.config import register_help

__all__ = ["AsyncEnvClient", "EnvClient", "ServeConfig", "create_app", "serve", "WORLDS_DIR"]

WORLDS_DIR = Path(__file__).resolve().parent / "worlds"


@dataclass
class ServeConfig:
    """``python -m collect.serve``: serve AWM environments to remote trainers."""

    data: str | None = _f(None, "AWM-format directory; null: the demo worlds in collect/worlds/")
    scenarios: list[str] = _f([], "serve only these scenarios; empty: all that can run")
    host: str = _f("127.0.0.1", "interface to bind (0.0.0.0 to accept remote trainers)")
    port: int = _f(8000, "TCP port")
    max_sessions: int = _f(16, "concurrent sessions (each holds one app worker process)")
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
    env: AWMEnv | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)


def action_from_dict(data: Any, *, expert_enabled: bool = True) -> Action:
    """Turn a JSON action into a protocol :class:`Action` (bad shapes become invalid actions)."""
    if not isinstance(data, dict):
        return Action(
            "invalid", failure=Failure.INVALID_JSON, message="action must be a JSON object"
        )
    kind = data.get("type")
    if kind == "turn":
        return parse_turn(str(data.get("text", "")), expert_enabled=expert_enabled)
    if kind == "list_tools":
        return Action("list_tools")
    if kind == "call_tool":
        name = data.get("tool_name")
        arguments = data.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as e:
                return Action(
                    "invalid", failure=Failure.INVALID_JSON, message=f"arguments are not JSON: {e}"
                )
        if not isinstance(name, str) or not name.strip():
            return Action(
                "invalid", failure=Failure.INVALID_ARGUMENTS, message="call_tool needs a tool_name"
            )
        return Action("call_tool", tool_name=name.strip(), arguments=arguments)
    if kind == "ask_expert" and expert_enabled:
        return Action("ask_expert", arguments=data.get("arguments") or {})
    return Action(
        "invalid", failure=Failure.UNKNOWN_META_FUNCTION, message=f"unknown action type {kind!r}"
    )


def _observation(result: StepResult, env: AWMEnv, action: Action) -> dict[str, Any]:
    obs: dict[str, Any] = {
        "text": result.observation,
        "done": result.done,
        "reward": result.reward,
        "metadata": result.info,
    }
    if action.kind == "list_tools":
        obs["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in env.tools
        ]
    if action.kind == "call_tool":
        obs["tool_name"] = action.tool_name
    return obs


class _Server:
    def __init__(self, pool: EnvPool, config: ServeConfig):
        self.pool = pool
        self.config = config
        self.sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def session(self, sid: str | None, create: bool = False) -> _Session:
        with self._lock:
            if sid and sid in self.sessions:
                return self.sessions[sid]
            if not create:
                raise SessionError(404, f"unknown session {sid!r}: call /reset first")
            self._expire()
            if len(self.sessions) >= self.config.max_sessions:
                raise SessionError(
                    503, f"too many sessions ({self.config.max_sessions}); close one first"
                )
            session = _Session(sid or uuid.uuid4().hex)
            self.sessions[session.sid] = session
            return session

    def _expire(self) -> None:
        now = time.monotonic()
        for sid, s in list(self.sessions.items()):
            if now - s.last_used > self.config.session_idle_s and not s.lock.locked():
                self.sessions.pop(sid)
                if s.env is not None:
                    self.pool.release(s.env)

    async def reset(self, data: dict[str, Any], session: _Session) -> dict[str, Any]:
        scenario = data.get("scenario")
        names = self.pool.names()
        if scenario is None and len(names) == 1:
            scenario = names[0]
        if not isinstance(scenario, str) or scenario not in names:
            raise SessionError(404, f"unknown scenario {scenario!r}")
        try:
            task_idx = int(data.get("task_idx", 0))
        except (TypeError, ValueError):
            raise SessionError(422, "task_idx must be an integer") from None
        async with session.lock:
            session.last_used = time.monotonic()
            if session.env is not None and session.env.scenario.name != scenario:
                self.pool.release(session.env)
                session.env = None
            if session.env is None:
                try:
                    session.env = await asyncio.to_thread(self.pool.acquire, scenario)
                except Exception as e:  # noqa: BLE001
                    raise SessionError(500, f"cannot start {scenario}: {e}") from None
            env = session.env
            try:
                first = await asyncio.to_thread(
                    env.reset, task_idx, task=data.get("task"), episode_id=data.get("episode_id")
                )
            except IndexError as e:
                raise SessionError(404, str(e)) from None
            except Exception as e:  # noqa: BLE001 - worker failed to start
                raise SessionError(500, f"reset failed: {e}") from None
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
        async with session.lock:
            session.last_used = time.monotonic()
            env = session.env
            if env is None or env.done:
                raise SessionError(409, "no episode in progress: call reset first")
            action = action_from_dict(action_data, expert_enabled=env.config.expert_enabled)
            turn_text = action_data.get("text") if isinstance(action_data, dict) else None
            result = await asyncio.to_thread(env.act, action, turn_text=turn_text)
        return {
            "observation": _observation(result, env, action),
            "reward": result.reward,
            "done": result.done,
        }

    def state(self, session: _Session) -> dict[str, Any]:
        session.last_used = time.monotonic()
        if session.env is None:
            return {"episode_id": None, "step_count": 0, "session_id": session.sid}
        return {**session.env.state(), "session_id": session.sid}

    def close_session(self, sid: str) -> None:
        with self._lock:
            session = self.sessions.pop(sid, None)
        if session is not None and session.env is not None:
            self.pool.release(session.env)


def create_app(pool: EnvPool, config: ServeConfig | None = None):
    """The FastAPI app serving ``pool`` (the caller owns and closes the pool)."""
    config = config or ServeConfig()
    server = _Server(pool, config)
    app = FastAPI(title="helpdp AWM environment server", version="1.0")
    app.state.server = server

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
    async def reset(body: dict = Body(default_factory=dict)) -> dict:  # noqa: B008
        session = server.session(body.get("session_id"), create=True)
        return await server.reset(body, session)

    @app.post("/step")
    async def step(body: dict = Body(...)) -> dict:  # noqa: B008
        session = server.session(body.get("session_id"))
        return await server.step(body, session)

    @app.get("/state")
    async def state(session_id: str = Query(...)) -> dict:  # noqa: B008
        return server.state(server.session(session_id))

    @app.post("/close")
    async def close(body: dict = Body(...)) -> dict:  # noqa: B008
        server.close_session(str(body.get("session_id")))
        return {"closed": True}

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        session: _Session | None = None
        try:
            while True:
                try:
                    message = json.loads(await socket.receive_text())
                except ValueError:
                    await socket.send_json(
                        {"type": "error", "data": {"message": "message is not JSON"}}
                    )
                    continue
                kind = message.get("type") if isinstance(message, dict) else None
                data = message.get("data") or {} if isinstance(message, dict) else {}
                try:
                    if kind == "reset":
                        if session is None:
                            session = server.session(None, create=True)
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
                        raise SessionError(400, f"unknown message type {kind!r}")
                except SessionError as e:
                    reply = {"type": "error", "data": {"message": e.message, "status": e.status}}
                await socket.send_json(reply)
        except WebSocketDisconnect:
            pass
        finally:
            if session is not None:
                server.close_session(session.sid)
            with contextlib.suppress(Exception):
                await socket.close()

    return app


SCHEMA = {
    "action": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"type": {"const": "turn"}, "text": {"type": "string"}},
                "required": ["type", "text"],
            },
            {
                "type": "object",
                "properties": {"type": {"const": "list_tools"}},
                "required": ["type"],
            },
            {
                "type": "object",
                "properties": {
                    "type": {"const": "call_tool"},
                    "tool_name": {"type": "string"},
                    "arguments": {"type": ["object", "string"]},
                },
                "required": ["type", "tool_name"],
            },
            {
                "type": "object",
                "properties": {"type": {"const": "ask_expert"}, "arguments": {"type": "object"}},
                "required": ["type"],
            },
        ]
    },
    "observation": {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "done": {"type": "boolean"},
            "reward": {"type": ["number", "null"]},
            "metadata": {"type": "object"},
            "tools": {"type": "array"},
        },
    },
    "state": {
        "type": "object",
        "properties": {
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer"},
            "scenario": {"type": "string"},
            "task_idx": {"type": "integer"},
            "done": {"type": "boolean"},
            "format_errors": {"type": "integer"},
            "failures": {"type": "object"},
        },
    },
}


# ---------------------------------------------------------------------------
# clients
# ---------------------------------------------------------------------------


class EnvClient:
    """Blocking HTTP client of :func:`create_app`'s server (one session)."""

    def __init__(self, base_url: str, *, timeout: float = 120.0, session_id: str | None = None):
        import httpx

        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self.session_id = session_id

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.post(path, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def health(self) -> dict[str, Any]:
        return self._http.get("/health").json()

    def scenarios(self) -> list[dict[str, Any]]:
        return self._http.get("/scenarios").json()["scenarios"]

    def reset(
        self, scenario: str | None = None, task_idx: int = 0, **kwargs: Any
    ) -> dict[str, Any]:
        body = {"scenario": scenario, "task_idx": task_idx, "session_id": self.session_id, **kwargs}
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
        response = self._http.get("/state", params={"session_id": self.session_id})
        response.raise_for_status()
        return response.json()

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
    """Asyncio WebSocket client (one session per connection); use ``async with``."""

    def __init__(self, url: str, *, timeout: float = 120.0):
        self.url = url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/")
        if not self.url.endswith("/ws"):
            self.url += "/ws"
        self.timeout = timeout
        self._ws = None

    async def __aenter__(self) -> AsyncEnvClient:
        import websockets

        self._ws = await websockets.connect(self.url, open_timeout=self.timeout, max_size=2**26)
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


def serve(config: ServeConfig) -> None:
    """Run the server until interrupted (blocking)."""
    import signal

    import uvicorn

    # uvicorn re-raises SIGTERM after its graceful shutdown; exit through Python so
    # that the pool's workers and files are cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    dataset = AWMDataset(config.data or WORLDS_DIR)
    pool = EnvPool(
        dataset, config.env, scenarios=config.scenarios or None, clock=dataset.clock(config.clock)
    )
    try:
        app = create_app(pool, config)
        print(
            f"serving {len(pool.names())} scenarios on http://{config.host}:{config.port}",
            flush=True,
        )
        uvicorn.run(app, host=config.host, port=config.port, log_level="warning")
    finally:
        pool.close()


def register() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="serve_schema", node=ServeConfig)
    register_help("serve", ServeConfig, "python -m collect.serve [KEY=VALUE ...]")


def main() -> None:
    import hydra
    from omegaconf import OmegaConf

    register()

    @hydra.main(version_base=None, config_path="../conf", config_name="serve")
    def _main(cfg: Any) -> None:
        serve(OmegaConf.to_object(cfg))

    _main()


if __name__ == "__main__":
    sys.exit(main())
