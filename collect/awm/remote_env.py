"""An OpenEnv AWM server as the collector's runtime: ``python -m collect runtime=openenv
env_url=http://HOST:PORT ...``.

:class:`OpenEnvPool` offers what :class:`collect.rollout.EpisodeRunner` and the
interventions use of :class:`~collect.awm.env.EnvPool` (``names``, ``scenario``,
``acquire``, ``release``, ``close``; an environment's ``reset``, ``step``, ``tools``,
``verify``, ``trajectory_text``, ``close``). Each environment is one session of
``openenv``'s :class:`~openenv.core.mcp_client.MCPToolClient` on a server that speaks
OpenEnv's Agent World Model protocol: OpenEnv's own ``envs/agent_world_model_env``
(AWM-1K in its container) or ``python -m collect.awm.openenv_server`` (our worlds,
confined).

The agent protocol stays on this side, as in :class:`~collect.awm.env.AWMEnv`: a turn's
text is parsed here (:func:`~collect.awm.protocol.parse_turn`); ``list_tools`` and tool
calls go to the server (``ListToolsAction`` / ``CallToolAction``); ``ask_expert`` never
leaves the client (the intervention answers it, as in OpenEnv's expert-in-the-loop
example); a final answer, or the last turn (``env.max_turns``), calls the hidden
``verify`` tool with the answer, then ``done``; a format error ends the episode here
(``env.terminate_on_format_error``). Outcomes and rewards are those of
:class:`~collect.awm.env.AWMEnv` (``env.rewards`` of the collection, from the server's
``reward_type``), so a collection on our server in OpenEnv mode gives the tables of a
local one.

The server is not trusted: each message is decoded within ``env.remote_message_mb``,
``env.remote_json_values`` and ``env.remote_json_depth`` (:func:`~collect.awm.wire.bounded_json`)
and checked against the fields' closed sets (:func:`_check`); a refusal is
:class:`~collect.awm.wire.RemoteMessageError` and ends that episode (``server_error``); so
does a reset whose task text is not the local world's (whitespace aside): an episode is
never recorded under instructions the server chose. Tool calls share ``env.tool_budget_s``
per episode as locally. Scenarios (tasks, reference solutions, verifier code) come from the
local worlds (``worlds=``); the server's verdicts stay the server's. Not offered:
``db_digest`` (``state_key=db`` needs the local runtime).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Collection
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from collect.awm.dataset import AWMDataset, Scenario, ServedScenarios
from collect.awm.env import EnvConfig
from collect.awm.episode import (
    ResetResult,
    StepResult,
    end_info,
    episode_state,
    trajectory_text,
    truncation_info,
)
from collect.awm.protocol import Action, Failure, parse_turn, system_prompt
from collect.awm.rewards import episode_reward
from collect.awm.tools import (
    canonical_tool_name,
    format_tools,
    is_hidden_tool,
    validate_arguments,
)
from collect.awm.verification import Verification
from collect.awm.wire import RemoteMessageError, bounded_json
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from openenv.core.env_server.types import Action as OEAction
    from openenv.core.mcp_client import GenericMCPObservation

__all__ = [
    "DEFAULT_TOKEN_ENV",
    "OpenEnvAWMEnv",
    "OpenEnvPool",
    "RemoteMessageError",
    "is_capacity_error",
    "outcome_of",
    "server_capacity",
]

DEFAULT_TOKEN_ENV = "OPENENV_AWM_TOKEN"

#: OpenEnv AWM's reward types of a tool call, as our failure classes
_FAILURES = {
    "tool_call_ok": None,
    "tool_not_found": Failure.UNKNOWN_TOOL.value,
    "invalid_args": Failure.INVALID_ARGUMENTS.value,
    "tool_error": Failure.TOOL_ERROR.value,
    "server_error": Failure.SERVER_ERROR.value,
    "timeout": Failure.SERVER_ERROR.value,
}
_VERDICTS = ("complete", "incomplete", "others")


def outcome_of(reward_type: JSON) -> str:
    """Our outcome for a verification's ``reward_type`` (OpenEnv's labels included:
    ``judge_error`` is a verifier error, an unknown label a verdict of ``others``)."""
    value = str(reward_type or "")
    if value in (*_VERDICTS, "server_error", "no_verifier", "verifier_error", "format_error"):
        return value
    if value in ("judge_error", "timeout", "invalid_args", "reset_error"):
        return "verifier_error"
    return "others"


#: what a server may say, field by field (anything else ends the episode: see _check)
REWARD_TYPES = frozenset(
    {
        *_FAILURES,
        *_VERDICTS,
        "reset_ok",
        "reset_error",
        "no_verifier",
        "verifier_error",
        "format_error",
        "judge_error",
        "episode_done",
        "episode_already_done",
        "invalid_action",
    }
)
OUTCOMES = frozenset({*_VERDICTS, "server_error", "no_verifier", "verifier_error", "format_error"})
VERIFIER_MODES = ("code", "sql", "none")
_WORD = re.compile(r"^[a-z_]{1,32}$")
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _one_of(value: JSON, allowed: Collection[str], where: str, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or value not in allowed:
        raise RemoteMessageError(
            f"{where} is not one of {', '.join(sorted(allowed))} ({type(value).__name__})"
        )


def _typed(value: JSON, types: type | tuple[type, ...], where: str) -> None:
    if value is not None and not isinstance(value, types):
        raise RemoteMessageError(f"{where} has type {type(value).__name__}")


def _check_tools(tools: JSON) -> None:
    if not isinstance(tools, list):
        raise RemoteMessageError(f"observation.tools has type {type(tools).__name__}")
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            raise RemoteMessageError(f"observation.tools[{i}] has no name")
        _typed(t.get("description"), str, f"observation.tools[{i}].description")
        _typed(
            t.get("input_schema", t.get("inputSchema")),
            dict,
            f"observation.tools[{i}].input_schema",
        )


def _check(payload: JSON) -> None:
    """``payload`` (a reset or step answer) against OpenEnv AWM's observation schema (the
    fields read here; reward types, outcomes, failures, modes, statuses: closed sets)."""
    if not isinstance(payload, dict):
        raise RemoteMessageError(f"data has type {type(payload).__name__}")
    obs = payload.get("observation") if "observation" in payload else {}
    if not isinstance(obs, dict):
        raise RemoteMessageError(f"observation has type {type(obs).__name__}")
    _typed(payload.get("done"), bool, "done")
    _typed(obs.get("done"), bool, "observation.done")
    _typed(payload.get("reward"), (int, float), "reward")
    _one_of(obs.get("reward_type"), REWARD_TYPES, "observation.reward_type")
    for key in ("task", "error", "scenario"):
        _typed(obs.get(key), str, f"observation.{key}")
    if "tools" in obs:
        _check_tools(obs["tools"])
    for key, meta in (
        ("metadata", payload.get("metadata")),
        ("observation.metadata", obs.get("metadata")),
    ):
        if meta is None:
            continue
        if not isinstance(meta, dict):
            raise RemoteMessageError(f"{key} has type {type(meta).__name__}")
        _one_of(meta.get("failure"), {f.value for f in Failure}, f"{key}.failure")
        _one_of(meta.get("outcome"), OUTCOMES, f"{key}.outcome")
        _typed(meta.get("truncated"), bool, f"{key}.truncated")
        status = meta.get("status_code")
        if status is not None and (type(status) is not int or not 100 <= status <= 599):
            raise RemoteMessageError(f"{key}.status_code is not an HTTP status")
        episode = meta.get("episode_id")
        if episode is not None and (not isinstance(episode, str) or not _ID.match(episode)):
            raise RemoteMessageError(f"{key}.episode_id is not an id (letters, digits, ._:-)")
        _check_verification(meta.get("verification"), f"{key}.verification")
    _check_verification(obs.get("verify_result"), "observation.verify_result")


def _check_verification(v: JSON, where: str) -> None:
    if v is None:
        return
    if not isinstance(v, dict):
        raise RemoteMessageError(f"{where} has type {type(v).__name__}")
    _one_of(v.get("mode"), VERIFIER_MODES, f"{where}.mode")
    _one_of(v.get("outcome"), OUTCOMES, f"{where}.outcome")
    _typed(v.get("valid"), bool, f"{where}.valid")
    status = v.get("status")
    if status is not None and (not isinstance(status, str) or not _WORD.match(status)):
        raise RemoteMessageError(f"{where}.status is not a word of a-z and _")


def _client_class():
    """``MCPToolClient`` whose results keep every field of the observation (OpenEnv's
    AWM client does the same with its own observation model), each message decoded
    within the bounds of ``env.remote_*`` (:func:`~collect.awm.wire.bounded_json`) and
    checked against the schema (:func:`_check`)."""
    from openenv.core.client_types import StepResult as OEStepResult
    from openenv.core.mcp_client import GenericMCPObservation, MCPToolClient

    class AWMToolClient(MCPToolClient):
        bounds: dict[str, int] = {}

        async def _receive(self) -> dict[str, JSON]:
            # openenv's EnvClient._receive, with json.loads replaced by a bounded decoder
            assert self._ws is not None
            try:
                raw = await asyncio.wait_for(self._ws.recv(), timeout=self._message_timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                ws, self._ws, self._ws_loop = self._ws, None, None
                self._schedule_socket_close(ws)  # a late answer must not pair with a new request
                raise
            message = bounded_json(raw, **self.bounds)
            if not isinstance(message, dict):
                raise RemoteMessageError(f"message has type {type(message).__name__}")
            return message

        async def _production_mcp_request(
            self, method: str, params: dict[str, JSON] | None = None
        ) -> dict[str, JSON]:
            # openenv's HTTP /mcp request (the session's creation), its body read within
            # the same bounds (httpx's response.json() reads any length)
            client = await self._get_http_client()
            request = {
                "jsonrpc": "2.0",
                "method": method,
                "params": params or {},
                "id": self._next_request_id(),
            }
            url, limit = self._production_mcp_url(), self.bounds["max_bytes"]
            chunks: list[bytes] = []
            async with client.stream(
                "POST", url, json=request, timeout=self._message_timeout
            ) as response:
                response.raise_for_status()
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise RemoteMessageError(f"/mcp answer is over the {limit}-byte limit")
                    chunks.append(chunk)
            data = bounded_json(b"".join(chunks), **self.bounds)
            if not isinstance(data, dict):
                raise RemoteMessageError(f"/mcp answer has type {type(data).__name__}")
            return data

        def _parse_result(self, payload: dict[str, JSON]) -> OEStepResult:
            _check(payload)
            fields = dict(payload.get("observation") or {})
            for key in ("done", "reward"):
                fields.pop(key, None)
            fields["metadata"] = fields.get("metadata") or payload.get("metadata") or {}
            return OEStepResult(
                observation=GenericMCPObservation(
                    done=bool(payload.get("done", False)), reward=payload.get("reward"), **fields
                ),
                reward=payload.get("reward"),
                done=bool(payload.get("done", False)),
            )

    return AWMToolClient


def _field(obs: GenericMCPObservation, name: str, default: JSON = None) -> JSON:
    value = getattr(obs, name, None)
    if value is None and obs.model_extra:
        value = obs.model_extra.get(name)
    return default if value is None else value


def _trim(text: str, limit: int) -> str:
    if limit and len(text) > limit:
        return text[:limit] + f"\n... (truncated, {len(text) - limit} more characters)"
    return text


class OpenEnvAWMEnv:
    """One session on an OpenEnv AWM server, with the episode API of
    :class:`~collect.awm.env.AWMEnv` (rules of ``config``)."""

    def __init__(self, url: str, scenario: Scenario, config: EnvConfig, token: str | None, **kw):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        client = _client_class()(
            base_url=url, headers=headers, max_message_size_mb=config.remote_message_mb, **kw
        )
        client.bounds = {
            "max_bytes": int(config.remote_message_mb) << 20,
            "max_values": int(config.remote_json_values),
            "max_depth": int(config.remote_json_depth),
        }
        self._async = client
        self.message_timeout_s = float(client._message_timeout)
        self.client = client.sync()
        try:
            self.client.connect()
        except BaseException:
            with contextlib.suppress(Exception):  # its loop thread and HTTP client
                self.client.close()
            raise
        self.scenario = scenario
        self.config = config
        self.app = None
        self.tools: list[SimpleNamespace] = []  # name, description, input_schema
        self._closed = False
        self._new_episode()
        self.done = True

    def _new_episode(self) -> None:
        self.episode_id = ""
        self.task_idx = -1
        self.task_text = ""
        self.turn = 0
        self.done = False
        self.format_errors = self.expert_calls = self.tool_calls = 0
        self.failures: dict[str, int] = {}
        self.tool_seconds = 0.0  # spent in this episode's tool calls (env.tool_budget_s)
        self.trajectory: list[dict[str, JSON]] = []
        self.outcome: str | None = None

    def _mode(self) -> dict[str, JSON]:
        mode = self.config.verifier_mode
        return {} if mode == "auto" else {"verifier_mode": mode}

    def _step(self, action: OEAction) -> GenericMCPObservation:
        result = self.client.step(action)
        return result.observation

    # -- episode API ------------------------------------------------------------------
    def reset(
        self, task_idx: int = 0, *, task: str | None = None, episode_id: str | None = None
    ) -> ResetResult:
        from openenv.core.env_server.mcp_types import ListToolsAction

        kwargs: dict[str, JSON] = {"scenario": self.scenario.name, "task_idx": task_idx}
        if task is not None:
            kwargs["task"] = task
        if episode_id:
            kwargs["episode_id"] = episode_id
        obs = self.client.reset(**kwargs, **self._mode()).observation
        if _field(obs, "reward_type") == "reset_error":
            raise RuntimeError(f"reset failed: {str(_field(obs, 'error', ''))[:500]}")
        if not self.tools:  # listed once per session, before its first episode
            listed = self.client.step(ListToolsAction()).observation
            self.tools = [
                SimpleNamespace(
                    name=t.get("name", ""),
                    description=t.get("description") or "",
                    input_schema=t.get("input_schema") or t.get("inputSchema") or {},
                )
                for t in (_field(listed, "tools", []))
            ]
            obs = self.client.reset(**kwargs, **self._mode()).observation
        expected = task if task is not None else self.scenario.task(task_idx).text
        served = _field(obs, "task", None)
        if not isinstance(served, str) or served.split() != expected.split():
            where = f"reset: the server's task text for {self.scenario.name} task {task_idx}"
            raise RemoteMessageError(f"{where} is not the local world's: {str(served)[:60]!r}")
        self._new_episode()
        self.episode_id = str(episode_id or _field(obs, "metadata", {}).get("episode_id") or "")
        self.task_idx = task_idx
        self.task_text = expected
        return ResetResult(
            self.episode_id,
            self.scenario.name,
            task_idx,
            self.task_text,
            system_prompt(expert_enabled=self.config.expert_enabled),
        )

    def step(self, text: str) -> StepResult:
        return self.act(parse_turn(text, expert_enabled=self.config.expert_enabled), text)

    def truncate(self) -> StepResult:
        """:meth:`collect.awm.env.AWMEnv.truncate`: verified as it stands, then ended."""
        if self.done or not self.episode_id:
            raise RuntimeError("episode is over: call reset() first")
        info = truncation_info(self.turn)
        return self._end(self.verify(None), "", info, close=True)

    def act(self, action: Action, turn_text: str | None = None) -> StepResult:
        if self.done or not self.episode_id:
            raise RuntimeError("episode is over: call reset() first")
        self.turn += 1
        info: dict[str, JSON] = {"turn": self.turn, "action": action.as_dict(), "failure": None}
        observation, status, failure = "", None, action.failure
        if action.kind == "final":
            self._record(turn_text, info, "")
            info["format_error"] = False
            info["final_answer"] = action.text
            return self._end(self.verify(action.text), "", info, close=True)
        if action.kind == "invalid":
            observation = f"Error: {action.message}"
        elif action.kind == "list_tools":
            from openenv.core.env_server.mcp_types import ListToolsAction

            obs = self._step(ListToolsAction())
            listed = _field(obs, "tools", [])
            tools = [
                SimpleNamespace(
                    name=t.get("name", ""),
                    description=t.get("description") or "",
                    input_schema=t.get("input_schema") or t.get("inputSchema") or {},
                )
                for t in listed
            ]
            observation = format_tools(tools)
            if obs.done:
                return self._server_end(obs, observation, info, turn_text)
        elif action.kind == "ask_expert":
            self.expert_calls += 1
            info["ask_expert"] = action.arguments
        elif action.kind == "call_tool":
            self.tool_calls += 1
            reply = self._call(action.tool_name or "", action.arguments)
            if isinstance(reply, tuple) and reply[2]:  # the episode's tool budget is spent
                observation, failure = reply[0], reply[1]
                info["status_code"] = None
                self._count(failure, info)
                self._record(turn_text, info, observation)
                v = Verification("server_error", "none", status="server_error", message=observation)
                return self._end(v, observation, info, close=False)
            if isinstance(reply, tuple):
                observation, failure = reply[0], reply[1]
            else:
                obs = reply
                meta = _field(obs, "metadata", {})
                reward_type = str(_field(obs, "reward_type", ""))
                failure = meta.get("failure") if "failure" in meta else _FAILURES.get(reward_type)
                if failure is not None:
                    failure = Failure(failure)
                status = meta.get("status_code")
                result = _field(obs, "tool_result")
                error = _field(obs, "error")
                if failure is None and result is not None:
                    observation = result if isinstance(result, str) else json.dumps(result)
                else:
                    observation = str(error if error is not None else result or "")
                    if failure is None:
                        failure = Failure.SERVER_ERROR
                observation = _trim(observation, self.config.max_observation_chars)
                if obs.done:
                    info["status_code"] = status
                    self._count(failure, info)
                    return self._server_end(obs, observation, info, turn_text)
        info["status_code"] = status
        self._count(failure, info)
        self._record(turn_text, info, observation)
        if (
            failure is not None
            and failure.is_format_error
            and self.config.terminate_on_format_error
        ):
            v = Verification("format_error", "none", status="format_error", message=action.message)
            return self._end(v, observation, info, close=False)
        if self.turn >= self.config.max_turns:
            info["truncated"] = True
            return self._end(self.verify(None), observation, info, close=True)
        return StepResult(observation, None, False, info)

    def _call(
        self, name: str, arguments: JSON
    ) -> GenericMCPObservation | tuple[str, Failure, bool]:
        """The server's observation of a tool call, or ``(text, failure, fatal)`` for a
        call refused here (a hidden name, arguments that are not an object) or past the
        episode's tool time (``env.tool_budget_s``, as in the local runtime: fatal, the
        episode ends as ``server_error``; the session's socket is dropped, and the next
        episode runs on a fresh session)."""
        from openenv.core.env_server.mcp_types import CallToolAction

        missing = (
            f"Error: tool {name!r} does not exist. Call list_tools to see the available tools."
        )
        if is_hidden_tool(name, self.config.hidden_tools) or name == "__list_scenarios__":
            return missing, Failure.UNKNOWN_TOOL, False
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            key = canonical_tool_name(name)
            tools = [t for t in self.tools if t.name == key] or [
                t for t in self.tools if t.name.lower() == key.lower()
            ]
            if len(tools) != 1:
                return missing, Failure.UNKNOWN_TOOL, False
            _, errors = validate_arguments(tools[0], arguments)
            text = f"Error: invalid arguments for {tools[0].name}: {'; '.join(errors)}"
            return text, Failure.INVALID_ARGUMENTS, False
        budget = float(self.config.tool_budget_s)
        spent = (
            f"Error: server error: the episode's tool time budget ({budget:g} s, "
            "env.tool_budget_s) is spent"
        )
        left = budget - self.tool_seconds
        if left <= 0:
            return spent, Failure.SERVER_ERROR, True
        self._async._message_timeout = min(self.message_timeout_s, left)
        started = time.monotonic()
        try:
            return self._step(CallToolAction(tool_name=name, arguments=arguments))
        except TimeoutError:
            if left >= self.message_timeout_s:
                raise
            return spent, Failure.SERVER_ERROR, True
        finally:
            self.tool_seconds += time.monotonic() - started
            self._async._message_timeout = self.message_timeout_s

    def _count(self, failure: Failure | None, info: dict[str, JSON]) -> None:
        if failure is not None:
            self.failures[failure.value] = self.failures.get(failure.value, 0) + 1
            info["failure"] = failure.value
            if failure.is_format_error:
                self.format_errors += 1
        info["format_error"] = bool(failure and failure.is_format_error)

    def _record(self, text: str | None, info: dict[str, JSON], observation: str) -> None:
        self.trajectory.append(
            {"turn": self.turn, "text": text, "action": info["action"], "observation": observation}
        )

    def _server_end(
        self, obs: GenericMCPObservation, observation: str, info: dict, text: str | None
    ) -> StepResult:
        """The server ended the episode (its turn limit, or its worker died)."""
        self._record(text, info, observation)
        meta = _field(obs, "metadata", {})
        outcome = outcome_of(meta.get("outcome") or _field(obs, "reward_type"))
        verification = meta.get("verification") or {}
        if meta.get("truncated"):
            info["truncated"] = True
        v = Verification(
            outcome,
            str(verification.get("mode") or "none"),
            status=str(verification.get("status") or outcome),
            message=str(_field(obs, "error", "") or ""),
        )
        return self._end(v, observation, info, close=False)

    def _end(self, v: Verification, observation: str, info: dict, *, close: bool) -> StepResult:
        from openenv.core.env_server.mcp_types import CallToolAction

        if close:  # OpenEnv's end of an episode (after verify: no reward of its own)
            self._step(CallToolAction(tool_name="done", arguments={}))
        self.done = True
        self.outcome = v.outcome
        record = {"mode": v.mode, "status": v.status, "message": v.message}
        info.update(end_info(self, v, record))
        return StepResult(observation, episode_reward(v.outcome, self.config.rewards), True, info)

    def verify(self, final_answer: str | None = None) -> Verification:
        """The server's ``verify`` tool (the episode goes on)."""
        from openenv.core.env_server.mcp_types import CallToolAction

        args: dict[str, JSON] = dict(self._mode())
        if final_answer is not None:
            args["final_answer"] = final_answer
        obs = self._step(CallToolAction(tool_name="verify", arguments=args))
        outcome = outcome_of(_field(obs, "reward_type"))
        result = _field(obs, "verify_result", {}) or {}
        mode = result.get("mode") if isinstance(result.get("mode"), str) else None
        return Verification(
            outcome,
            mode or args.get("verifier_mode") or "code",
            status=str(result.get("status") or ("ok" if outcome in _VERDICTS else outcome)),
            message=str(_field(obs, "error", "") or "")[:2000],
        )

    def trajectory_text(self, final_answer: str | None = None) -> str:
        """:meth:`collect.awm.env.AWMEnv.trajectory_text`, from this side."""
        return trajectory_text(self.trajectory, final_answer)

    def db_digest(self) -> str:
        raise RuntimeError("an OpenEnv AWM server does not offer database digests")

    def state(self) -> dict[str, JSON]:
        return episode_state(self)

    @property
    def connected(self) -> bool:
        """The session's socket is open (a timed-out call drops it: see ``_receive``)."""
        return not self._closed and self._async._ws is not None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.client.close()
            except Exception:  # noqa: BLE001 - best effort: the server reaps idle sessions
                pass


def is_capacity_error(error: BaseException) -> bool:
    """``error`` says the server refused a new session for its session cap (OpenEnv's
    ``Server at capacity: N/N sessions active``, or :mod:`collect.awm.serve`'s ``too many
    sessions``): the session may open later, nothing of the episode ran."""
    return bool(_CAPACITY.search(str(error)[:2000]))


_CAPACITY = re.compile(r"at capacity|too many sessions|CAPACITY_REACHED", re.IGNORECASE)

#: the first and the longest pause between two tries to open a session at capacity, s
CAPACITY_BACKOFF_S = (0.1, 5.0)

#: the longest wait for a session while another of the pool's sessions is in use and the
#: collection's sessions may exceed the server's cap (``within_cap`` false), s
BUSY_WAIT_S = 10.0


def server_capacity(url: str, token_env: str = DEFAULT_TOKEN_ENV, timeout_s: float = 10.0):
    """The session cap a server advertises at ``GET /capacity`` (``max_sessions``,
    ``active_sessions``; :mod:`collect.awm.openenv_server` and :mod:`collect.awm.serve`
    offer it), or None where it offers none (OpenEnv's own servers) or cannot be
    reached. The answer is read within 64 KiB and must hold a positive integer."""
    import urllib.error
    import urllib.request

    token = (os.environ.get(token_env, "") if token_env else "").strip()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = str(url).rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    request = urllib.request.Request(base + "/capacity", headers=headers)
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with opener.open(request, timeout=timeout_s) as response:
            body = response.read((1 << 16) + 1)
        if len(body) > 1 << 16:
            return None
        data = bounded_json(body, max_bytes=1 << 16, max_values=64, max_depth=4)
    except (urllib.error.URLError, OSError, RemoteMessageError, ValueError):
        return None
    cap = data.get("max_sessions") if isinstance(data, dict) else None
    return (
        {"max_sessions": cap, "active_sessions": data.get("active_sessions")}
        if (type(cap) is int and cap > 0)
        else None
    )


class OpenEnvPool(ServedScenarios):
    """Sessions on an OpenEnv AWM server at ``url``, behind the interface of
    :class:`~collect.awm.env.EnvPool` (a released session is kept for the next episode
    of its scenario). ``worlds``: the local AWM directory the tasks and reference
    solutions are read from; ``token_env``: the environment variable holding the
    server's bearer token (unset or empty: none is sent).

    Capacity: ``max_sessions`` (0: no limit) bounds the sessions this pool holds, in use
    and idle: before it opens one at the limit it closes the least recently released
    idle session (the server frees its slot before the next one is asked for). A server
    at its cap refuses a new session; the pool tries again after a pause (0.1 s,
    doubling to 5 s: :data:`CAPACITY_BACKOFF_S`) for up to ``capacity_wait_s`` seconds
    in all, then raises the refusal; ``capacity_retries`` counts the pauses.
    ``within_cap``: the caller's sessions in all (every pool of the collection) are within
    the server's cap, so a refusal can only be a slot still being freed (a server that
    answers a close before it frees the slot, or another client's session): the pool waits
    the whole ``capacity_wait_s``. Otherwise, while another session of this pool is in use,
    it waits :data:`BUSY_WAIT_S` at most: pools that each hold sessions while waiting for
    more could wait for each other forever; the episode is lost instead, and run again
    once the batch is over (:mod:`collect.worker`). A session whose socket was dropped (a
    call that timed out) is closed, never kept."""

    def __init__(
        self,
        url: str,
        worlds: AWMDataset | str | Path,
        config: EnvConfig | None = None,
        *,
        scenarios: list[str] | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        timeout_s: float = 120.0,
        max_sessions: int = 0,
        capacity_wait_s: float = 300.0,
        within_cap: bool = False,
    ):
        if not str(url).startswith(("http://", "https://", "ws://", "wss://")):
            raise ValueError(f"env_url must be an http(s):// or ws(s):// URL, got {url!r}")
        self.url = str(url).rstrip("/")
        self.dataset = worlds if isinstance(worlds, AWMDataset) else AWMDataset(worlds)
        self.config = config or EnvConfig()
        self.allowed = set(scenarios) if scenarios else None
        self.token = (os.environ.get(token_env, "") if token_env else "").strip() or None
        self.timeout_s = float(timeout_s)
        self.max_sessions = max(0, int(max_sessions))
        self.capacity_wait_s = max(0.0, float(capacity_wait_s))
        self.within_cap = bool(within_cap)
        self.capacity_retries = 0
        self._scenarios: dict[str, Scenario] = {}
        self._idle: list[OpenEnvAWMEnv] = []  # least recently released first
        self._all: list[OpenEnvAWMEnv] = []  # every open session, in use or idle
        self._opening = 0  # sessions being opened (acquire in other threads)
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Sessions this pool holds open on the server (in use and idle)."""
        with self._lock:
            self._all = [e for e in self._all if not e._closed]
            return len(self._all)

    def acquire(self, name: str) -> OpenEnvAWMEnv:
        scenario = self.scenario(name)
        spare: list[OpenEnvAWMEnv] = []
        with self._lock:
            self._all = [e for e in self._all if not e._closed]  # closed by an episode
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i].scenario.name == name:
                    return self._idle.pop(i)
            # sessions being opened by other threads count: a batch starts its episodes
            # at once, and uncounted they took the pool past its limit
            while (
                self.max_sessions
                and self._idle
                and (len(self._all) + self._opening >= self.max_sessions)
            ):
                env = self._idle.pop(0)
                self._all.remove(env)
                spare.append(env)
            self._opening += 1
        try:
            for env in spare:  # closed (its slot freed) before the next session is asked for
                env.close()
            return self._open(scenario)
        except BaseException:
            with self._lock:
                self._opening -= 1
            raise

    def _open(self, scenario: Scenario) -> OpenEnvAWMEnv:
        pause, waited = CAPACITY_BACKOFF_S[0], 0.0
        while True:
            try:
                env = OpenEnvAWMEnv(
                    self.url,
                    scenario,
                    self.config,
                    self.token,
                    message_timeout_s=self.timeout_s,
                    connect_timeout_s=min(self.timeout_s, 30.0),
                )
            except Exception as e:
                with self._lock:  # some episode of ours holds a session: can we deadlock?
                    busy = not self.within_cap and len(self._all) > len(self._idle)
                limit = min(self.capacity_wait_s, BUSY_WAIT_S) if busy else self.capacity_wait_s
                if not is_capacity_error(e) or waited >= limit:
                    raise
                step = min(pause, limit - waited)
                with self._lock:
                    self.capacity_retries += 1
                time.sleep(step)
                waited += step
                pause = min(2 * pause, CAPACITY_BACKOFF_S[1])
                continue
            with self._lock:
                self._all.append(env)
                self._opening -= 1
            return env

    def release(self, env: OpenEnvAWMEnv) -> None:
        if env._closed:
            self._forget(env)
            return
        if not env.connected:  # its socket was dropped: a fresh session for the next episode
            self._forget(env)
            env.close()
            return
        with self._lock:
            self._idle.append(env)

    def _forget(self, env: OpenEnvAWMEnv) -> None:
        with self._lock:
            if env in self._all:
                self._all.remove(env)

    def close(self) -> None:
        with self._lock:
            envs, self._all = self._all, []
            self._idle.clear()
        for env in envs:
            env.close()

    def __enter__(self) -> OpenEnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
