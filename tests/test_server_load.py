"""Issue 38: the small version of bench/server_load.py. Both servers (child processes on
loopback, their output to a file, started when ``/health`` answers, a cap of 2 sessions)
with twice as many concurrent clients as sessions, each running real episodes, then a
client killed (SIGKILL) mid-episode: no episode lost, no session held after the run or
after the kill. No timing is asserted (the bench's deadlines only bound a stuck run)."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv")
pytest.importorskip("psutil")

from bench import server_load  # noqa: E402


@pytest.mark.parametrize("kind", ["openenv", "serve"])
def test_clients_past_the_cap_lose_nothing_and_leave_no_session(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_AWM_TOKEN", server_load.TOKEN)
    server = server_load.Server(kind, 2, tmp_path / "work")
    try:
        row = server_load.run_load(server, clients=4, episodes=2, timeout_s=600)
        assert (row["episodes"], row["lost"], row["errors"]) == (8, 0, []), row
        assert row["sessions_after"] == 0
        assert server_load._vanish(server, 1) == (1, 0)  # opened, killed: its session freed
    finally:
        server.stop()
