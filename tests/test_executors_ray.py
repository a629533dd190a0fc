"""The Ray executor on a local Ray instance gives the same tables as a local run."""

from __future__ import annotations

import pytest

import helpdp
from collect.collector import collect, collect_config

ray = pytest.importorskip("ray")

TABLES = ("states", "transitions", "episodes", "steps")


def _cfg(out, work, *extra):
    return collect_config(
        [
            f"out={out}",
            "schedule.max_tasks=2",
            "schedule.probabilities=[0.0,1.0]",
            "schedule.seeds=[0,1]",
            "executor.shard_size=4",
            "progress=false",
            f"env.work_root={work}",
            *extra,
        ]
    )


def test_ray_executor_matches_local(tmp_path):
    local = collect(_cfg(tmp_path / "local", tmp_path / "work", "executor.workers=1"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = collect(_cfg(tmp_path / "ray", tmp_path / "work", "executor.kind=ray"))
    finally:
        ray.shutdown()
    assert remote.shards_run == remote.shards_total == 6
    assert remote.episodes == local.episodes == 24
    for name in TABLES:
        assert (tmp_path / "ray" / f"{name}.parquet").read_bytes() == (
            tmp_path / "local" / f"{name}.parquet"
        ).read_bytes(), name
    ds = helpdp.load_dataset(tmp_path / "ray")
    assert ds.manifest["source"]["config"]["executor"]["kind"] == "ray"
    assert "ray" in ds.manifest["source"]["versions"]
