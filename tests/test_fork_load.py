"""A forked app's load (``sandbox.start=fork``): what the template prepares for its children
without running dataset code, what a child skips, and the one bounded copy loop.

* the template imports the framework and standard library modules an app's top-level
  import statements name (read from its syntax tree; never a private, test or foreign
  package's module), so a child finds them loaded before its first line runs;
* a forked child takes no in-memory snapshot of its database (it serves one episode
  and is never reset): ``reset`` is refused with a named reason;
* every file copy of the sandbox (the parent's reads of worker files, its seed copies,
  a worker's copy of its seed) goes through :func:`framing.copy_fd`, which stops at its
  bound before writing past it.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.protocol import format_call_tool
from collect.awm.sandbox import SandboxError, SandboxLimits, copy_file_nofollow
from collect.awm.sandbox.fork import FRAMEWORK_ROOTS, imported_names, preloadable
from collect.awm.sandbox.framing import copy_fd
from collect.awm.sandbox.zygote import ForkedApp

WORLDS = Path(__file__).resolve().parent.parent / "collect" / "worlds"
SCENARIO = "workflow_automation_1"
LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)

# module-level code before the app's imports: what the child's sys.modules holds when its
# first line runs (read without importing anything)
HEAD = """import os as _x_os
_X_MODS = _x_os._wrap_close.__init__.__globals__["sys"].modules
_X_BEFORE = {n: n in _X_MODS for n in ("sqlalchemy.ext.hybrid", "sqlalchemy.ext.declarative",
                                      "fastapi.middleware.cors", "sqlalchemy.testing")}
import sqlalchemy.ext.hybrid
from sqlalchemy.ext.declarative import declarative_base as _x_declarative_base
from fastapi.middleware.cors import CORSMiddleware as _XCors
"""
TAIL = """

@app.get("/x/before", operation_id="x_before")
def x_before():
    return _X_BEFORE
"""


def _world(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for src in WORLDS.glob("*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("scenario", rec.get("name")) != SCENARIO:
                continue
            if src.name == "gen_envs.jsonl":
                rec["full_code"] = HEAD + rec["full_code"] + TAIL
            out.append(json.dumps(rec))
        (root / src.name).write_text("\n".join(out) + "\n")
    (root / "clock.txt").write_text((WORLDS / "clock.txt").read_text())
    return root


def test_imported_names_are_the_top_level_absolute_imports():
    tree = ast.parse(
        "import os, sqlalchemy.orm as orm\n"
        "from fastapi.middleware.cors import X\n"
        "from . import sibling\n"
        "from .pkg import y\n"
        "def f():\n    import json\n"
        "if True:\n    import decimal\n"
    )
    assert imported_names(tree) == ["os", "sqlalchemy.orm", "fastapi.middleware.cors"]


def test_only_modules_of_the_runtime_packages_are_preloadable():
    roots = FRAMEWORK_ROOTS | {"email", "datetime"}
    assert preloadable("sqlalchemy.ext.hybrid", roots)
    assert preloadable("email.mime.text", roots)
    assert preloadable("fastapi", roots)
    assert not preloadable("numpy", roots)  # a package the worker does not run
    assert not preloadable("antigravity", roots)
    assert not preloadable("sqlalchemy.testing.plugin", roots)  # test code
    assert not preloadable("fastapi.tests", roots)
    assert not preloadable("pydantic._internal._config", roots)  # private
    assert not preloadable("pydantic.mypy", roots)  # a type checker's plugin
    assert not preloadable("anyio.pytest_plugin", roots)  # a test runner's
    assert not preloadable("email.__main__", roots)
    assert not preloadable("email..x", roots)


def test_copy_fd_stops_at_its_bound_before_writing_past_it(tmp_path):
    src, dst = tmp_path / "src.bin", tmp_path / "dst.bin"
    src.write_bytes(bytes(range(256)) * (3 * 4096 + 7))  # 3 MiB + 1,792 bytes
    size = src.stat().st_size
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        assert copy_fd(fin.fileno(), fout.fileno(), size) == size
    assert dst.read_bytes() == src.read_bytes()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        with pytest.raises(OSError, match="grew past 2097152 bytes"):
            copy_fd(fin.fileno(), fout.fileno(), 2 << 20, "src.bin")
    assert dst.stat().st_size == 2 << 20  # two 1 MiB reads written, the third refused


def test_copy_file_nofollow_exclusive_refuses_an_existing_file_and_links(tmp_path):
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    src.write_bytes(b"x" * 1000)
    copy_file_nofollow(src, dst, None, exclusive=True)
    assert dst.read_bytes() == b"x" * 1000
    with pytest.raises(FileExistsError):
        copy_file_nofollow(src, dst, None, exclusive=True)
    link = tmp_path / "link.db"
    link.symlink_to(src)
    with pytest.raises(OSError):
        copy_file_nofollow(link, tmp_path / "c.db", None, exclusive=True)
    with pytest.raises(OSError, match="larger than 999 bytes"):
        copy_file_nofollow(src, tmp_path / "d.db", 999)
    assert not (tmp_path / "d.db").exists()


@pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="needs bubblewrap")
def test_a_child_finds_the_apps_framework_imports_loaded_and_is_never_reset(tmp_path):
    dataset = AWMDataset(_world(tmp_path / "world"))
    cfg = EnvConfig(sandbox=LIMITS, verifier_sandbox=VLIMITS, prestart_app=False)
    env = AWMEnv(dataset.get(SCENARIO), cfg, work_root=tmp_path / "work", clock=dataset.clock())
    try:
        for _ in range(2):  # the first child and one forked after it
            env.reset(0)
            assert isinstance(env.app, ForkedApp)
            result = env.step(format_call_tool("x_before", {}))
            assert result.info["status_code"] == 200, result.observation
            assert json.loads(result.observation) == {
                "sqlalchemy.ext.hybrid": True,
                "sqlalchemy.ext.declarative": True,
                "fastapi.middleware.cors": True,
                "sqlalchemy.testing": False,  # never imported for an app
            }
            info = env.app.load_info
            assert set(info["phases"]) == {"db_copy", "exec", "openapi", "open_db"}
            assert set(info["spawn"]) == {"end", "compile", "fork", "total"}
            with pytest.raises(SandboxError, match="serves one episode: it has no snapshot"):
                env.app.reset()
    finally:
        env.close()
