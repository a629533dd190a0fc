"""Turn events: what each logged turn of the actor was, from the steps table.

Every step of ``steps.parquet`` (docs/data-format.md) is one turn of the actor. The
collector logs ``kind`` (``call_tool | list_tools | final | invalid``; ``context_full``: the
actor's prompt no longer fit its context window, the episode ended there; ``ask_expert`` and
``error`` in training rollouts), ``tool_name``, ``failure`` (``unknown_tool |
unknown_meta_function | invalid_json | malformed_tag | untagged_call | tool_error |
invalid_arguments | server_error``, ``collect/awm/protocol.py``; null when the turn
worked), ``format_error`` and, from the
collector of 2026-11-28 on, ``args_sha`` (:func:`args_sha` of the call's arguments).
:func:`classify_steps` turns these into ONE class per turn, first match wins:

``stop``          the actor gave its final answer (``kind == "final"``), or its prompt
                  filled its context window (``kind == "context_full"``: the episode ended);
``format_error``  the reply was not a well-formed turn: ``format_error`` is true, the
                  failure is ``invalid_json``, ``malformed_tag``, ``untagged_call`` or
                  ``unknown_meta_function``, or the kind is ``invalid``/``error``
                  without another failure;
``unknown_tool``  the actor called a tool the world does not have;
``failed``        the call ran and failed: ``tool_error``, ``invalid_arguments`` or
                  ``server_error``;
``working``       a call (``call_tool``, ``list_tools``, ``ask_expert``) that worked.

and a **repeat** flag: the turn is a call (``call_tool``/``list_tools``) and the
previous turn of the same episode (``t - 1``) was the same call: the same ``kind``
and ``tool_name`` and, where both turns have an ``args_sha``, the same arguments.
Older data has no ``args_sha``; there a repeat is the same tool again, whatever its
arguments (an upper bound on exact repeats). ``repeats`` is the length of the run
of repeats ending at the turn: 0 for a turn that is no repeat, 1 for the second
identical call in a row, 2 for the third, ... A **loop** is ``repeats >= 2``.

A help policy decides *before* a turn, so it sees the previous turn's events:
:func:`state_events` gives, for the state of each step, ``last_class`` (the class of
turn ``t - 1``; None at turn 0) and ``last_repeats`` (its ``repeats``), what
``helpdp.policies.StateView`` carries as ``last_class`` and ``repeats``; its ``past``
holds the same fields of every earlier state of the episode (:func:`state_histories`),
so a policy may count the earlier states where its events fired (:func:`count_fired`:
the stage-2 design randomises only at the first K trigger states of an episode).

Pure functions of arrays/DataFrames: no I/O.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

__all__ = [
    "CALL_KINDS",
    "EVENTS",
    "FAILURES",
    "KINDS",
    "TURN_CLASSES",
    "args_sha",
    "classify_steps",
    "classify_turn",
    "count_fired",
    "event_fires",
    "state_events",
    "state_histories",
]

TURN_CLASSES = ("working", "failed", "unknown_tool", "format_error", "stop")
KINDS = ("call_tool", "list_tools", "final", "invalid", "ask_expert", "error", "context_full")
CALL_KINDS = ("call_tool", "list_tools")
FAILURES = (
    "unknown_tool",
    "unknown_meta_function",
    "invalid_json",
    "malformed_tag",
    "untagged_call",
    "tool_error",
    "invalid_arguments",
    "server_error",
)
_FORMAT_FAILURES = frozenset(
    {"invalid_json", "unknown_meta_function", "malformed_tag", "untagged_call"}
)
_FAILED = frozenset({"tool_error", "invalid_arguments", "server_error"})

# The events a rule may trigger on (helpdp.policies.TurnZeroThen): the previous
# turn's class, a repeated call (repeats >= 1), a loop (repeats >= 2), and
# "context:N" (the prompt is longer than N tokens) / "turn:K" (the turn index is K).
EVENTS = ("repeat", "loop", "failed", "unknown_tool", "format_error", "working")


def args_sha(arguments) -> str:
    """The first 16 hex digits of the sha256 of the canonical JSON of a call's arguments
    (keys sorted, no whitespace, UTF-8); ``None`` arguments hash as ``{}``, a JSON
    string as the value it holds."""
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):  # call_tool's arguments may come as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    text = json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _is_null(x) -> bool:
    return x is None or (isinstance(x, float) and np.isnan(x))


def classify_turn(kind, failure=None, format_error=False) -> str:
    """The class of one turn (see the module docstring); an unknown kind or failure
    is a ``ValueError`` naming it."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {KINDS}")
    failure = None if _is_null(failure) else str(failure)
    if failure is not None and failure not in FAILURES:
        raise ValueError(f"failure {failure!r} is not one of {FAILURES} or null")
    if kind in ("final", "context_full"):
        return "stop"
    if bool(format_error) or failure in _FORMAT_FAILURES:
        return "format_error"
    if failure == "unknown_tool":
        return "unknown_tool"
    if failure in _FAILED:
        return "failed"
    if kind in ("invalid", "error"):
        return "format_error"
    return "working"


def classify_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with ``turn_class`` (one of :data:`TURN_CLASSES`), ``repeat`` (bool) and
    ``repeats`` (int, the run of repeats ending at the turn) added, in the input's row
    order. Needs ``episode_id, t, kind, tool_name, failure``; ``format_error`` and
    ``args_sha`` are used where present. A bad value is one ``ValueError`` naming the
    column and the first offending row."""
    need = ("episode_id", "t", "kind", "tool_name", "failure")
    missing = [c for c in need if c not in steps.columns]
    if missing:
        raise ValueError(f"steps: missing column(s) {missing} (need {list(need)})")
    out = steps.copy()
    kind = out["kind"].astype(object)
    bad = ~kind.isin(KINDS)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"steps: column kind, row {i}: {kind.iloc[i]!r} is not one of {KINDS}")
    failure = out["failure"].astype(object).where(out["failure"].notna(), None)
    bad = failure.notna() & ~failure.isin(FAILURES)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"steps: column failure, row {i}: {failure.iloc[i]!r} is not one of {FAILURES} or null"
        )
    fmt = (
        out["format_error"].fillna(False).astype(bool)
        if "format_error" in out
        else pd.Series(False, index=out.index)
    )
    cls = np.full(len(out), "working", dtype=object)
    cls[kind.isin(("invalid", "error")).to_numpy()] = "format_error"
    cls[failure.isin(_FAILED).to_numpy()] = "failed"
    cls[(failure == "unknown_tool").to_numpy()] = "unknown_tool"
    cls[(fmt | failure.isin(_FORMAT_FAILURES)).to_numpy()] = "format_error"
    cls[(kind == "final").to_numpy()] = "stop"
    out["turn_class"] = cls

    order = np.lexsort((out["t"].to_numpy(), out["episode_id"].to_numpy()))
    s = out.iloc[order]
    ep = s["episode_id"].to_numpy()
    t = s["t"].to_numpy().astype(np.int64)
    k = s["kind"].astype(object).to_numpy()
    tool = s["tool_name"].astype(object).where(s["tool_name"].notna(), "").to_numpy()
    same = np.zeros(len(s), dtype=bool)
    if len(s) > 1:
        same[1:] = (
            (ep[1:] == ep[:-1])
            & (t[1:] == t[:-1] + 1)
            & (k[1:] == k[:-1])
            & (tool[1:] == tool[:-1])
        )
        if "args_sha" in s.columns:
            sha = s["args_sha"].to_numpy(dtype=object)
            has = np.array([isinstance(x, str) and x != "" for x in sha], dtype=bool)
            both = has[1:] & has[:-1]
            same[1:] &= ~both | (sha[1:] == sha[:-1])
    same &= np.isin(k, CALL_KINDS)
    block = np.cumsum(~same)
    runs = pd.Series(np.ones(len(s), dtype=np.int64)).groupby(block).cumcount().to_numpy()
    repeat = np.empty(len(out), dtype=bool)
    repeats = np.empty(len(out), dtype=np.int64)
    repeat[order] = same
    repeats[order] = np.where(same, runs, 0)
    out["repeat"] = repeat
    out["repeats"] = repeats
    return out


def state_events(steps: pd.DataFrame) -> pd.DataFrame:
    """:func:`classify_steps` plus, for the state at which each step's help decision was
    taken, ``last_class`` (the class of turn ``t - 1`` of the episode; None at turn 0
    or when that turn is not in the table) and ``last_repeats`` (its ``repeats``; 0)."""
    out = classify_steps(steps)
    prev = out[["episode_id", "t", "turn_class", "repeats"]].copy()
    prev["t"] = prev["t"].astype(np.int64) + 1
    prev = prev.rename(columns={"turn_class": "last_class", "repeats": "last_repeats"})
    key = out[["episode_id", "t"]].copy()
    key["t"] = key["t"].astype(np.int64)
    merged = key.merge(prev, on=["episode_id", "t"], how="left")
    last = merged["last_class"].to_numpy(dtype=object)
    out["last_class"] = pd.Series(
        [x if isinstance(x, str) else None for x in last], index=out.index, dtype=object
    )
    out["last_repeats"] = merged["last_repeats"].fillna(0).astype(np.int64).to_numpy()
    return out


def event_fires(
    event: str, *, depth: int, last_class: str | None, repeats: int, context_tokens: int | None
) -> bool:
    """Whether ``event`` holds at a state: one of :data:`EVENTS` (a class of the previous
    turn, ``repeat`` = the previous turn repeated the call before it, ``loop`` = its
    repeat run is >= 2), ``turn:K`` (the turn index is K) or ``context:N`` (the prompt
    is known and longer than N tokens). An unknown event is a ``ValueError``."""
    if event == "repeat":
        return repeats >= 1
    if event == "loop":
        return repeats >= 2
    if event in EVENTS:
        return last_class == event
    name, _, arg = event.partition(":")
    if name == "turn" and arg.lstrip("-").isdigit():
        return depth == int(arg)
    if name == "context" and arg.isdigit():
        return context_tokens is not None and context_tokens > int(arg)
    raise ValueError(f"unknown event {event!r}: one of {EVENTS}, 'turn:K' or 'context:N'")


def check_events(events) -> tuple[str, ...]:
    """``events`` as a tuple, each one checked (a ``ValueError`` names a bad one)."""
    if isinstance(events, str):
        events = tuple(e for e in events.split(",") if e)
    events = tuple(str(e) for e in events)
    for e in events:
        event_fires(e, depth=0, last_class=None, repeats=0, context_tokens=None)
    return events


def count_fired(events: tuple[str, ...], past) -> int:
    """How many earlier states one of ``events`` fired at: ``past`` is
    ``StateView.past``, the ``(last_class, repeats, context_tokens)`` of each earlier
    state of the episode, state ``j`` (turn index ``j``) at position ``j``."""
    return sum(
        any(
            event_fires(e, depth=j, last_class=lc, repeats=int(r), context_tokens=c) for e in events
        )
        for j, (lc, r, c) in enumerate(past)
    )


def state_histories(last_class, repeats, context_tokens, ep_ptr) -> list[tuple]:
    """``StateView.past`` of every step: the ``(last_class, repeats, context_tokens)``
    of the steps before it in its episode (episode ``e`` owns rows
    ``ep_ptr[e]:ep_ptr[e + 1]``, in turn order; ``context_tokens`` None or < 0: unknown)."""
    rows = [
        (lc if isinstance(lc, str) else None, int(r), None if c is None or c < 0 else int(c))
        for lc, r, c in zip(last_class, repeats, context_tokens)
    ]
    out: list[tuple] = []
    for a, b in zip(ep_ptr[:-1], ep_ptr[1:]):
        out.extend(tuple(rows[a:i]) for i in range(int(a), int(b)))
    return out
