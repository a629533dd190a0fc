"""The official side of bench/awm_conformance.py: run by the python of the official venv
(``agent-world-model==0.1.0``), confined by bubblewrap, never imported by helpdp.

    python awm_official_side.py JOB.json      # prints the results as JSON

A job is ``{"worlds": [...], "protocol": [TEXT, ...]}``. For each world: the initial
database built by ``awm.core.db.create_sqlite_database`` + ``awm.core.sample.
execute_sample_data`` (``iterdump()`` and row counts), whether ``awm.core.server``'s
rewrite of the ``create_engine(`` lines compiles, the tools ``fastapi_mcp.FastApiMCP``
lists, and for each ``replays`` entry (a task's reference calls) the text each call
returns as the official agent sees it, on a database built afresh for that task: a
success is fastapi-mcp's ``json.dumps(body, indent=2, ensure_ascii=False)`` (or the raw
body), an HTTP error or any other exception is the MCP error result, which
``awm.core.agent.MCPToolExecutor.call_tool`` prefixes with ``Error: ``. For each protocol
text: what ``awm.core.agent.run_agent`` does with that assistant turn (no tool call: the
final answer; else the first call only: ``list_tools``, ``call_tool`` with
``parse_call_tool_arguments``, or an unknown function).
"""

import asyncio
import contextlib
import io
import json
import os
import sqlite3
import sys
import types

JOB = sys.argv[1]
sys.argv = ["official"]
from loguru import logger  # noqa: E402

logger.remove()
import awm.core.server as server  # noqa: E402
from awm.core.db import create_sqlite_database  # noqa: E402
from awm.core.sample import execute_sample_data  # noqa: E402


def dump(path):
    conn = sqlite3.connect(path)
    lines = list(conn.iterdump())
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    counts = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}
    conn.close()
    return lines, counts


def rewritten(code, db_path):
    # awm.core.server.run_server's loop, without writing the file or starting the server
    new = ["import warnings", 'warnings.filterwarnings("ignore", category=DeprecationWarning)']
    for line in code.split("\n"):
        if "create_engine(" in line:
            left = line.split("create_engine(")[0]
            line = (
                f"{left}create_engine('sqlite:///{db_path}', "
                "connect_args={'check_same_thread': False})"
            )
        if "uvicorn.run(app" in line:
            new.extend(
                server.format_raw_code_to_lines("import os\nhost = '127.0.0.1'\nport = 8001", 4)
            )
            line = "    uvicorn.run(app, host=host, port=int(port))"
        new.append(line)
    return "\n".join(new)


def build(w, where):
    os.makedirs(where, exist_ok=True)
    with contextlib.redirect_stdout(io.StringIO()):
        db_path, _ok, _failed, _errs = create_sqlite_database(w["name"], w["db_schema"], where)
        if w.get("sample_data") is not None:
            execute_sample_data(db_path, w["sample_data"], w["name"])
    return db_path


def load_app(code, db_path, where):
    """The world's FastAPI app from the rewritten code (the original where it does not
    compile, with DATABASE_PATH set); (app, which code)."""
    src, used = rewritten(code, db_path), "rewritten"
    try:
        compile(src, "temp_server.py", "exec")
    except SyntaxError:
        src, used = code, "original"
    os.environ["DATABASE_PATH"] = "sqlite:///" + db_path
    mod = types.ModuleType("awm_world")
    cwd = os.getcwd()
    os.chdir(where)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(src, "temp_server.py", "exec"), mod.__dict__)
    finally:
        os.chdir(cwd)
    return mod.app, used


async def replay(mcp, calls):
    out = []
    for c in calls:
        try:
            content = await mcp._execute_api_tool(
                mcp._http_client, c["tool_name"], c.get("arguments") or {}, mcp.operation_map
            )
            out.append("\n".join(getattr(x, "text", str(x)) for x in content))
        except Exception as e:  # the MCP server's error result, as the agent prints it
            out.append(f"Error: {e}")
    return out


def world(w):
    from fastapi_mcp import FastApiMCP

    r = {"name": w["name"]}
    db_path = None
    if w.get("db_schema") is not None:
        try:
            db_path = build(w, w["dir"])
            r["dump"], r["counts"] = dump(db_path)
        except Exception as e:
            r["db_error"] = f"{type(e).__name__}: {e}"
    code = w.get("code")
    if code is None:
        return r
    empty = os.path.join(w["dir"], "empty.db")
    src = rewritten(code, db_path or empty)
    try:
        compile(src, "temp_server.py", "exec")
        r["rewrite"] = None
    except SyntaxError as e:
        r["rewrite"] = f"{type(e).__name__}: {e.msg} (line {e.lineno})"
    try:
        app, r["tools_from"] = load_app(code, db_path or empty, w["dir"])
        mcp = FastApiMCP(app)
        r["tools"] = [
            {"name": t.name, "description": t.description, "inputSchema": t.inputSchema}
            for t in mcp.tools
        ]
    except Exception as e:
        r["tools_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        return r
    responses = []
    for task in w.get("replays") or []:
        where = os.path.join(w["dir"], f"task-{task['idx']}")
        try:
            app, _ = load_app(code, build(w, where), where)
            responses.append(asyncio.run(replay(FastApiMCP(app), task["calls"])))
        except Exception as e:
            responses.append({"error": f"{type(e).__name__}: {str(e)[:200]}"})
    if w.get("replays"):
        r["responses"] = responses
    return r


def protocol(text):
    from awm.core.agent import parse_call_tool_arguments, parse_tool_calls

    calls = parse_tool_calls(text)
    if not calls:
        return {"kind": "final"}
    name, arguments = calls[0]["name"], calls[0]["arguments"]
    if name == "list_tools":
        return {"kind": "list_tools"}
    if name == "call_tool":
        tool, args = parse_call_tool_arguments(arguments)
        return {"kind": "call_tool", "tool_name": tool, "arguments": args}
    return {"kind": "unknown_function", "name": name}


job = json.load(open(JOB))
out = {"worlds": [world(w) for w in job.get("worlds", [])]}
out["protocol"] = [protocol(t) for t in job.get("protocol", [])]
json.dump(out, sys.stdout)
