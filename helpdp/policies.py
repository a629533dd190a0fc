"""Help policies: one interface for every way of deciding whether to call the expert.

A help policy looks at a batch of :class:`StateView` (what it may see at a decision:
the state's id and rendered text, the task, the turn, how the last turn went) and
returns one action per view: ``0`` = nohelp, ``k >= 1`` = intervention ``k``
(int8). The collector's ``policy=`` evaluation, ``python -m helpdp.evaluate`` and the
GRPO trainer call the same :meth:`HelpPolicy.decide`.

Every policy here is a pure function of the views and its own parameters: random
draws are hashes of ``(seed, episode_id, turn)``, never a shared generator, so the
decisions of one episode do not depend on which other episodes ran, and runs with
the same seeds are paired (common random numbers).

* :class:`Never`, :class:`Always`;
* :class:`RandomStates` (help at each state with probability p), :class:`RandomEpisodes`
  (help at every turn of a random share p of the episodes);
* the hand-written rules :class:`TurnZero`, :class:`AfterFailure` and their union;
* :class:`TablePolicy`: the DP's pi* from a ``helpdp.search`` output, a mixture drawn
  per episode, with an explicit ``fallback`` policy for states the DP never saw;
* :class:`ScorePolicy`: a threshold on any per-state score (a PRM's predicted gain
  from help, a helper's help score);
* ``helpdp.helper.HelperPolicy``: the trained helper (it imports torch, so it lives
  there);
* ``prm.policy``: a text PRM's scores on unseen states as a :class:`ScorePolicy`
  (state-wise, top q of validation states), task-wise PRM help, and the PRM as
  :class:`TablePolicy`'s fallback.

:func:`safe_decide` runs a policy so that an exception falls back to nohelp and is
counted instead of ending an episode.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "AfterFailure",
    "Always",
    "AtTurns",
    "HelpPolicy",
    "Never",
    "RandomEpisodes",
    "RandomStates",
    "ScorePolicy",
    "StateView",
    "TablePolicy",
    "TurnZero",
    "TurnZeroOrAfterFailure",
    "action_probs",
    "components",
    "safe_decide",
    "uniform",
]


@dataclass(frozen=True)
class StateView:
    """What a help policy may look at in a state (before the actor's turn).

    ``depth`` is the turn index (0 at the start); ``last_failure`` the failure class
    of the previous turn (``None``: it succeeded, or this is the first turn);
    ``errors`` the failed turns so far; ``episode_id`` identifies the episode (the
    same across policies run on the same seeds); ``last_help`` the turn of the latest
    expert call of the episode (-1: none yet), so ``depth - last_help`` is the age of
    the latest help (the coarse keys of ``helpdp.rekey`` read it).
    """

    state_id: int
    task_id: str
    depth: int
    text: str
    episode_id: int = 0
    last_failure: str | None = None
    errors: int = 0
    last_help: int = -1


@runtime_checkable
class HelpPolicy(Protocol):
    """``decide(views) -> actions`` (int8, one per view).

    Off-policy evaluation (``helpdp.ope``) also reads two optional methods:
    ``action_probs(views, n_actions) -> (n, n_actions)``, the probability of each
    action where the policy randomises per decision (default: ``decide``'s action
    with probability 1), and ``components() -> [(weight, policy)]``, where it
    randomises once per episode between deterministic policies (a DP mixture,
    random episode-wise help).
    """

    name: str

    def decide(self, views: Sequence[StateView]) -> np.ndarray: ...


def action_probs(policy, views: Sequence[StateView], n_actions: int) -> np.ndarray:
    """``(n, n_actions)``: the policy's probability of each action at each view
    (its ``action_probs`` if it has one, else its ``decide`` as a one-hot)."""
    f = getattr(policy, "action_probs", None)
    if f is not None:
        out = np.asarray(f(views, n_actions), np.float64)
    else:
        a = _actions(policy.decide(views)).astype(np.int64)
        if a.shape != (len(views),) or (a < 0).any() or (a >= n_actions).any():
            raise ValueError(f"{policy.name}: decide returned {a!r} for {len(views)} views")
        out = np.zeros((len(views), n_actions))
        out[np.arange(len(views)), a] = 1.0
    if out.shape != (len(views), n_actions):
        raise ValueError(f"{policy.name}: action_probs has shape {out.shape}")
    return out


def components(policy) -> list[tuple[float, HelpPolicy]]:
    """The per-episode mixture a policy draws from (``[(1, policy)]`` by default)."""
    f = getattr(policy, "components", None)
    return list(f()) if f is not None else [(1.0, policy)]


def uniform(seed: int, *keys: int | str) -> np.ndarray | float:
    """A uniform in [0, 1) that is a pure function of ``(seed, *keys)`` (sha256)."""
    h = hashlib.sha256(json.dumps([int(seed), *keys], default=str).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def _actions(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int8).reshape(-1)


def safe_decide(policy: HelpPolicy, views: Sequence[StateView]) -> tuple[np.ndarray, str | None]:
    """``policy.decide(views)``, or nohelp for all with the error's text when it fails
    (an exception, or a reply of the wrong shape or with negative actions)."""
    try:
        out = _actions(policy.decide(views))
        if out.shape != (len(views),) or (out < 0).any():
            raise ValueError(f"decide returned {out!r} for {len(views)} views")
        return out, None
    except Exception as e:  # noqa: BLE001 - a failing policy must not end episodes
        return np.zeros(len(views), np.int8), f"{type(e).__name__}: {e}"[:500]


@dataclass(frozen=True)
class Never:
    name: str = "never"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return np.zeros(len(views), np.int8)


@dataclass(frozen=True)
class Always:
    action: int = 1
    name: str = "always"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return np.full(len(views), self.action, np.int8)


@dataclass(frozen=True)
class RandomStates:
    """Help at each state independently with probability ``p`` (the paper's random help)."""

    p: float
    seed: int = 0
    action: int = 1
    name: str = ""
    label = "random p={p:g}"

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", self.label.format(p=self.p))

    def draw(self, v: StateView) -> float:
        return uniform(self.seed, "state", v.episode_id, v.depth)

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if self.draw(v) < self.p else 0 for v in views])

    def action_probs(self, views: Sequence[StateView], n_actions: int) -> np.ndarray:
        out = np.zeros((len(views), n_actions))
        out[:, 0] = 1.0 - self.p
        out[:, self.action] += self.p
        return out


@dataclass(frozen=True)
class RandomEpisodes(RandomStates):
    """Help at every turn of a random share ``p`` of the episodes ("task-wise" random)."""

    label = "random episodes p={p:g}"

    def draw(self, v: StateView) -> float:
        return uniform(self.seed, "episode", v.episode_id)

    action_probs = None  # randomises per episode: components()

    def components(self) -> list[tuple[float, HelpPolicy]]:
        return [(1.0 - self.p, Never()), (self.p, Always(self.action))]


@dataclass(frozen=True)
class TurnZero:
    """Hand-written rule: help before the first turn only."""

    action: int = 1
    name: str = "rule: turn 0"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if v.depth == 0 else 0 for v in views])


@dataclass(frozen=True)
class AtTurns:
    """Hand-written rule: help at exactly the listed turns (``(0,)`` is :class:`TurnZero`).

    Single turns map where a call pays (``(1,)``, ``(2,)``, ...); pairs such as
    ``(0, 3)`` measure what a second call is worth after the first.
    """

    turns: tuple[int, ...]
    action: int = 1
    name: str = ""

    def __post_init__(self):
        turns = tuple(sorted({int(t) for t in self.turns}))
        if not turns or turns[0] < 0:
            raise ValueError(
                f"AtTurns: turns must be a non-empty list of turns >= 0, got {self.turns!r}"
            )
        object.__setattr__(self, "turns", turns)
        if not self.name:
            object.__setattr__(self, "name", "rule: turns " + ",".join(map(str, turns)))

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if v.depth in self.turns else 0 for v in views])


@dataclass(frozen=True)
class AfterFailure:
    """Hand-written rule: help after every failed turn."""

    action: int = 1
    name: str = "rule: after failure"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if v.last_failure else 0 for v in views])


@dataclass(frozen=True)
class TurnZeroOrAfterFailure:
    """Hand-written rule: help at turn 0 and after every failed turn."""

    action: int = 1
    name: str = "rule: turn 0 + after failure"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if v.depth == 0 or v.last_failure else 0 for v in views])


class TablePolicy:
    """The DP's pi* from a ``python -m helpdp.search`` output directory.

    A mixture (``search.json`` ``mixture``) is drawn once per episode: the more-help
    policy with probability ``weight_more_help``. States without a row (never seen
    in the data the DP was solved on) get ``fallback``'s decision (default
    :class:`Never`); :meth:`coverage` says how many decisions that was.
    """

    def __init__(
        self,
        less_help: dict[int, int],
        more_help: dict[int, int] | None = None,
        weight_more_help: float = 0.0,
        *,
        fallback: HelpPolicy | None = None,
        seed: int = 0,
        search: dict | None = None,
        name: str = "dp table",
    ):
        self.less_help = less_help
        self.more_help = more_help
        self.weight_more_help = float(weight_more_help)
        self.fallback = fallback or Never()
        self.seed = seed
        self.search = search or {}
        self.name = name
        self.known_decisions = 0
        self.fallback_decisions = 0

    @classmethod
    def load(cls, path, *, fallback: HelpPolicy | None = None, seed: int = 0, name: str = ""):
        """The policy of a search output directory (``search.json``, ``policy*.parquet``)."""
        import pandas as pd

        path = Path(path)
        try:
            search = json.loads((path / "search.json").read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path}: no search.json; pass the out= directory of `python -m helpdp.search`"
            ) from None

        def table(file: str) -> dict[int, int]:
            df = pd.read_parquet(path / file, columns=["state_id", "action"])
            return dict(zip(df["state_id"].tolist(), df["action"].astype(int).tolist()))

        mix = search.get("mixture")
        more = table("policy_more_help.parquet") if mix else None
        weight = float(mix["weight_more_help"]) if mix else 0.0
        label = name or f"dp table (budget {search.get('budget')})"
        return cls(
            table("policy.parquet"), more, weight, fallback=fallback, seed=seed, search=search,
            name=label,
        )  # fmt: skip

    def known(self) -> set[int]:
        """The states the policy has a decision for."""
        return set(self.less_help) | set(self.more_help or ())

    def table_for(self, episode_id: int) -> dict[int, int]:
        """The deterministic table episode ``episode_id`` follows."""
        if self.more_help is not None:
            if uniform(self.seed, "mixture", episode_id) < self.weight_more_help:
                return self.more_help
        return self.less_help

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        out = np.zeros(len(views), np.int8)
        unknown = []
        for i, v in enumerate(views):
            a = self.table_for(v.episode_id).get(v.state_id)
            if a is None:
                unknown.append(i)
            else:
                out[i] = a
        self.known_decisions += len(views) - len(unknown)
        self.fallback_decisions += len(unknown)
        if unknown:
            out[unknown] = _actions(self.fallback.decide([views[i] for i in unknown]))
        return out

    def components(self) -> list[tuple[float, HelpPolicy]]:
        """The two deterministic tables of the mixture (one when not mixed)."""
        if self.more_help is None or self.weight_more_help <= 0.0:
            return [(1.0, self)]
        w = self.weight_more_help
        less = TablePolicy(self.less_help, fallback=self.fallback, name=self.name + " (less)")
        more = TablePolicy(self.more_help, fallback=self.fallback, name=self.name + " (more)")
        return [(1.0 - w, less), (w, more)]

    def coverage(self) -> float:
        """Share of the decisions so far that the table knew."""
        n = self.known_decisions + self.fallback_decisions
        return self.known_decisions / n if n else float("nan")


class ScorePolicy:
    """Help iff ``score(views) > threshold`` (a per-state score: e.g. a PRM's
    p_help - p_nohelp, or a helper's help score).

    :meth:`calibrated` picks the threshold so that a share ``q`` of the given
    states gets help (the paper's PRM baselines at 10% and 30% of states).
    """

    def __init__(
        self,
        score: Callable[[Sequence[StateView]], np.ndarray],
        threshold: float,
        *,
        action: int = 1,
        name: str = "score",
    ):
        self.score = score
        self.threshold = float(threshold)
        self.action = action
        self.name = name

    @classmethod
    def calibrated(cls, score, views: Sequence[StateView], q: float, **kw) -> ScorePolicy:
        s = np.asarray(score(views), np.float64)
        if not len(s):
            raise ValueError("no states to calibrate the threshold on")
        return cls(score, float(np.quantile(s, 1.0 - q)), **kw)

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        if not views:
            return np.zeros(0, np.int8)
        s = np.asarray(self.score(views), np.float64)
        return np.where(s > self.threshold, self.action, 0).astype(np.int8)
