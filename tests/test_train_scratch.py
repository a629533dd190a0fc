"""A rank's scratch directory (``python -m helpdp.train``): named
``helpdp-train-<pid>-<random>`` in the temporary directory and removed at the end of
the run; one a killed rank left (SIGKILL runs no cleanup) is removed by the next start,
and only such ones: a live process's, an unnamed one, a symlink are kept."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import helpdp.train.trainer as trainer
from helpdp.train.config import train_config

PREFIX = "helpdp-train-"


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """The temporary directory the trainer sees (``tempfile.gettempdir()``)."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _killed_rank(root: Path, make: str = "scratch_dir()") -> Path:
    """The scratch directory of a process that made it (``make``) and was SIGKILLed."""
    code = (
        "import os, signal, tempfile\n"
        "from pathlib import Path\n"
        f"tempfile.tempdir = {str(root)!r}\n"
        "from helpdp.train.trainer import *\n"
        f"d = Path({make})\n"
        "(d / 'db.sqlite').write_bytes(b'x' * 4096)\n"
        "print(d, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = Path(proc.stdout.strip())
    assert left.parent == root and (left / "db.sqlite").is_file()
    return left


def test_the_next_start_removes_a_killed_ranks_directory_only(tmp, tmp_path):
    killed = _killed_rank(tmp)
    alive = tmp / f"{PREFIX}{os.getppid()}-abc"  # another rank, still running
    alive.mkdir(mode=0o700)
    (alive / "db.sqlite").write_text("in use")
    unnamed = tmp / f"{PREFIX}k3j_x9q2"  # no pid in its name (the code before): not ours to say
    unnamed.mkdir(mode=0o700)
    victim = tmp_path / "victim"  # a symlink dressed as a dead rank's directory
    victim.mkdir()
    (victim / "canary").write_text("keep me")
    dead_pid = int(killed.name[len(PREFIX) :].split("-")[0])
    (tmp / f"{PREFIX}{dead_pid}-lnk").symlink_to(victim)
    (tmp / f"{PREFIX}{dead_pid}-file").write_text("a file")  # not a directory

    mine = trainer.scratch_dir()

    assert not killed.exists()
    assert (alive / "db.sqlite").read_text() == "in use" and unnamed.is_dir()
    assert (victim / "canary").read_text() == "keep me"
    assert (tmp / f"{PREFIX}{dead_pid}-lnk").is_symlink()
    assert (tmp / f"{PREFIX}{dead_pid}-file").read_text() == "a file"
    assert mine.parent == tmp and mine.name.startswith(f"{PREFIX}{os.getpid()}-")
    assert stat.S_IMODE(os.lstat(mine).st_mode) == 0o700
    assert sorted(p.name for p in tmp.iterdir()) == sorted(
        [alive.name, unnamed.name, f"{PREFIX}{dead_pid}-lnk", f"{PREFIX}{dead_pid}-file", mine.name]
    )


def test_train_sweeps_at_start_and_leaves_no_directory(tmp, tmp_path, monkeypatch):
    killed = _killed_rank(tmp, f"tempfile.mkdtemp(prefix=f'{PREFIX}{{os.getpid()}}-')")
    seen = []

    def build(cfg, *, work_root, **kw):
        seen.append(Path(work_root))
        assert Path(work_root).is_dir() and not killed.exists()
        raise RuntimeError("stop here")

    monkeypatch.setattr(trainer, "build_trainer", build)
    with pytest.raises(RuntimeError, match="stop here"):
        trainer.train(train_config([f"out={tmp_path / 'run'}", "progress=false"]))
    assert len(seen) == 1 and seen[0].parent == tmp
    assert seen[0].name.startswith(f"{PREFIX}{os.getpid()}-")
    assert list(tmp.iterdir()) == []
