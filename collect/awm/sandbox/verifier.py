"""Parent side of verification: a pool of confined fork-server workers."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from collect.awm.clock import WorldClock
from collect.awm.sandbox.files import (
    copy_file_nofollow,
    default_work_root,
    ensure_private_dir,
)
from collect.awm.sandbox.rmtree import remove_tree
from collect.awm.sandbox.worker import SandboxError, SandboxLimits, Worker
from helpdp.jsonvalue import JSON

# the fork server enforces the run's own time limit; the parent's is this much later
_PARENT_MARGIN_S = 5.0
# a run that fails so on a worker that served earlier runs is tried once more on a new one
_RETRY_KINDS = ("protocol", "crashed")
_log = logging.getLogger(__name__)


@dataclass
class VerifierOutcome:
    """Result of running one verifier in a worker.

    ``status``: ``ok`` (``result`` holds the verifier's return value),
    ``syntax_error`` (``lineno``), ``error`` (the verifier raised, or a sandbox
    rule refused something: ``message``), ``invalid_result`` (code mode: not
    ``{"result": "complete"|"others"}``), ``export_error`` (the final database the
    app left is not a regular file), or a sandbox kind: ``timeout``, ``memory``,
    ``cpu``, ``crashed``, ``protocol``, ``isolation``; with ``semantics='official'``
    also ``short_code`` (code under 10 characters). ``verdict``: official code mode,
    ``complete`` or ``others`` (None otherwise).
    """

    status: str
    result: JSON = None
    message: str = ""
    lineno: int | None = None
    seconds: float = 0.0
    verdict: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def label(self) -> str | None:
        """Code mode: ``complete`` or ``others``; None otherwise."""
        if self.ok and isinstance(self.result, dict):
            value = self.result.get("result")
            if isinstance(value, str):
                return value.strip().lower()
        return None


def _clear(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


class VerifierPool:
    """Confined workers that run verifier code on read-only database copies.

    Each worker is a fork server: every run is a fresh child of a process that never
    ran dataset code, so one verifier cannot change what another sees. A run sees
    only its worker's inbox, where the parent puts private copies of the two
    databases (mode 0444, on a read-only mount, with a read-only SQLite authorizer
    as a first layer); the master database is never in any worker's view. A worker
    that dies or breaks the protocol is replaced.

    The reply channel. A run cannot reach its fork server's pipes: they are closed in
    the forked child before dataset code runs, and the seccomp filter denies every way
    back to them (``pidfd_getfd``, ``process_vm_*``, ``ptrace``; there is no ``/proc``).
    Behind that, each verification is fenced: right after the verdict the pool sends a
    ``ping``, which the fork server answers only once it has finished the run. A frame
    the run slipped in ahead of the genuine reply leaves that reply between the verdict
    and the ping's answer, so the nonce check fails: the worker is killed, the event is
    counted in ``protocol_violations``, and the run's verdict is ``protocol`` (its own
    task's, never the next one's). A run that finds a reused worker broken (``protocol``,
    ``crashed``) before its answer is run again, once, on another worker (the broken one
    is gone; every idle one passed its fence). A fence that fails is the run's own doing:
    the stream was in step when the run began, so it is not run again.

    One world per worker. A fork server receives each run's code (and its final answer)
    in its own memory, which its next child inherits; so a worker serves the runs of one
    ``world`` only (:meth:`run`'s argument; without one, of one verifier source) and is
    replaced, never reused, when the pool is full and another world needs a worker.
    """

    def __init__(
        self,
        size: int = 1,
        limits: SandboxLimits | None = None,
        *,
        work_root: Path | None = None,
        max_runs_per_worker: int = 1000,
        clock: WorldClock | None = None,
    ):
        self.size = max(1, int(size))
        self.clock = clock
        self.limits = limits or SandboxLimits(memory_mb=1024, call_timeout_s=30.0)
        self._own_root = work_root is None
        self.root = (
            ensure_private_dir(Path(work_root)) if work_root is not None else default_work_root()
        )
        self.max_runs_per_worker = max_runs_per_worker
        self._idle: list[Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False
        self._serial = 0
        self.protocol_violations = 0  # forged or extra frames seen on a reply channel

    def _new_worker(self) -> Worker:
        with self._cond:
            self._serial += 1
            serial = self._serial
        workdir = ensure_private_dir(self.root / f"verifier-{serial}-{uuid.uuid4().hex[:6]}")
        inbox = ensure_private_dir(workdir / "inbox")
        worker = Worker(
            "verifier",
            self.limits,
            workdir=workdir,
            read_dirs=(inbox,),
            write_dirs=(),
            name=f"verifier-{serial}",
            clock=self.clock,
        )
        worker.start()
        return worker

    def _acquire(self, world: str) -> Worker:
        """An idle worker that served ``world`` only, else a new one (an idle worker of
        another world is closed to make room)."""
        evicted = None
        with self._cond:
            while True:
                if self._closed:
                    raise SandboxError("closed", "verifier pool is closed")
                mine = [w for w in self._idle if getattr(w, "world", None) == world]
                if mine:
                    self._idle.remove(mine[-1])
                    return mine[-1]
                if self._count < self.size:
                    self._count += 1
                    break
                if self._idle:  # full: another world's idle worker makes room
                    evicted = self._idle.pop(0)
                    break
                self._cond.wait()
        if evicted is not None:
            self._discard(evicted)
        try:
            worker = self._new_worker()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise
        worker.world = world
        return worker

    def _discard(self, worker: Worker) -> None:
        worker.close()
        removal = remove_tree(worker.workdir)
        if not removal.removed:
            _log.warning("verifier directory left in place: %s", removal.error)

    def _release(self, worker: Worker, healthy: bool) -> None:
        runs = worker.requests // 2  # a verification is two requests: verify, then the fence
        recycle = not healthy or not worker.alive or runs >= self.max_runs_per_worker
        with self._cond:
            if recycle or self._closed:
                self._count -= 1
                recycle = True
            else:
                self._idle.append(worker)
            self._cond.notify()
        if recycle:
            self._discard(worker)

    def run(
        self,
        code: str,
        *,
        initial_db: Path,
        final_db: Path,
        final_answer: str | None = None,
        mode: str = "code",
        function_name: str | None = None,
        timeout: float | None = None,
        final_from_worker: bool = False,
        world: str | None = None,
        semantics: str = "helpdp",
    ) -> VerifierOutcome:
        """Run ``code``'s verifier function on copies of the two databases.

        ``mode='code'`` calls ``verify_task_completion(initial_db_path,
        final_db_path, final_answer)`` and checks it returns ``{"result":
        "complete"|"others"}``; ``mode='sql'`` calls ``verify_task(initial_db_path,
        final_db_path)`` and returns its dict. ``final_from_worker``: the final
        database was written by an app worker (copied as a regular file only,
        without following links or blocking). ``world``: whose run this is (a worker
        serves one world's runs only); None: the runs of this ``code`` only.
        ``semantics='official'``: AWM verify.py's instead (docs/environments.md,
        conformance): the worker calls the first ``def verify_...`` of the code
        (``function_name`` unused) with the arguments its signature names, code under
        10 characters is ``short_code``, and a code-mode dict with a ``result`` key gives
        ``verdict`` ``complete`` (exactly that value) or ``others``.
        """
        if semantics not in ("helpdp", "official"):
            raise ValueError(f"semantics must be helpdp or official, not {semantics!r}")
        if function_name is None:
            function_name = "verify_task_completion" if mode == "code" else "verify_task"
        timeout = self.limits.call_timeout_s if timeout is None else float(timeout)
        started = time.perf_counter()
        payload = {
            "code": code,
            "function": function_name,
            "mode": mode,
            "final_answer": final_answer,
            "timeout": timeout,
        }
        if semantics == "official":
            payload["semantics"] = "official"
        databases = (Path(initial_db), Path(final_db), final_from_worker)
        if world is None:
            world = "code:" + hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()
        outcome, retry = self._run_once(payload, databases, started, world)
        if retry:  # a reused worker broke before answering: maybe an earlier run's doing
            _log.warning("verifier worker broke (%s); the run goes to another", outcome.status)
            outcome, _ = self._run_once(payload, databases, started, world)
        return outcome

    def _run_once(
        self, payload: dict, databases: tuple[Path, Path, bool], started: float, world: str
    ) -> tuple[VerifierOutcome, bool]:
        """One verification on one worker: (its outcome, whether to try it once more
        elsewhere: the worker had served earlier runs and broke before its answer)."""
        initial_db, final_db, final_from_worker = databases
        timeout = payload["timeout"]
        try:
            worker = self._acquire(world)
        except SandboxError as e:
            return VerifierOutcome(e.kind, message=e.message), False
        reused = worker.requests > 0
        healthy = False
        # One run at a time per worker: its inbox holds this run's two copies only.
        inbox = worker.read_dirs[0].resolve()
        init_copy, final_copy = inbox / "initial.db", inbox / "final.db"
        try:
            _clear(init_copy, final_copy)
            try:
                copy_file_nofollow(Path(initial_db), init_copy, None, exclusive=True)
                if final_from_worker:
                    copy_file_nofollow(Path(final_db), final_copy)
                else:
                    copy_file_nofollow(Path(final_db), final_copy, None, exclusive=True)
            except OSError as e:
                healthy = True
                return VerifierOutcome(
                    "export_error",
                    message=f"final database unusable: {e}",
                    seconds=time.perf_counter() - started,
                ), False
            for p in (init_copy, final_copy):
                os.chmod(p, 0o444)
            request = {
                **payload,
                "initial_db_path": str(init_copy),
                "final_db_path": str(final_copy),
            }
            limit = timeout + _PARENT_MARGIN_S
            try:
                reply = worker.request("verify", request, timeout=limit)
            except SandboxError as e:
                self._note_violation(e)
                return VerifierOutcome(
                    e.kind, message=e.message, seconds=time.perf_counter() - started
                ), reused and e.kind in _RETRY_KINDS
            try:  # the fence (see the class docstring)
                worker.request("ping", {}, timeout=limit)
                healthy = True
            except SandboxError as e:
                self._note_violation(e)
                return VerifierOutcome(
                    e.kind,
                    message=f"verdict discarded, the reply channel was tampered with: {e.message}",
                    seconds=time.perf_counter() - started,
                ), False
        finally:
            _clear(init_copy, final_copy)
            self._release(worker, healthy)
        seconds = time.perf_counter() - started
        if reply.get("ok"):
            verdict = reply.get("verdict")
            if verdict not in ("complete", "others"):
                verdict = None
            return VerifierOutcome(
                "ok", result=reply.get("result"), seconds=seconds, verdict=verdict
            ), False
        return VerifierOutcome(
            reply.get("error", "error"),
            message=str(reply.get("message", "")),
            lineno=reply.get("lineno") if isinstance(reply.get("lineno"), int) else None,
            seconds=seconds,
        ), False

    def _note_violation(self, error: SandboxError) -> None:
        if error.kind == "protocol":
            with self._cond:
                self.protocol_violations += 1
            _log.warning("verifier reply channel: %s", error.message)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.close()
        if self._own_root:
            remove_tree(self.root)

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
