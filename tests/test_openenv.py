"""Our confined worlds behind OpenEnv's protocol, driven by ``openenv``'s own client from
PyPI (``MCPToolClient``: WebSocket reset/step and HTTP ``/mcp`` tools), and the
collector running against that server (``runtime=openenv``) giving the tables of a local
collection. A real uvicorn server on 127.0.0.1 with a bearer token; the demo worlds."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv")

import pandas as pd  # noqa: E402
from awm_helpers import served  # noqa: E402
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction  # noqa: E402
from openenv.core.mcp_client import MCPToolClient  # noqa: E402

from collect.awm.env import EnvConfig, EnvPool  # noqa: E402
from collect.awm.openenv_server import create_openenv_app  # noqa: E402
from collect.awm.remote_env import OpenEnvPool  # noqa: E402
from collect.awm.serve import ServeConfig  # noqa: E402
from collect.collector import collect, collect_config  # noqa: E402
from collect.worlds import WORLDS_DIR  # noqa: E402

TOKEN = "openenv-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCENARIOS = ["smart_home_1", "workflow_automation_1"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import uvicorn

    root = tmp_path_factory.mktemp("openenv")
    config = EnvConfig(expert_enabled=False, work_root=str(root / "work"))
    pool = EnvPool(WORLDS_DIR, config, scenarios=SCENARIOS)
    app = create_openenv_app(pool, ServeConfig(max_sessions=6), token=TOKEN)
    with served(uvicorn.Config(app, log_level="warning", lifespan="off")) as url:
        yield url, pool
    pool.close()


def _client(url: str, **kw):
    return MCPToolClient(base_url=url, headers=AUTH, message_timeout_s=120.0, **kw).sync()


def _fields(result) -> dict:
    obs = result.observation
    return {**obs.model_dump(), **(obs.model_extra or {})}


def test_openenv_client_runs_episodes_of_the_demo_worlds(server):
    url, pool = server
    sc = pool.scenario("smart_home_1")
    with _client(url) as env:
        first = _fields(env.reset(scenario="smart_home_1", task_idx=0, verifier_mode="code"))
        assert first["reward_type"] == "reset_ok" and first["scenario"] == "smart_home_1"
        assert first["task"] == sc.task(0).text
        assert first["has_verifier"] == {"sql": False, "code": True}
        tools = env.list_tools()  # HTTP /mcp tools/list on the session's environment
        assert len(tools) == first["num_tools"] == 29
        names = {t.name for t in tools}
        assert "verify" not in names and "done" not in names
        assert {"create_room", "list_rooms"} <= names
        # a tool call over /mcp (MCPToolClient.call_tool): the AWM fields come back
        rooms = env.call_tool("list_rooms")
        assert rooms["reward_type"] == "tool_call_ok" and rooms["reward"] == 0.0
        assert "Sunroom" not in rooms["tool_result"]
        # rewards as OpenEnv's AWM env reports them: an unknown tool or bad arguments
        # is a format error (-1.0) and the episode goes on
        bad = env.call_tool("no_such_tool")
        assert (bad["reward_type"], bad["reward"], bad["done"]) == ("tool_not_found", -1.0, False)
        assert bad["metadata"]["failure"] == "unknown_tool"
        missing = env.call_tool("create_room")  # its required arguments left out
        assert (missing["reward_type"], missing["reward"]) == ("invalid_args", -1.0)
        assert missing["error"].startswith("Error: invalid arguments for create_room")
        # before the task is done, verification says others (0.0): the episode goes on
        early = env.step(CallToolAction(tool_name="verify", arguments={}))
        assert (_fields(early)["reward_type"], early.reward, early.done) == ("others", 0.0, False)
        for call in sc.solutions[0].calls:
            r = env.step(CallToolAction(tool_name=call["tool_name"], arguments=call["arguments"]))
            assert r.reward == 0.0 and r.observation.metadata["failure"] is None
        # the hidden `done` verifies (the world changed since `verify`): complete, 1.0
        done = env.step(CallToolAction(tool_name="done", arguments={}))
        fields = _fields(done)
        assert (fields["reward_type"], done.reward, done.done) == ("complete", 1.0, True)
        # how it was verified, never what the verifier returned
        assert fields["verify_result"] == {
            "outcome": "complete",
            "mode": "code",
            "status": "ok",
            "valid": True,
        }
        assert fields["steps_taken"] == 7  # every step counts, verify and done included
        after = env.step(CallToolAction(tool_name="list_rooms", arguments={}))
        assert _fields(after)["reward_type"] == "episode_already_done" and after.done
        # a new episode starts from the seeded database: verify, then done (OpenEnv's order)
        env.reset(scenario="smart_home_1", task_idx=0)
        call = sc.solutions[0].calls[0]
        env.step(CallToolAction(tool_name=call["tool_name"], arguments=call["arguments"]))
        verified = env.step(CallToolAction(tool_name="verify", arguments={"verifier_mode": "code"}))
        assert (_fields(verified)["reward_type"], verified.reward, verified.done) == (
            "complete",
            1.0,
            False,
        )
        end = env.step(CallToolAction(tool_name="done", arguments={}))
        assert (_fields(end)["reward_type"], end.reward, end.done) == ("episode_done", 0.0, True)
        listing = _fields(env.step(CallToolAction(tool_name="__list_scenarios__", arguments={})))
        assert listing["total"] == 2 and [s["name"] for s in listing["scenarios"]] == sorted(
            SCENARIOS, key=pool.names().index
        )
        assert [s["num_tasks"] for s in listing["scenarios"]] == [10, 10]


def test_sessions_are_isolated_and_errors_are_observations(server):
    url, pool = server
    sc = pool.scenario("smart_home_1")
    with _client(url) as a, _client(url) as b:
        a.reset(scenario="smart_home_1", task_idx=0)
        b.reset(scenario="smart_home_1", task_idx=0)
        call = sc.solutions[0].calls[0]
        a.step(CallToolAction(tool_name=call["tool_name"], arguments=call["arguments"]))
        # b's database does not see a's change: b's verification is others, a's complete
        vb = b.step(CallToolAction(tool_name="verify", arguments={}))
        va = a.step(CallToolAction(tool_name="verify", arguments={}))
        assert (_fields(va)["reward_type"], _fields(vb)["reward_type"]) == ("complete", "others")
        bad = _fields(a.reset(scenario="no_such_world", task_idx=0))
        assert bad["reward_type"] == "reset_error" and "not found" in bad["error"]
        out_of_range = _fields(a.reset(scenario="smart_home_1", task_idx=99))
        assert out_of_range["reward_type"] == "reset_error"
        tools = b.step(ListToolsAction())
        assert len(tools.observation.tools) == 29


def test_bearer_token_is_required(server):
    url, _ = server
    import httpx

    assert httpx.get(f"{url}/health").status_code == 200
    refused = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1})
    assert refused.status_code == 401
    with pytest.raises(Exception):  # noqa: B017 - the client's own error for a refused session
        with MCPToolClient(base_url=url).sync() as env:
            env.reset(scenario="smart_home_1", task_idx=0)


def test_remote_runtime_episode_matches_local(server, tmp_path, monkeypatch):
    """OpenEnvPool (the collector's runtime) and the local EnvPool give the same steps."""
    url, _ = server
    monkeypatch.setenv("HELPDP_TEST_OPENENV_TOKEN", TOKEN)
    config = EnvConfig(expert_enabled=False, work_root=str(tmp_path / "local"))
    from collect.awm.protocol import format_call_tool, format_tool_call

    with (
        OpenEnvPool(url, WORLDS_DIR, config, token_env="HELPDP_TEST_OPENENV_TOKEN") as remote,
        EnvPool(WORLDS_DIR, config, scenarios=SCENARIOS) as local,
    ):
        sc = local.scenario("workflow_automation_1")
        turns = [
            format_tool_call("list_tools"),
            format_call_tool("no_such_tool", {}),
            format_tool_call("call_tool", {"tool_name": "verify", "arguments": "{}"}),
            *[format_call_tool(c["tool_name"], c["arguments"]) for c in sc.solutions[0].calls],
            "Done.",
        ]
        results = {}
        for name, pool in (("remote", remote), ("local", local)):
            env = pool.acquire("workflow_automation_1")
            first = env.reset(0, episode_id="e1")
            steps = [env.step(t) for t in turns]
            results[name] = (first, [(s.observation, s.reward, s.done) for s in steps], steps)
            pool.release(env)
        (rf, rsteps, rraw), (lf, lsteps, lraw) = results["remote"], results["local"]
        assert (rf.task, rf.system_prompt, rf.episode_id) == (lf.task, lf.system_prompt, "e1")
        assert rsteps == lsteps
        assert lsteps[-1][1:] == (1.0, True)
        keys = ("failure", "format_error", "outcome", "valid", "turns", "tool_calls")
        assert [{k: s.info.get(k) for k in keys} for s in rraw] == [
            {k: s.info.get(k) for k in keys} for s in lraw
        ]
        assert rraw[-1].info["verification"]["mode"] == lraw[-1].info["verification"]["mode"]
        assert [s.info.get("failure") for s in rraw][:3] == [None, "unknown_tool", "unknown_tool"]


def test_a_full_context_truncates_the_remote_episode_as_the_local_one(
    server, tmp_path, monkeypatch
):
    """``truncate`` (the actor's prompt no longer fits its window) verifies the world as it
    stands and ends the episode, on an OpenEnv server as in process."""
    url, _ = server
    monkeypatch.setenv("HELPDP_TEST_OPENENV_TOKEN", TOKEN)
    config = EnvConfig(expert_enabled=False, work_root=str(tmp_path / "local"))
    from collect.awm.protocol import format_call_tool

    with (
        OpenEnvPool(url, WORLDS_DIR, config, token_env="HELPDP_TEST_OPENENV_TOKEN") as remote,
        EnvPool(WORLDS_DIR, config, scenarios=SCENARIOS) as local,
    ):
        calls = local.scenario("workflow_automation_1").solutions[0].calls
        ends = {}
        for name, pool in (("remote", remote), ("local", local)):
            env = pool.acquire("workflow_automation_1")
            for done_calls in (calls, []):  # the task done, then nothing done
                env.reset(0, episode_id="e1")
                for c in done_calls:
                    env.step(format_call_tool(c["tool_name"], c["arguments"]))
                end = env.truncate()
                keys = ("outcome", "valid", "truncated", "context_full", "turns", "action")
                ends.setdefault(name, []).append((end.reward, end.done, *map(end.info.get, keys)))
                with pytest.raises(RuntimeError, match="episode is over"):
                    env.truncate()
            pool.release(env)
    assert ends["remote"] == ends["local"]
    assert ends["local"][0][:4] == (1.0, True, "complete", True)
    assert ends["local"][1][2] != "complete" and ends["local"][1][3]


TABLES = ("states", "transitions", "episodes", "steps")
SMALL = [  # a clumsy simulated actor: failed calls, tool errors, format errors
    "actor.simulated.format_error_p=0.3",
    "actor.simulated.wrong_tool_p=0.3",
    "actor.simulated.wrong_args_p=0.3",
    "schedule.scenarios=[workflow_automation_1]",
    "schedule.max_tasks=3",
    "schedule.probabilities=[0.0,0.5,1.0]",
    "schedule.seeds=[0]",
    "progress=false",
]


def test_collect_from_an_openenv_server_gives_the_local_tables(server, tmp_path, monkeypatch):
    url, _ = server
    monkeypatch.setenv("OPENENV_AWM_TOKEN", TOKEN)
    local = collect(collect_config([f"out={tmp_path / 'local'}", *SMALL]))
    remote = collect(
        collect_config([f"out={tmp_path / 'remote'}", "runtime=openenv", f"env_url={url}", *SMALL])
    )
    assert remote.episodes == local.episodes == 9
    assert remote.summary == local.summary
    for name in TABLES:
        a = pd.read_parquet(tmp_path / "local" / f"{name}.parquet")
        b = pd.read_parquet(tmp_path / "remote" / f"{name}.parquet")
        pd.testing.assert_frame_equal(a, b, obj=name)
    episodes = pd.read_parquet(tmp_path / "remote" / "episodes.parquet")
    assert episodes["outcome"].value_counts().to_dict() == local.summary["outcomes"]
    assert local.summary["outcomes"] == {"complete": 4, "format_error": 3, "others": 2}
    steps = pd.read_parquet(tmp_path / "remote" / "steps.parquet")
    assert steps["failure"].value_counts().to_dict() == {
        "invalid_arguments": 20,
        "tool_error": 2,
        "malformed_tag": 2,
        "unknown_meta_function": 1,
    }
    assert (remote.steps, remote.states) == (54, 55)
    import json

    manifest = json.loads((tmp_path / "remote" / "manifest.json").read_text())
    assert manifest["source"]["runtime"] == {
        "kind": "openenv",
        "env_url": url,
        "protocol": "OpenEnv AWM (MCP)",
    }
    assert manifest["source"]["isolation"]["mode"] == "remote"


def test_collect_refuses_what_the_remote_runtime_cannot_do(tmp_path):
    with pytest.raises(ValueError, match="env_url"):
        collect(collect_config([f"out={tmp_path / 'a'}", "runtime=openenv", *SMALL]))
    with pytest.raises(ValueError, match="database digests"):
        collect(
            collect_config(
                [
                    f"out={tmp_path / 'b'}",
                    "runtime=openenv",
                    "env_url=http://127.0.0.1:9",
                    "state_key=db",
                    *SMALL,
                ]
            )
        )
    with pytest.raises(ValueError, match="runtime must be"):
        collect(collect_config([f"out={tmp_path / 'c'}", "runtime=docker", *SMALL]))
