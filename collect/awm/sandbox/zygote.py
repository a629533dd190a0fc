"""Parent side of an app template: one confined worker per environment, one forked child
per episode (``sandbox.start=fork``, the default for ``env.fresh_app``).

:class:`AppZygote` starts a :class:`~.worker.Worker` with ``zygote`` set: the same
bubblewrap command, namespaces, uid, seccomp filters, cgroup and rlimits as an app
worker started for one episode, whose Python imports the web framework and then
waits (:mod:`.fork`). :meth:`AppZygote.app` returns a :class:`ForkedApp`: new pipes
(requests, responses, and the exit status its reaper writes), a log file of its own and
a run directory of its own handed to the template over its fd socket, a child forked
inside the confinement, the dataset's app loaded in the child only. The child is ended
(with every process it started and every file it wrote) before the next one is forked,
when it dies, or when its app is closed.

Run directories: the template's worker directory is a read-only tmpfs that cannot be
listed, with :data:`RUN_DIRS` empty tmpfs mounts below it under random names that only
the parent knows (:class:`TemplateWorker`). Each child gets one of them, as a
descriptor the parent opens through ``/proc/PID/root``: a file system no earlier child
wrote to (no extended attribute, inode number or file of an earlier child in it) and no
other child can reach. A template whose run directories are used up, that cannot end a
child cleanly, that ran into a cgroup limit, or that used half its CPU time is replaced
by a new one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import select
import signal
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

from collect.awm.clock import WorldClock
from collect.awm.sandbox.files import ensure_private_dir
from collect.awm.sandbox.rmtree import DEFAULT_MAX_ENTRIES, remove_tree
from collect.awm.sandbox.worker import (
    _SIGNAL_TEXT,
    EXIT_MEMORY,
    AppWorker,
    SandboxError,
    SandboxLimits,
    Worker,
    write_seed,
)
from helpdp.jsonvalue import JSON

__all__ = ["RUN_DIRS", "AppZygote", "ForkedApp", "ForkedWorker", "TemplateWorker"]

#: fresh run directories (tmpfs mounts) per template: one per child, never reused
RUN_DIRS = 128
_STATUS = struct.Struct("<i")  # the reaper's report: the child's raw wait status (fork.STATUS)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TemplateWorker(Worker):
    """The template's worker: its directory a read-only tmpfs (mode 0100: it cannot be
    listed) with ``run_dirs`` empty tmpfs mounts of ``sandbox.run_dir_mb`` below it, named
    by random tokens kept here only (the template gets each as a descriptor)."""

    def __init__(self, *args: Any, run_dirs: int, **kwargs: Any):  # passed on to Worker
        super().__init__(*args, zygote=True, **kwargs)
        self.run_dirs = [secrets.token_hex(16) for _ in range(run_dirs)]
        self._unused = list(reversed(self.run_dirs))
        self.used: str | None = None  # the last child's run directory, until it is emptied
        self.unclean = False  # a run directory could not be emptied: replace the template

    def empty_used(self) -> None:
        """Remove every file of the last child's run directory (all its processes are dead),
        from here through ``/proc/PID/root``; one that cannot be emptied marks the template
        for replacement (its memory is not given back)."""
        name, self.used = self.used, None
        if name is None:
            return
        try:
            top = self.host_path(name)
        except SandboxError:
            self.unclean = True
            return
        if not _empty(top):
            self.unclean = True

    @property
    def run_dirs_left(self) -> int:
        return len(self._unused)

    def take_run_dir(self) -> str:
        """The name of a run directory no child has had (IndexError: none left)."""
        return self._unused.pop()

    def _argv(self, config: dict, cwd: Path, env: dict, fds: dict[str, int]) -> list[str]:
        argv = super()._argv(config, cwd, env, fds)
        if not self.zygote:
            return argv
        at = argv.index("--tmpfs")
        if argv[at + 1] != str(cwd) or argv[at - 2] != "--perms":
            raise SandboxError("start_failed", f"{self.name}: unexpected bwrap command")
        argv[at - 1] = "0100"  # searchable, not listable: the names are the only way in
        size = str(int(self.limits.run_dir_mb) << 20)
        mounts = []
        for name in self.run_dirs:
            mounts += ["--size", size, "--perms", "0700", "--tmpfs", str(cwd / name)]
        mounts += ["--remount-ro", str(cwd)]  # its own tmpfs; the run directories stay writable
        first_remount = argv.index("--remount-ro")
        return argv[:first_remount] + mounts + argv[first_remount:]


class AppZygote:
    """The app template of one environment (see the module docstring); thread-safe."""

    def __init__(
        self,
        limits: SandboxLimits,
        *,
        workdir: Path,
        initial_db: Path | None,
        name: str = "app",
        clock: WorldClock | None = None,
        specs: dict[str, JSON] | None = None,
    ):
        self.limits = limits
        #: the OpenAPI document of the code's first load, shared by an environment's templates
        self.specs: dict[str, JSON] = specs if specs is not None else {}
        self.workdir = Path(workdir)
        self.initial_db = Path(initial_db) if initial_db is not None else None
        self.name = name
        self.clock = clock if clock is not None else WorldClock.real()
        self.worker: TemplateWorker | None = None
        self.starts = 0  # templates started (a replaced one counts again)
        self._children = itertools.count(1)
        self._lock = threading.RLock()  # a child's failure ends it under spawn's lock

    @property
    def alive(self) -> bool:
        return self.worker is not None and self.worker.alive

    def _ensure(self) -> Worker:
        worker = self.worker
        if worker is not None and worker.alive and worker.run_dirs_left and not worker.unclean:
            used = worker.cpu_seconds_used()
            if used is None or used <= self.limits.cpu_seconds / 2:
                return worker
        self._stop()
        ensure_private_dir(self.workdir)
        seed = write_seed(self.workdir, self.initial_db)
        worker = TemplateWorker(
            "env",
            self.limits,
            workdir=self.workdir,
            read_dirs=(seed.parent,),
            name=f"{self.name} (template)",
            clock=self.clock,
            run_dirs=RUN_DIRS,
        )
        self.worker = worker
        self.starts += 1
        worker.start()
        return worker

    def app(self) -> ForkedApp:
        """A new, unloaded app on a child of this template (:meth:`ForkedApp.load`)."""
        return ForkedApp(self)

    def spawn(self, code: str | None = None, module: str = "awm_app") -> ForkedWorker:
        """Fork a child (the previous one ended first); raises :class:`SandboxError`.

        ``code``: the app's source, compiled once by the template for its children."""
        with self._lock:
            try:
                return self._spawn(code, module)
            except SandboxError as e:
                if e.kind in ("isolation",):
                    raise
            self._stop()  # a template that failed is replaced, once
            return self._spawn(code, module)

    def _spawn(self, code: str | None, module: str) -> ForkedWorker:
        started = time.perf_counter()
        worker = self._ensure()
        run_dir = worker.take_run_dir()
        child, nonce = next(self._children), secrets.token_hex(8)
        theirs: list[int] = []  # the template's copies: closed here once handed over
        ours: list[int] = []  # ours: the ForkedWorker's, closed here on failure
        try:
            req_r, req_w = os.pipe()
            ours.append(req_w)
            theirs.append(req_r)
            for _ in range(2):  # responses, and the child's exit status from its reaper
                r, w = os.pipe()
                ours.append(r)
                theirs.append(w)
            ours.append(_child_log(self.workdir))
            theirs.append(ours[-1])
            if worker.fd_socket is None:
                raise SandboxError("closed", f"{worker.name}: worker is not running")
            try:
                theirs.append(os.open(worker.host_path(run_dir), _DIR_FLAGS))
                socket.send_fds(worker.fd_socket, [b"F"], theirs)
            except OSError as e:
                raise SandboxError("crashed", f"{worker.name}: cannot hand over pipes: {e}") from e
            payload = {"child": child, "hello": nonce, "code": code, "module": module}
            # ending the last child, compiling and preloading the app's imports is a start's
            # work: the start's timeout, not one call's (a cold import on a busy host)
            reply = worker.request("spawn", payload, timeout=self.limits.start_timeout_s)
            if not reply.get("ok"):
                raise SandboxError("start_failed", f"{worker.name}: {reply.get('message')}")
            worker.empty_used()  # the template has ended the last child: nothing writes there
            worker.used = run_dir
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs[:3] + theirs[4:]:  # the log is ours too
                os.close(fd)
        to_worker, from_worker, status, log = ours
        forked = ForkedWorker(self, child, to_worker, from_worker, status, log, run_dir)
        forked.wait_hello(nonce)
        # the template's milliseconds (end the last child, compile, fork) and the whole spawn
        forked.spawn_ms = {
            **(reply.get("ms") or {}),
            "total": (time.perf_counter() - started) * 1e3,
        }
        return forked

    def end(self, child: int, wait_s: float = 0.0) -> dict[str, JSON]:
        """End child ``child`` if it is the current one; its exit, when known."""
        with self._lock:
            worker = self.worker
            if worker is None or not worker.alive:
                return {"ok": False, "status": None}
            try:
                timeout = max(self.limits.call_timeout_s, wait_s + 5.0)
                reply = worker.request("end", {"child": child, "wait_s": wait_s}, timeout=timeout)
            except SandboxError:
                self._stop()
                return {"ok": False, "status": None}
            if not reply.get("clean", True) or worker.limit_problem() is not None:
                self._stop()  # the next child gets a new template
            return reply

    def _stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.close()

    def close(self) -> None:
        """Stop the template (and its child) and remove its directory."""
        with self._lock:
            self._stop()
            remove_tree(self.workdir)


def _empty(top: Path, batch: int = 4096) -> bool:
    """Remove everything below the run directory ``top`` (a tmpfs mount root: it stays);
    whether it is empty. Never raises; :func:`~.rmtree.remove_tree`'s entry budget in all."""
    budget = DEFAULT_MAX_ENTRIES
    try:
        os.chmod(top, 0o700)  # a mount root, which no child can rename or replace
        while budget > 0:
            with os.scandir(top) as it:
                names = [entry.name for _, entry in zip(range(batch), it)]
            if not names:
                return True
            for name in names:
                removal = remove_tree(top / name, max_entries=budget)
                budget -= max(removal.entries, 1)
                if not removal.removed:
                    return False
    except OSError:
        return False
    return False


def _child_log(workdir: Path) -> int:
    """A new file for one child's stdout and stderr (ours, unlinked at once: no other
    child wrote to it, and nothing is left behind); its descriptor."""
    path = Path(workdir) / f"child-{secrets.token_hex(8)}.log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.unlink(path)
    return fd


def _log_tail(fd: int | None, limit: int = 2000) -> str:
    """The last ``limit`` bytes of a child's log."""
    if fd is None:
        return ""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit)).decode("utf-8", "replace").strip()
    except OSError:
        return ""


class ForkedWorker(Worker):
    """The parent's end of one forked child: requests go straight to it over its own pipes."""

    def __init__(
        self,
        zygote: AppZygote,
        child: int,
        to_worker: int,
        from_worker: int,
        status: int,
        log: int,
        run_dir: str,
    ):
        super().__init__(
            "env", zygote.limits, workdir=zygote.workdir, name=zygote.name, clock=zygote.clock
        )
        self.owner = zygote
        self.child = child
        self.private_run_dir = True
        #: its run directory's name below the template's directory (one of its tmpfs mounts)
        self.run_dir = run_dir
        self._to_worker, self._from_worker = to_worker, from_worker
        self._status, self._log = status, log  # its reaper's report, its stdout and stderr
        self._host_pid: int | None = None
        self.spawn_ms: dict[str, float] = {}
        os.set_blocking(to_worker, False)
        os.set_blocking(status, False)

    def wait_hello(self, nonce: str) -> None:
        deadline = time.monotonic() + self.limits.start_timeout_s
        with self._lock:
            self._timeout = self.limits.start_timeout_s
            self.hello = self._receive(deadline, "start", nonce)
        try:
            self.clock.check(self.hello.get("clock"), self.name)
        except RuntimeError as e:
            self._kill()
            raise SandboxError("start_failed", str(e)) from None

    @property
    def alive(self) -> bool:
        """Its pipes are open and nothing is pending or hung up on them (it is idle)."""
        fd = self._from_worker
        if fd is None or not self.owner.alive:
            return False
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        return not poller.poll(0)

    @property
    def pid(self) -> int | None:
        """The child's host pid (the child of a reaper of its template whose namespace pid
        it reported)."""
        if self._host_pid is None and self.owner.worker is not None:
            self._host_pid = _host_pid(self.owner.worker._python_pid(), self.hello.get("pid"))
        return self._host_pid

    def start(self) -> dict[str, JSON]:
        raise SandboxError("closed", f"{self.name}: a forked child is started by its template")

    def _forked_running(self) -> bool:
        return self._to_worker is not None

    def host_path(self, name: str) -> Path:
        worker = self.owner.worker
        if worker is None:
            raise SandboxError("closed", f"{self.name}: worker is not running")
        return worker.host_path(self.run_dir) / os.path.basename(name)

    def limit_problem(self) -> str | None:
        worker = self.owner.worker
        return worker.limit_problem() if worker is not None else None

    def cpu_seconds_used(self) -> float | None:
        return None  # each child starts at zero under its own RLIMIT_CPU

    def _close_pipes(self) -> None:
        for fd in (self._to_worker, self._from_worker):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_worker = self._from_worker = None

    def _close_reports(self) -> None:
        for fd in (self._status, self._log):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._status = self._log = None

    def detach(self) -> None:
        """Close our ends only: the template ends the child before it forks the next."""
        self._close_pipes()
        self._close_reports()

    def _kill(self) -> None:
        self._close_pipes()
        self.owner.end(self.child)
        self._close_reports()

    def exit_status(self) -> int | None:
        """The child's raw wait status as its reaper reported it (None: not (yet) known)."""
        try:
            data = os.read(self._status, _STATUS.size) if self._status is not None else b""
        except OSError:  # BlockingIOError: the child has not exited
            return None
        return _STATUS.unpack(data)[0] if len(data) == _STATUS.size else None

    def _describe_death(self, op: str) -> SandboxError:
        self._close_pipes()
        self.owner.end(self.child, wait_s=2.0)  # its reaper has exited (or been killed)
        status = self.exit_status()
        tail = _log_tail(self._log)
        tail_txt = f"; worker log: {tail[-600:]}" if tail else ""
        if isinstance(status, int) and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            text = _SIGNAL_TEXT.get(sig, f"killed by signal {sig}")
            kind = "cpu" if sig == getattr(signal, "SIGXCPU", 24) else "crashed"
            return self._fail(kind, f"worker {text} during {op}{tail_txt}")
        code = os.WEXITSTATUS(status) if isinstance(status, int) else None
        if code == EXIT_MEMORY:
            return self._fail("memory", f"worker ran out of memory during {op}{tail_txt}")
        return self._fail("crashed", f"worker exited (code {code}) during {op}{tail_txt}")


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _host_pid(template: int | None, ns_pid: object) -> int | None:
    """The host pid of the child of a reaper of ``template`` whose pid in its namespace
    is ``ns_pid``."""
    if template is None or not isinstance(ns_pid, int):
        return None
    for child in (c for reaper in _children(template) for c in _children(int(reaper))):
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        line = next((x for x in status.splitlines() if x.startswith("NSpid:")), "")
        if line.split()[-1:] == [str(ns_pid)]:
            return int(child)
    return None


class ForkedApp(AppWorker):
    """An :class:`AppWorker` whose process is a child of an :class:`AppZygote`."""

    def __init__(self, zygote: AppZygote):
        self.limits = zygote.limits
        self.workdir = zygote.workdir
        self.zygote = zygote
        self.worker = None  # type: ignore[assignment] - set by load
        self.openapi = None
        self.db_path = None
        self.owns_workdir = False  # the template's: emptied by it, removed with it
        self._code: str | None = None
        self._module = "awm_app"
        self.specs = zygote.specs
        self.resettable = False  # its episode's own child: never reset, no snapshot
        self.load_info: dict[str, JSON] = {}

    @property
    def alive(self) -> bool:
        return self.worker is not None and self.worker.alive

    def load(self, code: str, initial_db: Path | None, *, app_name: str = "awm_app") -> dict:
        self._code, self._module = code, app_name
        openapi = super().load(code, initial_db, app_name=app_name)
        self.load_info["spawn"] = self.worker.spawn_ms
        return openapi

    def _start(self, initial_db: Path | None) -> str | None:
        self.worker = self.zygote.spawn(self._code, self._module)
        self.db_path = self.workdir / self.worker.run_dir / "work.db"
        seed = self.workdir / ".seed" / "initial.db"
        return str(seed.resolve()) if self.zygote.initial_db is not None else None

    def retire(self) -> None:
        """The episode is over: the template ends this child before it forks the next."""
        if self.worker is not None:
            self.worker.detach()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
