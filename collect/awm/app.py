"""Starting a scenario's app: its initial database and the sandboxed app worker.

:func:`build_scenario_database` builds a scenario's initial database in a sandboxed
build worker. :class:`AppLifecycle` (a part of :class:`~collect.awm.env.AWMEnv`)
starts, reuses, recycles and prestarts the app worker an episode runs on: with
``fresh_app`` every episode gets a worker no earlier episode touched (the next one is
started in the background while an episode runs); an app that is, byte for byte, a
shipped demo world's (:func:`is_shipped_app`) keeps its worker between episodes, its
database restored.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import os
import time
import uuid
from pathlib import Path

from collect.awm.clock import WorldClock
from collect.awm.database import BuildReport
from collect.awm.dataset import AWMDataset, Scenario
from collect.awm.sandbox import (
    AppWorker,
    AppZygote,
    ForkedApp,
    SandboxError,
    SandboxLimits,
    Worker,
    copy_file_nofollow,
    ensure_private_dir,
)
from collect.awm.sandbox.rmtree import remove_tree
from collect.awm.tools import Tool, format_tools, tools_from_openapi
from collect.worlds import WORLDS_DIR

__all__ = ["AppLifecycle", "build_scenario_database", "is_shipped_app"]

# starts the next episode's app worker while the current episode runs (fresh_app)
_PRESTART = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="app-prestart")


def build_scenario_database(
    scenario: Scenario,
    directory: Path,
    *,
    clock: WorldClock | None = None,
    limits: SandboxLimits | None = None,
) -> tuple[Path, BuildReport]:
    """Build ``scenario``'s initial database in ``directory`` (read-only afterwards).

    The dataset's SQL runs in a sandboxed build worker on the world ``clock`` (seed
    rows that say ``datetime('now', ...)`` get the clock's date; default: the fixed
    :data:`~collect.awm.clock.DEFAULT_CLOCK`), never here.
    """
    directory = ensure_private_dir(Path(directory))
    clock = clock if clock is not None else WorldClock.resolve(None, None)
    schema_loc = scenario.locations.get("db")
    sample_loc = scenario.locations.get("sample")
    limits = limits or SandboxLimits()
    # The worker writes in a directory of its own; the result is copied out (a regular
    # file only) to where no worker ever sees it.
    build_dir = directory / f"build-{uuid.uuid4().hex[:8]}"
    worker = Worker("build", limits, workdir=build_dir, name=f"build {scenario.name}", clock=clock)
    path = directory / "initial.db"
    try:
        worker.start()
        reply = worker.request(
            "build",
            {
                "dest": "initial.db",
                "db_schema": scenario.db_schema,
                "sample_data": scenario.sample_data,
                "schema_source": str(schema_loc) if schema_loc else "gen_db.jsonl",
                "sample_source": str(sample_loc) if sample_loc else "gen_sample.jsonl",
                "time_limit_s": limits.build_timeout_s,
                "max_value_bytes": int(limits.build_value_mb) * 1024 * 1024,
            },
            timeout=limits.build_timeout_s + 10.0,
        )
        worker.close()
        if not reply.get("ok"):
            kind = "build_limit" if reply.get("error") == "build_limit" else "crashed"
            raise SandboxError(kind, f"build {scenario.name}: {reply.get('message')}")
        try:
            report = BuildReport.from_json(reply["report"])
        except (KeyError, TypeError, ValueError) as e:
            raise SandboxError(
                "protocol", f"build {scenario.name}: malformed report: {e}"
            ) from None
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path, 0o600)
            path.unlink()
        try:
            copy_file_nofollow(build_dir / "initial.db", path, int(limits.build_file_mb) << 20)
        except OSError as e:
            raise SandboxError("crashed", f"build {scenario.name}: no database: {e}") from None
    finally:
        worker.close()
        remove_tree(build_dir)
    report.path = path
    os.chmod(path, 0o444)
    return path, report


def _dispose(app: AppWorker) -> None:
    """Stop an app worker and remove its run directory if it is its own (never raises)."""
    with contextlib.suppress(Exception):
        app.close()
    if app.owns_workdir:  # a forked app's is its template's (emptied by it)
        remove_tree(app.workdir)


@functools.lru_cache(maxsize=1)
def _shipped_app_digests() -> frozenset[str]:

    shipped = AWMDataset(WORLDS_DIR)
    return frozenset(
        hashlib.sha256(code.encode()).hexdigest()
        for name in shipped.names()
        if (code := shipped.get(name).env_code)
    )


def is_shipped_app(env_code: str | None) -> bool:
    """Whether ``env_code`` is, byte for byte, the app of one of the shipped demo worlds."""
    if not env_code:
        return False
    return hashlib.sha256(env_code.encode()).hexdigest() in _shipped_app_digests()


class AppLifecycle:
    """The app worker of an :class:`~collect.awm.env.AWMEnv`: started, reused,
    recycled and prestarted (part of the environment: it uses its ``scenario``,
    ``config``, ``work_root``, ``clock`` and lock, and keeps ``app``, ``tools``, the spare
    app started in the background and the start counters)."""

    def start(self, *, _fresh: bool = False) -> None:
        """Start the app worker (idempotent); raises :class:`SandboxError` if the app cannot run.

        (``_fresh``: the start of an episode's fresh app, not a restart after a failure.)"""
        with self._lock:
            if self._closed:
                raise RuntimeError("environment is closed")
            if self.app is not None and self.app.alive:
                return
            self._discard_app()
            self._workers_started += 1
            app, tools = self._take_spare() or self._launch()
            if self._workers_started > 1 and not _fresh:
                self.restarts += 1
            self.app = app
            self.tools = tools
            self._tools_by_name = {t.name: t for t in self.tools}
            self._tools_text = format_tools(self.tools)

    def _forks(self) -> bool:
        """Whether episodes' fresh apps are children of a template (``sandbox.start=fork``)."""
        limits = self.config.sandbox
        return self.fresh_app and limits.start == "fork" and limits.isolation == "os"

    def _new_app(self, slot: int = 0) -> AppWorker:
        workdir = self.work_root / f"app-{self.scenario.name}-{self._instance}"
        if not self._forks():
            app = AppWorker(
                self.config.sandbox,
                workdir=workdir.with_name(f"{workdir.name}-{next(self._app_numbers)}"),
                name=f"app {self.scenario.name}",
                clock=self.clock,
            )
            if self.fresh_app:  # the code's OpenAPI document is made at its first load only
                app.specs = self._app_specs
            return app
        if slot not in self._zygotes:  # one template per slot: the episode's, the next's
            self._zygotes[slot] = AppZygote(
                self.config.sandbox,
                workdir=workdir.with_name(f"{workdir.name}-template{slot}"),
                initial_db=self.initial_db,
                name=f"app {self.scenario.name}",
                clock=self.clock,
                specs=self._app_specs,
            )
        return self._zygotes[slot].app()

    def _free_slot(self) -> int:
        """The template slot no live app of this environment uses (prestart: the other one)."""
        used = getattr(self.app, "zygote", None)
        return 1 if used is not None and used is self._zygotes.get(0) else 0

    def _close_template(self) -> None:
        zygotes, self._zygotes = list(self._zygotes.values()), {}
        for zygote in zygotes:
            zygote.close()

    def _launch(self, slot: int = 0) -> tuple[AppWorker, list[Tool]]:
        """A new app worker, loaded (it has served no request); raises SandboxError."""
        started = time.perf_counter()
        app = self._new_app(slot)
        try:  # tools first: an app whose OpenAPI document is refused never serves
            openapi = app.load(self.scenario.env_code or "", self.initial_db)
            cached = self._app_specs.get("tools")
            if cached is not None and cached[0] is openapi:  # a forked app: the spec's
                tools = cached[1]
            else:
                tools = tools_from_openapi(
                    openapi,
                    hidden=self.config.hidden_tools,
                    describe_responses=self.config.describe_responses,
                    tool_order=self.config.tool_order,
                )
                self._app_specs["tools"] = (openapi, tools)
        except BaseException:  # SandboxError, OpenAPIError included
            _dispose(app)
            raise
        self.app_starts += 1
        self.app_start_seconds += time.perf_counter() - started
        return app, tools

    def _take_spare(self) -> tuple[AppWorker, list[Tool]] | None:
        """The app started in the background for this episode, if it started."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            app, tools = spare.result()
        except Exception:  # noqa: BLE001 - started again in the foreground, errors raised there
            return None
        if not app.alive:
            _dispose(app)
            return None
        return app, tools

    def _prestart(self) -> None:
        # with sandbox.start=fork, on the other template (each runs one child at a time)
        if self.fresh_app and self.config.prestart_app and self._spare is None:
            self._spare = _PRESTART.submit(self._launch, self._free_slot())

    def _drop_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is None:
            return
        with contextlib.suppress(Exception):
            app, _ = spare.result()
            _dispose(app)

    def _discard_app(self) -> None:
        if self.app is not None:
            self.app.close()
            if self.app.owns_workdir:  # iterative: a deep tree cannot make this raise
                remove_tree(self.app.workdir)
            self.app = None

    def _needs_recycle(self) -> bool:
        if self.app is None or not self.app.alive:
            return True
        used = self.app.worker.cpu_seconds_used()
        return used is not None and used > self.config.sandbox.cpu_seconds / 2

    def _app_for_episode(self) -> None:
        """The app worker of the episode that starts: a fresh one (``fresh_app``; the old
        one is disposed of in the background), or the current one with its database
        restored; a worker that died or used half its CPU time is replaced."""
        fresh = self.fresh_app and self.app is not None and self.app.alive
        if fresh and self.episode_id:  # every episode on an app no earlier episode touched
            old, self.app = self.app, None
            if isinstance(old, ForkedApp):
                old.retire()  # its template ends it (processes, files) before the next fork
            else:
                _PRESTART.submit(_dispose, old)  # killed and removed off the reset's path
        if self._needs_recycle():
            self._discard_app()
        if self.app is None:
            self.start(_fresh=fresh)
        elif not self.fresh_app:
            try:
                self.app.reset()
            except SandboxError:
                self._discard_app()
                self.start()
        self._prestart()
