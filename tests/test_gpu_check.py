"""bench/gpu_check.py runs on CPU at tiny size, so that it is known to work before any
device time is spent (no GPU run has happened yet: docs/grpo.md)."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")


def test_gpu_check_on_cpu_tiny(tmp_path):
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from bench import gpu_check

    out = tmp_path / "out"
    rc = gpu_check.main(["--out", str(out), "--device", "cpu", "--tiny"])
    table = json.loads((out / "gpu_check.json").read_text())
    rows = table["rows"] if isinstance(table, dict) else table
    steps = [r["step"] for r in rows]
    assert steps == ["helper_sft", "prm_lm", "grpo_step", "dp_solve"]
    failed = {r["step"]: r for r in rows if not all(r["checks"].values())}
    assert rc == 0 and not failed, failed
    assert "graduated reward logged" in rows[2]["checks"]
