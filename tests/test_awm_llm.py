"""The ``openai`` actor and the ``expert_llm`` intervention against real OpenAI-compatible
HTTP servers started here on 127.0.0.1 (scripted responders, random free ports)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

import helpdp
from collect.awm.dataset import AWMDataset
from collect.awm.llm import ChatClient, EndpointConfig, EndpointError
from collect.awm.protocol import format_call_tool, format_tool_call
from collect.collector import collect, collect_config
from collect.interventions import CRITERIA_SYSTEM
from collect.worlds import WORLDS_DIR

SCENARIO = "workflow_automation_1"


class Server:
    """A uvicorn server in a thread; ``reply(body, headers) -> dict | int`` scripts it."""

    def __init__(self, reply):
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            out = reply(body)
            if isinstance(out, int):  # retried at once (Retry-After: 1 ms)
                return JSONResponse(
                    {"error": "scripted failure"}, status_code=out, headers={"retry-after-ms": "1"}
                )
            return {
                "choices": [{"message": {"role": "assistant", "content": out}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10},
            }

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _call(c):
    return format_call_tool(c["tool_name"], c["arguments"])


@pytest.fixture(scope="module")
def scripted_actor():
    sc = AWMDataset(WORLDS_DIR).get(SCENARIO)
    by_task = {sc.tasks[i]: sc.solutions[i] for i in sc.solutions}

    def reply(body):
        msgs = body["messages"]
        task = msgs[1]["content"].split("\n\nExpert help:")[0]
        if "Make an EU copy" in task:  # one task whose endpoint always fails
            return 503
        sol = by_task[task]
        n = sum(m["role"] == "assistant" for m in msgs)
        if n == 0:
            return format_tool_call("list_tools")
        if n - 1 < len(sol.calls):
            return "Calling the next tool.\n" + _call(sol.calls[n - 1])
        return sol.final_answer or "Done."

    server = Server(reply)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def scripted_expert():
    def reply(body):
        if body["messages"][0]["content"] == CRITERIA_SYSTEM:
            return "- the variable must exist\n- nothing else changes"
        return "1. Call the tool that the task needs.\n2. Answer."

    server = Server(reply)
    yield server
    server.stop()


def _cfg(tmp_path, actor_url, *extra):
    return collect_config(
        [
            f"out={tmp_path / 'ds'}",
            "collect/actor=openai",
            f"actor.base_url={actor_url}",
            "actor.model=scripted-actor",
            "actor.api_key_env=HELPDP_TEST_ACTOR_KEY",
            "actor.retries=1",
            "executor.workers=1",
            "executor.batch_size=3",
            f"schedule.scenarios=[{SCENARIO}]",
            "schedule.probabilities=[0.0,1.0]",
            "schedule.seeds=[0]",
            "progress=false",
            f"env.work_root={tmp_path / 'work'}",
            *extra,
        ]
    )


def test_openai_actor_with_the_oracle(tmp_path, scripted_actor, monkeypatch):
    monkeypatch.setenv("HELPDP_TEST_ACTOR_KEY", "sk-test-actor")
    start = len(scripted_actor.requests)
    result = collect(_cfg(tmp_path, scripted_actor.url, "schedule.tasks=[0,1,2]"))
    assert result.episodes == 6
    ds = helpdp.load_dataset(tmp_path / "ds")
    ep = ds.episodes
    assert ep["success"].all(), ep[["task_id", "outcome", "error"]]
    assert ds.manifest["source"]["actor"] == "scripted-actor"
    reqs = scripted_actor.requests[start:]
    heads = scripted_actor.headers[start:]
    assert len(reqs) == ep["steps"].sum()
    assert all(h.get("authorization") == "Bearer sk-test-actor" for h in heads)
    assert {r["model"] for r in reqs} == {"scripted-actor"}
    assert all(isinstance(r["seed"], int) and r["temperature"] == 0.7 for r in reqs)
    assert all(
        r["messages"][0]["role"] == "system" and "<tool_call>" in r["messages"][0]["content"]
        for r in reqs
    )
    # the oracle's message is in the context of helped turns; tool results come back wrapped
    helped = [r for r in reqs if "Expert help:" in r["messages"][-1]["content"]]
    assert len(helped) == int((ds.steps["action"] == 1).sum())
    assert any("<tool_response>" in r["messages"][-1]["content"] for r in reqs)
    assert (ep["tokens"] == 10 * ep["steps"]).all()


def test_expert_llm_over_its_own_endpoint(tmp_path, scripted_actor, scripted_expert):
    start = len(scripted_expert.requests)
    cfg = _cfg(
        tmp_path,
        scripted_actor.url,
        "schedule.tasks=[0,3]",
        "collect/interventions=expert_llm",
        f"interventions.expert.base_url={scripted_expert.url}",
        "interventions.expert.model=scripted-expert",
        "interventions.expert.max_calls=2",
    )
    collect(cfg)
    ds = helpdp.load_dataset(tmp_path / "ds")
    assert ds.manifest["actions"] == ["nohelp", "expert"]
    ep = ds.episodes
    assert (ep.loc[ep.trigger_p == 1.0, "calls_expert"] == 2).all()
    assert (ep.loc[ep.trigger_p == 0.0, "calls_expert"] == 0).all()
    reqs = scripted_expert.requests[start:]
    criteria = [r for r in reqs if r["messages"][0]["content"] == CRITERIA_SYSTEM]
    plans = [r for r in reqs if r["messages"][0]["content"] != CRITERIA_SYSTEM]
    assert len(criteria) == 2  # once per task, cached
    assert "def verify_task_completion" in criteria[0]["messages"][1]["content"]
    assert len(plans) == 4 and {r["model"] for r in plans} == {"scripted-expert"}
    user = plans[-1]["messages"][1]["content"]
    for part in (
        "## Task",
        "## Tools",
        "## Success criteria",
        "- the variable must exist",
        "## The agent's trajectory so far",
        "## Recent errors",
    ):
        assert part in user
    assert "list_workflows" in user  # tool schemas
    assert (ep["expert_tokens"] > 0).sum() == 2
    # the criteria (2 requests of 100 + 10 tokens) are the collection's, not an episode's
    assert ds.manifest["source"]["summary"]["expert_criteria_tokens"] == 220
    assert ep["expert_tokens"].sum() == 110 * len(plans)
    # after the two calls the budget is spent: later turns take nohelp
    st = ds.steps.merge(ep[["episode_id", "trigger_p"]], on="episode_id")
    assert (st[st.trigger_p == 1.0].groupby("episode_id")["action"].sum() == 2).all()


def test_endpoint_failures_are_recorded_not_dropped(tmp_path, scripted_actor):
    cfg = _cfg(tmp_path, scripted_actor.url, "schedule.tasks=[0,5]", "invalid_episodes=skip")
    result = collect(cfg)
    assert result.summary["server_errors"] == 2 and result.episodes == 4
    ds = helpdp.load_dataset(tmp_path / "ds")
    ep = ds.episodes.set_index("task_id")
    bad = ep.loc[f"{SCENARIO}/5"]
    assert (bad["outcome"] == "server_error").all() and not bad["counted"].any()
    assert bad["error"].str.contains("503").all()
    good = ep.loc[f"{SCENARIO}/0"]
    assert good["counted"].all() and good["success"].all()
    assert set(ds.states["task_id"]) == {f"{SCENARIO}/0"}
    assert set(ds.steps["episode_id"]) == set(good["episode_id"])
    # counted (the default): a failure step into a server-error terminal state
    collect(_cfg(tmp_path, scripted_actor.url, "schedule.tasks=[5]", "overwrite=true"))
    ds = helpdp.load_dataset(tmp_path / "ds")
    assert (ds.episodes["steps"] == 1).all() and (ds.steps["kind"] == "error").all()
    assert ds.states.loc[ds.states.terminal, "text"].str.contains("server_error").all()


def test_two_interventions_in_one_run(tmp_path, scripted_actor, scripted_expert):
    cfg = _cfg(
        tmp_path,
        scripted_actor.url,
        "schedule.tasks=[2,3]",
        "schedule.probabilities=[0.0,0.5,[1.0,0.0],[0.0,1.0]]",
        "collect/interventions=oracle_expert",
        f"interventions.expert.base_url={scripted_expert.url}",
        "interventions.expert.model=scripted-expert",
    )
    collect(cfg)
    ds = helpdp.load_dataset(tmp_path / "ds")
    assert ds.manifest["actions"] == ["nohelp", "oracle", "expert"]
    ep = ds.episodes
    pairs = set(zip(ep["p_oracle"], ep["p_expert"]))
    assert pairs == {(0.0, 0.0), (0.5, 0.5), (1.0, 0.0), (0.0, 1.0)}
    st = ds.steps.merge(ep[["episode_id", "p_oracle", "p_expert"]], on="episode_id")
    assert set(st.loc[(st.p_oracle == 1.0), "action"]) == {1}
    assert set(st.loc[(st.p_expert == 1.0), "action"]) == {2}
    assert set(st.loc[(st.p_oracle == 0.5), "action"]) == {0, 1, 2}
    assert (ep["expert_calls"] == ep["calls_oracle"] + ep["calls_expert"]).all()
    assert ds.transitions["action"].max() == 2


def test_the_client_retries_429_and_5xx_not_400():
    """The SDK's retries: 408/409/429/5xx are retried (``retries`` more attempts, the
    server's Retry-After honoured), any other 4xx fails at once."""
    script: list[int] = []

    def reply(body):
        return script.pop(0) if script else "ok"

    server = Server(reply)
    try:
        client = ChatClient(
            EndpointConfig(base_url=server.url, model="m", api_key_env="HELPDP_NO_KEY", retries=2)
        )
        msgs = [{"role": "user", "content": "hi"}]
        script[:] = [429, 503]
        assert client.complete(msgs, temperature=0.0, max_tokens=4).text == "ok"
        assert len(server.requests) == 3
        script[:] = [500, 502, 504]
        with pytest.raises(EndpointError, match="HTTP 504"):
            client.complete(msgs, temperature=0.0, max_tokens=4)
        assert len(server.requests) == 6  # 1 + 2 retries
        script[:] = [400]
        with pytest.raises(EndpointError, match="HTTP 400"):
            client.complete(msgs, temperature=0.0, max_tokens=4)
        assert len(server.requests) == 7  # no retry
        assert "authorization" not in server.headers[-1]  # no key: no header
        client.close()
    finally:
        server.stop()


def test_criteria_made_once_per_task_and_never_an_episodes_tokens():
    """Threads of a batch asking for one task's help at once: one criteria request,
    and every help's tokens are its own request's, whichever thread asked first (a
    rerun of a batch after a resume must log the same ``expert_tokens``)."""
    from types import SimpleNamespace

    import httpx2
    import numpy as np

    from collect.interventions import ExpertLLM, InterventionConfig
    from collect.schedule import EpisodeSpec
    from collect.types import EpisodeView

    sent, gate = [], threading.Event()

    def handler(request):
        messages = __import__("json").loads(request.content)["messages"]
        sent.append(messages[0]["content"])
        if messages[0]["content"] == CRITERIA_SYSTEM:
            gate.wait(5)  # hold the first request until every thread has asked
            usage = {"prompt_tokens": 1000, "completion_tokens": 50}
        else:
            usage = {"prompt_tokens": 100, "completion_tokens": 10}
        return httpx2.Response(
            200, json={"choices": [{"message": {"content": "- x"}}], "usage": usage}
        )

    code = "def verify(before, after):\n    return True\n"
    scenario = SimpleNamespace(
        name="w", verifiers={0: SimpleNamespace(code=code)}, sql_verifiers={}
    )
    env = SimpleNamespace(tools=[], scenario=scenario, trajectory_text=lambda: "")
    cfg = InterventionConfig(
        kind="expert_llm", base_url="http://x.test/v1", model="m", criteria="llm"
    )
    iv = ExpertLLM("expert", cfg, transport=httpx2.MockTransport(handler))
    views = [
        EpisodeView(EpisodeSpec(i, "w", 0, "w/0", "train", 0, (1.0,), i), "task", [], None, [])
        for i in range(4)
    ]
    out: list = [None] * 4

    def ask(i):
        out[i] = iv.help(views[i], env, np.random.default_rng(i))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(10)
    iv.close()
    assert sent.count(CRITERIA_SYSTEM) == 1 and len(sent) == 5
    assert [h.tokens for h in out] == [110] * 4
    assert iv.criteria_tokens == 1050


@pytest.mark.parametrize(
    "status, body, full",
    [
        # llama.cpp's server (llama-cpp-python) and OpenAI/vLLM word it so
        (
            400,
            '{"error":{"message":"This model\'s maximum context length is 32768 tokens. However,'
            ' you requested 34044 tokens","type":"invalid_request_error","param":"messages",'
            '"code":"context_length_exceeded"}}',
            True,
        ),
        (400, '{"object":"error","message":"This model\'s maximum context length is 4096"}', True),
        (400, '{"error":{"message":"bad temperature","code":"invalid_value"}}', False),
        (422, '{"error":{"code":"context_length_exceeded"}}', False),
    ],
)
def test_a_prompt_past_the_window_is_told_apart_from_other_refusals(status, body, full):
    """An endpoint that refuses a prompt for its length: ``EndpointError.context_full``,
    and the openai actor's reply says so (the episode is the agent's to end, verified),
    where any other refusal stays an error of the runtime."""
    import httpx2

    from collect.actors import OpenAIActor, OpenAIActorConfig

    def handler(request):
        return httpx2.Response(status, text=body, headers={"content-type": "application/json"})

    cfg = EndpointConfig(base_url="http://test/v1", model="m", api_key_env="HELPDP_NO_KEY")
    client = ChatClient(cfg, transport=httpx2.MockTransport(handler))
    with pytest.raises(EndpointError) as e:
        client.complete([{"role": "user", "content": "hi"}], temperature=0.0, max_tokens=4)
    assert e.value.context_full is full and str(e.value).startswith(f"HTTP {status}: ")
    client.close()
    actor = OpenAIActor(
        OpenAIActorConfig(base_url="http://test/v1", model="m", api_key_env="HELPDP_NO_KEY"),
        transport=httpx2.MockTransport(handler),
    )
    from collect.types import TurnRequest

    (reply,) = actor.generate([TurnRequest([{"role": "user", "content": "hi"}], 0, None)])
    assert reply.context_full is full and reply.error.startswith("EndpointError: HTTP")
    actor.close()
