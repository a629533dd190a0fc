"""Calling the app's tools: one tool call of the agent, dispatched to the app worker.

:class:`ToolCalls` (a part of :class:`~collect.awm.env.AWMEnv`) resolves the
visible tool, validates the arguments, sends the request to the sandboxed app worker
within the episode's tool time budget and classifies the answer as a :class:`ToolResult`
(a protocol failure class; ``fatal`` when the worker died).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from collect.awm.protocol import Failure
from collect.awm.sandbox import SandboxError
from collect.awm.tools import (
    Tool,
    build_request,
    canonical_tool_name,
    is_hidden_tool,
    validate_arguments,
)
from helpdp.jsonvalue import JSON

__all__ = ["RESPONSE_LAYOUTS", "ToolCalls", "ToolResult"]

#: ``env.response_layout``: how a tool's answer is written for the agent
RESPONSE_LAYOUTS = ("app", "fastapi_mcp")


@dataclass
class ToolResult:
    """A dispatched tool call. ``failure`` is None on a 2xx answer."""

    text: str
    status: int | None
    failure: Failure | None
    fatal: bool = False  # the worker died (server error; the episode cannot continue)
    app_ms: float | None = None  # time the app itself took, inside the worker

    @property
    def ok(self) -> bool:
        return self.failure is None


class ToolCalls:
    """The tool calls of an :class:`~collect.awm.env.AWMEnv` (part of the
    environment: it uses its tools, app worker and episode's tool time)."""

    def resolve_tool(self, name: str) -> Tool | None:
        """The visible tool called ``name`` (exact, then case-insensitive unique match)."""
        if is_hidden_tool(name, self.config.hidden_tools):
            return None
        key = canonical_tool_name(name)
        tool = self._tools_by_name.get(key)
        if tool is None:
            matches = [t for t in self.tools if t.name.lower() == key.lower()]
            tool = matches[0] if len(matches) == 1 else None
        return tool

    def call_tool(self, name: str, arguments: JSON = None) -> ToolResult:
        """Dispatch one tool call to the app (no episode bookkeeping)."""
        with self._lock:
            in_episode = bool(self.episode_id) and not self.done
            if self.app is None:
                if in_episode:  # the worker died earlier in this episode: its state is gone
                    return ToolResult(
                        "Error: server error: the app worker is not running",
                        None,
                        Failure.SERVER_ERROR,
                        fatal=True,
                    )
                self.start()
            tool = self.resolve_tool(name)
            if tool is None:
                return ToolResult(
                    f"Error: tool {name!r} does not exist. Call list_tools to see the available tools.",
                    None,
                    Failure.UNKNOWN_TOOL,
                )
            args, errors = validate_arguments(tool, arguments, strict=self.config.strict_arguments)
            if errors:
                return ToolResult(
                    f"Error: invalid arguments for {tool.name}: {'; '.join(errors)}",
                    None,
                    Failure.INVALID_ARGUMENTS,
                )
            request = build_request(tool, args)
            budget = float(self.config.tool_budget_s) - self.tool_seconds if in_episode else None
            if budget is not None and budget <= 0:
                self._discard_app()
                return ToolResult(
                    f"Error: server error: the episode's tool time budget "
                    f"({self.config.tool_budget_s:g} s, env.tool_budget_s) is spent",
                    None,
                    Failure.SERVER_ERROR,
                    fatal=True,
                )
            timeout = float(self.config.sandbox.call_timeout_s)
            started = time.monotonic()
            try:
                reply = self.app.request(
                    request.method,
                    request.path,
                    request.query,
                    request.body,
                    request.has_body,
                    timeout=timeout if budget is None else min(timeout, budget),
                )
            except SandboxError as e:
                self._discard_app()
                message = e.message
                if budget is not None and e.kind == "timeout" and budget < timeout:
                    message = (
                        f"the episode's tool time budget ({self.config.tool_budget_s:g} s, "
                        f"env.tool_budget_s) is spent ({e.message})"
                    )
                return ToolResult(
                    f"Error: server error: {message}", None, Failure.SERVER_ERROR, fatal=True
                )
            finally:
                if in_episode:
                    self.tool_seconds += time.monotonic() - started
            if not reply.get("ok"):
                return ToolResult(
                    f"Error: server error: {reply.get('message')}", None, Failure.SERVER_ERROR
                )
            status = int(reply.get("status", 500))
            text = reply.get("text", "")
            app_ms = reply.get("app_ms")
            if reply.get("truncated"):
                text += "\n... (response truncated)"
            if self.config.response_layout == "fastapi_mcp":
                return _fastapi_mcp_result(tool.name, status, text, app_ms)
            if 200 <= status < 300:
                return ToolResult(text, status, None, app_ms=app_ms)
            if status == 422:
                return ToolResult(
                    f"Error: invalid arguments for {tool.name} (HTTP 422): {text}",
                    status,
                    Failure.INVALID_ARGUMENTS,
                    app_ms=app_ms,
                )
            if status >= 500:
                return ToolResult(
                    f"Error: server error in {tool.name} (HTTP {status}): {text}",
                    status,
                    Failure.SERVER_ERROR,
                    app_ms=app_ms,
                )
            return ToolResult(
                f"Error: HTTP {status} from {tool.name}: {text}",
                status,
                Failure.TOOL_ERROR,
                app_ms=app_ms,
            )


def _fastapi_mcp_result(name: str, status: int, text: str, app_ms: JSON) -> ToolResult:
    """The answer as fastapi-mcp 0.4.0 gives it to the official agent: a JSON body
    re-dumped with ``indent=2, ensure_ascii=False`` (else the body), an HTTP error as its
    exception's text after ``Error: `` (``awm.core.agent``); the failure classes are
    helpdp's."""
    try:
        shown = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        shown = text
    if 200 <= status < 300:
        return ToolResult(shown, status, None, app_ms=app_ms)
    failure = (
        Failure.INVALID_ARGUMENTS
        if status == 422
        else Failure.SERVER_ERROR
        if status >= 500
        else Failure.TOOL_ERROR
    )
    message = f"Error: Error calling {name}. Status code: {status}. Response: {text}"
    return ToolResult(message, status, failure, app_ms=app_ms)
