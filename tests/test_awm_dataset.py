"""AWM format loading, database build/repair, tool mapping and the agent protocol (no workers)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from collect.awm.database import (
    build_database,
    copy_database,
    repair_statement,
    restore_database,
)
from collect.awm.dataset import AWMDataset, decode_field, normalize_scenario_name
from collect.awm.protocol import (
    FORMAT_ERRORS,
    Failure,
    format_tool_call,
    judge_messages,
    parse_judge_answer,
    parse_turn,
    system_prompt,
)
from collect.awm.rewards import RewardConfig, episode_reward
from collect.awm.tools import (
    build_request,
    format_tools,
    is_hidden_tool,
    tools_from_openapi,
    validate_arguments,
)

FIXTURES = Path(__file__).parent / "fixtures" / "awm"


# ---------------------------------------------------------------------------
# awm.py
# ---------------------------------------------------------------------------


def test_normalize_scenario_name():
    assert normalize_scenario_name("E-Commerce 33") == "e_commerce_33"
    assert normalize_scenario_name("__Smart  Home!!_1_") == "smart_home_1"


def test_decode_field_accepts_json_and_python_literals():
    assert decode_field('["a", "b"]', list) == ["a", "b"]
    assert decode_field("{'tables': []}", dict) == {"tables": []}
    with pytest.raises(ValueError):
        decode_field("not a list", list)


def test_sample_dataset_assembles_scenarios_and_detects_missing_pieces():
    ds = AWMDataset(FIXTURES)
    assert ds.names() == [
        "marketplace_1",
        "booking_marketplace_1",
        "booking_and_appointments_1",
        "e_commerce_33",
        "content_platform_1",
        "code_hosting_2",
    ]
    cp = ds.get("content_platform_1")
    assert cp.missing() == []
    assert cp.n_tasks == 10 and cp.insert_count == 154
    assert cp.env_code and "FastAPI" in cp.env_code
    assert str(cp.locations["env"]) == "gen_envs.jsonl:1"
    ec = ds.get("e_commerce_33")
    assert ec.missing() == ["env"]
    assert sorted(ec.verifiers) == [0, 1, 2] and sorted(ec.sql_verifiers) == [0, 1, 2]
    assert ec.verifiers[0].function_name == "verify_task_completion"
    assert ec.sql_verifiers[2].function_name == "verify_task"
    assert str(ec.sql_verifiers[2].location) == "gen_verifier.jsonl:3"
    assert ds.get("code_hosting_2").missing() == ["sample", "env"]
    assert ds.get("marketplace_1").missing() == ["tasks", "db", "sample", "env"]


def test_malformed_lines_and_duplicates_are_reported(tmp_path):
    (tmp_path / "gen_tasks.jsonl").write_text(
        '{"scenario": "Shop 1", "tasks": "[\\"a\\", \\"b\\"]"}\n'
        "{not json\n"
        '{"scenario": "shop_1", "tasks": ["dup"]}\n'
        '{"tasks": ["no name"]}\n'
    )
    (tmp_path / "gen_verifier.pure_code.jsonl").write_text(
        json.dumps(
            {
                "scenario": "shop_1",
                "task_idx": 5,
                "task": "x",
                "verification": {"code": "def f(): pass"},
            }
        )
        + "\n"
    )
    ds = AWMDataset(tmp_path)
    assert ds.names() == ["shop_1"]
    messages = [str(p) for p in ds.problems]
    assert any(m.startswith("gen_tasks.jsonl:2: not valid JSON") for m in messages)
    assert any(
        m.startswith("gen_tasks.jsonl:3: duplicate record (line 1 is used)") for m in messages
    )
    assert any(m.startswith("gen_tasks.jsonl:4: record has no 'scenario'") for m in messages)
    sc = ds.get("shop_1")
    assert sc.tasks == ["a", "b"]
    assert any("task_idx 5 has no task" in str(p) for p in sc.problems)


# ---------------------------------------------------------------------------
# database.py
# ---------------------------------------------------------------------------

SCHEMA = {
    "tables": [
        {
            "name": "users",
            "ddl": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);",
            "indexes": ["CREATE INDEX idx_users_name ON users(name);"],
            "examples": ["INSERT INTO users (id, name) VALUES (100, 'example');"],
        },
        {
            "name": "notes",
            "ddl": "CREATE TABLE notes (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), body TEXT);",
            "indexes": ["CREATE INDEX broken ON nowhere(x);"],
        },
        {"name": "bad", "ddl": "CREATE TABLE bad (;"},
    ]
}
SAMPLE = {
    "tables": [
        {
            "table_name": "users",
            "insert_statements": [
                "INSERT INTO users (id, name) VALUES (1, 'O\\'Brien');",
                "INSERT INTO users (id, name) VALUES (2, 'plain');",
                "INSERT INTO users (id, name) VALUES (3, 'plain');",
            ],
        },
        {
            "table_name": "notes",
            "insert_statements": [
                "INSERT INTO notes (id, user_id, body) VALUES (1, 1, 'it\\'s fine');",
                "INSERT INTO notes (id, user_id, body) VALUES (2, 99, 'no such user');",
                "ATTACH DATABASE '/tmp/evil.db' AS evil;",
            ],
        },
    ]
}


def test_build_database_repairs_escapes_and_reports_failures_with_locations(tmp_path):
    report = build_database(
        tmp_path / "db.sqlite", SCHEMA, SAMPLE, sample_source="gen_sample.jsonl:7"
    )
    assert report.tables_created == 2 and report.tables_failed == 1
    assert report.rows_total == 6 and report.rows_loaded == 3 and report.rows_repaired == 2
    rows = [str(f) for f in report.failures]
    assert any("gen_db.jsonl tables[1] 'notes' indexes[0]" in r for r in rows)
    assert any("gen_db.jsonl tables[2] 'bad' ddl" in r for r in rows)
    assert any(
        "gen_sample.jsonl:7 tables[0] 'users' insert_statements[2]" in r and "UNIQUE" in r
        for r in rows
    )
    assert any("insert_statements[1]" in r and "FOREIGN KEY" in r for r in rows)
    assert any("insert_statements[2]" in r and "refused statement kind 'ATTACH'" in r for r in rows)
    assert not Path("/tmp/evil.db").exists()
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    assert conn.execute("SELECT name FROM users ORDER BY id").fetchall() == [
        ("O'Brien",),
        ("plain",),
        ("example",),
    ]
    assert conn.execute("SELECT body FROM notes").fetchall() == [("it's fine",)]


def test_repair_statement():
    assert repair_statement("VALUES ('it\\'s')") == "VALUES ('it''s')"


def test_snapshot_restore_in_place(tmp_path):
    build_database(tmp_path / "initial.db", SCHEMA, SAMPLE)
    copy_database(tmp_path / "initial.db", tmp_path / "work.db")
    live = sqlite3.connect(tmp_path / "work.db")
    live.execute("DELETE FROM notes")
    live.execute("INSERT INTO users (id, name) VALUES (50, 'new')")
    live.commit()
    restore_database(tmp_path / "initial.db", tmp_path / "work.db")
    assert live.execute("SELECT count(*) FROM users").fetchone() == (3,)
    assert live.execute("SELECT count(*) FROM notes").fetchone() == (1,)


def test_sample_database_builds_cleanly(tmp_path):
    sc = AWMDataset(FIXTURES).get("content_platform_1")
    report = build_database(tmp_path / "cp.db", sc.db_schema, sc.sample_data)
    assert report.ok and report.tables_created == 14 and report.rows_loaded == 154


# ---------------------------------------------------------------------------
# tools.py
# ---------------------------------------------------------------------------

OPENAPI = {
    "openapi": "3.1.0",
    "paths": {
        "/api/items/{item_id}": {
            "get": {
                "operationId": "get_item",
                "summary": "Get an item",
                "description": "Fetch one item by id.",
                "parameters": [
                    {
                        "name": "item_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer"},
                    },
                    {
                        "name": "expand",
                        "in": "query",
                        "required": False,
                        "schema": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
                        "description": "Expand.",
                    },
                    {
                        "name": "tags",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                ],
            },
            "patch": {
                "operationId": "update_item",
                "parameters": [
                    {
                        "name": "item_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ItemPatch"}}
                    },
                },
            },
        },
        "/api/bulk": {
            "post": {
                "operationId": "bulk",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"type": "array", "items": {"type": "integer"}}
                        }
                    },
                },
            }
        },
        "/admin/verify": {"post": {"operationId": "verify"}},
        "/admin/scenarios": {"get": {"operationId": "list_scenarios"}},
    },
    "components": {
        "schemas": {
            "ItemPatch": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "New name"},
                    "status": {"$ref": "#/components/schemas/Status"},
                },
                "required": ["name"],
            },
            "Status": {"type": "string", "enum": ["open", "closed"]},
        }
    },
}


def test_tools_from_openapi_flattens_parameters_and_hides_harness_routes():
    tools = {t.name: t for t in tools_from_openapi(OPENAPI)}
    assert set(tools) == {"get_item", "update_item", "bulk"}
    get_item = tools["get_item"]
    assert get_item.description == "Get an item\n\nFetch one item by id."
    assert get_item.input_schema["required"] == ["item_id"]
    assert get_item.input_schema["properties"]["expand"]["type"] == "boolean"
    update = tools["update_item"]
    assert update.description == "PATCH /api/items/{item_id}"
    assert set(update.input_schema["properties"]) == {"item_id", "name", "status"}
    assert update.input_schema["properties"]["status"]["enum"] == ["open", "closed"]
    assert update.input_schema["required"] == ["item_id", "name"]
    assert tools["bulk"].body_mode == "value" and tools["bulk"].input_schema["required"] == ["body"]


def test_build_request_maps_flat_arguments():
    tools = {t.name: t for t in tools_from_openapi(OPENAPI)}
    req = build_request(tools["get_item"], {"item_id": 7, "expand": True, "tags": ["a", "b"]})
    assert (req.method, req.path, req.query, req.has_body) == (
        "GET",
        "/api/items/7",
        [("expand", "true"), ("tags", "a"), ("tags", "b")],
        False,
    )
    req = build_request(tools["update_item"], {"item_id": "a/b c", "name": "x"})
    assert req.path == "/api/items/a%2Fb%20c" and req.body == {"name": "x"} and req.has_body
    req = build_request(tools["bulk"], {"body": [1, 2]})
    assert req.body == [1, 2] and req.has_body


def test_validate_arguments():
    tool = next(t for t in tools_from_openapi(OPENAPI) if t.name == "update_item")
    args, errors = validate_arguments(tool, {"item_id": "1", "name": "n", "bogus": 1})
    assert args == {"item_id": "1", "name": "n"} and errors == []
    _, errors = validate_arguments(tool, {"item_id": "1", "bogus": 1}, strict=True)
    assert (
        "missing required argument(s): name" in errors[0]
        and "unknown argument(s): bogus" in errors[1]
    )
    _, errors = validate_arguments(tool, ["not", "a", "dict"])
    assert "must be a JSON object" in errors[0]


def test_hidden_tool_names():
    for name in [
        "verify",
        "VERIFY",
        "mcp_tool_verify",
        " done ",
        "list_scenarios",
        "get-scenarios",
        "listScenarios".lower(),
        "list_environments",
        "reset",
        "verify_task_completion",
    ]:
        assert is_hidden_tool(name), name
    assert not is_hidden_tool("get_item")


def test_format_tools_lists_parameters():
    text = format_tools(tools_from_openapi(OPENAPI))
    assert text.startswith("Available MCP Tools (3 tools):")
    assert "1. mcp_tool_get_item" in text and "- item_id: integer (required)" in text
    assert "Allowed values: ['open', 'closed']" in text


# ---------------------------------------------------------------------------
# protocol.py
# ---------------------------------------------------------------------------


def _call(name, arguments):
    return format_tool_call(name, arguments)


def test_parse_valid_actions():
    a = parse_turn("thinking...\n" + _call("list_tools", None))
    assert a.kind == "list_tools" and a.failure is None
    a = parse_turn(_call("call_tool", {"tool_name": "get_item", "arguments": '{"item_id": 3}'}))
    assert (a.kind, a.tool_name, a.arguments) == ("call_tool", "get_item", {"item_id": 3})
    a = parse_turn(
        _call("call_tool", {"tool_name": "mcp_tool_get_item", "arguments": {"item_id": 3}})
    )
    assert (a.tool_name, a.arguments) == ("get_item", {"item_id": 3})
    a = parse_turn(_call("mcp_tool_get_item", {"item_id": 3}))
    assert (a.kind, a.tool_name) == ("call_tool", "get_item")
    a = parse_turn(_call("ask_expert", {"question": "Which one?"}))
    assert a.kind == "ask_expert" and a.arguments == {"question": "Which one?"}
    a = parse_turn("The order was placed.")
    assert a.kind == "final" and a.text == "The order was placed."
    a = parse_turn(_call("list_tools", None) + _call("list_tools", None))
    assert a.kind == "list_tools" and a.extra_calls == 1
    a = parse_turn(
        '<tool_call>\n```json\n{"name": "list_tools", "arguments": {}}\n```\n</tool_call>'
    )
    assert a.kind == "list_tools"


@pytest.mark.parametrize(
    ("text", "failure"),
    [
        ('<tool_call>{"name": "list_tools"}', Failure.MALFORMED_TAG),
        ('{"name": "list_tools"}</tool_call>', Failure.MALFORMED_TAG),
        ("<tool_call>{name: list_tools}</tool_call>", Failure.INVALID_JSON),
        ('<tool_call>["list_tools"]</tool_call>', Failure.INVALID_JSON),
        ('<tool_call>{"arguments": {}}</tool_call>', Failure.INVALID_JSON),
        (_call("call_tool", {"tool_name": "x", "arguments": "{bad"}), Failure.INVALID_JSON),
        (_call("verify", {}), Failure.UNKNOWN_META_FUNCTION),
        (_call("done", {}), Failure.UNKNOWN_META_FUNCTION),
        (_call("get_item", {"item_id": 1}), Failure.UNKNOWN_META_FUNCTION),
        (_call("call_tool", {"arguments": "{}"}), Failure.INVALID_ARGUMENTS),
        (_call("call_tool", "[1, 2]"), Failure.INVALID_ARGUMENTS),
    ],
)
def test_parse_failure_classes(text, failure):
    action = parse_turn(text)
    assert action.kind == "invalid" and action.failure is failure and action.message
    assert action.is_format_error == (failure in FORMAT_ERRORS)


def test_ask_expert_is_unknown_when_disabled():
    assert (
        parse_turn(_call("ask_expert", {}), expert_enabled=False).failure
        is Failure.UNKNOWN_META_FUNCTION
    )
    assert "ask_expert" not in system_prompt(expert_enabled=False)
    assert "ask_expert" in system_prompt()


def test_rewards_follow_awm_defaults_and_are_configurable():
    assert [episode_reward(o) for o in ("complete", "incomplete", "format_error", "others")] == [
        1.0,
        0.1,
        -1.0,
        0.0,
    ]
    assert episode_reward("verifier_error") == 0.0
    assert episode_reward("complete", RewardConfig(complete=2.0)) == 2.0


def test_judge_prompt_and_answer_parsing():
    messages = judge_messages("Do X", "[1] call a {}", {"rows": [1, 2]})
    assert messages[0]["role"] == "system" and "Do X" in messages[1]["content"]
    assert parse_judge_answer('{"label": "complete", "reason": "ok"}') == ("complete", "ok")
    assert parse_judge_answer('Sure: {"label": "Incomplete", "reason": "half"}')[0] == "incomplete"
    assert parse_judge_answer("The task is incomplete.")[0] == "incomplete"
    assert parse_judge_answer("???")[0] == "others"
