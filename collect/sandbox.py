"""Worker processes that run untrusted dataset code (AWM apps and verifiers).

Nothing from a dataset runs in the caller's process. :class:`Worker` starts a
separate Python (``python -I -B collect/sandbox.py``; the worker half of this
file imports only the standard library and, for apps, the web framework) and
talks to it over two private pipes with length-prefixed JSON messages: no
pickle, so a compromised worker cannot execute code in the parent.

Layers of containment inside a worker, outermost first:

* a separate process in its own session, killed (SIGKILL to its process group)
  on a wall-clock timeout, on a crash, or when it reports a fatal error; the
  caller replaces it;
* a private working directory (``cwd``, ``HOME`` and ``TMPDIR``) and a scrubbed
  environment (no API keys or tokens from the parent);
* resource limits: ``RLIMIT_AS`` (memory), ``RLIMIT_CPU`` (lifetime CPU seconds;
  per-call time is bounded by the parent's wall clock), ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``, no core files;
* no network: ``unshare(CLONE_NEWNET)`` when the kernel permits it (root or
  CAP_SYS_ADMIN), and in every case an audit hook that refuses socket
  connect/bind/sendto, name resolution and non-Unix sockets;
* a ``sys.addaudithook`` policy installed after the framework is imported:
  files may be read only under Python's own install and site-packages, the
  worker's directory and the directories it was given, and written only under
  its writable directories; subprocess/exec/fork/spawn/kill, ctypes,
  ``resource.setrlimit`` and SQLite extensions are refused; every SQLite
  connection gets an authorizer (no ATTACH; read-only in verifier workers);
* dataset code is exec'd with restricted ``__builtins__``: an ``__import__``
  that refuses ``subprocess``, ``socket``, ``ctypes``, ``multiprocessing``,
  ``importlib``, ``gc``, ``inspect``... and hands out ``os``/``sys`` proxies
  without ``system``/``popen``/``exec*``/``fork``/``kill``/``modules``/frames;
  ``exec``/``eval`` keep those builtins.

The audit hook is the enforcement layer; the import guard gives early, clear
errors. Python-level isolation is not a complete sandbox on its own (which is
why the process, rlimit and namespace layers exist): known gaps are listed in
:data:`KNOWN_LIMITATIONS`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __name__ != "__main__":  # the worker half imports only the standard library
    from collect.clock import WorldClock

__all__ = [
    "KNOWN_LIMITATIONS",
    "AppWorker",
    "SandboxError",
    "SandboxLimits",
    "VerifierOutcome",
    "VerifierPool",
    "Worker",
    "default_work_root",
]

KNOWN_LIMITATIONS = (
    "Python-level restrictions (import guard, builtins) can be bypassed by introspection; "
    "the audit hook, rlimits, process boundary and network namespace are the real barriers.",
    "SQLite opens files below Python (ATTACH/VACUUM INTO). Connections made with "
    "sqlite3.connect get an authorizer that refuses ATTACH (and writes, in verifier workers) "
    "and an ATTACH limit of 0, but code that builds sqlite3.Connection directly or resets the "
    "authorizer could open other SQLite files the worker user can read; the data has no way "
    "out (no network, JSON replies only).",
    "os.write on inherited descriptors has no audit event; a worker can only corrupt its "
    "own channel, which the parent treats as a crash.",
)

_HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def default_work_root() -> Path:
    """A fresh private directory for worker files (tmpfs when available), removed at exit."""
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="helpdp-awm-", dir=base))
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # if the owner forgets close()
    return path


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
        metadata={"help": "try unshare(CLONE_NEWNET); the audit hook blocks sockets regardless"},
    )
    max_response_chars: int = field(
        default=200_000, metadata={"help": "longest response body a worker returns, characters"}
    )


class SandboxError(RuntimeError):
    """A worker timed out, crashed, ran out of a resource or broke the protocol.

    ``kind`` is one of ``timeout``, ``memory``, ``cpu``, ``crashed``, ``protocol``,
    ``start_failed``, ``closed``. The worker is dead when this is raised.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


# ---------------------------------------------------------------------------
# framing (shared by both sides)
# ---------------------------------------------------------------------------


def _encode(obj: Any) -> bytes:
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode(
        "utf-8", "surrogatepass"
    )
    return _HEADER.pack(len(data)) + data


def _read_exact_blocking(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_all_blocking(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# ---------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------

_SIGNAL_TEXT = {
    getattr(signal, "SIGXCPU", 24): "CPU time limit exceeded (RLIMIT_CPU)",
    getattr(signal, "SIGXFSZ", 25): "file size limit exceeded (RLIMIT_FSIZE)",
    signal.SIGKILL: "killed (SIGKILL)",
    signal.SIGSEGV: "crashed (segmentation fault)",
    signal.SIGABRT: "aborted",
}
_EXIT_MEMORY = 3


def _clean_env(workdir: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MALLOC_ARENA_MAX": "2",
        "PYTHONHASHSEED": "0",
    }


def _read_tail(path: Path, limit: int = 2000) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


class Worker:
    """One sandboxed worker process; thread-safe, one request at a time.

    ``role`` is ``"env"`` (hosts an app) or ``"verifier"`` (runs verifier code).
    Reads are allowed under ``read_dirs`` and the worker's own directory, writes
    under ``write_dirs`` (``env``: its directory) only.
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
        self.hello: dict[str, Any] = {}
        self.requests = 0
        self._proc: subprocess.Popen | None = None
        self._to_worker: int | None = None
        self._from_worker: int | None = None
        self._lock = threading.Lock()
        self._timeout = self.limits.call_timeout_s

    # -- lifecycle ---------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> dict[str, Any]:
        """Start the process and wait for its hello (sandbox status)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        config = {
            "role": self.role,
            "fd_in": req_r,
            "fd_out": resp_w,
            "workdir": str(self.workdir.resolve()),
            "read_dirs": [str(p.resolve()) for p in self.read_dirs],
            "write_dirs": [str(p.resolve()) for p in self.write_dirs],
            "memory_bytes": int(self.limits.memory_mb) * 1024 * 1024,
            "cpu_seconds": int(self.limits.cpu_seconds),
            "fsize_bytes": int(self.limits.file_size_mb) * 1024 * 1024,
            "nofile": int(self.limits.max_open_files),
            "isolate_network": bool(self.limits.isolate_network),
            "max_response_chars": int(self.limits.max_response_chars),
        }
        log = open(self.workdir / "worker.log", "ab")  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-B", str(Path(__file__).resolve()), json.dumps(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(req_r, resp_w),
                cwd=str(self.workdir),
                env={**_clean_env(self.workdir.resolve()), **self.clock.worker_env()},
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            for fd in (req_r, req_w, resp_r, resp_w):
                os.close(fd)
            raise SandboxError("start_failed", f"{self.name}: cannot start worker: {e}") from e
        finally:
            log.close()
        os.close(req_r)
        os.close(resp_w)
        self._to_worker, self._from_worker = req_w, resp_r
        os.set_blocking(req_w, False)
        deadline = time.monotonic() + self.limits.start_timeout_s
        with self._lock:
            self._timeout = self.limits.start_timeout_s
            self.hello = self._receive(deadline, "start")
        if not self.hello.get("ok"):
            msg = self.hello.get("message", "worker failed to start")
            self._kill()
            raise SandboxError("start_failed", f"{self.name}: {msg}")
        try:
            self.clock.check(self.hello.get("clock"), self.name)
        except RuntimeError as e:
            self._kill()
            raise SandboxError("start_failed", str(e)) from None
        return self.hello

    def close(self) -> None:
        """Stop the worker (EOF on its request pipe, then SIGKILL)."""
        self._kill()

    def kill(self) -> None:
        """SIGKILL the worker's process group now."""
        self._kill()

    def _kill(self) -> None:
        proc = self._proc
        for fd in (self._to_worker, self._from_worker):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_worker = self._from_worker = None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)

    def cpu_seconds_used(self) -> float | None:
        """User+system CPU time of the worker so far (Linux /proc), or None."""
        if not self.alive:
            return None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    # -- requests ----------------------------------------------------------
    def request(self, op: str, payload: dict[str, Any] | None = None, timeout: float | None = None):
        """Send one request and wait for its reply (a dict with ``ok``).

        Raises :class:`SandboxError` (and kills the worker) on a timeout, a crash,
        a fatal error reported by the worker (memory), or a protocol violation.
        """
        timeout = self.limits.call_timeout_s if timeout is None else timeout
        with self._lock:
            if self._proc is None or self._to_worker is None:
                raise SandboxError("closed", f"{self.name}: worker is not running")
            if self._proc.poll() is not None:
                raise self._describe_death(op)
            deadline = time.monotonic() + timeout
            self._timeout = timeout
            message = {"op": op, **(payload or {})}
            self._send(_encode(message), deadline, op)
            reply = self._receive(deadline, op)
            self.requests += 1
            if reply.get("fatal"):
                kind = reply.get("error", "crashed")
                text = reply.get("message", "fatal error")
                self._kill()
                raise SandboxError(kind, f"{self.name}: {text}")
            return reply

    def _fail(self, kind: str, message: str) -> SandboxError:
        self._kill()
        return SandboxError(kind, f"{self.name}: {message}")

    def _describe_death(self, op: str) -> SandboxError:
        proc = self._proc
        code = None
        if proc is not None:
            with contextlib.suppress(Exception):
                code = proc.wait(timeout=2)
        tail = _read_tail(self.workdir / "worker.log")
        tail_txt = f"; worker log: {tail[-600:]}" if tail else ""
        if code is not None and code < 0:
            sig = -code
            text = _SIGNAL_TEXT.get(sig, f"killed by signal {sig}")
            kind = "cpu" if sig == getattr(signal, "SIGXCPU", 24) else "crashed"
            return self._fail(kind, f"worker {text} during {op}{tail_txt}")
        if code == _EXIT_MEMORY:
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

    def _receive(self, deadline: float, op: str) -> dict[str, Any]:
        (size,) = _HEADER.unpack(self._read_exact(_HEADER.size, deadline, op))
        if size > MAX_MESSAGE_BYTES:
            raise self._fail("protocol", f"reply of {size} bytes exceeds the message limit")
        body = self._read_exact(size, deadline, op)
        try:
            reply = json.loads(body)
        except ValueError as e:
            raise self._fail("protocol", f"malformed reply: {e}") from None
        if not isinstance(reply, dict):
            raise self._fail("protocol", "reply is not an object")
        return reply

    def __enter__(self) -> Worker:
        if not self.alive:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AppWorker:
    """A worker hosting one AWM app (FastAPI) on a working SQLite database.

    ``load`` execs the app with ``DATABASE_PATH`` pointing at ``db_path`` (any
    SQLAlchemy ``create_engine`` is redirected there too), snapshots the
    database in memory and returns the app's OpenAPI document. ``reset``
    restores the snapshot (SQLite backup API, sub-millisecond for AWM-sized
    databases); ``request`` dispatches one HTTP request in-process to the app
    (httpx ASGITransport, no TCP port).
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
        self.openapi: dict[str, Any] | None = None
        self.db_path: Path | None = None

    @property
    def alive(self) -> bool:
        return self.worker.alive

    def load(self, code: str, initial_db: Path | None, *, app_name: str = "awm_app") -> dict:
        """Start the worker, copy ``initial_db`` in, exec ``code``; returns the OpenAPI dict.

        ``initial_db=None`` starts the app on an empty database (its own
        ``create_all`` makes the tables). Raises :class:`SandboxError` on failure;
        ``kind='load_error'`` when the code itself failed (message has the traceback tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.workdir / "work.db"
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(self.db_path) + suffix)
        if initial_db is not None:
            shutil.copyfile(initial_db, self.db_path)
        self.worker.start()
        reply = self.worker.request(
            "load_app",
            {"code": code, "db_path": str(self.db_path.resolve()), "module": app_name},
            timeout=self.limits.start_timeout_s,
        )
        if not reply.get("ok"):
            self.worker.close()
            raise SandboxError(
                reply.get("error", "load_error"), reply.get("message", "app failed to load")
            )
        self.openapi = reply["openapi"]
        return self.openapi

    def request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        has_body: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
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
        """Write a consistent copy of the working database into the worker's dir."""
        reply = self.worker.request("export", {"dest": name})
        if not reply.get("ok"):
            raise SandboxError("crashed", f"export failed: {reply.get('message')}")
        return self.workdir / name

    def close(self) -> None:
        self.worker.close()


def copy_file_nofollow(src: Path, dst: Path, max_bytes: int = 1 << 31) -> None:
    """Copy a file written by a worker without following symlinks."""
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        import stat as _stat

        if not _stat.S_ISREG(st.st_mode):
            raise OSError(f"{src} is not a regular file")
        if st.st_size > max_bytes:
            raise OSError(f"{src} is larger than {max_bytes} bytes")
        with open(dst, "wb") as out:
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                out.write(chunk)
    finally:
        os.close(fd)


@dataclass
class VerifierOutcome:
    """Result of running one verifier in a worker.

    ``status``: ``ok`` (``result`` holds the verifier's return value),
    ``syntax_error`` (``lineno``), ``error`` (the verifier raised, or a sandbox
    rule refused something: ``message``), ``invalid_result`` (code mode: not
    ``{"result": "complete"|"others"}``), or a sandbox kind: ``timeout``,
    ``memory``, ``cpu``, ``crashed``.
    """

    status: str
    result: Any = None
    message: str = ""
    lineno: int | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def label(self) -> str | None:
        """Code mode: ``complete`` or ``others``; None otherwise."""
        if self.ok and isinstance(self.result, dict):
            value = self.result.get("result")
            if isinstance(value, str):
                return value.strip().lower()
        return None


class VerifierPool:
    """Sandboxed workers that run verifier code on read-only database copies.

    Each run gets a fresh directory with copies of the initial and final
    databases (chmod 0444, and a read-only SQLite authorizer since root ignores
    file modes). A worker that times out, crashes or exhausts memory is killed;
    the next run starts a new one. Workers are recycled after
    ``max_runs_per_worker`` runs so one verifier cannot influence many others.
    """

    def __init__(
        self,
        size: int = 1,
        limits: SandboxLimits | None = None,
        *,
        work_root: Path | None = None,
        max_runs_per_worker: int = 100,
        clock: WorldClock | None = None,
    ):
        self.size = max(1, int(size))
        self.clock = clock
        self.limits = limits or SandboxLimits(memory_mb=1024, call_timeout_s=30.0)
        self._own_root = work_root is None
        self.root = Path(work_root) if work_root is not None else default_work_root()
        self.runs_dir = self.root / "verify-runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.max_runs_per_worker = max_runs_per_worker
        self._idle: list[Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False
        self._serial = 0

    def _new_worker(self) -> Worker:
        self._serial += 1
        workdir = self.root / f"verifier-{self._serial}-{uuid.uuid4().hex[:6]}"
        worker = Worker(
            "verifier",
            self.limits,
            workdir=workdir,
            read_dirs=(self.runs_dir,),
            write_dirs=(),
            name=f"verifier-{self._serial}",
            clock=self.clock,
        )
        worker.start()
        return worker

    def _acquire(self) -> Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise SandboxError("closed", "verifier pool is closed")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.size:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return self._new_worker()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: Worker, healthy: bool) -> None:
        recycle = not healthy or not worker.alive or worker.requests >= self.max_runs_per_worker
        cpu = worker.cpu_seconds_used() if not recycle else None
        if cpu is not None and cpu > self.limits.cpu_seconds / 2:
            recycle = True
        with self._cond:
            if recycle or self._closed:
                self._count -= 1
                recycle = True
            else:
                self._idle.append(worker)
            self._cond.notify()
        if recycle:
            worker.close()
            shutil.rmtree(worker.workdir, ignore_errors=True)

    def run(
        self,
        code: str,
        *,
        initial_db: Path,
        final_db: Path,
        final_answer: str | None = None,
        mode: str = "code",
        function_name: str | None = None,
        timeout: float | None = None,
        final_from_worker: bool = False,
    ) -> VerifierOutcome:
        """Run ``code``'s verifier function on copies of the two databases.

        ``mode='code'`` calls ``verify_task_completion(initial_db_path,
        final_db_path, final_answer)`` and checks it returns ``{"result":
        "complete"|"others"}``; ``mode='sql'`` calls ``verify_task(initial_db_path,
        final_db_path)`` and returns its dict. ``final_from_worker``: the final
        database was written by an app worker (copied without following links).
        """
        if function_name is None:
            function_name = "verify_task_completion" if mode == "code" else "verify_task"
        run_dir = self.runs_dir / uuid.uuid4().hex
        run_dir.mkdir()
        started = time.perf_counter()
        try:
            init_copy, final_copy = run_dir / "initial.db", run_dir / "final.db"
            shutil.copyfile(initial_db, init_copy)
            if final_from_worker:
                copy_file_nofollow(final_db, final_copy)
            else:
                shutil.copyfile(final_db, final_copy)
            for p in (init_copy, final_copy):
                os.chmod(p, 0o444)
            os.chmod(run_dir, 0o555)
            try:
                worker = self._acquire()
            except SandboxError as e:
                return VerifierOutcome(e.kind, message=e.message)
            healthy = False
            try:
                reply = worker.request(
                    "verify",
                    {
                        "code": code,
                        "function": function_name,
                        "mode": mode,
                        "initial_db_path": str(init_copy.resolve()),
                        "final_db_path": str(final_copy.resolve()),
                        "final_answer": final_answer,
                    },
                    timeout=timeout,
                )
                healthy = True
            except SandboxError as e:
                return VerifierOutcome(
                    e.kind, message=e.message, seconds=time.perf_counter() - started
                )
            finally:
                self._release(worker, healthy)
            seconds = time.perf_counter() - started
            if reply.get("ok"):
                return VerifierOutcome("ok", result=reply.get("result"), seconds=seconds)
            return VerifierOutcome(
                reply.get("error", "error"),
                message=reply.get("message", ""),
                lineno=reply.get("lineno"),
                seconds=seconds,
            )
        finally:
            with contextlib.suppress(OSError):
                os.chmod(run_dir, 0o755)
            shutil.rmtree(run_dir, ignore_errors=True)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.close()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------
# worker side (runs as ``python -I -B sandbox.py CONFIG_JSON``; stdlib only
# until the framework is imported)
# ---------------------------------------------------------------------------

_DENY_MODULES = frozenset(
    """
    subprocess _posixsubprocess socket _socket ssl _ssl ctypes _ctypes cffi
    multiprocessing _multiprocessing concurrent.futures.process asyncio.subprocess pty
    resource signal _signal posix nt _thread importlib imp zipimport runpy builtins gc
    inspect code pdb bdb pickle _pickle marshal shelve dill cloudpickle urllib.request
    http.client http.server socketserver ftplib smtplib poplib imaplib telnetlib xmlrpc
    webbrowser requests httpx httpcore aiohttp urllib3 site venv ensurepip pip
    setuptools distutils faulthandler tracemalloc _io
    """.split()
)
_OS_DENY = frozenset(
    """
    system popen fork forkpty kill killpg abort _exit posix_spawn posix_spawnp
    register_at_fork setuid setgid seteuid setegid setreuid setregid setresuid setresgid
    chroot plock pidfd_open memfd_create openpty login_tty sched_setaffinity nice
    setpriority setsid setpgid tcsetpgrp
    """.split()
)
_SYS_ALLOW = tuple(
    """
    argv byteorder exc_info exception float_info getdefaultencoding
    getfilesystemencoding getrecursionlimit getsizeof hexversion implementation int_info
    maxsize maxunicode platform stderr stdout version version_info exit
    """.split()
)

# SQLite authorizer action codes (sqlite3.h)
_SQLITE_OK, _SQLITE_DENY = 0, 1
_SQLITE_CREATE_TEMP = {3, 4, 5, 6, 7}  # temp index/table/trigger/view
_SQLITE_DROP_TEMP = {12, 13, 14, 15}
_SQLITE_PRAGMA, _SQLITE_READ, _SQLITE_SELECT, _SQLITE_TRANSACTION = 19, 20, 21, 22
_SQLITE_ATTACH, _SQLITE_DETACH, _SQLITE_FUNCTION = 24, 25, 31
_SQLITE_SAVEPOINT, _SQLITE_RECURSIVE = 32, 33
_SQLITE_WRITES = {1, 2, 8, 9, 10, 11, 16, 17, 18, 23, 26, 27, 28, 29, 30}
_WRITE_PRAGMAS = frozenset(
    """
    journal_mode writable_schema schema_version user_version application_id
    wal_checkpoint auto_vacuum incremental_vacuum page_size optimize integrity_check
    quick_check
    """.split()
)


def _worker_main(config_json: str) -> None:  # pragma: no cover - runs in the child
    cfg = json.loads(config_json)
    fd_in, fd_out = cfg["fd_in"], cfg["fd_out"]
    role = cfg["role"]
    workdir = os.path.realpath(cfg["workdir"])
    os.chdir(workdir)
    sys.dont_write_bytecode = True

    def send(obj: Any) -> None:
        _write_all_blocking(fd_out, _encode(obj))

    def recv() -> dict[str, Any] | None:
        header = _read_exact_blocking(fd_in, _HEADER.size)
        if header is None:
            return None
        (size,) = _HEADER.unpack(header)
        body = _read_exact_blocking(fd_in, size)
        if body is None:
            return None
        return json.loads(body)

    # -- 1. import the framework before any restriction ---------------------
    import asyncio
    import builtins
    import linecache
    import socket
    import sqlite3
    import traceback
    import types
    import warnings

    warnings.filterwarnings("ignore")
    preload = """
        datetime decimal enum typing re math random hashlib base64 collections functools
        itertools dataclasses time uuid string copy statistics textwrap difflib calendar
        fractions operator secrets hmac logging csv heapq bisect zoneinfo unicodedata
        numbers contextlib abc pathlib tempfile shutil glob fnmatch threading queue weakref
        ipaddress urllib.parse html email.utils typing_extensions
    """.split()
    for name in preload:
        with contextlib.suppress(Exception):
            __import__(name)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    def _clock_reading() -> dict[str, float]:
        # What this process sees as "now" (Python's and SQLite's), for the parent's check.
        conn = sqlite3.connect(":memory:")
        try:
            sql_now = conn.execute("SELECT CAST(strftime('%s', 'now') AS INTEGER)").fetchone()[0]
        finally:
            conn.close()
        return {"python": time.time(), "sqlite": float(sql_now)}

    clock_reading = _clock_reading()
    database = None
    if role == "build":  # collect/database.py, by path (the worker runs isolated, -I)
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location(
            "_helpdp_database", os.path.join(here, "database.py")
        )
        database = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = database
        spec.loader.exec_module(database)
    httpx = None
    if role == "env":
        try:
            import anyio  # noqa: F401
            import fastapi
            import httpx
            import pydantic  # noqa: F401
            import sqlalchemy
            import sqlalchemy.engine
            import sqlalchemy.orm  # noqa: F401
            import starlette  # noqa: F401

            with contextlib.suppress(Exception):
                import dateutil.parser  # noqa: F401

            # Warm the lazy parts of the stack with a throwaway app.
            warm = fastapi.FastAPI()

            @warm.get("/w/{x}", operation_id="w")
            def _w(x: int, q: str = "a") -> dict:
                return {"x": x, "q": q}

            @warm.post("/p", operation_id="p")
            async def _p(body: dict = fastapi.Body(...)) -> dict:  # noqa: B008
                return body

            async def _warm() -> None:
                async with httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=warm), base_url="http://awm"
                ) as c:
                    await c.get("/w/1", params={"q": "b"})
                    await c.post("/p", json={"a": 1})
                    await c.get("/w/x")

            loop.run_until_complete(_warm())
            warm.openapi()
        except Exception as e:
            send({"ok": False, "message": f"framework import failed: {e!r}"})
            return

    # A worker whose parent died (reparented) exits, even if its main thread is busy.
    parent_pid = os.getppid()

    def _watchdog() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=_watchdog, name="sandbox-watchdog", daemon=True).start()

    # -- 2. network namespace, resource limits ------------------------------
    netns, netns_error = False, None
    if cfg.get("isolate_network", True):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(0x40000000) == 0:  # CLONE_NEWNET
                netns = True
            else:
                netns_error = os.strerror(ctypes.get_errno())
        except Exception as e:
            netns_error = repr(e)
    import resource

    def _limit(which: int, value: int) -> None:
        with contextlib.suppress(ValueError, OSError):
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and value > hard:
                value = hard
            resource.setrlimit(which, (value, hard))

    if cfg.get("memory_bytes"):
        _limit(resource.RLIMIT_AS, cfg["memory_bytes"])
    if cfg.get("cpu_seconds"):
        used = resource.getrusage(resource.RUSAGE_SELF)
        _limit(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime) + cfg["cpu_seconds"])
    if cfg.get("fsize_bytes"):
        _limit(resource.RLIMIT_FSIZE, cfg["fsize_bytes"])
    if cfg.get("nofile"):
        _limit(resource.RLIMIT_NOFILE, cfg["nofile"])
    _limit(resource.RLIMIT_CORE, 0)

    # -- 3. audit hook -------------------------------------------------------
    def _real(p: str) -> str:
        return os.path.realpath(p)

    read_roots = {workdir}
    for p in cfg.get("read_dirs", []):
        read_roots.add(_real(p))
    for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]:
        if p and os.path.isdir(p):
            read_roots.add(_real(p))
    read_roots.add("/usr/share/zoneinfo")
    write_roots = {_real(p) for p in cfg.get("write_dirs", [])}
    read_files = {"/dev/null", "/dev/urandom", "/dev/random", "/dev/zero", "/etc/localtime"}
    read_roots_t = tuple(sorted(read_roots))
    write_roots_t = tuple(sorted(write_roots))
    protected_fds = {fd_in, fd_out}

    def _under(path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def _norm(path: Any) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
            if isinstance(path, bytes):
                path = os.fsdecode(path)
        if not isinstance(path, str):
            return None
        return _real(path)

    def _refuse(what: str) -> PermissionError:
        return PermissionError(f"sandbox: {what} refused")

    def _check_read(path: Any, what: str) -> None:
        p = _norm(path)
        if p is None:
            return
        if p in read_files or _under(p, read_roots_t) or _under(p, write_roots_t):
            return
        raise _refuse(f"{what} of {p!r} (outside the allowed directories)")

    def _check_write(path: Any, what: str) -> None:
        p = _norm(path)
        if p is None:
            return
        if p == "/dev/null" or _under(p, write_roots_t):
            return
        raise _refuse(f"{what} of {p!r} (not a writable directory of this worker)")

    def _sqlite_path(db: Any) -> str | None:
        if isinstance(db, bytes | os.PathLike):
            db = _norm(db)
        if not isinstance(db, str):
            return None
        if db in ("", ":memory:"):
            return None
        if db.startswith("file:"):
            rest = db[5:].split("?", 1)[0].split("#", 1)[0]
            if rest in ("", ":memory:") or "mode=memory" in db:
                return None
            if rest.startswith("//"):
                rest = rest[2:]
                rest = rest[rest.index("/") :] if "/" in rest else rest
            from urllib.parse import unquote

            return _real(unquote(rest))
        return _real(db)

    def _authorizer_env(action, arg1, arg2, dbname, source):
        if action in (_SQLITE_ATTACH, _SQLITE_DETACH):
            return _SQLITE_DENY
        return _SQLITE_OK

    def _authorizer_readonly(action, arg1, arg2, dbname, source):
        if action in (_SQLITE_ATTACH, _SQLITE_DETACH):
            return _SQLITE_DENY
        if action in (_SQLITE_READ, _SQLITE_SELECT, _SQLITE_FUNCTION, _SQLITE_TRANSACTION):
            return _SQLITE_OK
        if action in (_SQLITE_SAVEPOINT, _SQLITE_RECURSIVE):
            return _SQLITE_OK
        if action in _SQLITE_CREATE_TEMP or action in _SQLITE_DROP_TEMP:
            return _SQLITE_OK
        if action == _SQLITE_PRAGMA:
            return _SQLITE_DENY if (arg1 or "").lower() in _WRITE_PRAGMAS else _SQLITE_OK
        if action in _SQLITE_WRITES and dbname == "temp":
            return _SQLITE_OK
        return _SQLITE_DENY

    authorizer = _authorizer_env if role == "env" else _authorizer_readonly
    blocked_events = set(
        """
        subprocess.Popen os.system os.exec os.posix_spawn os.spawn os.fork os.forkpty
        os.startfile os.kill os.killpg os.setuid signal.pthread_kill resource.setrlimit
        resource.prlimit sys.addaudithook sqlite3.enable_load_extension
        sqlite3.load_extension socket.bind socket.connect socket.sendto socket.sendmsg
        socket.getaddrinfo socket.gethostbyname socket.gethostbyaddr socket.gethostname
        socket.getnameinfo socket.sethostname winreg.OpenKey pty.spawn webbrowser.open
        sys.settrace sys.setprofile
        """.split()
    )
    write_path_events = {
        "os.remove": 0,
        "os.rmdir": 0,
        "os.mkdir": 0,
        "os.chmod": 0,
        "os.chown": 0,
        "os.truncate": 0,
        "os.utime": 0,
        "os.chflags": 0,
        "os.lchflags": 0,
        "os.mkfifo": 0,
        "os.mknod": 0,
        "os.setxattr": 0,
        "os.removexattr": 0,
        "shutil.rmtree": 0,
        "shutil.chown": 0,
    }
    two_path_events = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.move"}
    read_path_events = {
        "os.listdir": 0,
        "os.scandir": 0,
        "glob.glob": 0,
        "os.chdir": 0,
        "os.getxattr": 0,
        "os.listxattr": 0,
    }
    last_sqlite_path: list[str | None] = [None]

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if isinstance(path, int):
                if path in protected_fds:
                    raise _refuse("reopening the worker's control channel")
                return
            writing = False
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                writing = True
            if isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                writing = True
            if writing:
                _check_write(path, "opening for writing")
            else:
                _check_read(path, "opening")
            return
        if event in blocked_events:
            raise _refuse(event)
        if event.startswith("ctypes."):
            raise _refuse(event)
        if event == "socket.__new__":
            family = args[1] if len(args) > 1 else None
            if family not in (socket.AF_UNIX, -1, None):
                raise _refuse(f"socket creation (family {family})")
            return
        if event == "sqlite3.connect":
            p = _sqlite_path(args[0] if args else None)
            last_sqlite_path[0] = p
            if p is not None and not (_under(p, read_roots_t) or _under(p, write_roots_t)):
                raise _refuse(f"sqlite3.connect to {p!r} (outside the allowed directories)")
            if role == "env" and p is not None and not _under(p, write_roots_t):
                raise _refuse(f"sqlite3.connect to {p!r} (not in the app's directory)")
            return
        if event in write_path_events:
            _check_write(args[0] if args else None, event)
            return
        if event in two_path_events:
            if len(args) > 0 and event in ("shutil.copyfile",):
                _check_read(args[0], event)
            elif len(args) > 0:
                _check_write(args[0], event)
            if len(args) > 1:
                _check_write(args[1], event)
            return
        if event in read_path_events:
            target = args[0] if args else None
            if target is not None and not isinstance(target, int):
                _check_read(target, event)
            return

    # Every connection made through sqlite3.connect (SQLAlchemy's pysqlite
    # dialect and verifiers alike) gets the authorizer and no ATTACH slots.
    import _sqlite3
    import sqlite3.dbapi2

    real_sqlite_connect = sqlite3.connect

    def guarded_sqlite_connect(*args, **kwargs):
        conn = real_sqlite_connect(*args, **kwargs)
        conn.set_authorizer(authorizer)
        with contextlib.suppress(AttributeError, sqlite3.Error):
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        return conn

    sqlite3.connect = guarded_sqlite_connect
    sqlite3.dbapi2.connect = guarded_sqlite_connect
    _sqlite3.connect = guarded_sqlite_connect

    # -- 4. restricted builtins for dataset code ------------------------------
    real_import = builtins.__import__

    def _make_os_proxy() -> types.ModuleType:
        proxy = types.ModuleType("os", "os module without process-control functions (sandbox)")
        for key in dir(os):
            if key in _OS_DENY or key.startswith(("exec", "spawn", "posix_spawn", "wait")):
                continue
            setattr(proxy, key, getattr(os, key))
        return proxy

    def _make_sys_proxy() -> types.ModuleType:
        proxy = types.ModuleType("sys", "sys module subset (sandbox)")
        for key in _SYS_ALLOW:
            if hasattr(sys, key):
                setattr(proxy, key, getattr(sys, key))
        return proxy

    proxies = {"os": _make_os_proxy(), "sys": _make_sys_proxy()}

    def _denied(name: str) -> str | None:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in _DENY_MODULES:
                return prefix
        return None

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level:
            raise ImportError("sandbox: relative imports are not allowed")
        bad = _denied(name)
        if bad is None and fromlist:
            for item in fromlist:
                if isinstance(item, str) and _denied(f"{name}.{item}"):
                    bad = f"{name}.{item}"
                    break
        if bad is not None:
            raise ImportError(f"sandbox: import of {bad!r} is not allowed")
        module = real_import(name, globals, locals, fromlist, level)
        top = name.partition(".")[0]
        if not fromlist:
            return proxies.get(top, module)
        if name in proxies:
            return proxies[name]
        return module

    safe_builtins: dict[str, Any] = {}
    for key in dir(builtins):
        if key in {"breakpoint", "input", "help", "exit", "quit", "copyright", "credits"}:
            continue
        if key in {"license", "__import__", "exec", "eval", "__loader__", "__spec__"}:
            continue
        safe_builtins[key] = getattr(builtins, key)
    safe_builtins["__import__"] = guarded_import

    def _scoped(g: Any, frame_globals: dict) -> dict:
        if g is None:
            return frame_globals
        if isinstance(g, dict):
            g["__builtins__"] = safe_builtins
        return g

    def safe_exec(source, globals=None, locals=None, /):
        frame = sys._getframe(1)
        g = _scoped(globals, frame.f_globals)
        if globals is None and locals is None:
            locals = frame.f_locals
        return builtins.exec(source, g, locals)

    def safe_eval(source, globals=None, locals=None, /):
        frame = sys._getframe(1)
        g = _scoped(globals, frame.f_globals)
        if globals is None and locals is None:
            locals = frame.f_locals
        return builtins.eval(source, g, locals)

    safe_builtins["exec"] = safe_exec
    safe_builtins["eval"] = safe_eval

    def exec_dataset_code(code: str, module_name: str, filename: str) -> types.ModuleType:
        module = types.ModuleType(module_name)
        module.__dict__["__builtins__"] = safe_builtins
        module.__file__ = filename
        sys.modules[module_name] = module
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        compiled = compile(code, filename, "exec", dont_inherit=True)
        builtins.exec(compiled, module.__dict__)
        return module

    def _has_memory_error(e: BaseException | None, depth: int = 0) -> bool:
        if e is None or depth > 20:
            return False
        if isinstance(e, MemoryError):
            return True
        for sub in getattr(e, "exceptions", ()) or ():
            if _has_memory_error(sub, depth + 1):
                return True
        return _has_memory_error(e.__cause__ or e.__context__, depth + 1)

    def describe_exception(e: BaseException, filename: str) -> str:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
        where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
        return f"{type(e).__name__}: {e}{where}"

    sys.addaudithook(hook)
    send(
        {
            "ok": True,
            "pid": os.getpid(),
            "role": role,
            "netns": netns,
            "netns_error": netns_error,
            "clock": clock_reading,
        }
    )

    # -- 5. request loop -------------------------------------------------------
    max_chars = int(cfg.get("max_response_chars") or 200_000)
    state: dict[str, Any] = {}

    def op_load_app(msg: dict) -> dict:
        db_path = msg["db_path"]
        os.environ["DATABASE_PATH"] = f"sqlite:///{db_path}"
        url = f"sqlite:///{db_path}"
        real_create_engine = sqlalchemy.create_engine

        def create_engine(*args, **kwargs):
            target = args[0] if args else kwargs.get("url")
            text = str(target) if target is not None else "sqlite"
            if text.startswith("sqlite") or target is None:
                kwargs.pop("url", None)
                connect_args = dict(kwargs.pop("connect_args", None) or {})
                connect_args["check_same_thread"] = False
                return real_create_engine(url, *args[1:], connect_args=connect_args, **kwargs)
            raise _refuse(f"create_engine for a non-SQLite database ({text.split(':')[0]})")

        sqlalchemy.create_engine = create_engine
        sqlalchemy.engine.create_engine = create_engine
        filename = f"<{msg.get('module', 'awm_app')}>"
        try:
            module = exec_dataset_code(msg["code"], msg.get("module", "awm_app"), filename)
        except SyntaxError as e:
            return {
                "ok": False,
                "error": "syntax_error",
                "lineno": e.lineno,
                "message": f"app code does not compile: line {e.lineno}: {e.msg}",
            }
        except MemoryError:
            raise
        except BaseException as e:  # noqa: BLE001 - report anything the code raised
            return {
                "ok": False,
                "error": "load_error",
                "message": "app failed to load: " + describe_exception(e, filename),
            }
        app = module.__dict__.get("app")
        if not isinstance(app, fastapi.FastAPI):
            app = next(
                (v for v in module.__dict__.values() if isinstance(v, fastapi.FastAPI)), None
            )
        if app is None:
            return {
                "ok": False,
                "error": "load_error",
                "message": "app failed to load: the code defines no FastAPI instance",
            }
        try:
            spec = app.openapi()
        except BaseException as e:  # noqa: BLE001
            return {
                "ok": False,
                "error": "load_error",
                "message": "app failed to load: OpenAPI generation failed: " + repr(e)[:500],
            }
        state["app"] = app
        state["module"] = module
        state["filename"] = filename
        state["client"] = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, raise_app_exceptions=True),
            base_url="http://awm.local",
            timeout=None,
        )
        work = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
        work.execute("PRAGMA synchronous=OFF")
        snapshot = sqlite3.connect(":memory:", check_same_thread=False)
        work.backup(snapshot)
        state["work"], state["snapshot"] = work, snapshot
        return {"ok": True, "openapi": spec}

    async def _do_request(msg: dict):
        client = state["client"]
        kwargs: dict[str, Any] = {"params": [tuple(p) for p in msg.get("query") or []]}
        if msg.get("has_body"):
            kwargs["json"] = msg.get("body")
        return await client.request(msg["method"], msg["path"], **kwargs)

    def op_request(msg: dict) -> dict:
        if "client" not in state:
            return {"ok": False, "error": "not_loaded", "message": "no app loaded"}
        started = time.perf_counter()
        try:
            response = loop.run_until_complete(_do_request(msg))
        except BaseException as e:  # noqa: BLE001 - the app raised: a server error
            if _has_memory_error(e):
                raise MemoryError from None
            return {
                "ok": True,
                "status": 500,
                "exception": True,
                "text": "Internal Server Error: " + describe_exception(e, state["filename"]),
                "app_ms": (time.perf_counter() - started) * 1000,
            }
        text = response.text
        truncated = len(text) > max_chars
        return {
            "ok": True,
            "status": response.status_code,
            "text": text[:max_chars],
            "truncated": truncated,
            "app_ms": (time.perf_counter() - started) * 1000,
        }

    def _engines():
        module = state.get("module")
        if module is None:
            return []
        return [v for v in module.__dict__.values() if isinstance(v, sqlalchemy.engine.Engine)]

    def op_reset(msg: dict) -> dict:
        work, snapshot = state.get("work"), state.get("snapshot")
        if work is None:
            return {"ok": False, "message": "no app loaded"}
        try:
            snapshot.backup(work)
        except sqlite3.OperationalError:
            import gc

            for engine in _engines():
                with contextlib.suppress(Exception):
                    engine.dispose()
            gc.collect()
            snapshot.backup(work)
        return {"ok": True}

    def op_export(msg: dict) -> dict:
        work = state.get("work")
        if work is None:
            return {"ok": False, "message": "no app loaded"}
        dest = os.path.join(workdir, os.path.basename(msg.get("dest") or "export.db"))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        out = sqlite3.connect(dest)
        try:
            work.backup(out)
        finally:
            out.close()
        return {"ok": True, "path": dest}

    def op_build(msg: dict) -> dict:
        if database is None:
            return {"ok": False, "error": "unknown_op", "message": "build runs in a build worker"}
        dest = os.path.join(workdir, os.path.basename(msg.get("dest") or "initial.db"))
        report = database.build_database(
            dest,
            msg.get("db_schema"),
            msg.get("sample_data"),
            schema_source=msg.get("schema_source") or "gen_db.jsonl",
            sample_source=msg.get("sample_source") or "gen_sample.jsonl",
        )
        return {"ok": True, "path": dest, "report": report.to_json()}

    def op_verify(msg: dict) -> dict:
        filename = "<verifier>"
        name = f"awm_verifier_{uuid.uuid4().hex[:8]}"
        try:
            module = exec_dataset_code(msg["code"], name, filename)
        except SyntaxError as e:
            return {
                "ok": False,
                "error": "syntax_error",
                "lineno": e.lineno,
                "message": f"verifier does not compile: line {e.lineno}: {e.msg}",
            }
        except MemoryError:
            raise
        except BaseException as e:  # noqa: BLE001
            return {"ok": False, "error": "error", "message": describe_exception(e, filename)}
        try:
            fn = module.__dict__.get(msg.get("function") or "")
            if not callable(fn):
                wanted = msg.get("function")
                return {
                    "ok": False,
                    "error": "error",
                    "message": f"verifier defines no function {wanted!r}",
                }
            kwargs = {
                "initial_db_path": msg["initial_db_path"],
                "final_db_path": msg["final_db_path"],
            }
            if msg.get("mode") == "code":
                kwargs["final_answer"] = msg.get("final_answer")
            try:
                result = fn(**kwargs)
            except BaseException as e:  # noqa: BLE001
                if _has_memory_error(e):
                    raise MemoryError from None
                return {"ok": False, "error": "error", "message": describe_exception(e, filename)}
            if msg.get("mode") == "code":
                label = result.get("result") if isinstance(result, dict) else None
                if not isinstance(label, str) or label.strip().lower() not in (
                    "complete",
                    "others",
                ):
                    return {
                        "ok": False,
                        "error": "invalid_result",
                        "message": f"expected {{'result': 'complete'|'others'}}, got {str(result)[:300]}",
                    }
            try:
                json.dumps(result, default=str)
            except (TypeError, ValueError) as e:
                return {"ok": False, "error": "invalid_result", "message": f"result not JSON: {e}"}
            return {"ok": True, "result": result}
        finally:
            sys.modules.pop(name, None)

    ops = {
        "ping": lambda msg: {"ok": True},
        "load_app": op_load_app,
        "request": op_request,
        "reset": op_reset,
        "export": op_export,
        "verify": op_verify,
        "build": op_build,
    }
    while True:
        msg = recv()
        if msg is None:
            return
        handler = ops.get(msg.get("op"))
        if handler is None:
            send({"ok": False, "error": "unknown_op", "message": f"unknown op {msg.get('op')!r}"})
            continue
        try:
            reply = handler(msg)
        except MemoryError:
            state.clear()
            send(
                {
                    "ok": False,
                    "fatal": True,
                    "error": "memory",
                    "message": f"worker ran out of memory (RLIMIT_AS {cfg.get('memory_bytes', 0) >> 20} MiB) during {msg.get('op')}",
                }
            )
            os._exit(_EXIT_MEMORY)
        except RecursionError as e:
            reply = {"ok": False, "error": "error", "message": f"RecursionError: {e}"}
        except BaseException as e:  # noqa: BLE001 - keep the loop alive, report
            reply = {"ok": False, "error": "error", "message": f"{type(e).__name__}: {e}"}
        try:
            send(reply)
        except MemoryError:
            os._exit(_EXIT_MEMORY)


if __name__ == "__main__":  # pragma: no cover - worker entry point
    try:
        _worker_main(sys.argv[1])
    except MemoryError:
        os._exit(_EXIT_MEMORY)
