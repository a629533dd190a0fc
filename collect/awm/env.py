"""Episodes in an AWM scenario: ``reset(task) -> observation``, ``step(text)``, ``verify``.

:class:`AWMEnv` owns one sandboxed app worker (:class:`~collect.awm.sandbox.AppWorker`)
and uses a shared :class:`~collect.awm.sandbox.VerifierPool`. Typical collector loop::

    pool = EnvPool("collect/worlds")            # or AWMEnv(dataset.get(name))
    env = pool.acquire("smart_home_1")
    first = env.reset(task_idx=3)               # first.system_prompt, first.task
    while True:
        result = env.step(model_turn_text)      # StepResult(observation, reward, done, info)
        if result.info["action"]["kind"] == "ask_expert": ...   # harness answers
        if result.done: break                   # result.reward, result.info["outcome"]
    pool.release(env)

Async callers use ``await env.astep(text)`` (the blocking work runs in a thread;
nothing here runs an event loop).

Outcomes: ``complete``/``incomplete``/``others`` (verified), ``format_error``
(ended on a protocol violation), ``server_error`` (the app's worker died: the
episode is not the agent's fault and ``info["valid"]`` is False),
``verifier_error`` and ``no_verifier`` (also invalid). Rewards come from
:class:`~collect.awm.protocol.RewardConfig`.

The steps live in their own modules: :mod:`~collect.awm.app` (the scenario's
database and app worker: start, reuse, prestart), :mod:`~collect.awm.tool_calls`
(dispatching a tool call), :mod:`~collect.awm.episode` (the results, counters and
trajectory of an episode) and :mod:`~collect.awm.verification` (verifiers and the
judge). This module holds the episode loop (:class:`AWMEnv`) and :class:`EnvPool`.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import itertools
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from collect.awm.app import AppLifecycle, build_scenario_database, is_shipped_app
from collect.awm.clock import WorldClock
from collect.awm.database import BuildReport
from collect.awm.dataset import AWMDataset, Scenario, ServedScenarios
from collect.awm.episode import EpisodeRecord, ResetResult, StepResult, truncation_info
from collect.awm.protocol import (
    Action,
    Failure,
    parse_turn,
    system_prompt,
)
from collect.awm.rewards import RewardConfig
from collect.awm.sandbox import (
    AppWorker,
    SandboxLimits,
    VerifierPool,
    check_isolation,
    default_work_root,
    ensure_private_dir,
)
from collect.awm.sandbox.rmtree import remove_tree
from collect.awm.tool_calls import RESPONSE_LAYOUTS, ToolCalls
from collect.awm.tools import DEFAULT_HIDDEN_TOOLS, Tool
from collect.awm.verification import (
    VERIFY_SEMANTICS,
    EpisodeVerifier,
    Judge,
    JudgeConfig,
    Verification,
)
from helpdp.cliconf import doc_field as _f
from helpdp.contract import sha256_file
from helpdp.jsonvalue import JSON

__all__ = ["IDLE_ENVS_DEFAULT", "AWMEnv", "EnvConfig", "EnvPool", "HostFilesExceeded", "host_bytes"]


#: idle environments an EnvPool keeps where ``max_idle_envs`` is null: every one kept grew
#: with the worlds (bench/scale.py: 1,280 processes and 21 GB at 100 generated worlds,
#: 2 workers), while a world's start costs about a second
IDLE_ENVS_DEFAULT = 16


@dataclass
class EnvConfig:
    """Episode rules, sandbox limits, rewards and verification of :class:`AWMEnv`."""

    max_turns: int = _f(30, "turns per episode; the last one ends it and the database is verified")
    terminate_on_format_error: bool = _f(
        True, "a format error ends the episode with rewards.format_error (AWM)"
    )
    strict_arguments: bool = _f(
        False, "unknown tool arguments are an invalid_arguments error (else dropped)"
    )
    describe_responses: bool = _f(
        False, "tool descriptions include the success response example (fastapi_mcp)"
    )
    tool_order: str = _f(
        "methods",
        "order of a path's tools in the list: methods (GET, POST, PUT, PATCH, DELETE) or "
        "document (the app's declaration order, as fastapi-mcp 0.4.0 lists them)",
    )
    max_observation_chars: int = _f(
        16000, "longest tool-call result returned to the agent, characters"
    )
    expert_enabled: bool = _f(
        True, "ask_expert is a meta-function (in the system prompt and parser)"
    )
    hidden_tools: list[str] = _f(
        list(DEFAULT_HIDDEN_TOOLS), "tool names the agent can never list or call"
    )
    verifier_mode: str = _f(
        "auto", "auto (sql when a judge is configured and a SQL verifier exists), code or sql"
    )
    verify_semantics: str = _f(
        "helpdp",
        "how a verifier is called and read: helpdp (verify_task_completion(initial_db_path, "
        "final_db_path, final_answer); a result not complete/others or an exception is "
        "verifier_error) or official (as AWM's verify.py: the first def verify_..., only the "
        "arguments its signature names; code mode complete | others (any other value) | "
        "judge_error; docs/environments.md, conformance)",
    )
    response_layout: str = _f(
        "app",
        "a tool's answer as the agent reads it: app (the app's body as it wrote it, errors in "
        "helpdp's words) or fastapi_mcp (as the official AWM server's MCP layer gives it: JSON "
        "re-indented by 2, any HTTP error 'Error calling T. Status code: N. Response: BODY'; "
        "docs/environments.md, conformance)",
    )
    verifier_workers: int = _f(1, "verifier worker processes of a pool created by the environment")
    max_idle_envs: int | None = _f(
        None,
        "an EnvPool keeps at most this many idle environments across scenarios and stops the "
        "least recently released beyond it (AWM's 1,000 scenarios); null: IDLE_ENVS_DEFAULT "
        "(16; an idle environment holds its app templates, a prestarted app and a verifier "
        "worker, about 100 MB: keeping every one held 21 GB at 100 generated worlds)",
    )
    sandbox: SandboxLimits = _f(SandboxLimits(), "limits of the app worker")
    verifier_sandbox: SandboxLimits = _f(
        SandboxLimits(memory_mb=1024, call_timeout_s=30.0), "limits of verifier workers"
    )
    verify_budget_s: float = _f(
        60.0,
        "wall-clock seconds all verifier runs of one episode may take together "
        "(each run also stops at verifier_sandbox.call_timeout_s)",
    )
    tool_budget_s: float = _f(
        120.0,
        "wall-clock seconds all tool calls of one episode may take together; once spent the "
        "episode ends as server_error (each call also stops at sandbox.call_timeout_s)",
    )
    fresh_app: bool = _f(
        True,
        "every episode runs on an app process no earlier episode touched (a fresh process "
        "tree and run directory: by default a child forked from a template that never ran "
        "dataset code, sandbox.start); false: only the database is restored between "
        "episodes, so an app's in-memory state and files carry over (faster, not isolated)",
    )
    prestart_app: bool = _f(
        True,
        "with fresh_app, start the next episode's app in the background during an episode "
        "(sandbox.start=fork: on a second template, as each runs one child at a time)",
    )
    reuse_shipped_apps: bool = _f(
        True,
        "an app whose code is byte-identical to a shipped demo world's (this repository's own "
        "code, which keeps nothing between episodes) keeps its worker between episodes, its "
        "database restored, instead of a fresh one per episode (about 0.85 s each); every "
        "other app follows fresh_app",
    )
    rewards: RewardConfig = _f(RewardConfig(), "reward of each episode outcome")
    judge: JudgeConfig = _f(JudgeConfig(timeout_s=60.0), "LLM judge for SQL-mode verifiers")
    work_root: str | None = _f(
        None, "directory for databases and workers; null: a fresh one on /dev/shm or /tmp"
    )
    host_files_mb: float | None = _f(
        4096,
        "MiB of files an EnvPool keeps under work_root (initial databases, the app "
        "workers' seed copies, verifier exports; on /dev/shm by default, outside every "
        "worker's cgroup): beyond it idle environments and then the initial databases no "
        "environment uses are dropped (least recently used first; rebuilt when needed "
        "again), and a start that still does not fit fails with HostFilesExceeded; "
        "null: no limit",
    )
    remote_message_mb: int = _f(
        32, "runtime=openenv: largest WebSocket message accepted from the server, MiB"
    )
    remote_json_values: int = _f(
        1_000_000,
        "runtime=openenv: most JSON values one server message may hold (counted before it "
        "is decoded); more is a per-episode error",
    )
    remote_json_depth: int = _f(
        64, "runtime=openenv: deepest nesting of one server message; deeper is an error"
    )


def _check_semantics(config: EnvConfig) -> None:
    if config.verify_semantics not in VERIFY_SEMANTICS:
        raise ValueError(
            f"env.verify_semantics must be one of {VERIFY_SEMANTICS}, "
            f"not {config.verify_semantics!r}"
        )


def _trim(text: str, limit: int) -> str:
    if limit and len(text) > limit:
        return text[:limit] + f"\n... (truncated, {len(text) - limit} more characters)"
    return text


class AWMEnv(AppLifecycle, ToolCalls, EpisodeVerifier, EpisodeRecord):
    """One scenario's environment: a sandboxed app, its database and the agent protocol.

    Its steps come from :class:`~collect.awm.app.AppLifecycle` (the app worker),
    :class:`~collect.awm.tool_calls.ToolCalls` (tool calls),
    :class:`~collect.awm.verification.EpisodeVerifier` (verification) and
    :class:`~collect.awm.episode.EpisodeRecord` (the episode's record)."""

    def __init__(
        self,
        scenario: Scenario,
        config: EnvConfig | None = None,
        *,
        verifier_pool: VerifierPool | None = None,
        judge: Judge | None = None,
        initial_db: Path | None = None,
        build_report: BuildReport | None = None,
        work_root: Path | None = None,
        clock: WorldClock | None = None,
    ):
        missing = [p for p in ("env", "db", "tasks") if not scenario.has(p)]
        if missing:
            raise ValueError(f"scenario {scenario.name!r} cannot run: missing {', '.join(missing)}")
        self.scenario = scenario
        self.config = config or EnvConfig()
        if self.config.response_layout not in RESPONSE_LAYOUTS:
            raise ValueError(
                f"env.response_layout must be one of {RESPONSE_LAYOUTS}, "
                f"not {self.config.response_layout!r}"
            )
        _check_semantics(self.config)
        check_isolation(self.config.sandbox)
        check_isolation(self.config.verifier_sandbox)
        root = work_root or (Path(self.config.work_root) if self.config.work_root else None)
        self._own_root = root is None
        self.work_root = Path(root) if root is not None else default_work_root()
        ensure_private_dir(self.work_root)
        self._instance = uuid.uuid4().hex[:8]
        self.clock = clock if clock is not None else WorldClock.resolve(None, None)
        if initial_db is None:
            initial_db, build_report = build_scenario_database(
                scenario,
                self.work_root / f"db-{scenario.name}-{self._instance}",
                clock=self.clock,
                limits=self.config.sandbox,
            )
        self.initial_db = Path(initial_db)
        self.build_report = build_report
        self._own_pool = verifier_pool is None
        self.verifier_pool = verifier_pool or VerifierPool(
            self.config.verifier_workers,
            self.config.verifier_sandbox,
            work_root=self.work_root / f"verify-{self._instance}",
            clock=self.clock,
        )
        self.judge = judge or Judge(self.config.judge)
        #: fresh_app as it applies to this scenario's app (see reuse_shipped_apps)
        self.fresh_app = self.config.fresh_app and not (
            self.config.reuse_shipped_apps and is_shipped_app(scenario.env_code)
        )
        self.app: AppWorker | None = None
        self.tools: list[Tool] = []
        self._tools_by_name: dict[str, Tool] = {}
        self.restarts = 0
        self._workers_started = 0
        self._app_numbers = itertools.count(1)
        self._spare: concurrent.futures.Future | None = None
        self._zygotes = {}  # app templates by slot (sandbox.start=fork), made when needed
        self._app_specs = {}  # the app's OpenAPI document and tools, as its first load gave
        self.app_starts = 0  # app workers started (with fresh_app: one per episode)
        self.app_start_seconds = 0.0
        self._lock = threading.RLock()
        self._closed = False
        self._new_episode_state()
        self.done = True

    @classmethod
    def from_dir(cls, data: str | Path, scenario: str, config: EnvConfig | None = None) -> AWMEnv:
        """The environment of ``scenario`` in the AWM-format directory ``data``."""
        dataset = AWMDataset(data)
        return cls(dataset.get(scenario), config, clock=dataset.clock())

    # -- episode API --------------------------------------------------------------
    def reset(
        self, task_idx: int = 0, *, task: str | None = None, episode_id: str | None = None
    ) -> ResetResult:
        """Restore the initial database and start an episode on task ``task_idx``.

        ``task`` overrides the task text (the verifier of ``task_idx`` still applies).
        """
        with self._lock:
            text = task if task is not None else self.scenario.task(task_idx).text
            self._app_for_episode()
            self._new_episode_state()
            self.episode_id = episode_id or uuid.uuid4().hex
            self.task_idx = task_idx
            self.task_text = text
            return ResetResult(
                self.episode_id,
                self.scenario.name,
                task_idx,
                text,
                system_prompt(expert_enabled=self.config.expert_enabled),
            )

    def step(self, text: str) -> StepResult:
        """Apply one model turn (see :mod:`collect.awm.protocol`)."""
        action = parse_turn(text, expert_enabled=self.config.expert_enabled)
        return self.act(action, turn_text=text)

    def act(self, action: Action, *, turn_text: str | None = None) -> StepResult:
        """Apply an already-parsed :class:`~collect.awm.protocol.Action` (structured clients)."""
        with self._lock:
            if self.done or not self.episode_id:
                raise RuntimeError("episode is over: call reset() first")
            started = time.perf_counter()
            self.turn += 1
            info: dict[str, JSON] = {"turn": self.turn, "action": action.as_dict(), "failure": None}
            observation = ""
            status: int | None = None
            failure: Failure | None = action.failure
            fatal_message = None
            if action.kind == "final":
                return self._finish(action.text, info, started, turn_text, action)
            if action.kind == "invalid":
                observation = f"Error: {action.message}"
            elif action.kind == "list_tools":
                observation = self._tools_text
            elif action.kind == "ask_expert":
                self.expert_calls += 1
                info["ask_expert"] = action.arguments
            elif action.kind == "call_tool":
                self.tool_calls += 1
                result = self.call_tool(action.tool_name or "", action.arguments)
                observation, status, failure = result.text, result.status, result.failure
                info["app_ms"] = result.app_ms
                if result.fatal:
                    fatal_message = result.text
            info["status_code"] = status
            if failure is not None:
                self.failures[failure.value] += 1
                info["failure"] = failure.value
                if failure.is_format_error:
                    self.format_errors += 1
            info["format_error"] = bool(failure and failure.is_format_error)
            if action.kind == "call_tool":
                observation = _trim(observation, self.config.max_observation_chars)
            self.trajectory.append(
                {
                    "turn": self.turn,
                    "text": turn_text,
                    "action": info["action"],
                    "observation": observation,
                }
            )
            info["latency_ms"] = (time.perf_counter() - started) * 1000
            if fatal_message is not None:
                return self._end(
                    Verification(
                        "server_error", "none", status="server_error", message=fatal_message
                    ),
                    observation,
                    info,
                )
            if (
                failure is not None
                and failure.is_format_error
                and self.config.terminate_on_format_error
            ):
                return self._end(
                    Verification(
                        "format_error", "none", status="format_error", message=action.message
                    ),
                    observation,
                    info,
                )
            if self.turn >= self.config.max_turns:
                info["truncated"] = True
                return self._end(self.verify(None), observation, info)
            return StepResult(observation, None, False, info)

    def truncate(self) -> StepResult:
        """End the episode before the actor's next turn (its prompt no longer fits the
        model's context window): the world is verified as it stands, as at
        ``max_turns``; no turn is counted. ``info``: ``truncated`` and ``context_full``."""
        with self._lock:
            if self.done or not self.episode_id:
                raise RuntimeError("episode is over: call reset() first")
            info = truncation_info(self.turn)
            return self._end(self.verify(None), "", info)

    def _finish(
        self, answer: str, info: dict, started: float, turn_text: str | None, action: Action
    ):
        self.trajectory.append(
            {"turn": self.turn, "text": turn_text, "action": action.as_dict(), "observation": ""}
        )
        info["format_error"] = False
        info["final_answer"] = answer
        verification = self.verify(answer)
        info["latency_ms"] = (time.perf_counter() - started) * 1000
        return self._end(verification, "", info)

    # -- async wrappers --------------------------------------------------------------------
    async def areset(self, task_idx: int = 0, **kwargs: JSON) -> ResetResult:
        return await asyncio.to_thread(self.reset, task_idx, **kwargs)

    async def astep(self, text: str) -> StepResult:
        return await asyncio.to_thread(self.step, text)

    async def aact(self, action: Action) -> StepResult:
        return await asyncio.to_thread(self.act, action)

    async def averify(self, final_answer: str | None = None) -> Verification:
        return await asyncio.to_thread(self.verify, final_answer)

    # -- cleanup ---------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._drop_spare()
            self._discard_app()
            self._close_template()
            if self._own_pool:
                self.verifier_pool.close()
            if self._own_root:
                remove_tree(self.work_root)

    def __enter__(self) -> AWMEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # best effort: never leave workers behind
        with contextlib.suppress(Exception):
            if not self._closed and self.app is not None:
                self.app.close()
            if not self._closed:
                self._close_template()


_BUILD_LOCK = threading.Lock()  # one scenario database is built at a time


class HostFilesExceeded(RuntimeError):
    """The files an :class:`EnvPool` keeps on the host are over ``env.host_files_mb``
    and nothing is left to drop: the live environments alone need more."""


def host_bytes(root: Path) -> int:
    """Bytes allocated to the regular files under ``root`` (symlinks not followed; what a
    worker's private tmpfs holds is not on the host and not counted)."""
    total, stack = 0, [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


def _allocated(path: Path) -> int:
    """Bytes allocated to the file at ``path`` (0 when it is gone)."""
    try:
        return os.stat(path, follow_symlinks=False).st_blocks * 512
    except OSError:
        return 0


def _seed_copies(env: AWMEnv) -> int:
    """How many seed copies of its initial database ``env``'s app workers may hold at once
    on the host: one worker restored between episodes; with ``fresh_app``, a template per
    slot (``sandbox.start=fork``: the episode's, and the next's with ``prestart_app``),
    else the episode's worker, the prestarted one and the last one being disposed of."""
    if not env.fresh_app:
        return 1
    prestart = bool(env.config.prestart_app)
    if env._forks():
        return 2 if prestart else 1
    return 3 if prestart else 2


def _app_bytes(env: AWMEnv) -> int:
    """Bytes of the files of ``env``'s app workers now (their run directories on the host)."""
    prefix = f"app-{env.scenario.name}-{env._instance}"
    try:
        entries = [d for d in env.work_root.iterdir() if d.name.startswith(prefix)]
    except OSError:
        return 0
    return sum(host_bytes(d) for d in entries)


class EnvPool(ServedScenarios):
    """Environments for many scenarios of one dataset, sharing databases and verifiers.

    ``acquire(name)`` hands out an idle :class:`AWMEnv` of that scenario (starting
    one if needed); ``release(env)`` returns it. Databases are built once per
    scenario; all environments share one :class:`VerifierPool`.

    Host-side files (``env.host_files_mb``): before a scenario's database is built and
    after each acquire and release, the files under ``work_root`` are counted
    (:func:`host_bytes`) together with what the environments in use may still write
    (:meth:`reserved_bytes`: their app workers' seed copies not made yet and the
    verifier inboxes' two copies, each counted at the size of its initial database; a
    database about to be built at twice the largest built so far: the build worker's
    file and its copy); while that is over the
    budget, the least recently released idle environment is stopped (its workers' seed
    copies go with it), then the least recently used initial database that no
    environment holds is removed (rebuilt when its scenario comes back, and refused if
    it then differs: seed SQL that is not deterministic). So the files' peak, not only
    what is left between episodes, stays within the budget, whatever the number of
    scenarios. An acquire that still does not fit raises :class:`HostFilesExceeded`
    (that episode fails, named).
    """

    def __init__(
        self,
        dataset: AWMDataset | str | Path,
        config: EnvConfig | None = None,
        *,
        scenarios: list[str] | None = None,
        judge: Judge | None = None,
        clock: WorldClock | None = None,
    ):
        self.dataset = dataset if isinstance(dataset, AWMDataset) else AWMDataset(dataset)
        self.config = config or EnvConfig()
        if self.config.response_layout not in RESPONSE_LAYOUTS:
            raise ValueError(
                f"env.response_layout must be one of {RESPONSE_LAYOUTS}, "
                f"not {self.config.response_layout!r}"
            )
        _check_semantics(self.config)
        check_isolation(self.config.sandbox)  # refused here, once, with what to do
        check_isolation(self.config.verifier_sandbox)
        self.clock = clock if clock is not None else self.dataset.clock()
        self._own_root = not self.config.work_root
        self.work_root = (
            Path(self.config.work_root) if self.config.work_root else default_work_root()
        )
        ensure_private_dir(self.work_root)
        self.verifier_pool = VerifierPool(
            self.config.verifier_workers,
            self.config.verifier_sandbox,
            work_root=self.work_root / "verify",
            clock=self.clock,
        )
        self.judge = judge or Judge(self.config.judge)
        self.allowed = set(scenarios) if scenarios else None
        self._scenarios: dict[str, Scenario] = {}
        # initial databases, least recently used first; their digests; acquires under way
        self._assets: collections.OrderedDict[str, tuple[Path, BuildReport]] = (
            collections.OrderedDict()
        )
        self._digests: dict[str, str] = {}
        self._pinned: collections.Counter[str] = collections.Counter()
        self._idle: dict[str, list[AWMEnv]] = {}
        self._all: list[AWMEnv] = []
        self._released: dict[int, AWMEnv] = {}  # idle environments, least recently released first
        self._largest_db = 0  # bytes of the largest initial database built so far
        self._lock = threading.Lock()

    def _database(self, scenario: Scenario) -> tuple[Path, BuildReport]:
        name = scenario.name
        with _BUILD_LOCK:
            if name not in self._assets:
                built = build_scenario_database(
                    scenario,
                    self.work_root / "db" / name,
                    clock=self.clock,
                    limits=self.config.sandbox,
                )
                if self.config.host_files_mb is not None:  # it may be evicted and rebuilt
                    digest = sha256_file(built[0])
                    if self._digests.setdefault(name, digest) != digest:
                        raise RuntimeError(
                            f"scenario {name!r}: its initial database, rebuilt after "
                            "env.host_files_mb dropped it, differs from the first build "
                            "(seed SQL that is not deterministic): raise env.host_files_mb"
                        )
                self._assets[name] = built
                self._largest_db = max(self._largest_db, _allocated(built[0]))
            self._assets.move_to_end(name)
            return self._assets[name]

    def acquire(self, name: str) -> AWMEnv:
        scenario = self.scenario(name)
        with self._lock:
            idle = self._idle.get(scenario.name)
            if idle:
                env = idle.pop()
                del self._released[id(env)]
                return env
            self._pinned[scenario.name] += 1
        try:
            if scenario.name not in self._assets:  # room for it first, as large as any
                self._fit(2 * self._largest_db)  # the build worker's file, and its copy
            initial_db, report = self._database(scenario)
            env = AWMEnv(
                scenario,
                self.config,
                verifier_pool=self.verifier_pool,
                judge=self.judge,
                initial_db=initial_db,
                build_report=report,
                work_root=self.work_root / "envs",
                clock=self.clock,
            )
            with self._lock:
                self._all.append(env)
        finally:
            with self._lock:
                self._pinned[scenario.name] -= 1
        try:
            self._fit()
        except HostFilesExceeded:
            with self._lock:
                self._all.remove(env)
            env.close()
            raise
        return env

    def host_bytes(self) -> int:
        """Bytes of the files this pool keeps on the host (under ``work_root``)."""
        return host_bytes(self.work_root)

    def reserved_bytes(self) -> int:
        """Bytes the environments in use (acquired, not released) may still write under
        ``work_root``: the seed copies of their app workers not made yet (one per worker
        that holds one at a time, :func:`_seed_copies`) and the two copies of a
        verifier inbox per verifier worker, each at the size of its initial database
        (a final database the agent grew is larger: the budget counts it as the initial)."""
        with self._lock:
            live = [e for e in self._all if id(e) not in self._released and not e._closed]
        if not live:
            return 0
        total = 0
        for env in live:
            size = _allocated(env.initial_db)
            total += max(0, _seed_copies(env) * size - _app_bytes(env))
        workers = max(1, int(self.config.verifier_workers))
        inbox = 2 * workers * max(_allocated(e.initial_db) for e in live)
        return total + max(0, inbox - host_bytes(self.work_root / "verify"))

    def _fit(self, extra: int = 0) -> None:
        """Drop idle environments, then unused initial databases (least recently used
        first) until the host-side files, with :meth:`reserved_bytes` and ``extra``
        bytes about to be written, fit ``env.host_files_mb``."""
        limit = self.config.host_files_mb
        if limit is None:
            return
        budget = int(float(limit) * (1 << 20))
        while (used := self.host_bytes() + self.reserved_bytes() + extra) > budget:
            if not self._evict_one():
                raise HostFilesExceeded(
                    f"{used} bytes of files under {self.work_root} (with what the "
                    "environments in use may still write) are over "
                    f"env.host_files_mb ({float(limit):g} MiB) with nothing left to drop: "
                    "the live environments need more (raise env.host_files_mb or run "
                    "fewer workers)"
                )

    def _evict_one(self) -> bool:
        with self._lock:
            if self._released:
                old = self._released.pop(next(iter(self._released)))
                self._idle[old.scenario.name].remove(old)
                self._all.remove(old)
            else:
                old = None
        if old is not None:
            old.close()
            return True
        with _BUILD_LOCK, self._lock:
            held = {e.scenario.name for e in self._all} | {n for n, c in self._pinned.items() if c}
            name = next((n for n in self._assets if n not in held), None)
            if name is None:
                return False
            del self._assets[name]
            remove_tree(self.work_root / "db" / name)
        return True

    def release(self, env: AWMEnv) -> None:
        """Return ``env`` for reuse; beyond ``config.max_idle_envs`` idle environments
        (null: :data:`IDLE_ENVS_DEFAULT`), the least recently released one is stopped."""
        evicted: list[AWMEnv] = []
        with self._lock:
            if env._closed:
                return
            self._idle.setdefault(env.scenario.name, []).append(env)
            self._released[id(env)] = env
            cap = self.config.max_idle_envs
            cap = IDLE_ENVS_DEFAULT if cap is None else int(cap)
            while len(self._released) > max(cap, 0):
                old = self._released.pop(next(iter(self._released)))
                self._idle[old.scenario.name].remove(old)
                self._all.remove(old)
                evicted.append(old)
        for old in evicted:  # outside the lock: stopping a worker takes a while
            old.close()
        with contextlib.suppress(HostFilesExceeded):  # the next acquire names it
            self._fit()

    def close(self) -> None:
        with self._lock:
            envs, self._all = self._all, []
            self._idle.clear()
            self._released.clear()
        for env in envs:
            env.close()
        self.verifier_pool.close()
        if self._own_root:
            remove_tree(self.work_root)

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
