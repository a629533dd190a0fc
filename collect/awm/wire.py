"""The servers' wire format: JSON actions in; observations, state and errors out.

The pydantic models of an action (:data:`ActionModel`, validated on the way in) and of
what a step and ``/state`` return (their JSON Schemas in :data:`SCHEMA`, served at
``/schema``); :func:`action_from_dict` (a JSON action as a protocol
:class:`~collect.awm.protocol.Action`; a request that is no action is a
:class:`SessionError`); and what of a step or a failure may leave the server
(:func:`public_info`, ``_kind``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from collect.awm.protocol import Action, Failure, parse_turn
from helpdp.jsonvalue import JSON

__all__ = [
    "ActionModel",
    "AskExpertAction",
    "CallToolAction",
    "EpisodeState",
    "ListToolsAction",
    "Observation",
    "SCHEMA",
    "RemoteMessageError",
    "SessionError",
    "TurnAction",
    "action_from_dict",
    "bounded_json",
    "public_info",
]


class SessionError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


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
    arguments: dict[str, JSON] | str = Field(default_factory=dict)


class AskExpertAction(BaseModel):
    """The ``ask_expert`` meta-function."""

    type: Literal["ask_expert"]
    arguments: dict[str, JSON] | None = None


ActionModel = Annotated[
    TurnAction | ListToolsAction | CallToolAction | AskExpertAction, Field(discriminator="type")
]
_ACTION = TypeAdapter(ActionModel)


class Observation(BaseModel):
    """What a step returns under ``observation``."""

    text: str
    done: bool
    reward: float | None
    metadata: dict[str, JSON]
    tools: list[dict[str, JSON]] | None = None


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


def action_from_dict(data: JSON, *, expert_enabled: bool = True) -> Action:
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


def public_info(info: dict[str, JSON]) -> dict[str, JSON]:
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


def _kind(e: BaseException) -> str:
    """What may be told about a failure: the sandbox's kind of error, not its text."""
    kind = getattr(e, "kind", None)
    return f" ({kind})" if isinstance(kind, str) and _WORD.match(kind) else ""


SCHEMA = {
    "action": _ACTION.json_schema(),
    "observation": Observation.model_json_schema(),
    "state": EpisodeState.model_json_schema(),
}


class RemoteMessageError(RuntimeError):
    """A message from a remote runtime that is refused: too large, too many JSON values
    or too deeply nested to decode, not JSON, or a field outside the protocol's schema.
    The episode it answers ends (the collector records it as ``server_error``)."""


def bounded_json(
    raw: str | bytes, *, max_bytes: int, max_values: int, max_depth: int, what: str = "message"
) -> JSON:
    """``raw`` (one WebSocket message) decoded as JSON within bounds, or
    :class:`RemoteMessageError`.

    Before anything is decoded: at most ``max_bytes`` long, and at most ``max_values``
    JSON values, counted as ``[`` + ``{`` + ``,`` + 1 (every value but a container's
    first follows a comma; brackets inside strings count too, so the count is an upper
    bound): what a message decodes into is then a few hundred bytes per value at most,
    where ``[[],[],...]`` alone is 30 million lists (2.7 GiB) in 95 MB. After: at most
    ``max_depth`` containers deep (the decoder's own recursion limit stops the deepest
    first). ``what``: the word the errors use for ``raw``."""
    if len(raw) > max_bytes:
        raise RemoteMessageError(f"{what} of {len(raw)} bytes is over the {max_bytes}-byte limit")
    marks = (b"[", b"{", b",") if isinstance(raw, bytes) else ("[", "{", ",")
    values = 1 + sum(raw.count(m) for m in marks)  # type: ignore[arg-type]
    if values > max_values:
        raise RemoteMessageError(
            f"{what} of up to {values} JSON values is over the {max_values} limit"
        )
    try:
        data = json.loads(raw)
    except RecursionError:
        raise RemoteMessageError(f"{what} nested deeper than {max_depth} levels") from None
    except ValueError as e:
        raise RemoteMessageError(f"{what} is not JSON: {str(e)[:200]}") from None
    stack = [(data, 1)]
    while stack:  # at most max_values items
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        if depth > max_depth:
            raise RemoteMessageError(f"{what} nested deeper than {max_depth} levels")
        stack.extend((v, depth + 1) for v in value)
    return data
