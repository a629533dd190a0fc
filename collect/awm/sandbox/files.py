"""Parent-side file handling: private scratch directories and reading what workers wrote.

A worker's directory is writable by dataset code, so the parent never follows
a link there, never opens anything but a regular file, and never blocks on one
(``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``). Scratch directories are fresh
``mkdtemp`` ones (0700, ours); an existing directory we are asked to use is
refused when it is a symlink, not ours, or writable by others.
"""

from __future__ import annotations

import atexit
import os
import stat
import tempfile
from pathlib import Path

from collect.awm.sandbox.framing import copy_fd
from collect.awm.sandbox.rmtree import remove_tree

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class UnsafeDirectory(PermissionError):
    """A directory that is not ours alone."""


def private_dir_problem(st: os.stat_result, *, shared: bool = False) -> str | None:
    """Why a directory with this ``lstat`` result is not ours alone (None: it is).

    It must be a real directory (not a symlink) owned by us. By default it is one whose
    files we build and read: writable by the group or by others is refused.
    ``shared=True``: a parent in which each process makes its own private ``mkdtemp``
    (the collector's scratch root, and the workers' directories its sweep removes):
    only writable by every user without the sticky bit is refused (a sticky one, like
    /tmp, keeps others from renaming our entries); group write is not checked.
    """
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by us (uid {os.geteuid()})"
    if shared:
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            return "is writable by every user (and not sticky)"
    elif st.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
        return "is writable by other users"
    return None


def ensure_private_dir(path: Path) -> Path:
    """``path`` as a directory of ours alone: created 0700 (with missing parents), or
    an existing one checked; :class:`UnsafeDirectory` otherwise."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
    problem = private_dir_problem(os.lstat(path))
    if problem:
        raise UnsafeDirectory(
            f"{path} {problem}: refusing it as scratch space (another local user could swap "
            "the files built there); use a directory you own"
        )
    return path


def private_mkdtemp(prefix: str, parent: Path | str | None = None) -> Path:
    """A fresh ``mkdtemp`` (0700, ours), checked after creation."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=None if parent is None else str(parent)))
    problem = private_dir_problem(os.lstat(path))
    if problem:  # pragma: no cover - mkdtemp made it; only a broken system gets here
        raise UnsafeDirectory(f"{path} {problem}")
    return path


def default_work_root() -> Path:
    """A fresh private directory for worker files (tmpfs when available), removed at exit."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    path = private_mkdtemp("helpdp-awm-", base)
    atexit.register(remove_tree, path)  # if the owner forgets close(); never raises
    return path


def open_regular(path: Path, max_bytes: int | None = None) -> int:
    """A read descriptor on ``path`` if it is a regular file (no links, FIFOs, devices)."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise OSError(f"{path} is larger than {max_bytes} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd


def copy_file_nofollow(
    src: Path, dst: Path, max_bytes: int | None = 1 << 31, *, exclusive: bool = False
) -> None:
    """Copy a file written by a worker: regular files only, no links, never blocking, at
    most ``max_bytes`` (None: no bound; :func:`~collect.awm.sandbox.framing.copy_fd`). ``exclusive``:
    ``dst`` must not exist yet (``O_EXCL``) instead of being truncated."""
    fd = open_regular(src, max_bytes)
    try:
        flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
        out = os.open(dst, flags, 0o600)
        try:
            copy_fd(fd, out, max_bytes, str(src))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def read_tail(path: Path, limit: int = 2000) -> str:
    """The last ``limit`` bytes of a worker's log (empty if it is not a regular file)."""
    try:
        fd = open_regular(path)
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)
