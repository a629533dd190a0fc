"""Where shards run: in this process, a local process pool, or Ray tasks on a cluster.

An executor calls a module-level function ``fn(task)`` for every task and hands
each result to ``on_result`` in the calling process as soon as it is ready (the
caller writes the shard: workers never touch the output directory, so Ray
workers need no shared filesystem, only the worlds directory at the same path).

* ``local`` with ``workers=1``: in this process (an actor object may be passed).
* ``local`` with ``workers>1`` (``0``: one per CPU core): a ``spawn`` process pool;
  each worker builds its environments and actor once and keeps them for all its
  shards, and exits when the parent dies (even by SIGKILL). On Ctrl-C (or any
  failure) the pool stops within seconds: every worker ends its current episode
  (SIGINT or SIGTERM: ``SystemExit`` through its ``finally`` blocks), starts no other
  one, and exits; one still running after :data:`STOP_GRACE_S` is killed (its
  sandboxes follow their parent; the next run sweeps its scratch directory).
* ``ray``: one Ray task per shard (``ray.init(address=...)`` unless Ray is already
  initialized); Ray reuses worker processes, so each also keeps its environments.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from collect.awm.sandbox.parentwatch import watch_parent
from helpdp.cliconf import doc_field as _f

if TYPE_CHECKING:
    from types import FrameType

    from collect.schedule import EpisodeSpec

#: a task of :func:`execute` and its result (what ``fn`` takes and returns)
T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "EXECUTOR_KINDS",
    "ORDERS",
    "STOP_GRACE_S",
    "ExecutorConfig",
    "execute",
    "resolve_workers",
    "run_order",
]

EXECUTOR_KINDS = ("local", "ray")

#: seconds a pool's workers get to stop after Ctrl-C or a failure (their current
#: episode's sandboxes closed, their scratch removed) before they are killed
STOP_GRACE_S = 5.0

#: in a pool worker: Ctrl-C (or the parent's SIGTERM) was seen; no task starts after it
_STOPPING = False
#: in a pool worker: a task's function is running (the only place a stop may raise)
_IN_TASK = False


@dataclass
class ExecutorConfig:
    """How the collection is spread over processes and machines."""

    kind: str = _f("local", "local (process pool on this machine) | ray (Ray tasks on a cluster)")
    workers: int = _f(0, "local: worker processes (0: one per CPU core; 1: in this process)")
    shard_size: int = _f(
        10, "episodes per shard (the unit of work, of atomic writes and of resumption)"
    )
    batch_size: int = _f(
        1, "episodes one worker advances in lock step (one batched actor call per turn)"
    )
    order: str = _f(
        "plan",
        "the order the shards run in (their content and ids do not change): plan (task by "
        "task, seed by seed within a task) | seed (every task's shards of the first seed, then "
        "the next seed's: a collection stopped part way holds about as many episodes of each "
        "task; for shard_size 1 and long runs that span sessions) | seed_shuffled (as seed, "
        "with the tasks of a seed in a fixed order drawn from a hash of their ids: a run "
        "stopped inside its first seed holds a uniform sample of the tasks, each with all "
        "its probabilities; a pilot over many worlds) | helped_first (as seed_shuffled, "
        "the shards of the largest help probability first: a pilot whose unhelped "
        "episodes cost more and tell less)",
    )
    episode_retries: int = _f(
        2,
        "runs of an episode again (same id and seed: the same tables) after its runtime failed "
        "(the environment did not start, a session was refused at capacity, a step raised: "
        "connection lost); what still fails leaves its shard unfinished, nothing is "
        "published, the command exits 2 and a rerun runs just those episodes",
    )
    max_sessions: int = _f(
        0,
        "runtime=openenv: sessions the collection holds on the server at once (its episodes "
        "in flight: workers and batch_size are cut to fit); 0: the server's advertised cap "
        "(GET /capacity: python -m collect.awm.openenv_server), else no limit",
    )
    capacity_wait_s: float = _f(
        300.0,
        "runtime=openenv: longest wait for a session while the server is at capacity (tries "
        "again after 0.1 s, doubling to 5 s); then the episode's runtime failed. Waited in "
        "full when the cap is known (workers x batch_size fit it: a refusal is a slot being "
        "freed); else at most 10 s while another episode of the worker holds a session",
    )
    ray_address: Any = _f(None, "ray: cluster address (null: start or join a local instance)")
    ray_num_cpus: float = _f(1.0, "ray: CPUs reserved per shard task")
    ray_num_gpus: float = _f(0.0, "ray: GPUs reserved per shard task (vllm/hf actors on GPU)")
    ray_max_retries: int = _f(2, "ray: retries of a shard task whose worker died")


ORDERS = ("plan", "seed", "seed_shuffled", "helped_first")


def run_order(todo: list[int], shards: Sequence[Sequence[EpisodeSpec]], order: str) -> list[int]:
    """The shards ``todo`` in the order they run (:attr:`ExecutorConfig.order`): as
    planned, or by the smallest seed a shard holds (ties in plan order, or for
    ``seed_shuffled`` in the order of a sha256 of that seed and the task id: the same on
    every host, and a task's shards of one seed stay together). ``helped_first`` is
    ``seed_shuffled`` after a first key, the largest help probability a shard's episodes
    have (descending): a stop holds every task at the highest probabilities first."""
    if order not in ORDERS:
        raise ValueError(f"executor.order: unknown order {order!r} (one of {ORDERS})")
    if order == "plan":
        return list(todo)
    if order == "seed":
        return sorted(todo, key=lambda i: (min(s.seed for s in shards[i]), i))

    def shuffled(i: int) -> tuple:
        first = min(shards[i], key=lambda s: s.seed)  # the shard's place: its smallest seed's
        tag = hashlib.sha256(f"{first.seed}\0{first.task_id}".encode()).hexdigest()
        return (first.seed, tag, i)

    if order == "helped_first":
        return sorted(
            todo, key=lambda i: (-max(max(s.trigger_p) for s in shards[i]),) + shuffled(i)
        )
    return sorted(todo, key=shuffled)


def resolve_workers(config: ExecutorConfig, n_tasks: int) -> int:
    """Worker processes for ``n_tasks`` tasks (at least 1, at most one per task)."""
    workers = int(config.workers) or (os.cpu_count() or 1)
    return max(1, min(workers, max(1, n_tasks)))


def _quiet_interrupt(signum: int, frame: FrameType | None) -> None:
    """A pool worker's Ctrl-C or SIGTERM: the task running ends (SystemExit 130, its
    ``finally`` blocks close its sandboxes) and no other starts. Between tasks it only
    marks the stop: raised there, in the pool's own code, it would cut a result's message
    to the parent mid-stream (the worker's SystemExit is then sent after half a message)
    or die holding the call queue's lock, and the parent's pool thread would wait on the
    rest for ever (its exit, after it said what was kept, hung)."""
    global _STOPPING
    if _STOPPING:  # once: the cleanup is not interrupted (the handler stays: a pending
        return  # signal meeting SIG_IGN would raise "ignored due to race condition")
    _STOPPING = True
    if _IN_TASK:
        raise SystemExit(130)


def _watch_parent(parent: int) -> None:
    """Exit this worker (status 1) when its parent process is gone (no orphans after a SIGKILL).
    Ctrl-C reaches every process of the terminal's group (and the parent sends SIGTERM
    when it stops the pool): a worker ends its task with SystemExit (its sandboxes closed
    by their ``finally`` blocks, no traceback printed), runs no other (:func:`_in_worker`),
    and the parent alone says what was kept."""
    signal.signal(signal.SIGINT, _quiet_interrupt)
    signal.signal(signal.SIGTERM, _quiet_interrupt)
    # registered before the worker's own cleanup (collect.worker, imported with the first
    # task), so it runs after it (atexit is last in, first out)
    atexit.register(_exit_when_stopped)
    watch_parent(parent, interval=0.5, exit_code=1, name="watch-parent")


def _exit_when_stopped() -> None:
    """A stopped worker, its cleanup done, skips the interpreter's teardown (seconds of
    module and heap finalization on a busy machine) so that Ctrl-C ends in seconds."""
    if _STOPPING:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(130)


def _in_worker(fn: Callable[[T], R], task: T) -> R:
    """``fn(task)`` in a pool worker, unless this worker was interrupted: the pool hands a
    worker its queued tasks even after a task ended in ``SystemExit``, and they must not
    start new episodes."""
    global _IN_TASK
    _IN_TASK = True  # the pool's own try holds this whole call: a stop may raise in it
    try:
        if _STOPPING:
            raise SystemExit(130)
        return fn(task)
    finally:
        _IN_TASK = False


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and stop the workers: SIGTERM (each ends its current
    task, runs no other and exits when the pool says so), then SIGKILL for any still
    alive after :data:`STOP_GRACE_S`."""
    # the pool's own processes (a private attribute in CPython's 3.9-3.13 pools)
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.exitcode is None:
            with contextlib.suppress(OSError, ValueError):
                os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    alive = [p for p in procs if p.exitcode is None]
    while alive and time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            multiprocessing.connection.wait(
                [p.sentinel for p in alive], deadline - time.monotonic()
            )
        alive = [p for p in alive if p.is_alive()]
    for p in alive:
        with contextlib.suppress(OSError, ValueError):
            p.kill()


def execute(
    fn: Callable[..., R],
    tasks: Sequence[T],
    config: ExecutorConfig,
    on_result: Callable[[R], None],
    *,
    inline_kwargs: dict[str, object] | None = None,
    force_inline: bool = False,
) -> bool:
    """Run ``fn(task)`` for every task; ``on_result(result)`` in this process as each ends.

    ``inline_kwargs`` are passed to ``fn`` only when it runs in this process (which
    ``force_inline`` demands, e.g. for an actor object that cannot be sent to workers).
    Returns whether the tasks ran in this process. The first failure cancels what
    has not started and is raised.
    """
    if force_inline and config.kind == "ray":
        raise ValueError("an actor object can only run in this process (executor.kind=local)")
    if config.kind == "ray":
        if tasks:
            _execute_ray(fn, tasks, config, on_result)
        return False
    if config.kind != "local":
        raise ValueError(f"executor.kind must be one of {EXECUTOR_KINDS}, got {config.kind!r}")
    workers = resolve_workers(config, len(tasks))
    if workers == 1 or force_inline:
        for task in tasks:
            on_result(fn(task, **(inline_kwargs or {})))
        return True
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_watch_parent, initargs=(os.getpid(),)
    )
    try:
        pending = {pool.submit(_in_worker, fn, task) for task in tasks}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                try:
                    result = fut.result()
                except SystemExit as e:
                    # a worker stopped by Ctrl-C (_quiet_interrupt) before this process
                    # raised it (or where it ignores SIGINT): the same interrupt here
                    if e.code == 130:
                        raise KeyboardInterrupt from None
                    raise
                on_result(result)
    except BaseException:
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return False


def _execute_ray(
    fn: Callable[..., R], tasks: Sequence[T], config: ExecutorConfig, on_result: Callable[[R], None]
) -> None:
    import ray  # optional dependency (extra "dist")

    if not ray.is_initialized():
        ray.init(address=config.ray_address or None, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(
        num_cpus=config.ray_num_cpus,
        num_gpus=config.ray_num_gpus,
        max_retries=config.ray_max_retries,
    )(fn)
    pending = [remote.remote(task) for task in tasks]
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                on_result(ray.get(ref))
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
