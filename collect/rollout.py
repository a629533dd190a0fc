"""Episodes of the one-pass collection: the MDP step loop, state texts and records.

An MDP step is one agent turn. At state ``s_t`` (what the actor has seen so far)
the schedule draws the action: 0 (nohelp) or intervention ``k``, whose message
is put into the actor's context; then the actor generates its turn, the
environment applies it, and the step ends in ``s_{t+1}`` (terminal when the
episode is over). :func:`run_episodes` advances many episodes in lock step: one
batched actor call per round (what vLLM needs), environment steps and
interventions in threads.

Chat context given to an actor: ``system`` (the environment's system prompt),
``user`` (the task), then per turn ``assistant`` (the turn) and ``user``
(``<tool_response>...</tool_response>``); help is appended to the user message
that precedes the turn it was given for, and stays in the context.

Records: one step row per MDP step, one state row per visited state (with the
rendered ``text``) and one episode row; :func:`episode_tables` turns many
episodes into Arrow tables (the shard format of :mod:`collect.shards`).

Failures of the infrastructure (the app's worker died, an actor or helper
endpoint failed after its retries, the environment could not start) end the
episode with outcome ``server_error``; the episode is recorded, never dropped.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from collect.awm.observation import HELP_HEADERS, neutralise_markers, render_observation
from collect.awm.protocol import MAX_CALL_DEPTH, Action, Failure
from collect.schedule import EpisodeSpec, draw_action, episode_rng
from collect.statekey import DbKeys, HistoryKeys, arguments_sha, canonical_action, recordable
from collect.types import (
    Actor,
    EpisodeView,
    Help,
    Intervention,
    Turn,
    TurnReply,
    TurnRequest,
)
from helpdp.contract import EPISODES_SCHEMA, STATES_SCHEMA, STEPS_SCHEMA
from helpdp.jsonvalue import JSON
from helpdp.policies import HelpPolicy, StateView, action_probs, safe_decide
from helpdp.views import view_from_history

if TYPE_CHECKING:
    from collect.awm.env import EnvPool

__all__ = [
    "END_REASONS",
    "EpisodeLog",
    "EpisodeRunner",
    "EpisodeView",
    "Help",
    "RunContext",
    "TextRenderer",
    "Turn",
    "TurnReply",
    "TurnRequest",
    "WORLD_FAILURE_KINDS",
    "call_matches",
    "environment_error",
    "episode_tables",
    "reference_progress",
    "run_episodes",
]

END_REASONS = ("final", "format_error", "max_turns", "context_full", "server_error")


# ---------------------------------------------------------------------------
# reference progress (shared by the oracle and the simulated actor)
# ---------------------------------------------------------------------------


def _norm(value: JSON, depth: int = 0) -> JSON:
    """``value`` compared as JSON; ValueError past twice :data:`MAX_CALL_DEPTH` levels
    (strings holding JSON count theirs: a reply is data, never a recursion error)."""
    if depth > 2 * MAX_CALL_DEPTH:
        raise ValueError("nested too deep")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return _norm(json.loads(text), depth + 1) if text[:1] in "{[" else text
        except (ValueError, RecursionError):
            return text
    if isinstance(value, dict):
        return {str(k): _norm(v, depth + 1) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_norm(v, depth + 1) for v in value]
    return str(value)


def call_matches(parsed: dict[str, JSON], call: dict[str, JSON]) -> bool:
    """Does a parsed ``call_tool`` action make the reference ``call`` (same tool, same arguments)?"""
    if parsed.get("kind") != "call_tool":
        return False
    name = str(parsed.get("tool_name") or "").strip().lower()
    if name != str(call.get("tool_name") or "").strip().lower():
        return False
    try:
        return _norm(parsed.get("arguments") or {}) == _norm(call.get("arguments") or {})
    except ValueError:  # nested past the limit: no reference call is
        return False


def reference_progress(history: Sequence[Turn], calls: Sequence[dict[str, JSON]]) -> int:
    """How many reference calls the episode has made, in order, successfully."""
    k = 0
    for turn in history:
        if k < len(calls) and turn.failure is None and call_matches(turn.parsed, calls[k]):
            k += 1
    return k


# ---------------------------------------------------------------------------
# state texts
# ---------------------------------------------------------------------------


class TextRenderer:
    """Renders a history as the text of a state, within a token budget.

    Entries are ``(role, content)`` with roles ``user`` (the task), ``assistant``,
    ``tool`` and ``expert``; the first entry (the task) is always kept, then as many
    of the most recent entries as fit, with a marker for what was left out.
    ``count`` counts tokens (default: ``ceil(characters / 4)``).
    """

    def __init__(self, max_tokens: int, count: Callable[[str], int] | None = None):
        self.max_tokens = int(max_tokens)
        self.count = count or (lambda s: math.ceil(len(s) / 4))

    @staticmethod
    def block(role: str, content: str) -> str:
        # no content, not even the actor's or a helper's, can open a block of its own

        return f"<|{role}|>\n{neutralise_markers(recordable(content))}\n"

    def render(self, entries: Sequence[tuple[str, str]], note: str | None = None) -> str:
        blocks = [self.block(r, c) for r, c in entries]
        if note:
            blocks.append(f"[{note}]\n")
        if self.max_tokens <= 0:
            return "".join(blocks)
        head, rest = blocks[0], blocks[1:]
        budget = self.max_tokens - self.count(head)
        if budget < 0:
            cut = max(0, len(head) * self.max_tokens // max(1, self.count(head)) - 1)
            return head[:cut]
        kept: list[str] = []
        for b in reversed(rest):
            cost = self.count(b)
            if cost > budget:
                break
            kept.append(b)
            budget -= cost
        kept.reverse()
        dropped = len(rest) - len(kept)
        if dropped:
            return head + f"[... {dropped} earlier entries omitted ...]\n" + "".join(kept)
        return head + "".join(kept)


# ---------------------------------------------------------------------------
# one episode
# ---------------------------------------------------------------------------


# actions whose observation the world wrote; the others' (a format error) are the runtime's
WORLD_OUTPUT_KINDS = ("call_tool", "list_tools")


def render_world_text(text: str, headers: Sequence[str] = ()) -> str:
    """What a world supplies (a tool's output, a task) as every transcript holds it: the
    actor's context, the state texts (PRM) and the helpers' view of the history read this
    one rendering (:func:`collect.awm.observation.render_observation`; ``headers``: the
    interventions' help headers, quoted at line starts besides the default)."""

    return render_observation(text, (*HELP_HEADERS, *headers))


@dataclass
class RunContext:
    """What every episode of a worker shares (built once per worker process)."""

    pool: EnvPool
    interventions: list[Intervention]  # action k = index + 1
    keys: HistoryKeys | DbKeys
    renderer: TextRenderer
    policy: HelpPolicy | None = None  # call the expert as it says, not at random
    # GRPO training (helpdp.train) sets these; the defaults are the collector's behaviour.
    # ask_mode "agent": the policy is consulted only at the turn after the actor called
    # ask_expert (a denied call gets ``denied_text``); "proactive": at every turn.
    ask_mode: str = "proactive"
    denied_text: str = "The expert is not available now; continue on your own."
    # help_failure "nohelp": a failing intervention leaves the step without help (the
    # error is counted and reported to on_decision); "end": the episode ends (server_error)
    help_failure: str = "end"
    # called after every help decision with the runner and a dict: episode_id, t, asked,
    # gate (the policy's action), action (what ran), tokens, error
    on_decision: Callable[[EpisodeRunner, dict[str, JSON]], None] | None = None
    # stage 2 (collect.schedule.stage2_design): the design's record (design_spec); then
    # ``policy`` is that design, each step records p_help (its probability of help, NaN
    # where it failed) and args_sha, each episode ``design`` (episode_tables(design=True))
    design: str | None = None


@dataclass
class EpisodeLog:
    """Everything recorded about one episode (rows of the shard tables)."""

    spec: EpisodeSpec
    steps: list[dict[str, JSON]]
    states: list[dict[str, JSON]]
    episode: dict[str, JSON]


#: ``kind`` of an environment exception that is the world's own fault (its app does not
#: load or compile, its data breaks the build's limits; ``collect.awm.sandbox.SandboxError``):
#: the same on every attempt, so the episode is recorded as a ``server_error``, not rerun
#: and lost as a failure of the runtime (``collect.worker.RUNTIME_FAILURES``)
WORLD_FAILURE_KINDS = ("load_error", "syntax_error", "build_limit")


def environment_error(what: str, e: BaseException) -> str:
    """An episode's error text for an exception of its environment: ``world <what>: ...``
    when the world is at fault (:data:`WORLD_FAILURE_KINDS`), else ``environment <what>:
    ...`` (a runtime failure: a crashed or timed-out worker, a lost server)."""
    who = "world" if getattr(e, "kind", None) in WORLD_FAILURE_KINDS else "environment"
    return f"{who} {what}: {e!r}"[:2000]


class EpisodeRunner:
    """Runs one scheduled episode on an environment of ``ctx.pool``; see the module doc."""

    def __init__(self, spec: EpisodeSpec, ctx: RunContext):
        self.spec = spec
        self.ctx = ctx
        self.env = None
        self.done = False
        self.history: list[Turn] = []
        self.steps: list[dict[str, JSON]] = []
        self.states: list[dict[str, JSON]] = []
        self.entries: list[tuple[str, str]] = []
        self.messages: list[dict[str, str]] = []
        self.calls = [0] * len(ctx.interventions)
        self.blind = self.recovery = self.errors = self.format_errors = self.policy_errors = 0
        self.help_errors = 0  # failed interventions that became nohelp (help_failure)
        self.policy_error: str | None = None  # the last failure of the policy, if any
        self.p_help: float | None = None  # stage 2: the design's P(help) at this decision
        self._view: StateView | None = None  # the view of the latest policy decision
        self.prompt_tokens = self.completion_tokens = self.expert_tokens = 0
        self.outcome = "server_error"
        self.end_reason = "server_error"
        self.reward = 0.0
        self.reward_type = "none"
        self.valid = False
        self.error = ""
        self.state_id = 0
        self.chain = b""
        self.pending: tuple[int, Help | None] | None = None
        self.headers: tuple[str, ...] = ()  # the interventions' help headers (start)
        self._env_broken = False
        self.scenario = None
        self.view: EpisodeView | None = None
        self.log: EpisodeLog | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        spec = self.spec
        try:
            self.scenario = self.ctx.pool.scenario(spec.scenario)
            self.env = self.ctx.pool.acquire(spec.scenario)
            reset = self.env.reset(spec.task_idx, episode_id=str(spec.episode_id))
            digest = self._digest() if self.ctx.keys.needs_digest else None
        except Exception as e:  # noqa: BLE001 - the environment failed: record it
            self.error = environment_error("failed to start", e)
            self._env_broken = True
            self._finish_without_steps()
            return
        self.headers = tuple(
            h
            for iv in self.ctx.interventions
            if isinstance(h := getattr(getattr(iv, "config", None), "header", None), str)
        )
        task = render_world_text(reset.task, self.headers)
        self.messages = [
            {"role": "system", "content": reset.system_prompt},
            {"role": "user", "content": task},
        ]
        self.entries = [("user", task)]
        self.state_id, self.chain = self.ctx.keys.start(spec.task_id, digest)
        self._record_state(self.state_id, 0, is_start=True)
        self.view = EpisodeView(
            spec,
            task,
            [t.name for t in self.env.tools],
            self.scenario.solutions.get(spec.task_idx),
            self.history,
        )

    def request(self) -> TurnRequest | None:
        """Draw the step's action, get the help if any; the actor's request (None: ended)."""
        t = len(self.history)
        ints = self.ctx.interventions
        available = [iv.available(self.calls[i]) for i, iv in enumerate(ints)]
        asked = True
        gate = 0
        if self.ctx.policy is None:
            action = draw_action(
                episode_rng(self.spec, "trigger", t), self.spec.trigger_p, available
            )
        else:  # evaluating a policy: its action here (nohelp if it fails or is out of calls)
            if self.ctx.ask_mode == "agent":
                asked = bool(self.history) and self.history[-1].parsed.get("kind") == "ask_expert"
            gate = self._policy_action(t) if asked else 0
            action = gate if 0 < gate <= len(ints) and available[gate - 1] else 0
            if self.ctx.design is not None:
                self.p_help = self._p_help(available)
        help_ = None
        help_error = None
        if action:
            iv = ints[action - 1]
            self.view.help = None
            try:
                help_ = iv.help(self.view, self.env, episode_rng(self.spec, "help", t))
            except Exception as e:  # noqa: BLE001 - a helper endpoint failed: record it
                help_error = f"intervention {iv.name!r} failed: {e!r}"[:2000]
                if self.ctx.help_failure != "nohelp":
                    self.error = help_error
                    self._end_on_error(action, None, t)
                    return None
                self.help_errors += 1
                action = 0
        if self.ctx.on_decision is not None:
            event = {"episode_id": self.spec.episode_id, "t": t, "asked": asked, "gate": gate}
            gate_error = self.policy_error if asked else None
            event.update(action=action, tokens=help_.tokens if help_ else 0, error=help_error)
            event["gate_error"] = gate_error
            self.ctx.on_decision(self, event)
        if self.ctx.ask_mode == "agent" and asked and not action and self.history:
            self.messages[-1] = {
                "role": self.messages[-1]["role"],
                "content": self.messages[-1]["content"] + "\n\n" + self.ctx.denied_text,
            }
        if action:
            self.calls[action - 1] += 1
            self.expert_tokens += help_.tokens
            if self.errors:
                self.recovery += 1
            else:
                self.blind += 1
            self.messages[-1] = {
                "role": self.messages[-1]["role"],
                "content": self.messages[-1]["content"] + "\n\n" + help_.text,
            }
            self.entries.append(("expert", help_.text))
        self.view.help = help_
        self.pending = (action, help_)
        seed = int(episode_rng(self.spec, "actor", t).integers(0, 2**31 - 1))
        return TurnRequest([dict(m) for m in self.messages], seed, self.view)

    def advance(self, reply: TurnReply) -> None:
        """Apply the actor's turn: one environment step and the records of the MDP step."""
        assert self.pending is not None
        action, help_ = self.pending
        self.pending = None
        t = len(self.history)
        if reply.error is not None and not reply.context_full:
            self.error = f"actor failed: {reply.error}"[:2000]
            self._end_on_error(action, help_, t)
            return
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        text = recordable(reply.text)  # what the transcripts hold (UTF-8 text)
        try:
            # a prompt past the context window ends the episode there (the agent's end,
            # verified as at max_turns); else the turn is the environment's next step
            if reply.context_full:
                result = self.env.truncate()
            elif text != reply.text:  # a lone surrogate: no text, a format error (not parsed)
                why = "the reply is not Unicode text (a lone surrogate; shown as \\uXXXX)"
                invalid = Action("invalid", failure=Failure.INVALID_JSON, message=why)
                result = self.env.act(invalid, turn_text=text)
            else:
                result = self.env.step(reply.text)
            digest = self._digest() if self.ctx.keys.needs_digest else None
        except Exception as e:  # noqa: BLE001 - the environment failed: record it
            self._env_broken = True
            self.error = environment_error("step failed", e)
            self._end_on_error(action, help_, t)
            return
        info = result.info
        parsed = info.get("action") or {}
        failure = info.get("failure")
        observation = result.observation or ""
        if parsed.get("kind") in WORLD_OUTPUT_KINDS:  # the app's output (or its tool list)
            observation = render_world_text(observation, self.headers)
        if failure is not None:
            self.errors += 1
        if info.get("format_error"):
            self.format_errors += 1
        turn = Turn(t, action, help_, text, parsed, failure, observation)
        self.history.append(turn)
        element = {
            "help": action,
            "help_text": help_.text if help_ else "",
            "action": canonical_action(parsed, reply.text),
            "observation": observation,
        }
        self.entries.append(("assistant", text))
        if result.done:
            self.outcome = str(info.get("outcome") or "others")
            self.reward = float(result.reward or 0.0)
            self.valid = bool(info.get("valid", False))
            self.reward_type = str((info.get("verification") or {}).get("mode") or "none")
            if self.outcome == "server_error":
                self.end_reason = "server_error"
                self.error = str((info.get("verification") or {}).get("message") or "")[:2000]
            elif self.outcome == "format_error":
                self.end_reason = "format_error"
            elif parsed.get("kind") == "final":
                self.end_reason = "final"
            elif info.get("context_full"):
                self.end_reason = "context_full"
                self.error = str(reply.error or "")[:2000]
            else:
                self.end_reason = "max_turns" if info.get("truncated") else "final"
            if observation:
                self.entries.append(("tool", observation))
            nxt = self.ctx.keys.terminal(
                self.chain, self.spec.task_id, t + 1, element, self.end_reason, self.outcome, digest
            )
            self._record_step(t, action, help_, nxt, parsed, failure, info, reply)
            self._record_state(nxt, t + 1, terminal=True, success=self.outcome == "complete")
            self._finish()
            return
        self.entries.append(("tool", observation))
        nxt, self.chain = self.ctx.keys.step(self.chain, self.spec.task_id, t + 1, element, digest)
        self._record_step(t, action, help_, nxt, parsed, failure, info, reply)
        self._record_state(nxt, t + 1)
        self.state_id = nxt
        self.messages.append({"role": "assistant", "content": text})
        self.messages.append(
            {"role": "user", "content": f"<tool_response>\n{observation}\n</tool_response>"}
        )

    # -- helpers ------------------------------------------------------------------------
    def _policy_action(self, t: int) -> int:
        view = view_from_history(  # the records of the turns so far (helpdp.views)
            self.steps,
            state_id=self.state_id,
            task_id=self.spec.task_id,
            text=self.states[-1]["text"],  # the current state's, as states.parquet has it
            episode_id=self.spec.episode_id,
        )
        self._view = view
        actions, error = safe_decide(self.ctx.policy, [view])
        self.policy_errors += error is not None  # counted in episodes.parquet; nohelp used
        self.policy_error = error
        return int(actions[0])

    def _p_help(self, available: Sequence[bool]) -> float:
        """The design's probability of help at the latest decision, interventions out of
        calls left out (they never run); NaN where the policy failed (nohelp ran)."""
        if self.policy_error is not None:
            return float("nan")
        try:
            p = action_probs(self.ctx.policy, [self._view], len(available) + 1)[0]
        except Exception:  # noqa: BLE001 - recorded as unknown: the OPE refuses the row
            return float("nan")
        return float(sum(p[k + 1] for k, ok in enumerate(available) if ok))

    def _digest(self) -> str:
        return self.env.db_digest()

    def _record_state(
        self, state_id: int, depth: int, *, is_start=False, terminal=False, success=False
    ) -> None:
        note = f"episode over: {self.end_reason}" if terminal else None
        self.states.append(
            {
                "state_id": state_id,
                "task_id": self.spec.task_id,
                "depth": depth,
                "is_start": is_start,
                "terminal": terminal,
                "success": success,
                "text": self.ctx.renderer.render(self.entries, note),
                "episode_id": self.spec.episode_id,
                "t": depth,
            }
        )

    def _record_step(self, t, action, help_, nxt, parsed, failure, info, reply) -> None:
        self.steps.append(
            {
                "episode_id": self.spec.episode_id,
                "t": t,
                "state_id": self.state_id,
                "action": action,
                "next_state_id": nxt,
                "help": help_.name if help_ else "",
                "kind": str(parsed.get("kind") or "error"),
                "tool_name": recordable(n) if isinstance(n := parsed.get("tool_name"), str) else n,
                "failure": failure,
                "format_error": bool(info.get("format_error", False)),
                "prompt_tokens": int(reply.prompt_tokens) if reply else 0,
                "completion_tokens": int(reply.completion_tokens) if reply else 0,
                # for the views' repeats; columns of the stage-2 tables only (DESIGN_STEP)
                "args_sha": arguments_sha(parsed.get("arguments")),
                "p_help": self.p_help,
            }
        )

    def _end_on_error(self, action: int, help_: Help | None, t: int) -> None:
        """An infrastructure failure at state s_t: a step to a server-error terminal."""
        self.outcome = self.end_reason = "server_error"
        self.reward, self.valid, self.reward_type = 0.0, False, "none"
        element = {"help": action, "error": True}  # the message may hold ports, times: not keyed
        nxt = self.ctx.keys.terminal(
            self.chain, self.spec.task_id, t + 1, element, self.end_reason, self.outcome, None
        )
        self._record_step(t, action, help_, nxt, {"kind": "error"}, None, {}, None)
        self._record_state(nxt, t + 1, terminal=True)
        self._finish()

    def _finish_without_steps(self) -> None:
        self.outcome = self.end_reason = "server_error"
        self._finish()

    def _finish(self) -> None:
        self.done = True
        spec = self.spec
        row = {
            "episode_id": spec.episode_id,
            "task_id": spec.task_id,
            "scenario": spec.scenario,
            "task_idx": spec.task_idx,
            "split": spec.split,
            "seed": spec.seed,
            "trigger_p": spec.trigger_p[0],
            "steps": len(self.steps),
            "success": self.outcome == "complete",
            "outcome": self.outcome,
            "end_reason": self.end_reason,
            "reward": self.reward,
            "reward_type": self.reward_type,
            "valid": self.valid,
            "expert_calls": sum(self.calls),
            "blind_calls": self.blind,
            "recovery_calls": self.recovery,
            "format_errors": self.format_errors,
            "errors": self.errors,
            "policy_errors": self.policy_errors,
            "tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "expert_tokens": self.expert_tokens,
            "error": recordable(self.error),  # an endpoint's message may quote a reply
        }
        for i, iv in enumerate(self.ctx.interventions):
            row[f"p_{iv.name}"] = spec.trigger_p[i]
            row[f"calls_{iv.name}"] = self.calls[i]
        if self.ctx.design is not None:
            row["design"] = self.ctx.design
        self.log = EpisodeLog(spec, self.steps, self.states, row)
        env, self.env = self.env, None
        if env is not None:
            if self._env_broken:
                env.close()
            else:
                self.ctx.pool.release(env)


def run_episodes(
    specs: Sequence[EpisodeSpec],
    actor: Actor,
    ctx: RunContext,
    *,
    batch_size: int = 1,
    threads: int | None = None,
    on_episode: Callable[[EpisodeLog], None] | None = None,
    phase_seconds: dict[str, float] | None = None,
) -> list[EpisodeLog]:
    """Run ``specs`` with up to ``batch_size`` episodes in lock step; logs in ``specs`` order.

    Each round asks the actor once for every live episode (``actor.generate`` gets
    the whole batch); environment steps and interventions run in threads when
    ``batch_size > 1`` (``threads`` of them; None: one per episode of the batch).
    Results do not depend on ``batch_size`` or ``threads``: every random draw
    is seeded per episode and turn. ``phase_seconds``, when given, gets the wall
    seconds of each phase of the rounds added: ``start`` (environment resets),
    ``request`` (help decisions and interventions), ``generate`` (the actor),
    ``advance`` (environment steps, verification, records).
    """
    clock = time.perf_counter
    phases = phase_seconds if phase_seconds is not None else {}
    for name in ("start", "request", "generate", "advance"):
        phases.setdefault(name, 0.0)
    queue = deque(specs)
    live: list[EpisodeRunner] = []
    logs: dict[int, EpisodeLog] = {}
    n_threads = min(batch_size, threads or batch_size)
    pool = ThreadPoolExecutor(n_threads) if n_threads > 1 else None

    def each(fn, items):
        return list(pool.map(fn, items)) if pool and len(items) > 1 else [fn(x) for x in items]

    try:
        while queue or live:
            fresh = []
            while queue and len(live) + len(fresh) < batch_size:
                fresh.append(EpisodeRunner(queue.popleft(), ctx))
            t0 = clock()
            each(lambda r: r.start(), fresh)
            live.extend(fresh)
            pending = [r for r in live if not r.done]
            t1 = clock()
            requests = each(lambda r: r.request(), pending)
            active = [(r, q) for r, q in zip(pending, requests) if q is not None]
            t2 = t3 = t4 = clock()
            if active:
                try:
                    replies = actor.generate([q for _, q in active])
                except Exception as e:  # noqa: BLE001 - the actor failed: record it per episode
                    replies = [TurnReply("", error=repr(e)[:2000]) for _ in active]
                t3 = clock()
                each(
                    lambda pair: pair[0].advance(pair[1]),
                    list(zip([r for r, _ in active], replies)),
                )
                t4 = clock()
            phases["start"] += t1 - t0
            phases["request"] += t2 - t1
            phases["generate"] += t3 - t2
            phases["advance"] += t4 - t3
            still = []
            for r in live:
                if r.done:
                    logs[r.spec.episode_id] = r.log
                    if on_episode is not None:
                        on_episode(r.log)
                else:
                    still.append(r)
            live = still
    finally:
        for r in live:
            if r.env is not None:
                r.env.close()
        if pool is not None:
            pool.shutdown()
    return [logs[s.episode_id] for s in specs]


# ---------------------------------------------------------------------------
# shard tables
# ---------------------------------------------------------------------------

# The dataset's columns come from helpdp.contract (their one declaration); a shard
# table adds the collector's own columns, and ``valid`` (dropped on aggregation).
STEP_SCHEMA = pa.schema(
    [
        *STEPS_SCHEMA,  # episode_id, t, state_id, action, next_state_id
        ("help", pa.string()),
        ("kind", pa.string()),
        ("tool_name", pa.string()),
        ("failure", pa.string()),
        ("format_error", pa.bool_()),
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
        ("valid", pa.bool_()),
    ]
)

STATE_SCHEMA = pa.schema(
    [
        *STATES_SCHEMA,  # one row per visit here; aggregated into states.parquet
        ("episode_id", pa.int64()),
        ("t", pa.int32()),
        ("valid", pa.bool_()),
    ]
)

_E = {f.name: f.type for f in EPISODES_SCHEMA}  # the contract's episode columns
_EPISODE_FIELDS = [
    ("episode_id", _E["episode_id"]),
    ("task_id", _E["task_id"]),
    ("scenario", pa.string()),
    ("task_idx", pa.int32()),
    ("split", _E["split"]),
    ("seed", _E["seed"]),
    ("trigger_p", _E["trigger_p"]),
    ("steps", _E["steps"]),
    ("success", _E["success"]),
    ("outcome", pa.string()),
    ("end_reason", pa.string()),
    ("reward", _E["reward"]),
    ("reward_type", pa.string()),
    ("valid", pa.bool_()),
    ("expert_calls", _E["expert_calls"]),
    ("blind_calls", pa.int32()),
    ("recovery_calls", pa.int32()),
    ("format_errors", pa.int32()),
    ("errors", pa.int32()),
    ("policy_errors", pa.int32()),
    ("tokens", pa.int64()),
    ("prompt_tokens", pa.int64()),
    ("expert_tokens", pa.int64()),
    ("error", pa.string()),
]


#: the columns a stage-2 collection adds (RunContext.design; docs/data-format.md): per
#: step the design's probability of help and the call's arguments hash, per episode
#: the design (the grid writes none of them: its tables are as before stage 2)
DESIGN_STEP = [("p_help", pa.float64()), ("args_sha", pa.string())]
DESIGN_EPISODE = [("design", pa.string())]


def episode_schema(names: Sequence[str], design: bool = False) -> pa.Schema:
    """episodes table schema for interventions ``names`` (``p_<name>``, ``calls_<name>``
    each; ``design``: a stage-2 collection's, with :data:`DESIGN_EPISODE`)."""
    extra = [(f"p_{n}", pa.float64()) for n in names] + [(f"calls_{n}", pa.int32()) for n in names]
    return pa.schema(_EPISODE_FIELDS + extra + (DESIGN_EPISODE if design else []))


def episode_tables(
    logs: Sequence[EpisodeLog], names: Sequence[str], design: bool = False
) -> dict[str, pa.Table]:
    """``steps``, ``states``, ``episodes`` Arrow tables of ``logs`` (the shard format;
    ``design``: a stage-2 collection's, with :data:`DESIGN_STEP` and :data:`DESIGN_EPISODE`).

    Step and state rows carry their episode's ``valid`` (a verified outcome), so that
    :func:`collect.shards.aggregate` can leave invalid episodes out of the counts.
    """
    steps: list[dict] = []
    states: list[dict] = []
    episodes: list[dict] = []
    for log in logs:
        valid = bool(log.episode["valid"])
        episodes.append(log.episode)
        steps.extend({**s, "valid": valid} for s in log.steps)
        states.extend({**s, "valid": valid} for s in log.states)
    step_schema = pa.schema([*STEP_SCHEMA, *DESIGN_STEP]) if design else STEP_SCHEMA
    return {
        "steps": pa.Table.from_pylist(steps, schema=step_schema),
        "states": pa.Table.from_pylist(states, schema=STATE_SCHEMA),
        "episodes": pa.Table.from_pylist(episodes, schema=episode_schema(names, design)),
    }
