"""Totals per worker: a cgroup (pids and memory, tmpfs included) where one can be had.

rlimits bound one process at a time; a fork bomb of 400 processes, each under its
RLIMIT_AS, still took 4 GB of the host. So each confined worker (``isolation=os``)
is started inside a cgroup of its own when this machine lets us make one:

* **cgroup v2** where our own cgroup is delegated to us (writable, with ``pids`` and
  ``memory`` in its ``cgroup.subtree_control``): ``pids.max``, ``memory.max`` (page
  cache and the worker's tmpfs run directory count), ``memory.swap.max`` 0;
* **cgroup v1** where the ``pids`` and ``memory`` hierarchies are writable (root in a
  container): ``pids.max``, ``memory.limit_in_bytes``;
* otherwise **no cgroup**, said once on stderr: the worker's process count is
  ``RLIMIT_NPROC`` inside its user namespace (not enforced when the host uid is 0:
  the kernel exempts root), and its files live on a size-limited tmpfs
  (``bwrap --size``). The manifest records which of these ran (:func:`describe`).

The process that becomes the worker joins the cgroup *before* it execs bubblewrap
(``sh -c 'echo $$ > cgroup.procs; exec bwrap ...'``), so nothing it starts escapes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import signal
import sys
import time
import uuid
from pathlib import Path

__all__ = ["WorkerCgroup", "backend", "describe", "sweep_stale"]

_ROOT = Path("/sys/fs/cgroup")
_NOTED: set[str] = set()


def _own_paths() -> dict[str, str]:
    """``{controller or "": path}`` of this process (``/proc/self/cgroup``)."""
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _writable(d: Path) -> bool:
    return d.is_dir() and os.access(d, os.W_OK | os.X_OK)


@functools.lru_cache(maxsize=1)
def backend() -> tuple[str, dict[str, Path], str]:
    """``(kind, {controller: parent dir}, why)``: kind ``v2``, ``v1`` or ``none``."""
    own = _own_paths()
    if (_ROOT / "cgroup.controllers").is_file() and "" in own:
        base = _ROOT / own[""].lstrip("/")
        try:
            sub = (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            sub = []
        if _writable(base) and {"pids", "memory"} <= set(sub):
            return "v2", {"": base}, "delegated cgroup v2"
        why = "cgroup v2 is not delegated to this user (no writable cgroup with pids+memory)"
    elif (_ROOT / "pids" / "tasks").exists() and (_ROOT / "memory" / "tasks").exists():
        dirs = {c: _ROOT / c / own.get(c, "/").lstrip("/") for c in ("pids", "memory")}
        if all(_writable(d) for d in dirs.values()):
            return "v1", dirs, "cgroup v1 pids and memory hierarchies"
        why = "the cgroup v1 pids/memory hierarchies are not writable by this user"
    else:
        why = "no cgroup file system with pids and memory controllers"
    return "none", {}, why


def note_once(who: str) -> None:
    """Say once per process that per-worker totals fall back to rlimits."""
    kind, _, why = backend()
    if kind != "none" or "none" in _NOTED:
        return
    _NOTED.add("none")
    root = os.geteuid() == 0
    print(
        f"{who}: note: no cgroup for sandbox workers ({why}); per-worker totals fall back to "
        "RLIMIT_NPROC in the worker's user namespace"
        + (" (not enforced: the host uid is 0)" if root else "")
        + " and a size-limited tmpfs run directory",
        file=sys.stderr,
    )


def describe(max_processes: int, memory_mb: int, run_dir_mb: int) -> dict[str, object]:
    """What bounds a worker's totals, for the manifest (``source.isolation.limits``)."""
    kind, _, why = backend()
    out: dict[str, object] = {
        "run_dir": f"tmpfs {run_dir_mb} MiB",
        "per_process": ["RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE"],
    }
    if kind == "none":
        nproc = "RLIMIT_NPROC" + (" (not enforced for host uid 0)" if os.geteuid() == 0 else "")
        out.update(cgroup=None, processes=f"{nproc} {max_processes}", note=why)
    else:
        out.update(cgroup=kind, processes=f"pids.max {max_processes}")
        out["memory"] = f"{memory_mb + run_dir_mb} MiB incl. tmpfs"
    return out


def sweep_stale() -> int:
    """Remove the cgroups of workers whose owning process is gone (killed runs leave them:
    an emptied cgroup is not removed by the kernel). Only empty ``helpdp-<pid>-*`` ones of
    dead pids are touched; returns how many were removed. Never raises."""
    removed = 0
    for parent in backend()[1].values():
        try:
            entries = list(parent.glob("helpdp-*-*"))
        except OSError:
            continue
        for d in entries:
            try:
                pid = int(d.name.split("-")[1])
            except (IndexError, ValueError):
                continue
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, 0)
                continue  # its owner is alive
            except ProcessLookupError:
                pass
            except OSError:
                continue
            with contextlib.suppress(OSError):
                d.rmdir()  # fails (EBUSY) while a process is still in it
                removed += 1
    return removed


class WorkerCgroup:
    """One worker's cgroup: made with its limits, joined before exec, killed and removed."""

    def __init__(self, name: str, *, max_processes: int, memory_bytes: int):
        self.kind, parents, _ = backend()
        self.max_processes = int(max_processes)
        self.memory_bytes = int(memory_bytes)
        self.dirs: list[Path] = []
        if self.kind == "none":
            return
        if "swept" not in _NOTED:  # once per process: what killed runs left behind
            _NOTED.add("swept")
            sweep_stale()
        leaf = f"helpdp-{os.getpid()}-{name}-{uuid.uuid4().hex[:8]}"
        try:
            for controller, parent in parents.items():
                d = parent / leaf
                d.mkdir(mode=0o755)
                self.dirs.append(d)
                self._configure(controller, d)
        except OSError:
            self.close()
            raise

    def _configure(self, controller: str, d: Path) -> None:
        def put(name: str, value: object, optional: bool = False) -> None:
            try:
                (d / name).write_text(str(value))
            except OSError:
                if not optional:  # a limit we cannot set is no limit: refuse the cgroup
                    raise

        if self.kind == "v2":
            put("pids.max", self.max_processes)
            put("memory.max", self.memory_bytes)
            put("memory.swap.max", 0, optional=True)  # absent without swap accounting
        elif controller == "pids":
            put("pids.max", self.max_processes)
        elif controller == "memory":
            put("memory.limit_in_bytes", self.memory_bytes)
            put("memory.memsw.limit_in_bytes", self.memory_bytes, optional=True)

    @property
    def active(self) -> bool:
        return bool(self.dirs)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into this cgroup."""
        if not self.dirs:
            return argv
        joins = "; ".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in self.dirs)
        return ["/bin/sh", "-c", f'{joins} || exit 125; exec "$@"', "sh", *argv]

    def _read(self, name: str) -> str:
        for d in self.dirs:
            with contextlib.suppress(OSError):
                return (d / name).read_text()
        return ""

    def events(self) -> dict[str, int]:
        """Limit hits so far: ``{"pids": n, "memory": n}``."""
        out = {"pids": 0, "memory": 0}
        for line in self._read("pids.events").splitlines():
            key, _, value = line.partition(" ")
            if key == "max" and value.strip().isdigit():
                out["pids"] = int(value)
        if self.kind == "v2":
            for line in self._read("memory.events").splitlines():
                key, _, value = line.partition(" ")
                if key in ("oom_kill",) and value.strip().isdigit():
                    out["memory"] = int(value)
        else:
            failcnt = self._read("memory.failcnt").strip()
            out["memory"] = int(failcnt) if failcnt.isdigit() else 0
        return out

    def problem(self) -> str | None:
        """A named limit this worker ran into, or None."""
        ev = self.events() if self.dirs else {"pids": 0, "memory": 0}
        if ev["pids"]:
            return f"process limit reached (cgroup pids.max {self.max_processes})"
        if ev["memory"] and self.kind == "v2":
            return f"memory limit reached (cgroup memory {self.memory_bytes >> 20} MiB incl. tmpfs)"
        return None

    def close(self) -> None:
        """Kill everything left in the cgroup and remove it."""
        dirs, self.dirs = self.dirs, []
        for d in dirs:
            if (d / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (d / "cgroup.kill").write_text("1")
            for _ in range(50):
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    pids = []
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.01)
            with contextlib.suppress(OSError):
                d.rmdir()
