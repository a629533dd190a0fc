"""What forking an episode's app from a template adds (``sandbox.start=fork``).

The template imported the framework at its start and then only forks: each test
runs hostile tools (most switch the Python-level guard off first) in one episode's
child and checks, from the next child of the *same* template, that nothing of it is
left: memory, module globals, ``sys.modules``, monkeypatches of the sandbox's own
classes, files (a locked directory included), processes, signals sent to the
template; that a child holds only its own descriptors; that its PRNGs are its own;
that the world clock holds in it. The hostile-world tests
(``test_awm_sandbox_hostile.py``, ``test_awm_hostile_fs.py``, ``test_awm_hostile_ipc.py``)
run with the fork as the default.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.protocol import format_call_tool
from collect.awm.sandbox import AppWorker, SandboxError, SandboxLimits
from collect.awm.sandbox.zygote import ForkedApp

WORLDS = Path(__file__).resolve().parent.parent / "collect" / "worlds"
SCENARIO = "workflow_automation_1"
WORLD_NOW = 1749729600  # 2025-06-12T12:00:00Z, the demo worlds' clock.txt
LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)

FORK_TAIL = '''
def _breakout():
    """Switch the Python-level guard off, as a determined attacker would."""
    real = os._wrap_close.__init__.__globals__
    sys_ = real["sys"]
    sys_.modules["_sbx_guard"].Guard.audit.__code__ = (lambda self, event, args: None).__code__
    return sys_, sys_.modules["os"], sys_.modules["builtins"].__import__


_STATE = {"visits": 0}


def _count_load():  # module-level code: it runs where the app is loaded, and only there
    bi = os._wrap_close.__init__.__globals__["sys"].modules["builtins"]
    bi.x_loads = getattr(bi, "x_loads", 0) + 1


_count_load()


@app.get("/x/taint", operation_id="x_taint")
def x_taint():
    sys_, ros, imp = _breakout()  # a monkeypatch of the template's own guard class
    seen = {
        "visits": _STATE["visits"],
        "files": sorted(ros.listdir(".")),
        "module": "x_taint_mod" in sys_.modules,
        "patched": getattr(sys_.modules["json"], "x_patched", False),
        "big": "x_big" in imp("builtins").__dict__,
        "loads": imp("builtins").x_loads,  # 1: the template compiled the source, ran none of it
    }
    _STATE["visits"] += 1
    with open("left.txt", "w") as fh:
        fh.write("x")
    ros.mkdir("locked")
    with open("locked/inside.txt", "w") as fh:
        fh.write("x")
    ros.chmod("locked", 0)
    ros.chmod(".", 0o500)  # even the run directory itself
    sys_.modules["x_taint_mod"] = sys_.modules["json"]
    sys_.modules["json"].x_patched = True
    imp("builtins").x_big = bytearray(64 << 20)  # memory the next child must not see
    return seen


@app.get("/x/guarded", operation_id="x_guarded")
def x_guarded():
    try:
        open("/etc/passwd").close()
        return {"open": "allowed"}
    except Exception as e:
        return {"open": f"{type(e).__name__}: {e}"}


@app.get("/x/orphan", operation_id="x_orphan")
def x_orphan():
    sys_, ros, imp = _breakout()
    r, w = ros.pipe()
    pid = ros.fork()
    if pid == 0:
        ros.setsid()
        grandchild = ros.fork()
        if grandchild == 0:
            while True:
                imp("time").sleep(0.05)
        ros.write(w, str(grandchild).encode())
        ros._exit(0)
    ros.waitpid(pid, 0)
    return {"parent": ros.getppid(), "orphan": int(ros.read(r, 32))}


@app.get("/x/alive", operation_id="x_alive")
def x_alive():
    sys_, ros, imp = _breakout()
    alive = []
    for pid in range(2, 2000):  # every pid of the namespace but init's
        try:
            ros.kill(pid, 0)
            alive.append(pid)
        except OSError:
            pass
    return {"alive": alive, "me": ros.getpid(), "parent": ros.getppid()}


@app.get("/x/signal", operation_id="x_signal")
def x_signal():
    sys_, ros, imp = _breakout()
    sig = imp("signal")
    for s in (sig.SIGTERM, sig.SIGINT, sig.SIGHUP, sig.SIGUSR1, sig.SIGALRM, sig.SIGCHLD):
        ros.kill(ros.getppid(), s)
    return {"sent": 6}


@app.get("/x/fds", operation_id="x_fds")
def x_fds():
    sys_, ros, imp = _breakout()
    st_ = imp("stat")
    out = {}
    for fd in range(256):
        try:
            st = ros.fstat(fd)
        except OSError:
            continue
        kind = "other"
        if st_.S_ISFIFO(st.st_mode):
            kind = "fifo"
        elif st_.S_ISSOCK(st.st_mode):
            kind = "socket"
        elif st_.S_ISREG(st.st_mode):
            kind = "file"
        out[str(fd)] = [kind, st.st_ino]
    return out


@app.get("/x/rand", operation_id="x_rand")
def x_rand():
    sys_, ros, imp = _breakout()
    random, uuid, sqlite3 = imp("random"), imp("uuid"), imp("sqlite3")
    conn = sqlite3.connect(":memory:")
    sql = [conn.execute("SELECT random()").fetchone()[0] for _ in range(3)]
    blob = conn.execute("SELECT hex(randomblob(16))").fetchone()[0]
    conn.close()
    return {"random": [random.random() for _ in range(3)], "sqlite": sql, "blob": blob,
            "uuid4": str(uuid.uuid4())}


@app.get("/x/clock", operation_id="x_clock")
def x_clock():
    import datetime as _dt
    import sqlite3 as _sq
    import time as _t
    conn = _sq.connect(":memory:")
    sql = conn.execute("SELECT CAST(strftime('%s', 'now') AS INTEGER)").fetchone()[0]
    conn.close()
    return {"time": _t.time(), "sqlite": sql,
            "datetime": _dt.datetime.now(_dt.timezone.utc).timestamp()}
'''


def _world(root: Path) -> Path:
    """The demo world filtered to one scenario, its app extended by the tools above."""
    root.mkdir(parents=True, exist_ok=True)
    for src in WORLDS.glob("*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("scenario", rec.get("name")) != SCENARIO:
                continue
            if src.name == "gen_envs.jsonl":
                rec["full_code"] += "\n" + FORK_TAIL
            out.append(json.dumps(rec))
        (root / src.name).write_text("\n".join(out) + "\n")
    (root / "clock.txt").write_text((WORLDS / "clock.txt").read_text())
    return root


def _env(data: Path, work: Path, sandbox: SandboxLimits = LIMITS, **config) -> AWMEnv:
    dataset = AWMDataset(data)
    cfg = EnvConfig(sandbox=sandbox, verifier_sandbox=VLIMITS, **config)
    return AWMEnv(dataset.get(SCENARIO), cfg, work_root=work, clock=dataset.clock())


def _tool(env: AWMEnv, tool: str) -> dict:
    result = env.step(format_call_tool(tool, {}))
    assert result.info["status_code"] == 200, result.observation
    return json.loads(result.observation)


def _solve(env: AWMEnv) -> str:
    env.reset(0)
    for call in env.scenario.solutions[0].calls:
        assert not env.step(format_call_tool(call["tool_name"], call["arguments"])).done
    return env.step("Done.").info["outcome"]


@pytest.fixture(scope="module")
def one_template(tmp_path_factory):
    """Every episode a child of the same template (no prestart on a second one)."""
    root = tmp_path_factory.mktemp("fork")
    env = _env(_world(root / "data"), root / "work", prestart_app=False)
    yield env
    env.close()


def _template(env: AWMEnv):
    (zygote,) = env._zygotes.values()
    return zygote


def test_no_state_of_an_earlier_child_reaches_the_next(one_template):
    env = one_template
    seen, pids = [], set()
    for _ in range(3):
        env.reset(0)
        assert isinstance(env.app, ForkedApp)
        pids.add(env.app.worker.pid)
        # the guard class the previous child patched is the template's again
        assert _tool(env, "x_guarded")["open"].startswith("PermissionError"), seen
        seen.append(_tool(env, "x_taint"))
    fresh = {
        "visits": 0,
        "files": ["work.db"],  # in a run directory of its own (the seed is read-only, above)
        "module": False,
        "patched": False,
        "big": False,
        "loads": 1,
    }
    assert seen == [fresh] * 3  # was visits 0, 1, 2, left.txt and locked/ after the first
    assert len(pids) == 3 and None not in pids and env.restarts == 0
    zygote = _template(env)
    assert zygote.starts == 1 and env.app_starts == 3  # one template, three children
    assert _solve(env) == "complete"


def test_a_childs_descendants_die_before_the_next_child(one_template):
    env = one_template
    env.reset(0)
    template, starts = _template(env).worker.hello["pid"], _template(env).starts
    first = _tool(env, "x_orphan")
    alive_then = _tool(env, "x_alive")
    reaper = alive_then["parent"]  # between the template and the child (fork.py)
    assert first["parent"] == reaper != template and template in alive_then["alive"]
    assert first["orphan"] in alive_then["alive"]  # in its own session, reparented to init
    env.reset(0)
    now = _tool(env, "x_alive")
    assert _template(env).starts == starts  # the same template forked it
    assert now["parent"] not in (reaper, template)  # through a reaper of its own
    # (kill(pid, 0) also finds the threads of the child itself: the framework's pool)
    left = [p for p in now["alive"] if p != template and p <= max(alive_then["alive"])]
    assert left == [] and first["orphan"] not in now["alive"]


def test_signals_to_the_template_change_nothing(one_template):
    env = one_template
    starts = _template(env).starts
    env.reset(0)
    assert _tool(env, "x_signal") == {"sent": 6}
    assert _solve(env) == "complete"
    assert _template(env).starts == starts  # blocked in the template: not replaced


def test_a_child_holds_only_its_own_descriptors(one_template):
    env = one_template
    env.reset(0)
    fds = _tool(env, "x_fds")
    child = env.app.worker
    zygote = _template(env).worker
    ours = {os.fstat(child._to_worker).st_ino, os.fstat(child._from_worker).st_ino}
    control = {os.fstat(zygote._to_worker).st_ino, os.fstat(zygote._from_worker).st_ino}
    fifos = {fd: ino for fd, (kind, ino) in fds.items() if kind == "fifo"}
    assert sorted(fifos) == ["3", "4"] and set(fifos.values()) == ours
    assert not control & {ino for _, ino in fds.values()}
    # sockets: only the event loop's own self-pipe (the template's fd socket is closed)
    assert sum(kind == "socket" for kind, _ in fds.values()) == 2, fds
    assert [fds[str(fd)][0] for fd in (1, 2)] == ["file", "file"]  # the worker log


def test_every_child_reseeds_its_random_streams(one_template):
    env = one_template
    draws = []
    for _ in range(2):
        env.reset(0)
        draws.append(_tool(env, "x_rand"))
    first, second = draws
    for key in ("random", "sqlite", "blob", "uuid4"):
        assert first[key] != second[key], key


def test_the_world_clock_holds_in_every_child(one_template):
    env = one_template
    for _ in range(2):
        env.reset(0)
        got = _tool(env, "x_clock")
        assert got["sqlite"] == WORLD_NOW
        assert abs(got["time"] - WORLD_NOW) < 1.0 and abs(got["datetime"] - WORLD_NOW) < 1.0


def test_the_template_serves_no_request_and_runs_no_code(one_template):
    env = one_template
    env.reset(0)
    worker = _template(env).worker
    for op in ("load_app", "request", "reset", "export", "verify", "build"):
        reply = worker.request(op, {"code": "raise SystemExit", "method": "GET", "path": "/"})
        assert not reply["ok"] and reply["error"] == "unknown_op", reply
        assert "only spawn, end, ping" in reply["message"]
    assert _solve(env) == "complete"


def test_prestart_alternates_two_templates(tmp_path):
    env = _env(_world(tmp_path / "data"), tmp_path / "work", prestart_app=True)
    try:
        used, pids = [], set()
        for _ in range(4):
            env.reset(0)
            used.append(env.app.zygote)
            pids.add(env.app.worker.pid)
            assert _tool(env, "x_taint")["visits"] == 0
        assert used[0] is used[2] and used[1] is used[3] and used[0] is not used[1]
        assert len(pids) == 4 and sorted(env._zygotes) == [0, 1]
        assert _solve(env) == "complete"
    finally:
        env.close()
    assert not list((tmp_path / "work").glob("app-*"))  # templates' directories removed


def test_start_exec_is_the_documented_way_back(tmp_path):
    exec_limits = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start="exec")
    env = _env(_world(tmp_path / "data"), tmp_path / "work", exec_limits, prestart_app=False)
    try:
        pids = set()
        for _ in range(2):
            env.reset(0)
            assert type(env.app) is AppWorker
            pids.add(env.app.worker.pid)
            assert _tool(env, "x_taint")["visits"] == 0
        assert len(pids) == 2 and env._zygotes == {}
    finally:
        env.close()
    with pytest.raises(SandboxError, match=r"sandbox.start='spawn': expected fork or exec"):
        _env(_world(tmp_path / "d2"), tmp_path / "w2", SandboxLimits(start="spawn"))


def test_a_child_that_dies_is_described_and_the_template_lives_on(one_template):
    env = one_template
    env.reset(0)
    starts = _template(env).starts
    worker = env.app.worker
    # the child killed from outside (its host pid): the request names the signal
    os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(SandboxError, match="killed .SIGKILL. during request"):
        env.app.request("GET", "/x/clock")
    assert _solve(env) == "complete" and _template(env).starts == starts
