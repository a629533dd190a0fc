"""bench/scale.py: a stage's measurements, a resumed collection summed, the growth exponent."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import psutil  # noqa: F401  (bench/scale.py's own import: the fast lane reads imports from here)
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench" / "scale.py")
scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scale)


def test_a_stage_is_measured_with_its_children(tmp_path):
    # a parent that spins in a child for about 0.6 s of CPU and writes 3 MiB
    code = (
        "import subprocess, sys, pathlib;"
        "subprocess.run([sys.executable, '-c', 'import time\\nt=time.process_time()\\n"
        "while time.process_time() - t < 0.6: pass'], check=True);"
        f"pathlib.Path({str(tmp_path / 'o')!r}).write_bytes(bytes(3 * 2**20))"
    )
    row = scale.run_stage([sys.executable, "-c", code], tmp_path / "o", tmp_path / "log.txt")
    assert row["cpu_s"] >= 0.5  # the child's CPU counts
    assert row["disk_mb"] == pytest.approx(3.0)
    assert row["peak_tree_mb"] > 1 and row["wall_s"] >= row["cpu_s"] * 0.5
    with pytest.raises(SystemExit, match="exit 3"):
        scale.run_stage(
            [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "x", tmp_path / "l"
        )


def test_a_resumed_collection_is_the_sum_of_its_parts_and_growth_is_log_log():
    base = {"seeds": 1, "workers": 2, "load1": 2.0, "peak_root_mb": 10.0}
    rows = [
        {**base, "worlds": 10, "stage": "collect", "wall_s": 10, "cpu_s": 4, "disk_mb": 1, "peak_tree_mb": 50},
        {**base, "worlds": 100, "stage": "collect", "wall_s": 30, "cpu_s": 12, "disk_mb": 4, "peak_tree_mb": 80, "partial": True},
        {**base, "worlds": 100, "stage": "collect", "wall_s": 70, "cpu_s": 28, "disk_mb": 6, "peak_tree_mb": 60},
        {**base, "worlds": 1000, "stage": "collect", "wall_s": 5, "cpu_s": 5, "disk_mb": 1, "peak_tree_mb": 60, "partial": True},
    ]  # fmt: skip
    got = {r["worlds"]: r for r in scale.combined(rows)}
    assert sorted(got) == [10, 100]  # a collection still stopped part way is not a row
    assert (got[100]["wall_s"], got[100]["cpu_s"], got[100]["disk_mb"]) == (100, 40, 10)
    assert got[100]["peak_tree_mb"] == 80 and got[100]["parts"] == 2
    exp, n, cost = scale.growth(scale.combined(rows), "collect", "cpu_s")
    assert (n, cost) == (100, 40) and exp == pytest.approx(1.0)
    text = scale.table(rows, seeds=1)
    assert "| collect | 10.0 / 4.0 / 50 / 1.0 | 100.0 / 40.0 / 80 / 10.0 | N^1.00 |" in text
    # 7000 episodes at 100 worlds: 40 / 7000 s of CPU each, x 210,000 for the full grid
    assert "7000 episodes at 100 worlds, 6 ms CPU" in text and "0.3 CPU hours" in text


def test_the_shipped_ray_comparison_recomputes_the_entry():
    # docs/results/benchmarks.md, "Ray at 100 worlds": Ray 794.7 CPU s against 692.2 locally
    # (+15%), 1097.9 s of wall against 1051.6 (+4%); the selection 101.6 CPU s at 100 worlds
    rows = scale.read_rows(ROOT / "docs/results/tables/scale-ray100/scale.jsonl")
    got = {(r["worlds"], r["stage"]): r for r in scale.combined(rows)}
    local, ray = got[(100, "collect")], got[(100, "collect_ray")]
    assert (round(local["cpu_s"], 1), round(ray["cpu_s"], 1)) == (692.2, 794.7)
    assert round(ray["cpu_s"] / local["cpu_s"], 2) == 1.15
    assert round(ray["wall_s"] / local["wall_s"], 2) == 1.04
    assert round(got[(100, "select")]["cpu_s"], 1) == 101.6
    assert {n for n, _ in got} == {10, 100} and len(got) == 16
