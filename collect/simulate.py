"""The simulated weak agent's turns: a seeded SIMULATION of a weak agent over the worlds'
reference solutions (not a model). Its error classes and rates are set by
:class:`SimulatedConfig` (``actor.simulated``); :class:`collect.actors.SimulatedActor`
runs it as an actor."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from collect.awm.protocol import (
    TOOL_CALL_CLOSE,
    format_call_tool,
    format_tool_call,
    tool_call_block,
)
from collect.rollout import reference_progress
from collect.types import EpisodeView
from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from collect.types import Turn

__all__ = [
    "OUTCOMES",
    "FittedAgent",
    "SimulatedConfig",
    "history_features",
    "simulate_fitted_turn",
    "simulate_turn",
    "tool_call_text",
    "turn_class",
]


@dataclass
class SimulatedConfig:
    """Behaviour of the simulated weak agent (rates per turn; d = task difficulty in [0, 1])."""

    format_error_p: float = _f(0.10, "probability of a format error at turn 0")
    format_error_decay: float = _f(
        0.75, "the format-error probability is multiplied by this each turn"
    )
    wrong_tool_p: float = _f(0.02, "probability of calling a wrong tool on an easy task (d = 0)")
    wrong_tool_slope: float = _f(0.10, "added to wrong_tool_p at d = 1")
    wrong_args_p: float = _f(0.04, "probability of wrong arguments on an easy task (d = 0)")
    wrong_args_slope: float = _f(0.16, "added to wrong_args_p at d = 1")
    loop_p: float = _f(0.45, "after a failed call, probability of repeating it exactly (d = 0)")
    loop_slope: float = _f(0.35, "added to loop_p at d = 1")
    early_stop_p: float = _f(0.01, "probability of answering before the work is done (d = 0)")
    early_stop_slope: float = _f(0.05, "added to early_stop_p at d = 1")
    skip_list_tools_p: float = _f(0.1, "probability of not calling list_tools first")
    follow_p: float = _f(0.9, "probability of following the oracle's suggested call or answer")
    help_factor: float = _f(
        0.25, "error rates are multiplied by this while an expert's plan is in context"
    )
    plan_memory: int = _f(
        3, "turns an expert's message keeps helping (the turn it is given counts)"
    )
    difficulty_calls: int = _f(
        12, "reference calls at which difficulty d reaches 1 (d = calls / this)"
    )


def tool_call_text(tool_name: str, arguments: JSON, thought: str = "") -> str:
    """A turn calling the app's tool ``tool_name`` (:func:`~collect.awm.protocol.format_call_tool`)."""
    return format_call_tool(tool_name, arguments, thought)


_LIST_TOOLS = format_tool_call("list_tools", None, "Let me first see which tools are available.")


def _difficulty(view: EpisodeView, config: SimulatedConfig) -> float:
    calls = len(view.solution.calls) if view.solution else config.difficulty_calls
    return min(1.0, calls / max(1, config.difficulty_calls))


def _plan_active(view: EpisodeView, memory: int) -> bool:
    if view.help is not None:
        return True
    recent = view.history[-(memory - 1) :] if memory > 1 else []
    return any(t.help is not None for t in recent)


def _format_error(call: dict[str, JSON], rng: np.random.Generator) -> str:
    name, args = call.get("tool_name", "list_tools"), call.get("arguments") or {}
    style = int(rng.integers(0, 3))
    if style == 0:  # no closing tag
        return tool_call_text(name, args, "I'll call the tool.").rsplit("\n" + TOOL_CALL_CLOSE, 1)[
            0
        ]
    if style == 1:  # broken JSON
        inner = json.dumps({"tool_name": name, "arguments": json.dumps(args)})
        return tool_call_block(f'{{"name": "call_tool", "arguments": {inner},}}')
    # the tool called as a function (not a meta-function)
    return tool_call_block(json.dumps({"name": name, "arguments": args}))


def _wrong_tool(call: dict[str, JSON], tools: Sequence[str], rng: np.random.Generator) -> dict:
    name = call.get("tool_name", "")
    words = set(name.split("_"))
    others = [t for t in tools if t != name]
    close = [t for t in others if words & set(t.split("_"))]
    pool = close or others
    if not pool:
        return call
    return {"tool_name": pool[int(rng.integers(0, len(pool)))], "arguments": call.get("arguments")}


def _perturb(value: JSON, rng: np.random.Generator) -> JSON:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + int(rng.choice([-2, -1, 1, 2]))
    if isinstance(value, float):
        return round(value * float(rng.choice([0.5, 1.5])), 2)
    if isinstance(value, str):
        if not value:
            return "x"
        style = int(rng.integers(0, 3))
        if style == 0:
            return value[:-1]
        if style == 1:
            return value.upper() if value != value.upper() else value.lower()
        return value.replace(" ", "_") if " " in value else value + "s"
    if isinstance(value, list):
        return value[:-1]
    if isinstance(value, dict) and value:
        keys = sorted(value)
        drop = keys[int(rng.integers(0, len(keys)))]
        return {k: v for k, v in value.items() if k != drop}
    return None


def _wrong_args(call: dict[str, JSON], rng: np.random.Generator) -> dict | None:
    args = dict(call.get("arguments") or {})
    if not args:
        return None
    keys = sorted(args)
    key = keys[int(rng.integers(0, len(keys)))]
    if rng.random() < 0.25:
        args.pop(key)
    else:
        args[key] = _perturb(args[key], rng)
    return {"tool_name": call.get("tool_name"), "arguments": args}


def _final_text(view: EpisodeView) -> str:
    answer = view.solution.final_answer if view.solution else None
    return answer or "I have completed the task."


def simulate_turn(view: EpisodeView, rng: np.random.Generator, config: SimulatedConfig) -> str:
    """One turn of the simulated weak agent (a pure function of the view and the draws).

    In order: a format error (rate falling with the turn index); following the
    oracle's suggestion; repeating a failed call (a loop; not while a plan is in
    context); ``list_tools`` first; the final answer once every reference call is
    done; a premature answer; else the next reference call, possibly with a wrong
    tool or wrong arguments. Error rates grow with the task's difficulty and shrink
    by ``help_factor`` while an expert's message is in context.
    """
    calls = list(view.solution.calls) if view.solution else []
    d = _difficulty(view, config)
    plan = _plan_active(view, config.plan_memory)
    f = config.help_factor if plan else 1.0
    u = rng.random(6)
    k = reference_progress(view.history, calls)
    nxt = calls[k] if k < len(calls) else {"tool_name": "list_tools", "arguments": {}}
    if u[0] < config.format_error_p * config.format_error_decay**view.turn * f:
        return _format_error(nxt, rng)
    if view.help is not None and u[1] < config.follow_p:
        if view.help.call is not None:
            call = view.help.call
            return tool_call_text(
                call["tool_name"], call.get("arguments") or {}, "Following the advice."
            )
        if view.help.final:
            return _final_text(view)
    last = view.history[-1] if view.history else None
    if last is not None and last.failure is not None and not plan:
        if u[2] < config.loop_p + config.loop_slope * d:
            return last.text
    listed = any(t.parsed.get("kind") == "list_tools" for t in view.history)
    if not listed and not view.history and u[3] >= config.skip_list_tools_p:
        return _LIST_TOOLS
    if k >= len(calls):
        return _final_text(view)
    if u[4] < (config.early_stop_p + config.early_stop_slope * d) * f:
        return "I have completed the task."
    p_tool = (config.wrong_tool_p + config.wrong_tool_slope * d) * f
    p_args = (config.wrong_args_p + config.wrong_args_slope * d) * f
    call = nxt
    if u[5] < p_tool:
        call = _wrong_tool(nxt, view.tools, rng)
    elif u[5] < p_tool + p_args:
        call = _wrong_args(nxt, rng) or _wrong_tool(nxt, view.tools, rng)
    return tool_call_text(
        call["tool_name"], call.get("arguments") or {}, f"Next: {call['tool_name']}."
    )


# ---------------------------------------------------------------------------
# the simulated agent fitted to a real model (collect/fit_simulated.py writes its table)
# ---------------------------------------------------------------------------

#: what a fitted agent's turn is: a class of :data:`helpdp.events.TURN_CLASSES`, or
#: ``repeat`` (the previous turn's call again, whatever its class)
OUTCOMES = ("working", "failed", "unknown_tool", "format_error", "stop", "repeat")
#: the previous turn's class at turn 0
START = "start"
_FORMAT_FAILURES = frozenset({"invalid_json", "unknown_meta_function", "malformed_tag"})
_READ_PREFIXES = ("list_", "get_", "search_", "find_")


@dataclass(frozen=True)
class FittedAgent:
    """A fitted table: P(outcome | help now, turn bucket, previous class, repeat run) and
    the probability that a working call is the task's next reference call."""

    buckets: tuple[int, ...]  # lower edges of the turn buckets, the first 0
    max_run: int  # repeat runs >= max_run share a row
    probs: dict[str, np.ndarray]  # key(...) -> probabilities over OUTCOMES
    on_path: tuple[float, float]  # P(next reference call | working): without, with help

    @classmethod
    def from_json(cls, data: dict[str, JSON], where: str = "table") -> FittedAgent:
        """From the JSON that :mod:`collect.fit_simulated` writes; a bad one is a
        ``ValueError`` naming the field (a ``model=features`` fit is read by
        :func:`collect.simfeatures.agent_from_json`)."""
        if data.get("model", "table") != "table":
            raise ValueError(f"{where}: model must be table, not {data.get('model')!r}")
        if list(data.get("outcomes", [])) != list(OUTCOMES):
            raise ValueError(f"{where}: outcomes must be {list(OUTCOMES)}")
        buckets = tuple(int(b) for b in data.get("buckets", []))
        if not buckets or buckets[0] != 0 or list(buckets) != sorted(set(buckets)):
            raise ValueError(f"{where}: buckets must be increasing lower edges from 0")
        probs = {}
        for key, row in dict(data.get("probs", {})).items():
            p = np.asarray(row, dtype=float)
            if p.shape != (len(OUTCOMES),) or (p < 0).any() or abs(p.sum() - 1) > 1e-4:
                raise ValueError(f"{where}: probs[{key!r}] is not a distribution over outcomes")
            probs[str(key)] = p / p.sum()
        on = data.get("on_path", {})
        q = (float(on.get("nohelp", -1)), float(on.get("help", -1)))
        if not all(0 <= x <= 1 for x in q):
            raise ValueError(f"{where}: on_path.nohelp and on_path.help must be in [0, 1]")
        return cls(buckets, int(data.get("max_run", 2)), probs, q)

    def bucket(self, turn: int) -> int:
        return int(np.searchsorted(self.buckets, turn, side="right") - 1)

    def key(self, helped: bool, turn: int, prev: str, run: int) -> str:
        return f"{int(helped)}|{self.bucket(turn)}|{prev}|{min(run, self.max_run)}"

    def row(self, helped: bool, turn: int, prev: str, run: int, **task: int) -> np.ndarray:
        """The cell's probabilities over OUTCOMES (the task's features, which
        :class:`collect.simfeatures.FeatureAgent` reads, do not enter a table)."""
        key = self.key(helped, turn, prev, run)
        if key not in self.probs:
            raise KeyError(f"the fitted table has no row {key!r}")
        return self.probs[key]


def turn_class(turn: Turn) -> str:
    """The class of a past turn (:func:`helpdp.events.classify_turn`'s rules, read from
    the turn's parsed action and failure)."""
    kind, failure = turn.parsed.get("kind"), turn.failure
    if kind == "final":
        return "stop"
    if kind == "invalid" or failure in _FORMAT_FAILURES or failure == "untagged_call":
        return "format_error"
    if failure == "unknown_tool":
        return "unknown_tool"
    if failure is not None:
        return "failed"
    return "working"


def _same_call(a: Turn, b: Turn) -> bool:
    """The events' repeat: the same call kind and tool name (arguments aside)."""
    ka, kb = a.parsed.get("kind"), b.parsed.get("kind")
    return (
        ka in ("call_tool", "list_tools")
        and ka == kb
        and a.parsed.get("tool_name") == b.parsed.get("tool_name")
    )


def history_features(history: Sequence[Turn]) -> tuple[str, int]:
    """The previous turn's class (``start`` at turn 0) and its repeat run."""
    if not history:
        return START, 0
    run = 0
    for i in range(len(history) - 1, 0, -1):
        if not _same_call(history[i], history[i - 1]):
            break
        run += 1
    return turn_class(history[-1]), run


def _last_call(view: EpisodeView) -> tuple[str | None, str | None]:
    if not view.history:
        return None, None
    p = view.history[-1].parsed
    return p.get("kind"), p.get("tool_name")


def _off_path(view: EpisodeView, calls: list[dict], k: int, rng: np.random.Generator) -> str:
    """A working call that does not advance the task: ``list_tools`` or one of the task's
    read calls (never the previous turn's tool: that would be a repeat)."""
    kind, tool = _last_call(view)
    reads = [
        c
        for i, c in enumerate(calls)
        if i != k and str(c.get("tool_name", "")).startswith(_READ_PREFIXES)
    ]
    reads = [c for c in reads if not (kind == "call_tool" and c.get("tool_name") == tool)]
    options = ([None] if kind != "list_tools" else []) + reads
    if not options:  # after list_tools with no read call to make: the task's last call
        if not calls:
            return _LIST_TOOLS
        last = calls[min(k, len(calls) - 1)]
        return tool_call_text(last["tool_name"], last.get("arguments") or {})
    pick = options[int(rng.integers(0, len(options)))]
    if pick is None:
        return _LIST_TOOLS
    return tool_call_text(pick["tool_name"], pick.get("arguments") or {}, "Let me look.")


def _unknown_tool(view: EpisodeView, nxt: dict, rng: np.random.Generator) -> str:
    _, tool = _last_call(view)
    name = str(nxt.get("tool_name") or "item")
    names = ["list_tools", f"{name}_details", f"get_{name}"]
    names = [n for n in names if n not in view.tools and n != tool] or [f"{name}_v{view.turn}"]
    pick = names[int(rng.integers(0, len(names)))]
    return tool_call_text(pick, nxt.get("arguments") or {}, f"Next: {pick}.")


def _failed_call(view: EpisodeView, calls: list[dict], k: int, rng: np.random.Generator) -> str:
    """A real tool called with arguments of the wrong type (the app refuses it: 422)."""
    _, tool = _last_call(view)
    order = calls[k:] + calls[:k]
    pool = [c for c in order if c.get("arguments") and c.get("tool_name") != tool]
    pool = pool or [c for c in order if c.get("arguments")] or order
    if not pool:  # a task without reference calls: any real tool, with a wrong argument
        name = next((t for t in sorted(view.tools) if t != tool), tool or "list_tools")
        return tool_call_text(name, {"id": {"value": []}}, "Next call.")
    call = pool[0] if rng.random() < 0.5 or len(pool) == 1 else pool[1]
    args = {key: {"value": [v]} for key, v in (call.get("arguments") or {}).items()}
    return tool_call_text(call["tool_name"], args or {"id": {"value": []}}, "Next call.")


def simulate_fitted_turn(view: EpisodeView, rng: np.random.Generator, agent: FittedAgent) -> str:
    """One turn of the fitted agent: its outcome drawn from the table's row for (help
    now, turn bucket, previous class, repeat run), then written as a turn the
    environment reads as that class. A working call is the expert's advice or the
    next reference call with probability ``on_path`` (with, without help), else a
    call that changes nothing; a stop is the reference answer once every reference
    call is done (or the expert says so), else a premature answer."""
    calls = list(view.solution.calls) if view.solution else []
    k = reference_progress(view.history, calls)
    prev, run = history_features(view.history)
    helped = view.help is not None
    p = agent.row(helped, view.turn, prev, run, n_calls=len(calls), n_tools=len(view.tools))
    u = rng.random(2)
    outcome = OUTCOMES[min(int(np.searchsorted(np.cumsum(p), u[0], side="right")), len(p) - 1)]
    nxt = calls[k] if k < len(calls) else (calls[-1] if calls else {"tool_name": "item"})
    if outcome == "repeat" and view.history:
        return view.history[-1].text
    if outcome == "format_error":
        if rng.random() < 0.5:
            return tool_call_block(json.dumps({"name": nxt.get("tool_name"), "arguments": {}}))
        inner = json.dumps({"tool_name": nxt.get("tool_name"), "arguments": "{}"})
        return tool_call_block(f'{{"name": "call_tool", "arguments": {inner},}}')
    if outcome == "unknown_tool":
        return _unknown_tool(view, nxt, rng)
    if outcome == "failed" and calls:
        return _failed_call(view, calls, k, rng)
    if outcome == "stop":
        done = k >= len(calls) or (view.help is not None and view.help.final)
        return _final_text(view) if done else "I have completed the task."
    if helped and view.help.call is not None and u[1] < agent.on_path[1]:
        call = view.help.call
        return tool_call_text(
            call["tool_name"], call.get("arguments") or {}, "Following the advice."
        )
    if not helped and k < len(calls) and u[1] < agent.on_path[0]:
        return tool_call_text(
            nxt["tool_name"], nxt.get("arguments") or {}, f"Next: {nxt['tool_name']}."
        )
    return _off_path(view, calls, k, rng) if calls else _LIST_TOOLS
