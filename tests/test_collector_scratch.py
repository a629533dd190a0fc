"""Private scratch space for the collector.

The collector used a predictable shared directory (``/dev/shm/helpdp-collect``): a
local user who created it first owned the databases built inside. Each worker now
makes its own ``mkdtemp`` (0700, ours); a configured ``env.work_root`` that is a
symlink, owned by another uid or world-writable is refused with one clear error; the
sweep of dead workers' leftovers touches only directories that are ours alone.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from collect.collector import collect, collect_config
from collect.scratch import SCRATCH_PREFIX as _SCRATCH_PREFIX
from collect.scratch import scratch_root, sweep_scratch
from collect.worker import _Worker

OTHER_UID = 65534  # nobody


def _cfg(tmp_path: Path, work: Path | None, *extra: str):
    return collect_config(
        [
            f"out={tmp_path / 'out'}",
            "overwrite=true",
            "schedule.scenarios=[smart_home_1]",
            "schedule.max_tasks=2",
            "schedule.probabilities=[0.0]",
            "schedule.seeds=[0]",
            "executor.workers=1",
            "progress=false",
            *([f"env.work_root={work}"] if work is not None else []),
            *extra,
        ]
    )


def _foreign_dir(tmp_path: Path) -> Path:
    """A directory owned by another uid (chown when we are root, else a system directory)."""
    if os.getuid() == 0:
        d = tmp_path / "planted"
        d.mkdir(mode=0o755)
        os.chown(d, OTHER_UID, OTHER_UID)
        return d
    return Path("/usr")


def _assert_private(d: Path, root: Path) -> None:
    st = os.lstat(d)
    assert stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode)
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert d.parent == root and d.name.startswith(f"{_SCRATCH_PREFIX}{os.getpid()}-")


@pytest.mark.parametrize("configured", [True, False], ids=["work_root", "default"])
def test_each_worker_gets_a_fresh_private_directory(tmp_path, configured):
    cfg = _cfg(tmp_path, tmp_path / "work" if configured else None)
    root = scratch_root(cfg.env.work_root)
    if not configured:  # tmpfs or /tmp itself, never a predictable shared subdirectory
        assert str(root) in ("/dev/shm", tempfile.gettempdir())
    workers = [_Worker(cfg), _Worker(cfg)]
    try:
        a, b = (w._scratch for w in workers)
        assert a != b
        for d in (a, b):
            _assert_private(d, root)
    finally:
        for w in workers:
            w.close()
    assert not a.exists() and not b.exists()


def test_root_owned_by_another_user_is_refused_and_the_next_run_works(tmp_path):
    planted = _foreign_dir(tmp_path)
    before = sorted(p.name for p in planted.iterdir())
    with pytest.raises(ValueError, match=r"env.work_root=.* is owned by uid \d+, not by us"):
        collect(_cfg(tmp_path, planted))
    assert sorted(p.name for p in planted.iterdir()) == before  # nothing built inside
    result = collect(_cfg(tmp_path, tmp_path / "mine"))
    assert result.episodes == 2
    assert list((tmp_path / "mine").iterdir()) == []  # the worker's directory is gone


def test_symlinked_or_world_writable_roots_are_refused(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(ValueError, match="is a symlink"):
        scratch_root(_cfg(tmp_path, tmp_path / "link").env.work_root)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(ValueError, match="writable by every user"):
        scratch_root(_cfg(tmp_path, open_dir).env.work_root)
    open_dir.chmod(0o1777)  # sticky, like /tmp: others cannot rename our entries
    assert scratch_root(_cfg(tmp_path, open_dir).env.work_root) == open_dir
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        scratch_root(_cfg(tmp_path, tmp_path / "file").env.work_root)
    # a missing root is created, private
    made = scratch_root(_cfg(tmp_path, tmp_path / "new" / "root").env.work_root)
    assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_only_our_dead_workers_directories(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    dead = _dead_pid()
    ours_dead = root / f"{_SCRATCH_PREFIX}{dead}-abc"
    ours_dead.mkdir()
    (ours_dead / "initial.db").write_text("stale")
    ours_alive = root / f"{_SCRATCH_PREFIX}{os.getppid()}-abc"
    ours_alive.mkdir()
    # an attacker's symlink dressed as a dead worker's directory: its target must survive
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "canary").write_text("keep me")
    (root / f"{_SCRATCH_PREFIX}{dead}-lnk").symlink_to(victim)
    legacy = root / "helpdp-collect"  # the old predictable name: never ours to remove
    legacy.mkdir()
    foreign = None
    if os.getuid() == 0:
        foreign = root / f"{_SCRATCH_PREFIX}{dead}-other"
        foreign.mkdir()
        os.chown(foreign, OTHER_UID, OTHER_UID)

    assert sweep_scratch(root) == 1
    assert not ours_dead.exists()
    assert ours_alive.is_dir() and legacy.is_dir()
    assert (victim / "canary").read_text() == "keep me"
    assert (root / f"{_SCRATCH_PREFIX}{dead}-lnk").is_symlink()
    if foreign is not None:
        assert foreign.is_dir()


def test_two_sweepers_of_one_dead_tree_leave_no_stale_copy(tmp_path, monkeypatch, capsys):
    """Workers started together sweep the same dead trees: an entry the other one
    removed vanishes under this walk. The sweep walks again, and a tree the other
    sweeper finished is neither reported nor renamed ``helpdp-stale-``."""
    import collect.scratch as scratch
    from collect.awm.sandbox.rmtree import Removal
    from collect.awm.sandbox.rmtree import remove_tree as real

    root = tmp_path / "root"
    root.mkdir()
    dead = _dead_pid()
    for name in ("raced", "finished"):
        d = root / f"{_SCRATCH_PREFIX}{dead}-{name}"
        d.mkdir()
        (d / "app.db").write_text("stale")
    calls = []

    def racing(path, **kw):
        calls.append(Path(path).name)
        if Path(path).name.endswith("finished"):
            real(path)  # the other sweeper removes it while this walk fails on it
        if calls.count(Path(path).name) == 1:
            return Removal(str(path), error="cannot remove ...: [Errno 2] No such file")
        return real(path, **kw)

    monkeypatch.setattr(scratch, "remove_tree", racing)
    assert sweep_scratch(root) == 2
    assert list(root.iterdir()) == []
    assert "could not be removed" not in capsys.readouterr().err
