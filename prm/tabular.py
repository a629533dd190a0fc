"""The tabular PRM: success rates from the counts, no model, no GPU.

For an observed (state s, action a) with ``n`` visits of which ``k`` ended in
success (Monte-Carlo counts, see ``prm.data``), the estimate is the posterior mean
under a Beta prior of strength ``alpha`` (``prior_strength``)::

    p(s, a) = (k + alpha * m(s, a)) / (n + alpha)

whose prior mean backs off to the DP's behaviour-policy value of the state::

    m(s, a) = (n(s) * V(s) + alpha * g(a, depth(s))) / (n(s) + alpha)

``V(s)`` is ``helpdp.state_success`` (success probability from ``s`` under the
data's own mix of actions, computed by dynamic programming over the transition
counts: on graphs where paths merge it pools the episodes of every successor, so
it rests on more data than the ``n`` visits of (s, a)), ``n(s)`` the visits of
``s`` over all actions. ``g(a, d)`` is the pooled success rate of action ``a`` at
depth ``d`` over the fitted tasks, itself shrunk toward the action's overall rate
``g(a)``: ``g(a, d) = (K(a, d) + alpha * g(a)) / (N(a, d) + alpha)``.

So a pair seen often keeps its own rate, a rare action at a common state borrows
from the state's value, and a rare state borrows from its depth. A state the PRM
never saw (another task, another dataset) gets ``g(a, depth)``: without text, the
tabular PRM cannot tell two unseen states of the same depth apart. That is why it
is the baseline a text PRM must beat on held-out tasks.

The table is keyed by ``state_id``, which only means something inside one
dataset: the PRM stores a fingerprint of the states table it was fitted on and
treats every state of a dataset with another fingerprint as unseen.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from helpdp import state_success
from prm.base import PRM, logit, read_meta
from prm.data import Examples, state_rows

log = logging.getLogger(__name__)


def states_fingerprint(ds) -> str:
    """sha256 of the states table's identity columns, in state_id order."""
    st = ds.states.sort_values("state_id", kind="stable")
    h = hashlib.sha256()
    h.update(st["state_id"].to_numpy(np.int64).tobytes())
    h.update(st["depth"].to_numpy(np.int64).tobytes())
    h.update(st["terminal"].to_numpy(bool).tobytes())
    for col in ("task_id", "text"):
        h.update(("\x1f".join(st[col].astype(str).tolist())).encode())
    return h.hexdigest()


class TabularPRM(PRM):
    kind = "tabular"

    def __init__(self, meta: dict, table: pd.DataFrame, state_prior: pd.DataFrame, rates: dict):
        super().__init__(meta)
        self.table = table  # state_id, action, n, k
        self.state_prior = state_prior  # state_id, n_state, value
        self.rates = rates  # {"action": [g(a)], "depth": {a: {d: g(a, d)}}}

    @property
    def alpha(self) -> float:
        return float(self.meta["config"]["prior_strength"])

    @classmethod
    def fit(
        cls, ds, examples: Examples, *, prior_strength: float = 2.0, meta: dict | None = None
    ) -> TabularPRM:
        """Fit on ``examples`` (usually ``examples.select(fit_splits)``) of ``ds``."""
        if prior_strength < 0:
            raise ValueError(f"prior_strength must be >= 0, got {prior_strength}")

        f = examples.frame
        n_actions = len(ds.actions)
        alpha = float(prior_strength)
        act = f["action"].to_numpy(np.int64)
        n = f["n"].to_numpy(np.float64)
        k = f["k"].to_numpy(np.float64)
        depth = f["depth"].to_numpy(np.int64)
        total_n, total_k = n.sum(), k.sum()
        overall = total_k / total_n if total_n > 0 else 0.5
        g_action, g_depth = [], {}
        for a in range(n_actions):
            m = act == a
            na, ka = n[m].sum(), k[m].sum()
            ga = (ka + alpha * overall) / (na + alpha) if na + alpha > 0 else overall
            g_action.append(float(ga))
            per = pd.DataFrame({"d": depth[m], "n": n[m], "k": k[m]}).groupby("d").sum()
            g_depth[str(a)] = {
                str(int(d)): float((row.k + alpha * ga) / (row.n + alpha))
                if row.n + alpha > 0
                else float(ga)
                for d, row in per.iterrows()
            }
        # the state-level back-off: V(s) from the DP, n(s) = visits over all actions
        value = state_success(ds)[ds.index(f["state_id"].to_numpy(np.int64))]
        sp = (
            pd.DataFrame(
                {"state_id": f["state_id"].to_numpy(np.int64), "n_state": n, "value": value}
            )
            .groupby("state_id", sort=True)
            .agg(n_state=("n_state", "sum"), value=("value", "first"))
            .reset_index()
        )
        table = f[["state_id", "action", "n", "k"]].copy()
        table["action"] = table["action"].astype(np.int8)
        meta = dict(meta or {})
        meta.setdefault("config", {})
        meta["config"] = {**meta["config"], "prior_strength": alpha}
        meta["fingerprint"] = states_fingerprint(ds)
        meta.setdefault("actions", list(ds.actions))
        rates = {"overall": float(overall), "action": g_action, "depth": g_depth}
        return cls(meta, table.reset_index(drop=True), sp, rates)

    # --- prediction -----------------------------------------------------------
    def backoff(self, actions: np.ndarray, depths: np.ndarray) -> np.ndarray:
        """g(a, depth): the estimate for a state never seen."""
        out = np.empty(len(actions))
        for i, (a, d) in enumerate(zip(actions.tolist(), depths.tolist(), strict=True)):
            per = self.rates["depth"].get(str(a), {})
            ga = self.rates["action"][a] if a < len(self.rates["action"]) else self.rates["overall"]
            out[i] = per.get(str(d), ga)
        return out

    def predict_proba(self, ds, state_ids, actions) -> np.ndarray:
        """p(success | s, a) without the logit round trip (no actor check: use ``predict``)."""
        state_ids = np.asarray(state_ids, np.int64)
        actions = np.asarray(actions, np.int64)
        rows = state_rows(ds, state_ids)
        depths = ds.states["depth"].to_numpy(np.int64)[rows]
        g = self.backoff(actions, depths)
        if states_fingerprint(ds) != self.meta.get("fingerprint"):
            log.warning(
                "dataset %s is not the one this tabular PRM was fitted on: every state is unseen",
                ds.path,
            )
            return g
        alpha = self.alpha
        sp = self.state_prior.set_index("state_id")
        ns = sp["n_state"].reindex(state_ids).to_numpy(np.float64)
        v = sp["value"].reindex(state_ids).to_numpy(np.float64)
        seen_state = ~np.isnan(ns)
        ns = np.where(seen_state, ns, 0.0)
        v = np.where(seen_state, v, 0.0)
        denom = ns + alpha
        m = np.where(denom > 0, (ns * v + alpha * g) / np.where(denom > 0, denom, 1.0), g)
        tab = self.table.set_index(["state_id", "action"])
        key = pd.MultiIndex.from_arrays([state_ids, actions.astype(np.int8)])
        n = tab["n"].reindex(key).to_numpy(np.float64)
        k = tab["k"].reindex(key).to_numpy(np.float64)
        n = np.where(np.isnan(n), 0.0, n)
        k = np.where(np.isnan(k), 0.0, k)
        denom = n + alpha
        p = np.where(denom > 0, (k + alpha * m) / np.where(denom > 0, denom, 1.0), m)
        return np.clip(p, 0.0, 1.0)

    def _predict_logits(self, ds, state_ids, actions, progress: bool = False):
        return logit(self.predict_proba(ds, state_ids, actions))

    def predict(
        self, ds, state_ids, actions, *, allow_other_actor: bool = False, progress: bool = False
    ) -> np.ndarray:
        # probabilities directly: no logit/sigmoid round trip at rates of exactly 0 or 1
        state_ids, actions = self._pairs(ds, state_ids, actions, allow_other_actor)
        if len(state_ids) == 0:
            return np.zeros(0)
        return self.predict_proba(ds, state_ids, actions)

    # --- persistence ----------------------------------------------------------
    def _save(self, out: Path) -> None:
        self.table.to_parquet(out / "table.parquet", index=False)
        self.state_prior.to_parquet(out / "state_prior.parquet", index=False)
        (out / "rates.json").write_text(json.dumps(self.rates, indent=2) + "\n")

    @classmethod
    def load(cls, path) -> TabularPRM:
        path = Path(path)
        meta = read_meta(path)
        table = pd.read_parquet(path / "table.parquet")
        state_prior = pd.read_parquet(path / "state_prior.parquet")
        rates = json.loads((path / "rates.json").read_text())
        return cls(meta, table, state_prior, rates)
