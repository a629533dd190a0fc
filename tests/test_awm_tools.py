"""OpenAPI ``$ref`` expansion has a node budget and a depth limit.

The app's OpenAPI document is produced by dataset code, so a hostile app can serve a
self-referencing or exponentially nested one. Expansion must fail that scenario with
one clear error naming the operation and schema, terminate on cyclic refs, and leave
the tools of honest worlds exactly as they were.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from awm_helpers import notes_world

from collect.awm.check import CheckConfig, check_dataset
from collect.awm.dataset import AWMDataset
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.sandbox import AppWorker, SandboxError, SandboxLimits
from collect.awm.tools import OpenAPIError, format_tools, tools_from_openapi
from collect.worlds import WORLDS_DIR

FIXTURES = Path(__file__).parent / "fixtures" / "awm"

# sha256 of (the tools' fields, format_tools) with describe_responses off / on, captured
# with the unbudgeted expansion before the budget was added (the "on" ones recaptured when
# the '### Responses' section took fastapi-mcp 0.4.0's format, #49). If a world's app
# changes, recapture them; a change of collect/awm/tools.py alone must never change them.
EXPECTED = {
    "workflow_automation_1": (
        34,
        "cc6d8ce386f69d0e8215810eb8cbebb331c986d83237e256f40bb4be5fc19a5a",
        "c53fefb011dc8fff2306bdaf708942ef86b1abd7cc405224d7ea98aa3c3d793b",
    ),
    "e_commerce_admin_1": (
        31,
        "070664b67f27a90e68fbd5d84f198980e584258c08af819c708f3843e7f71f1b",
        "93522c4cb095e2663355b05e94717f6b8aee496fa0d608bbe8d5f6ab01e83ad4",
    ),
    "smart_home_1": (
        29,
        "1bb8b84c6d7a972366b78dba9df438d6a128dcd9b276e23a50091325c8187853",
        "e2cd7cd19b861a93fc0358d6bc99a8309071d25b998ab5817cc94d99963f10c6",
    ),
    "content_platform_1": (
        34,
        "4ab5e06610dfe2ce77a1db5ecbda2cf99a0319a5289dc272b72505482ff7c20c",
        "d4d86c12d430be9a63ff322fa1ada1f508d4780ebd0f6ba0f5b02c9a36b86c5a",
    ),
}


def _digest(tools) -> str:
    blob = json.dumps([dataclasses.asdict(t) for t in tools], sort_keys=True)
    return hashlib.sha256((blob + "\n" + format_tools(tools)).encode()).hexdigest()


def _openapi_docs(tmp_path: Path) -> dict[str, dict]:
    """The apps' OpenAPI documents (the database does not shape them: none is built)."""
    scenarios = [
        AWMDataset(data).get(name)
        for data in (WORLDS_DIR, FIXTURES)
        for name in AWMDataset(data).names()
        if name in EXPECTED
    ]

    def load(scenario) -> dict:
        app = AppWorker(SandboxLimits(), workdir=tmp_path / scenario.name, name=scenario.name)
        try:
            return app.load(scenario.env_code, None)
        finally:
            app.close()

    with ThreadPoolExecutor(4) as pool:
        return dict(zip([s.name for s in scenarios], pool.map(load, scenarios), strict=True))


def test_tools_of_demo_worlds_and_awm_samples_are_unchanged(tmp_path):
    docs = _openapi_docs(tmp_path)
    assert sorted(docs) == sorted(EXPECTED)
    for name, doc in docs.items():
        count, plain, described = EXPECTED[name]
        tools = tools_from_openapi(doc)
        assert len(tools) == count, name
        assert _digest(tools) == plain, name
        assert _digest(tools_from_openapi(doc, describe_responses=True)) == described, name


def _doc(schemas: dict, ref: str) -> dict:
    body = {"content": {"application/json": {"schema": {"$ref": ref}}}}
    return {
        "paths": {"/bomb": {"post": {"operationId": "plant", "requestBody": body}}},
        "components": {"schemas": schemas},
    }


def _fan_out(levels: int) -> dict:
    """S0 holds two S1, each two S2, ...: 2**levels nodes when fully expanded."""
    schemas = {
        f"S{i}": {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/components/schemas/S{i + 1}"},
                "b": {"$ref": f"#/components/schemas/S{i + 1}"},
            },
        }
        for i in range(levels)
    }
    schemas[f"S{levels}"] = {"type": "string"}
    return schemas


def _mutual(n: int) -> dict:
    """n schemas that each refer to all n: cyclic, with n! distinct expansion paths."""
    return {
        f"M{i}": {
            "type": "object",
            "properties": {f"p{j}": {"$ref": f"#/components/schemas/M{j}"} for j in range(n)},
        }
        for i in range(n)
    }


@pytest.mark.parametrize(
    ("schemas", "ref", "why"),
    [
        (_fan_out(17), "#/components/schemas/S0", "budget of"),
        (_fan_out(100), "#/components/schemas/S0", "deeper than"),
        (_mutual(12), "#/components/schemas/M0", "budget of"),
    ],
    ids=["fan-out", "deep", "mutual-recursion"],
)
def test_ref_bombs_fail_with_one_clear_error(schemas, ref, why):
    with pytest.raises(OpenAPIError) as err:
        tools_from_openapi(_doc(schemas, ref))
    message = str(err.value)
    assert why in message and "operation 'plant' (POST /bomb)" in message
    assert "schema '" in message
    assert isinstance(err.value, SandboxError) and err.value.kind == "openapi"
    # the limits are parameters: a larger budget is a choice of the caller
    with pytest.raises(OpenAPIError, match="budget of 1000 nodes"):
        tools_from_openapi(_doc(_fan_out(12), "#/components/schemas/S0"), max_nodes=1000)


def test_cyclic_refs_terminate_with_a_placeholder():
    node = {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Node"}}}
    doc = _doc({"Node": node}, "#/components/schemas/Node")
    (tool,) = tools_from_openapi(doc)
    assert tool.input_schema["properties"]["next"] == {
        "type": "object",
        "description": "(recursive Node)",
        "title": "next",
    }
    mutual = tools_from_openapi(_doc(_mutual(3), "#/components/schemas/M0"))
    assert mutual[0].body_params == ["p0", "p1", "p2"]


def test_not_a_document_is_refused():
    with pytest.raises(OpenAPIError, match="not a JSON object"):
        tools_from_openapi(["paths"])  # type: ignore[arg-type]
    with pytest.raises(OpenAPIError, match="'paths' is not an object"):
        tools_from_openapi({"paths": ["/x"]})


# ---------------------------------------------------------------------------
# end to end: an app that serves a bomb fails its scenario; the next one runs
# ---------------------------------------------------------------------------

HONEST_APP = """
import os
from fastapi import FastAPI
from sqlalchemy import create_engine, text

engine = create_engine(os.getenv("DATABASE_PATH"))
app = FastAPI()


@app.get("/notes", operation_id="list_notes", summary="List notes")
def list_notes():
    with engine.connect() as c:
        return {"notes": [r[0] for r in c.execute(text("SELECT body FROM notes"))]}
"""

BOMB_APP = (
    HONEST_APP
    + """

def _bomb():
    schemas = {
        f"M{i}": {
            "type": "object",
            "properties": {f"p{j}": {"$ref": f"#/components/schemas/M{j}"} for j in range(14)},
        }
        for i in range(14)
    }
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/M0"}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "bomb", "version": "1"},
        "paths": {"/plant": {"post": {"operationId": "plant", "requestBody": body}}},
        "components": {"schemas": schemas},
    }


app.openapi = _bomb
"""
)

VERIFIER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    rows = sqlite3.connect(final_db_path).execute("SELECT body FROM notes").fetchall()
    return {"result": "complete" if ("done",) in rows else "others"}
"""


def _world(root: Path) -> Path:
    apps = {"bomb_1": BOMB_APP, "notes_1": HONEST_APP}
    return notes_world(root, apps, [("Read the notes.", VERIFIER)])


def test_hostile_app_fails_its_scenario_and_the_next_one_runs(tmp_path):
    data = _world(tmp_path / "data")
    out = io.StringIO()
    report = check_dataset(CheckConfig(data=str(data), jobs=1), out)
    by_name = {r.name: r for r in report.scenarios}
    bomb = by_name["bomb_1"]
    assert bomb.status == "failed" and len(bomb.errors) == 1, bomb
    assert "app did not start: OpenAPI document refused" in bomb.errors[0]
    assert "operation 'plant'" in bomb.errors[0] and "gen_envs.jsonl" in bomb.errors[0]
    assert by_name["notes_1"].status == "ok" and by_name["notes_1"].tools == 1

    with EnvPool(data, EnvConfig(work_root=str(tmp_path / "work"))) as pool:
        env = pool.acquire("bomb_1")
        with pytest.raises(OpenAPIError, match="budget of"):
            env.reset(0)
        honest = pool.acquire("notes_1")
        honest.reset(0)
        result = honest.act(honest_action())
        assert json.loads(result.observation) == {"notes": ["first"]}


def honest_action():
    from collect.awm.protocol import Action

    return Action("call_tool", tool_name="list_notes", arguments={})


def test_tool_order_methods_or_the_documents_own():
    op = lambda name: {"operationId": name, "responses": {}}  # noqa: E731
    doc = {
        "paths": {
            "/a/{id}": {"delete": op("del_a"), "get": op("get_a")},
            "/b": {"post": op("mk_b")},
        }
    }
    names = lambda **kw: [t.name for t in tools_from_openapi(doc, **kw)]  # noqa: E731
    assert names() == ["get_a", "del_a", "mk_b"]  # helpdp's: GET before DELETE
    assert names(tool_order="document") == ["del_a", "get_a", "mk_b"]  # fastapi-mcp's
    with pytest.raises(ValueError, match="tool_order: 'x': one of methods, document"):
        names(tool_order="x")
