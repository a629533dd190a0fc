"""The Python-level rules of a worker, as plain functions (standard library only).

This is the *first* layer: it gives dataset code early, clear errors
(``sandbox: opening of '/etc/passwd' (outside the allowed directories)
refused``). It is not the boundary — code that reaches the interpreter's
internals can switch it off — the kernel is (see :mod:`collect.awm.sandbox.confine`).
Nothing here has side effects: the worker's guard calls :meth:`Policy.audit`
from its audit hook and :func:`import_refusal` from its ``__import__``; the
tests call them directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote

DENY_MODULES = frozenset(
    """
    subprocess _posixsubprocess socket _socket ssl _ssl ctypes _ctypes cffi
    multiprocessing _multiprocessing concurrent.futures.process asyncio.subprocess pty
    resource signal _signal posix nt _thread importlib imp zipimport runpy builtins gc
    inspect code pdb bdb pickle _pickle marshal shelve dill cloudpickle urllib.request
    http.client http.server socketserver ftplib smtplib poplib imaplib telnetlib xmlrpc
    webbrowser requests httpx httpcore aiohttp urllib3 site venv ensurepip pip
    setuptools distutils faulthandler tracemalloc _io pyseccomp seccomp
    """.split()
)
OS_DENY = frozenset(
    """
    system popen fork forkpty kill killpg abort _exit posix_spawn posix_spawnp
    register_at_fork setuid setgid seteuid setegid setreuid setregid setresuid setresgid
    chroot plock pidfd_open memfd_create openpty login_tty sched_setaffinity nice
    setpriority setsid setpgid tcsetpgrp unshare setns
    """.split()
)
OS_DENY_PREFIXES = ("exec", "spawn", "posix_spawn", "wait")
SYS_ALLOW = tuple(
    """
    argv byteorder exc_info exception float_info getdefaultencoding
    getfilesystemencoding getrecursionlimit getsizeof hexversion implementation int_info
    maxsize maxunicode platform stderr stdout version version_info exit
    """.split()
)
BUILTINS_DENY = frozenset(
    """
    breakpoint input help exit quit copyright credits license __import__ exec eval
    __loader__ __spec__
    """.split()
)
BLOCKED_EVENTS = frozenset(
    """
    subprocess.Popen os.system os.exec os.posix_spawn os.spawn os.fork os.forkpty
    os.startfile os.kill os.killpg os.setuid signal.pthread_kill resource.setrlimit
    resource.prlimit sys.addaudithook sqlite3.enable_load_extension
    sqlite3.load_extension socket.bind socket.connect socket.sendto socket.sendmsg
    socket.getaddrinfo socket.gethostbyname socket.gethostbyaddr socket.gethostname
    socket.getnameinfo socket.sethostname winreg.OpenKey pty.spawn webbrowser.open
    sys.settrace sys.setprofile sys._current_frames
    """.split()
)
WRITE_PATH_EVENTS = frozenset(
    """
    os.remove os.rmdir os.mkdir os.chmod os.chown os.truncate os.utime os.chflags
    os.lchflags os.mkfifo os.mknod os.setxattr os.removexattr shutil.rmtree shutil.chown
    """.split()
)
TWO_PATH_EVENTS = frozenset("os.rename os.link os.symlink shutil.copyfile shutil.move".split())
READ_PATH_EVENTS = frozenset(
    "os.listdir os.scandir glob.glob os.chdir os.getxattr os.listxattr".split()
)
READ_FILES = frozenset({"/dev/null", "/dev/urandom", "/dev/random", "/dev/zero", "/etc/localtime"})

# SQLite authorizer action codes (sqlite3.h)
SQLITE_OK, SQLITE_DENY = 0, 1
_CREATE_TEMP = frozenset({3, 4, 5, 6, 7})
_DROP_TEMP = frozenset({12, 13, 14, 15})
_PRAGMA, _READ, _SELECT, _TRANSACTION = 19, 20, 21, 22
_ATTACH, _DETACH, _FUNCTION, _SAVEPOINT, _RECURSIVE = 24, 25, 31, 32, 33
_WRITES = frozenset({1, 2, 8, 9, 10, 11, 16, 17, 18, 23, 26, 27, 28, 29, 30})
WRITE_PRAGMAS = frozenset(
    """
    journal_mode writable_schema schema_version user_version application_id
    wal_checkpoint auto_vacuum incremental_vacuum page_size optimize integrity_check
    quick_check
    """.split()
)


# -- imports ---------------------------------------------------------------------------
def denied_module(name: str) -> str | None:
    """The denied prefix of the dotted module ``name`` (``subprocess`` for ``subprocess.x``)."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix in DENY_MODULES:
            return prefix
    return None


def import_refusal(name: str, fromlist: Iterable[object] | None = (), level: int = 0) -> str | None:
    """Why ``__import__(name, fromlist=..., level=...)`` is refused to dataset code (None: allowed)."""
    if level:
        return "sandbox: relative imports are not allowed"
    bad = denied_module(name)
    if bad is None:
        for item in fromlist or ():
            if isinstance(item, str) and denied_module(f"{name}.{item}"):
                bad = f"{name}.{item}"
                break
    return None if bad is None else f"sandbox: import of {bad!r} is not allowed"


def os_attribute_allowed(name: str) -> bool:
    """Whether the ``os`` proxy handed to dataset code keeps attribute ``name``."""
    return name not in OS_DENY and not name.startswith(OS_DENY_PREFIXES)


# -- paths -----------------------------------------------------------------------------
def is_under(path: str, roots: Iterable[str]) -> bool:
    """``path`` equals one of ``roots`` or lies below one (plain string test on real paths)."""
    for root in roots:
        base = root.rstrip("/")
        if path in (root, base) or path.startswith(base + "/"):
            return True
    return False


def path_text(path: object) -> str | None:
    """``path`` as text (str, bytes or PathLike); None for descriptors and other objects
    (an audit event's argument: whatever dataset code passed)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path if isinstance(path, str) else None


def relative_escape(path: str) -> bool:
    """A relative path with a ``..`` component: it may be resolved against a ``dir_fd``
    the audit event does not show, so it is refused instead of guessed."""
    return not path.startswith("/") and ".." in path.replace("\\", "/").split("/")


def sqlite_target(db: object) -> str | None:
    """The file an ``sqlite3.connect(db)`` opens (None: in memory or not a path)."""
    db = path_text(db)
    if db is None or db in ("", ":memory:"):
        return None
    if db.startswith("file:"):
        rest = db[5:].split("?", 1)[0].split("#", 1)[0]
        if rest in ("", ":memory:") or "mode=memory" in db:
            return None
        if rest.startswith("//"):
            rest = rest[2:]
            rest = rest[rest.index("/") :] if "/" in rest else rest
        return unquote(rest)
    return db


def open_is_write(mode: object, flags: object) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))


@dataclass(frozen=True)
class Policy:
    """What one worker may touch. ``realpath`` resolves paths (injected for tests)."""

    role: str
    read_roots: tuple[str, ...]
    write_roots: tuple[str, ...]
    protected_fds: frozenset[int] = frozenset()
    read_files: frozenset[str] = READ_FILES
    realpath: Callable[[str], str] = field(default=os.path.realpath, compare=False)

    def _resolve(self, path: object) -> tuple[str | None, str | None]:
        text = path_text(path)
        if text is None:
            return None, None
        if relative_escape(text):
            return None, f"relative path {text!r} with '..'"
        return self.realpath(text), None

    def read_refusal(self, path: object, what: str) -> str | None:
        p, problem = self._resolve(path)
        if problem:
            return f"{what} of {problem}"
        if p is None or p in self.read_files:
            return None
        if is_under(p, self.read_roots) or is_under(p, self.write_roots):
            return None
        return f"{what} of {p!r} (outside the allowed directories)"

    def write_refusal(self, path: object, what: str) -> str | None:
        p, problem = self._resolve(path)
        if problem:
            return f"{what} of {problem}"
        if p is None or p == "/dev/null" or is_under(p, self.write_roots):
            return None
        return f"{what} of {p!r} (not a writable directory of this worker)"

    def sqlite_refusal(self, db: object) -> str | None:
        target = sqlite_target(db)
        if target is None:
            return None
        if relative_escape(target):
            return f"sqlite3.connect to relative path {target!r} with '..'"
        p = self.realpath(target)
        if not (is_under(p, self.read_roots) or is_under(p, self.write_roots)):
            return f"sqlite3.connect to {p!r} (outside the allowed directories)"
        if self.role == "env" and not is_under(p, self.write_roots):
            return f"sqlite3.connect to {p!r} (not in the app's directory)"
        return None

    def audit(self, event: str, args: tuple) -> str | None:
        """Why the audited operation is refused (None: allowed)."""
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if isinstance(path, int):
                return (
                    "reopening the worker's control channel" if path in self.protected_fds else None
                )
            if open_is_write(mode, flags):
                return self.write_refusal(path, "opening for writing")
            return self.read_refusal(path, "opening")
        if event in BLOCKED_EVENTS or event.startswith("ctypes."):
            return event
        if event == "socket.__new__":
            family = args[1] if len(args) > 1 else None
            return None if family in (1, -1, None) else f"socket creation (family {family})"
        if event == "sqlite3.connect":
            return self.sqlite_refusal(args[0] if args else None)
        if event in WRITE_PATH_EVENTS:
            return self.write_refusal(args[0] if args else None, event)
        if event in TWO_PATH_EVENTS:
            first = (
                (
                    self.read_refusal(args[0], event)
                    if event == "shutil.copyfile"
                    else self.write_refusal(args[0], event)
                )
                if args
                else None
            )
            return first or (self.write_refusal(args[1], event) if len(args) > 1 else None)
        if event in READ_PATH_EVENTS and args and not isinstance(args[0], int):
            return self.read_refusal(args[0], event)
        return None


# -- SQLite authorizers ------------------------------------------------------------------
def authorize_env(
    action: int, arg1: str | None, arg2: str | None, dbname: str | None, source: str | None
) -> int:
    """App workers: anything on their own database, no ATTACH/DETACH."""
    return SQLITE_DENY if action in (_ATTACH, _DETACH) else SQLITE_OK


def authorize_readonly(
    action: int, arg1: str | None, arg2: str | None, dbname: str | None, source: str | None
) -> int:
    """Verifier workers: reads, temp objects and harmless pragmas only."""
    if action in (_ATTACH, _DETACH):
        return SQLITE_DENY
    if action in (_READ, _SELECT, _FUNCTION, _TRANSACTION, _SAVEPOINT, _RECURSIVE):
        return SQLITE_OK
    if action in _CREATE_TEMP or action in _DROP_TEMP:
        return SQLITE_OK
    if action == _PRAGMA:
        return SQLITE_DENY if str(arg1 or "").lower() in WRITE_PRAGMAS else SQLITE_OK
    if action in _WRITES and dbname == "temp":
        return SQLITE_OK
    return SQLITE_DENY
