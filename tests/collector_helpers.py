"""A small collection on one demo world, run in process or through ``python -m collect``:
what the collector's rerun, shard and stop tests share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DATASET = ("states", "transitions", "episodes", "steps")
#: 2 tasks x 2 probabilities x 1 seed = 4 episodes, one shard each
SMALL = [
    "schedule.scenarios=[smart_home_1]",
    "schedule.max_tasks=2",
    "schedule.probabilities=[0.0,1.0]",
    "schedule.seeds=[0]",
    "executor.shard_size=1",
    "executor.workers=1",
    "progress=false",
]


def small_args(out: Path, work: Path, *extra: str) -> list[str]:
    """The command line of the small collection into ``out`` (sandboxes under ``work``)."""
    return [f"out={out}", f"env.work_root={work}", *SMALL, *extra]


def run_cli(out: Path, work: Path, *extra: str, cwd=None) -> subprocess.CompletedProcess:
    """``python -m collect`` on the small collection (this checkout's packages first)."""
    cmd = [sys.executable, "-m", "collect", *small_args(out, work, *extra)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def table_bytes_of(out: Path) -> dict[str, bytes]:
    """The published dataset's four tables, as bytes."""
    return {n: (out / f"{n}.parquet").read_bytes() for n in DATASET}
