"""From an app's OpenAPI document to agent tools, and from flat arguments back to HTTP.

Mirrors what ``fastapi_mcp`` exposes to AWM agents: one tool per operation,
named by its ``operationId``; description = summary (or ``METHOD path``) plus
the operation description (and, with ``describe_responses``, fastapi-mcp 0.4.0's
``### Responses`` section, byte for byte); input schema = one flat JSON object merging path,
query and body parameters (body properties are flattened; a body that is not
an object becomes a single ``body`` argument). ``$ref`` pointers are resolved
(within a node budget and a depth limit: the document is dataset code's output).

Pure functions only (no I/O): :func:`tools_from_openapi`,
:func:`validate_arguments`, :func:`build_request`, :func:`format_tools`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import quote

from collect.awm.sandbox import SandboxError
from helpdp.jsonvalue import JSON

__all__ = [
    "DEFAULT_HIDDEN_TOOLS",
    "HttpRequest",
    "MAX_EXPANDED_DEPTH",
    "MAX_EXPANDED_NODES",
    "OpenAPIError",
    "Tool",
    "build_request",
    "canonical_tool_name",
    "format_tools",
    "is_hidden_tool",
    "tools_from_openapi",
    "validate_arguments",
]

_METHODS = ("get", "post", "put", "patch", "delete")
#: the orders of a path's operations :func:`tools_from_openapi` knows (env.tool_order)
TOOL_ORDERS = ("methods", "document")

#: names the agent can never reach (harness-only operations), whatever the app defines
DEFAULT_HIDDEN_TOOLS: tuple[str, ...] = (
    "verify",
    "verify_task",
    "verify_task_completion",
    "done",
    "reset",
    "step",
    "state",
    "close",
    "list_scenarios",
    "get_scenarios",
    "scenarios",
    "list_environments",
    "list_envs",
    "get_environments",
)
_HIDDEN_PATTERN = re.compile(
    r"^(?:list|get|show|all|available)_?(?:scenarios?|envs?|environments?|worlds?)$"
)


def canonical_tool_name(name: JSON) -> str:
    """Lower-case, trimmed, without AWM's ``mcp_tool_`` prefix."""
    text = str(name).strip()
    if text.lower().startswith("mcp_tool_"):
        text = text[len("mcp_tool_") :]
    return text.strip()


def is_hidden_tool(
    name: JSON, hidden: tuple[str, ...] | list[str] | set[str] = DEFAULT_HIDDEN_TOOLS
) -> bool:
    """True for names the agent must never reach (compared case- and separator-insensitively)."""
    key = re.sub(r"[^a-z0-9]+", "_", canonical_tool_name(name).lower()).strip("_")
    hidden_keys = {re.sub(r"[^a-z0-9]+", "_", h.lower()).strip("_") for h in hidden}
    return key in hidden_keys or bool(_HIDDEN_PATTERN.match(key))


@dataclass
class Tool:
    """One agent tool backed by one HTTP operation of the app."""

    name: str
    description: str
    input_schema: dict[str, JSON]
    method: str
    path: str
    path_params: list[str] = field(default_factory=list)
    query_params: list[str] = field(default_factory=list)
    body_params: list[str] = field(default_factory=list)
    body_mode: str = "none"  # "none" | "object" (flattened properties) | "value" (one "body" arg)
    body_required: bool = False

    def as_dict(self) -> dict[str, JSON]:
        """MCP-style listing: ``name``, ``description``, ``inputSchema``."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }


@dataclass
class HttpRequest:
    method: str
    path: str
    query: list[tuple[str, str]]
    body: JSON
    has_body: bool


class OpenAPIError(SandboxError):
    """An app's OpenAPI document cannot be turned into tools (e.g. its ``$ref`` expansion
    exceeds the node budget or the depth limit). Subclasses :class:`SandboxError` so
    that callers report it as the app failing to start, naming the app."""

    def __init__(self, message: str):
        super().__init__("openapi", message)


#: most nodes (objects, arrays, scalars) that ``$ref`` expansion of one document may
#: produce; the demo worlds need about 6 000. A self-referencing or exponentially
#: nested document is refused instead of growing the process.
MAX_EXPANDED_NODES = 200_000
#: deepest nesting of an expanded operation (the demo worlds reach 18)
MAX_EXPANDED_DEPTH = 64


class _Expander:
    """Resolves local ``$ref`` pointers within a node budget and a depth limit.

    A ref already being expanded on the current path becomes a placeholder (recursive
    models terminate); every produced node counts against the budget of the whole
    document, so mutually recursive or fan-out refs cannot blow up either.
    """

    def __init__(self, root: dict[str, JSON], max_nodes: int, max_depth: int):
        self.root = root
        self.max_nodes = max_nodes
        self.max_depth = max_depth
        self.nodes = 0
        self.where = "the document"

    def _fail(self, what: str, seen: tuple[str, ...]) -> OpenAPIError:
        schema = f" (schema {seen[-1].rsplit('/', 1)[-1]!r})" if seen else ""
        return OpenAPIError(
            f"OpenAPI document refused: expanding $ref pointers of {self.where}{schema} "
            f"{what}; a self-referencing or exponentially nested schema?"
        )

    def resolve(self, node: JSON, seen: tuple[str, ...] = (), depth: int = 0) -> JSON:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise self._fail(f"exceeds the budget of {self.max_nodes} nodes", seen)
        if depth > self.max_depth:
            raise self._fail(f"nests deeper than {self.max_depth} levels", seen)
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                if ref in seen:  # recursive model: stop expanding
                    return {
                        "type": "object",
                        "description": f"(recursive {ref.rsplit('/', 1)[-1]})",
                    }
                target: JSON = self.root
                for part in ref[2:].split("/"):
                    target = target.get(part, {}) if isinstance(target, dict) else {}
                merged = {k: v for k, v in node.items() if k != "$ref"}
                # resolve() builds new containers, so the target needs no copy
                resolved = self.resolve(target, (*seen, ref), depth + 1)
                if isinstance(resolved, dict):
                    resolved = {**resolved, **self.resolve(merged, seen, depth + 1)}
                return resolved
            return {k: self.resolve(v, seen, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [self.resolve(v, seen, depth + 1) for v in node]
        return node


def _simple_type(schema: dict[str, JSON]) -> str:
    if "type" in schema and isinstance(schema["type"], str):
        return schema["type"]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            if isinstance(option, dict) and option.get("type") not in (None, "null"):
                return str(option["type"])
    return "string"


def _param_schema(schema: dict[str, JSON], description: str | None, name: str) -> dict[str, JSON]:
    out = dict(schema)
    out["title"] = name
    if description and "description" not in out:
        out["description"] = description
    elif description:
        out["description"] = description
    if "type" not in out:
        out["type"] = _simple_type(schema)
    return out


def tools_from_openapi(
    openapi: dict[str, JSON],
    *,
    hidden: tuple[str, ...] | list[str] = DEFAULT_HIDDEN_TOOLS,
    describe_responses: bool = False,
    tool_order: str = "methods",
    max_nodes: int = MAX_EXPANDED_NODES,
    max_depth: int = MAX_EXPANDED_DEPTH,
) -> list[Tool]:
    """One :class:`Tool` per operation with an ``operationId`` (hidden names dropped).

    ``tool_order``: within a path, ``methods`` lists its operations as GET, POST, PUT,
    PATCH, DELETE (helpdp's order); ``document`` in the document's own order, as fastapi-mcp
    0.4.0 does (the app's declaration order). Paths keep the document's order either way.

    Raises :class:`OpenAPIError` when the document is not an object or its ``$ref``
    expansion exceeds ``max_nodes`` (for the whole document) or ``max_depth``.
    """
    if tool_order not in TOOL_ORDERS:
        raise ValueError(f"tool_order: {tool_order!r}: one of {', '.join(TOOL_ORDERS)}")
    if not isinstance(openapi, dict):
        raise OpenAPIError("OpenAPI document refused: not a JSON object")
    paths = openapi.get("paths")
    if not isinstance(paths or {}, dict):
        raise OpenAPIError("OpenAPI document refused: 'paths' is not an object")
    expander = _Expander(openapi, max_nodes, max_depth)
    tools: list[Tool] = []
    seen: set[str] = set()
    for path, item in (paths or {}).items():
        if not isinstance(item, dict):
            continue
        shared_params = item.get("parameters") or []
        methods = _METHODS if tool_order == "methods" else [m for m in item if m in _METHODS]
        for method in methods:
            op = item.get(method)
            if not isinstance(op, dict) or not op.get("operationId"):
                continue
            name = str(op["operationId"])
            if name in seen or is_hidden_tool(name, hidden):
                continue
            seen.add(name)
            expander.where = f"operation {name!r} ({method.upper()} {path})"
            op = expander.resolve(op)
            properties: dict[str, JSON] = {}
            required: list[str] = []
            tool = Tool(
                name=name, description="", input_schema={}, method=method.upper(), path=path
            )
            for param in [
                *(expander.resolve(p) for p in shared_params),
                *(op.get("parameters") or []),
            ]:
                if not isinstance(param, dict):
                    continue
                where, pname = param.get("in"), param.get("name")
                if where not in ("path", "query") or not isinstance(pname, str):
                    continue
                properties[pname] = _param_schema(
                    param.get("schema") or {}, param.get("description"), pname
                )
                if where == "path":
                    tool.path_params.append(pname)
                    required.append(pname)
                else:
                    tool.query_params.append(pname)
                    if param.get("required"):
                        required.append(pname)
            body = op.get("requestBody") or {}
            content = body.get("content") or {}
            media = content.get("application/json") or next(iter(content.values()), None)
            if isinstance(media, dict) and isinstance(media.get("schema"), dict):
                schema = media["schema"]
                tool.body_required = bool(body.get("required"))
                if isinstance(schema.get("properties"), dict):
                    tool.body_mode = "object"
                    body_required = set(schema.get("required") or [])
                    for pname, pschema in schema["properties"].items():
                        if pname in properties:  # path/query wins, as in fastapi_mcp
                            continue
                        properties[pname] = _param_schema(pschema or {}, None, pname)
                        tool.body_params.append(pname)
                        if pname in body_required:
                            required.append(pname)
                else:
                    tool.body_mode = "value"
                    properties["body"] = _param_schema(schema, schema.get("description"), "body")
                    tool.body_params.append("body")
                    if tool.body_required:
                        required.append("body")
            input_schema: dict[str, JSON] = {"type": "object", "properties": properties}
            if required:
                input_schema["required"] = required
            tool.input_schema = input_schema
            tool.description = _describe(op, method, path, describe_responses)
            tools.append(tool)
    return tools


def _describe(op: dict[str, JSON], method: str, path: str, describe_responses: bool) -> str:
    summary = str(op.get("summary") or "").strip()
    text = summary or f"{method.upper()} {path}"
    description = str(op.get("description") or "").strip()
    if description and description != summary:
        text += f"\n\n{description}"
    if describe_responses:
        text += _responses_section(op.get("responses"))
    return text


_SUCCESS_CODES = tuple(str(code) for code in range(200, 300))


def _responses_section(responses: JSON) -> str:
    """The ``### Responses`` section as fastapi-mcp 0.4.0 writes it, byte for byte
    (``convert_openapi_to_mcp_tools`` with ``FastApiMCP``'s defaults: the first 2xx response
    only, or every response when there is none; an example per content type; no output
    schema). Empty when the operation lists no responses."""
    if not isinstance(responses, dict) or not responses:
        return ""
    code = next((c for c in _SUCCESS_CODES if c in responses), None)
    success = responses[code] if code is not None else None
    selected = {code: success} if success else responses
    text = "\n\n### Responses:\n"
    for status, resp in selected.items():
        if not isinstance(resp, dict):
            continue
        text += f"\n**{status}**: {resp.get('description', '')}"
        if resp == success:
            text += " (Success Response)"
        content = resp.get("content")
        for content_type, media in (content if isinstance(content, dict) else {}).items():
            if not isinstance(media, dict) or "schema" not in media:
                continue
            text += f"\nContent-Type: {content_type}"
            example = _media_example(media) or _generated_example(_display_schema(media["schema"]))
            if example:
                text += "\n\n**Example Response:**\n```json\n"
                text += json.dumps(example, indent=2) + "\n```"
    return text


def _media_example(media: dict[str, JSON]) -> JSON:
    """A media type's own example: the first of ``examples`` with a ``value``, else
    ``example`` (only when there is no ``examples``)."""
    if "examples" in media:
        examples = media["examples"]
        for item in (examples if isinstance(examples, dict) else {}).values():
            if isinstance(item, dict) and "value" in item:
                return item["value"]
        return None
    return media.get("example")


_HIDDEN_SCHEMA_KEYS = (
    "allOf",
    "anyOf",
    "oneOf",
    "nullable",
    "discriminator",
    "readOnly",
    "writeOnly",
    "xml",
    "externalDocs",
)


def _display_schema(schema: JSON) -> JSON:
    """fastapi-mcp's ``clean_schema_for_display``: the combinators and internal keys
    dropped, in the schema, its properties and an array's items (a copy)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k not in _HIDDEN_SCHEMA_KEYS}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _display_schema(v) for k, v in out["properties"].items()}
    if out.get("type") == "array" and isinstance(out.get("items"), dict):
        out["items"] = _display_schema(out["items"])
    return out


_STRING_FORMATS = {
    "date-time": "2023-01-01T00:00:00Z",
    "date": "2023-01-01",
    "email": "user@example.com",
    "uri": "https://example.com",
}


def _generated_example(schema: JSON) -> JSON:
    """fastapi-mcp's ``generate_example_from_schema``: by ``type`` only (``None`` without
    one, and for the properties without one, which are left out)."""
    if not schema or not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties")
        examples = {
            k: _generated_example(v) for k, v in (props if isinstance(props, dict) else {}).items()
        }
        return {k: v for k, v in examples.items() if v is not None}
    if kind == "array":
        item = _generated_example(schema["items"]) if "items" in schema else None
        return [item] if item is not None else []
    if kind == "string":
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in _STRING_FORMATS:
            return _STRING_FORMATS[fmt]
        return schema.get("title", "string")
    return (
        {"integer": 1, "number": 1.0, "boolean": True}.get(kind) if isinstance(kind, str) else None
    )


def validate_arguments(
    tool: Tool, arguments: JSON, *, strict: bool = False
) -> tuple[dict[str, JSON], list[str]]:
    """Check ``arguments`` against the tool's flat schema.

    Returns ``(arguments to send, errors)``. Errors: not an object, missing
    required arguments, and (``strict``) unknown arguments. Non-strict mode drops
    unknown arguments, as the app would ignore them. Types are left to the app
    (FastAPI answers 422).
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return {}, [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    props = tool.input_schema.get("properties") or {}
    errors = []
    missing = [n for n in tool.input_schema.get("required") or [] if arguments.get(n) is None]
    if missing:
        errors.append("missing required argument(s): " + ", ".join(missing))
    unknown = [k for k in arguments if k not in props]
    if unknown and strict:
        errors.append(
            "unknown argument(s): "
            + ", ".join(map(str, unknown))
            + f"; valid: {', '.join(props) or 'none'}"
        )
    return {k: v for k, v in arguments.items() if k in props}, errors


def _query_value(value: JSON) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def build_request(tool: Tool, arguments: dict[str, JSON]) -> HttpRequest:
    """Map validated flat arguments to method, path (quoted params), query and JSON body."""
    path = tool.path
    for name in tool.path_params:
        value = arguments.get(name)
        path = path.replace("{" + name + "}", quote(_query_value(value), safe=""))
    query: list[tuple[str, str]] = []
    for name in tool.query_params:
        value = arguments.get(name)
        if value is None:
            continue
        if isinstance(value, list | tuple):
            query.extend((name, _query_value(v)) for v in value if v is not None)
        else:
            query.append((name, _query_value(value)))
    body: JSON = None
    has_body = False
    if tool.body_mode == "object":
        body = {k: arguments[k] for k in tool.body_params if k in arguments}
        has_body = bool(body) or tool.body_required or tool.method in ("POST", "PUT", "PATCH")
    elif tool.body_mode == "value" and "body" in arguments:
        body, has_body = arguments["body"], True
    return HttpRequest(tool.method, path, query, body, has_body)


def _format_schema(schema: dict[str, JSON], indent: int, required: list[str]) -> list[str]:
    lines = []
    pad = " " * indent
    for name, info in (schema.get("properties") or {}).items():
        if not isinstance(info, dict):
            continue
        kind = _simple_type(info)
        flag = "required" if name in required else "optional"
        lines.append(f"{pad}- {name}: {kind} ({flag})")
        if info.get("description"):
            lines.append(f"{pad}  Description: {info['description']}")
        if info.get("default") is not None:
            lines.append(f"{pad}  Default: {info['default']}")
        if info.get("enum"):
            lines.append(f"{pad}  Allowed values: {info['enum']}")
        if kind == "object" and info.get("properties"):
            lines.append(f"{pad}  Properties:")
            lines.extend(_format_schema(info, indent + 4, list(info.get("required") or [])))
        elif (
            kind == "array"
            and isinstance(info.get("items"), dict)
            and info["items"].get("properties")
        ):
            lines.append(f"{pad}  Items:")
            lines.extend(
                _format_schema(info["items"], indent + 4, list(info["items"].get("required") or []))
            )
    return lines


def format_tools(tools: list[Tool]) -> str:
    """The ``list_tools`` observation, in the layout AWM agents were trained on."""
    out = [f"Available MCP Tools ({len(tools)} tools):", "=" * 80, ""]
    for i, tool in enumerate(tools, 1):
        first, _, rest = tool.description.partition("\n")
        out.append(f"{i}. mcp_tool_{tool.name}")
        out.append(f"   Description: {first.strip() or 'No description'}")
        out.extend(f"   {line.strip()}" for line in rest.splitlines() if line.strip())
        params = _format_schema(tool.input_schema, 6, list(tool.input_schema.get("required") or []))
        if params:
            out.append("   Parameters:")
            out.extend(params)
        else:
            out.append("   Parameters: None")
        out.append("")
    return "\n".join(out).strip()
