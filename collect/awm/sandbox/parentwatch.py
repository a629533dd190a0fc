"""Exit a process when its parent dies: no orphans after the parent is SIGKILLed.

Standard library only: the sandbox child loads it by file path (``child.py``,
``isolation=python``; bubblewrap's ``--die-with-parent`` does it otherwise) and
``collect.executors`` uses it in its worker processes.
"""

from __future__ import annotations

import os
import threading
import time


def watch_parent(
    parent: int | None = None, *, interval: float = 1.0, exit_code: int = 0, name: str = "watchdog"
) -> threading.Thread:
    """Start a daemon thread that ends this process with ``os._exit(exit_code)`` once
    its parent process is no longer ``parent`` (default: the current parent),
    checking every ``interval`` seconds."""
    parent = os.getppid() if parent is None else parent

    def loop() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(exit_code)
            time.sleep(interval)

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread
