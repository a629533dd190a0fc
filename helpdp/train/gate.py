"""The help gate of GRPO rollouts: a :class:`~helpdp.policies.HelpPolicy`, its caps,
the expert/solo split of each group, and the log of every decision.

* :func:`build_policy`: the policy of a :class:`~helpdp.train.config.GateConfig`
  (always, never, random, turn_zero, after_failure, the DP's table, the trained helper).
* :class:`Gate`: a HelpPolicy that wraps it for one rollout batch: solo rollouts
  never get help, an expert rollout gets it where the policy says, within
  ``max_per_episode`` and ``max_per_batch`` calls. A policy that raises counts as
  nohelp and its error is kept.
* :class:`SplitSchedule`: how many rollouts of each group are expert rollouts:
  the reference recipe's adaptive split from the recent format-error rate, a fixed split, or
  none (``budget``: every rollout is gated by the policy). Phase changes are kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from helpdp.policies import HelpPolicy, StateView, safe_decide
from helpdp.policies import build_policy as registry_policy
from helpdp.train.config import GateConfig, SplitScheduleConfig

__all__ = ["Gate", "SplitSchedule", "build_policy"]


def build_policy(cfg: GateConfig) -> HelpPolicy:
    """The HelpPolicy named by ``cfg.policy`` (see GateConfig): ``random`` (at ``cfg.p``),
    ``table`` (the search output at ``cfg.path``), ``helper`` (the helper at ``cfg.path``)
    or any spec of :func:`helpdp.policies.build_policy` (``turn0+after:repeat``, ..., or a
    ``selected.json`` of ``helpdp.select``)."""
    kind = cfg.policy
    if kind == "helper":
        from helpdp.helper.policy import HelperPolicy  # imports torch

        return HelperPolicy(cfg.path, budget=cfg.budget)
    spec = {"random": f"random:{float(cfg.p)}", "table": cfg.path}.get(kind, kind)
    from helpdp.select import load_policy  # a selected.json (event rules as their spec)

    try:
        return registry_policy(spec, seed=int(cfg.seed), load_json=load_policy)
    except ValueError as e:
        raise ValueError(f"gate.policy: {e}") from None


@dataclass
class Gate:
    """The HelpPolicy the rollout's episodes consult (one per rollout batch).

    ``expert``: episode id -> may this rollout use the expert. Decisions past a cap
    are nohelp; ``calls`` counts the granted ones per episode.

    >>> from helpdp.policies import Always
    >>> g = Gate(Always(), {1: True, 2: False}, max_per_episode=1)
    >>> v = lambda e, t: StateView(0, "w/0", t, "", episode_id=e)
    >>> [int(a) for a in g.decide([v(1, 0), v(2, 0)])], [int(a) for a in g.decide([v(1, 1)])]
    ([1, 0], [0])
    """

    policy: HelpPolicy
    expert: dict[int, bool]
    max_per_episode: int | None = None
    max_per_batch: int | None = None
    name: str = "gate"
    calls: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def batch_calls(self) -> int:
        return sum(self.calls.values())

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        out = np.zeros(len(views), np.int8)
        idx = [i for i, v in enumerate(views) if self.expert.get(v.episode_id, False)]
        if not idx:
            return out
        actions, error = safe_decide(self.policy, [views[i] for i in idx])
        if error is not None:
            self.errors.append(error)
            raise RuntimeError(error)  # the runner counts it and takes nohelp
        for i, a in zip(idx, actions):
            e = views[i].episode_id
            if a <= 0:
                continue
            if self.max_per_episode is not None and self.calls.get(e, 0) >= self.max_per_episode:
                continue
            if self.max_per_batch is not None and self.batch_calls >= self.max_per_batch:
                continue
            self.calls[e] = self.calls.get(e, 0) + 1
            out[i] = a
        return out


def _scaled(n: int, group: int, reference: int) -> int:
    return max(0, min(group, int(round(n * group / reference))))


@dataclass
class SplitSchedule:
    """Expert rollouts per group, and the phase it is in.

    >>> s = SplitSchedule(kind="adaptive", window=4)
    >>> s.n_expert(8), s.phase
    (6, 'expert_heavy')
    >>> s.observe([True, False, False, False]); s.n_expert(8), s.phase
    (2, 'solo_heavy')
    >>> s.transitions
    [(0, 'expert_heavy', 'solo_heavy', 0.25)]
    """

    kind: str = "adaptive"
    high: float = 0.7
    low: float = 0.4
    expert_high: int = 6
    expert_mid: int = 4
    expert_low: int = 2
    reference_group: int = 8
    n_fixed: int = 4
    window: int = 64
    initial_rate: float = 1.0
    step: int = 0
    transitions: list[tuple[int, str, str, float]] = field(default_factory=list)
    recent: deque = field(default_factory=deque)

    @classmethod
    def from_config(cls, cfg: SplitScheduleConfig) -> SplitSchedule:
        if cfg.kind not in ("adaptive", "fixed", "budget"):
            raise ValueError(f"split.kind must be adaptive|fixed|budget, got {cfg.kind!r}")
        if not 0 <= cfg.low <= cfg.high <= 1:
            raise ValueError("split: need 0 <= low <= high <= 1")
        return cls(
            cfg.kind,
            cfg.high,
            cfg.low,
            cfg.expert_high,
            cfg.expert_mid,
            cfg.expert_low,
            cfg.reference_group,
            cfg.n_expert,
            cfg.window,
            cfg.initial_rate,
        )

    @property
    def rate(self) -> float:
        """The format-error rate: share of the recent episodes with a format error."""
        return float(np.mean(self.recent)) if self.recent else float(self.initial_rate)

    @property
    def phase(self) -> str:
        if self.kind != "adaptive":
            return self.kind
        r = self.rate
        return "expert_heavy" if r > self.high else "solo_heavy" if r < self.low else "balanced"

    def n_expert(self, group: int) -> int:
        """Expert rollouts in a group of ``group`` (all of them for ``budget``)."""
        if self.kind == "budget":
            return group
        if self.kind == "fixed":
            return _scaled(self.n_fixed, group, self.reference_group)
        n = {"expert_heavy": self.expert_high, "balanced": self.expert_mid}.get(
            self.phase, self.expert_low
        )
        return _scaled(n, group, self.reference_group)

    def observe(self, format_errors: Sequence[bool]) -> None:
        """Record a batch's episodes (had a format error or not); logs a phase change."""
        before = self.phase
        for f in format_errors:
            self.recent.append(bool(f))
            while len(self.recent) > self.window:
                self.recent.popleft()
        after = self.phase
        if after != before:
            self.transitions.append((self.step, before, after, round(self.rate, 6)))
        self.step += 1
