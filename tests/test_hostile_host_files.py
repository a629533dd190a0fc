"""A dataset of many scenarios against the host's memory (``env.host_files_mb``).

The pool keeps every scenario's initial database and every kept app worker a seed copy,
on ``/dev/shm`` by default and outside every worker's cgroup, so what a run keeps on
the host grew with the scenario count. Here ten copies of a demo world (same seed SQL,
small databases) run one after another under a budget of a few database sizes: the
files under ``work_root`` stay within it after every release, an evicted scenario comes
back with a rebuilt, identical database, a budget below what one live environment needs
fails that acquire with ``HostFilesExceeded``, and the next run still works.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from collect.awm.dataset import AWMDataset
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.protocol import format_call_tool
from collect.awm.sandbox import SandboxLimits

WORLDS = Path(__file__).resolve().parent.parent / "collect" / "worlds"
SCENARIO = "workflow_automation_1"
LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)


def copies(root: Path, n: int) -> Path:
    """The demo world's ``SCENARIO`` as ``n`` scenarios ``copy_0`` ... ``copy_{n-1}``."""
    root.mkdir(parents=True, exist_ok=True)
    for src in WORLDS.glob("*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            rec = json.loads(line)
            key = "scenario" if "scenario" in rec else "name"
            if rec.get(key) != SCENARIO:
                continue
            for i in range(n):
                out.append(json.dumps({**rec, key: f"copy_{i}"}))
        (root / src.name).write_text("\n".join(out) + "\n")
    (root / "clock.txt").write_text((WORLDS / "clock.txt").read_text())
    return root


def walked(root: Path) -> int:
    """Bytes of the regular files under ``root`` (as ``du`` counts them)."""
    total = 0
    for here, _dirs, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(here, f))
            total += st.st_blocks * 512 if os.path.isfile(os.path.join(here, f)) else 0
    return total


def _solve(pool: EnvPool, name: str) -> str:
    env = pool.acquire(name)
    try:
        env.reset(0)
        for call in env.scenario.solutions[0].calls:
            assert not env.step(format_call_tool(call["tool_name"], call["arguments"])).done
        return env.step("Done.").info["outcome"]
    finally:
        pool.release(env)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return copies(tmp_path_factory.mktemp("copies") / "data", 10)


def _config(work: Path, budget_mb: float | None) -> EnvConfig:
    return EnvConfig(
        sandbox=LIMITS, verifier_sandbox=VLIMITS, work_root=str(work), host_files_mb=budget_mb
    )


def test_host_files_stay_within_the_budget_as_scenarios_accumulate(data, tmp_path):
    dataset = AWMDataset(data)
    db_bytes = None
    peaks = []
    budget_mb = None
    work = tmp_path / "work"
    with EnvPool(dataset, _config(work, 1e6)) as probe:  # one database's size, measured
        env = probe.acquire("copy_0")
        db_bytes = env.initial_db.stat().st_blocks * 512
        probe.release(env)
    budget_mb = 6 * db_bytes / (1 << 20)  # a database, a seed copy, exports: a few sizes
    with EnvPool(dataset, _config(tmp_path / "budget", budget_mb)) as pool:
        first = None
        for name in dataset.names():
            assert _solve(pool, name) == "complete"
            peaks.append(walked(tmp_path / "budget"))
            if first is None:
                first = pool._digests[name]
        assert max(peaks) <= budget_mb * (1 << 20), (peaks, db_bytes)  # grew with the count
        assert "copy_0" not in pool._assets  # evicted long ago: rebuilt, the same bytes
        assert _solve(pool, "copy_0") == "complete"
        assert pool._digests["copy_0"] == first


def test_a_budget_below_one_environment_is_a_named_error(data, tmp_path):
    with EnvPool(AWMDataset(data), _config(tmp_path / "tiny", 0.01)) as pool:
        with pytest.raises(Exception, match=r"over env.host_files_mb \(0.01 MiB\)") as e:
            pool.acquire("copy_1")
        assert type(e.value).__name__ == "HostFilesExceeded"
        assert pool._all == []
    with EnvPool(AWMDataset(data), _config(tmp_path / "next", None)) as pool:  # the next run
        assert _solve(pool, "copy_1") == "complete"
