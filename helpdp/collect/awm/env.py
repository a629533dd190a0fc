"""Episodes in an AWM scenario: ``reset(task) -> observation``, ``step(text)``, ``verify``.

:class:`AWMEnv` owns one sandboxed app worker (:class:`~helpdp.collect.awm.sandbox.AppWorker`)
and uses a shared :class:`~helpdp.collect.awm.sandbox.VerifierPool`. Typical collector loop::

    pool = EnvPool("helpdp/collect/worlds")            # or AWMEnv(dataset.get(name))
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
:class:`~helpdp.collect.awm.protocol.RewardConfig`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import inspect
import itertools
import json
import os
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from helpdp.cliconf import doc_field as _f
from helpdp.collect.awm.clock import WorldClock
from helpdp.collect.awm.database import BuildReport
from helpdp.collect.awm.dataset import AWMDataset, Scenario
from helpdp.collect.awm.llm import ChatClient, EndpointConfig
from helpdp.collect.awm.observation import render_observation
from helpdp.collect.awm.protocol import (
    Action,
    Failure,
    RewardConfig,
    episode_reward,
    judge_messages,
    parse_judge_answer,
    parse_turn,
    system_prompt,
)
from helpdp.collect.awm.sandbox import (
    AppWorker,
    SandboxError,
    SandboxLimits,
    VerifierOutcome,
    VerifierPool,
    Worker,
    check_isolation,
    copy_file_nofollow,
    default_work_root,
    ensure_private_dir,
)
from helpdp.collect.awm.sandbox.rmtree import remove_tree
from helpdp.collect.awm.tools import (
    DEFAULT_HIDDEN_TOOLS,
    Tool,
    build_request,
    canonical_tool_name,
    format_tools,
    is_hidden_tool,
    tools_from_openapi,
    validate_arguments,
)

__all__ = [
    "AWMEnv",
    "EnvConfig",
    "EnvPool",
    "Judge",
    "JudgeConfig",
    "ResetResult",
    "StepResult",
    "ToolResult",
    "Verification",
    "build_scenario_database",
    "database_digest",
]


@dataclass
class JudgeConfig(EndpointConfig):
    """The LLM judge of SQL-mode verification: an OpenAI-compatible endpoint (off while
    ``base_url`` or ``model`` is empty: code-mode verifiers only)."""

    temperature: float = _f(0.0, "sampling temperature of the judge")
    max_tokens: int = _f(512, "completion token limit of the judge")
    max_prompt_chars: int = _f(24000, "trajectory + evidence characters sent to the judge")


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
    verifier_workers: int = _f(1, "verifier worker processes of a pool created by the environment")
    max_idle_envs: int | None = _f(
        None,
        "an EnvPool keeps at most this many idle app workers across scenarios and stops the "
        "least recently released beyond it (AWM's 1,000 scenarios); null: keeps every one",
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
        "every episode runs on an app worker no earlier episode touched (a fresh process "
        "and run directory); false: only the database is restored between episodes, so an "
        "app's in-memory state and files carry over (faster, not isolated)",
    )
    prestart_app: bool = _f(
        True, "with fresh_app, start the next episode's app in the background during an episode"
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


@dataclass
class ResetResult:
    """The start of an episode."""

    episode_id: str
    scenario: str
    task_idx: int
    task: str
    system_prompt: str

    @property
    def messages(self) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.task},
        ]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "messages": self.messages}


@dataclass
class StepResult:
    """One turn's effect. ``reward`` is set when ``done``."""

    observation: str
    reward: float | None
    done: bool
    info: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ToolResult:
    """A dispatched tool call. ``failure`` is None on a 2xx answer."""

    text: str
    status: int | None
    failure: Failure | None
    fatal: bool = False  # the worker died (server error; the episode cannot continue)
    app_ms: float | None = None  # time the app itself took, inside the worker

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class Verification:
    """How an episode was verified. ``outcome`` feeds :func:`~helpdp.collect.awm.protocol.episode_reward`."""

    outcome: str
    mode: str
    status: str = "ok"
    detail: Any = None
    message: str = ""
    seconds: float = 0.0

    @property
    def valid(self) -> bool:
        return self.outcome in ("complete", "incomplete", "others")


class Judge:
    """Classifies SQL-mode verifier output through an OpenAI-compatible chat endpoint
    (:class:`~helpdp.collect.awm.llm.ChatClient`, with its retries).

    ``transport``: an ``httpx2`` transport for tests.
    """

    def __init__(self, config: JudgeConfig, *, transport: Any = None):
        self.config = config
        self._transport = transport
        self._client: ChatClient | None = None
        self._client_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.config.base_url and self.config.model)

    def classify(self, task: str, trajectory: str, evidence: Any) -> tuple[str, str]:
        """``(label, reason)``; raises :class:`~helpdp.collect.awm.llm.EndpointError` when the
        endpoint fails."""
        with self._client_lock:
            if self._client is None:
                self._client = ChatClient(self.config, transport=self._transport)
        reply = self._client.complete(
            judge_messages(task, trajectory, evidence, max_chars=self.config.max_prompt_chars),
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
        )
        return parse_judge_answer(reply.text)


_BUILD_LOCK = threading.Lock()
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
    :data:`~helpdp.collect.awm.clock.DEFAULT_CLOCK`), never here.
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
    """Stop an app worker and remove its run directory (never raises)."""
    with contextlib.suppress(Exception):
        app.close()
    remove_tree(app.workdir)


def database_digest(initial_db_path: str, final_db_path: str) -> dict:
    """sha256 over every table's rows of the database at ``final_db_path`` (rows sorted;
    blobs by their own sha256): ``{"digest": hex, "tables": n}``.

    Self-contained (its imports inside): :meth:`AWMEnv.db_digest` sends this function's
    own source to a sandboxed verifier worker, in SQL mode (``initial_db_path`` unused).
    """
    import hashlib
    import sqlite3

    def value(v):
        return "bytes:" + hashlib.sha256(v).hexdigest() if isinstance(v, bytes) else v

    conn = sqlite3.connect("file:" + final_db_path + "?mode=ro", uri=True)
    try:
        h = hashlib.sha256()
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            rows = sorted(
                repr(tuple(value(v) for v in r)) for r in conn.execute("SELECT * FROM " + quoted)
            )
            h.update(repr((name, len(rows))).encode())
            for r in rows:
                h.update(r.encode())
                h.update(b"\n")
        return {"digest": h.hexdigest(), "tables": len(names)}
    finally:
        conn.close()


_DIGEST_SOURCE = inspect.getsource(database_digest)


def _trim(text: str, limit: int) -> str:
    if limit and len(text) > limit:
        return text[:limit] + f"\n... (truncated, {len(text) - limit} more characters)"
    return text


def trajectory_text(trajectory: list[dict[str, Any]], final_answer: str | None = None) -> str:
    """An episode's actions and observations as the expert reads them (world output
    rendered as data, :func:`helpdp.collect.awm.observation.render_observation`)."""
    lines = []
    for entry in trajectory:
        action = entry["action"]
        if action["kind"] == "call_tool":
            lines.append(
                f"[{entry['turn']}] call {action['tool_name']} {json.dumps(action['arguments'], default=str)}"
            )
        elif action["kind"] == "final":
            continue
        else:
            lines.append(
                f"[{entry['turn']}] {action['kind']} {action.get('message') or ''}".rstrip()
            )
        if entry["observation"]:
            obs = entry["observation"]
            if action["kind"] in ("call_tool", "list_tools"):  # the world's: as data
                obs = render_observation(obs)
            lines.append(f"  -> {obs[:1500]}")
    if final_answer:
        lines.append(f"[final answer] {final_answer}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def _shipped_app_digests() -> frozenset[str]:
    from helpdp.collect.worlds import WORLDS_DIR

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


class AWMEnv:
    """One scenario's environment: a sandboxed app, its database and the agent protocol."""

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

    # -- worker management ---------------------------------------------------------
    def _new_episode_state(self) -> None:
        self.episode_id = ""
        self.task_idx = -1
        self.task_text = ""
        self.turn = 0
        self.done = False
        self.failures: Counter[str] = Counter()
        self.format_errors = 0
        self.expert_calls = 0
        self.tool_calls = 0
        self.trajectory: list[dict[str, Any]] = []
        self.outcome: str | None = None
        self.last_verification: Verification | None = None
        self.verify_seconds = 0.0  # spent by this episode's verifier runs
        self.tool_seconds = 0.0  # spent by this episode's tool calls

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

    def _launch(self) -> tuple[AppWorker, list[Tool]]:
        """A new app worker, loaded (it has served no request); raises SandboxError."""
        started = time.perf_counter()
        app = AppWorker(
            self.config.sandbox,
            workdir=self.work_root
            / f"app-{self.scenario.name}-{self._instance}-{next(self._app_numbers)}",
            name=f"app {self.scenario.name}",
            clock=self.clock,
        )
        try:  # tools first: an app whose OpenAPI document is refused never serves
            openapi = app.load(self.scenario.env_code or "", self.initial_db)
            tools = tools_from_openapi(
                openapi,
                hidden=self.config.hidden_tools,
                describe_responses=self.config.describe_responses,
            )
        except BaseException:  # SandboxError, OpenAPIError included
            app.close()
            remove_tree(app.workdir)
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
            app.close()
            remove_tree(app.workdir)
            return None
        return app, tools

    def _prestart(self) -> None:
        if self.fresh_app and self.config.prestart_app and self._spare is None:
            self._spare = _PRESTART.submit(self._launch)

    def _drop_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is None:
            return
        with contextlib.suppress(Exception):
            app, _ = spare.result()
            app.close()
            remove_tree(app.workdir)

    def _discard_app(self) -> None:
        if self.app is not None:
            self.app.close()
            remove_tree(self.app.workdir)  # iterative: a deep tree cannot make this raise
            self.app = None

    def _needs_recycle(self) -> bool:
        if self.app is None or not self.app.alive:
            return True
        used = self.app.worker.cpu_seconds_used()
        return used is not None and used > self.config.sandbox.cpu_seconds / 2

    # -- episode API --------------------------------------------------------------
    def reset(
        self, task_idx: int = 0, *, task: str | None = None, episode_id: str | None = None
    ) -> ResetResult:
        """Restore the initial database and start an episode on task ``task_idx``.

        ``task`` overrides the task text (the verifier of ``task_idx`` still applies).
        """
        with self._lock:
            text = task if task is not None else self.scenario.task(task_idx).text
            fresh = self.fresh_app and self.app is not None and self.app.alive
            if fresh and self.episode_id:  # every episode on an app no earlier episode touched
                old, self.app = self.app, None
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
        """Apply one model turn (see :mod:`helpdp.collect.awm.protocol`)."""
        action = parse_turn(text, expert_enabled=self.config.expert_enabled)
        return self.act(action, turn_text=text)

    def act(self, action: Action, *, turn_text: str | None = None) -> StepResult:
        """Apply an already-parsed :class:`~helpdp.collect.awm.protocol.Action` (structured clients)."""
        with self._lock:
            if self.done or not self.episode_id:
                raise RuntimeError("episode is over: call reset() first")
            started = time.perf_counter()
            self.turn += 1
            info: dict[str, Any] = {"turn": self.turn, "action": action.as_dict(), "failure": None}
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

    def _end(self, verification: Verification, observation: str, info: dict) -> StepResult:
        self.done = True
        self.outcome = verification.outcome
        self.last_verification = verification
        reward = episode_reward(verification.outcome, self.config.rewards)
        info.update(
            {
                "outcome": verification.outcome,
                "valid": verification.valid,
                "verification": asdict(verification),
                "format_errors": self.format_errors,
                "failures": dict(self.failures),
                "turns": self.turn,
                "tool_calls": self.tool_calls,
                "expert_calls": self.expert_calls,
                "episode_id": self.episode_id,
                "scenario": self.scenario.name,
                "task_idx": self.task_idx,
            }
        )
        return StepResult(observation, reward, True, info)

    # -- tools ------------------------------------------------------------------------
    def resolve_tool(self, name: str) -> Tool | None:
        """The visible tool called ``name`` (exact, then case-insensitive unique match)."""
        if is_hidden_tool(name, self.config.hidden_tools):
            return None
        key = canonical_tool_name(name)
        tool = self._tools_by_name.get(key)
        if tool is None:
            matches = [t for t in self.tools if t.name.lower() == key.lower()]
            tool = matches[0] if len(matches) == 1 else None
        return tool

    def call_tool(self, name: str, arguments: Any = None) -> ToolResult:
        """Dispatch one tool call to the app (no episode bookkeeping)."""
        with self._lock:
            in_episode = bool(self.episode_id) and not self.done
            if self.app is None:
                if in_episode:  # the worker died earlier in this episode: its state is gone
                    return ToolResult(
                        "Error: server error: the app worker is not running",
                        None,
                        Failure.SERVER_ERROR,
                        fatal=True,
                    )
                self.start()
            tool = self.resolve_tool(name)
            if tool is None:
                return ToolResult(
                    f"Error: tool {name!r} does not exist. Call list_tools to see the available tools.",
                    None,
                    Failure.UNKNOWN_TOOL,
                )
            args, errors = validate_arguments(tool, arguments, strict=self.config.strict_arguments)
            if errors:
                return ToolResult(
                    f"Error: invalid arguments for {tool.name}: {'; '.join(errors)}",
                    None,
                    Failure.INVALID_ARGUMENTS,
                )
            request = build_request(tool, args)
            budget = float(self.config.tool_budget_s) - self.tool_seconds if in_episode else None
            if budget is not None and budget <= 0:
                self._discard_app()
                return ToolResult(
                    f"Error: server error: the episode's tool time budget "
                    f"({self.config.tool_budget_s:g} s, env.tool_budget_s) is spent",
                    None,
                    Failure.SERVER_ERROR,
                    fatal=True,
                )
            timeout = float(self.config.sandbox.call_timeout_s)
            started = time.monotonic()
            try:
                reply = self.app.request(
                    request.method,
                    request.path,
                    request.query,
                    request.body,
                    request.has_body,
                    timeout=timeout if budget is None else min(timeout, budget),
                )
            except SandboxError as e:
                self._discard_app()
                message = e.message
                if budget is not None and e.kind == "timeout" and budget < timeout:
                    message = (
                        f"the episode's tool time budget ({self.config.tool_budget_s:g} s, "
                        f"env.tool_budget_s) is spent ({e.message})"
                    )
                return ToolResult(
                    f"Error: server error: {message}", None, Failure.SERVER_ERROR, fatal=True
                )
            finally:
                if in_episode:
                    self.tool_seconds += time.monotonic() - started
            if not reply.get("ok"):
                return ToolResult(
                    f"Error: server error: {reply.get('message')}", None, Failure.SERVER_ERROR
                )
            status = int(reply.get("status", 500))
            text = reply.get("text", "")
            app_ms = reply.get("app_ms")
            if reply.get("truncated"):
                text += "\n... (response truncated)"
            if 200 <= status < 300:
                return ToolResult(text, status, None, app_ms=app_ms)
            if status == 422:
                return ToolResult(
                    f"Error: invalid arguments for {tool.name} (HTTP 422): {text}",
                    status,
                    Failure.INVALID_ARGUMENTS,
                    app_ms=app_ms,
                )
            if status >= 500:
                return ToolResult(
                    f"Error: server error in {tool.name} (HTTP {status}): {text}",
                    status,
                    Failure.SERVER_ERROR,
                    app_ms=app_ms,
                )
            return ToolResult(
                f"Error: HTTP {status} from {tool.name}: {text}",
                status,
                Failure.TOOL_ERROR,
                app_ms=app_ms,
            )

    # -- verification -------------------------------------------------------------------
    def _mode(self) -> str:
        mode = self.config.verifier_mode
        if mode == "auto":
            return (
                "sql"
                if self.judge.enabled and self.task_idx in self.scenario.sql_verifiers
                else "code"
            )
        return mode

    def verify(self, final_answer: str | None = None) -> Verification:
        """Verify the current database against the episode's task (does not end the episode)."""
        with self._lock:
            mode = self._mode()
            records = self.scenario.sql_verifiers if mode == "sql" else self.scenario.verifiers
            record = records.get(self.task_idx)
            if record is None:
                return Verification(
                    "no_verifier",
                    mode,
                    status="missing",
                    message=f"no {mode}-mode verifier for task {self.task_idx}",
                )
            if mode == "sql" and not self.judge.enabled:
                return Verification(
                    "verifier_error", mode, status="no_judge", message="no judge configured"
                )
            if self.app is None or not self.app.alive:
                return Verification(
                    "server_error", mode, status="server_error", message="app worker is not running"
                )
            budget = float(self.config.verify_budget_s) - self.verify_seconds
            if budget <= 0:
                return Verification(
                    "verifier_error",
                    mode,
                    status="timeout",
                    message=f"the episode's verifier time budget "
                    f"({self.config.verify_budget_s:g} s, verify_budget_s) is spent",
                )
            try:
                final_db = self.app.export(f"final-{uuid.uuid4().hex[:8]}.db")
            except SandboxError as e:
                self._discard_app()
                return Verification("server_error", mode, status="server_error", message=e.message)
            try:
                outcome: VerifierOutcome = self.verifier_pool.run(
                    record.code,
                    initial_db=self.initial_db,
                    final_db=final_db,
                    final_answer=final_answer,
                    mode=mode,
                    function_name=record.function_name,
                    final_from_worker=True,
                    timeout=min(float(self.config.verifier_sandbox.call_timeout_s), budget),
                )
            finally:
                with contextlib.suppress(OSError):
                    final_db.unlink()
            self.verify_seconds += outcome.seconds
            if outcome.status == "export_error":  # the app left no regular file: its fault
                self._discard_app()
                return Verification(
                    "server_error", mode, status="server_error", message=outcome.message
                )
            if not outcome.ok:
                return Verification(
                    "verifier_error",
                    mode,
                    status=outcome.status,
                    message=outcome.message,
                    seconds=outcome.seconds,
                )
            if mode == "code":
                label = outcome.label
                return Verification(
                    "complete" if label == "complete" else "others",
                    mode,
                    detail=outcome.result,
                    seconds=outcome.seconds,
                )
            try:
                label, reason = self.judge.classify(
                    self.task_text, self.trajectory_text(final_answer), outcome.result
                )
            except Exception as e:  # noqa: BLE001 - endpoint failures are reported, not raised
                return Verification(
                    "verifier_error",
                    mode,
                    status="judge_error",
                    message=repr(e)[:500],
                    detail=outcome.result,
                    seconds=outcome.seconds,
                )
            return Verification(
                label,
                mode,
                detail={"evidence": outcome.result, "reason": reason},
                seconds=outcome.seconds,
            )

    def db_digest(self) -> str:
        """A digest of the current database's content (:func:`database_digest`, run in a
        sandboxed verifier worker on an export of the app's database): equal databases,
        equal digests. ``"no-app"`` when the app's worker is not running. Raises
        ``RuntimeError`` when the digest fails."""
        with self._lock:
            if self.app is None or not self.app.alive:
                return "no-app"
            path = self.app.export(f"digest-{uuid.uuid4().hex[:8]}.db")
            try:
                outcome = self.verifier_pool.run(
                    _DIGEST_SOURCE,
                    initial_db=self.initial_db,
                    final_db=path,
                    mode="sql",
                    function_name=database_digest.__name__,
                    final_from_worker=True,
                )
            finally:
                path.unlink(missing_ok=True)
        if not outcome.ok:
            raise RuntimeError(f"database digest failed: {outcome.status}: {outcome.message}")
        return str(outcome.result["digest"])

    def trajectory_text(self, final_answer: str | None = None) -> str:
        return trajectory_text(self.trajectory, final_answer)

    def state(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id or None,
            "step_count": self.turn,
            "scenario": self.scenario.name,
            "task_idx": self.task_idx,
            "done": self.done,
            "outcome": self.outcome,
            "format_errors": self.format_errors,
            "failures": dict(self.failures),
            "tool_calls": self.tool_calls,
            "expert_calls": self.expert_calls,
            "worker_restarts": self.restarts,
            "verifier_protocol_violations": self.verifier_pool.protocol_violations,
        }

    # -- async wrappers --------------------------------------------------------------------
    async def areset(self, task_idx: int = 0, **kwargs: Any) -> ResetResult:
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
            if self._own_pool:
                self.verifier_pool.close()
            if self._own_root:
                remove_tree(self.work_root)

    def __enter__(self) -> AWMEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # best effort: never leave workers behind
        with contextlib.suppress(Exception):
            if not self._closed and self.app is not None:
                self.app.close()


class EnvPool:
    """Environments for many scenarios of one dataset, sharing databases and verifiers.

    ``acquire(name)`` hands out an idle :class:`AWMEnv` of that scenario (starting
    one if needed); ``release(env)`` returns it. Databases are built once per
    scenario; all environments share one :class:`VerifierPool`.
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
        self._assets: dict[str, tuple[Path, BuildReport]] = {}
        self._idle: dict[str, list[AWMEnv]] = {}
        self._all: list[AWMEnv] = []
        self._released: dict[int, AWMEnv] = {}  # idle environments, least recently released first
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        names = self.dataset.names()
        return [n for n in names if self.allowed is None or n in self.allowed]

    def scenario(self, name: str) -> Scenario:
        with self._lock:
            if self.allowed is not None and name not in self.allowed:
                raise KeyError(f"scenario {name!r} is not served")
            if name not in self._scenarios:
                self._scenarios[name] = self.dataset.get(name)
            return self._scenarios[name]

    def _database(self, scenario: Scenario) -> tuple[Path, BuildReport]:
        with _BUILD_LOCK:
            if scenario.name not in self._assets:
                self._assets[scenario.name] = build_scenario_database(
                    scenario,
                    self.work_root / "db" / scenario.name,
                    clock=self.clock,
                    limits=self.config.sandbox,
                )
            return self._assets[scenario.name]

    def acquire(self, name: str) -> AWMEnv:
        scenario = self.scenario(name)
        with self._lock:
            idle = self._idle.get(scenario.name)
            if idle:
                env = idle.pop()
                del self._released[id(env)]
                return env
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
        return env

    def release(self, env: AWMEnv) -> None:
        """Return ``env`` for reuse; beyond ``config.max_idle_envs`` idle environments,
        the least recently released one is stopped."""
        evicted: list[AWMEnv] = []
        with self._lock:
            if env._closed:
                return
            self._idle.setdefault(env.scenario.name, []).append(env)
            self._released[id(env)] = env
            cap = self.config.max_idle_envs
            while cap is not None and len(self._released) > max(int(cap), 0):
                old = self._released.pop(next(iter(self._released)))
                self._idle[old.scenario.name].remove(old)
                self._all.remove(old)
                evicted.append(old)
        for old in evicted:  # outside the lock: stopping a worker takes a while
            old.close()

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

    def __exit__(self, *exc: Any) -> None:
        self.close()
