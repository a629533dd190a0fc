"""Ctrl-C in a collection: one line saying what was kept (no traceback from the parent or
the pool's workers), exit 130, no process left behind; the rerun says how many shards it
reused and runs only the others."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from proc_helpers import alive
from test_collector_resume import ARGS, _command, _descendants


def test_ctrl_c_keeps_shards_in_one_line_and_the_rerun_reuses_them(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    # a terminal's Ctrl-C sends SIGINT to the whole foreground process group
    # stderr to a file (a descendant holding a pipe cannot stall the wait), and on a hang
    # the parent's threads dumped by faulthandler (SIGABRT) into the failure
    errfile = tmp_path / "stderr.txt"
    with errfile.open("w") as errf:
        proc = subprocess.Popen(
            _command(out, work),
            stdout=subprocess.DEVNULL,
            stderr=errf,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
    shards, family, done = out / "shards", set(), 0
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        family |= _descendants(proc.pid)
        done = len([p for p in shards.glob("0*") if p.is_dir()]) if shards.exists() else 0
        if done >= 3:
            break
        time.sleep(0.02)
    family |= _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGABRT)
        proc.wait(timeout=30)
        left = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in family if alive(p)}
        pytest.fail(f"no exit 120 s after Ctrl-C; alive: {left}\n{errfile.read_text()[-6000:]}")
    err = errfile.read_text()
    assert proc.returncode == 130, err[-3000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    m = re.fullmatch(
        r"collect: interrupted: (\d+) of 28 shards kept in (.+); rerun the same command to "
        r"resume",
        lines[0],
    )
    assert m and m.group(2) == str(shards), lines[0]
    kept = int(m.group(1))
    assert 3 <= kept < 28 and kept == len([p for p in shards.glob("0*") if p.is_dir()])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(p) for p in family):
        time.sleep(0.2)
    assert not [p for p in family if alive(p)]

    r = subprocess.run(_command(out, work), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"resuming {out}: reusing {kept} of 28 shards" in r.stdout, r.stdout
    assert re.search(r"(\d+)/28 shards run", r.stdout).group(1) == str(28 - kept)
    assert "executor.workers=2" in ARGS  # the pool's workers saw the signal too


def test_a_worker_stopped_by_ctrl_c_is_an_interrupt_in_the_parent():
    """A worker's Ctrl-C (SystemExit 130) reaching the parent before the parent's own
    signal (or in a parent that ignores SIGINT) is the same interrupt there: the
    collector then says what it kept, instead of exiting 130 without a word."""
    from proc_helpers import stopped_by_ctrl_c

    from collect.executors import ExecutorConfig, execute

    got = []
    with pytest.raises(KeyboardInterrupt):
        execute(stopped_by_ctrl_c, [0, 1, 2], ExecutorConfig(workers=2), got.append)
    assert 1 not in got


def test_a_stop_between_tasks_only_marks_it_and_the_next_task_does_not_start(monkeypatch):
    """A worker's Ctrl-C raises only inside a task (its sandboxes closed by ``finally``):
    between tasks the worker runs the pool's own code (sending a result, waiting on the
    call queue's lock), where a SystemExit would cut the message to the parent mid-stream
    and leave the parent's pool thread waiting for ever."""
    import signal as _signal

    from collect import executors

    monkeypatch.setattr(executors, "_STOPPING", False)
    monkeypatch.setattr(executors, "_IN_TASK", False)
    executors._quiet_interrupt(_signal.SIGINT, None)  # between tasks: no raise
    assert executors._STOPPING and not executors._IN_TASK
    ran = []
    with pytest.raises(SystemExit) as e:
        executors._in_worker(ran.append, 1)  # the next task does not start
    assert e.value.code == 130 and ran == [] and not executors._IN_TASK

    monkeypatch.setattr(executors, "_STOPPING", False)
    seen = []

    def task(x):
        seen.append(executors._IN_TASK)
        executors._quiet_interrupt(_signal.SIGTERM, None)  # inside a task: it ends there
        seen.append("after")

    with pytest.raises(SystemExit) as e:
        executors._in_worker(task, 2)
    assert e.value.code == 130 and seen == [True] and not executors._IN_TASK
    assert executors._in_worker.__doc__
