"""The agent protocol of AWM's seed setup: parsing turns, failure classes, prompts
(the rewards of an episode: :mod:`collect.awm.rewards`).

A turn is the model's text. Its first ``<tool_call>{json}</tool_call>`` block
(JSON with ``name`` and ``arguments``) is the action; a turn with no tool call
ends the episode and its text is the final answer. Meta-functions:

* ``list_tools`` - the environment's tools;
* ``call_tool {"tool_name": str, "arguments": "<JSON string>" | object}``;
* ``ask_expert {...}`` - handled by the harness, returned as its own action.

As in AWM's agent, a function name ``mcp_tool_X`` is read as ``call_tool X``
and a ``mcp_tool_`` prefix on ``tool_name`` is dropped.

Failures (:class:`Failure`) are classified; the first four are *format
errors* (the model broke the protocol), counted per episode.

Strict by default, as AWM's reward is: a turn with no tags whose text holds a JSON
object that looks like a call (``name`` with ``arguments``/``parameters``, or a
``tool_name``), bare or in a ````` ```json ````` fence, is the format error
``untagged_call``, never a final answer. Real instruct models write calls that way
(Qwen2.5-Coder-0.5B answered the demo worlds' first turn with a bare
``{"name": "call_tool", ...}``). ``parse_turn(..., lenient=True)`` (and
:func:`lenient_turn`, which the actors' ``call_format=lenient`` applies) reads the
first such object as if it were inside the tags: a named option, never the default.

Everything here is pure (no I/O). The SQL-mode judge's prompt and answer
parsing live here too; the HTTP call is in :mod:`collect.awm.tool_calls`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum

from collect.awm.observation import render_observation
from helpdp.jsonvalue import JSON

__all__ = [
    "FORMAT_ERRORS",
    "META_FUNCTIONS",
    "Action",
    "Failure",
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "format_call_tool",
    "find_untagged_call",
    "format_tool_call",
    "judge_messages",
    "lenient_turn",
    "parse_judge_answer",
    "parse_turn",
    "system_prompt",
    "tool_call_block",
]

META_FUNCTIONS = ("list_tools", "call_tool", "ask_expert")


class Failure(str, Enum):
    """Why an action failed. ``str`` values are stable metric keys."""

    MALFORMED_TAG = "malformed_tag"  # <tool_call> without its closing tag (or vice versa)
    INVALID_JSON = "invalid_json"  # the block (or call_tool's arguments string) is not JSON / not {name, arguments}
    UNKNOWN_META_FUNCTION = "unknown_meta_function"  # name is not list_tools/call_tool/ask_expert
    UNTAGGED_CALL = "untagged_call"  # a call as bare JSON or in a ``` fence, without the tags
    UNKNOWN_TOOL = "unknown_tool"  # call_tool names no (visible) tool
    INVALID_ARGUMENTS = "invalid_arguments"  # missing/ill-typed arguments (incl. the app's 422)
    TOOL_ERROR = "tool_error"  # the app answered 4xx (not found, conflict, ...)
    SERVER_ERROR = "server_error"  # the app answered 5xx / raised, or the worker died

    @property
    def is_format_error(self) -> bool:
        return self in FORMAT_ERRORS


FORMAT_ERRORS = frozenset(
    {
        Failure.MALFORMED_TAG,
        Failure.INVALID_JSON,
        Failure.UNKNOWN_META_FUNCTION,
        Failure.UNTAGGED_CALL,
    }
)


@dataclass
class Action:
    """A parsed turn.

    ``kind``: ``list_tools``, ``call_tool``, ``ask_expert``, ``final`` (no tool
    call: ``text`` is the answer) or ``invalid`` (``failure`` and ``message``).
    """

    kind: str
    tool_name: str | None = None
    arguments: JSON = None
    text: str = ""
    failure: Failure | None = None
    message: str = ""
    raw_call: str | None = None
    extra_calls: int = 0

    @property
    def is_format_error(self) -> bool:
        return self.failure is not None and self.failure.is_format_error

    def as_dict(self) -> dict[str, JSON]:
        return {
            "kind": self.kind,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "failure": self.failure.value if self.failure else None,
            "message": self.message,
            "extra_calls": self.extra_calls,
        }


TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_OPEN, _CLOSE = TOOL_CALL_OPEN, TOOL_CALL_CLOSE
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def _invalid(failure: Failure, message: str, raw: str | None = None) -> Action:
    return Action("invalid", failure=failure, message=message, raw_call=raw)


#: the deepest nesting a tool call's JSON may have (a reply is data: deeper is a format
#: error of that turn, never a recursion error of the collector)
MAX_CALL_DEPTH = 64


def _too_deep(value: JSON, limit: int = MAX_CALL_DEPTH) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` deep (no recursion)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            if d >= limit:
                return True
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def _loads_json(text: str) -> JSON:
    """A reply's JSON; ValueError when it is not JSON or nests past :data:`MAX_CALL_DEPTH`
    (a ``RecursionError`` of the decoder included)."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_CALL_DEPTH} levels deep") from None
    if _too_deep(value):
        raise ValueError(f"nested more than {MAX_CALL_DEPTH} levels deep")
    return value


_ANY_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.S)
_DECODER = json.JSONDecoder()


def _looks_like_call(data: JSON) -> bool:
    """A JSON value shaped like a function call: ``{"name": str, "arguments"|"parameters": ...}``
    or ``{"tool_name": str, ...}`` (or a list of one)."""
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("name"), str) and ("arguments" in data or "parameters" in data):
        return True
    return isinstance(data.get("tool_name"), str)


def _json_objects(text: str, offset: int = 0):
    """``(start, end, value)`` of each JSON object or array that starts at a ``{`` or ``[``
    of ``text`` and is not inside an earlier one."""
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = _DECODER.raw_decode(text, i)
                if _too_deep(value):
                    raise ValueError("too deep")
            except (ValueError, RecursionError):
                i += 1
                continue
            yield offset + i, offset + end, value
            i = end
        else:
            i += 1


def find_untagged_call(text: str) -> tuple[int, int, str, int] | None:
    """The first call-shaped JSON object of a turn written without ``<tool_call>`` tags:
    ``(start, end, json_text, count)``: the span to replace (a fence's whole span when
    the object is fenced), the object's JSON text and how many call-shaped objects the
    turn holds; None when there is none (then the turn is a final answer)."""
    if not isinstance(text, str):
        return None
    found: list[tuple[int, int, str]] = []
    fenced: list[tuple[int, int]] = []
    for m in _ANY_FENCE.finditer(text):
        fenced.append(m.span())
        for _s, _e, value in _json_objects(m.group(1)):
            if _looks_like_call(value):
                found.append((m.start(), m.end(), json.dumps(value, ensure_ascii=False)))
    for start, end, value in _json_objects(text):
        if any(a <= start < b for a, b in fenced) or not _looks_like_call(value):
            continue
        found.append((start, end, text[start:end]))
    if not found:
        return None
    found.sort()
    start, end, body = found[0]
    return start, end, body, len(found)


def lenient_turn(text: str) -> str:
    """``text`` with its first untagged call (:func:`find_untagged_call`) put inside the
    ``<tool_call>`` tags, the words before it kept as the thought and the rest dropped;
    a turn that has tags, or no call-shaped JSON, is returned as is."""
    if not isinstance(text, str) or _OPEN in text or _CLOSE in text:
        return text
    found = find_untagged_call(text)
    if found is None:
        return text
    start, _end, body, _count = found
    return tool_call_block(body, text[:start].strip())


def parse_turn(text: str, *, expert_enabled: bool = True, lenient: bool = False) -> Action:
    """Parse one model turn into an :class:`Action` (never raises).

    ``lenient``: a call written without the tags (bare JSON or in a fence) is read as
    if it were tagged; strict (the default), it is the format error ``untagged_call``.
    """
    if not isinstance(text, str):
        return _invalid(Failure.MALFORMED_TAG, f"turn must be text, got {type(text).__name__}")
    match = _BLOCK.search(text)
    if match is None:
        if _OPEN in text:
            return _invalid(Failure.MALFORMED_TAG, f"found {_OPEN} without a closing {_CLOSE}")
        if _CLOSE in text:
            return _invalid(Failure.MALFORMED_TAG, f"found {_CLOSE} without an opening {_OPEN}")
        untagged = find_untagged_call(text)
        if untagged is None:
            return Action("final", text=text.strip())
        if not lenient:
            return _invalid(
                Failure.UNTAGGED_CALL,
                f"a tool call must be inside {_OPEN}{_CLOSE} tags (found it as "
                f"{'fenced' if text[untagged[0] :].startswith('```') else 'bare'} JSON)",
                untagged[2],
            )
        action = parse_turn(lenient_turn(text), expert_enabled=expert_enabled)
        action.extra_calls = untagged[3] - 1
        return action
    raw = match.group(1)
    extra = len(_BLOCK.findall(text)) - 1
    if _OPEN in raw:
        return _invalid(Failure.MALFORMED_TAG, f"nested {_OPEN} inside a tool call", raw)
    try:
        data = _loads_json(raw)
    except ValueError as e:
        return _invalid(Failure.INVALID_JSON, f"tool call is not valid JSON: {e}", raw)
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return _invalid(
            Failure.INVALID_JSON,
            'tool call must be a JSON object {"name": ..., "arguments": ...}',
            raw,
        )
    name = data["name"].strip()
    arguments = data.get("arguments")
    action = _meta(name, arguments, expert_enabled, raw)
    action.raw_call = raw
    action.extra_calls = extra
    return action


# ---------------------------------------------------------------------------
# writing turns (the inverse of parse_turn)
# ---------------------------------------------------------------------------


def tool_call_block(body: str, thought: str = "") -> str:
    """``thought``, then ``body`` (the call's JSON text, as is) inside the tags:
    ``thought\n<tool_call>\nbody\n</tool_call>`` (no leading newline without a thought)."""
    return f"{thought}\n{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}".lstrip("\n")


def format_tool_call(name: str, arguments: JSON = None, thought: str = "") -> str:
    """A turn calling the meta-function ``name`` (``list_tools``, ``call_tool``,
    ``ask_expert``) with ``arguments``; :func:`parse_turn` reads it back."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return tool_call_block(body, thought)


def format_call_tool(tool_name: str, arguments: JSON = None, thought: str = "") -> str:
    """A turn calling the app's tool ``tool_name``: ``call_tool`` with the tool's
    arguments as a JSON string, as the system prompt asks."""
    args = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return format_tool_call("call_tool", {"tool_name": tool_name, "arguments": args}, thought)


def _decode_arguments(value: JSON, what: str) -> tuple[JSON, Action | None]:
    if isinstance(value, str):
        if not value.strip():
            return {}, None
        try:
            value = _loads_json(value)
        except ValueError as e:
            return None, _invalid(Failure.INVALID_JSON, f"{what} is not valid JSON: {e}")
    return value, None


def _meta(name: str, arguments: JSON, expert_enabled: bool, raw: str) -> Action:
    lowered = name.lower()
    if lowered.startswith("mcp_tool_"):
        inner, err = _decode_arguments(arguments, "arguments")
        if err:
            return err
        return Action("call_tool", tool_name=name[len("mcp_tool_") :], arguments=inner)
    if lowered == "list_tools":
        return Action("list_tools")
    if lowered == "call_tool":
        args, err = _decode_arguments(arguments, "call_tool arguments")
        if err:
            return err
        if not isinstance(args, dict):
            return _invalid(
                Failure.INVALID_ARGUMENTS, 'call_tool needs {"tool_name": ..., "arguments": ...}'
            )
        tool_name = args.get("tool_name")
        if not isinstance(tool_name, str) or not tool_name.strip():
            return _invalid(Failure.INVALID_ARGUMENTS, "call_tool needs a 'tool_name' string")
        tool_name = tool_name.strip()
        if tool_name.lower().startswith("mcp_tool_"):
            tool_name = tool_name[len("mcp_tool_") :]
        inner, err = _decode_arguments(args.get("arguments", {}), f"arguments of {tool_name}")
        if err:
            return err
        if inner is None:
            inner = {}
        return Action("call_tool", tool_name=tool_name, arguments=inner)
    if lowered == "ask_expert" and expert_enabled:
        args, err = _decode_arguments(arguments, "ask_expert arguments")
        if err:
            return err
        return Action("ask_expert", arguments=args if args is not None else {})
    available = ", ".join(f for f in META_FUNCTIONS if expert_enabled or f != "ask_expert")
    return _invalid(
        Failure.UNKNOWN_META_FUNCTION,
        f"unknown function {name!r}; available functions: {available}",
    )


# ---------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------


def system_prompt(*, expert_enabled: bool = True) -> str:
    """AWM's MCP-agent system prompt, plus ``ask_expert`` when enabled."""
    functions = [
        "1. list_tools\n"
        "    - Description: List all available MCP tools for the current environment to help you finish the user task.\n"
        "    - Arguments: None\n"
        "    - Output: A list of MCP environment-specific tools and their descriptions",
        "2. call_tool\n"
        "    - Description: Call a MCP environment-specific tool\n"
        "    - Arguments:\n"
        "        - tool_name: str, required, the tool name in the list_tools output\n"
        "        - arguments: str, required, the arguments for calling <tool_name>. You must pass a valid JSON "
        "string without any markdown fences or additional commentary. This JSON str will be parsed by the tool "
        "and executed. You can pass an empty JSON str if no arguments are required by <tool_name>.\n"
        "    - Output: The result of the <tool_name> tool call",
    ]
    if expert_enabled:
        functions.append(
            "3. ask_expert\n"
            "    - Description: Ask a human expert for help when you are unsure how to proceed\n"
            "    - Arguments:\n"
            "        - question: str, required, what you need help with\n"
            "    - Output: The expert's answer"
        )
    count = "THREE" if expert_enabled else "TWO"
    return (
        "# MCP Tools\n\n"
        "You are at a MCP environment. You need to call MCP tools to assist with the user query. "
        "At each step, you can only call one function. You have already logged in, and your user id is 1 "
        "if required for the MCP tool.\n\n"
        f"You are provided with {count} functions within <tools></tools> XML tags:\n<tools>\n"
        + "\n\n".join(functions)
        + "\n</tools>\n\n"
        "You should always call list_tools function first to get the available tools, and should only call it "
        "once. You should always directly output the answer or summary at the final step instead of calling "
        "any function.\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n'
        "Example Function Call #1:\n<tool_call>\n"
        '{"name": "list_tools", "arguments": null}\n</tool_call>\n\n'
        "Example Function Call #2:\n<tool_call>\n"
        '{"name": "call_tool", "arguments": {"tool_name": "get_weather", "arguments": "{\\"city\\": \\"Beijing\\"}"}}\n'
        "</tool_call>"
    )


JUDGE_LABELS = ("complete", "incomplete", "others")


def judge_messages(
    task: str, trajectory: str, verifier_output: JSON, *, max_chars: int = 24000
) -> list[dict]:
    """Chat messages asking an LLM to classify an episode (SQL-mode verification)."""
    task, trajectory = render_observation(task), render_observation(trajectory)
    evidence = json.dumps(verifier_output, ensure_ascii=False, default=str, indent=1)
    evidence = render_observation(evidence)
    half = max_chars // 2
    if len(evidence) > half:
        evidence = evidence[:half] + "\n... (truncated)"
    if len(trajectory) > half:
        trajectory = "... (earlier turns truncated)\n" + trajectory[-half:]
    system = (
        "You judge whether an AI agent completed a user's task in a simulated web application. "
        "You get the task, the agent's trajectory (tool calls and results, final answer) and the output of "
        "a verification function that queried the application's database before and after the episode. "
        "Trust the database evidence over the agent's claims. Classify the episode as exactly one of: "
        '"complete" (every requirement of the task is met), "incomplete" (some but not all requirements '
        'are met), "others" (not accomplished, wrong changes, or cannot tell). Reply with a JSON object '
        '{"label": "complete" | "incomplete" | "others", "reason": "<one sentence>"} and nothing else.'
    )
    user = f"## Task\n{task}\n\n## Trajectory\n{trajectory}\n\n## Verification output\n{evidence}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_judge_answer(text: str) -> tuple[str, str]:
    """``(label, reason)`` from the judge's reply; unreadable replies are ``others``."""
    if not isinstance(text, str):
        return "others", "judge reply is not text"
    for candidate in re.findall(r"\{.*?\}", text, re.S) or []:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        label = str(data.get("label", "")).strip().lower() if isinstance(data, dict) else ""
        if label in JUDGE_LABELS:
            return label, str(data.get("reason", ""))
    lowered = text.lower()
    for label in ("incomplete", "complete", "others"):
        if re.search(rf"\b{label}\b", lowered):
            return label, text.strip()[:300]
    return "others", f"unreadable judge reply: {text.strip()[:200]}"
