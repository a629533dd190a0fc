"""The collector's scratch space: each worker process builds its databases in a private
directory of its own (``helpdp-collect-<pid>-<random>``, a fresh ``mkdtemp``) under a
scratch root, and removes the directories of dead workers it finds there.

Only ``env.work_root`` of the collection's config matters here. Another owner of
scratch directories (``python -m helpdp.train``: ``helpdp-train-<pid>-<random>``) names
its own prefix, so that each sweep removes only what its own kind of process wrote.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from collect.awm.sandbox.files import private_dir_problem
from collect.awm.sandbox.rmtree import remove_tree

__all__ = ["SCRATCH_PREFIX", "STALE_PREFIX", "make_scratch_dir", "scratch_root", "sweep_scratch"]

#: name prefix of a worker's private scratch directory: ``helpdp-collect-<pid>-<random>``
SCRATCH_PREFIX = "helpdp-collect-"

#: a dead worker's directory that could not be removed is renamed with this prefix
#: (reported once, then skipped by every later sweep)
STALE_PREFIX = "helpdp-stale-"


def scratch_root(work_root: str | None) -> Path:
    """The parent of the workers' private scratch directories: ``work_root`` (the
    config's ``env.work_root``; created if missing; refused if it is a symlink, owned by
    another uid or world-writable), else tmpfs or /tmp (system directories, where each
    worker makes its own ``mkdtemp``)."""
    if not work_root:
        shm = Path("/dev/shm")
        return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    root = Path(work_root)
    with contextlib.suppress(FileExistsError):
        root.mkdir(parents=True, mode=0o700)
    problem = private_dir_problem(os.lstat(root), shared=True)
    if problem:
        raise ValueError(
            f"env.work_root={root} {problem}: refusing it as scratch space (another local "
            "user could swap the databases built there); use a directory you own"
        )
    return root


def make_scratch_dir(root: Path, prefix: str = SCRATCH_PREFIX) -> Path:
    """This process's fresh private directory under ``root`` (0700, ours, a new name:
    nobody else can plant or swap databases there), ``<prefix><pid>-<random>``."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_scratch(root: Path, prefix: str = SCRATCH_PREFIX) -> int:
    """Remove the scratch directories of dead workers under ``root`` (killed runs, Ray
    workers stopped without cleanup): those :func:`make_scratch_dir` named with
    ``prefix`` whose process is gone; returns how many were removed. Only directories
    that are ours alone are touched (never a symlink or another user's entry). Never
    raises: removal cannot recurse (:func:`~collect.awm.sandbox.rmtree.remove_tree`),
    and a tree it cannot remove (beyond its budgets, a mount point) is renamed
    ``helpdp-stale-...``, reported once on stderr, and skipped from then on."""
    removed = 0
    try:
        entries = list(root.glob(f"{prefix}*-*")) if root.is_dir() else []
    except OSError:
        return 0
    for d in entries:
        try:
            pid = int(d.name[len(prefix) :].split("-")[0])
            if private_dir_problem(os.lstat(d), shared=True):
                continue
        except (ValueError, OSError):
            continue
        if pid == os.getpid() or _pid_alive(pid):
            continue
        gone = remove_tree(d)
        if not gone.removed:
            # workers started together sweep the same dead trees: entries the other one
            # removed vanish under this walk (ENOENT); the second walk finds what is left
            gone = remove_tree(d)
        if gone.removed:
            removed += 1
            continue
        if not os.path.lexists(d):
            continue  # another sweeper finished it (or renamed it stale)
        stale = d.with_name(STALE_PREFIX + d.name)
        with contextlib.suppress(OSError):
            os.rename(d, stale)
        print(
            f"helpdp: warning: a dead process's scratch directory could not be removed "
            f"({gone.error}); left as {stale if stale.exists() else d}, skipped from now on",
            file=sys.stderr,
        )
    return removed
