"""The Python-level rules of a worker (collect/awm/sandbox/rules.py), as plain functions."""

from __future__ import annotations

import os

import pytest

from collect.awm.sandbox import framing, rules
from collect.awm.sandbox.rules import Policy

ROOTS = Policy(
    role="env",
    read_roots=("/py", "/work/run"),
    write_roots=("/work/run",),
    protected_fds=frozenset({3, 4}),
    realpath=lambda p: os.path.normpath(p if p.startswith("/") else "/work/run/" + p),
)
VERIFIER = Policy(
    role="verifier",
    read_roots=("/py", "/work/inbox"),
    write_roots=(),
    realpath=ROOTS.realpath,
)


@pytest.mark.parametrize(
    ("name", "fromlist", "level", "refused"),
    [
        ("json", (), 0, None),
        ("subprocess", (), 0, "subprocess"),
        ("os.path", (), 0, None),
        ("concurrent.futures.process", (), 0, "concurrent.futures.process"),
        ("concurrent.futures", ("process",), 0, "concurrent.futures.process"),
        ("concurrent.futures", ("thread",), 0, None),
        ("importlib.util", (), 0, "importlib"),
        ("ctypes", (), 0, "ctypes"),
        ("pyseccomp", (), 0, "pyseccomp"),
        ("x", (), 1, "relative"),
    ],
)
def test_import_refusal(name, fromlist, level, refused):
    message = rules.import_refusal(name, fromlist, level)
    if refused is None:
        assert message is None
    else:
        assert message is not None and refused in message


def test_os_proxy_drops_process_control():
    for name in ("system", "fork", "execv", "spawnl", "posix_spawn", "kill", "setuid", "unshare"):
        assert not rules.os_attribute_allowed(name)
    for name in ("path", "listdir", "getcwd", "environ", "open"):
        assert rules.os_attribute_allowed(name)


def test_is_under_is_a_path_prefix_not_a_string_prefix():
    assert rules.is_under("/work/run/a.db", ("/work/run",))
    assert rules.is_under("/work/run", ("/work/run/",))
    assert not rules.is_under("/work/run2/a.db", ("/work/run",))
    assert not rules.is_under("/", ("/work",))


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (("/py/lib/json.py", "r", 0), None),
        (("/etc/passwd", "r", 0), "opening of '/etc/passwd' (outside the allowed directories)"),
        (("/dev/null", "w", 0), None),
        (("/work/run/x.db", "w", 0), None),
        (("/py/evil.py", "w", 0), "opening for writing of '/py/evil.py'"),
        (("/py/x", None, os.O_RDWR), "opening for writing"),
        (("x.db", "a", 0), None),
        (("../../../etc/hostname", "r", 0), "relative path '../../../etc/hostname' with '..'"),
        ((b"/etc/shadow", "r", 0), "outside the allowed directories"),
        ((4, "w", 0), "reopening the worker's control channel"),
        ((7, "w", 0), None),
    ],
)
def test_open_decisions(args, refusal):
    message = ROOTS.audit("open", args)
    if refusal is None:
        assert message is None
    else:
        assert message is not None and refusal in message


def test_events_that_are_always_refused():
    for event in (
        "subprocess.Popen",
        "os.fork",
        "os.system",
        "resource.setrlimit",
        "ctypes.dlopen",
        "sys.addaudithook",
        "socket.connect",
        "sqlite3.load_extension",
        "os.exec",
    ):
        assert ROOTS.audit(event, ()) == event
    assert ROOTS.audit("socket.__new__", (None, 2, 1, 0)) == "socket creation (family 2)"
    assert ROOTS.audit("socket.__new__", (None, 1, 1, 0)) is None
    assert ROOTS.audit("compile", (b"", "<x>")) is None


def test_path_events():
    assert ROOTS.audit("os.remove", ("/work/run/a",)) is None
    assert "not a writable directory" in ROOTS.audit("os.remove", ("/py/a",))
    assert "not a writable directory" in ROOTS.audit("os.rename", ("/work/run/a", "/py/b"))
    assert ROOTS.audit("shutil.copyfile", ("/py/a", "/work/run/b")) is None
    assert "outside" in ROOTS.audit("os.listdir", ("/root",))
    assert ROOTS.audit("os.listdir", (5,)) is None
    assert "relative path" in ROOTS.audit("os.mkdir", ("a/../../b", 0o777, None))


def test_sqlite_targets_and_roles():
    assert rules.sqlite_target(":memory:") is None
    assert rules.sqlite_target("file::memory:?cache=shared") is None
    assert rules.sqlite_target("file:/a/b.db?mode=ro") == "/a/b.db"
    assert rules.sqlite_target("file://host/a%20b.db") == "/a b.db"
    assert ROOTS.audit("sqlite3.connect", ("/work/run/work.db",)) is None
    assert "not in the app's directory" in ROOTS.audit("sqlite3.connect", ("/py/x.db",))
    assert "outside the allowed" in ROOTS.audit("sqlite3.connect", ("/master/initial.db",))
    assert VERIFIER.audit("sqlite3.connect", ("file:/work/inbox/final.db?mode=ro",)) is None


def test_authorizers():
    ok, deny = rules.SQLITE_OK, rules.SQLITE_DENY
    assert rules.authorize_env(24, "x", None, None, None) == deny  # ATTACH
    assert rules.authorize_env(18, "t", None, "main", None) == ok  # INSERT
    assert rules.authorize_readonly(20, "t", "c", "main", None) == ok  # READ
    assert rules.authorize_readonly(18, "t", None, "main", None) == deny  # INSERT
    assert rules.authorize_readonly(18, "t", None, "temp", None) == ok
    assert rules.authorize_readonly(19, "journal_mode", "off", None, None) == deny
    assert rules.authorize_readonly(19, "table_info", "t", None, None) == ok


def test_frames_that_do_not_decode_are_frame_errors():
    assert framing.decode(framing.encode({"a": [1, "é"]})[4:]) == {"a": [1, "é"]}
    for body in (b"[" * 200_000 + b"]" * 200_000, b"{not json", b"[1, 2]", b"\xff\xfe"):
        with pytest.raises(framing.FrameError):
            framing.decode(body)
    with pytest.raises(framing.FrameError, match="exceeds the message limit"):
        framing.check_size(framing.MAX_MESSAGE_BYTES + 1)
