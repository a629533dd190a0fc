"""Off-policy evaluation of any help policy from the collected data (no new rollouts).

The collection's behaviour is known exactly: every episode records its trigger
probabilities (``episodes.parquet``: ``trigger_p`` / ``p_<name>``) and every step its
action (``steps.parquet``). So the success rate SR and the calls per episode U of any
policy with ``decide(views)`` (a DP table on any key, a rule, a threshold, the helper)
can be estimated by importance weighting. The behaviour is taken to be the whole
schedule as one mixture: each episode's probability is its average over the trigger
vectors its task was run with (the balance heuristic of multiple importance
sampling), which keeps the weights bounded where the schedule holds p = 0 and p = 1.
Per task (the design is per task), then averaged over tasks with equal weight (as
``helpdp.evaluate`` pairs (task, seed)):

* ``is``: trajectory importance sampling (unbiased);
* ``snis``: self-normalised IS (weighted IS: biased, consistent, bounded);
* ``pdis``: per-decision IS (each call weighted by the ratio up to its turn; for SR,
  whose reward comes at the end, it equals ``is``);
* ``dr``: doubly robust (Jiang & Li 2016) with a control variate Q = each action's known
  cost (a call counts 1 toward usage) + a continuation from a pooled tabular model
  (task, turn, age of the latest help, last turn failed; backed off to coarser keys),
  cross-fitted by seed parity: the model of one half of the seeds serves the other
  half, so it cannot absorb the noise it corrects;
* ``wdr``: weighted doubly robust (Thomas & Brunskill 2016), the per-turn
  self-normalised variant; the default of ``helpdp.select``, ``helpdp.evaluate`` and
  ``helpdp.forecast`` (narrower and steadier than ``dr`` where few episodes agree);
* ``dm``: the model's own (direct) estimate, biased, for comparison.

Intervals: percentile bootstrap, resampling episodes within (task, trigger vector)
strata (``unit="episode"``: the uncertainty of the estimate for these tasks) or whole
tasks (``unit="task"``: for a population of tasks). The model is not refitted per
replicate. Diagnostics per policy: the effective sample size of the trajectory
weights, the largest weight's share and the number of logged episodes the policy
agrees with (weight > 0).

The numeric kernels are in ``helpdp._src.ope``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from helpdp._src import ope as ko
from helpdp.data import Dataset, load_dataset
from helpdp.policies import StateView, action_probs, components

__all__ = ["ESTIMATORS", "Estimate", "Logged", "estimate", "load_logged"]

ESTIMATORS = ("is", "snis", "pdis", "dr", "wdr", "dm")
#: ages of the latest help at or above this are one class in the control variate's key
AGE_CAP = 4


@dataclass
class Logged:
    """The collected episodes of a random schedule, in the layout the kernels read.

    ``episodes``: one row per episode (``episode_id, task_id, split, seed, success``,
    ``stratum``: task and trigger vector); ``steps``: one row per step in episode and
    turn order (``state_id, t, action, failure, last_failure, errors, last_help``);
    ``ep_ptr``: episode ``e`` owns steps ``ep_ptr[e]:ep_ptr[e + 1]``; ``vectors``
    ``(J, K)``: the schedule's distinct trigger vectors; ``mix`` ``(n_ep, J)``: each
    vector's share of its episode's task; ``mu`` ``(n_steps, J)``: the logged
    action's probability under each vector.
    """

    episodes: pd.DataFrame
    steps: pd.DataFrame
    ep_ptr: np.ndarray
    vectors: np.ndarray
    mix: np.ndarray
    mu: np.ndarray
    n_actions: int
    texts: dict = field(default_factory=dict, repr=False)
    _views: list | None = field(default=None, repr=False)

    @property
    def n_episodes(self) -> int:
        return len(self.episodes)

    def views(self) -> list[StateView]:
        """One :class:`StateView` per logged step, as the collector builds them."""
        if self._views is None:
            st = self.steps
            ep_ids = np.repeat(self.episodes["episode_id"].to_numpy(), np.diff(self.ep_ptr))
            tasks = np.repeat(self.episodes["task_id"].to_numpy(), np.diff(self.ep_ptr))
            self._views = [
                StateView(
                    state_id=int(s),
                    task_id=str(task),
                    depth=int(t),
                    text=self.texts.get(int(s), ""),
                    episode_id=int(e),
                    last_failure=None if lf is None or lf != lf else str(lf),
                    errors=int(err),
                    last_help=int(lh),
                )  # fmt: skip
                for s, task, t, e, lf, err, lh in zip(
                    st["state_id"],
                    tasks,
                    st["t"],
                    ep_ids,
                    st["last_failure"],
                    st["errors"],
                    st["last_help"],
                )
            ]
        return self._views

    def subset(self, mask) -> Logged:
        """The episodes where ``mask`` (per episode) is true; the behaviour mixture
        stays that of the full design (the strata's shares)."""
        mask = np.asarray(mask, bool)
        lens = np.diff(self.ep_ptr)
        step_mask = np.repeat(mask, lens)
        views = None
        if self._views is not None:
            views = [v for v, keep in zip(self._views, step_mask) if keep]
        return Logged(
            self.episodes[mask].reset_index(drop=True),
            self.steps[step_mask].reset_index(drop=True),
            np.r_[0, np.cumsum(lens[mask])].astype(np.int64),
            self.vectors, self.mix[mask], self.mu[step_mask], self.n_actions, self.texts, views,
        )  # fmt: skip


def _probability_columns(ep: pd.DataFrame, actions: list[str]) -> list[str]:
    names = actions[1:]
    cols = [f"p_{n}" for n in names]
    if all(c in ep.columns for c in cols):
        return cols
    if len(names) == 1 and "trigger_p" in ep.columns:
        return ["trigger_p"]
    raise ValueError(
        "episodes.parquet: no trigger probabilities (columns "
        + ", ".join(cols)
        + (" or trigger_p" if len(names) == 1 else "")
        + "): off-policy evaluation needs the collection's random schedule"
    )


def load_logged(data, *, tasks=None, splits=None) -> Logged:
    """The episodes of a collected dataset (a directory or a ``helpdp.data.Dataset``),
    optionally only those of ``tasks`` or of the task ``splits``."""

    ds = data if isinstance(data, Dataset) else load_dataset(Path(data))
    where = ds.path or "dataset"
    if ds.episodes is None or ds.steps is None:
        raise ValueError(f"{where}: off-policy evaluation needs episodes.parquet and steps.parquet")
    ep = ds.episodes.copy()
    for col in ("episode_id", "task_id", "success"):
        if col not in ep.columns:
            raise ValueError(f"{where}/episodes.parquet: no column {col!r}")
    if tasks is not None:
        ep = ep[ep["task_id"].astype(str).isin(set(map(str, tasks)))]
    if splits is not None:
        if "split" not in ep.columns:
            raise ValueError(f"{where}/episodes.parquet: no column 'split'")
        ep = ep[ep["split"].isin(list(splits))]
    if ep.empty:
        raise ValueError(f"{where}: no episode of the selected tasks/splits")
    pcols = _probability_columns(ep, ds.actions)
    probs = ep[pcols].to_numpy(np.float64)
    bad = ~np.isfinite(probs) | (probs < 0) | (probs > 1)
    if bad.any():
        r = int(np.argmax(bad.any(axis=1)))
        raise ValueError(f"{where}/episodes.parquet: row {r}: trigger probability not in [0, 1]")
    ep = ep.sort_values("episode_id", kind="stable").reset_index(drop=True)
    probs = ep[pcols].to_numpy(np.float64)
    vectors, vec_of = np.unique(probs, axis=0, return_inverse=True)
    vec_of = vec_of.reshape(-1)
    task_codes, task_of = np.unique(ep["task_id"].astype(str).to_numpy(), return_inverse=True)
    counts = np.zeros((len(task_codes), len(vectors)))
    np.add.at(counts, (task_of, vec_of), 1.0)
    mix = (counts / counts.sum(axis=1, keepdims=True))[task_of]
    ep["stratum"] = task_of * len(vectors) + vec_of
    ep["success"] = ep["success"].astype(bool).astype(np.float64)
    if "seed" not in ep.columns:
        ep["seed"] = 0

    st = ds.steps[ds.steps["episode_id"].isin(ep["episode_id"])].copy()
    st = st.sort_values(["episode_id", "t"], kind="stable").reset_index(drop=True)
    pos = pd.Series(np.arange(len(ep)), index=ep["episode_id"].to_numpy())
    st_ep = pos.reindex(st["episode_id"].to_numpy()).to_numpy()
    lens = np.bincount(st_ep, minlength=len(ep))
    ep_ptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    within = np.arange(len(st)) - np.repeat(ep_ptr[:-1], lens)
    if (st["t"].to_numpy() != within).any():
        r = int(np.argmax(st["t"].to_numpy() != within))
        raise ValueError(f"{where}/steps.parquet: row {r}: turns of an episode are not 0, 1, ...")
    action = st["action"].to_numpy(np.int64)
    n_actions = len(ds.actions)
    if (action < 0).any() or (action >= n_actions).any():
        r = int(np.argmax((action < 0) | (action >= n_actions)))
        raise ValueError(f"{where}/steps.parquet: row {r}: action {action[r]} out of range")
    failed = np.array(st["failure"].notna()) if "failure" in st.columns else np.zeros(len(st), bool)
    if "format_error" in st.columns:
        failed |= st["format_error"].fillna(False).to_numpy(bool)
    first = np.zeros(len(st), bool)
    first[ep_ptr[:-1][lens > 0]] = True
    fail_series = st["failure"] if "failure" in st.columns else pd.Series([None] * len(st))
    st["last_failure"] = fail_series.shift(1).where(~first, None)
    cum_fail = np.cumsum(failed) - np.repeat(np.r_[0, np.cumsum(failed)][ep_ptr[:-1]], lens)
    st["errors"] = cum_fail - failed
    helped_at = np.where(action > 0, st["t"].to_numpy(), -1)
    last = pd.Series(helped_at).groupby(st_ep).cummax().to_numpy()
    prev = np.r_[-1, last[:-1]]
    st["last_help"] = np.where(first, -1, prev)

    # behaviour: P(logged action) under each trigger vector, interventions out of
    # calls (max_calls in the collection's config) masked
    cfg = ds.manifest.get("source", {}).get("config", {}) or {}
    ivs = cfg.get("interventions") or {}
    limits = [(ivs.get(n) or {}).get("max_calls") for n in ds.actions[1:]]
    calls_before = np.zeros((len(st), n_actions - 1), np.int64)
    for k in range(1, n_actions):
        c = np.cumsum(action == k)
        c0 = np.repeat(np.r_[0, c][ep_ptr[:-1]], lens)
        calls_before[:, k - 1] = c - c0 - (action == k)
    avail = np.ones_like(calls_before, bool)
    for k, lim in enumerate(limits):
        if lim is not None:
            avail[:, k] = calls_before[:, k] < int(lim)
    mu = np.zeros((len(st), len(vectors)))
    for pattern in np.unique(avail, axis=0):
        rows = np.flatnonzero((avail == pattern).all(axis=1))
        table = ko.trigger_action_probs(vectors, pattern)  # (J, A)
        mu[rows] = table[:, action[rows]].T
    own = mu[np.arange(len(st)), np.repeat(vec_of, lens)]
    if (own <= 0).any():
        r = int(np.argmax(own <= 0))
        raise ValueError(
            f"{where}/steps.parquet: row {r}: action {action[r]} has probability 0 under its "
            "episode's trigger probabilities (was this data collected with a policy=?)"
        )
    texts = dict(zip(ds.states["state_id"].tolist(), ds.states["text"].tolist()))
    return Logged(ep, st, ep_ptr, vectors, mix, mu, n_actions, texts)


@dataclass
class Estimate:
    """One policy's estimates: ``table`` has one row per (estimator, quantity):
    ``estimator, quantity`` (``SR`` or ``U_<k>``/``U``), ``value, lo, hi``;
    ``diagnostics``: ``episodes, agree, ess, max_share``."""

    policy: str
    table: pd.DataFrame
    diagnostics: dict
    level: float
    unit: str

    def get(self, estimator: str = "wdr", quantity: str = "SR") -> tuple[float, float, float]:
        r = self.table[
            (self.table["estimator"] == estimator) & (self.table["quantity"] == quantity)
        ]
        if r.empty:
            raise KeyError(f"no {estimator} estimate of {quantity}")
        r = r.iloc[0]
        return float(r["value"]), float(r["lo"]), float(r["hi"])

    def to_dict(self) -> dict:
        return {
            "policy": self.policy,
            "level": self.level,
            "unit": self.unit,
            "diagnostics": self.diagnostics,
            "estimates": self.table.to_dict(orient="records"),
        }

    def line(self, estimator: str = "wdr") -> str:
        s, slo, shi = self.get(estimator, "SR")
        u, ulo, uhi = self.get(estimator, "U")
        d = self.diagnostics
        return (
            f"OPE ({estimator}) SR={s:.3f} [{slo:.3f}, {shi:.3f}] U={u:.2f} [{ulo:.2f}, {uhi:.2f}]"
            f" (ESS {d['ess']:.0f}, agree {d['agree']}/{d['episodes']}, "
            f"max weight share {d['max_share']:.3f})"
        )


def _target(policy, logged: Logged):
    """Per step: P(logged action) under each component ``(n, C)``, the component
    weights ``(C,)`` and the target's action distribution given the history
    ``(n, A)`` (the components' posterior given the earlier logged actions)."""
    comps = components(policy)
    w = np.asarray([c[0] for c in comps], np.float64)
    if (w < 0).any() or abs(w.sum() - 1.0) > 1e-9:
        raise ValueError(f"{policy.name}: component weights {w.tolist()} do not sum to 1")
    views = logged.views()
    a = logged.steps["action"].to_numpy(np.int64)
    full = [action_probs(c[1], views, logged.n_actions) for c in comps]
    taken = np.stack([f[np.arange(len(a)), a] for f in full], axis=1)
    prev = ko.exclusive(logged.ep_ptr, ko.segment_prefix(logged.ep_ptr, taken))
    post = prev * w[None, :]
    tot = post.sum(axis=1, keepdims=True)
    post = np.where(tot > 0, post / np.where(tot > 0, tot, 1.0), w[None, :])
    dist = np.einsum("nc,nca->na", post, np.stack(full, axis=1))
    return taken, w, dist


def _model_keys(logged: Logged) -> tuple[np.ndarray, list[np.ndarray]]:
    st = logged.steps
    lens = np.diff(logged.ep_ptr)
    task = np.unique(logged.episodes["task_id"].astype(str).to_numpy(), return_inverse=True)[1]
    task = np.repeat(task.reshape(-1), lens)
    t = st["t"].to_numpy(np.int64)
    lh = st["last_help"].to_numpy(np.int64)
    age = np.where(lh < 0, 0, np.minimum(t - lh, AGE_CAP))
    failed = st["last_failure"].notna().to_numpy(np.int64)
    return t, [task, failed, age]


def _folds(logged: Logged) -> np.ndarray:
    seeds = logged.episodes["seed"].to_numpy(np.int64)
    if len(np.unique(seeds % 2)) == 2:
        return seeds % 2
    return (logged.episodes["episode_id"].to_numpy(np.int64) >> 7) % 2


def _q_model(logged: Logged, dist: np.ndarray, reward: np.ndarray, terminal: np.ndarray):
    """Cross-fitted Q (``(n, A)``) of one quantity (by seed parity); ``reward`` ``(n, A)``:
    each action's known immediate reward."""
    t, keys = _model_keys(logged)
    lens = np.diff(logged.ep_ptr)
    n = len(t)
    nxt = np.arange(1, n + 1)
    last = logged.ep_ptr[1:][lens > 0] - 1
    nxt[last] = -1
    term = np.zeros(n)
    term[last] = terminal[lens > 0]
    action = logged.steps["action"].to_numpy(np.int64)
    fold = np.repeat(_folds(logged), lens)
    q = np.zeros((n, logged.n_actions))
    for f in (0, 1):
        qf = ko.fit_q(t, keys, action, reward, nxt, term, dist, fold != f, logged.n_actions)
        q[fold == f] = qf[fold == f]
    return q


def _terms(logged: Logged, policy) -> tuple[dict, np.ndarray, np.ndarray, list[str]]:
    """Per-episode terms per quantity and the padded arrays of the weighted DR."""
    ptr = logged.ep_ptr
    taken, w, dist = _target(policy, logged)
    rho, _ = ko.ratios(ptr, logged.mu, logged.mix, taken, w)
    a = logged.steps["action"].to_numpy(np.int64)
    lens = np.diff(ptr)
    has = lens > 0
    n_a = logged.n_actions
    quantities = {"SR": (np.zeros((len(a), n_a)), logged.episodes["success"].to_numpy(np.float64))}
    for k in range(1, n_a):
        known = np.zeros((len(a), n_a))
        known[:, k] = 1.0  # a call of intervention k counts 1, whatever follows
        quantities[f"U_{k}"] = (known, np.zeros(logged.n_episodes))
    out, pads = {}, {}
    rho_pad = ko.padded(ptr, rho, fill_last=True)
    for name, (known, terminal) in quantities.items():
        q = _q_model(logged, dist, known, terminal)
        reward = known[np.arange(len(a)), a]
        v = (dist * q).sum(axis=1)
        q_taken = q[np.arange(len(a)), a]
        v0 = terminal.copy()
        v0[has] = v[ptr[:-1][has]]
        terms = ko.episode_terms(ptr, rho, reward, terminal, q_taken, v, v0)
        out[name] = terms
        v_next = ko.next_values(ptr, v, terminal)
        pads[name] = (v0, ko.padded(ptr, reward + v_next - q_taken, fill_last=False))
    return out, rho_pad, pads, list(quantities)


def _group_matrix(codes: np.ndarray) -> np.ndarray:
    g = np.zeros((len(codes), codes.max() + 1))
    g[np.arange(len(codes)), codes] = 1.0
    return g


def _rows(terms, pads, rho_pad, names, estimators, counts, g, task, level) -> list[dict]:
    """One row per (quantity, estimator): the point estimate (replicate 0 of
    ``counts``) and the bootstrap percentile interval (the other replicates)."""
    w = terms["SR"]["w"]
    rows = []
    for name in names:
        t = terms[name]
        for est in estimators:
            if est == "snis":
                num = (counts * t["is"]) @ g
                den = (counts * w) @ g
                per_task = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
            elif est == "wdr":
                v0, d_pad = pads[name]
                per_task = np.full((len(counts), g.shape[1]), np.nan)
                for j in range(g.shape[1]):
                    m = task == j
                    per_task[:, j] = ko.weighted_dr(counts[:, m], v0[m], rho_pad[m], d_pad[m])
            else:
                per_task = ((counts * t[est]) @ g) / (counts @ g)
            drawn = counts @ g > 0
            per_task = np.where(drawn, per_task, np.nan)
            times = (counts @ g) / np.bincount(task, minlength=g.shape[1])[None, :]
            vals = np.nansum(per_task * times, axis=1) / np.sum(
                np.where(np.isnan(per_task), 0.0, times), axis=1
            )
            point, boot = vals[0], vals[1:]
            a = (1 - level) / 2
            lo, hi = np.nanquantile(boot, [a, 1 - a]) if np.isfinite(boot).any() else (np.nan,) * 2
            rows.append({"estimator": est, "quantity": name, "value": point, "lo": lo, "hi": hi})
    return rows


def estimate(
    policy,
    data,
    *,
    estimators=ESTIMATORS,
    n_boot: int = 500,
    level: float = 0.95,
    unit: str = "episode",
    seed: int = 0,
) -> Estimate:
    """SR and U of ``policy`` (anything with ``decide(views)``) from the logged
    ``data`` (a :class:`Logged`, a dataset directory or a ``Dataset``), with
    ``level`` bootstrap intervals (``unit``: ``episode`` or ``task``)."""
    logged = data if isinstance(data, Logged) else load_logged(data)
    bad = [e for e in estimators if e not in ESTIMATORS]
    if bad:
        raise ValueError(f"estimators: unknown {bad[0]!r} (one of {', '.join(ESTIMATORS)})")
    if unit not in ("episode", "task"):
        raise ValueError(f"unit must be 'episode' or 'task', got {unit!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_boot < 10:
        raise ValueError(f"n_boot must be >= 10, got {n_boot}")
    terms, rho_pad, pads, names = _terms(logged, policy)
    task = np.unique(logged.episodes["task_id"].astype(str).to_numpy(), return_inverse=True)[1]
    task = task.reshape(-1)
    g = _group_matrix(task)
    rng = np.random.default_rng(seed)
    reps = ko.stratified_counts(logged.episodes["stratum"].to_numpy(), n_boot, rng)
    if unit == "task":  # two-stage: tasks, then episodes within each drawn task
        reps = reps * ko.group_counts(task, n_boot, rng)
    counts = np.vstack([np.ones((1, logged.n_episodes), np.int64), reps]).astype(np.float64)
    w = terms["SR"]["w"]
    with np.errstate(invalid="ignore", divide="ignore"):  # tasks a replicate did not draw
        rows = _rows(terms, pads, rho_pad, names, estimators, counts, g, task, level)
    table = pd.DataFrame(rows)
    ucols = [n for n in names if n.startswith("U_")]
    if ucols:  # total usage over the interventions
        tot = []
        for est in estimators:
            sub = table[(table["estimator"] == est) & table["quantity"].isin(ucols)]
            if len(ucols) == 1:
                r = sub.iloc[0]
                tot.append({"estimator": est, "quantity": "U", "value": r["value"],
                            "lo": r["lo"], "hi": r["hi"]})  # fmt: skip
            else:  # intervals of a sum are not sums of intervals: point only
                tot.append({"estimator": est, "quantity": "U", "value": sub["value"].sum(),
                            "lo": np.nan, "hi": np.nan})  # fmt: skip
        table = pd.concat([table, pd.DataFrame(tot)], ignore_index=True)
    diag = {
        "episodes": int(logged.n_episodes),
        "agree": int((w > 0).sum()),
        "ess": float(w.sum() ** 2 / max((w**2).sum(), 1e-300)),
        "max_share": float(w.max() / w.sum()) if w.sum() > 0 else float("nan"),
        "tasks": int(g.shape[1]),
    }
    return Estimate(str(getattr(policy, "name", type(policy).__name__)), table, diag, level, unit)


def slug(name: str) -> str:
    """A file-name-safe form of a policy's name."""
    return re.sub(r"[^A-Za-z0-9.=]+", "_", name).strip("_")
