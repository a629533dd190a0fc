"""One home for the state a help policy sees: :func:`view_from_history` builds the
:class:`~helpdp.policies.StateView` of a state from the records of the episode's turns
before it, the same way on every path that runs a policy online: the collector
(``collect.rollout.EpisodeRunner``, which the GRPO ``rollout_func`` runs too) and the
GRPO ``environment_factory`` gate (``helpdp.train.env_factory``). The off-policy
evaluation builds the same views columnarly from the tables (``helpdp.ope``); the tests
hold the two to the same views (``tests/test_state_views.py``).

A turn's record is a mapping with the fields of a ``steps.parquet`` row
(docs/data-format.md): ``kind``, ``tool_name``, ``failure``, ``format_error``,
``args_sha`` (None: unknown), ``prompt_tokens`` and ``completion_tokens`` (0: not
logged) and ``action`` (the help action taken at the turn's state; 0: none). A missing
field reads as unknown/none.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from helpdp.events import classify_steps
from helpdp.policies import StateView

__all__ = ["TURN_KEYS", "view_from_history"]

#: the fields of a turn's record :func:`view_from_history` reads
TURN_KEYS = (
    "kind",
    "tool_name",
    "failure",
    "format_error",
    "args_sha",
    "prompt_tokens",
    "completion_tokens",
    "action",
)
_EVENT_KEYS = ("episode_id", "t", "kind", "tool_name", "failure", "format_error", "args_sha")


def _events(turns: Sequence[Mapping]) -> dict:
    """``last_class``, ``repeats``, ``context_tokens`` of the state after ``turns`` and
    ``past``, those of every earlier state (``helpdp.events``)."""
    none = {"last_class": None, "repeats": 0, "context_tokens": None, "past": ()}
    if not turns:
        return none
    rows = [
        {**{k: r.get(k) for k in _EVENT_KEYS}, "episode_id": 0, "t": i} for i, r in enumerate(turns)
    ]
    try:
        ev = classify_steps(pd.DataFrame(rows, columns=list(_EVENT_KEYS)))
    except ValueError:  # a kind or failure class events does not know: no events
        return none
    tokens = [
        int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0) or None
        for r in turns
    ]
    states = [(None, 0, None)] + [
        (str(c), int(r), n) for c, r, n in zip(ev["turn_class"], ev["repeats"], tokens)
    ]
    last_class, repeats, context = states[-1]
    return {
        "last_class": last_class,
        "repeats": repeats,
        "context_tokens": context,
        "past": tuple(states[:-1]),
    }


def view_from_history(
    turns: Sequence[Mapping],
    *,
    state_id: int,
    task_id: str,
    text: str,
    episode_id: int = 0,
    pending: int = 0,
) -> StateView:
    """The view of the state after ``turns`` (the records of the episode's turns so far,
    turn ``j`` at position ``j``; see the module docstring): its depth is the number of
    turns, ``last_failure`` the last turn's failure, ``errors`` the turns with a failure,
    ``last_help``/``calls`` the latest turn/number of turns with help (``action > 0``),
    and the events of :mod:`helpdp.events` (none where a record's kind or failure is
    not one events knows). ``pending``: how many times help was already given at this
    state (the ``environment_factory``'s earlier ``ask_expert`` calls of the same
    state), counted in ``calls`` and ``last_help``."""
    depth = len(turns)
    helped = [j for j, r in enumerate(turns) if int(r.get("action") or 0) > 0]
    helped += [depth] * int(pending)
    return StateView(
        state_id=state_id,
        task_id=task_id,
        depth=depth,
        text=text,
        episode_id=episode_id,
        last_failure=turns[-1].get("failure") if turns else None,
        errors=sum(r.get("failure") is not None for r in turns),
        last_help=max(helped, default=-1),
        calls=len(helped),
        **_events(turns),
    )
