"""``env.describe_responses=true``: the ``### Responses`` section of each tool description
is fastapi-mcp 0.4.0's, byte for byte (issue #49).

The expected strings are written by hand from fastapi-mcp 0.4.0's
``fastapi_mcp/openapi/convert.py`` (``convert_openapi_to_mcp_tools`` with ``FastApiMCP``'s
defaults) and ``utils.py`` (``clean_schema_for_display``, ``generate_example_from_schema``):
the heading, a blank line, ``**CODE**: description`` (`` (Success Response)`` on the first
2xx; every response when there is none), a ``Content-Type`` line per media type with a
schema, then ``**Example Response:**`` and the example as JSON indented by 2 (the media's own
example, else one generated from the schema's types; none when it is empty). The default
(off) leaves the section out, as helpdp always did.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from collect.awm.dataset import AWMDataset
from collect.awm.sandbox import AppWorker, SandboxLimits
from collect.awm.tools import tools_from_openapi
from collect.worlds import WORLDS_DIR

_ITEM = {
    "type": "object",
    "title": "Item",
    "properties": {
        "id": {"type": "integer", "title": "Id"},
        "name": {"type": "string", "title": "Name"},
        "price": {"type": "number", "title": "Price"},
        "active": {"type": "boolean", "title": "Active"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
        "created": {"type": "string", "format": "date-time", "title": "Created"},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string", "title": "Tag"}, "title": "Tags"},
    },
    "required": ["id", "name"],
}
_DETAIL = {"type": "object", "properties": {"detail": {"type": "string", "title": "Detail"}}}
_422 = {
    "description": "Validation Error",
    "content": {"application/json": {"schema": _DETAIL}},
}


def _json(schema: dict, **media) -> dict:
    return {"application/json": {"schema": schema, **media}}


DOC = {
    "openapi": "3.1.0",
    "paths": {
        "/items": {
            "get": {
                "operationId": "list_items",
                "summary": "List items",
                "responses": {
                    "200": {
                        "description": "Successful Response",
                        "content": _json(
                            {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}
                        ),
                    },
                    "422": _422,
                },
            },
            "post": {
                "operationId": "create_item",
                "summary": "Create item",
                "description": "Adds one.",
                "responses": {
                    "201": {
                        "description": "Created",
                        "content": _json(
                            {"$ref": "#/components/schemas/Item"},
                            example={"id": 7, "name": "pen"},
                        ),
                    },
                    "422": _422,
                },
            },
        },
        "/items/{item_id}": {
            "put": {
                "operationId": "put_item",
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {
                            **_json(
                                {"type": "object"},
                                examples={"a": {"summary": "s", "value": {"ok": True}}},
                            ),
                            "text/plain": {"schema": {"type": "string"}},
                        },
                    }
                },
            },
            "patch": {
                "operationId": "patch_item",
                "responses": {"200": {"description": "Successful Response", "content": _json({})}},
            },
            "delete": {
                "operationId": "delete_item",
                "responses": {
                    "404": {"description": "Not found", "content": _json(_DETAIL)},
                    "422": {"description": "Validation Error"},
                },
            },
        },
        "/count": {
            "get": {
                "operationId": "count",
                "summary": "Count",
                "responses": {
                    "200": {
                        "description": "Successful Response",
                        "content": _json({"type": "integer", "title": "Response Count"}),
                    }
                },
            }
        },
        "/none": {"get": {"operationId": "no_responses", "summary": "Nothing"}},
    },
    "components": {"schemas": {"Item": _ITEM}},
}

_HEAD = "\n\n### Responses:\n\n"
_OK = "**200**: Successful Response (Success Response)\nContent-Type: application/json"
_EXAMPLE = "\n\n**Example Response:**\n```json\n"

DESCRIBED = {
    # a list of objects: properties without a type (an anyOf) are left out, strings are
    # their title, formats have fixed examples; the 422 is not listed (a 2xx exists)
    "list_items": "List items"
    + _HEAD
    + _OK
    + _EXAMPLE
    + "[\n  {\n"
    + '    "id": 1,\n'
    + '    "name": "Name",\n'
    + '    "price": 1.0,\n'
    + '    "active": true,\n'
    + '    "created": "2023-01-01T00:00:00Z",\n'
    + '    "email": "user@example.com",\n'
    + '    "tags": [\n      "Tag"\n    ]\n'
    + "  }\n]\n```",
    # an object, with the media type's own example; the first 2xx need not be 200
    "create_item": "Create item\n\nAdds one."
    + _HEAD
    + "**201**: Created (Success Response)\nContent-Type: application/json"
    + _EXAMPLE
    + '{\n  "id": 7,\n  "name": "pen"\n}\n```',
    # the first of `examples` with a value; each media type its own block
    "put_item": "PUT /items/{item_id}"
    + _HEAD
    + "**200**: OK (Success Response)\nContent-Type: application/json"
    + _EXAMPLE
    + '{\n  "ok": true\n}\n```'
    + "\nContent-Type: text/plain"
    + _EXAMPLE
    + '"string"\n```',
    # a schema that yields no example: no example block
    "patch_item": "PATCH /items/{item_id}" + _HEAD + _OK,
    # no 2xx: every response, none marked as the success, the one without content bare
    "delete_item": "DELETE /items/{item_id}"
    + _HEAD
    + "**404**: Not found\nContent-Type: application/json"
    + _EXAMPLE
    + '{\n  "detail": "Detail"\n}\n```'
    + "\n**422**: Validation Error",
    # a scalar
    "count": "Count" + _HEAD + _OK + _EXAMPLE + "1\n```",
    # no responses: no section
    "no_responses": "Nothing",
}

# describe_responses off: the summary (or METHOD path) and the description, nothing else
# (helpdp's output before the section followed fastapi-mcp's format)
PLAIN = {
    "list_items": "List items",
    "create_item": "Create item\n\nAdds one.",
    "put_item": "PUT /items/{item_id}",
    "patch_item": "PATCH /items/{item_id}",
    "delete_item": "DELETE /items/{item_id}",
    "count": "Count",
    "no_responses": "Nothing",
}


def test_responses_section_is_fastapi_mcps():
    tools = {t.name: t.description for t in tools_from_openapi(DOC, describe_responses=True)}
    assert tools.keys() == DESCRIBED.keys()
    for name, expected in DESCRIBED.items():
        assert tools[name] == expected, name


def test_default_leaves_the_section_out():
    assert {t.name: t.description for t in tools_from_openapi(DOC)} == PLAIN
    assert {
        t.name: t.description for t in tools_from_openapi(DOC, describe_responses=False)
    } == PLAIN


def test_demo_world_descriptions(tmp_path: Path):
    """A shipped world: the default descriptions as they were before the section was
    reworked (pinned), and the section appended to them with the option on."""
    scenario = AWMDataset(WORLDS_DIR).get("workflow_automation_1")
    app = AppWorker(SandboxLimits(), workdir=tmp_path / "app", name=scenario.name)
    try:
        doc = app.load(scenario.env_code, None)
    finally:
        app.close()
    plain = tools_from_openapi(doc)
    blob = "\x00".join(t.description for t in plain).encode()
    assert hashlib.sha256(blob).hexdigest() == (
        "0715bc8d2dc343127fd62e46c53d1fe458cc8b892f2c9e3ff3ed5124158d590f"
    )
    head = (
        "List workspace users\n\nList members of the workspace, optionally filtered by a "
        "name/email search, role or active flag."
    )
    assert (plain[0].name, plain[0].description) == ("list_users", head)
    described = tools_from_openapi(doc, describe_responses=True)
    assert described[0].description == (
        head
        + _HEAD
        + _OK
        + _EXAMPLE
        + "[\n  {\n"
        + '    "id": 1,\n'
        + '    "username": "Username",\n'
        + '    "email": "Email",\n'
        + '    "full_name": "Full Name",\n'
        + '    "role": "Role",\n'
        + '    "is_active": true\n'
        + "  }\n]\n```"
    )
    for p, d in zip(plain, described, strict=True):
        assert d.description.startswith(p.description + _HEAD), p.name
