"""The parent-death watchdog shared by collect's pool workers and the sandbox child."""

import os
import signal
import subprocess
import sys
import time

from proc_helpers import alive

import collect.awm.sandbox.parentwatch as parentwatch

# the middle process starts a grandchild that watches it, prints the grandchild's
# pid and waits; killing the middle process must end the grandchild
MIDDLE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-I", "-c", {grandchild!r}])
print(child.pid, flush=True)
time.sleep(60)
"""
GRANDCHILD = """
import importlib.util, time
spec = importlib.util.spec_from_file_location("pw", {path!r})
pw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pw)  # by file path, as the sandbox child loads it
pw.watch_parent(interval=0.05, exit_code=7)
time.sleep(60)
"""


def test_a_watched_process_exits_when_its_parent_is_killed():
    grandchild = GRANDCHILD.format(path=parentwatch.__file__)
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE.format(grandchild=grandchild)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        pid = int(middle.stdout.readline())
        time.sleep(0.3)
        assert alive(pid)  # watching, parent alive: keeps running
        os.kill(middle.pid, signal.SIGKILL)
        middle.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.05)
        assert not alive(pid)
    finally:
        if middle.poll() is None:
            middle.kill()
