"""Verifying an episode: the task's verifier on the final database, and the LLM judge.

:class:`EpisodeVerifier` (a part of :class:`~collect.awm.env.AWMEnv`) exports the
app's database and runs the task's verifier on it in a sandboxed verifier worker, within
the episode's verifier time budget: in code mode the verifier's own label decides, in
SQL mode its evidence is classified by the :class:`Judge`. The result is a
:class:`Verification`. :meth:`EpisodeVerifier.db_digest` digests the current database
the same way (:func:`database_digest`).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from collect.awm.llm import ChatClient, EndpointConfig
from collect.awm.protocol import judge_messages, parse_judge_answer
from collect.awm.sandbox import SandboxError, VerifierOutcome
from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    import httpx2

    from collect.awm.dataset import Scenario
    from collect.awm.sandbox import VerifierPool

__all__ = [
    "EpisodeVerifier",
    "Judge",
    "JudgeConfig",
    "VERIFY_SEMANTICS",
    "Verification",
    "database_digest",
    "run_database_digest",
]


#: how a verifier is called and its result read (``env.verify_semantics``): helpdp's, or
#: the official AWM runtime's ``awm/core/verify.py`` (docs/environments.md, conformance)
VERIFY_SEMANTICS = ("helpdp", "official")


@dataclass
class JudgeConfig(EndpointConfig):
    """The LLM judge of SQL-mode verification: an OpenAI-compatible endpoint (off while
    ``base_url`` or ``model`` is empty: code-mode verifiers only)."""

    temperature: float = _f(0.0, "sampling temperature of the judge")
    max_tokens: int = _f(512, "completion token limit of the judge")
    max_prompt_chars: int = _f(24000, "trajectory + evidence characters sent to the judge")


@dataclass
class Verification:
    """How an episode was verified. ``outcome`` feeds :func:`~collect.awm.protocol.episode_reward`."""

    outcome: str
    mode: str
    status: str = "ok"
    detail: JSON = None
    message: str = ""
    seconds: float = 0.0

    @property
    def valid(self) -> bool:
        return self.outcome in ("complete", "incomplete", "others")


class Judge:
    """Classifies SQL-mode verifier output through an OpenAI-compatible chat endpoint
    (:class:`~collect.awm.llm.ChatClient`, with its retries).

    ``transport``: an ``httpx2`` transport for tests.
    """

    def __init__(self, config: JudgeConfig, *, transport: httpx2.BaseTransport | None = None):
        self.config = config
        self._transport = transport
        self._client: ChatClient | None = None
        self._client_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.config.base_url and self.config.model)

    def classify(self, task: str, trajectory: str, evidence: JSON) -> tuple[str, str]:
        """``(label, reason)``; raises :class:`~collect.awm.llm.EndpointError` when the
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


def run_database_digest(
    pool: VerifierPool, scenario: Scenario, initial_db, final_db, **run_kw
) -> str:
    """:func:`database_digest` of ``final_db`` run in a sandboxed verifier worker of
    ``pool`` (the scenario's fork servers); ``RuntimeError`` when it fails."""
    outcome = pool.run(
        _DIGEST_SOURCE,
        initial_db=initial_db,
        final_db=final_db,
        mode="sql",
        function_name=database_digest.__name__,
        world=verifier_world(scenario),
        **run_kw,
    )
    if not outcome.ok:
        raise RuntimeError(f"database digest failed: {outcome.status}: {outcome.message}")
    return str(outcome.result["digest"])


def verifier_world(scenario: Scenario) -> str:
    """The key under which a scenario's verifier runs share fork servers
    (:meth:`~collect.awm.sandbox.VerifierPool.run`'s ``world``): its name and a digest of
    all its verifier sources, so that no other world's (nor a same-named world of another
    dataset's) runs share a process image with them."""
    digest = hashlib.sha256()
    for records in (scenario.verifiers, scenario.sql_verifiers):
        for idx, record in sorted(records.items()):
            digest.update(f"{idx}\0{record.code}\0".encode("utf-8", "surrogatepass"))
    return f"{scenario.name}:{digest.hexdigest()[:16]}"


class EpisodeVerifier:
    """Verification of an :class:`~collect.awm.env.AWMEnv`'s episode (part of the
    environment: it uses its scenario, task, app worker, verifier pool and judge)."""

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
        """Verify the current database against the episode's task (does not end the episode).

        ``env.verify_semantics=official``: the verifier is called as AWM's verify.py calls
        it, and every run without a verdict (``verifier_error``: it raised, timed out, code
        under 10 characters, no judge, judge endpoint failed) is ``judge_error``; code mode's
        outcome is ``complete``, ``others`` or ``judge_error``."""
        result = self._verify(final_answer)
        if self.config.verify_semantics == "official" and result.outcome == "verifier_error":
            result.outcome = "judge_error"
        return result

    def _verify(self, final_answer: str | None) -> Verification:
        official = self.config.verify_semantics == "official"
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
                    world=verifier_world(self.scenario),
                    **({"semantics": "official"} if official else {}),
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
                label = outcome.verdict if official else outcome.label
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
                return run_database_digest(
                    self.verifier_pool,
                    self.scenario,
                    self.initial_db,
                    path,
                    final_from_worker=True,
                )
            finally:
                path.unlink(missing_ok=True)
