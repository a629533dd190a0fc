"""The app template (zygote), inside the worker: one child per episode, forked.

Runs in an app worker started with ``zygote`` (standard library plus the web
framework the worker imported; loaded by file path). The template never runs
dataset code and never serves a request: it answers ``spawn``, ``end`` and ``ping``
only. It compiles the app's source once (``compile``: the parser and compiler, no
line of the source runs), so that each child only runs the code object, and imports
the modules the source's top-level import statements name, read from its syntax tree,
where they belong to a package the worker already runs (the framework, the standard
library modules it preloads: library code, never the dataset's; no ``_`` or test
modules), so that no child imports them again.

``spawn`` first ends the previous child (:func:`end_child`), then receives from the
parent (``SCM_RIGHTS`` on the worker's fd socket) the new child's request and response
pipes, the write end of its status pipe, its log and its run directory, and forks a
*reaper*, which forks the child. The child keeps only descriptors 0-2 (0 ``/dev/null``,
1 and 2 its own log, a file no other child wrote) and its pipes (as 3 and 4), works in
its own run directory (one of the template's tmpfs mounts, made empty when the worker
started, handed to no other child, and reachable by no other child: the worker's
directory above them is read-only and cannot be listed, and their names are random and
known only to the parent, which sends each one as a descriptor), makes a new event
loop, reseeds SQLite's PRNG (Python's ``random`` reseeds itself after a fork), unblocks
signals, switches the guard on and serves the episode (``load_app`` first) exactly as
a worker started with ``exec`` does. The reaper waits for the child and writes its exit
status to the status pipe, which only the parent reads: the template waits only on
reapers (whose status the child can at most turn into SIGKILL) and never holds a
child's status, so no later child can inherit it from the template's memory.

Ending a child (when its reaper exits, on ``end``, before the next ``spawn``):
``kill(-1, SIGKILL)`` inside the worker's PID namespace until no process but the
template and the namespace's init is left (every descendant, whatever session or group
it made). The child's run directory is never used again; the parent empties it from
outside (to give its memory back), so the names the child chose never enter the
template's memory. A template that cannot kill every process says so (``clean:
false``) and the parent replaces it. Catchable signals are blocked in the template (and
so in the reaper): a child cannot interrupt it, only kill or stop it (the parent then
replaces it).
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import gc
import importlib
import json
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import CodeType, ModuleType

    from collect.awm.sandbox.ops import Context
    from helpdp.jsonvalue import JSON

EXIT_MEMORY = 3
CHILD_FDS = (3, 4)  # the child's request and response pipes
#: how the reaper writes a child's raw wait status on the status pipe
STATUS = struct.Struct("<i")
#: packages whose modules an app's import statements may have the template import (with
#: the roots of the standard library modules the worker preloads, ``child.PRELOAD``)
FRAMEWORK_ROOTS = frozenset(
    "fastapi starlette pydantic pydantic_core sqlalchemy httpx anyio dateutil "
    "typing_extensions annotated_types".split()
)


class Template:
    """The template's state: the current child (its reaper), and how the last one ended."""

    def __init__(
        self,
        ctx: Context,
        sock: socket.socket,
        ops: ModuleType,
        reading: Callable[[], dict[str, float]],
        preload_roots: frozenset[str] = frozenset(),
    ):
        self.ctx, self.sock, self.ops = ctx, sock, ops
        #: the packages an app's imports may have the template import (FRAMEWORK_ROOTS too)
        self.preload_roots = FRAMEWORK_ROOTS | preload_roots
        self.preloaded: list[str] = []  # what it imported for the apps it compiled
        self.clock_reading = reading
        self.pid: int | None = None  # the current child's reaper
        self.pidfd: int | None = None
        self.child_id: int | None = None
        #: child id -> {"clean", "problem"}: never its exit status (the parent reads that)
        self.ended: dict[int, dict] = {}
        self.compiled: tuple[str, str, CodeType] | None = None  # (source, filename, code object)
        self.hello: dict[str, JSON] = {}  # the template's own hello (its sandbox status)
        self.problem: str | None = None  # what keeps this template from a clean fork


def _block_signals() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())


def _reap() -> None:
    """Collect every exited child of the template (reapers, never blocking); their
    statuses are dropped unread."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _kill_all() -> bool:
    """SIGKILL every process of the namespace but us and init, until none is left."""
    for _ in range(5000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:  # nobody left to signal
            _reap()
            return True
        except OSError:
            pass
        _reap()
        time.sleep(0.0002)
    return False


def end_child(t: Template, wait_s: float = 0.0) -> None:
    """End the current child with its whole process tree (recorded in ``ended``)."""
    if t.pid is None:
        return
    if wait_s > 0:
        select.select([t.pidfd], [], [], wait_s)
    problem = None if _kill_all() else "processes of the child survived SIGKILL"
    os.close(t.pidfd)
    t.ended = {t.child_id: {"clean": problem is None, "problem": problem}}
    t.pid = t.pidfd = t.child_id = None
    t.problem = problem


def _reaper(t: Template, msg: dict, fds: tuple[int, ...]) -> None:  # pragma: no cover
    """Between the template and the child: forks the child, waits for it and writes its
    exit status to the parent's status pipe; the status dies with this process."""
    status_w = fds[2]
    try:
        pid = os.fork()
        if pid == 0:
            os.close(status_w)
            _child(t, msg, fds)
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        os.closerange(3, status_w)  # the template's pipes and socket, the child's
        os.closerange(status_w + 1, nofile)
        raw = os.waitpid(pid, 0)[1]
        os.write(status_w, STATUS.pack(raw))
    finally:
        os._exit(0)


def _child(t: Template, msg: dict, fds: tuple[int, ...]) -> None:  # pragma: no cover - child
    """The episode's process: only its pipes and log, its own run directory, a fresh loop
    and PRNGs, the guard on."""
    code = 0
    try:
        ctx = t.ctx
        t.sock.detach()  # its descriptor is closed below; the object must not close another
        req, resp, _status, log, run = fds  # the status pipe: its reaper closed it already
        req, resp, log, run = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (req, resp, log, run))
        for fd, new in ((req, CHILD_FDS[0]), (resp, CHILD_FDS[1]), (log, 1), (log, 2)):
            os.dup2(fd, new)
        os.fchdir(run)
        os.closerange(max(CHILD_FDS) + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        ctx.fd_in, ctx.fd_out = CHILD_FDS
        ctx.workdir = os.getcwd()
        # its configuration describes its own pipes and directory, as a started worker's does
        ctx.cfg = {**ctx.cfg, "fd_in": CHILD_FDS[0], "fd_out": CHILD_FDS[1], "zygote": False}
        ctx.cfg["workdir"] = ctx.workdir
        ctx.cfg.pop("fd_pass", None)
        sys.argv[-1] = json.dumps(ctx.cfg)
        cpu = int(ctx.cfg.get("cpu_seconds") or 0)
        if cpu:  # its own CPU time starts at zero: the same limit as a started worker
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        _reseed_sqlite()
        import asyncio

        ctx.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(ctx.loop)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        if t.compiled is not None:
            ctx.state["compiled"] = t.compiled
        ctx.guard.activate()
        # the template's sandbox status (the same namespaces, filters, uid) and its own
        hello = {**t.hello, "pid": os.getpid(), "clock": t.clock_reading(), "forked": True}
        ctx.send({**hello, "nonce": msg.get("hello")})
        t.ops.serve(ctx)
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException:  # noqa: BLE001 - the parent sees the closed pipe
        code = 1
    os._exit(code)


def _reseed_sqlite() -> None:
    """SQLite's PRNG state is the template's after a fork: reseed it from the OS."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libsqlite3.so.0").sqlite3_randomness(0, None)


#: what the parent hands over per child: request, response and status pipes, log, run directory
_HANDED = (stat.S_ISFIFO, stat.S_ISFIFO, stat.S_ISFIFO, stat.S_ISREG, stat.S_ISDIR)


def _receive_fds(t: Template) -> tuple[int, ...]:
    _data, fds, _flags, _addr = socket.recv_fds(t.sock, 1, len(_HANDED))
    kinds = [os.fstat(fd).st_mode for fd in fds]
    if len(fds) != len(_HANDED) or not all(ok(m) for ok, m in zip(_HANDED, kinds, strict=True)):
        for fd in fds:
            os.close(fd)
        raise OSError("spawn: expected the child's three pipes, its log and its run directory")
    return tuple(fds)


def _compile(t: Template, msg: dict) -> None:
    """Compile the app's source once (CPython's parser and compiler only: no line of it
    runs here) and import what its import statements name (:func:`_preload`)."""
    source, filename = msg.get("code"), f"<{msg.get('module') or 'awm_app'}>"
    if not isinstance(source, str) or (t.compiled and t.compiled[:2] == (source, filename)):
        return
    t.compiled = None
    try:
        tree = ast.parse(source, filename)
        t.compiled = (source, filename, compile(tree, filename, "exec", dont_inherit=True))
    except BaseException:  # noqa: BLE001 - the child compiles it and reports the error
        return
    _preload(t, tree)


def imported_names(tree: ast.Module) -> list[str]:
    """The absolute module names of a module's top-level ``import``/``from`` statements."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def preloadable(name: str, roots: frozenset[str]) -> bool:
    """Whether the template may import ``name``: a module of one of ``roots``, with no
    private (``_``), test or tool-plugin part (their import may run code meant for other
    uses, or pull a type checker or test runner into every child)."""
    parts = name.split(".")
    if parts[0] not in roots or not all(p.isidentifier() for p in parts):
        return False
    return not any(p.startswith("_") or p in _NOT_PRELOADED for p in parts)


#: module name parts the template never preloads: tests, type-checker and test-runner plugins
_NOT_PRELOADED = ("test", "tests", "testing", "mypy", "pytest_plugin")


def _preload(t: Template, tree: ast.Module) -> None:
    """Import the app's framework and standard library modules once, in the template (the
    library's own code; a module that fails to import is left to the child)."""
    for name in imported_names(tree):
        if name in sys.modules or not preloadable(name, t.preload_roots):
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - the child imports it and reports the error
            continue
        t.preloaded.append(name)


def op_spawn(t: Template, msg: dict) -> dict:
    started = time.perf_counter()
    end_child(t)
    if t.problem is not None:
        return {"ok": False, "error": "unclean", "message": t.problem}
    ended = time.perf_counter()
    _compile(t, msg)
    fds = _receive_fds(t)
    gc.freeze()  # the template's objects stay shared: fewer copy-on-write faults per child
    forking = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the reaper
        _reaper(t, msg, fds)
    for fd in fds:
        os.close(fd)
    t.pid, t.pidfd, t.child_id = pid, os.pidfd_open(pid), int(msg["child"])
    done = time.perf_counter()
    ms = {"end": ended - started, "compile": forking - ended, "fork": done - forking}
    return {"ok": True, "pid": pid, "ms": {k: round(v * 1000, 3) for k, v in ms.items()}}


def op_end(t: Template, msg: dict) -> dict:
    child = int(msg["child"])
    if t.child_id == child:
        end_child(t, float(msg.get("wait_s") or 0.0))
    ended = t.ended.get(child)
    if ended is None:
        return {"ok": True, "clean": t.problem is None, "problem": t.problem}
    return {"ok": True, **ended}


HANDLERS = {"spawn": op_spawn, "end": op_end, "ping": lambda t, msg: {"ok": True}}


def serve(t: Template) -> None:
    """Answer the parent until it closes the pipe; end a child as soon as it exits (its
    reaper exits then)."""
    ctx = t.ctx
    _block_signals()
    while True:
        watched = [ctx.fd_in] + ([t.pidfd] if t.pidfd is not None else [])
        ready = select.select(watched, [], [])[0]
        if t.pidfd is not None and t.pidfd in ready:
            end_child(t)
        if ctx.fd_in not in ready:
            continue
        msg = ctx.framing.recv_blocking(ctx.fd_in)
        if msg is None:
            end_child(t)
            return
        handler = HANDLERS.get(msg.get("op"))
        try:
            if handler is None:  # never a request, never dataset code
                text = f"the app template serves no {msg.get('op')!r}: only spawn, end, ping"
                reply = {"ok": False, "error": "unknown_op", "message": text}
            else:
                reply = handler(t, msg)
        except Exception as e:  # noqa: BLE001 - reported; the parent replaces the template
            reply = {"ok": False, "error": "template", "message": f"{type(e).__name__}: {e}"}
        reply["nonce"] = msg.get("nonce")
        ctx.send(reply)
