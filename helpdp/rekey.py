"""Re-keying without re-collecting: coarser state keys derived from ``steps.parquet``.

The collector keys states finely (the history tree, or the database plus the age of
the latest help): most states are seen once, so the DP's argmax there is noise (the
winner's curse). A coarser key pools every visit with the same key, across episodes
and, when the key does not name the task, across tasks: its counts are thick and its
policy applies to any task, seen or not. The ladder, from fine to coarse:

====================  ======================================================
rung                  key of the state before turn t
====================  ======================================================
``state``             the collected ``state_id`` (the collection's own key)
``task_turn_age_fail`` (task, t, age of the latest help, last turn failed)
``turn_age_fail``     (t, age, last turn failed)
``turn_age``          (t, age)
``turn_fail``         (t, last turn failed)
``turn``              (t)
``turn_event``        (t, class of the last turn, repeat of the last turn)
``event``             (class of the last turn, repeat of the last turn)
====================  ======================================================

The event rungs (``helpdp.events``): the class is the previous turn's ``last_class``
(``working | failed | unknown_tool | format_error``; ``-`` at turn 0), the repeat is
0 (no repeat), 1 (the last turn repeated the call before it) or 2 (a loop: two repeats
or more in a row). ``event`` drops the turn: its keys recur within an episode (a
working turn after a working turn), so its count model has cycles and the DP on it
discounts by ``CYCLIC_GAMMA`` (0.999; value iteration needs gamma < 1 there).

``age`` is ``t - (turn of the latest help)``, capped at ``age_cap`` (older help
counts as one class), and 0 when the episode has had no help yet. Every feature is
computed from the logged steps (turn, action, the previous turn's ``failure``, its
class and repeat run: ``helpdp.ope.load_logged``'s ``last_class``, ``last_repeats``) and,
at deployment, from the :class:`helpdp.policies.StateView` the collector builds
(``depth``, ``last_help``, ``last_failure``, ``last_class``, ``repeats``), the same way.

:func:`rekey` builds a contract ``Dataset`` on a rung (terminal states keyed by turn
and outcome), so the DP (``helpdp.budget.search_budget``) runs on it unchanged;
:class:`KeyTablePolicy` deploys its solution as a table on the rung's keys, and on a
task-agnostic rung it decides on tasks it never saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpdp.budget import policy_frame, search_budget
from helpdp.contract import build_manifest
from helpdp.data import from_frames
from helpdp.policies import HelpPolicy, Never, StateView, uniform
from helpdp.splits import stable_int64

__all__ = ["RUNGS", "KeyTablePolicy", "rekey", "solve_rung", "view_key"]

#: rung -> the key's columns (besides the turn), from fine to coarse
RUNGS: dict[str, tuple[str, ...]] = {
    "state": ("state",),
    "task_turn_age_fail": ("task", "t", "age", "failed"),
    "turn_age_fail": ("t", "age", "failed"),
    "turn_age": ("t", "age"),
    "turn_fail": ("t", "failed"),
    "turn": ("t",),
    "turn_event": ("t", "last", "rep"),
    "event": ("last", "rep"),
}
AGE_CAP = 4
#: the discount of the DP on a rung without the turn (its keys recur: cycles)
CYCLIC_GAMMA = 0.999
#: repeat runs at or above this are one key (2: a loop)
REPEAT_CAP = 2
#: the event rungs' class of a state with no previous turn (turn 0)
NO_CLASS = "-"


def _check_rung(rung: str) -> tuple[str, ...]:
    if rung not in RUNGS:
        raise ValueError(f"rung {rung!r}: one of {', '.join(RUNGS)}")
    return RUNGS[rung]


def view_key(rung: str, v: StateView, age_cap: int = AGE_CAP) -> tuple:
    """The rung's key of a decision (what :class:`KeyTablePolicy` looks up)."""
    cols = _check_rung(rung)
    feats = {
        "state": int(v.state_id),
        "task": str(v.task_id),
        "t": int(v.depth),
        "age": 0 if v.last_help < 0 else int(min(v.depth - v.last_help, age_cap)),
        "failed": int(v.last_failure is not None),
        "last": v.last_class if isinstance(v.last_class, str) else NO_CLASS,
        "rep": int(min(v.repeats, REPEAT_CAP)),
    }
    return tuple(feats[c] for c in cols)


def step_keys(logged, rung: str, age_cap: int = AGE_CAP) -> list[tuple]:
    """The rung's key of every logged step (``helpdp.ope.Logged``), as
    :func:`view_key` computes it from the step's view."""
    cols = _check_rung(rung)
    st = logged.steps
    lens = np.diff(logged.ep_ptr)
    t = st["t"].to_numpy(np.int64)
    lh = st["last_help"].to_numpy(np.int64)
    feats = {
        "state": st["state_id"].to_numpy(np.int64),
        "task": np.repeat(logged.episodes["task_id"].astype(str).to_numpy(), lens),
        "t": t,
        "age": np.where(lh < 0, 0, np.minimum(t - lh, age_cap)),
        "failed": st["last_failure"].notna().to_numpy(np.int64),
        "last": np.array(
            [x if isinstance(x, str) else NO_CLASS for x in st["last_class"]], dtype=object
        ),
        "rep": np.minimum(st["last_repeats"].to_numpy(np.int64), REPEAT_CAP),
    }
    arrays = [feats[c] for c in cols]
    return [tuple(x.item() if hasattr(x, "item") else x for x in row) for row in zip(*arrays)]


def _sid(rung: str, key: tuple) -> int:

    return stable_int64("rekey", rung, list(key))


def rekey(logged, rung: str, *, age_cap: int = AGE_CAP, gamma: float = 1.0):
    """The count model of ``logged``'s episodes on ``rung``: a ``helpdp.data.Dataset``
    whose states are the rung's keys (``task_id`` the task, or ``*`` on a
    task-agnostic rung) plus one success and one failure terminal per turn.
    Returns ``(dataset, key_of)``, ``key_of``: state_id -> key."""

    cols = _check_rung(rung)
    agnostic = "task" not in cols and "state" not in cols
    keys = step_keys(logged, rung, age_cap)
    st = logged.steps
    lens = np.diff(logged.ep_ptr)
    if len(st) == 0:
        raise ValueError("rekey: no logged step")
    task = np.repeat(logged.episodes["task_id"].astype(str).to_numpy(), lens)
    ids = np.fromiter((_sid(rung, k) for k in keys), np.int64, len(keys))
    t = st["t"].to_numpy(np.int64)
    last = np.zeros(len(st), bool)
    last[logged.ep_ptr[1:][lens > 0] - 1] = True
    succ = np.repeat(logged.episodes["success"].to_numpy(bool), lens)
    end_key = [("end", int(tt) + 1, bool(s)) for tt, s in zip(t[last], succ[last])]
    end_task = task[last] if not agnostic else np.full(int(last.sum()), "*")
    end_ids = np.fromiter(
        (_sid(rung, (*k, str(tk)) if not agnostic else k) for k, tk in zip(end_key, end_task)),
        np.int64,
        len(end_key),
    )
    nxt = np.empty(len(st), np.int64)
    nxt[:-1] = ids[1:]
    nxt[last] = end_ids
    key_of = dict(zip(ids.tolist(), keys))
    states = pd.DataFrame(
        {
            "state_id": ids,
            "task_id": task if not agnostic else "*",
            "depth": t.astype(np.int32),
            "is_start": t == 0,
            "terminal": False,
            "success": False,
        }
    ).drop_duplicates("state_id")
    ends = pd.DataFrame(
        {
            "state_id": end_ids,
            "task_id": end_task,
            "depth": (t[last] + 1).astype(np.int32),
            "is_start": False,
            "terminal": True,
            "success": succ[last],
        }
    ).drop_duplicates("state_id")
    states = pd.concat([states, ends], ignore_index=True)
    states["text"] = ""
    tr = (
        pd.DataFrame({"state_id": ids, "action": st["action"].to_numpy(np.int8), "next": nxt})
        .groupby(["state_id", "action", "next"], sort=True)
        .size()
        .rename("count")
        .reset_index()
        .rename(columns={"next": "next_state_id"})
    )
    tr["count"] = tr["count"].astype(np.int64)
    actions = ["nohelp"] + [f"a{k}" for k in range(1, logged.n_actions)]
    manifest = build_manifest(actions, gamma=gamma, source={"generator": f"helpdp.rekey {rung}"})
    return from_frames(manifest, states, tr), key_of


class KeyTablePolicy:
    """A DP solution on a rung, deployed as a table of the rung's keys.

    A mixture (``more`` with probability ``weight_more_help``) is drawn once per
    episode; keys without a row get ``fallback``'s decision (default nohelp).
    """

    def __init__(
        self,
        rung: str,
        less: dict,
        more: dict | None = None,
        weight_more_help: float = 0.0,
        *,
        age_cap: int = AGE_CAP,
        fallback: HelpPolicy | None = None,
        seed: int = 0,
        name: str = "",
        info: dict | None = None,
    ):
        _check_rung(rung)
        self.rung, self.age_cap = rung, int(age_cap)
        self.less, self.more = dict(less), (dict(more) if more is not None else None)
        self.weight_more_help = float(weight_more_help or 0.0)
        self.fallback = fallback or Never()
        self.seed = seed
        self.name = name or f"dp on ({rung})"
        self.info = info or {}

    def _table(self, episode_id: int) -> dict:
        if self.more is not None and self.weight_more_help > 0:
            if uniform(self.seed, "mixture", episode_id) < self.weight_more_help:
                return self.more
        return self.less

    def _decide_with(self, table: dict, views: Sequence[StateView]) -> np.ndarray:
        out = np.zeros(len(views), np.int8)
        unknown = []
        for i, v in enumerate(views):
            a = table.get(view_key(self.rung, v, self.age_cap))
            if a is None:
                unknown.append(i)
            else:
                out[i] = a
        if unknown:
            out[unknown] = np.asarray(
                self.fallback.decide([views[i] for i in unknown]), np.int8
            ).reshape(-1)
        return out

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        tables = [self._table(v.episode_id) for v in views]
        out = np.zeros(len(views), np.int8)
        for which in {id(t): t for t in tables}.values():
            idx = [i for i, t in enumerate(tables) if t is which]
            out[idx] = self._decide_with(which, [views[i] for i in idx])
        return out

    def components(self) -> list[tuple[float, HelpPolicy]]:
        if self.more is None or self.weight_more_help <= 0:
            return [(1.0, _Fixed(self, self.less, self.name))]
        w = self.weight_more_help
        return [
            (1.0 - w, _Fixed(self, self.less, self.name + " (less)")),
            (w, _Fixed(self, self.more, self.name + " (more)")),
        ]

    def to_json(self) -> dict:
        def rows(t):
            return None if t is None else [[list(k), int(a)] for k, a in sorted(t.items())]

        return {
            "kind": "key_table",
            "name": self.name,
            "rung": self.rung,
            "age_cap": self.age_cap,
            "weight_more_help": self.weight_more_help,
            "less": rows(self.less),
            "more": rows(self.more),
            "info": self.info,
        }

    @classmethod
    def from_json(cls, d: dict, *, seed: int = 0, where: str = "policy") -> KeyTablePolicy:
        try:

            def table(rows):
                return None if rows is None else {tuple(k): int(a) for k, a in rows}

            return cls(
                d["rung"],
                table(d["less"]),
                table(d.get("more")),
                float(d.get("weight_more_help") or 0.0),
                age_cap=int(d.get("age_cap", AGE_CAP)),
                seed=seed,
                name=str(d.get("name", "")),
                info=d.get("info") or {},
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: not a key_table policy ({type(e).__name__}: {e})") from None


@dataclass
class _Fixed:
    """One deterministic table of a :class:`KeyTablePolicy` (a mixture component)."""

    parent: KeyTablePolicy
    table: dict
    name: str

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return self.parent._decide_with(self.table, views)


def solve_rung(
    logged,
    rung: str,
    budget: float,
    *,
    age_cap: int = AGE_CAP,
    gamma: float = 1.0,
    seed: int = 0,
    max_solves: int = 200,
) -> KeyTablePolicy:
    """The budget search (``helpdp.budget.search_budget``) on ``rung``'s count model of
    ``logged``, as a :class:`KeyTablePolicy`; ``info`` holds the model's E[S], E[U]
    (discounted by ``CYCLIC_GAMMA`` on a rung without the turn).
    Raises ``helpdp.budget.InfeasibleBudget`` below the rung's least usage."""

    if "t" not in _check_rung(rung) and "state" not in RUNGS[rung]:
        gamma = min(gamma, CYCLIC_GAMMA)
    ds, key_of = rekey(logged, rung, age_cap=age_cap, gamma=gamma)
    res = search_budget(ds.mdp, float(budget), gamma=gamma, max_solves=max_solves)

    def table(sol):
        f = policy_frame(ds, sol)
        return {key_of[int(s)]: int(a) for s, a in zip(f["state_id"], f["action"])}

    more = table(res.more_help) if res.more_help is not None else None
    info = {
        "budget": float(budget),
        "model_success": float(res.expected_success),
        "model_usage": float(res.expected_usage),
        "states": int((~ds.states["terminal"]).sum()),
        "r": float(res.r),
        "gamma": float(gamma),
    }
    return KeyTablePolicy(
        rung,
        table(res.policy),
        more,
        res.weight_more_help or 0.0,
        age_cap=age_cap,
        seed=seed,
        name=f"dp on ({rung}), budget {budget:g}",
        info=info,
    )
