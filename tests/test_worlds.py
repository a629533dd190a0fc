"""Tests of the AWM-format demo worlds in collect/worlds.

Only FastAPI's TestClient and sqlite3 are used: for every scenario a fresh SQLite DB is
built from gen_db + gen_sample, the app's full_code is executed as a new module bound to
it, every reference solution is replayed through the HTTP routes and checked by its
verifier, and verifiers are checked to reject the untouched and the incomplete states.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
import sys
import types

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from collect.worlds import SCENARIOS, WORLDS_DIR, build

READ_METHODS = {"GET", "HEAD"}


def _load_jsonl(name: str) -> list[dict]:
    with open(WORLDS_DIR / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _by_scenario(name: str, key: str = "scenario") -> dict[str, dict]:
    return {r[key]: r for r in _load_jsonl(name)}


DB = _by_scenario("gen_db.jsonl")
SAMPLE = _by_scenario("gen_sample.jsonl")
ENVS = _by_scenario("gen_envs.jsonl")
SCENARIO_INFO = _by_scenario("gen_scenario.jsonl", key="name")
TASKS = _by_scenario("gen_tasks.jsonl")
VERIFIERS = {(r["scenario"], r["task_idx"]): r for r in _load_jsonl("gen_verifier.pure_code.jsonl")}
SOLUTIONS = {(r["scenario"], r["task_idx"]): r for r in _load_jsonl("gen_solutions.jsonl")}
CASES = [(s, i) for s in SCENARIOS for i in range(10)]


def build_db(path, scenario: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA foreign_keys=ON")
        for table in DB[scenario]["db_schema"]["tables"]:
            conn.execute(table["ddl"])
            for index in table["indexes"]:
                conn.execute(index)
        for table in SAMPLE[scenario]["sample_data"]["tables"]:
            for stmt in table["insert_statements"]:
                conn.execute(stmt)
        conn.commit()
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


@pytest.fixture(scope="session")
def template_dbs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("worlds")
    out = {}
    for scenario in SCENARIOS:
        path = root / f"{scenario}.db"
        build_db(path, scenario)
        out[scenario] = path
    return out


_counter = iter(range(10**9))


def load_app(scenario: str, db_file, monkeypatch):
    """Execute the scenario's full_code as a fresh module bound to db_file."""
    monkeypatch.setenv("DATABASE_PATH", f"sqlite:///{db_file}")
    name = f"_awm_world_{scenario}_{next(_counter)}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(ENVS[scenario]["full_code"], f"<{scenario}/app.py>", "exec"), module.__dict__)
    finally:
        sys.modules.pop(name, None)
    assert str(module.engine.url) == f"sqlite:///{db_file}"
    return module


def routes_by_operation(app) -> dict[str, APIRoute]:
    return {r.operation_id: r for r in app.routes if isinstance(r, APIRoute)}


def invoke(client: TestClient, route: APIRoute, arguments: dict):
    """Split flat fastapi_mcp-style arguments into path, query and JSON body and call the route."""
    args = dict(arguments)
    path_names = {p.alias for p in route.dependant.path_params}
    query_names = {p.alias for p in route.dependant.query_params}
    missing = path_names - set(args)
    assert not missing, f"{route.operation_id}: missing path params {missing}"
    path = route.path.format(**{k: args.pop(k) for k in path_names})
    query = {k: args.pop(k) for k in list(args) if k in query_names}
    if not route.dependant.body_params:
        assert not args, f"{route.operation_id}: unexpected arguments {sorted(args)}"
        body = None
    else:
        body = args
    (method,) = route.methods
    return client.request(method, path, params=query, json=body)


def replay(module, calls: list[dict]) -> None:
    ops = routes_by_operation(module.app)
    with TestClient(module.app) as client:
        for n, c in enumerate(calls):
            assert c["tool_name"] in ops, f"unknown tool {c['tool_name']}"
            resp = invoke(client, ops[c["tool_name"]], c["arguments"])
            assert 200 <= resp.status_code < 300, (
                f"call {n} {c['tool_name']}: {resp.status_code} {resp.text}"
            )


def run_verifier(scenario: str, idx: int, initial, final, final_answer=None) -> str:
    namespace: dict = {}
    exec(VERIFIERS[(scenario, idx)]["verification"]["code"], namespace)
    result = namespace["verify_task_completion"](str(initial), str(final), final_answer)
    assert isinstance(result, dict) and result.get("result") in ("complete", "others"), result
    return result["result"]


def is_write(module, call: dict) -> bool:
    (method,) = routes_by_operation(module.app)[call["tool_name"]].methods
    return method not in READ_METHODS


# ---------------------------------------------------------------- static checks


def test_files_cover_all_scenarios():
    assert set(SCENARIO_INFO) == set(SCENARIOS)
    for scenario in SCENARIOS:
        for table in (DB, SAMPLE, ENVS, TASKS):
            assert scenario in table
        assert len(TASKS[scenario]["tasks"]) == 10
        for idx in range(10):
            assert VERIFIERS[(scenario, idx)]["task"] == TASKS[scenario]["tasks"][idx]
            assert SOLUTIONS[(scenario, idx)]["calls"]
        code = ENVS[scenario]["full_code"]
        assert 'database_url = os.getenv("DATABASE_PATH", "sqlite:///' in code
        assert '{"check_same_thread": False}' in code


def test_jsonl_files_are_up_to_date(tmp_path):
    build.write_all(tmp_path)
    for name in build.FILES:
        assert (tmp_path / name).read_bytes() == (WORLDS_DIR / name).read_bytes(), (
            f"{name} is stale"
        )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_routes(scenario, template_dbs, tmp_path, monkeypatch):
    db = tmp_path / "env.db"
    shutil.copy(template_dbs[scenario], db)
    module = load_app(scenario, db, monkeypatch)
    routes = [r for r in module.app.routes if isinstance(r, APIRoute)]
    ops = [r.operation_id for r in routes]
    assert all(ops) and len(set(ops)) == len(ops)
    assert 20 <= len(ops) <= 40, len(ops)
    for r in routes:
        assert r.summary and r.description, r.operation_id
        assert len(r.methods) == 1
        # fastapi_mcp flattens path, query and body fields into one argument dict
        names = [p.alias for p in r.dependant.path_params + r.dependant.query_params]
        assert len(r.dependant.body_params) <= 1, r.operation_id
        for body in r.dependant.body_params:
            names += list(body.field_info.annotation.model_fields)
        assert len(names) == len(set(names)), f"{r.operation_id}: clashing argument names {names}"
    methods = {next(iter(r.methods)) for r in routes}
    assert {"GET", "POST"} <= methods
    with TestClient(module.app) as client:
        assert client.get("/openapi.json").status_code == 200
    module.engine.dispose()


@pytest.mark.parametrize("scenario,idx", CASES, ids=[f"{s}-{i}" for s, i in CASES])
def test_task(scenario, idx, template_dbs, tmp_path, monkeypatch):
    initial = tmp_path / "initial.db"
    final = tmp_path / "final.db"
    shutil.copy(template_dbs[scenario], initial)
    shutil.copy(template_dbs[scenario], final)
    solution = SOLUTIONS[(scenario, idx)]
    final_answer = solution.get("final_answer")

    # (b) doing nothing is not complete
    assert run_verifier(scenario, idx, initial, initial, final_answer) == "others"

    # (a) the reference solution succeeds and is accepted
    module = load_app(scenario, final, monkeypatch)
    try:
        replay(module, solution["calls"])
        module.engine.dispose()
        conn = sqlite3.connect(final)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.close()
        assert run_verifier(scenario, idx, initial, final, final_answer) == "complete"

        # an incomplete solution (last write left out) is not complete
        writes = [n for n, c in enumerate(solution["calls"]) if is_write(module, c)]
        if writes:
            calls = [c for n, c in enumerate(solution["calls"]) if n != writes[-1]]
            shutil.copy(template_dbs[scenario], final)
            replay(module, calls)
            module.engine.dispose()
            assert run_verifier(scenario, idx, initial, final, final_answer) == "others"

        # obviously wrong actions (kept in the sources, not shipped) are not complete
        source = importlib.import_module(f"collect.worlds.src.{scenario}.tasks").TASKS[idx]
        for wrong in source.get("negatives", []):
            shutil.copy(template_dbs[scenario], final)
            replay(module, wrong)
            module.engine.dispose()
            assert run_verifier(scenario, idx, initial, final, final_answer) == "others", wrong

        # a task whose answer matters is not complete without the answer
        if final_answer is not None:
            shutil.copy(template_dbs[scenario], final)
            replay(module, solution["calls"])
            module.engine.dispose()
            assert run_verifier(scenario, idx, initial, final, None) == "others"
            assert run_verifier(scenario, idx, initial, final, "I could not find it.") == "others"
    finally:
        module.engine.dispose()
