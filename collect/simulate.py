"""The simulated weak agent's turns: a seeded SIMULATION of a weak agent over the worlds'
reference solutions (not a model). Its error classes and rates are set by
:class:`SimulatedConfig` (``actor.simulated``); :class:`collect.actors.SimulatedActor`
runs it as an actor."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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

__all__ = ["SimulatedConfig", "simulate_turn", "tool_call_text"]


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


def tool_call_text(tool_name: str, arguments: Any, thought: str = "") -> str:
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


def _format_error(call: dict[str, Any], rng: np.random.Generator) -> str:
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


def _wrong_tool(call: dict[str, Any], tools: Sequence[str], rng: np.random.Generator) -> dict:
    name = call.get("tool_name", "")
    words = set(name.split("_"))
    others = [t for t in tools if t != name]
    close = [t for t in others if words & set(t.split("_"))]
    pool = close or others
    if not pool:
        return call
    return {"tool_name": pool[int(rng.integers(0, len(pool)))], "arguments": call.get("arguments")}


def _perturb(value: Any, rng: np.random.Generator) -> Any:
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


def _wrong_args(call: dict[str, Any], rng: np.random.Generator) -> dict | None:
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
