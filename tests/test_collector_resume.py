"""Crash safety: a collection killed with SIGKILL midway resumes to the same tables as an
uninterrupted run, leaves no processes behind, and reruns only the missing shards."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from proc_helpers import alive

TABLES = ("states", "transitions", "episodes", "steps")
ARGS = [
    "schedule.max_tasks=4",
    "schedule.seeds=[0]",
    "executor.shard_size=3",
    "executor.workers=2",
    "progress=false",
]


def _command(out: Path, work: Path) -> list[str]:
    return [sys.executable, "-m", "collect", f"out={out}", f"env.work_root={work}", *ARGS]


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def test_sigkill_midway_then_resume_gives_identical_tables(tmp_path):
    full, crashed, work = tmp_path / "full", tmp_path / "crashed", tmp_path / "work"
    r = subprocess.run(_command(full, work), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    total = int(re.search(r"(\d+)/(\d+) shards run", r.stdout).group(2))
    assert total == 28  # 3 worlds x 4 tasks x 7 probabilities / 3 per shard

    proc = subprocess.Popen(
        _command(crashed, work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    shards = crashed / "shards"
    deadline = time.monotonic() + 120
    family: set[int] = set()
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        family |= _descendants(proc.pid)
        done = len([p for p in shards.glob("0*") if p.is_dir()]) if shards.exists() else 0
        if done >= 4:
            break
        time.sleep(0.02)
    family |= _descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 4 <= done < total, f"not killed midway: {done}/{total} shards"
    assert not (crashed / "manifest.json").exists()
    # the pool workers and their sandboxes go away with the killed run
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(p) for p in family):
        time.sleep(0.2)
    assert not [p for p in family if alive(p)]

    r = subprocess.run(_command(crashed, work), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ran = int(re.search(r"(\d+)/(\d+) shards run", r.stdout).group(1))
    assert ran <= total - 4
    assert not list(shards.glob(".tmp-*"))
    for name in TABLES:
        assert (crashed / f"{name}.parquet").read_bytes() == (
            full / f"{name}.parquet"
        ).read_bytes(), name


def test_the_fingerprint_names_the_shipped_worlds_as_shards_first_recorded_them(tmp_path):
    """Shards written before the package moved under helpdp/ resume: the manifest says
    the new label, the shards' fingerprint keeps the first one; any other worlds
    directory enters as its path."""
    from collect.collector import collect_config
    from collect.config import source_config
    from collect.plan import fingerprint_config
    from collect.worlds import SHIPPED_LABEL, is_shipped_label

    cfg = collect_config([f"out={tmp_path / 'out'}"])
    assert source_config(cfg)["worlds"] == SHIPPED_LABEL
    assert fingerprint_config(cfg)["worlds"] == "collect/worlds (shipped demo worlds)"
    assert is_shipped_label("collect/worlds (shipped demo worlds)") and not is_shipped_label(None)
    other = collect_config([f"out={tmp_path / 'out'}", f"worlds={tmp_path}"])
    assert fingerprint_config(other)["worlds"] == str(tmp_path)


def test_an_option_added_later_at_its_old_behaviour_leaves_the_fingerprint_as_before(tmp_path):
    """env.tool_order and env.verify_semantics came after shards were written (the real
    pilot's among them): at the value that is the old behaviour they are not part of the
    fingerprint, so those plans resume; another value is (the shards would differ)."""
    from collect.collector import collect_config
    from collect.config import LATER_ENV_OPTIONS, source_config
    from collect.plan import fingerprint_config

    cfg = collect_config([f"out={tmp_path / 'out'}"])
    for d in (fingerprint_config(cfg), source_config(cfg)):  # shards and manifest alike
        assert not set(LATER_ENV_OPTIONS) & set(d["env"])
    for key, other in (("tool_order", "document"), ("verify_semantics", "official")):
        cfg = collect_config([f"out={tmp_path / 'out'}", f"env.{key}={other}"])
        assert fingerprint_config(cfg)["env"][key] == other
        assert source_config(cfg)["env"][key] == other
