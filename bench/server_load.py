"""Both environment servers under load, on loopback: ``python bench/server_load.py``.

Starts ``python -m collect.awm.openenv_server`` and ``python -m collect.awm.serve``
(demo worlds, a bearer token, ``max_sessions=CAP``) as child processes on 127.0.0.1 and
runs, against each, ``N`` concurrent clients for N = 1, 2 and 4 times the cap, each
running ``--episodes`` real episodes (reset, the task's reference tool calls, the final
answer, verification). A client refused at capacity waits and tries again (0.1 s
doubling to 5 s, as the collector's remote runtime does), so no episode should be lost.
Besides them, ``--vanish`` clients (child processes) open a session, make a call and
are killed (SIGKILL) mid-episode. Reported per server and load: episodes run and lost,
waits at capacity, p50/p99 latency of a tool call and of an episode (client side),
the sessions the server holds after the run (its ``/capacity``), the server's RSS per
session (its process tree at the load's peak, over the tree when it started with no
session, per session held at that peak: app workers kept warm after a load count in
the next one's too), and the sessions the vanished clients left. Bounded: every client has a deadline (``--timeout-s``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOKEN = "server-load-bench-token"
SCENARIO = "workflow_automation_1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


class Server:
    """A server child process (``kind``: openenv | serve) on a free loopback port."""

    def __init__(self, kind: str, cap: int, work: Path):
        self.kind, self.cap = kind, cap
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        module = "collect.awm.openenv_server" if kind == "openenv" else "collect.awm.serve"
        args = [
            sys.executable,
            "-m",
            module,
            f"port={port}",
            f"max_sessions={cap}",
            f"env.work_root={work}",
            "env.expert_enabled=false",
        ]
        if kind == "serve":
            args.append(f"max_sessions_per_client={cap}")  # every client is 127.0.0.1
        env = {**os.environ, "OPENENV_AWM_TOKEN": TOKEN, "HELPDP_SERVE_TOKEN": TOKEN}
        self.token_env = "OPENENV_AWM_TOKEN"
        self.log = work.parent / f"{kind}-server.log"
        work.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:  # a file: the app workers inherit no pipe
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=log)
        import httpx

        deadline = time.monotonic() + 600  # a bound: a busy machine starts it slowly
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{module} did not start: {self.log.read_bytes()[-500:]!r}")
            time.sleep(0.1)
        self.idle_rss = _tree_rss(self.proc.pid)  # started, no session yet

    def capacity(self, deadline_s: float = 120.0) -> dict[str, Any]:
        """The server's ``GET /capacity`` (asked again while a busy server does not answer)."""
        import httpx

        end = time.monotonic() + deadline_s
        while True:
            try:
                r = httpx.get(
                    self.url + "/capacity", timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
                )
                r.raise_for_status()
                return r.json()
            except httpx.HTTPError:
                if time.monotonic() > end or self.proc.poll() is not None:
                    raise
            time.sleep(0.2)

    def settled_sessions(self, deadline_s: float = 120.0) -> int:
        """Sessions held once the server has noticed every closed connection (polled until
        none is held or ``deadline_s`` has passed: a bound, not a measure)."""
        end = time.monotonic() + deadline_s
        while True:
            active = int(self.capacity()["active_sessions"])
            if active == 0 or time.monotonic() > end:
                return active
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _solutions() -> list[tuple[int, Any]]:
    from collect.awm.dataset import AWMDataset
    from collect.worlds import WORLDS_DIR

    sc = AWMDataset(WORLDS_DIR).get(SCENARIO)
    return sorted(sc.solutions.items())


class _Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[float] = []
        self.episodes: list[float] = []
        self.lost: list[str] = []
        self.waits = 0


def _openenv_client(url: str, n: int, stats: _Stats, deadline: float) -> None:
    from collect.awm.env import EnvConfig
    from collect.awm.protocol import Action
    from collect.awm.remote_env import OpenEnvPool
    from collect.worlds import WORLDS_DIR

    sols = _solutions()
    config = EnvConfig(expert_enabled=False)
    with OpenEnvPool(
        url,
        WORLDS_DIR,
        config,
        scenarios=[SCENARIO],
        max_sessions=1,
        capacity_wait_s=max(0.0, deadline - time.monotonic()),
    ) as pool:
        for k in range(n):
            idx, sol = sols[k % len(sols)]
            started = time.monotonic()
            try:
                env = pool.acquire(SCENARIO)
                env.reset(idx, episode_id=f"load-{threading.get_ident()}-{k}")
                for call in sol.calls:
                    t0 = time.monotonic()
                    env.act(
                        Action(
                            "call_tool",
                            tool_name=call["tool_name"],
                            arguments=call.get("arguments") or {},
                        )
                    )
                    with stats.lock:
                        stats.calls.append(time.monotonic() - t0)
                end = env.act(Action("final", text=sol.final_answer or "done"))
                assert end.done, "the final answer did not end the episode"
                pool.release(env)
            except Exception as e:  # noqa: BLE001 - a lost episode, counted
                with stats.lock:
                    stats.lost.append(repr(e)[:200])
                continue
            with stats.lock:
                stats.episodes.append(time.monotonic() - started)
        with stats.lock:
            stats.waits += pool.capacity_retries


def _serve_client(url: str, n: int, stats: _Stats, deadline: float) -> None:
    from collect.awm.client import EnvClient

    sols = _solutions()
    client = EnvClient(url, token=TOKEN)
    try:
        for k in range(n):
            idx, sol = sols[k % len(sols)]
            started, pause = time.monotonic(), 0.1
            try:
                while True:  # at capacity: wait and try again, as the collector does
                    try:
                        client.reset(SCENARIO, idx)
                        break
                    except RuntimeError as e:
                        if "HTTP 503" not in str(e) and "HTTP 429" not in str(e):
                            raise
                        if time.monotonic() + pause > deadline:
                            raise
                        with stats.lock:
                            stats.waits += 1
                        time.sleep(pause)
                        pause = min(2 * pause, 5.0)
                for call in sol.calls:
                    t0 = time.monotonic()
                    client.call_tool(call["tool_name"], call.get("arguments") or {})
                    with stats.lock:
                        stats.calls.append(time.monotonic() - t0)
                end = client.step(sol.final_answer or "done")
                assert end["done"], "the final answer did not end the episode"
                client._post("/close", {"session_id": client.session_id})  # the slot freed
                client.session_id = None
            except Exception as e:  # noqa: BLE001 - a lost episode, counted
                with stats.lock:
                    stats.lost.append(repr(e)[:200])
                continue
            with stats.lock:
                stats.episodes.append(time.monotonic() - started)
    finally:
        client.close()


#: a client that opens a session over WebSocket, makes one call, says so and waits to be killed
_VANISH = r"""
import sys, time
kind, url, token, scenario = sys.argv[1:5]
if kind == "openenv":
    import os
    os.environ["OPENENV_AWM_TOKEN"] = token
    from collect.awm.env import EnvConfig
    from collect.awm.protocol import Action
    from collect.awm.remote_env import OpenEnvPool
    from collect.worlds import WORLDS_DIR
    pool = OpenEnvPool(url, WORLDS_DIR, EnvConfig(expert_enabled=False), scenarios=[scenario],
                       capacity_wait_s=60)
    env = pool.acquire(scenario)
    env.reset(0)
    env.act(Action("list_tools"))
else:
    import asyncio
    from collect.awm.client import AsyncEnvClient
    async def main():
        c = AsyncEnvClient(url, token=token)
        await c.__aenter__()
        await c.reset(scenario, 0)
        await c.act({"type": "list_tools"})
        print("ready", flush=True)
        await asyncio.sleep(3600)
    asyncio.run(main())
print("ready", flush=True)
time.sleep(3600)
"""


def _vanish(server: Server, n: int, deadline_s: float = 300.0) -> tuple[int, int]:
    """``n`` clients killed (SIGKILL) mid-episode: how many had their session open when
    killed, and the sessions the server still holds after."""
    import selectors

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _VANISH, server.kind, server.url, TOKEN, SCENARIO],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            env=env,
        )
        for _ in range(n)
    ]
    ready, end = 0, time.monotonic() + deadline_s
    try:
        with selectors.DefaultSelector() as sel:
            for p in procs:
                sel.register(p.stdout, selectors.EVENT_READ)
            waiting = len(procs)
            while waiting and time.monotonic() < end:  # bounded: no read can hang
                for key, _ in sel.select(timeout=1.0):
                    line = key.fileobj.readline()  # "ready": its session is open
                    ready += line.strip() == b"ready"
                    sel.unregister(key.fileobj)
                    waiting -= 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
            p.stdout.close()
    return ready, server.settled_sessions()


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000
        if len(values) > 1
        else values[0] * 1000
    )


def run_load(server: Server, clients: int, episodes: int, timeout_s: float) -> dict[str, Any]:
    stats = _Stats()
    deadline = time.monotonic() + timeout_s
    target = _openenv_client if server.kind == "openenv" else _serve_client
    idle = server.idle_rss
    peak = {"rss": idle, "sessions": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                active = int(server.capacity(deadline_s=0)["active_sessions"])
            except Exception:  # noqa: BLE001 - a busy server: the next sample
                done.wait(0.2)
                continue
            rss = _tree_rss(server.proc.pid)
            if active >= peak["sessions"]:
                peak["sessions"], peak["rss"] = active, max(peak["rss"], rss)
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    threads = [
        threading.Thread(target=target, args=(server.url, episodes, stats, deadline))
        for _ in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 30)
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    per = (peak["rss"] - idle) / peak["sessions"] / 2**20 if peak["sessions"] else float("nan")
    return {
        "server": server.kind,
        "cap": server.cap,
        "clients": clients,
        "episodes": len(stats.episodes),
        "lost": clients * episodes - len(stats.episodes),
        "waits": stats.waits,
        "call_p50_ms": _pct(stats.calls, 50),
        "call_p99_ms": _pct(stats.calls, 99),
        "episode_p50_ms": _pct(stats.episodes, 50),
        "episode_p99_ms": _pct(stats.episodes, 99),
        "wall_s": wall,
        "sessions_after": server.settled_sessions(),
        "rss_mib_per_session": per,
        "rss_peak_mib": peak["rss"] / 2**20,
        "peak_sessions": peak["sessions"],
        "errors": stats.lost[:3],
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| server | cap | clients | episodes | lost | waits at cap | call p50/p99 ms | "
        "episode p50/p99 ms | wall s | sessions after | RSS/session MiB | vanished: "
        "sessions left |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['server']} | {r['cap']} | {r['clients']} | {r['episodes']} | {r['lost']} | "
            f"{r['waits']} | {r['call_p50_ms']:.1f} / {r['call_p99_ms']:.1f} | "
            f"{r['episode_p50_ms']:.0f} / {r['episode_p99_ms']:.0f} | {r['wall_s']:.1f} | "
            f"{r['sessions_after']} | {r['rss_mib_per_session']:.1f} | {r.get('vanished', '')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=int, default=4, help="the servers' max_sessions")
    ap.add_argument("--loads", default="1,2,4", help="clients, as multiples of the cap")
    ap.add_argument("--episodes", type=int, default=3, help="episodes per client")
    ap.add_argument("--vanish", type=int, default=2, help="clients killed mid-episode")
    ap.add_argument("--servers", default="openenv,serve")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="deadline of each load")
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args(argv)
    import tempfile

    os.environ["OPENENV_AWM_TOKEN"] = TOKEN  # what the OpenEnv clients send

    rows = []
    with tempfile.TemporaryDirectory(prefix="server-load-") as work:
        for kind in args.servers.split(","):
            server = Server(kind, args.cap, Path(work) / kind)
            try:
                for mult in (int(m) for m in args.loads.split(",")):
                    row = run_load(server, mult * args.cap, args.episodes, args.timeout_s)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                opened, left = _vanish(server, args.vanish)
                rows[-1]["vanished"] = f"{opened} killed, {left} left"
                rows[-1]["sessions_after"] = server.settled_sessions()
            finally:
                server.stop()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
