"""The operations a worker serves: load_app, request, reset, export, build, verify.

Runs in the worker only (standard library plus, for app workers, the web
framework; loaded by file path). :func:`serve` reads one request frame at a
time and answers it with a frame that echoes the request's ``nonce``.

``verify`` is a fork server: the verifier worker itself never runs dataset
code. For each request it forks a fresh child from its clean state, the child
closes the control pipes, switches the guard on, runs the verifier and writes
its result into a private pipe; then every other process of the run is killed
(``kill(-1)`` inside the worker's PID namespace) and the worker answers. So no
run can change what the next one sees, and no run can write to the parent.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import select
import signal
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    import httpx

    from collect.awm.sandbox.guard import Guard

EXIT_MEMORY = 3


# -- the world clock on file times ------------------------------------------------------------
def _world_stat(st: os.stat_result, now: float) -> os.stat_result:
    ns = int(now * 1_000_000_000)
    fields = list(st[:10])
    fields[7:10] = [int(now)] * 3
    extra = {k: getattr(st, k) for k in ("st_blksize", "st_blocks", "st_rdev") if hasattr(st, k)}
    extra.update(st_atime=now, st_mtime=now, st_ctime=now)
    extra.update(st_atime_ns=ns, st_mtime_ns=ns, st_ctime_ns=ns)
    return os.stat_result(fields, extra)


class _WorldDirEntry:
    """An ``os.DirEntry`` whose ``stat()`` carries world-clock times."""

    __slots__ = ("_entry",)

    def __init__(self, entry: os.DirEntry[str]):
        self._entry = entry

    def __getattr__(self, name: str) -> Any:
        return getattr(self._entry, name)

    def __fspath__(self) -> str:
        return self._entry.__fspath__()

    def __repr__(self) -> str:
        return repr(self._entry)

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return _world_stat(self._entry.stat(follow_symlinks=follow_symlinks), time.time())


class _WorldScandir:
    def __init__(self, it: Iterator[os.DirEntry[str]]):
        self._it = it

    def __iter__(self):
        return self

    def __next__(self) -> _WorldDirEntry:
        return _WorldDirEntry(next(self._it))

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self._it.close()

    def close(self) -> None:
        self._it.close()


def use_world_clock_for_file_times() -> bool:
    """Files carry the world clock's time: ``os.stat``, ``os.lstat``, ``os.fstat`` and
    ``os.scandir`` entries report the frozen "now" (``time.time()`` under libfaketime) as
    their access, modification and change times. libfaketime fakes ``stat`` but not the
    ``stat64``/``fstatat64`` that CPython calls, so a new file's ``mtime`` was the real date
    and an app that returned it made two identical collections differ. Installed in every
    worker on a fixed clock, before any dataset code runs (``os.path.getmtime``,
    ``pathlib``, ``shutil`` go through these). Determinism for honest apps; not a
    boundary (the real time is no secret)."""
    if not os.environ.get("FAKETIME") or getattr(os.stat, "_world_clock", False):
        return False
    real = {name: getattr(os, name) for name in ("stat", "lstat", "fstat", "scandir")}

    def stat(path, *, dir_fd=None, follow_symlinks=True):
        st = real["stat"](path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        return _world_stat(st, time.time())

    def lstat(path, *, dir_fd=None):
        return _world_stat(real["lstat"](path, dir_fd=dir_fd), time.time())

    def fstat(fd):
        return _world_stat(real["fstat"](fd), time.time())

    def scandir(path="."):
        return _WorldScandir(real["scandir"](path))

    for name, fn in (("stat", stat), ("lstat", lstat), ("fstat", fstat), ("scandir", scandir)):
        fn.__name__ = fn.__qualname__ = name
        fn._world_clock = True
        for group in ("supports_dir_fd", "supports_fd", "supports_follow_symlinks"):
            members = getattr(os, group)
            if real[name] in members:  # the guard's dir_fd refusal keeps applying
                members.add(fn)
        setattr(os, name, fn)
    return True


use_world_clock_for_file_times()


class Context:
    """What the operations share inside one worker."""

    def __init__(self, cfg: dict, framing: ModuleType, guard: Guard, fd_in: int, fd_out: int):
        self.cfg = cfg
        self.role = cfg["role"]
        self.workdir = cfg["workdir"]
        self.framing = framing
        self.guard = guard
        self.fd_in, self.fd_out = fd_in, fd_out
        self.max_chars = int(cfg.get("max_response_chars") or 200_000)
        self.state: dict[str, object] = {}
        self.mods: dict[str, ModuleType] = {}
        self.loop = None
        self.database = None

    def send(self, obj: dict) -> None:
        self.framing.write_all_blocking(self.fd_out, self.framing.encode(obj))


# -- helpers -------------------------------------------------------------------------------
def has_memory_error(e: BaseException | None, depth: int = 0) -> bool:
    if e is None or depth > 20:
        return False
    if isinstance(e, MemoryError):
        return True
    for sub in getattr(e, "exceptions", ()) or ():
        if has_memory_error(sub, depth + 1):
            return True
    return has_memory_error(e.__cause__ or e.__context__, depth + 1)


def describe_exception(e: BaseException, filename: str) -> str:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
    where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def _syntax_reply(e: SyntaxError, what: str) -> dict:
    return {
        "ok": False,
        "error": "syntax_error",
        "lineno": e.lineno,
        "message": f"{what} does not compile: line {e.lineno}: {e.msg}",
    }


# -- app workers ---------------------------------------------------------------------------------
def _redirect_engines(ctx: Context, url: str) -> None:
    sqlalchemy = ctx.mods["sqlalchemy"]
    real_create_engine = ctx.mods.setdefault("real_create_engine", sqlalchemy.create_engine)

    def create_engine(*args, **kwargs):
        target = args[0] if args else kwargs.get("url")
        text = str(target) if target is not None else "sqlite"
        if text.startswith("sqlite") or target is None:
            kwargs.pop("url", None)
            connect_args = dict(kwargs.pop("connect_args", None) or {})
            connect_args["check_same_thread"] = False
            return real_create_engine(url, *args[1:], connect_args=connect_args, **kwargs)
        raise PermissionError(
            f"sandbox: create_engine for a non-SQLite database ({text.split(':')[0]}) refused"
        )

    sqlalchemy.create_engine = create_engine
    sqlalchemy.engine.create_engine = create_engine


class _Phases:
    """Wall and CPU milliseconds of each phase of a load (``done``: name -> [wall, cpu])."""

    def __init__(self):
        self.done: dict[str, list[float]] = {}
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def mark(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.done[name] = [round((wall - self._wall) * 1000, 3), round((cpu - self._cpu) * 1000, 3)]
        self._wall, self._cpu = wall, cpu


def op_load_app(ctx: Context, msg: dict) -> dict:
    """Copy the seed, exec the app, make its OpenAPI document (unless the parent has the
    code's), open the working database and snapshot it for ``reset`` (unless
    ``snapshot`` is false: a forked app serves one episode and is never reset)."""
    import sqlite3

    fastapi, httpx = ctx.mods["fastapi"], ctx.mods["httpx"]
    phases = _Phases()
    db_path = msg["db_path"]
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(db_path + suffix)
    if msg.get("seed_path"):  # the initial database, read-only here: a copy to work on
        try:
            _copy_seed(ctx, msg["seed_path"], db_path)
        except OSError as e:
            return _full_reply(ctx, e) or {"ok": False, "error": "load_error", "message": str(e)}
    phases.mark("db_copy")
    os.environ["DATABASE_PATH"] = f"sqlite:///{db_path}"
    _redirect_engines(ctx, f"sqlite:///{db_path}")
    module_name = msg.get("module", "awm_app")
    filename = f"<{module_name}>"
    started = time.perf_counter()
    pre = ctx.state.pop("compiled", None)  # an app template's compilation of the same source
    compiled = pre[2] if pre and pre[0] == msg["code"] and pre[1] == filename else None
    try:
        module = ctx.guard.exec_dataset_code(msg["code"], module_name, filename, compiled)
    except SyntaxError as e:
        return _syntax_reply(e, "app code")
    except MemoryError:
        raise
    except BaseException as e:  # noqa: BLE001 - report anything the code raised
        message = "app failed to load: " + describe_exception(e, filename)
        return {"ok": False, "error": "load_error", "message": message}
    phases.mark("exec")
    app = module.__dict__.get("app")
    if not isinstance(app, fastapi.FastAPI):
        app = next((v for v in module.__dict__.values() if isinstance(v, fastapi.FastAPI)), None)
    if app is None:
        message = "app failed to load: the code defines no FastAPI instance"
        return {"ok": False, "error": "load_error", "message": message}
    try:  # a forked app whose code's document the parent has: not made again
        spec = app.openapi() if msg.get("openapi", True) else None
    except BaseException as e:  # noqa: BLE001
        message = "app failed to load: OpenAPI generation failed: " + repr(e)[:500]
        return {"ok": False, "error": "load_error", "message": message}
    phases.mark("openapi")
    st = ctx.state
    st["app"], st["module"], st["filename"] = app, module, filename
    st["client"] = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=True),
        base_url="http://awm.local",
        timeout=None,
    )
    work = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    work.execute("PRAGMA synchronous=OFF")
    st["work"], st["snapshot"] = work, None
    if msg.get("snapshot", True):  # a forked app is never reset (its episode's own child)
        st["snapshot"] = sqlite3.connect(":memory:", check_same_thread=False)
        work.backup(st["snapshot"])
    phases.mark("open_db")
    load_ms = (time.perf_counter() - started) * 1000  # the app's own load, in the worker
    cpu_ms = time.process_time() * 1000  # this process's CPU so far (a forked child's: since fork)
    reply = {"ok": True, "openapi": spec, "load_ms": load_ms, "cpu_ms": cpu_ms}
    return {**reply, "phases": phases.done}


async def _do_request(client: httpx.AsyncClient, msg: dict) -> httpx.Response:
    kwargs: dict[str, object] = {"params": [tuple(p) for p in msg.get("query") or []]}
    if msg.get("has_body"):
        kwargs["json"] = msg.get("body")
    return await client.request(msg["method"], msg["path"], **kwargs)


def op_request(ctx: Context, msg: dict) -> dict:
    client = ctx.state.get("client")
    if client is None:
        return {"ok": False, "error": "not_loaded", "message": "no app loaded"}
    started = time.perf_counter()
    try:
        response = ctx.loop.run_until_complete(_do_request(client, msg))
    except BaseException as e:  # noqa: BLE001 - the app raised: a server error
        if has_memory_error(e):
            raise MemoryError from None
        return {
            "ok": True,
            "status": 500,
            "exception": True,
            "text": "Internal Server Error: " + describe_exception(e, ctx.state["filename"]),
            "app_ms": (time.perf_counter() - started) * 1000,
        }
    text = response.text
    return {
        "ok": True,
        "status": response.status_code,
        "text": text[: ctx.max_chars],
        "truncated": len(text) > ctx.max_chars,
        "app_ms": (time.perf_counter() - started) * 1000,
    }


def op_reset(ctx: Context, msg: dict) -> dict:
    import sqlite3

    work, snapshot = ctx.state.get("work"), ctx.state.get("snapshot")
    if work is None:
        return {"ok": False, "message": "no app loaded"}
    if snapshot is None:
        return {"ok": False, "message": "a forked app serves one episode: it has no snapshot"}
    try:
        snapshot.backup(work)
    except sqlite3.OperationalError:
        import gc

        module = ctx.state.get("module")
        engine_type = ctx.mods["sqlalchemy"].engine.Engine
        for value in list(module.__dict__.values()) if module is not None else []:
            if isinstance(value, engine_type):
                with contextlib.suppress(Exception):
                    value.dispose()
        gc.collect()
        snapshot.backup(work)
    return {"ok": True}


def _copy_seed(ctx: Context, src: str, dest: str) -> None:
    """The read-only seed to a new working database (the bound: RLIMIT_FSIZE, the tmpfs)."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            ctx.framing.copy_fd(fd, out, None, "the initial database")
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _full_reply(ctx: Context, e: BaseException) -> dict | None:
    """The named error of a write that failed because the run directory is full."""
    text = str(e)
    if getattr(e, "errno", None) == 28 or "disk is full" in text or "No space left" in text:
        mib = ctx.cfg.get("run_dir_mb")
        where = f"tmpfs {mib} MiB, sandbox.run_dir_mb" if mib else "its file system"
        message = f"the app's run directory is full ({where}): {text}"
        return {"ok": False, "error": "run_dir_full", "message": message}
    return None


def op_export(ctx: Context, msg: dict) -> dict:
    import sqlite3

    work = ctx.state.get("work")
    if work is None:
        return {"ok": False, "message": "no app loaded"}
    dest = os.path.join(ctx.workdir, os.path.basename(msg.get("dest") or "export.db"))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(dest)
    try:
        out = sqlite3.connect(dest)
        try:
            work.backup(out)
        finally:
            out.close()
    except (sqlite3.Error, OSError) as e:
        with contextlib.suppress(OSError):
            os.unlink(dest)
        reply = _full_reply(ctx, e)
        if reply is None:
            raise
        return reply
    return {"ok": True, "path": dest}


# -- build workers -----------------------------------------------------------------------------
def op_build(ctx: Context, msg: dict) -> dict:
    database = ctx.database
    if database is None:
        return {"ok": False, "error": "unknown_op", "message": "build runs in a build worker"}
    dest = os.path.join(ctx.workdir, os.path.basename(msg.get("dest") or "initial.db"))
    try:
        report = database.build_database(
            dest,
            msg.get("db_schema"),
            msg.get("sample_data"),
            schema_source=msg.get("schema_source") or "gen_db.jsonl",
            sample_source=msg.get("sample_source") or "gen_sample.jsonl",
            deadline=time.monotonic() + float(msg.get("time_limit_s") or 60.0),
            max_value_bytes=int(msg.get("max_value_bytes") or 0) or None,
        )
    except database.BuildAborted as e:
        return {"ok": False, "error": "build_limit", "message": str(e)}
    return {"ok": True, "path": dest, "report": report.to_json()}


# -- verifier workers: a fork server ------------------------------------------------------------
def run_verifier(ctx: Context, msg: dict) -> dict:
    """Exec and call one verifier (in the forked child, guard active)."""
    filename = "<verifier>"
    name = f"awm_verifier_{uuid.uuid4().hex[:8]}"
    code = msg.get("code")
    if msg.get("semantics") == "official" and (not isinstance(code, str) or len(code.strip()) < 10):
        return {"ok": False, "error": "short_code", "message": "verifier code under 10 characters"}
    try:
        module = ctx.guard.exec_dataset_code(msg["code"], name, filename)
    except SyntaxError as e:
        return _syntax_reply(e, "verifier")
    except MemoryError:
        raise
    except BaseException as e:  # noqa: BLE001
        return {"ok": False, "error": "error", "message": describe_exception(e, filename)}
    official = msg.get("semantics") == "official"
    function = _official_function(msg) if official else msg.get("function") or ""
    fn = module.__dict__.get(function)
    if not callable(fn):
        message = f"verifier defines no function {function!r}"
        return {"ok": False, "error": "error", "message": message}
    if official:
        return _call_official(fn, msg, filename)
    kwargs = {"initial_db_path": msg["initial_db_path"], "final_db_path": msg["final_db_path"]}
    if msg.get("mode") == "code":
        kwargs["final_answer"] = msg.get("final_answer")
    try:
        result = fn(**kwargs)
    except BaseException as e:  # noqa: BLE001
        if has_memory_error(e):
            raise MemoryError from None
        return {"ok": False, "error": "error", "message": describe_exception(e, filename)}
    if msg.get("mode") == "code":
        label = result.get("result") if isinstance(result, dict) else None
        if not isinstance(label, str) or label.strip().lower() not in ("complete", "others"):
            text = str(result)[:300]
            message = f"expected {{'result': 'complete'|'others'}}, got {text}"
            return {"ok": False, "error": "invalid_result", "message": message}
    return {"ok": True, "result": result}


def _official_function(msg: dict) -> str:
    """AWM verify.py's choice: the name of the first line that, stripped, begins with
    ``def verify_`` and holds a ``(``; without one, the mode's default name."""
    for line in str(msg["code"]).split("\n"):
        text = line.strip()
        if text.startswith("def verify_") and "(" in text:
            return text[len("def ") : text.index("(")].strip()
    return "verify_task_completion" if msg.get("mode") == "code" else "verify_task"


def _call_official(fn: Callable[..., object], msg: dict, filename: str) -> dict:
    """Call ``fn`` as AWM verify.py does (in the forked child, guard active): with the
    keyword arguments its signature names (``initial_db_path``, ``final_db_path``,
    ``final_answer``: the final answer in code mode, ``""`` in SQL mode), or, when it
    names none and takes two or more, positionally. Code mode: a dict with a ``result``
    key gives the verdict ``complete`` when the value is exactly that, else ``others``;
    any other return value is ``invalid_result``. SQL mode: a dict whose
    ``execution_status`` is ``error`` is an error."""
    code_mode = msg.get("mode") == "code"
    answer = (msg.get("final_answer") or "") if code_mode else ""
    named = {
        "initial_db_path": msg["initial_db_path"],
        "final_db_path": msg["final_db_path"],
        "final_answer": answer,
    }
    try:
        params = inspect.signature(fn).parameters
        kwargs = {key: value for key, value in named.items() if key in params}
        if not kwargs and len(params) >= 2:
            result = fn(*list(named.values())[: min(len(params), 3)])
        else:
            result = fn(**kwargs)
        labelled = code_mode and isinstance(result, dict) and "result" in result
        verdict = "complete" if labelled and result["result"] == "complete" else "others"
    except BaseException as e:  # noqa: BLE001
        if has_memory_error(e):
            raise MemoryError from None
        return {"ok": False, "error": "error", "message": describe_exception(e, filename)}
    if not code_mode:
        if isinstance(result, dict) and result.get("execution_status") == "error":
            message = f"verifier reported execution_status error: {str(result)[:300]}"
            return {"ok": False, "error": "error", "message": message}
        return {"ok": True, "result": result}
    if not labelled:
        message = f"expected a dict with a 'result' key, got {str(result)[:300]}"
        return {"ok": False, "error": "invalid_result", "message": message}
    return {"ok": True, "result": result, "verdict": verdict}


def _run_child(ctx: Context, msg: dict, result_w: int) -> None:  # pragma: no cover - child
    code = 0
    try:
        os.close(ctx.fd_in)
        os.close(ctx.fd_out)
        if not ctx.cfg.get("pidns"):
            os.setpgid(0, 0)
        ctx.guard.activate()
        try:
            data = ctx.framing.encode(run_verifier(ctx, msg))
        except (TypeError, ValueError, RecursionError) as e:
            reply = {"ok": False, "error": "invalid_result", "message": f"result not JSON: {e}"}
            data = ctx.framing.encode(reply)
        ctx.framing.write_all_blocking(result_w, data)
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException:  # noqa: BLE001 - the parent sees the missing result
        code = 1
    os._exit(code)


def _kill_run(ctx: Context, pid: int) -> None:
    """Every process of the run: the whole PID namespace but us (and its init), or the group."""
    with contextlib.suppress(OSError):
        if ctx.cfg.get("pidns"):
            os.kill(-1, signal.SIGKILL)
        else:
            os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _read_result(ctx: Context, fd: int, pidfd: int, deadline: float) -> bytes | None:
    """The run's result frame, or None when it died or ran out of time first."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    poller.register(pidfd, select.POLLIN)
    buf = bytearray()
    size = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        events = dict(poller.poll(max(1, int(remaining * 1000))))
        if fd in events:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            buf += chunk
            if size is None and len(buf) >= ctx.framing.HEADER.size:
                (size,) = ctx.framing.HEADER.unpack(bytes(buf[: ctx.framing.HEADER.size]))
                ctx.framing.check_size(size)
            if size is not None and len(buf) >= ctx.framing.HEADER.size + size:
                return bytes(buf[ctx.framing.HEADER.size : ctx.framing.HEADER.size + size])
        elif pidfd in events:
            # exited: drain what it wrote
            poller.unregister(pidfd)
            deadline = min(deadline, time.monotonic() + 0.2)


def _death_reply(ctx: Context, status: int | None, timeout: float) -> dict:
    if status is None:
        return {
            "ok": False,
            "error": "timeout",
            "message": f"timed out after {timeout:g} s during verify (wall-clock limit); run killed",
        }
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_MEMORY:
        mib = int(ctx.cfg.get("memory_bytes") or 0) >> 20
        message = f"worker ran out of memory (RLIMIT_AS {mib} MiB) during verify"
        return {"ok": False, "error": "memory", "message": message}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            message = "worker CPU time limit exceeded (RLIMIT_CPU) during verify"
            return {"ok": False, "error": "cpu", "message": message}
        return {"ok": False, "error": "crashed", "message": f"verifier killed by signal {sig}"}
    return {"ok": False, "error": "crashed", "message": "verifier exited without a result"}


def op_verify(ctx: Context, msg: dict) -> dict:
    started = time.perf_counter()
    reply = _fork_run(ctx, msg)
    reply["run_ms"] = (time.perf_counter() - started) * 1000
    return reply


def _reap() -> None:
    """Collect the exit status of every child that has died (never blocks)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] <= 0:
                return
        except ChildProcessError:
            return


def _fork_run(ctx: Context, msg: dict) -> dict:
    timeout = float(msg.get("timeout") or 30.0)
    _reap()
    result_r, result_w = os.pipe()
    gc.freeze()  # the template's objects stay shared: fewer copy-on-write faults per run
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(result_r)
        _run_child(ctx, msg, result_w)
    os.close(result_w)
    pidfd = os.pidfd_open(pid)
    try:
        try:
            deadline = time.monotonic() + timeout
            body = _read_result(ctx, result_r, pidfd, deadline)
        except ctx.framing.FrameError as e:
            body, problem = None, str(e)
        else:
            problem = None
        # out of time only if the deadline passed with the run still going (an EOF
        # comes before the exit is visible on the pidfd)
        timed_out = (
            body is None
            and problem is None
            and time.monotonic() >= deadline
            and _still_running(pidfd)
        )
        _kill_run(ctx, pid)  # before the answer: nothing of this run lives on
        # the exit status matters only without a result; otherwise the (already
        # killed) child is reaped later, off the critical path
        status = os.waitpid(pid, 0)[1] if body is None else None
        _reap()
    finally:
        os.close(result_r)
        os.close(pidfd)
    if problem is not None:
        return {"ok": False, "error": "protocol", "message": f"verifier result: {problem}"}
    if body is None:
        return _death_reply(ctx, None if timed_out else status, timeout)
    try:
        return ctx.framing.decode(body)
    except ctx.framing.FrameError as e:
        return {"ok": False, "error": "protocol", "message": f"verifier result: {e}"}


def _still_running(pidfd: int) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return not poller.poll(0)


HANDLERS = {
    "ping": lambda ctx, msg: {"ok": True},
    "load_app": op_load_app,
    "request": op_request,
    "reset": op_reset,
    "export": op_export,
    "verify": op_verify,
    "build": op_build,
}


def serve(ctx: Context) -> None:
    """Answer requests until the parent closes the pipe."""
    while True:
        msg = ctx.framing.recv_blocking(ctx.fd_in)
        if msg is None:
            return
        nonce = msg.get("nonce")
        handler = HANDLERS.get(msg.get("op"))
        try:
            if handler is None:
                reply = {
                    "ok": False,
                    "error": "unknown_op",
                    "message": f"unknown op {msg.get('op')!r}",
                }
            else:
                reply = handler(ctx, msg)
        except MemoryError:
            ctx.state.clear()
            mib = int(ctx.cfg.get("memory_bytes") or 0) >> 20
            message = f"worker ran out of memory (RLIMIT_AS {mib} MiB) during {msg.get('op')}"
            ctx.send(
                {"ok": False, "fatal": True, "error": "memory", "message": message, "nonce": nonce}
            )
            os._exit(EXIT_MEMORY)
        except RecursionError as e:
            reply = {"ok": False, "error": "error", "message": f"RecursionError: {e}"}
        except BaseException as e:  # noqa: BLE001 - keep the loop alive, report
            reply = {"ok": False, "error": "error", "message": f"{type(e).__name__}: {e}"}
        reply["nonce"] = nonce
        try:
            ctx.send(reply)
        except MemoryError:
            os._exit(EXIT_MEMORY)
        except (TypeError, ValueError, RecursionError) as e:
            ctx.send(
                {"ok": False, "error": "error", "message": f"reply not JSON: {e}", "nonce": nonce}
            )


__all__ = ["HANDLERS", "Context", "serve"]
