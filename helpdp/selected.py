"""The selected policy's file (``helpdp.select``'s ``selected.json``): a per-episode
mixture of policies, and the JSON that writes and reads every policy the selection can
choose (never, a rule, a key table, a mixture, a registry spec)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from helpdp.policies import (
    AtTurns,
    HelpPolicy,
    Never,
    StateView,
    build_policy,
    components,
    policy_spec,
    uniform,
)
from helpdp.rekey import KeyTablePolicy

__all__ = ["MixturePolicy", "load_policy", "policy_json"]


class MixturePolicy:
    """Per episode, one of ``parts`` (``[(weight, policy)]``) drawn with its weight."""

    def __init__(self, parts: Sequence[tuple[float, HelpPolicy]], *, seed: int = 0, name=""):
        w = np.asarray([p[0] for p in parts], np.float64)
        if len(parts) == 0 or (w < 0).any() or abs(w.sum() - 1.0) > 1e-9:
            raise ValueError(f"mixture weights must be >= 0 and sum to 1, got {w.tolist()}")
        self.parts = list(parts)
        self.seed = seed
        self.name = name or " | ".join(f"{x:.2f} {p.name}" for x, p in parts)

    def _pick(self, episode_id: int) -> int:
        u = uniform(self.seed, "select-mixture", episode_id)
        cum = np.cumsum([p[0] for p in self.parts])
        return int(min(np.searchsorted(cum, u, side="right"), len(self.parts) - 1))

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        out = np.zeros(len(views), np.int8)
        picks = np.asarray([self._pick(v.episode_id) for v in views], np.int64)
        for k in np.unique(picks):
            idx = np.flatnonzero(picks == k)
            out[idx] = np.asarray(self.parts[k][1].decide([views[i] for i in idx])).reshape(-1)
        return out

    def components(self) -> list[tuple[float, HelpPolicy]]:

        return [(w * cw, c) for w, p in self.parts for cw, c in components(p)]


def policy_json(policy) -> dict:
    """A policy that :func:`load_policy` reads back: never, a rule, a key table, a mixture,
    or any policy of the registry (``helpdp.policies.policy_spec``: its spec, seed and
    action; an event rule is ``{"kind": "spec", "spec": "turn0+after:repeat+max:2"}``)."""

    if isinstance(policy, Never):
        return {"kind": "never", "name": policy.name}
    if isinstance(policy, AtTurns):
        return {"kind": "rule", "turns": list(policy.turns), "name": policy.name}
    if isinstance(policy, KeyTablePolicy):
        return policy.to_json()
    if isinstance(policy, MixturePolicy):
        parts = [[float(w), policy_json(p)] for w, p in policy.parts]
        return {"kind": "mixture", "name": policy.name, "components": parts}
    spec = policy_spec(policy)
    if spec is not None:
        return {
            "kind": "spec",
            "spec": spec,
            "name": policy.name,
            "seed": int(getattr(policy, "seed", 0)),
            "action": int(getattr(policy, "action", 1)),
        }
    raise ValueError(f"cannot write policy {getattr(policy, 'name', policy)!r} as JSON")


def _from_json(d: dict, seed: int, where: str) -> HelpPolicy:

    kind = d.get("kind") if isinstance(d, dict) else None
    if kind == "never":
        return Never()
    if kind == "rule":
        return AtTurns(tuple(d["turns"]), name=d.get("name", ""))
    if kind == "key_table":
        return KeyTablePolicy.from_json(d, seed=seed, where=where)
    if kind == "mixture":
        parts = [(float(w), _from_json(p, seed, where)) for w, p in d["components"]]
        return MixturePolicy(parts, seed=seed, name=d.get("name", ""))
    if kind == "spec":
        try:
            return build_policy(
                d["spec"],
                seed=int(d.get("seed", seed)),
                action=int(d.get("action", 1)),
                load_json=load_policy,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: field 'spec': {type(e).__name__}: {e}") from None
    raise ValueError(
        f"{where}: field 'kind': {kind!r} is not never, rule, key_table, mixture or spec"
    )


def load_policy(path: str | Path, *, seed: int = 0, name: str = "") -> HelpPolicy:
    """The policy of ``helpdp.select``'s ``selected.json`` (a file, or its directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / "selected.json"
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no such file (the out= of python -m helpdp.select)"
        ) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(d, dict) or "policy" not in d:
        raise ValueError(f"{path}: no field 'policy' (not a helpdp.select output)")
    pol = _from_json(d["policy"], seed, str(path))
    b = d.get("budget")
    label = name or (f"selected (budget {b:g}): {pol.name}" if b is not None else pol.name)
    if dataclasses.is_dataclass(pol):
        return dataclasses.replace(pol, name=label)
    pol.name = label
    return pol
