"""Removing a tree that dataset code wrote: never recursing, never following a link, never raising.

``shutil.rmtree`` recurses once per directory level: a world that makes a directory
1,300 levels deep in its run directory (plain ``os.mkdir``/``os.chdir``) made it raise
``RecursionError`` even with ``ignore_errors=True``, which killed the collection and
left a tree that broke every later ``python -m collect`` on the machine.

:func:`remove_tree` walks the tree with one directory descriptor at a time: it descends
with ``openat(name, O_NOFOLLOW | O_DIRECTORY)``, climbs back with ``openat("..")`` and
checks each step against the ``(st_dev, st_ino)`` it recorded on the way down, so a
tree moved or swapped under it is left alone rather than followed. It never crosses
into another file system (a mount point), unlinks symlinks rather than following them,
and gives itself back write permission on directories a worker made read-only. Memory
is one name per level; the depth and the number of entries it will touch are budgets
(``max_depth``, ``max_entries``): a tree beyond them is left in place and reported
(:class:`Removal`), never an exception. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_DEPTH", "DEFAULT_MAX_ENTRIES", "Removal", "remove_tree", "tree_size"]

DEFAULT_MAX_DEPTH = 100_000
"""Deepest directory level :func:`remove_tree` descends to (one name kept per level)."""
DEFAULT_MAX_ENTRIES = 2_000_000
"""Most entries (files, links, directories, rescans) one :func:`remove_tree` touches."""

_BATCH = 4096  # subdirectory names noted per scan of one directory
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


@dataclass
class Removal:
    """What :func:`remove_tree` did. ``removed``: ``path`` no longer exists."""

    path: str
    removed: bool = False
    entries: int = 0
    depth: int = 0
    error: str | None = None

    @property
    def over_budget(self) -> bool:
        return self.error is not None and "budget" in self.error


class _Stop(Exception):
    pass


def _open_dir(name: str, dir_fd: int, dev: int) -> int:
    """A descriptor on the directory ``name`` below ``dir_fd`` (made searchable if a worker
    took the permission away); raises ``_Stop`` for a mount point."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        st = os.lstat(name, dir_fd=dir_fd)
        if not stat.S_ISDIR(st.st_mode):
            raise
        os.chmod(name, 0o700, dir_fd=dir_fd)  # a directory (checked just above), ours
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    if os.fstat(fd).st_dev != dev:
        os.close(fd)
        raise _Stop(f"{name!r} is on another file system (a mount point): not crossed")
    return fd


def remove_tree(
    path: str | os.PathLike,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> Removal:
    """Remove ``path`` and everything below it (see the module docstring); never raises.

    A missing ``path`` counts as removed. A symlink or file at ``path`` is unlinked
    (never followed)."""
    path = os.fspath(path)
    result = Removal(path)
    parent, name = os.path.split(os.path.abspath(path))
    try:
        top = os.lstat(path)
    except FileNotFoundError:
        result.removed = True
        return result
    except OSError as e:
        result.error = f"cannot stat {path}: {e}"
        return result
    if not stat.S_ISDIR(top.st_mode):
        try:
            os.unlink(path)
            result.removed, result.entries = True, 1
        except FileNotFoundError:
            result.removed = True
        except OSError as e:
            result.error = f"cannot unlink {path}: {e}"
        return result
    fds: list[int] = []
    try:
        pfd = os.open(parent or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fds.append(pfd)
        fd = _open_dir(name, pfd, top.st_dev)
        fds.append(fd)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (top.st_dev, top.st_ino):
            raise _Stop(f"{path} changed while it was being removed")
        # the directories from the top down to the current one: (name, dev, ino) and the
        # subdirectories of each still to visit (None: not scanned yet)
        stack: list[tuple[str, int, int]] = [(name, st.st_dev, st.st_ino)]
        todo: list[list[str] | None] = [None]
        while True:
            if not todo[-1]:  # scan: unlink what is not a directory, note the directories
                subs: list[str] = []
                with os.scandir(fd) as it:
                    for entry in it:
                        result.entries += 1
                        if result.entries > max_entries:
                            raise _Stop(
                                f"entry budget ({max_entries}) exceeded below {path}: left in place"
                            )
                        if entry.is_dir(follow_symlinks=False):
                            subs.append(entry.name)
                            if len(subs) >= _BATCH:
                                break
                            continue
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.name, dir_fd=fd)
                todo[-1] = subs
            if todo[-1]:
                sub = todo[-1].pop()
                if len(stack) >= max_depth:
                    raise _Stop(f"depth budget ({max_depth}) exceeded below {path}: left in place")
                try:
                    child = _open_dir(sub, fd, top.st_dev)
                except FileNotFoundError:
                    continue
                cst = os.fstat(child)
                stack.append((sub, cst.st_dev, cst.st_ino))
                todo.append(None)
                result.depth = max(result.depth, len(stack) - 1)
                os.close(fds.pop())
                fds.append(child)
                fd = child
                continue
            # this directory is empty: climb to its parent and remove it there
            done_name, done_dev, done_ino = stack.pop()
            todo.pop()
            if not stack:
                os.close(fds.pop())
                os.rmdir(done_name, dir_fd=pfd)
                result.removed = True
                return result
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            ust = os.fstat(up)
            os.close(fds.pop())
            fds.append(up)
            fd = up
            if (ust.st_dev, ust.st_ino) != stack[-1][1:]:
                raise _Stop(f"a directory below {path} was moved while it was being removed")
            here = os.lstat(done_name, dir_fd=fd)
            if (here.st_dev, here.st_ino) == (done_dev, done_ino):
                try:
                    os.rmdir(done_name, dir_fd=fd)
                except OSError as e:  # refilled meanwhile: a later scan descends again
                    if e.errno != errno.ENOTEMPTY:
                        raise
                result.entries += 1
    except _Stop as e:
        result.error = str(e)
    except OSError as e:
        result.error = f"cannot remove {path}: {e}"
    finally:
        for fd_ in fds:
            with contextlib.suppress(OSError):
                os.close(fd_)
    if not result.removed and not os.path.lexists(path):
        result.removed = True
    return result


def tree_size(
    path: str | os.PathLike, *, max_entries: int = DEFAULT_MAX_ENTRIES
) -> tuple[int, int, int]:
    """``(entries, bytes, depth)`` below ``path`` without following links or recursing
    (stops counting at ``max_entries``); ``(0, 0, 0)`` when ``path`` is missing."""
    entries = size = depth = 0
    todo: list[tuple[str, int]] = [(os.fspath(path), 0)]
    while todo and entries < max_entries:
        here, level = todo.pop()
        depth = max(depth, level)
        try:
            with os.scandir(here) as it:
                for entry in it:
                    entries += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            todo.append((entry.path, level + 1))
                        else:
                            size += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return entries, size, depth
