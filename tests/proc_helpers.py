"""Processes seen from /proc, for the tests that kill and watch them."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """The process runs (exists and is not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stopped_by_ctrl_c(task):
    """A pool task whose worker was stopped by Ctrl-C (as ``_quiet_interrupt`` does)."""
    if task == 1:
        raise SystemExit(130)
    return task
