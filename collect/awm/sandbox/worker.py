"""Parent side of one worker process: start it confined, talk to it, kill it."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from collect.awm.clock import WorldClock
from collect.awm.sandbox import confine, framing
from collect.awm.sandbox.files import copy_file_nofollow, ensure_private_dir, read_tail
from collect.awm.sandbox.limits import WorkerCgroup, note_once
from helpdp.jsonvalue import JSON

ISOLATION_MODES = ("os", "python")
START_MODES = ("fork", "exec")
EXIT_MEMORY = 3
_SIGNAL_TEXT = {
    getattr(signal, "SIGXCPU", 24): "CPU time limit exceeded (RLIMIT_CPU)",
    getattr(signal, "SIGXFSZ", 25): "file size limit exceeded (RLIMIT_FSIZE)",
    signal.SIGKILL: "killed (SIGKILL)",
    signal.SIGSEGV: "crashed (segmentation fault)",
    signal.SIGABRT: "aborted",
}


@dataclass
class SandboxLimits:
    """Limits of one worker process (all enforced outside the dataset code)."""

    memory_mb: int = field(
        default=2048, metadata={"help": "RLIMIT_AS of a worker, MiB (address space)"}
    )
    cpu_seconds: int = field(
        default=3600,
        metadata={"help": "RLIMIT_CPU over a worker's lifetime, s; workers past half are recycled"},
    )
    call_timeout_s: float = field(
        default=10.0, metadata={"help": "wall-clock limit of one request (tool call, verifier), s"}
    )
    start_timeout_s: float = field(
        default=60.0, metadata={"help": "wall-clock limit to start a worker and load its code, s"}
    )
    file_size_mb: int = field(
        default=512, metadata={"help": "RLIMIT_FSIZE: largest file a worker may write, MiB"}
    )
    max_open_files: int = field(default=256, metadata={"help": "RLIMIT_NOFILE of a worker"})
    isolate_network: bool = field(
        default=True,
        metadata={"help": "isolation=python: try unshare(CLONE_NEWNET) (os: always a new netns)"},
    )
    max_response_chars: int = field(
        default=200_000, metadata={"help": "longest response body a worker returns, characters"}
    )
    isolation: str = field(
        default="os",
        metadata={
            "help": "os: bubblewrap namespaces + seccomp around every worker (refused when "
            "unavailable); python: only the Python-level guards (no security boundary)"
        },
    )
    build_timeout_s: float = field(
        default=60.0, metadata={"help": "wall-clock limit of building a scenario's database, s"}
    )
    build_file_mb: int = field(
        default=256, metadata={"help": "largest database file the seed data may build, MiB"}
    )
    build_value_mb: int = field(
        default=16, metadata={"help": "largest single value (string/blob) in seed data, MiB"}
    )
    run_dir_mb: int = field(
        default=512,
        metadata={
            "help": "isolation=os: an app worker's run directory is a private tmpfs of this "
            "size, MiB (gone with the worker; counts in its cgroup's memory where there is one)"
        },
    )
    max_processes: int = field(
        default=128,
        metadata={
            "help": "isolation=os: processes and threads of one worker together (cgroup "
            "pids.max; without a cgroup, RLIMIT_NPROC in its user namespace)"
        },
    )
    start: str = field(
        default="fork",
        metadata={
            "help": "how env.fresh_app starts an episode's app (isolation=os): fork: a child "
            "of the environment's confined template process, which imported the framework "
            "and never ran dataset code (killed with its processes and files after the "
            "episode); exec: a new bubblewrap and Python per episode (isolation=python: exec)"
        },
    )


class SandboxError(RuntimeError):
    """A worker timed out, crashed, ran out of a resource or broke the protocol.

    ``kind`` is one of ``timeout``, ``memory``, ``cpu``, ``crashed``, ``protocol``,
    ``start_failed``, ``isolation``, ``closed``, ``limit`` (a total of the worker: its
    cgroup's process or memory limit), ``run_dir_full`` (its tmpfs run directory is full;
    the worker lives on) (or, from loading code, ``load_error``/``syntax_error``). The
    worker is dead when this is raised, except for ``run_dir_full``.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __reduce__(self):  # crosses process pools intact (the default passes args only)
        return (type(self), (self.kind, self.message))


def check_isolation(limits: SandboxLimits) -> str:
    """The isolation a worker with ``limits`` gets; raises :class:`SandboxError`
    (``isolation``) rather than running dataset code with less than was asked for."""
    mode = limits.isolation
    if mode not in ISOLATION_MODES:
        raise SandboxError("isolation", f"sandbox.isolation={mode!r}: expected os or python")
    if limits.start not in START_MODES:
        raise SandboxError("isolation", f"sandbox.start={limits.start!r}: expected fork or exec")
    if mode == "os":
        try:
            confine.probe()
        except confine.IsolationUnavailable as e:
            raise SandboxError("isolation", str(e)) from None
    return mode


def _clean_env(home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MALLOC_ARENA_MAX": "2",
        "PYTHONHASHSEED": "0",
    }


# bwrap --die-with-parent ties a sandbox to the *thread* that started it (PDEATHSIG), so
# every worker is spawned from this one long-lived thread.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawn")


class Worker:
    """One sandboxed worker process; thread-safe, one request at a time.

    ``role`` is ``"env"`` (hosts an app), ``"verifier"`` (a fork server for verifier
    runs) or ``"build"`` (builds a database). Reads are allowed under ``read_dirs``
    and the worker's own directory, writes under ``write_dirs`` (``env``/``build``:
    its directory) only; with ``isolation=os`` nothing else exists in its view.
    """

    def __init__(
        self,
        role: str,
        limits: SandboxLimits | None = None,
        *,
        workdir: Path,
        read_dirs: tuple[Path, ...] = (),
        write_dirs: tuple[Path, ...] | None = None,
        name: str = "",
        clock: WorldClock | None = None,
        zygote: bool = False,
    ):
        if role not in ("env", "verifier", "build"):
            raise ValueError(f"unknown worker role {role!r}")
        self.role = role
        self.clock = clock if clock is not None else WorldClock.real()
        self.limits = limits or SandboxLimits()
        self.workdir = Path(workdir)
        self.read_dirs = tuple(Path(p) for p in read_dirs)
        self.write_dirs = (
            tuple(Path(p) for p in write_dirs)
            if write_dirs is not None
            else ((self.workdir,) if role in ("env", "build") else ())
        )
        self.name = name or role
        self.hello: dict[str, JSON] = {}
        self.requests = 0
        self.isolation = self.limits.isolation
        # isolation=os: an app's run directory is a tmpfs in its own mount namespace (its
        # size bounded, gone with the worker); the parent reaches it through /proc/PID/root
        self.private_run_dir = role == "env" and self.isolation == "os"
        self.cgroup: WorkerCgroup | None = None
        self._init_pid: int | None = None
        self._proc: subprocess.Popen | None = None
        self._to_worker: int | None = None
        self._from_worker: int | None = None
        self._info_fd: int | None = None
        self._init_pidfd: int | None = None
        self._child_pid: int | None = None
        self._lock = threading.Lock()
        self._timeout = self.limits.call_timeout_s
        #: an app template (:mod:`.zygote`): forks one child per episode, never runs
        #: dataset code; ``fd_socket`` hands it each child's pipes (SCM_RIGHTS)
        self.zygote = zygote and role == "env" and self.isolation == "os"
        self.fd_socket: socket.socket | None = None

    # -- lifecycle ---------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _config(self, req_r: int, resp_w: int, cwd: Path, nonce: str) -> dict[str, JSON]:
        return {
            "role": self.role,
            "fd_in": req_r,
            "fd_out": resp_w,
            "nonce": nonce,
            "workdir": str(cwd),
            "read_dirs": [str(p.resolve()) for p in self.read_dirs],
            "write_dirs": [str(p.resolve()) for p in self.write_dirs],
            "memory_bytes": int(self.limits.memory_mb) * 1024 * 1024,
            "cpu_seconds": int(self.limits.cpu_seconds),
            "fsize_bytes": int(
                self.limits.build_file_mb if self.role == "build" else self.limits.file_size_mb
            )
            * 1024
            * 1024,
            "nofile": int(self.limits.max_open_files),
            "isolate_network": bool(self.limits.isolate_network),
            "max_response_chars": int(self.limits.max_response_chars),
            "run_dir_mb": int(self.limits.run_dir_mb) if self.private_run_dir else None,
            "isolation": self.isolation,
            # RLIMIT_NPROC counts per user namespace: only with isolation=os is it this worker's
            **({"nproc": int(self.limits.max_processes)} if self.isolation == "os" else {}),
            "pidns": self.isolation == "os",
            "netns": self.isolation == "os",
            "database_py": str(confine.DATABASE_PY),
            "zygote": self.zygote,
        }

    def _argv(self, config: dict, cwd: Path, env: dict, fds: dict[str, int]) -> list[str]:
        python = [sys.executable, "-I", "-B", str(confine.CHILD), json.dumps(config)]
        if self.isolation != "os":
            return python
        tmpfs = ((cwd, int(self.limits.run_dir_mb) << 20),) if self.private_run_dir else ()
        argv = confine.bwrap_command(
            workdir=cwd,
            rw_dirs=tuple(p.resolve() for p in self.write_dirs if p.resolve() != cwd or not tmpfs),
            ro_dirs=tuple(p.resolve() for p in self.read_dirs),
            env=env,
            seccomp_fd=fds["seccomp"],
            info_fd=fds["info"],
            command=python,
            tmpfs_dirs=tmpfs,
        )
        return self.cgroup.wrap(argv) if self.cgroup is not None else argv

    def host_path(self, name: str) -> Path:
        """Where the parent finds the file ``name`` of the worker's run directory (through
        ``/proc/PID/root`` when the directory is the worker's private tmpfs). Read it only
        with :func:`~collect.awm.sandbox.files.copy_file_nofollow` or ``open_regular``."""
        name = os.path.basename(name)
        if self.private_run_dir:
            if self._init_pid is None:
                raise SandboxError("closed", f"{self.name}: worker is not running")
            return Path(f"/proc/{self._init_pid}/root{self.workdir.resolve()}") / name
        return self.workdir / name

    def limit_problem(self) -> str | None:
        """A per-worker total (cgroup) this worker ran into, or None."""
        return self.cgroup.problem() if self.cgroup is not None else None

    def start(self) -> dict[str, JSON]:
        """Start the process and wait for its hello (sandbox status)."""
        check_isolation(self.limits)
        ensure_private_dir(self.workdir)
        cwd = self.read_dirs[0] if self.role == "verifier" and self.read_dirs else self.workdir
        cwd = cwd.resolve()
        nonce = secrets.token_hex(8)
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        fds = {"req_r": req_r, "resp_w": resp_w}
        parent_fds = [req_w, resp_r]
        if self.isolation == "os":
            seccomp_r, seccomp_w = os.pipe()
            os.write(seccomp_w, confine.seccomp_filters()[0])
            os.close(seccomp_w)
            info_r, info_w = os.pipe()
            fds.update(seccomp=seccomp_r, info=info_w)
            parent_fds.append(info_r)
        if self.zygote:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self.fd_socket = ours
            fds["fd_pass"] = theirs.detach()
        config = self._config(req_r, resp_w, cwd, nonce)
        if self.zygote:
            config["fd_pass"] = fds["fd_pass"]
        if self.isolation == "os":
            config["seccomp_exec"] = confine.seccomp_filters()[1].hex()
        env = {**_clean_env(str(cwd)), **self.clock.worker_env()}
        if self.isolation == "os":  # totals per worker: a cgroup where we can make one
            note_once("sandbox")
            try:
                self.cgroup = WorkerCgroup(
                    self.role,
                    max_processes=self.limits.max_processes,
                    memory_bytes=(self.limits.memory_mb + self.limits.run_dir_mb) << 20,
                )
            except OSError as e:
                for fd in (*fds.values(), *parent_fds):
                    os.close(fd)
                raise SandboxError(
                    "start_failed", f"{self.name}: cannot make its cgroup: {e}"
                ) from None
        log = os.open(
            self.workdir / "worker.log",
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
            0o600,
        )
        try:
            self._proc = _SPAWNER.submit(
                subprocess.Popen,
                self._argv(config, cwd, env, fds),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=tuple(fds.values()),
                cwd=str(cwd),
                # bwrap itself runs on the real clock: --setenv puts the worker on the world
                # clock, and a bwrap preloading libfaketime left /dev/shm/faketime_shm_<pid>
                # behind every time it was killed
                env=_clean_env(str(cwd)) if self.isolation == "os" else env,
                start_new_session=True,
                close_fds=True,
            ).result()
        except OSError as e:
            for fd in (*fds.values(), *parent_fds):
                os.close(fd)
            raise SandboxError("start_failed", f"{self.name}: cannot start worker: {e}") from e
        finally:
            os.close(log)
        for fd in fds.values():
            os.close(fd)
        self._to_worker, self._from_worker = req_w, resp_r
        self._info_fd = parent_fds[2] if len(parent_fds) > 2 else None
        os.set_blocking(req_w, False)
        deadline = time.monotonic() + self.limits.start_timeout_s
        with self._lock:
            self._timeout = self.limits.start_timeout_s
            self.hello = self._receive(deadline, "start", nonce)
        if not self.hello.get("ok"):
            msg = self.hello.get("message", "worker failed to start")
            self._kill()
            raise SandboxError("start_failed", f"{self.name}: {msg}")
        self._read_info()
        try:
            self.clock.check(self.hello.get("clock"), self.name)
        except RuntimeError as e:
            self._kill()
            raise SandboxError("start_failed", str(e)) from None
        return self.hello

    def _read_info(self) -> None:
        """bwrap's ``--info-fd``: the host pid of the sandbox's PID namespace init."""
        fd, self._info_fd = self._info_fd, None
        if fd is None:
            return
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            data = os.read(fd, 4096) if poller.poll(2000) else b""
            pid = int(json.loads(data or b"{}").get("child-pid") or 0)
            if pid and self.alive:
                self._init_pidfd = os.pidfd_open(pid)
                self._init_pid = pid
        except (OSError, ValueError):
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        """Stop the worker (kill its PID namespace, or its process group)."""
        self._kill()

    def kill(self) -> None:
        """SIGKILL the worker and everything it started, now."""
        self._kill()

    def _kill(self) -> None:
        proc = self._proc
        for fd in (self._to_worker, self._from_worker, self._info_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_worker = self._from_worker = self._info_fd = None
        sock, self.fd_socket = self.fd_socket, None
        if sock is not None:
            sock.close()
        pidfd, self._init_pidfd = self._init_pidfd, None
        if pidfd is not None:  # the namespace's init: its death takes every process in it
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
        self._init_pid = None
        if proc is None:
            self._close_cgroup()
            return
        if pidfd is not None:
            with contextlib.suppress(Exception):
                proc.wait(timeout=2)
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        self._close_cgroup()
        if self.isolation == "python" and self.clock.is_fixed and proc.poll() is not None:
            _remove_faketime_segments(proc.pid)

    def _close_cgroup(self) -> None:
        cgroup, self.cgroup = self.cgroup, None
        if cgroup is not None:
            cgroup.close()

    def cpu_seconds_used(self) -> float | None:
        """User+system CPU time of the worker's Python so far (Linux /proc), or None."""
        if not self.alive:
            return None
        pid = self._python_pid()
        if pid is None:
            return None
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def _python_pid(self) -> int | None:
        if self.isolation != "os":
            return self.pid
        if self._child_pid is None and self.pid is not None:
            self._child_pid = _descendant_python(self.pid)
        return self._child_pid

    # -- requests ----------------------------------------------------------
    def request(
        self, op: str, payload: dict[str, JSON] | None = None, timeout: float | None = None
    ):
        """Send one request and wait for its reply (a dict with ``ok``).

        Raises :class:`SandboxError` (and kills the worker) on a timeout, a crash,
        a fatal error reported by the worker (memory), or a protocol violation (a
        reply that does not decode, is too large, or does not echo the request's nonce).
        """
        timeout = self.limits.call_timeout_s if timeout is None else timeout
        with self._lock:
            if self._proc is None or self._to_worker is None:
                if not self._forked_running():
                    raise SandboxError("closed", f"{self.name}: worker is not running")
            elif self._proc.poll() is not None:
                raise self._describe_death(op)
            deadline = time.monotonic() + timeout
            self._timeout = timeout
            nonce = secrets.token_hex(8)
            self._send(framing.encode({"op": op, "nonce": nonce, **(payload or {})}), deadline, op)
            reply = self._receive(deadline, op, nonce)
            self.requests += 1
            problem = self.limit_problem()
            if problem is not None:
                raise self._fail("limit", f"{problem} during {op}; worker killed")
            if reply.get("fatal"):
                kind = reply.get("error", "crashed")
                text = reply.get("message", "fatal error")
                self._kill()
                raise SandboxError(kind, f"{self.name}: {text}")
            return reply

    def _forked_running(self) -> bool:
        """A forked child (:class:`~.zygote.ForkedWorker`) that still has its pipes."""
        return False

    def _fail(self, kind: str, message: str) -> SandboxError:
        problem = self.limit_problem() if kind != "limit" else None
        if problem is not None:  # the real cause: a total of the worker, by name
            kind, message = "limit", f"{problem} ({message})"
        self._kill()
        return SandboxError(kind, f"{self.name}: {message}")

    def _describe_death(self, op: str) -> SandboxError:
        proc = self._proc
        code = None
        if proc is not None:
            with contextlib.suppress(Exception):
                code = proc.wait(timeout=2)
        if self.isolation == "os" and code is not None and code > 128:
            code = -(code - 128)  # bwrap reports a child killed by signal N as 128 + N
        tail = read_tail(self.workdir / "worker.log")
        tail_txt = f"; worker log: {tail[-600:]}" if tail else ""
        if code is not None and code < 0:
            sig = -code
            text = _SIGNAL_TEXT.get(sig, f"killed by signal {sig}")
            kind = "cpu" if sig == getattr(signal, "SIGXCPU", 24) else "crashed"
            return self._fail(kind, f"worker {text} during {op}{tail_txt}")
        if code == EXIT_MEMORY:
            return self._fail("memory", f"worker ran out of memory during {op}{tail_txt}")
        return self._fail("crashed", f"worker exited (code {code}) during {op}{tail_txt}")

    def _send(self, data: bytes, deadline: float, op: str) -> None:
        fd = self._to_worker
        view = memoryview(data)
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail("timeout", f"timed out sending {op} request")
            if not poller.poll(max(1, int(remaining * 1000))):
                continue
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                raise self._describe_death(op) from None
            view = view[n:]

    def _read_exact(self, n: int, deadline: float, op: str) -> bytes:
        fd = self._from_worker
        chunks = []
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(
                    "timeout",
                    f"timed out after {self._timeout:g} s during {op} (wall-clock limit); worker killed",
                )
            if not poller.poll(max(1, int(remaining * 1000))):
                continue
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise self._describe_death(op)
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _receive(self, deadline: float, op: str, nonce: str) -> dict[str, JSON]:
        (size,) = framing.HEADER.unpack(self._read_exact(framing.HEADER.size, deadline, op))
        try:
            framing.check_size(size)
        except framing.FrameError as e:
            raise self._fail("protocol", f"bad reply to {op}: {e}") from None
        body = self._read_exact(size, deadline, op)
        try:
            reply = framing.decode(body)
        except framing.FrameError as e:
            raise self._fail("protocol", f"bad reply to {op}: {e}") from None
        if reply.get("nonce") != nonce:
            raise self._fail("protocol", f"reply to {op} does not answer this request (nonce)")
        return reply

    def __enter__(self) -> Worker:
        if not self.alive:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _remove_faketime_segments(pid: int) -> None:
    """libfaketime makes ``/dev/shm/faketime_shm_<pid>`` (and a semaphore) in every process
    it loads into and removes them only on a clean exit: a killed worker's stay behind.
    With ``isolation=python`` the worker is our child, so we remove them once it is reaped
    (with ``isolation=os`` its ``/dev`` is its own and read-only: none are made)."""
    for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
        with contextlib.suppress(OSError):
            os.unlink(f"/dev/shm/{name}")


def _descendant_python(bwrap_pid: int) -> int | None:
    """The host pid of the Python below bwrap (bwrap -> namespace init -> python)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(entry.name)] = ppid
    level = {bwrap_pid}
    for _ in range(3):
        children = {pid for pid, ppid in parents.items() if ppid in level}
        if not children:
            return None
        level = children
        pythons = [p for p in level if _is_python(p)]
        if pythons:
            return min(pythons)
    return None


def _is_python(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip().startswith("python")
    except OSError:
        return False


class AppWorker:
    """A worker hosting one AWM app (FastAPI) on a working SQLite database.

    ``load`` puts a private copy of the initial database where the worker reads it
    (read-only), starts the worker, which copies it into its run directory (with
    ``isolation=os`` a tmpfs of ``run_dir_mb`` in its own mount namespace, reached from
    here only through :meth:`Worker.host_path`), execs the app with ``DATABASE_PATH``
    pointing at it (any SQLAlchemy ``create_engine`` is redirected there too),
    snapshots the database in memory (not a forked app's: it is never reset) and returns
    the app's OpenAPI document.
    ``reset`` restores the snapshot (SQLite backup API, sub-millisecond for AWM-sized
    databases; :class:`~collect.awm.env.AWMEnv` starts a fresh worker per episode
    instead unless ``env.fresh_app=false``); ``request`` dispatches one HTTP request
    in-process to the app (httpx ASGITransport, no TCP port).
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        workdir: Path,
        name: str = "app",
        clock: WorldClock | None = None,
    ):
        self.limits = limits or SandboxLimits()
        self.workdir = Path(workdir)
        self.worker = Worker("env", self.limits, workdir=self.workdir, name=name, clock=clock)
        self.openapi: dict[str, JSON] | None = None
        self.db_path: Path | None = None
        #: the run directory ``workdir`` is this app's alone (removed with it)
        self.owns_workdir = True
        #: an environment's fresh apps (forked or started): the OpenAPI document of the
        #: code's first load (the same code's later loads skip generating it; it is made
        #: before any request is served)
        self.specs: dict[str, JSON] | None = None
        #: :meth:`reset` restores the database (a forked app serves one episode: no snapshot)
        self.resettable = True
        #: the worker's timings of the last load: load_ms, cpu_ms, phases (name -> [wall, cpu])
        self.load_info: dict[str, JSON] = {}

    @property
    def alive(self) -> bool:
        return self.worker.alive

    def load(self, code: str, initial_db: Path | None, *, app_name: str = "awm_app") -> dict:
        """Start the worker, copy ``initial_db`` in, exec ``code``; returns the OpenAPI dict.

        ``initial_db=None`` starts the app on an empty database (its own
        ``create_all`` makes the tables). Raises :class:`SandboxError` on failure;
        ``kind='load_error'`` when the code itself failed (message has the traceback tail).
        """
        seed = self._start(initial_db)
        cached = self.specs.get("openapi") if self.specs is not None else None
        reply = self.worker.request(
            "load_app",
            {
                "code": code,
                "db_path": str(self.db_path.resolve()),
                "seed_path": seed,
                "module": app_name,
                "openapi": cached is None,
                "snapshot": self.resettable,
            },
            timeout=self.limits.start_timeout_s,
        )
        if not reply.get("ok"):
            self.worker.close()
            raise SandboxError(
                reply.get("error", "load_error"), reply.get("message", "app failed to load")
            )
        self.load_info = {k: reply.get(k) for k in ("load_ms", "cpu_ms", "phases")}
        self.openapi = reply["openapi"] if cached is None else cached
        if self.specs is not None:
            self.specs.setdefault("openapi", self.openapi)
        return self.openapi

    def _start(self, initial_db: Path | None) -> str | None:
        """Start the worker; returns where it reads the initial database (None: none)."""
        ensure_private_dir(self.workdir)
        self.db_path = self.workdir / "work.db"
        # a private copy of the initial database, read-only in the worker's view; the
        # worker copies it into its run directory (with isolation=os a tmpfs of its own)
        seed = write_seed(self.workdir, initial_db)
        self.worker.read_dirs = (seed.parent,)
        self.worker.start()
        return str(seed.resolve()) if initial_db is not None else None

    def retire(self) -> None:
        """Stop serving this app (its episode is over): here, :meth:`close`."""
        self.close()

    def request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: JSON = None,
        has_body: bool = False,
        timeout: float | None = None,
    ) -> dict[str, JSON]:
        """One HTTP request; reply has ``status`` and ``text`` or ``error``/``message``."""
        payload = {"method": method, "path": path, "query": query or [], "has_body": has_body}
        if has_body:
            payload["body"] = body
        return self.worker.request("request", payload, timeout=timeout)

    def reset(self) -> None:
        reply = self.worker.request("reset", {})
        if not reply.get("ok"):
            raise SandboxError("crashed", f"reset failed: {reply.get('message')}")

    def export(self, name: str = "export.db") -> Path:
        """Write a consistent copy of the working database into the worker's dir.

        The file is the worker's: read it only with :func:`copy_file_nofollow`."""
        reply = self.worker.request("export", {"dest": name})
        if not reply.get("ok"):
            kind = "run_dir_full" if reply.get("error") == "run_dir_full" else "crashed"
            raise SandboxError(kind, f"export failed: {reply.get('message')}")
        return self.worker.host_path(name)

    def close(self) -> None:
        self.worker.close()


def write_seed(workdir: Path, initial_db: Path | None) -> Path:
    """``workdir/.seed/initial.db``: a private copy of ``initial_db`` (none: left absent)."""
    seed_dir = ensure_private_dir(Path(workdir) / ".seed")
    seed = seed_dir / "initial.db"
    with contextlib.suppress(FileNotFoundError):
        seed.unlink()
    if initial_db is not None:
        # a file of ours (built under build_file_mb): copied without a bound of its own
        copy_file_nofollow(Path(initial_db), seed, None, exclusive=True)
    return seed
