"""The peak of the files a pool keeps on the host, as scenarios accumulate (``env.host_files_mb``).

The pool's files (initial databases, the app workers' seed copies, the verifier inboxes'
copies) are on ``/dev/shm`` by default, outside every worker's cgroup. The budget was
checked only after an acquire or a release, with only the files there at that moment:
the seed copies an episode's app templates make at its reset and the two copies of a
verification came on top, and the files of the scenarios done before stayed. A world of
10 MB grew the run's directory by its files at every new scenario, past the budget (a
one-worker collection of six large worlds: 674 MiB for one, 3,126 MiB for all six).

Here four copies of a demo world with a 10 MB table and an app that is not the shipped
one (so every episode gets a fresh forked app: two templates, two seed copies) run one
after another under a budget of five database sizes (what one environment in use needs:
its database, two seed copies, a verification's two copies). The files are counted right
after every copy the host makes (builds, seeds, verifier inboxes): their peak stays within
the budget, an evicted scenario comes back with the same database, and the next run works.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import collect.awm.app as app_module
import collect.awm.sandbox.verifier as verifier_module
import collect.awm.sandbox.worker as worker_module
from collect.awm.dataset import AWMDataset
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.protocol import format_call_tool
from collect.awm.sandbox import SandboxLimits

WORLDS = Path(__file__).resolve().parent.parent / "collect" / "worlds"
SCENARIO = "workflow_automation_1"
ROWS = 24_000  # x 400 characters: a database of about 10 MB
LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)
BALLAST = {"name": "ballast", "ddl": "CREATE TABLE ballast (id INTEGER PRIMARY KEY, pad TEXT)"}
FILL = (
    "INSERT INTO ballast (pad) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
    f"FROM c WHERE x < {ROWS}) SELECT printf('%0400d', x) FROM c;"
)


def heavy_copies(root: Path, n: int) -> Path:
    """``SCENARIO`` as ``copy_0`` ... ``copy_{n-1}``, each with the ballast table and an
    app one comment away from the shipped one (untrusted: a fresh app per episode)."""
    root.mkdir(parents=True, exist_ok=True)
    for src in WORLDS.glob("*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            rec = json.loads(line)
            key = "scenario" if "scenario" in rec else "name"
            if rec.get(key) != SCENARIO:
                continue
            if src.name == "gen_db.jsonl":
                rec["db_schema"]["tables"].append({**BALLAST, "indexes": []})
            if src.name == "gen_sample.jsonl":
                table = {"table_name": "ballast", "insert_statements": [FILL]}
                rec["sample_data"]["tables"].append(table)
            if src.name == "gen_envs.jsonl":
                rec["full_code"] += "\n# not the shipped app\n"
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
            path = os.path.join(here, f)
            try:
                st = os.lstat(path)
            except OSError:  # removed meanwhile
                continue
            total += st.st_blocks * 512 if os.path.isfile(path) else 0
    return total


@pytest.fixture()
def counted(monkeypatch):
    """``(peaks, watch)``: after ``watch(root)``, every file copy the host makes (a
    build's database, a seed copy, a verifier inbox's copies) appends the bytes under
    ``root`` to ``peaks``."""
    peaks: list[int] = []
    roots: list[Path] = []
    for module in (app_module, worker_module, verifier_module):
        original = module.copy_file_nofollow

        def counting(*args, _original=original, **kwargs):
            try:
                return _original(*args, **kwargs)
            finally:
                for root in roots:
                    peaks.append(walked(root))

        monkeypatch.setattr(module, "copy_file_nofollow", counting)
    return peaks, roots.append


def _solve(pool: EnvPool, name: str) -> str:
    env = pool.acquire(name)
    try:
        env.reset(0)
        for call in env.scenario.solutions[0].calls:
            assert not env.step(format_call_tool(call["tool_name"], call["arguments"])).done
        return env.step("Done.").info["outcome"]
    finally:
        pool.release(env)


def _config(work: Path, budget_mb: float | None) -> EnvConfig:
    return EnvConfig(
        sandbox=LIMITS, verifier_sandbox=VLIMITS, work_root=str(work), host_files_mb=budget_mb
    )


def test_the_peak_of_host_files_stays_within_the_budget_as_scenarios_accumulate(tmp_path, counted):
    peaks, watch = counted
    dataset = AWMDataset(heavy_copies(tmp_path / "data", 4))
    with EnvPool(dataset, _config(tmp_path / "probe", None)) as probe:  # one database's size
        env = probe.acquire("copy_0")
        db_bytes = env.initial_db.stat().st_blocks * 512
        assert not env.fresh_app or env._forks()  # untrusted: forked fresh apps
        probe.release(env)
    assert db_bytes > 8 << 20
    budget = 5 * db_bytes + (4 << 20)  # one environment in use, and the small files
    work = tmp_path / "budget"
    watch(work)
    with EnvPool(dataset, _config(work, budget / (1 << 20))) as pool:
        first = None
        for name in dataset.names():
            assert _solve(pool, name) == "complete"
            first = first or pool._digests[name]
        assert len(peaks) > 4 * 4, peaks  # builds, seeds and inbox copies were counted
        assert max(peaks) <= budget, (max(peaks) / db_bytes, [p // db_bytes for p in peaks])
        assert "copy_0" not in pool._assets  # evicted: rebuilt, the same bytes
        assert _solve(pool, "copy_0") == "complete"
        assert pool._digests["copy_0"] == first
        assert max(peaks) <= budget
    with EnvPool(dataset, _config(tmp_path / "next", None)) as pool:  # the next run
        assert _solve(pool, "copy_3") == "complete"
