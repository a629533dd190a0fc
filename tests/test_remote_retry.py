"""Issue 38: the OpenEnv route under load. The remote runtime waits for a session while
the server is at capacity and never holds more than its episodes in flight; the server
frees a session when its socket ends; an episode lost to the runtime is run again, and
one still lost leaves its shard unfinished (nothing published, one line), which a rerun
fills with exactly those episodes, to the tables of a serial run, byte for byte."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

pytest.importorskip("openenv")

from awm_helpers import served  # noqa: E402

from collect.awm import remote_env  # noqa: E402
from collect.awm.env import EnvConfig, EnvPool  # noqa: E402
from collect.awm.openenv_server import create_openenv_app  # noqa: E402
from collect.awm.remote_env import OpenEnvPool, is_capacity_error, server_capacity  # noqa: E402
from collect.awm.serve import ServeConfig  # noqa: E402
from collect.collector import (  # noqa: E402
    CollectResult,
    EpisodesLost,
    _fit_sessions,
    collect,
    collect_config,
)
from collect.plan import plan_shards  # noqa: E402
from collect.shards import ShardStore  # noqa: E402
from collect.worker import _within_cap, runtime_failed  # noqa: E402
from collect.worlds import WORLDS_DIR  # noqa: E402

TOKEN = "retry-test-token"
SCENARIOS = ["smart_home_1", "workflow_automation_1"]
TABLES = ("states", "transitions", "episodes", "steps")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Our OpenEnv server with room for one session."""
    import uvicorn

    root = tmp_path_factory.mktemp("retry")
    pool = EnvPool(
        WORLDS_DIR, EnvConfig(expert_enabled=False, work_root=str(root / "w")), scenarios=SCENARIOS
    )
    app = create_openenv_app(pool, ServeConfig(max_sessions=1), token=TOKEN)
    with served(uvicorn.Config(app, log_level="warning", lifespan="off")) as url:
        yield url, app.state.openenv_server
    pool.close()


class _LateSocketEnd:
    """ASGI wrapper: a socket's close reaches the server's handler ``delay`` s late, as on
    a busy event loop (issue 38: OpenEnv answered the session's close with "closing" and
    freed the slot only then, so the client's next session was refused at capacity)."""

    def __init__(self, app, delay: float):
        self.app, self.delay = app, delay

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)

        async def late():
            message = await receive()
            text = message.get("text") or ""
            if message["type"] == "websocket.disconnect" or '"type": "close"' in text:
                await asyncio.sleep(self.delay)
            return message

        return await self.app(scope, late, send)


@pytest.fixture(scope="module")
def late_server(tmp_path_factory):
    """Our OpenEnv server with room for one session, whose sockets end late."""
    import uvicorn

    root = tmp_path_factory.mktemp("late")
    pool = EnvPool(
        WORLDS_DIR, EnvConfig(expert_enabled=False, work_root=str(root / "w")), scenarios=SCENARIOS
    )
    app = create_openenv_app(pool, ServeConfig(max_sessions=1), token=TOKEN)
    config = uvicorn.Config(_LateSocketEnd(app, 1.0), log_level="warning", lifespan="off")
    with served(config) as url:
        yield url
    pool.close()


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv("OPENENV_AWM_TOKEN", TOKEN)


def _pool(url: str, **kw) -> OpenEnvPool:
    return OpenEnvPool(url, WORLDS_DIR, EnvConfig(expert_enabled=False), **kw)


def _sessions(url: str) -> int:
    """The sessions the server holds once it has seen every closed socket (polled)."""
    for _ in range(300):
        active = server_capacity(url)["active_sessions"]
        if active == 0:
            return 0
        time.sleep(0.05)
    return active


def test_the_server_advertises_its_cap(server):
    url, _ = server
    assert server_capacity(url) == {"max_sessions": 1, "active_sessions": 0}
    assert server_capacity("http://127.0.0.1:9") is None  # nothing there: no cap known


def test_a_client_waits_for_a_session_at_capacity_and_counts_its_waits(server):
    url, _ = server
    with _pool(url) as first, _pool(url, capacity_wait_s=120) as second:
        held = first.acquire("smart_home_1")
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(second.acquire("smart_home_1")))
        waiter.start()
        while second.capacity_retries < 2:  # refused twice: it is waiting
            time.sleep(0.01)
        held.close()  # the slot is freed before close returns
        waiter.join(60)
        assert got and got[0].reset(0).task and second.capacity_retries >= 2
        assert second.held == 1 and first.held == 0


def test_a_bounded_wait_raises_the_refusal(server):
    url, _ = server
    with _pool(url) as first, _pool(url, capacity_wait_s=0) as second:
        first.acquire("smart_home_1")
        with pytest.raises(RuntimeError) as e:
            second.acquire("smart_home_1")
        assert is_capacity_error(e.value) and second.capacity_retries == 0
    assert _sessions(url) == 0


def test_a_pool_closes_an_idle_session_before_it_opens_one_over_its_limit(server):
    """The issue's cause: idle sessions of other scenarios held while new ones opened."""
    url, _ = server
    with _pool(url, max_sessions=1, capacity_wait_s=0) as pool:
        a = pool.acquire("smart_home_1")
        a.reset(0)
        pool.release(a)
        b = pool.acquire("workflow_automation_1")  # the cap is 1: a's slot must be freed
        assert b is not a and a._closed and pool.held == 1
        pool.release(b)
        assert pool.acquire("workflow_automation_1") is b  # an idle one of its scenario
    assert _sessions(url) == 0


def test_a_closed_session_is_free_when_its_close_returns_though_its_socket_ends_late(
    late_server,
):
    """A pool at the server's cap of one closes a session and opens the next, with no wait
    allowed: before, the next was refused ("at capacity": the closed one still held its
    slot until its socket handler ended); now the close is answered once the slot is free."""
    with _pool(late_server, max_sessions=1, capacity_wait_s=0) as pool:
        env = pool.acquire("smart_home_1")
        for name in ["workflow_automation_1", "smart_home_1", "workflow_automation_1"]:
            env.reset(0)
            pool.release(env)
            nxt = pool.acquire(name)  # closes env (the pool's limit), then opens
            assert env._closed and nxt is not env
            env = nxt
        assert env.reset(0).task and pool.capacity_retries == 0 and pool.held == 1
    assert _sessions(late_server) == 0


def test_a_pool_within_the_cap_waits_in_full_while_its_other_session_is_in_use(server, monkeypatch):
    """Within the cap a refusal is a slot being freed: the pool waits though its other
    session is in use. Without it (no cap known) the busy bound ends the wait (here 0 s)."""
    url, _ = server
    monkeypatch.setattr(remote_env, "BUSY_WAIT_S", 0.0)
    with _pool(url, capacity_wait_s=120) as pool:
        held = pool.acquire("smart_home_1")  # in use: the server's one slot
        with pytest.raises(RuntimeError) as e:
            pool.acquire("workflow_automation_1")
        assert is_capacity_error(e.value) and pool.capacity_retries == 0
        pool.within_cap = True
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(pool.acquire("smart_home_1")))
        waiter.start()
        while pool.capacity_retries < 2:  # refused twice: it is waiting, not giving up
            time.sleep(0.01)
        held.close()
        waiter.join(60)
        assert got and got[0].reset(0).task and pool.held == 1
    assert _sessions(url) == 0


def test_sessions_being_opened_count_against_the_pools_limit(monkeypatch):
    """A batch starts its episodes in threads at once: two acquires, each past the limit
    of 2 with an idle session to close, both opening together (a barrier). Uncounted, the
    second saw one session open (the first's not yet made) and closed none: 3 open."""
    state = {"open": 0, "peak": 0}
    lock, both = threading.Lock(), threading.Barrier(2, timeout=60)

    class Session:
        def __init__(self, url, scenario, config, token, **kw):
            self.scenario, self._closed, self.connected = scenario, False, True
            with lock:
                state["open"] += 1
                state["peak"] = max(state["peak"], state["open"])
            if scenario.name == "e_commerce_admin_1":
                both.wait()  # the two opens overlap

        def close(self):
            if not self._closed:
                self._closed = True
                with lock:
                    state["open"] -= 1

    monkeypatch.setattr(remote_env, "OpenEnvAWMEnv", Session)
    pool = _pool("http://127.0.0.1:9", max_sessions=2)
    for env in [pool.acquire("smart_home_1"), pool.acquire("workflow_automation_1")]:
        pool.release(env)
    got: list = []
    threads = [
        threading.Thread(target=lambda: got.append(pool.acquire("e_commerce_admin_1")))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 2 and state == {"open": 2, "peak": 2} and pool.held == 2
    pool.close()
    assert state["open"] == 0


def test_the_collector_fits_its_sessions_to_the_cap_and_its_workers_know_it(tmp_path):
    base = [
        f"out={tmp_path}",
        "runtime=openenv",
        "env_url=http://127.0.0.1:9",
        "executor.max_sessions=16",
    ]
    cases = {(2, 8): (2, 8), (4, 8): (4, 4), (32, 1): (16, 1), (3, 8): (3, 5)}
    for (workers, batch), fitted in cases.items():
        cfg = collect_config([*base, f"executor.workers={workers}", f"executor.batch_size={batch}"])
        ex = _fit_sessions(cfg, 100, inline=False)
        assert (ex.workers, ex.batch_size, ex.max_sessions) == (*fitted, 16)
        assert _within_cap(ex)
    inline = _fit_sessions(collect_config([*base, "executor.batch_size=32"]), 100, inline=True)
    assert (inline.workers, inline.batch_size) == (1, 16) and _within_cap(inline)
    unknown = collect_config([*base[:3], "executor.workers=2", "executor.batch_size=8"])
    assert _fit_sessions(unknown, 100, inline=False) is unknown.executor  # no server there
    assert not _within_cap(unknown.executor)


def test_sessions_another_client_holds_are_not_ours(tmp_path, monkeypatch):
    """Two collections on one server: the second fits to what is free, and its workers do
    not take themselves to be within the cap (a wait for a session could be the other's)."""
    import collect.awm.remote_env as remote

    monkeypatch.setattr(
        remote, "server_capacity", lambda *a, **k: {"max_sessions": 16, "active_sessions": 10}
    )
    base = [f"out={tmp_path}", "runtime=openenv", "env_url=http://127.0.0.1:9"]
    cfg = collect_config([*base, "executor.workers=2", "executor.batch_size=8"])
    ex = _fit_sessions(cfg, 100, inline=False)
    assert (ex.workers, ex.batch_size) == (2, 3) and not _within_cap(ex)
    monkeypatch.setattr(
        remote, "server_capacity", lambda *a, **k: {"max_sessions": 16, "active_sessions": 0}
    )
    ex = _fit_sessions(cfg, 100, inline=False)
    assert (ex.workers, ex.batch_size, ex.max_sessions) == (2, 8, 16) and _within_cap(ex)


def test_the_server_url_is_not_the_collections_identity(tmp_path):
    """A resume may reach the same server at another port: env_url is in neither the
    fingerprint nor the recorded config (the manifest's source.runtime keeps it)."""
    plans = [
        plan_shards(collect_config([f"out={tmp_path}", "runtime=openenv", f"env_url={u}", *SMALL]))
        for u in ("http://127.0.0.1:18638", "http://localhost:9000")
    ]
    assert plans[0].fingerprint == plans[1].fingerprint
    assert "env_url" not in plans[0].config and plans[0].config["runtime"] == "openenv"
    local = plan_shards(collect_config([f"out={tmp_path}", *SMALL]))
    assert local.fingerprint != plans[0].fingerprint  # the runtime itself still counts


def test_the_server_frees_a_session_whose_socket_dropped(server):
    """A client gone without openenv/session/close: OpenEnv kept its session for
    session_idle_s; ours frees it when the socket ends."""
    url, openenv = server
    with _pool(url) as pool:
        env = pool.acquire("smart_home_1")
        env.reset(0)
        assert openenv.active_sessions == 1
        env.client.disconnect()  # the socket only: no session/close is sent
        assert _sessions(url) == 0
        env._closed = True  # nothing left to close


def test_runtime_failures_are_told_from_outcomes_of_the_world():
    class Log:
        def __init__(self, outcome, error):
            self.episode = {"outcome": outcome, "error": error}

    assert runtime_failed(Log("server_error", "environment failed to start: RuntimeError(...)"))
    assert runtime_failed(Log("server_error", "environment step failed: ConnectionClosed()"))
    assert not runtime_failed(Log("server_error", "worker died"))  # the app died: an outcome
    assert not runtime_failed(Log("server_error", "actor failed: HTTP 503"))
    assert not runtime_failed(Log("complete", "environment failed to start"))


def test_the_summary_line_gives_rates_over_valid_episodes():
    outcomes = {"complete": 3, "incomplete": 1, "format_error": 2, "server_error": 1}
    r = CollectResult(
        out="OUT",
        episodes=7,
        steps=20,
        states=21,
        transitions=20,
        shards_run=1,
        shards_total=1,
        seconds=1.0,
        summary={"outcomes": outcomes, "help_rate": 0.25},
        reruns=2,
        capacity_retries=5,
    )
    assert r.line() == (
        "wrote OUT: 7 episodes, 20 steps, 21 states, 20 transitions; success 0.750 over 4 "
        "valid episodes (invalid: format_error 2, server_error 1), help rate 0.250 over 20 "
        "steps; runtime: 2 episodes run again, 5 waits at capacity; 1/1 shards run in 1.0 s"
    )


SMALL = [
    "schedule.scenarios=[workflow_automation_1]",
    "schedule.max_tasks=3",
    "schedule.probabilities=[0.0,0.5,1.0]",
    "schedule.seeds=[0]",
    "executor.shard_size=3",
    "executor.workers=1",
    "progress=false",
]


def _bytes(out) -> dict[str, bytes]:
    return {t: (out / f"{t}.parquet").read_bytes() for t in TABLES}


def test_lost_episodes_leave_the_run_unfinished_and_a_rerun_fills_them(server, tmp_path):
    """Two episodes in flight against a cap of one, no wait, no retry: episodes are lost;
    nothing is published, one line says how many; the rerun (the server's cap read at
    /capacity) runs only those, and the tables are a serial run's, byte for byte."""
    url, _ = server
    remote = ["runtime=openenv", f"env_url={url}", *SMALL]
    serial = collect(collect_config([f"out={tmp_path / 'serial'}", *remote]))
    assert serial.episodes == 9 and serial.reruns == 0
    out = tmp_path / "loaded"
    forced = [
        "executor.batch_size=2",
        "executor.max_sessions=2",
        "executor.capacity_wait_s=0",
        "executor.episode_retries=0",
    ]
    with pytest.raises(EpisodesLost) as e:
        collect(collect_config([f"out={out}", *remote, *forced]))
    store = ShardStore(out)
    lost = {i: store.lost(i) for i in range(3) if store.present(i)}
    missing = [i for i in range(3) if not store.present(i)]
    n_lost = sum(map(len, lost.values())) + 3 * len(missing)
    assert n_lost > 0 and not (out / "episodes.parquet").exists()
    assert str(e.value).startswith(f"{n_lost} of 9 episodes lost to the runtime after 0 retries")
    assert "rerun the same command" in str(e.value) and "\n" not in str(e.value)
    again = collect(collect_config([f"out={out}", *remote, "executor.batch_size=2"]))
    assert again.shards_run == len(missing) + sum(1 for ids in lost.values() if ids)
    assert all(not store.lost(i) for i in range(3))
    assert _bytes(out) == _bytes(tmp_path / "serial")
    assert _sessions(url) == 0


def test_an_episode_lost_once_is_run_again_with_its_seed(server, tmp_path):
    """With retries, the same forced losses are run again within the run (same ids and
    seeds): nothing lost, the serial run's tables."""
    url, _ = server
    remote = ["runtime=openenv", f"env_url={url}", *SMALL]
    collect(collect_config([f"out={tmp_path / 'serial'}", *remote]))
    forced = [
        "executor.batch_size=2",
        "executor.max_sessions=2",
        "executor.capacity_wait_s=0",
        "executor.episode_retries=5",
    ]
    loaded = collect(collect_config([f"out={tmp_path / 'loaded'}", *remote, *forced]))
    assert loaded.reruns > 0 and loaded.episodes == 9
    assert _bytes(tmp_path / "loaded") == _bytes(tmp_path / "serial")
    assert _sessions(url) == 0


def test_the_command_says_what_a_format_error_is(monkeypatch, capsys):
    # 16% of a collection's episodes were format errors with no word on why
    import collect.cli as cli

    outcomes = {"complete": 3, "format_error": 2}
    r = CollectResult(out="OUT", episodes=5, steps=9, states=9, transitions=8, shards_run=1,
                      shards_total=1, seconds=1.0, summary={"outcomes": outcomes, "help_rate": 0.2})  # fmt: skip
    monkeypatch.setattr(cli, "collect", lambda cfg: r)
    cli.run_cli(type("Cfg", (), {"policy": None})())
    out = capsys.readouterr().out
    assert "  format_error (2): the actor's reply was neither a well-formed tool call" in out
    monkeypatch.setattr(
        cli,
        "collect",
        lambda cfg: r.__class__(
            **{**r.__dict__, "summary": {"outcomes": {"complete": 5}, "help_rate": 0.2}}
        ),
    )
    cli.run_cli(type("Cfg", (), {"policy": None})())
    assert "format_error (" not in capsys.readouterr().out
