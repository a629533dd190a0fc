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
* event rules (:class:`TurnZeroThen`): help at turn 0, then after a repeated call, a
  loop, a failed call, an unknown tool, a long context (``helpdp.events``), within a
  per-episode call budget; :class:`TriggerRandomised`, a base policy whose decision is
  randomised (help with probability q) only at trigger states: the stage-2
  collection design (``python -m collect stage2.base=... stage2.events=[...] stage2.q=...``);
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

:func:`build_policy` is the one home of policies by name (the GRPO gate, the
evaluation, the collector and the selection build them through it): ``never``,
``always``, ``turn0``, ``turns:0,2``, ``after:failure``, ``turn0+after:failure``,
``turn0+after:repeat,failed+max:2`` (events of ``helpdp.events.EVENTS``,
``turn:K``, ``context:N``), ``random:0.3``, ``random_episodes:0.3``, a dict (``kind``
``never | always | rule | turn0_then | random | triggers``), or a path: a
``python -m helpdp.search`` output, or a ``selected.json`` (read by ``load_json``:
``helpdp.select.load_policy``, which sits above this module). :func:`policy_spec` is
its inverse: the spec that rebuilds a registry policy (what ``selected.json`` stores).
Each kind is registered once, on its class (``@register``, ``helpdp.policy_registry``):
its spec strings, dict, printed spec and evaluation family; a new policy is one class
and its registration here, in the order its grammar is tried.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from helpdp.events import check_events, count_fired, event_fires
from helpdp.policy_registry import (
    name_family,
    parse_dict,
    parse_name,
    policy_family,
    print_spec,
    register,
    spec_forms,
)

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
    "TriggerRandomised",
    "TurnZeroOrAfterFailure",
    "TurnZeroThen",
    "action_probs",
    "build_policy",
    "components",
    "name_family",
    "policy_family",
    "policy_spec",
    "register",
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
    the latest help (the coarse keys of ``helpdp.rekey`` read it). What happened in
    the last turn (``helpdp.events``): ``last_class`` the previous turn's class
    (``working | failed | unknown_tool | format_error``; None at turn 0),
    ``repeats`` the run of identical calls it ended (1: it repeated the call before
    it; >= 2: a loop), ``context_tokens`` the conversation's length in tokens up to
    the previous reply (its prompt + completion tokens; None at turn 0 or when not
    logged), ``calls`` the expert calls of the episode so far; ``past`` the
    ``(last_class, repeats, context_tokens)`` of each earlier state of the episode
    (state ``j`` at position ``j``, so ``len(past) == depth`` where it is filled:
    ``helpdp.events.state_histories``), what a policy that counts earlier trigger
    states reads (:class:`TriggerRandomised`'s ``max_randomised``).
    """

    state_id: int
    task_id: str
    depth: int
    text: str
    episode_id: int = 0
    last_failure: str | None = None
    errors: int = 0
    last_help: int = -1
    last_class: str | None = None
    repeats: int = 0
    context_tokens: int | None = None
    calls: int = 0
    past: tuple = ()


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


def _num(text: str, spec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"policy {spec!r}: {text!r} is not a number") from None


@register(
    family="baseline",
    forms="never",
    parse=lambda s, seed, action: Never() if s == "never" else None,
    kind="never",
    from_dict=lambda d, seed, action, load_json: build_policy("never", seed=seed, action=action),
    spec=lambda p: "never",
    display=r"never\Z",
)
@dataclass(frozen=True)
class Never:
    name: str = "never"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return np.zeros(len(views), np.int8)


@register(
    family="baseline",
    forms="always",
    parse=lambda s, seed, action: Always(action) if s == "always" else None,
    kind="always",
    from_dict=lambda d, seed, action, load_json: build_policy("always", seed=seed, action=action),
    spec=lambda p: "always",
    display=r"always\Z",
)
@dataclass(frozen=True)
class Always:
    action: int = 1
    name: str = "always"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return np.full(len(views), self.action, np.int8)


@register(
    family="rule",
    forms="turn0",
    parse=lambda s, seed, action: TurnZero(action) if s in ("turn0", "turn_zero") else None,
    spec=lambda p: "turn0",
    display="rule: ",
)
@dataclass(frozen=True)
class TurnZero:
    """Hand-written rule: help before the first turn only."""

    action: int = 1
    name: str = "rule: turn 0"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if v.depth == 0 else 0 for v in views])


def _parse_turns(s: str, seed: int, action: int) -> AtTurns | None:
    head, _, arg = s.partition(":")
    if head == "turns" and arg:
        return AtTurns(tuple(int(_num(x, s)) for x in arg.split(",")), action)
    return None


@register(
    family="rule",
    forms="turns:0,2",
    parse=_parse_turns,
    kind="rule",
    from_dict=lambda d, seed, action, load_json: AtTurns(
        tuple(d["turns"]), action, name=d.get("name", "")
    ),
    spec=lambda p: "turns:" + ",".join(map(str, p.turns)),
    display="rule: ",
    subclasses=True,
)
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


@register(
    family="rule",
    forms="after:failure",
    parse=lambda s, seed, action: (
        AfterFailure(action) if s in ("after:failure", "after_failure") else None
    ),
    spec=lambda p: "after:failure",
    display="rule: ",
)
@dataclass(frozen=True)
class AfterFailure:
    """Hand-written rule: help after every failed turn."""

    action: int = 1
    name: str = "rule: after failure"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if v.last_failure else 0 for v in views])


@register(
    family="rule",  # its form is one of turn0+after:EVENTS's, listed there
    parse=lambda s, seed, action: (
        TurnZeroOrAfterFailure(action) if s == "turn0+after:failure" else None
    ),
    spec=lambda p: "turn0+after:failure",
    display="rule: ",
)
@dataclass(frozen=True)
class TurnZeroOrAfterFailure:
    """Hand-written rule: help at turn 0 and after every failed turn."""

    action: int = 1
    name: str = "rule: turn 0 + after failure"

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        return _actions([self.action if v.depth == 0 or v.last_failure else 0 for v in views])


def _fires(events: tuple[str, ...], v: StateView) -> bool:
    return any(
        event_fires(
            e,
            depth=v.depth,
            last_class=v.last_class,
            repeats=v.repeats,
            context_tokens=v.context_tokens,
        )
        for e in events
    )


def _parse_turn0_then(s: str, seed: int, action: int) -> TurnZeroThen | None:
    """``[turn0+]after:EVENTS[+max:N]`` (after the kinds that own ``after:failure``
    and ``turn0+after:failure``)."""
    parts = s.split("+")
    if parts[0] in ("turn0", "") or parts[0].startswith("after:"):
        turn0 = parts[0] == "turn0"
        rest = parts[1:] if turn0 else parts
        events, cap = None, None
        for p in rest:
            k, _, v = p.partition(":")
            if k == "after" and v and events is None:
                events = tuple(v.split(","))
            elif k == "max" and v and cap is None:
                cap = int(_num(v, s))
            else:
                return None
        if events:
            return TurnZeroThen(events, cap, turn0, action)
    return None


def _turn0_then_spec(p: TurnZeroThen) -> str:
    head = ["turn0"] if p.turn0 else []
    cap = [f"max:{int(p.max_calls)}"] if p.max_calls is not None else []
    return "+".join([*head, "after:" + ",".join(p.events), *cap])


@register(
    family="rule",
    forms="turn0+after:EVENTS[+max:N]",
    parse=_parse_turn0_then,
    kind="turn0_then",
    from_dict=lambda d, seed, action, load_json: TurnZeroThen(
        tuple(d["events"]),
        d.get("max_calls"),
        bool(d.get("turn0", True)),
        action,
        name=d.get("name", ""),
    ),
    spec=_turn0_then_spec,
    display="rule: ",
    subclasses=True,
)
@dataclass(frozen=True)
class TurnZeroThen:
    """Event rule: help at turn 0 (``turn0``), then at every state where one of
    ``events`` fires (``helpdp.events.event_fires``: ``repeat``, ``loop``, ``failed``,
    ``unknown_tool``, ``format_error``, ``turn:K``, ``context:N``), while the episode
    has made fewer than ``max_calls`` expert calls (None: no budget)."""

    events: tuple[str, ...] = ("repeat",)
    max_calls: int | None = None
    turn0: bool = True
    action: int = 1
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "events", check_events(self.events))
        if self.max_calls is not None and int(self.max_calls) < 1:
            raise ValueError(f"TurnZeroThen: max_calls must be >= 1 or None, got {self.max_calls}")
        if not self.name:
            head = "turn 0 + " if self.turn0 else ""
            cap = f" (max {self.max_calls})" if self.max_calls is not None else ""
            object.__setattr__(self, "name", f"rule: {head}after {','.join(self.events)}{cap}")

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        out = []
        for v in views:
            want = (self.turn0 and v.depth == 0) or _fires(self.events, v)
            ok = self.max_calls is None or v.calls < self.max_calls
            out.append(self.action if want and ok else 0)
        return _actions(out)


def _parse_random(cls, head: str, s: str, seed: int, action: int):
    """``HEAD:P``: a :class:`RandomStates` or :class:`RandomEpisodes` with share ``P``."""
    h, _, arg = s.partition(":")
    return cls(_num(arg, s), seed=seed, action=action) if h == head and arg else None


@register(
    family="random",
    forms="random:P",
    parse=lambda s, seed, action: _parse_random(RandomStates, "random", s, seed, action),
    kind="random",
    from_dict=lambda d, seed, action, load_json: RandomStates(
        float(d["p"]), seed=seed, action=action
    ),
    spec=lambda p: f"random:{float(p.p)!r}",
    display="random p=",
)
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


@register(
    family="candidate",
    forms="random_episodes:P",
    parse=lambda s, seed, action: _parse_random(RandomEpisodes, "random_episodes", s, seed, action),
    spec=lambda p: f"random_episodes:{float(p.p)!r}",
    display="random episodes p=",
)
@dataclass(frozen=True)
class RandomEpisodes(RandomStates):
    """Help at every turn of a random share ``p`` of the episodes ("task-wise" random)."""

    label = "random episodes p={p:g}"

    def draw(self, v: StateView) -> float:
        return uniform(self.seed, "episode", v.episode_id)

    action_probs = None  # randomises per episode: components()

    def components(self) -> list[tuple[float, HelpPolicy]]:
        return [(1.0 - self.p, Never()), (self.p, Always(self.action))]


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
            table("policy.parquet"),
            more,
            weight,
            fallback=fallback,
            seed=seed,
            search=search,
            name=label,
        )

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


def _triggers_from_dict(d: dict, seed: int, action: int, load_json) -> TriggerRandomised:
    base = build_policy(d["base"], seed=seed, action=action, load_json=load_json)
    return TriggerRandomised(
        base,
        d["events"],
        float(d["q"]),
        seed=seed,
        action=action,
        max_randomised=d.get("max_randomised"),
        name=d.get("name", ""),
    )


@register(  # no display: its names begin with its base's (how the evaluation reads them)
    family="candidate",
    kind="triggers",
    from_dict=_triggers_from_dict,
    spec=lambda p: p.spec() if p.base_spec is not None else None,
    subclasses=True,
)
class TriggerRandomised:
    """The stage-2 collection design: ``base``'s decision everywhere except at trigger
    states (one of ``events`` fires, as in :class:`TurnZeroThen`), where the expert
    is called with probability ``q``, drawn from ``uniform(seed, "trigger", episode,
    turn)``. With ``max_randomised`` = K only the first K trigger states of an episode
    are randomised (fewer than K earlier states of the episode where the events fired,
    counted from ``StateView.past``); from the (K+1)-th on the base decides, so a
    candidate's importance weight is at most ``1 / min(q, 1 - q)^K``. None: every
    trigger state. :meth:`action_probs` is the behaviour's probability of each action
    (what off-policy evaluation weights by); ``base`` must decide per state (no
    per-episode mixture). ``base`` is a policy or a :func:`build_policy` spec (needed
    for :meth:`spec`, what a collection records as its design)."""

    def __init__(
        self,
        base,
        events,
        q: float,
        *,
        seed: int = 0,
        action: int = 1,
        max_randomised: int | None = None,
        name: str = "",
    ):
        if not 0.0 <= float(q) <= 1.0:
            raise ValueError(f"TriggerRandomised: q must lie in [0, 1], got {q}")
        k = max_randomised
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"TriggerRandomised: max_randomised must be >= 1 or None, got {k!r}")
        self.base_spec = base if isinstance(base, (str, dict)) else getattr(base, "spec_name", None)
        if isinstance(base, (str, dict)):
            base = build_policy(base, seed=seed, action=action)
        if len(components(base)) != 1:
            raise ValueError(f"TriggerRandomised: base {base.name!r} mixes per episode")
        self.base, self.events, self.q = base, check_events(events), float(q)
        self.seed, self.action, self.max_randomised = int(seed), int(action), k
        first = f" (first {k})" if k is not None else ""
        self.name = name or f"{base.name}; q={self.q:g} at {','.join(self.events)}{first}"

    def spec(self) -> dict:
        """The design as :func:`build_policy` reads it back (``base`` by its name;
        ``max_randomised`` only when set, so a spec without it is K = None)."""
        if self.base_spec is None:
            raise ValueError(f"{self.name}: the base was not built from a spec (build_policy)")
        out = {
            "kind": "triggers",
            "base": self.base_spec,
            "events": list(self.events),
            "q": self.q,
            "seed": self.seed,
        }
        if self.max_randomised is not None:
            out["max_randomised"] = self.max_randomised
        return out

    def at_trigger(self, views: Sequence[StateView]) -> np.ndarray:
        return np.array([_fires(self.events, v) for v in views], bool)

    def randomised(self, views: Sequence[StateView]) -> np.ndarray:
        """Where the decision is drawn: the trigger states, with ``max_randomised`` only
        those with fewer earlier trigger states in the episode (a view whose ``past``
        does not cover its turns is a ``ValueError``: the count would be wrong)."""
        trig = self.at_trigger(views)
        k = self.max_randomised
        if k is None:
            return trig
        for i, v in enumerate(views):
            if trig[i]:
                if len(v.past) != v.depth:
                    raise ValueError(
                        f"{self.name}: the view at turn {v.depth} of episode {v.episode_id} "
                        f"carries {len(v.past)} earlier states (StateView.past)"
                    )
                trig[i] = count_fired(self.events, v.past) < k
        return trig

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        base = _actions(self.base.decide(views)) if views else np.zeros(0, np.int8)
        rand = self.randomised(views)
        draw = [uniform(self.seed, "trigger", v.episode_id, v.depth) < self.q for v in views]
        return np.where(rand, np.where(draw, self.action, 0), base).astype(np.int8)

    def action_probs(self, views: Sequence[StateView], n_actions: int) -> np.ndarray:
        out = action_probs(self.base, views, n_actions)
        rand = self.randomised(views)
        out[rand] = 0.0
        out[rand, 0] = 1.0 - self.q
        out[rand, self.action] += self.q
        return out


def policy_spec(policy) -> str | dict | None:
    """The :func:`build_policy` spec that rebuilds ``policy`` (with its ``seed`` and
    ``action``, which the spec does not carry): the name it was built from where it was
    built by name, else what its kind prints (``helpdp.policy_registry``: the canonical
    name, ``turn0+after:repeat+max:2``, ``turns:0,2``, ``random:0.3``, ..., or a stage-2
    design's dict); None for a policy the registry cannot name (a table, a score
    threshold, a helper)."""
    name = getattr(policy, "spec_name", None)
    if isinstance(name, str) and parse_name(name, 0, 1) is not None:  # not a path
        return name
    return print_spec(policy)


def build_policy(spec, *, seed: int = 0, action: int = 1, load_json=None) -> HelpPolicy:
    """The policy a spec names (module docstring): a name, a dict or a path.

    ``load_json(path, seed=...)`` reads a ``selected.json`` (``helpdp.select.load_policy``);
    without it such a path is refused. An unknown spec is one ``ValueError`` naming it.
    """
    if isinstance(spec, dict):
        pol = parse_dict(dict(spec), seed, action, load_json)
    elif isinstance(spec, (str, Path)):
        pol = parse_name(str(spec), seed, action) if isinstance(spec, str) else None
        if pol is None:
            p = Path(spec)
            if (p / "search.json").is_file():
                pol = TablePolicy.load(p, seed=seed)
            elif p.suffix == ".json" and p.is_file() or (p / "selected.json").is_file():
                if load_json is None:
                    raise ValueError(f"policy {spec!r}: a selected.json needs load_json")
                pol = load_json(p, seed=seed)
            else:
                raise ValueError(
                    f"policy {str(spec)!r}: not a policy name ({', '.join(spec_forms())}), "
                    "a python -m helpdp.search output nor a selected.json"
                )
    else:
        raise ValueError(f"policy: a name, a dict or a path, got {spec!r}")
    if isinstance(spec, str) and not isinstance(pol, TablePolicy):
        try:
            pol.spec_name = str(spec)  # what TriggerRandomised.spec() writes back
        except AttributeError:
            object.__setattr__(pol, "spec_name", str(spec))
    return pol
