"""The GRPO rollout against a real `collect.awm.serve` server (uvicorn on 127.0.0.1, a
bearer token) equals the same rollout on local sandboxes: scripted turns, the demo
worlds, the oracle (without its verifier shortcut) gated by `always`."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from collect.awm.env import EnvConfig, EnvPool
from collect.awm.protocol import format_call_tool
from collect.awm.tools import format_tools
from collect.interventions import InterventionConfig, build_interventions
from helpdp.policies import Always
from helpdp.train.envs import RemotePool, build_pool, worlds_dir
from helpdp.train.gate import SplitSchedule

SCENARIO = "workflow_automation_1"
TOKEN = "test-token-123"
BAD_CALL = format_call_tool("no_such_tool", {})
BAD_JSON = "<tool_call>{not json}</tool_call>"


def _config(root) -> EnvConfig:
    # the episode's settings are the server's: the local pool gets the same
    return EnvConfig(
        max_turns=6, terminate_on_format_error=False, expert_enabled=False, work_root=str(root)
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import uvicorn

    from collect.awm.serve import ServeConfig, create_app

    root = tmp_path_factory.mktemp("serve")
    pool = EnvPool(worlds_dir(None), _config(root / "work"), scenarios=[SCENARIO])
    app = create_app(pool, ServeConfig(max_sessions=8), token=TOKEN)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)
    sock.close()
    pool.close()


@pytest.fixture(scope="module")
def tok():
    pytest.importorskip("transformers")
    from helpdp.train.config import ModelConfig
    from helpdp.train.tiny import build_tiny

    _, tok = build_tiny(
        ModelConfig(), ["<tool_call> call_tool tool_name arguments Done.", BAD_CALL]
    )
    return tok


def _script(pool, idx: int) -> list[str]:
    """Task 0: the reference calls, then the answer. Task 1: an unknown tool and a
    malformed call first (a failure, a format error), then the same."""
    sol = pool.scenario(SCENARIO).solutions[idx]
    calls = [format_call_tool(c["tool_name"], c.get("arguments") or {}) for c in sol.calls]
    return ([BAD_CALL, BAD_JSON] if idx == 1 else []) + calls + ["Done."]


class ScriptBackend:
    def __init__(self, tok, scripts: dict[str, list[str]]):
        self.tok, self.scripts = tok, scripts

    def generate(self, prompts, max_new, seed):
        out = []
        for p in prompts:
            text = self.tok.decode(p)
            turn = text.count("<|im_start|>assistant") - 1
            script = next(s for task, s in self.scripts.items() if task in text)
            ids = self.tok(script[min(turn, len(script) - 1)], add_special_tokens=False)
            out.append((ids["input_ids"] + [self.tok.eos_token_id], None))
        return out


def _rollout(pool, tok):
    from helpdp.train.rollout import (
        AWMRollout,
        GateRules,
        RolloutSettings,
        TokenActor,
        task_prompts,
    )

    rows, lookup = task_prompts(pool, [(SCENARIO, 0), (SCENARIO, 1)])
    scripts = {text: _script(pool, idx) for text, (_, idx) in lookup.items()}
    oracle = InterventionConfig(kind="oracle", use_verifier=False)
    rollout = AWMRollout(
        pool,
        build_interventions({"expert": oracle}),
        lookup,
        lambda tr: TokenActor(ScriptBackend(tok, scripts), tok, max_turn_tokens=256),
        Always(),
        SplitSchedule(kind="fixed", n_fixed=4, reference_group=8),
        rules=GateRules(design="proactive", max_per_episode=1),
        settings=RolloutSettings(num_generations=2),
    )
    prompts = [rows[0]["prompt"]] * 2 + [rows[1]["prompt"]] * 2
    return rollout, rollout(prompts)


KEYS = ("outcome", "end_reason", "turns", "format_errors", "expert_calls", "blind_calls", "role")


def test_remote_rollout_equals_local(server, tok, tmp_path, monkeypatch):
    monkeypatch.setenv("HELPDP_TEST_SERVE_TOKEN", TOKEN)
    remote = RemotePool(server, None, token_env="HELPDP_TEST_SERVE_TOKEN")
    local = EnvPool(worlds_dir(None), _config(tmp_path / "local"), scenarios=[SCENARIO])
    try:
        n0, n1 = len(_script(remote, 0)), len(_script(remote, 1))
        r_remote, got = _rollout(remote, tok)
        r_local, want = _rollout(local, tok)
    finally:
        local.close()
    assert got["outcome"] == ["complete"] * 4  # the reference calls solve both tasks
    assert got["turns"] == [n0, n0, n1, n1] and n1 >= n0 + 2
    assert got["format_errors"] == [0, 0, 1, 1]
    assert got["role"] == ["expert", "solo"] * 2 and got["expert_calls"] == [1, 0, 1, 0]
    for key in KEYS:
        assert got[key] == want[key], key
    # token for token the same episodes: tool responses and the oracle's messages included
    assert got["completion_ids"] == want["completion_ids"]
    assert got["env_mask"] == want["env_mask"] and got["prompt_ids"] == want["prompt_ids"]
    assert r_remote.last_stats["env/cold_resets"] == 0  # a server's resets are not seen here
    assert r_local.last_stats["env/cold_resets"] == 4  # one app worker per episode


def test_remote_env_offers_what_expert_llm_reads(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HELPDP_TEST_SERVE_TOKEN", TOKEN)
    remote = RemotePool(server, None, token_env="HELPDP_TEST_SERVE_TOKEN")
    with EnvPool(worlds_dir(None), _config(tmp_path / "local"), scenarios=[SCENARIO]) as local:
        envs = [remote.acquire(SCENARIO), local.acquire(SCENARIO)]
        turns = [BAD_CALL, *_script(remote, 0)[:-1]]
        try:
            for env in envs:
                env.reset(0, episode_id="e1")
                for text in turns:
                    env.step(text)
            a, b = envs
            assert a.trajectory_text("ok") == b.trajectory_text("ok")
            assert "no_such_tool" in a.trajectory_text()
            assert format_tools(a.tools) == format_tools(b.tools) and len(a.tools) > 3
            assert a.scenario is remote.scenario(SCENARIO)
            with pytest.raises(RuntimeError, match="does not offer verification"):
                a.verify(None)
        finally:
            remote.release(envs[0])
            local.release(envs[1])


def test_remote_without_the_token_ends_episodes_not_the_batch(server, tok, monkeypatch):
    monkeypatch.delenv("HELPDP_TEST_SERVE_TOKEN", raising=False)
    remote = RemotePool(server, None, token_env="HELPDP_TEST_SERVE_TOKEN")
    _, out = _rollout(remote, tok)
    assert out["outcome"] == ["server_error"] * 4 and out["turns"] == [0] * 4


def test_server_route_refuses_the_oracle_verifier_shortcut():
    from helpdp.cliconf import as_config, compose_config
    from helpdp.train.config import TrainConfig

    cfg = as_config(
        TrainConfig,
        compose_config("train", ["rollout.server_url=http://127.0.0.1:1"], node=TrainConfig),
        instance=True,
    )
    with pytest.raises(ValueError, match=r"interventions\.expert\.use_verifier=false"):
        build_pool(cfg)
    cfg.interventions["expert"].use_verifier = False
    assert isinstance(build_pool(cfg), RemotePool)
