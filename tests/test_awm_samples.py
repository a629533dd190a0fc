"""The real AWM sample records (tests/fixtures/awm) through the sandboxed runtime and collect.awm.check."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collect.awm.check import CheckConfig, check_dataset, run_check
from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.protocol import Failure, format_call_tool
from collect.awm.sandbox import SandboxLimits

FIXTURES = Path(__file__).parent / "fixtures" / "awm"
ROOT = Path(__file__).resolve().parent.parent


def _call(tool, arguments):
    return format_call_tool(tool, arguments)


@pytest.fixture(scope="module")
def content_env(tmp_path_factory):
    scenario = AWMDataset(FIXTURES).get("content_platform_1")
    env = AWMEnv(
        scenario,
        EnvConfig(sandbox=SandboxLimits(call_timeout_s=20)),
        work_root=tmp_path_factory.mktemp("cp"),
    )
    yield env
    env.close()


def test_sample_app_lists_tools_and_accepts_a_valid_call(content_env):
    first = content_env.reset(0)
    assert first.task.startswith("Search for the channel 'Kurzgesagt")
    assert len(content_env.tools) == 34
    listing = content_env.step('<tool_call>{"name": "list_tools", "arguments": null}</tool_call>')
    assert listing.observation.startswith("Available MCP Tools (34 tools):")
    assert "mcp_tool_search_channels" in listing.observation
    found = content_env.step(_call("search_channels", {"query": "Kurzgesagt"}))
    assert found.info["failure"] is None and found.info["status_code"] == 200
    channel = json.loads(found.observation)["channels"][0]
    assert channel["name"].startswith("Kurzgesagt")
    sub = content_env.step(_call("subscribe_to_channel", {"channel_id": channel["id"]}))
    assert (
        sub.info["status_code"] == 200
        and json.loads(sub.observation)["subscription"]["channel_id"] == channel["id"]
    )


def test_sample_app_rejects_invalid_calls(content_env):
    content_env.reset(0)
    missing = content_env.step(_call("search_channels", {}))
    assert missing.info["failure"] == Failure.INVALID_ARGUMENTS.value
    assert "missing required argument(s): query" in missing.observation
    wrong_type = content_env.step(_call("subscribe_to_channel", {"channel_id": "not-a-number"}))
    assert (
        wrong_type.info["failure"] == Failure.INVALID_ARGUMENTS.value
        and wrong_type.info["status_code"] == 422
    )
    not_found = content_env.step(_call("get_channel_by_id", {"channel_id": 999999}))
    # the dataset's handler crashes on a missing channel: a server error, and the episode goes on
    assert not_found.info["failure"] == Failure.SERVER_ERROR.value and not not_found.done
    assert "HTTP 500" in not_found.observation and "ValidationError" in not_found.observation
    unknown = content_env.step(_call("drop_all_tables", {}))
    assert unknown.info["failure"] == Failure.UNKNOWN_TOOL.value and not unknown.done
    state = content_env.state()
    assert state["format_errors"] == 0 and state["failures"]["invalid_arguments"] == 2


def test_reset_restores_the_seeded_database(content_env):
    content_env.reset(0)
    before = json.loads(content_env.step(_call("list_user_subscriptions", {})).observation)
    content_env.step(_call("subscribe_to_channel", {"channel_id": 1}))
    content_env.reset(0)
    after = json.loads(content_env.step(_call("list_user_subscriptions", {})).observation)
    assert after == before


def test_sample_code_verifiers_run_sandboxed_on_the_untouched_database(tmp_path):
    from collect.awm.app import build_scenario_database
    from collect.awm.sandbox import VerifierPool

    scenario = AWMDataset(FIXTURES).get("e_commerce_33")
    db, report = build_scenario_database(scenario, tmp_path / "db")
    assert report.ok and report.rows_loaded == 133
    with VerifierPool(1, work_root=tmp_path / "pool") as pool:
        for idx, record in sorted(scenario.verifiers.items()):
            outcome = pool.run(record.code, initial_db=db, final_db=db, final_answer=None)
            assert outcome.ok and outcome.label == "others", (idx, outcome)
        broken = pool.run(scenario.sql_verifiers[2].code, initial_db=db, final_db=db, mode="sql")
        assert broken.status == "syntax_error" and broken.lineno == 174
        evidence = pool.run(scenario.sql_verifiers[0].code, initial_db=db, final_db=db, mode="sql")
        assert evidence.ok and isinstance(evidence.result, dict)


def test_check_on_samples_reports_ok_partial_failed():
    out = io.StringIO()
    report = check_dataset(CheckConfig(data=str(FIXTURES), jobs=2), out)
    status = {s.name: s for s in report.scenarios}
    assert status["content_platform_1"].status == "ok"
    assert (
        status["content_platform_1"].tools == 34 and status["content_platform_1"].rows_loaded == 154
    )
    ec = status["e_commerce_33"]
    assert (
        ec.status == "failed"
        and ec.missing == ["env"]
        and ec.verifiers_ok == 3
        and ec.sql_verifiers_ok == 2
    )
    assert ec.defects == [
        "gen_verifier.jsonl:3 (task 2): verifier does not compile: line 174: closing parenthesis ']' "
        "does not match opening parenthesis '{' on line 172"
    ]
    assert status["code_hosting_2"].status == "partial" and status["code_hosting_2"].missing == [
        "sample",
        "env",
    ]
    assert status["marketplace_1"].status == "partial"
    text = out.getvalue()
    assert text.splitlines()[-1] == "checked 6 scenarios: 1 ok, 4 partial, 1 failed"
    assert "ok      content_platform_1: 34 tools, rows 154/154, 10 tasks" in text
    assert "defect: gen_verifier.jsonl:3 (task 2): verifier does not compile: line 174" in text
    assert report.exit_code() == 1
    # defects alone need not fail a scenario
    lenient = check_dataset(
        CheckConfig(data=str(FIXTURES), defects_fail=False, scenarios=["e_commerce_33"])
    )
    assert lenient.scenarios[0].status == "partial" and lenient.exit_code(False) == 0


def test_check_reports_a_rejected_insert_and_an_app_that_does_not_start(tmp_path):
    ds = AWMDataset(FIXTURES)
    sc = ds.get("content_platform_1")
    lines = {}
    for f in ("gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl", "gen_envs.jsonl"):
        for raw in (FIXTURES / f).read_text().splitlines():
            record = json.loads(raw)
            if record.get("scenario") == "content_platform_1":
                lines[f] = record
    lines["gen_sample.jsonl"]["sample_data"]["tables"][0]["insert_statements"].append(
        "INSERT INTO users (id, username, email) VALUES (1, 'dup', 'dup@example.com');"
    )
    lines["gen_envs.jsonl"]["full_code"] = sc.env_code.replace(
        "app = FastAPI(", "raise RuntimeError('boom')\napp = FastAPI("
    )
    always = "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    return {'result': 'complete'}\n"
    lines["gen_verifier.pure_code.jsonl"] = {
        "scenario": "content_platform_1",
        "task_idx": 0,
        "task": sc.tasks[0],
        "verification": {"code": always},
    }
    for f, record in lines.items():
        (tmp_path / f).write_text(json.dumps(record) + "\n")
    broken = {"scenario": "broken_2", "db_path": "b.db", "full_code": "def broken(:\n    pass\n"}
    with open(tmp_path / "gen_envs.jsonl", "a") as fh:
        fh.write(json.dumps(broken) + "\n")
    out = io.StringIO()
    code = run_check(CheckConfig(data=str(tmp_path), jobs=1), out)
    text = out.getvalue()
    assert code == 1
    assert "failed  content_platform_1: no app, rows 154/155" in text
    assert (
        "defect: gen_sample.jsonl:1 tables[0] 'users' insert_statements[5]: UNIQUE constraint failed"
        in text
    )
    assert (
        "error: gen_envs.jsonl:1: app did not start: app failed to load: RuntimeError: boom" in text
    )
    assert (
        "defect: gen_verifier.pure_code.jsonl:1 (task 0): verifier says complete on the untouched database"
        in text
    )
    assert "failed  broken_2: no app, no database, no tasks" in text
    assert "defect: gen_envs.jsonl:2: app code does not compile: line 1: invalid syntax" in text


def test_check_command_line_exit_status(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "collect.awm.check",
            f"data={FIXTURES}",
            "scenarios=[e_commerce_33,marketplace_1]",
        ],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "checked 2 scenarios: 0 ok, 1 partial, 1 failed"
    assert list(tmp_path.iterdir()) == []  # Hydra wrote no output directories
