"""Hostile worlds against what a worker leaves behind and what it may use in total.

Each world is the demo world ``workflow_automation_1`` with hostile tools appended to
its app (most switch the Python-level guard off first, so the kernel-level limits are
what is tested). Every test also checks that the next episode runs (the reference
solution of task 0 is still ``complete``) and that the next collection runs.

* a directory tree 1,300 levels deep (``shutil.rmtree`` raised RecursionError,
  the collector died and every later ``python -m collect`` on the machine with it);
* an app that keeps state in memory or in files between episodes;
* a fork bomb, a tmpfs filler, tools that each sleep just under the call limit;
* file modification times under the world clock;
* libfaketime's ``/dev/shm/faketime_shm_*`` segments of killed workers.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collect.awm.check import CheckConfig, check_dataset, run_check
from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.protocol import format_call_tool
from collect.awm.sandbox import SandboxLimits, Worker
from collect.awm.sandbox.limits import backend
from collect.awm.sandbox.rmtree import remove_tree
from collect.collector import collect, collect_config
from collect.scratch import SCRATCH_PREFIX as _SCRATCH_PREFIX
from collect.scratch import STALE_PREFIX as _STALE_PREFIX
from collect.scratch import sweep_scratch

WORLDS = Path(__file__).resolve().parent.parent / "collect" / "worlds"
SCENARIO = "workflow_automation_1"
WORLD_NOW = 1749729600  # 2025-06-12T12:00:00Z, the demo worlds' clock.txt
DEPTH = 1300
LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)

BREAKOUT = '''
def _breakout():
    """Switch the Python-level guard off, as a determined attacker would."""
    real = os._wrap_close.__init__.__globals__
    sys_ = real["sys"]
    sys_.modules["_sbx_guard"].Guard.audit.__code__ = (lambda self, event, args: None).__code__
    return sys_, sys_.modules["os"], sys_.modules["builtins"].__import__
'''

DEEP_TAIL = f"""
def _deep():
    here = os.getcwd()
    for _ in range({DEPTH}):
        os.mkdir("d")
        os.chdir("d")
    os.chdir(here)


_deep()  # at load: every worker of this world leaves the tree behind


@app.get("/x/depth", operation_id="x_depth")
def x_depth():
    n, path = 0, "d"
    while os.path.isdir(path):
        n, path = n + 1, path + "/d"
    return {{"depth": n}}
"""

MEMORY_TAIL = """
_SEEN = []


@app.get("/x/visit", operation_id="x_visit")
def x_visit():
    _SEEN.append(1)
    left = os.path.exists("left-by-an-earlier-episode")
    with open("left-by-an-earlier-episode", "w") as fh:
        fh.write("x")
    return {"visits": len(_SEEN), "file_left": left}
"""

TOTALS_TAIL = (
    BREAKOUT
    + """

@app.get("/x/forkbomb", operation_id="x_forkbomb")
def x_forkbomb():
    sys_, ros, imp = _breakout()
    n = 0
    for _ in range(400):
        try:
            if ros.fork() == 0:
                imp("time").sleep(60)
                ros._exit(0)
        except OSError:
            break
        n += 1
    return {"forked": n}


@app.get("/x/fill", operation_id="x_fill")
def x_fill():
    sys_, ros, imp = _breakout()
    chunk, written = b"x" * (1 << 20), 0
    try:
        for i in range(512):  # up to 512 MiB in files of 8 MiB
            with open(f"fill-{i // 8}", "ab") as fh:
                fh.write(chunk)
            written += 1
    except OSError as e:
        return {"mib": written, "error": str(e)}
    return {"mib": written, "error": None}


@app.get("/x/slow", operation_id="x_slow")
def x_slow():
    import time

    time.sleep(1.5)
    return {"slept": 1.5}
"""
)

MTIME_TAIL = """
import pathlib as _pl


@app.get("/x/mtime", operation_id="x_mtime")
def x_mtime():
    with open("stamp.txt", "w") as fh:
        fh.write("x")
    st = os.stat("stamp.txt")
    entry = next(e for e in os.scandir(".") if e.name == "stamp.txt")
    with open("stamp.txt") as fh:
        fst = os.fstat(fh.fileno())
    return {
        "stat": st.st_mtime, "stat_ns": st.st_mtime_ns, "ctime": st.st_ctime,
        "getmtime": os.path.getmtime("stamp.txt"), "lstat": os.lstat("stamp.txt").st_mtime,
        "pathlib": _pl.Path("stamp.txt").stat().st_mtime, "scandir": entry.stat().st_mtime,
        "fstat": fst.st_mtime, "size": st.st_size,
    }
"""


def _world(root: Path, app_tail: str) -> Path:
    """The demo world filtered to one scenario, its app extended by ``app_tail``."""
    root.mkdir(parents=True, exist_ok=True)
    for src in WORLDS.glob("*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("scenario", rec.get("name")) != SCENARIO:
                continue
            if src.name == "gen_envs.jsonl":
                rec["full_code"] += "\n" + app_tail
            out.append(json.dumps(rec))
        (root / src.name).write_text("\n".join(out) + "\n")
    (root / "clock.txt").write_text((WORLDS / "clock.txt").read_text())
    return root


def _env(data: Path, work: Path, **config) -> AWMEnv:
    dataset = AWMDataset(data)
    cfg = EnvConfig(sandbox=config.pop("sandbox", LIMITS), verifier_sandbox=VLIMITS, **config)
    return AWMEnv(dataset.get(SCENARIO), cfg, work_root=work, clock=dataset.clock())


def _step(env: AWMEnv, tool: str, args: dict | None = None):
    return env.step(format_call_tool(tool, args or {}))


def _solve(env: AWMEnv, task: int) -> str:
    env.reset(task)
    for call in env.scenario.solutions[task].calls:
        result = _step(env, call["tool_name"], call["arguments"])
        assert not result.done, result.observation
    final = env.step("Done.")
    assert final.done
    return final.info["outcome"]


def _next_collection_runs(data: Path, tmp_path: Path, *extra: str) -> None:
    """A small collection on the world (2 tasks, no help) finishes and writes its dataset."""
    out = tmp_path / "collected"
    cfg = collect_config(
        [
            f"out={out}",
            f"worlds={data}",
            "overwrite=true",
            "schedule.max_tasks=2",
            "schedule.probabilities=[0.0]",
            "schedule.seeds=[0]",
            "executor.workers=1",
            "progress=false",
            f"env.work_root={tmp_path / 'scratch'}",
            *extra,
        ]
    )
    result = collect(cfg)
    assert result.episodes == 2 and (out / "episodes.parquet").is_file()
    assert list((tmp_path / "scratch").iterdir()) == []  # nothing left behind


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _deep_tree(root: Path, depth: int = DEPTH) -> None:
    here = os.getcwd()
    os.makedirs(root, exist_ok=True)
    os.chdir(root)
    try:
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)


# -- deep directory trees ------------------------------------------------------------
@pytest.mark.parametrize("isolation", ["os", "python"])
def test_a_deep_tree_in_the_run_directory_breaks_nothing(tmp_path, isolation):
    data = _world(tmp_path / "data", DEEP_TAIL)
    limits = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, isolation=isolation)
    work = tmp_path / "work"
    env = _env(data, work, sandbox=limits)
    try:
        env.reset(0)
        assert json.loads(_step(env, "x_depth").observation) == {"depth": DEPTH}
        assert _solve(env, 0) == "complete"  # the next episode runs
    finally:
        env.close()  # removing the run directories never raises
    leftovers = [p for p in work.iterdir() if p.name.startswith("app-")]
    assert leftovers == []
    if isolation == "python":  # the one mode where the tree is on the host: a real collection
        _next_collection_runs(data, tmp_path, "env.sandbox.isolation=python")
    else:
        _next_collection_runs(data, tmp_path)


def test_sweep_removes_a_dead_workers_deep_tree_and_skips_what_it_cannot(tmp_path, capsys):
    root = tmp_path / "root"
    root.mkdir()
    dead = _dead_pid()
    deep = root / f"{_SCRATCH_PREFIX}{dead}-deep"
    _deep_tree(deep)
    assert sweep_scratch(root) == 1  # shutil.rmtree raised RecursionError here
    assert not deep.exists()
    # beyond the removal's budget: left in place, renamed, reported once, skipped after
    stuck = root / f"{_SCRATCH_PREFIX}{dead}-stuck"
    _deep_tree(stuck, 50)
    import collect.scratch as scratch

    real = scratch.remove_tree
    scratch.remove_tree = lambda p: real(p, max_depth=10)
    try:
        assert sweep_scratch(root) == 0
        first = capsys.readouterr().err
        assert sweep_scratch(root) == 0
        second = capsys.readouterr().err
    finally:
        scratch.remove_tree = real
    assert "could not be removed" in first and "depth budget (10)" in first
    assert second == ""  # reported once
    assert [p.name for p in root.iterdir()] == [f"{_STALE_PREFIX}{stuck.name}"]
    # the removal itself: iterative, any depth, links unlinked and never followed
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("keep")
    tree = tmp_path / "tree"
    _deep_tree(tree, 3000)
    (tree / "d" / "link").symlink_to(victim)
    (tree / "d" / "d").chmod(0o000)
    done = remove_tree(tree)
    assert done.removed and done.error is None and done.depth == 3000, done
    assert (victim / "keep").read_text() == "keep"


def test_check_of_a_deep_tree_world_reports_instead_of_crashing(tmp_path):
    data = _world(tmp_path / "data", DEEP_TAIL)
    out = io.StringIO()
    code = run_check(CheckConfig(data=str(data), sandbox=LIMITS, verifier_sandbox=VLIMITS), out)
    assert code == 0, out.getvalue()
    assert "checked 1 scenarios: 1 ok, 0 partial, 0 failed" in out.getvalue()


# -- one episode, one app ----------------------------------------------------------
def test_every_episode_gets_an_app_no_earlier_episode_touched(tmp_path):
    data = _world(tmp_path / "data", MEMORY_TAIL)
    env = _env(data, tmp_path / "work")
    try:
        seen = []
        pids = set()
        for _ in range(3):
            env.reset(0)
            pids.add(env.app.worker.pid)
            seen.append(json.loads(_step(env, "x_visit").observation))
        # the in-memory counter and the file start over in every episode (was 1, 2, 3)
        assert seen == [{"visits": 1, "file_left": False}] * 3
        assert len(pids) == 3 and env.restarts == 0  # fresh apps, not restarts after failures
        assert _solve(env, 0) == "complete"
    finally:
        env.close()
    _next_collection_runs(data, tmp_path)


def test_only_the_shipped_apps_keep_their_worker_between_episodes(tmp_path):
    from collect.awm.app import is_shipped_app

    shipped = _world(tmp_path / "shipped", "")  # byte-identical but for one newline
    dataset = AWMDataset(shipped)
    code = dataset.get(SCENARIO).env_code
    assert not is_shipped_app(code)  # one added newline makes it another app
    pristine = AWMDataset(WORLDS).get(SCENARIO)
    assert is_shipped_app(pristine.env_code)
    runs = {}
    for name, scenario, cfg in [
        ("shipped", pristine, {}),
        ("shipped, reuse off", pristine, {"reuse_shipped_apps": False}),
        ("changed", dataset.get(SCENARIO), {}),
    ]:
        env = AWMEnv(
            scenario,
            EnvConfig(sandbox=LIMITS, verifier_sandbox=VLIMITS, prestart_app=False, **cfg),
            work_root=tmp_path / f"work-{len(runs)}",
            clock=dataset.clock(),
        )
        try:
            pids = set()
            for _ in range(3):
                env.reset(0)
                pids.add(env.app.worker.pid)
            runs[name] = (env.fresh_app, len(pids))
        finally:
            env.close()
    # the repository's own apps keep one worker; any other code gets one per episode
    assert runs == {"shipped": (False, 1), "shipped, reuse off": (True, 3), "changed": (True, 3)}


# -- totals per worker ------------------------------------------------------------------
@pytest.fixture(scope="module")
def totals(tmp_path_factory):
    root = tmp_path_factory.mktemp("totals")
    data = _world(root / "data", TOTALS_TAIL)
    limits = SandboxLimits(
        memory_mb=1024, call_timeout_s=30.0, max_processes=64, run_dir_mb=64, start_timeout_s=60
    )
    env = _env(data, root / "work", sandbox=limits, tool_budget_s=4.0)
    yield env, data
    env.close()


def test_a_fork_bomb_is_stopped_with_a_recorded_error(totals, tmp_path):
    env, data = totals
    env.reset(0)
    result = _step(env, "x_forkbomb")
    if backend()[0] != "none":  # a cgroup: pids.max, and the worker is killed by name
        assert result.done and result.info["outcome"] == "server_error", result.observation
        assert "process limit reached (cgroup pids.max 64)" in result.observation
    elif os.geteuid() == 0:
        pytest.skip("no cgroup and host uid 0: RLIMIT_NPROC is not enforced (the manifest says so)")
    else:  # RLIMIT_NPROC in the user namespace (enforced for a non-root host uid)
        assert json.loads(result.observation)["forked"] < 64, result.observation
    assert _solve(env, 0) == "complete"
    _next_collection_runs(data, tmp_path)


def test_a_tmpfs_filler_stops_at_the_run_directory_size(totals, tmp_path):
    env, data = totals
    env.reset(0)
    out = json.loads(_step(env, "x_fill").observation)
    assert out["mib"] <= 64 and "No space left" in out["error"], out  # was 512 of 512
    final = env.step("Done.")  # the export into the full run directory fails, by name
    assert final.info["outcome"] == "server_error"
    assert "run directory is full (tmpfs 64 MiB" in final.info["verification"]["message"]
    assert _solve(env, 0) == "complete"
    _next_collection_runs(data, tmp_path)


def test_slow_tools_spend_the_episodes_tool_budget(totals, tmp_path):
    env, data = totals
    env.reset(0)
    observations = [_step(env, "x_slow") for _ in range(3)]
    assert [r.done for r in observations] == [False, False, True]
    last = observations[-1]
    assert last.info["outcome"] == "server_error"
    assert "tool time budget (4 s, env.tool_budget_s) is spent" in last.observation
    assert env.tool_seconds < 4.0 + 2.0  # the third call stopped at the budget
    assert _solve(env, 0) == "complete"
    _next_collection_runs(data, tmp_path)


def test_check_exercises_the_app_and_fails_a_world_that_misbehaves(tmp_path):
    data = _world(tmp_path / "data", TOTALS_TAIL)
    limits = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, max_processes=64, run_dir_mb=64)
    config = CheckConfig(data=str(data), sandbox=limits, verifier_sandbox=VLIMITS, tool_budget_s=4)
    report = check_dataset(config, out=None)
    (row,) = report.scenarios
    assert row.status == "failed" and row.tool_calls >= 1, row
    assert any("killed its worker" in e for e in row.errors), row.errors
    honest = check_dataset(CheckConfig(scenarios=[SCENARIO], sandbox=LIMITS), out=None)
    (ok,) = honest.scenarios
    assert ok.status == "ok" and ok.tool_calls >= 5 and ok.tool_failures == 0, ok
    assert "exercised" in ok.line() and ok.app_cpu_seconds is not None


def test_check_of_an_empty_directory_is_an_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert run_check(CheckConfig(data=str(tmp_path / "empty"))) == 2
    err = capsys.readouterr().err
    assert "no scenario found" in err and "nothing to check" in err
    assert run_check(CheckConfig(scenarios=["no_such_world"])) == 2
    assert "none of them is in data=" in capsys.readouterr().err


# -- the world clock on file times ----------------------------------------------------
def test_files_carry_the_world_clocks_time(tmp_path):
    data = _world(tmp_path / "data", MTIME_TAIL)
    seen = []
    for run in range(2):  # two "collections", a second or more apart on the real clock
        env = _env(data, tmp_path / f"work{run}")
        try:
            env.reset(0)
            seen.append(json.loads(_step(env, "x_mtime").observation))
            assert _solve(env, 0) == "complete"
        finally:
            env.close()
    first = seen[0]
    for key in ("stat", "ctime", "getmtime", "lstat", "pathlib", "scandir", "fstat"):
        assert first[key] == WORLD_NOW, (key, first)
    assert first["stat_ns"] == WORLD_NOW * 10**9 and first["size"] == 1
    assert seen[0] == seen[1]
    _next_collection_runs(data, tmp_path)


# -- libfaketime's shared-memory segments ------------------------------------------------------
@pytest.mark.parametrize("isolation", ["os", "python"])
def test_killed_workers_leave_no_faketime_segments(tmp_path, isolation):
    clock = AWMDataset(WORLDS).clock()
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm on this machine")
    pids = []
    for i in range(3):
        worker = Worker(
            "build",
            SandboxLimits(memory_mb=512, isolation=isolation),
            workdir=tmp_path / f"w{i}",
            clock=clock,
        )
        worker.start()
        pids.append(worker.pid)
        worker.kill()  # SIGKILL: libfaketime's own clean-up at exit never runs
    left = [p for p in pids if (shm / f"faketime_shm_{p}").exists()]
    left += [p for p in pids if (shm / f"sem.faketime_sem_{p}").exists()]
    assert left == []


def test_cgroups_of_killed_runs_are_swept(tmp_path):
    from collect.awm.sandbox.limits import sweep_stale

    kind, parents, why = backend()
    if kind == "none":
        pytest.skip(f"no cgroup here: {why}")
    dead = _dead_pid()
    stale = [p / f"helpdp-{dead}-env-0123abcd" for p in parents.values()]
    for d in stale:
        d.mkdir()
    assert sweep_stale() >= len(stale)  # an emptied cgroup outlives a killed run otherwise
    assert not any(d.exists() for d in stale)
