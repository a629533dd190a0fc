"""bench/awm_conformance.py: the pure parts, and (slow) a run against the official package."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "awm_conformance", ROOT / "bench" / "awm_conformance.py"
)
conf = importlib.util.module_from_spec(_spec)
sys.modules["awm_conformance"] = conf
_spec.loader.exec_module(conf)


def test_normalise_timestamps():
    line = "INSERT INTO \"t\" VALUES(1,'2026-12-03 06:49:25','2031-02-03T04:05:06.123456','x 2020-01-02');"
    assert conf.normalise_timestamps(line) == "INSERT INTO \"t\" VALUES(1,'<TS>','<TS>','x <TS>');"
    assert conf.normalise_timestamps("no dates 12-03") == "no dates 12-03"


def test_compare_dumps_counts_clock_lines():
    ours = ["CREATE TABLE t(a);", "INSERT INTO t VALUES('2031-02-03 04:05:06');", "COMMIT;"]
    theirs = ["CREATE TABLE t(a);", "INSERT INTO t VALUES('2026-12-03 06:49:25');", "COMMIT;"]
    assert conf.compare_dumps(ours, theirs) == (None, 1)
    diff, clock = conf.compare_dumps(ours, [theirs[0], "INSERT INTO t VALUES('y');", "COMMIT;"])
    assert clock == 0 and diff.startswith("dump line 2: helpdp ")
    assert conf.compare_dumps(ours, ours[:2]) == ("dump length: helpdp 3 lines vs official 2", 0)


def test_compare_counts():
    assert conf.compare_counts({"a": 1, "b": 2}, {"b": 2, "a": 1}) is None
    assert conf.compare_counts({"a": 1}, {"a": 2}) == "rows of a: helpdp 1 vs official 2"
    assert conf.compare_counts({"a": 1}, {}) == "rows of a: helpdp 1 vs official None"


def test_compare_tools():
    ours = [
        {
            "name": "f",
            "description": "F",
            "inputSchema": {
                "type": "object",
                "properties": {"x": {}, "y": {}},
                "required": ["x", "y"],
            },
        }
    ]
    theirs = [
        {
            "name": "f",
            "description": "F\n",
            "inputSchema": {
                "properties": {"y": {}, "x": {}},
                "type": "object",
                "required": ["y", "x"],
                "title": "fArguments",
            },
        }
    ]
    assert conf.compare_tools(ours, theirs) is None
    theirs[0]["inputSchema"]["properties"].pop("y")
    assert conf.compare_tools(ours, theirs) == (
        "f inputSchema: properties helpdp ['x', 'y'] vs official ['x']"
    )
    assert conf.compare_tools(ours, [{**theirs[0], "name": "g"}]) == (
        "names: only helpdp ['f'], only official ['g']"
    )


def test_server_rewrite_breaks_a_multiline_engine_call():
    one = "from sqlalchemy import create_engine\nengine = create_engine('sqlite:///a.db')\n"
    compile(conf.server_rewrite(one), "x", "exec")
    multi = "from sqlalchemy import create_engine\nengine = create_engine(\n    'sqlite:///a.db',\n    echo=False,\n)\n"
    with pytest.raises(SyntaxError):  # IndentationError: the demo worlds' case
        compile(conf.server_rewrite(multi), "x", "exec")


def test_markdown_table_and_summary():
    rows = [
        {
            "source": "s",
            "world": "a",
            "reset": "same",
            "tools": "differs: x | y",
            "server rewrite": "same (compiles)",
        },
        {"source": "s", "world": "b"},
    ]
    assert conf.markdown_table(rows) == (
        "| source | world | reset | tools | server rewrite | responses |\n"
        "|---|---|---|---|---|---|\n"
        "| s | a | same | differs: x \\| y | same (compiles) | n/a |\n"
        "| s | b | n/a | n/a | n/a | n/a |\n"
    )
    assert conf.summary(rows) == {
        "reset": {"same": 1, "differs": 0, "n/a": 1},
        "tools": {"same": 0, "differs": 1, "n/a": 1},
        "server rewrite": {"same": 1, "differs": 0, "n/a": 1},
        "responses": {"same": 0, "differs": 0, "n/a": 2},
    }


def test_refuses_a_directory_that_is_not_the_official_venv(tmp_path):
    (tmp_path / "v").mkdir()
    with pytest.raises(SystemExit, match="is not a venv with agent-world-model"):
        conf.ensure_venv(tmp_path / "v")


def test_refuses_an_existing_out_file(tmp_path):
    out = tmp_path / "t.md"
    out.write_text("x")
    with pytest.raises(SystemExit, match="exists: refused"):
        conf.main(["--venv", str(tmp_path / "none"), "--out", str(out)])


@pytest.fixture(scope="module")
def official_python(tmp_path_factory):
    venv = ROOT / ".venv-awm-official"
    if venv.exists() and conf._is_official_venv(venv):
        return venv / "bin" / "python"
    if not any(conf._runs(p) for p in conf.PYTHON312):
        pytest.skip("no python3.12: agent-world-model==0.1.0 needs Python >= 3.12")
    target = tmp_path_factory.mktemp("official") / "venv"
    try:
        return conf.ensure_venv(target)
    except (SystemExit, subprocess.CalledProcessError) as e:
        pytest.skip(f"the official venv could not be created (no network?): {e}")


@pytest.mark.slow
def test_demo_world_against_the_official_package(official_python, tmp_path):
    pytest.importorskip("fastapi")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap missing: helpdp's sandboxed build worker does not start")
    from collect.awm.dataset import AWMDataset

    sc = AWMDataset(ROOT / "collect" / "worlds").get("smart_home_1")
    (tmp_path / "official").mkdir()
    ours = conf.helpdp_side(sc, tmp_path)
    job = {
        "name": sc.name,
        "db_schema": sc.db_schema,
        "sample_data": sc.sample_data,
        "code": sc.env_code,
        "dir": str(tmp_path / "official"),
    }
    theirs = conf.run_official(official_python, [job], tmp_path)[0]
    v = conf.verdicts(ours, theirs)
    assert v["reset"].startswith("same")
    assert v["server rewrite"] == "same (compiles)"  # the engine call on one line
    assert "tools" in v


def test_the_shipped_worlds_survive_the_official_rewrite():
    """The official server replaces each line holding ``create_engine(`` by one call on the
    episode's database: the call must open and close on that line (it spanned several in
    the demo worlds, which then raised IndentationError there)."""
    import json

    lines = (ROOT / "collect" / "worlds" / "gen_envs.jsonl").read_text().splitlines()
    for rec in map(json.loads, lines):
        code = rec["full_code"]
        rewritten = "\n".join(
            line.split("create_engine(")[0] + "create_engine('sqlite:///x.db')"
            if "create_engine(" in line
            else line
            for line in code.splitlines()
        )
        compile(rewritten, rec["scenario"], "exec")


def test_divergence():
    assert (
        conf.divergence("abcdef", "abcXef", width=3)
        == "at char 3: helpdp 'abcdef' vs official 'abcXef'"
    )
    assert (
        conf.divergence("abc", "abc\n\nmore", width=5)
        == "at char 3: helpdp 'abc' vs official 'abc\\n\\nmor'"
    )


def test_compare_tools_response_sections():
    ours = [{"name": "f", "description": "F\n\n### Responses:\n**200**: ok", "inputSchema": {}}]
    theirs = [{"name": "f", "description": "F\n\n### Responses:\n\n**200**: ok", "inputSchema": {}}]
    assert conf.compare_tools(ours, theirs).startswith(
        "descriptions of 1/1 tools differ only in the '### Responses' section, first f at char 18"
    )


def test_the_official_side_runs_confined(tmp_path):
    """``confined``: no network, a read-only file system but the work directory, its own
    PIDs (the official side imports the worlds' apps in its process)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap missing")
    probe = (
        "import os, socket\n"
        "open('inside.txt', 'w').write('ok')\n"
        "try:\n    open(os.path.expanduser('~/outside.txt'), 'w')\n    print('wrote outside')\n"
        "except OSError:\n    print('read-only')\n"
        "s = socket.socket()\n"
        "try:\n    s.connect(('1.1.1.1', 80))\n    print('network')\n"
        "except OSError:\n    print('no network')\n"
        "print('pid', os.getpid())\n"
    )
    r = subprocess.run(
        conf.confined([sys.executable, "-c", probe], tmp_path), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["read-only", "no network"], r.stdout
    assert int(r.stdout.split("pid ")[1]) < 10  # its own PID namespace
    assert (tmp_path / "inside.txt").read_text() == "ok"


def test_compare_response_normalisations():
    # the same value in fastapi-mcp's layout (indent 2) and the app's own
    assert (
        conf.compare_response('{"id":1,"at":"2026-01-02"}', '{\n  "id": 1,\n  "at": "2025-05-05"}')
        is None
    )
    assert conf.compare_response('{"id":1}', '{"id": 2}').startswith("values differ")
    # an HTTP error under each runtime's wording: the same status and body
    ours = 'Error: HTTP 404 from get_item: {"detail":"not found"}'
    theirs = 'Error: Error calling get_item. Status code: 404. Response: {"detail":"not found"}'
    assert conf.compare_response(ours, theirs) is None
    other = 'Error: Error calling get_item. Status code: 400. Response: {"detail":"not found"}'
    assert conf.compare_response(ours, other).startswith("errors differ: helpdp ('404'")
    ours422 = 'Error: invalid arguments for f (HTTP 422): {"detail": []}'
    assert (
        conf.compare_response(
            ours422, theirs.replace("404", "422").replace('{"detail":"not found"}', '{"detail":[]}')
        )
        is None
    )
    calls = [[{"tool_name": "f"}, {"tool_name": "g"}]]
    assert conf.compare_responses([["1", "2"]], [["1", "2"]], [0], calls).endswith(
        "2 byte for byte)"
    )
    assert "1 in another layout" in conf.compare_responses(
        [["1", "[2]"]], [["1", "[\n  2\n]"]], [0], calls
    )
    at = conf.compare_responses([['"2026-01-01"', "1"]], [['"2025-01-01"', "1"]], [0], calls)
    assert "1 with the time of the call" in at and "1 byte for byte" in at
    assert conf.compare_responses([["1", "2"]], [["1", "3"]], [4], calls).startswith(
        "differs: task 4 call 1 (g): values differ"
    )
    assert "official side failed" in conf.compare_responses(
        [["1"]], [{"error": "boom"}], [0], calls
    )


def test_protocol_rows_compare_the_two_readings():
    n = len(conf.PROTOCOL_CASES)
    same = [conf.helpdp_protocol(text) for _, text in conf.PROTOCOL_CASES]
    rows = conf.protocol_rows(same)
    assert len(rows) == n and all(r["verdict"] == "same" for r in rows)
    theirs = [{"kind": "final"}] * n
    rows = conf.protocol_rows(theirs)
    by = {r["case"]: r["verdict"] for r in rows}
    assert by["no call: the final answer"] == "same" and by["one call"] == "differs"
    assert conf.protocol_table(rows).count("\n") == n + 2
    # helpdp's strict reading: an untagged call is a format error, the first call runs
    assert conf.helpdp_protocol(dict(conf.PROTOCOL_CASES)["an untagged call"]) == {
        "kind": "format_error",
        "failure": "untagged_call",
    }
    two = conf.helpdp_protocol(dict(conf.PROTOCOL_CASES)["two calls: the first runs"])
    assert two["tool_name"] == "get_item"


def test_the_fastapi_mcp_layout_writes_answers_as_the_official_server():
    from collect.awm.protocol import Failure
    from collect.awm.tool_calls import _fastapi_mcp_result

    ok = _fastapi_mcp_result("get_item", 200, '{"id":1,"name":"Müller"}', None)
    assert ok.text == '{\n  "id": 1,\n  "name": "Müller"\n}' and ok.failure is None
    assert _fastapi_mcp_result("f", 200, "plain text", None).text == "plain text"
    err = _fastapi_mcp_result("get_item", 404, '{"detail":"Not found"}', None)
    assert err.text == (
        'Error: Error calling get_item. Status code: 404. Response: {"detail":"Not found"}'
    )
    assert err.failure is Failure.TOOL_ERROR
    assert _fastapi_mcp_result("f", 422, "{}", None).failure is Failure.INVALID_ARGUMENTS
    assert _fastapi_mcp_result("f", 500, "x", None).failure is Failure.SERVER_ERROR
    # the conformance check reads it as the official wording
    assert conf.compare_response(err.text, err.text) is None


def test_an_env_in_the_fastapi_mcp_layout_and_its_plan(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap missing: the sandboxed app worker does not start")
    from collect.awm.env import EnvConfig, EnvPool
    from collect.awm.protocol import format_call_tool
    from collect.collector import collect_config
    from collect.plan import fingerprint_config

    pool = EnvPool(ROOT / "collect" / "worlds", EnvConfig(response_layout="fastapi_mcp"))
    try:
        sc = pool.scenario("smart_home_1")
        idx, sol = min((i, s) for i, s in sc.solutions.items() if s.calls)
        env = pool.acquire("smart_home_1")
        try:
            env.reset(idx)
            c = sol.calls[0]
            obs = env.step(format_call_tool(c["tool_name"], c.get("arguments") or {})).observation
            assert obs == json.dumps(json.loads(obs), indent=2, ensure_ascii=False)
            assert "\n  " in obs  # re-indented, where the app wrote one line
        finally:
            pool.release(env)
    finally:
        pool.close()
    with pytest.raises(ValueError, match="env.response_layout must be one of"):
        EnvPool(ROOT / "collect" / "worlds", EnvConfig(response_layout="pretty")).acquire(
            "smart_home_1"
        )
    base = [f"out={tmp_path / 'o'}"]
    assert "response_layout" not in fingerprint_config(collect_config(base))["env"]
    laid = fingerprint_config(collect_config([*base, "env.response_layout=fastapi_mcp"]))
    assert laid["env"]["response_layout"] == "fastapi_mcp"
