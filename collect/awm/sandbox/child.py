"""Worker entry point: ``python -I -B child.py CONFIG_JSON`` (inside bubblewrap unless
``isolation=python``). Standard library only until the web framework is imported; the
sibling modules are loaded by file path (the worker cannot import ``collect``)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PRELOAD = """
    datetime decimal enum typing re math random hashlib base64 collections functools
    itertools dataclasses time uuid string copy statistics textwrap difflib calendar
    fractions operator secrets hmac logging csv heapq bisect zoneinfo unicodedata
    numbers contextlib abc pathlib tempfile shutil glob fnmatch threading queue weakref
    ipaddress urllib.parse html email.utils typing_extensions
""".split()


def load_sibling(name: str, path: str | None = None):
    spec = importlib.util.spec_from_file_location(f"_sbx_{name}", path or f"{HERE}/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def set_limits(cfg: dict) -> None:
    """Hard limits equal to the soft ones (CPU: one second above, so SIGXCPU comes first)."""
    import resource

    def limit(which: int, value: int, slack: int = 0) -> None:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard - slack)
        resource.setrlimit(which, (value, value + slack))

    if cfg.get("memory_bytes"):
        limit(resource.RLIMIT_AS, cfg["memory_bytes"])
    if cfg.get("cpu_seconds"):
        used = resource.getrusage(resource.RUSAGE_SELF)
        limit(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime) + cfg["cpu_seconds"], 1)
    if cfg.get("fsize_bytes"):
        limit(resource.RLIMIT_FSIZE, cfg["fsize_bytes"])
    if cfg.get("nofile"):
        limit(resource.RLIMIT_NOFILE, cfg["nofile"])
    limit(resource.RLIMIT_CORE, 0)
    if cfg.get("nproc"):
        limit(resource.RLIMIT_NPROC, cfg["nproc"])


def import_framework(ctx) -> None:
    """FastAPI, httpx, SQLAlchemy, warmed with a throwaway app (app workers)."""
    import asyncio

    import fastapi
    import httpx
    import sqlalchemy
    import sqlalchemy.engine
    import sqlalchemy.orm  # noqa: F401

    with contextlib.suppress(Exception):
        import dateutil.parser  # noqa: F401
    ctx.loop = asyncio.new_event_loop()
    asyncio.set_event_loop(ctx.loop)
    ctx.mods.update(fastapi=fastapi, httpx=httpx, sqlalchemy=sqlalchemy)
    warm = fastapi.FastAPI()

    @warm.get("/w/{x}", operation_id="w")
    def _w(x: int, q: str = "a") -> dict:
        return {"x": x, "q": q}

    @warm.post("/p", operation_id="p")
    async def _p(body: dict = fastapi.Body(...)) -> dict:  # noqa: B008
        return body

    async def _warm() -> None:
        transport = httpx.ASGITransport(app=warm)
        async with httpx.AsyncClient(transport=transport, base_url="http://awm") as c:
            await c.get("/w/1", params={"q": "b"})
            await c.post("/p", json={"a": 1})
            await c.get("/w/x")

    ctx.loop.run_until_complete(_warm())
    warm.openapi()
    with contextlib.suppress(Exception):
        _warm_sqlalchemy(sqlalchemy)


def _warm_sqlalchemy(sqlalchemy) -> None:
    """The SQLite dialect and the ORM's first mapping, on a throwaway in-memory engine
    (imported once here instead of in every app an app template forks)."""
    import sqlalchemy.dialects.sqlite  # noqa: F401

    engine = sqlalchemy.create_engine("sqlite://")

    class Base(sqlalchemy.orm.DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = "warm"
        id = sqlalchemy.Column(sqlalchemy.Integer, primary_key=True)
        name = sqlalchemy.Column(sqlalchemy.String(20))

    try:
        Base.metadata.create_all(engine)
        with sqlalchemy.orm.Session(engine) as session:
            session.add(Row(name="a"))
            session.commit()
            session.query(Row).filter(Row.name == "a").all()
    finally:
        engine.dispose()


def install_seccomp(bpf_hex: str) -> None:
    """Load a filter compiled by libseccomp in the parent, on every thread (TSYNC)."""
    import ctypes
    import platform

    bpf = bytes.fromhex(bpf_hex)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = SockFprog(len(bpf) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    nr = {"x86_64": 317, "aarch64": 277}.get(platform.machine())
    if nr is not None:  # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog)
        rc = libc.syscall(ctypes.c_long(nr), 1, 1, ctypes.byref(prog))
    else:  # prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog): this thread only
        rc = libc.prctl(22, 2, ctypes.byref(prog), 0, 0)
    if rc != 0:
        raise OSError(ctypes.get_errno(), "loading the seccomp filter failed")


def isolate_network_python() -> tuple[bool, str | None]:
    """``isolation=python``: try unshare(CLONE_NEWNET) (root only)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x40000000) == 0:
            return True, None
        return False, os.strerror(ctypes.get_errno())
    except Exception as e:  # noqa: BLE001
        return False, repr(e)


def clock_reading() -> dict[str, float]:
    """What this process sees as "now" (Python's and SQLite's), for the parent's check."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    try:
        sql_now = conn.execute("SELECT CAST(strftime('%s', 'now') AS INTEGER)").fetchone()[0]
    finally:
        conn.close()
    return {"python": time.time(), "sqlite": float(sql_now)}


def runtime_roots(cfg: dict) -> tuple[str, ...]:
    """Directories dataset code may read: its own, the ones it was given, Python's."""
    roots = [cfg["workdir"], *cfg.get("read_dirs", []), "/usr/share/zoneinfo", *sys.path]
    roots += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    return tuple(sorted({os.path.realpath(p) for p in roots if p and os.path.isdir(p)}))


def main(config_json: str) -> None:
    cfg = json.loads(config_json)
    os.chdir(cfg["workdir"])
    sys.dont_write_bytecode = True
    framing, rules_mod = load_sibling("framing"), load_sibling("rules")
    guard_mod, ops = load_sibling("guard"), load_sibling("ops")
    fd_in, fd_out = cfg["fd_in"], cfg["fd_out"]

    def fail(message: str) -> None:
        reply = {"ok": False, "message": message, "nonce": cfg.get("nonce")}
        framing.write_all_blocking(fd_out, framing.encode(reply))

    set_limits(cfg)
    import warnings

    warnings.filterwarnings("ignore")
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            __import__(name)
    ctx = ops.Context(cfg, framing, None, fd_in, fd_out)
    try:
        if ctx.role == "env":
            import_framework(ctx)
        if ctx.role == "build":
            import signal

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
            ctx.database = load_sibling("database", cfg["database_py"])
    except Exception as e:  # noqa: BLE001
        return fail(f"framework import failed: {e!r}")
    netns, netns_error = bool(cfg.get("netns")), None
    if cfg.get("isolation") == "python":
        # exit when the parent dies (bubblewrap's --die-with-parent otherwise)
        load_sibling("parentwatch").watch_parent(name="sandbox-watchdog")
        if cfg.get("isolate_network", True):
            netns, netns_error = isolate_network_python()
    seccomp = False
    if cfg.get("seccomp_exec"):
        try:
            install_seccomp(cfg["seccomp_exec"])
            seccomp = True
        except OSError as e:
            return fail(f"seccomp filter could not be loaded: {e}")
    reading = clock_reading()
    zygote = bool(cfg.get("zygote"))
    if zygote and not cfg.get("pidns"):  # ending a child is kill(-1) in its PID namespace
        return fail("an app template needs its own PID namespace (isolation=os)")
    policy = rules_mod.Policy(
        role=ctx.role,
        read_roots=runtime_roots(cfg),
        write_roots=tuple(sorted({os.path.realpath(p) for p in cfg["write_dirs"]})),
        # a template's children talk over their own pipes, as descriptors 3 and 4
        protected_fds=frozenset((3, 4) if zygote else (fd_in, fd_out)),
        realpath=os.path.realpath,
    )
    ctx.guard = guard_mod.Guard(rules_mod, policy)
    if ctx.role != "verifier" and not zygote:  # forked children switch it on themselves
        ctx.guard.activate()
    hello = {"ok": True, "pid": os.getpid(), "role": ctx.role, "netns": netns}
    hello.update(netns_error=netns_error, clock=reading, seccomp=seccomp, nonce=cfg.get("nonce"))
    hello.update(isolation=cfg.get("isolation"), uid=os.getuid())
    if not zygote:
        ctx.send(hello)
        return ops.serve(ctx)
    import socket

    fork = load_sibling("fork")
    sock = socket.socket(fileno=cfg["fd_pass"])
    roots = frozenset(name.split(".")[0] for name in PRELOAD)
    template = fork.Template(ctx, sock, ops, clock_reading, preload_roots=roots)
    template.hello = {k: v for k, v in hello.items() if k not in ("nonce", "clock", "pid")}
    ctx.loop.close()  # each child makes its own (an epoll set is shared across a fork)
    ctx.loop = None
    ctx.send(hello)
    fork.serve(template)


if __name__ == "__main__":  # pragma: no cover - worker entry point
    try:
        main(sys.argv[1])
    except MemoryError:
        os._exit(3)
