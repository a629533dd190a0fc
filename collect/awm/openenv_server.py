"""``python -m collect.awm.openenv_server``: our confined AWM worlds as an OpenEnv environment.

The same :class:`~collect.awm.env.EnvPool` that :mod:`collect.awm.serve` serves, behind
OpenEnv's own server (``openenv.core.env_server.HTTPEnvServer``, production mode: the
``/ws`` and ``/mcp`` routes that ``openenv.core.mcp_client.MCPToolClient`` speaks), with
the tools and rewards of OpenEnv's Agent World Model environment
(``envs/agent_world_model_env``). Needs the ``openenv`` extra (``pip install -e
'.[openenv]'``); nothing else in the project imports ``openenv``.

Episode (``MCPToolClient`` or OpenEnv's ``AWMEnv`` client)::

    reset(scenario=, task_idx=, task=?, verifier_mode=?)   reward_type reset_ok | reset_error
    step(ListToolsAction())                      the scenario's visible tools
    step(CallToolAction(tool_name=T, arguments)) tool_result (or error); reward_type
        tool_call_ok | tool_not_found | invalid_args | tool_error | server_error
    CallToolAction("verify", {verifier_mode?, final_answer?})   verifies, episode goes on
    CallToolAction("done", {final_answer?})      ends the episode; right after ``verify``
                                                 as OpenEnv's does (episode_done, 0.0), else
                                                 it verifies first (reward_type: the outcome)
    CallToolAction("__list_scenarios__")         the served scenarios and their tasks

Rewards are OpenEnv AWM's, from ``env.rewards``: a verified episode's reward_type is its
outcome (complete 1.0, incomplete 0.1, others 0.0; verifier_error, no_verifier,
server_error 0.0), a tool_not_found / invalid_args call is a format error (-1.0, the
episode goes on, as in OpenEnv), other calls 0.0. ``reward_convention=openenv`` names
and rewards verdicts as OpenEnv's own server does (``judge_error``; only complete,
incomplete and format errors rewarded; ``done`` never verifies), docs/openenv.md. ``metadata`` carries the step's public
info (:func:`collect.awm.wire.public_info`: failure class, turn, outcome, validity).

Differences from OpenEnv's AWM server, all on the side of confinement: scenario code runs
in our sandboxed app workers and verifiers in sandboxed verifier workers (not in the
container's own processes); ``verify_result`` says how an episode was verified (outcome,
mode, status), never the verifier's output; the LLM judge is the server's
(``env.judge``), never an endpoint or key sent by a client (``llm_*`` reset arguments
and ``reward_config`` are ignored); the bearer token, body size limit and session cap of
:class:`~collect.awm.serve.ServeConfig` hold (``max_sessions`` sessions, advertised at
``GET /capacity``; a session is freed when its WebSocket ends, closed or dropped, a
close is answered once its slot is free, and idle ones are closed after
``session_idle_s``; ``max_sessions_per_client`` is not enforced: OpenEnv's server gives
its environment factory no client, docs/security.md); the max_turns of ``env`` ends an
episode as locally. Below the app, the connections are limited before any header is read
(``connections``, as :mod:`collect.awm.serve`'s: a header timeout, a connection cap below
the open-file limit and a cap per client address, :func:`~collect.awm.http_guard.guarded_protocol`):
connections that never finish their headers cannot use up the server's descriptors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
)
from openenv.core.env_server.types import Action as OEAction
from openenv.core.env_server.types import ConcurrencyConfig, Observation, State
from pydantic import Field

from collect.awm.env import AWMEnv, EnvPool
from collect.awm.http_guard import _Guard
from collect.awm.protocol import Action, Failure
from collect.awm.rewards import REWARD_CONVENTIONS, RewardConfig, verdict_reward
from collect.awm.sandbox import COMMAND_ERRORS
from collect.awm.serve import ServeConfig, _read_token, run_server
from collect.awm.verification import Verification
from collect.awm.wire import _kind, public_info
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "AWMObservation",
    "AWMToolObservation",
    "AWMToolsObservation",
    "ConfinedAWMEnvironment",
    "OpenEnvServeConfig",
    "REWARD_TYPES",
    "create_openenv_app",
    "serve_openenv",
]

_log = logging.getLogger("collect.awm.openenv_server")

#: our failure classes as OpenEnv AWM's reward types of a tool call
REWARD_TYPES = {
    None: "tool_call_ok",
    Failure.UNKNOWN_TOOL.value: "tool_not_found",
    Failure.INVALID_ARGUMENTS.value: "invalid_args",
    Failure.TOOL_ERROR.value: "tool_error",
    Failure.SERVER_ERROR.value: "server_error",
}
#: reward types OpenEnv's AWM server counts as format errors (rewards.format_error)
FORMAT_ERROR_TYPES = frozenset({"tool_not_found", "invalid_args", "invalid_action"})
VERIFIER_MODES = ("code", "sql")


# ---------------------------------------------------------------------------
# the wire format: OpenEnv AWM's observation fields (envs/agent_world_model_env/models.py
# is not part of the ``openenv`` package, so its field names are declared here; None
# fields are left out of the JSON, as there)
# ---------------------------------------------------------------------------


def _dump_without_none(kwargs: dict[str, Any]) -> dict[str, Any]:  # pydantic's options
    kwargs.setdefault("exclude_none", True)
    return kwargs


class AWMObservation(Observation):
    """Reset, ``verify``, ``done`` and ``__list_scenarios__`` (no ``tool_name``)."""

    reward_type: str | None = Field(default=None, description="outcome class of this step")
    scenario: str | None = None
    task: str | None = None
    task_idx: int | None = None
    has_verifier: dict | None = Field(default=None, description="{sql: bool, code: bool}")
    num_tools: int | None = None
    tool_name: str | None = None
    tool_result: JSON = None
    error: str | None = None
    warning: str | None = None
    verify_result: dict | None = Field(
        default=None, description="outcome, mode and status of a verification (no verifier output)"
    )
    steps_taken: int | None = None
    scenarios: list | None = None
    total: int | None = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return super().model_dump(**_dump_without_none(kwargs))


class AWMToolObservation(CallToolObservation):
    """A tool call: OpenEnv AWM's fields (``tool_result`` or ``error`` text); a
    ``CallToolObservation``, so that ``/mcp`` ``tools/call`` answers it too."""

    tool_name: str | None = None  # type: ignore[assignment]
    error: str | None = None  # type: ignore[assignment]
    reward_type: str | None = None
    tool_result: JSON = None
    verify_result: dict | None = None
    scenario: str | None = None
    task: str | None = None
    task_idx: int | None = None
    steps_taken: int | None = None
    scenarios: list | None = None
    total: int | None = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return super().model_dump(**_dump_without_none(kwargs))


class AWMToolsObservation(ListToolsObservation):
    """``ListToolsAction``'s answer (``error`` when no episode is running)."""

    error: str | None = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return super().model_dump(**_dump_without_none(kwargs))


# ---------------------------------------------------------------------------
# the environment: one per OpenEnv session, an AWMEnv of the pool per episode
# ---------------------------------------------------------------------------


class ConfinedAWMEnvironment(Environment):
    """OpenEnv ``Environment`` over an :class:`~collect.awm.env.EnvPool`: a session holds
    one sandboxed app worker from its first reset to its close."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, pool: EnvPool, convention: str = "helpdp"):
        super().__init__()
        if convention not in REWARD_CONVENTIONS:
            raise ValueError(
                f"reward_convention must be one of {REWARD_CONVENTIONS}, got {convention!r}"
            )
        self.pool = pool
        self.convention = convention  # reward_convention (collect.awm.rewards.verdict_reward)
        self.env: AWMEnv | None = None
        self._base_config = None
        self._over = True  # no episode running
        self._verified: Verification | None = None
        self._mode: str | None = None
        self._state = State(episode_id=None, step_count=0)

    @property
    def rewards(self) -> RewardConfig:
        return self.pool.config.rewards

    # -- reset ------------------------------------------------------------------------
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        scenario: str | None = None,
        task_idx: int | None = None,
        task: str | None = None,
        verifier_mode: str | None = None,
        **kwargs: JSON,
    ) -> AWMObservation:
        self._over, self._verified = True, None
        if not isinstance(scenario, str) or not scenario:
            return _reset_error("Parameter 'scenario' is required")
        if scenario not in self.pool.names():
            return _reset_error(f"Scenario {scenario[:100]!r} not found")
        if verifier_mode is not None and verifier_mode not in VERIFIER_MODES:
            return _reset_error(f"verifier_mode must be one of {', '.join(VERIFIER_MODES)}")
        if task is not None and not isinstance(task, str):
            return _reset_error("task must be a string")
        if episode_id is not None and not isinstance(episode_id, str):
            return _reset_error("episode_id must be a string")
        try:
            sc = self.pool.scenario(scenario)
            if task_idx is None and task is None:
                task_idx = 0
            if task_idx is not None:
                task_idx = int(task_idx)
                if not 0 <= task_idx < sc.n_tasks:
                    return _reset_error(f"task_idx {task_idx} out of range (0..{sc.n_tasks - 1})")
        except (TypeError, ValueError):
            return _reset_error("task_idx must be an integer")
        try:
            if self.env is not None and self.env.scenario.name != scenario:
                self._release()
            if self.env is None:
                self.env = self.pool.acquire(scenario)
                self._base_config = self.env.config
            self._mode = verifier_mode
            self.env.config = self._base_config
            if verifier_mode is not None:
                self.env.config = dataclasses.replace(
                    self._base_config, verifier_mode=verifier_mode
                )
            first = self.env.reset(
                -1 if task_idx is None else task_idx, task=task, episode_id=episode_id
            )
        except Exception as e:  # noqa: BLE001 - told by kind only; details go to the log
            _log.warning("reset of %s failed: %r", scenario, e)
            return _reset_error(f"Sub-environment start failed{_kind(e)}")
        self._over = False
        self._state = State(episode_id=first.episode_id, step_count=0)
        has = None
        if task_idx is not None:
            has = {"sql": task_idx in sc.sql_verifiers, "code": task_idx in sc.verifiers}
            has = has if any(has.values()) else None
        return AWMObservation(
            reward_type="reset_ok",
            scenario=scenario,
            task=first.task,
            task_idx=task_idx,
            has_verifier=has,
            num_tools=len(self.env.tools),
            metadata={"system_prompt": first.system_prompt, "episode_id": first.episode_id},
        )

    # -- step -------------------------------------------------------------------------
    def step(self, action: OEAction, timeout_s: float | None = None, **kwargs: JSON) -> Observation:
        try:
            return self._step(action)
        except Exception as e:  # noqa: BLE001 - never a traceback or worker output to clients
            _log.warning("step failed: %r", e)
            return AWMObservation(
                reward=self.rewards.server_error,
                reward_type="server_error",
                error=f"server error{_kind(e)}",
            )

    def _step(self, action: OEAction) -> Observation:
        if isinstance(action, CallToolAction) and action.tool_name == "__list_scenarios__":
            return self._list_scenarios()
        if self._over or self.env is None:
            done = self._state.episode_id is not None
            message = (
                "Episode has ended. Call reset() to start a new episode."
                if done
                else "No episode: call reset() first."
            )
            if isinstance(action, ListToolsAction):
                return AWMToolsObservation(tools=[], error=message)
            return AWMObservation(
                done=done,
                reward_type="episode_already_done" if done else "reset_error",
                error=message,
            )
        self._state.step_count += 1
        if isinstance(action, ListToolsAction):
            self._verified = None
            result = self.env.act(Action("list_tools"))
            tools = [
                Tool(name=t.name, description=t.description, input_schema=t.input_schema)
                for t in self.env.tools
            ]
            obs = AWMToolsObservation(tools=tools, metadata=public_info(result.info))
            if result.done:  # the turn limit: verified as locally
                self._over = True
                outcome = str(result.info.get("outcome"))
                obs.done, obs.reward = True, self._verdict(outcome, result.reward)[1]
            return obs
        if not isinstance(action, CallToolAction):
            return AWMObservation(
                reward=self.rewards.format_error,
                reward_type="invalid_action",
                error=f"Unknown action type: {type(action).__name__}. "
                "Use ListToolsAction or CallToolAction.",
            )
        args = action.arguments or {}
        if action.tool_name == "verify":
            return self._verify(args)
        if action.tool_name == "done":
            return self._done(args)
        self._verified = None  # the world may change: `done` verifies again
        result = self.env.act(Action("call_tool", tool_name=action.tool_name, arguments=args))
        info = public_info(result.info)
        failure = result.info.get("failure")
        if result.done:  # a dead worker or the turn limit
            self._over = True
            outcome, reward = self._verdict(str(result.info.get("outcome")), result.reward)
            return AWMToolObservation(
                tool_name=action.tool_name,
                done=True,
                reward=reward,
                reward_type=outcome,
                verify_result=info.get("verification"),
                **(
                    {"error": result.observation}
                    if failure
                    else {"tool_result": result.observation}
                ),
                metadata=info,
            )
        reward_type = REWARD_TYPES.get(failure, "server_error")
        reward = self.rewards.format_error if reward_type in FORMAT_ERROR_TYPES else 0.0
        if failure is None:
            return AWMToolObservation(
                tool_name=action.tool_name,
                tool_result=result.observation,
                reward=reward,
                reward_type=reward_type,
                metadata=info,
            )
        return AWMToolObservation(
            tool_name=action.tool_name,
            error=result.observation,
            reward=reward,
            reward_type=reward_type,
            metadata=info,
        )

    def _verdict(self, outcome: str, reward: float) -> tuple[str, float]:
        """The reward type and reward of an ended episode's ``outcome`` (``reward``: the
        environment's, :func:`~collect.awm.rewards.episode_reward`) in this server's
        convention."""
        if self.convention == "helpdp":
            return outcome, reward
        return verdict_reward(outcome, self.rewards, self.convention)

    def _set_mode(self, mode: JSON) -> str | None:
        if mode is None:
            return None
        if mode not in VERIFIER_MODES:
            return f"Invalid verifier_mode {str(mode)[:20]!r}. Must be one of: code, sql"
        self.env.config = dataclasses.replace(self._base_config, verifier_mode=mode)
        return None

    def _verification(self, v: Verification) -> dict[str, JSON]:
        return {"outcome": v.outcome, "mode": v.mode, "status": v.status, "valid": v.valid}

    def _verify(self, args: dict[str, JSON]) -> Observation:
        problem = self._set_mode(args.get("verifier_mode", self._mode))
        if problem:
            return AWMObservation(
                reward=self.rewards.format_error, reward_type="invalid_args", error=problem
            )
        answer = args.get("final_answer")
        v = self.env.verify(answer if isinstance(answer, str) else None)
        self._verified = v
        reward_type, reward = verdict_reward(v.outcome, self.rewards, self.convention)
        return AWMObservation(
            reward=reward,
            reward_type=reward_type,
            verify_result=self._verification(v),
            scenario=self.env.scenario.name,
            task=self.env.task_text,
            task_idx=self.env.task_idx,
            steps_taken=self._state.step_count,
        )

    def _done(self, args: dict[str, JSON]) -> Observation:
        env = self.env
        # right after verify, as OpenEnv's: no reward; OpenEnv's done never verifies
        if self._verified is not None or self.convention == "openenv":
            self._over = True
            return AWMObservation(
                done=True,
                reward=0.0,
                reward_type="episode_done",
                scenario=env.scenario.name,
                task=env.task_text,
                task_idx=env.task_idx,
                steps_taken=self._state.step_count,
            )
        problem = self._set_mode(args.get("verifier_mode", self._mode))
        if problem:
            return AWMObservation(
                reward=self.rewards.format_error, reward_type="invalid_args", error=problem
            )
        answer = args.get("final_answer")
        result = env.act(Action("final", text=answer if isinstance(answer, str) else ""))
        self._over = True
        info = public_info(result.info)
        return AWMObservation(
            done=True,
            reward=result.reward,
            reward_type=str(result.info.get("outcome")),
            verify_result={
                "outcome": result.info.get("outcome"),
                **info.get("verification", {}),
                "valid": bool(result.info.get("valid")),
            },
            scenario=env.scenario.name,
            task=env.task_text,
            task_idx=env.task_idx,
            steps_taken=self._state.step_count,
            metadata=info,
        )

    def _list_scenarios(self) -> AWMObservation:
        out = []
        for name in self.pool.names():
            if {"env", "db", "tasks"} <= self.pool.dataset.pieces(name):
                sc = self.pool.scenario(name)
                tasks = [sc.task(i).text for i in range(sc.n_tasks)]
                out.append({"name": name, "num_tasks": sc.n_tasks, "tasks": tasks})
        return AWMObservation(reward_type="tool_call_ok", scenarios=out, total=len(out))

    # -- the rest -----------------------------------------------------------------------
    @property
    def state(self) -> State:
        if self.env is not None and not self._over:
            return State(
                episode_id=self._state.episode_id,
                step_count=self._state.step_count,
                scenario=self.env.scenario.name,
                task_idx=self.env.task_idx,
            )
        return self._state

    def _release(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            if self._base_config is not None:
                env.config = self._base_config
            self.pool.release(env)

    def close(self) -> None:
        self._over = True
        self._release()


def _reset_error(message: str) -> AWMObservation:
    return AWMObservation(reward_type="reset_error", error=message)


# ---------------------------------------------------------------------------
# the app
# ---------------------------------------------------------------------------


class _FreeOnDisconnect:
    """ASGI middleware over OpenEnv's session lifecycle (``max_sessions`` slots):

    - when the WebSocket of a session made over HTTP (``/ws?session_id=``, how
      ``MCPToolClient`` connects in production mode) ends, by the client's close or its
      connection dropping, the session is destroyed at once and its slot and app worker
      freed. OpenEnv's server would keep it until the client's explicit
      ``openenv/session/close`` or the idle reaper (``session_idle_s``): a client that
      vanished mid-episode held a slot for 15 minutes;
    - an ``openenv/session/close`` (``POST /mcp``) of a session whose socket handler
      still runs is answered once that handler has ended and the session is freed
      (within :attr:`CLOSE_WAIT_S`). OpenEnv answers it at once with ``closing`` and
      frees the slot when the handler ends, which on a busy event loop is seconds later:
      a client that closed one session and opened the next was refused at capacity by
      its own closed session (measured: 16 episodes in flight against a cap of 16 lost
      some). Now a close that returns has freed its slot.

    Sessions used over HTTP ``/mcp`` only, never attached, are left to OpenEnv."""

    #: the longest a session close waits for the session's socket handler to end, s
    #: (then OpenEnv answers ``closing`` and frees it when the handler ends)
    CLOSE_WAIT_S = 30.0

    def __init__(self, app: ASGIApp, server: HTTPEnvServer):
        self.app = app
        self.server = server
        self._sockets: dict[str, asyncio.Event] = {}  # session -> its socket handler ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("path") == "/mcp":
            await self._mcp(scope, receive, send)
            return
        if scope.get("type") != "websocket" or scope.get("path") != "/ws":
            await self.app(scope, receive, send)
            return
        query = parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1"))
        sid = (query.get("session_id") or [None])[0]
        ended = asyncio.Event()
        if sid and sid not in self._sockets:  # a second socket for it is refused by OpenEnv
            self._sockets[sid] = ended
        try:
            await self.app(scope, receive, send)
        finally:
            try:
                if sid:
                    await asyncio.shield(self._free(sid))
            finally:
                ended.set()
                if sid and self._sockets.get(sid) is ended:
                    del self._sockets[sid]

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /mcp``: a session close waits for the session's socket handler to end
        (its answer: closed); any other request passes on, its body replayed."""
        messages, body = [], b""
        while True:  # bounded: the guard outside refuses a body over max_body_bytes
            message = await receive()
            messages.append(message)
            if message.get("type") != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        sid, request_id = _session_close(body)
        ended = self._sockets.get(sid) if sid else None
        if ended is not None:
            try:
                await asyncio.wait_for(ended.wait(), self.CLOSE_WAIT_S)
            except asyncio.TimeoutError:
                pass  # OpenEnv answers "closing" and frees it when the handler ends
            else:
                if sid not in self.server._sessions:  # freed by _free: say so
                    await _json_response(
                        send,
                        {
                            "jsonrpc": "2.0",
                            "id": request_id,
                            "result": {"session_id": sid, "closed": True},
                        },
                    )
                    return
        replay = iter(messages)

        async def replayed() -> dict:
            return next(replay, None) or await receive()

        await self.app(scope, replayed, send)

    async def _free(self, sid: str) -> None:
        server = self.server
        sessions = getattr(server, "_sessions", None)
        attached = getattr(server, "_session_websocket_attachments", None)
        if sessions is None or attached is None or sessions.get(sid) is None:
            return  # gone already, or still being made (its creator finishes it)
        if sid not in attached:
            try:
                await server._destroy_session(sid)
            except Exception as e:  # noqa: BLE001 - the reaper gets it later
                _log.warning("closing session after its socket ended failed: %r", e)


def _session_close(body: bytes) -> tuple[str | None, JSON]:
    """The session an ``openenv/session/close`` request names and the request's id;
    (None, None) for any other request (or a body that is not one JSON-RPC object)."""
    if len(body) > 1 << 16 or b"openenv/session/close" not in body:
        return None, None
    try:
        data = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(data, dict) or data.get("method") != "openenv/session/close":
        return None, None
    sid = (
        (data.get("params") or {}).get("session_id")
        if isinstance(data.get("params"), dict)
        else None
    )
    return (sid if isinstance(sid, str) else None), data.get("id")


async def _json_response(send: Send, payload: dict[str, JSON]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_openenv_app(
    pool: EnvPool, config: ServeConfig | None = None, *, token: str | None = None
):
    """The ASGI app serving ``pool`` through OpenEnv's ``HTTPEnvServer`` in production
    mode (``/ws``, ``/mcp``, ``/health``, ``/schema``, ``/metadata``), behind
    :mod:`collect.awm.serve`'s guard (bearer token, body limit). The caller owns the pool.

    ``token``: the bearer token clients must send; None: read from ``config.token_env``.
    """
    from fastapi import FastAPI

    config = config or ServeConfig()
    token = token if token is not None else _read_token(config)
    convention = getattr(config, "reward_convention", "helpdp")
    if convention not in REWARD_CONVENTIONS:  # refused before any session starts
        raise ValueError(
            f"reward_convention must be one of {REWARD_CONVENTIONS}, got {convention!r}"
        )
    server = HTTPEnvServer(
        lambda: ConfinedAWMEnvironment(pool, convention),
        CallToolAction,
        AWMToolObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=config.max_sessions, session_timeout=config.session_idle_s
        ),
        env_name="helpdp_awm",
        reset_observation_cls=AWMObservation,
    )
    app = FastAPI(title="helpdp AWM environment (OpenEnv)", version="1.0")
    server.register_routes(app, mode="production")

    @app.get("/capacity")
    async def capacity() -> dict:
        """The session cap and the sessions open (a collector sizes its episodes in
        flight to it: ``collect.awm.remote_env.server_capacity``)."""
        return {
            "max_sessions": server.max_concurrent_envs,
            "active_sessions": server.active_sessions,
        }

    app.add_middleware(_FreeOnDisconnect, server=server)
    app.add_middleware(
        _Guard,
        token=token,
        max_bytes=config.max_body_bytes,
        drain_timeout_s=config.connections.header_timeout_s,  # a refused request's body
    )
    app.state.openenv_server = server
    return app


@dataclasses.dataclass
class OpenEnvServeConfig(ServeConfig):
    """``python -m collect.awm.openenv_server``: our confined AWM worlds as an OpenEnv
    environment (the fields of ``collect.awm.serve``, connection limits included)."""

    reward_convention: str = _f(
        "helpdp",
        "how a verdict is named and rewarded: helpdp (the outcome, env.rewards; done "
        "without a verify verifies first) or openenv (OpenEnv AWM's own: a verifier without "
        "a verdict is judge_error, types other than complete/incomplete/format errors get "
        "0.0, done never verifies: episode_done 0.0); docs/openenv.md",
    )


def serve_openenv(config: ServeConfig) -> None:
    """Run the OpenEnv-mode server until interrupted (blocking):
    :func:`~collect.awm.serve.run_server` on :func:`create_openenv_app`."""
    run_server(config, create_openenv_app, " as an OpenEnv environment")


def main() -> None:
    """``python -m collect.awm.openenv_server``."""

    run_app(
        "collect.awm.openenv_server",
        OpenEnvServeConfig,
        serve_openenv,
        config_name="serve_openenv",
        errors=COMMAND_ERRORS,
    )


if __name__ == "__main__":
    sys.exit(main())
