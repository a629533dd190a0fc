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

Intervals (``unit``): the independent unit is the task (tasks differ; an episode's
steps, and episodes sharing the task's control-variate cells, are not independent).

* ``task`` (``auto`` from ``MIN_TASKS`` = 8 tasks on): the estimate is the mean of the
  per-task estimates (each task's model cross-fitted by seed parity); the interval is
  the estimate -/+ the Student-t quantile (k - 1 degrees of freedom) x the delete-one-
  task jackknife standard error, the control variate refitted without the task in each
  of the k replicates (its steps left out of the fit; Efron & Stein's
  ``(k - 1)/k sum (theta_(-j) - mean)^2``). Why the refit: the tasks' estimates share
  the pooled model's coarse cells, so their errors are correlated (+0.03 to +0.08 for
  ``wdr``) and the spread of the tasks' own estimates misses that common error (``wdr``
  covered 0.78 with it, 0.90 or more with the jackknife: docs/results/ope.md,
  ``bench/ope_coverage.py``). For the IS family (no model) the jackknife of a mean is
  exactly the t interval of the tasks. The percentile bootstrap of the tasks is too
  narrow with 10-12 tasks; bootstrap-t was worse still (measured). ``per_task``'s
  ``value`` holds the jackknife pseudo-values ``theta + (k - 1)(mean(theta_(-.)) -
  theta_(-j))``: their mean is the estimate and their t interval the jackknife's, and
  they are linear, so ``helpdp.select`` / ``forecast`` pool them across folds and
  mixtures (``estimate`` holds each task's own estimate). Above ``JACKKNIFE_GROUPS``
  tasks it deletes a group of tasks at a time (round-robin, column ``group``) and the
  interval takes the groups as the unit (``helpdp.intervals.task_interval``): one refit
  per group, so linear in the data (k refits made it quadratic in the tasks).
* ``episode`` (``auto`` below 8 tasks): percentile bootstrap of the episodes within
  each task, the model fixed (a narrower, less safe interval for these tasks);
* ``stratum``: the same within (task, trigger vector) strata, the intervals shipped
  before, kept to measure them against: they under-cover (strata of ~3 episodes).

With a ``reference`` policy, the paired differences ``dSR``, ``dU`` are computed task
by task (``task``) or within the same bootstrap replicates (``episode``).

Diagnostics per policy: the effective sample size of the trajectory weights, the
largest weight's share, the logged episodes the policy agrees with (weight > 0), the
tasks without one (``snis`` leaves them out of its average, says so in its row's
``tasks`` and warns), and per estimator the model's part of the estimate (the DM
value; 0 for the IS family) and the data's (the rest). Against a reference:
``deviate``, the agreeing episodes in which the policy acts differently from the
reference at some step, and ``deviate_ref`` the other way round: the episodes that
inform the difference. With ``support = min(deviate, deviate_ref)`` at 0 the
difference is the control variate's extrapolation (``helpdp.select`` never picks such
a candidate).

The numeric kernels are in ``helpdp._src.ope``; the estimators, one function each in
a registry, in ``helpdp.estimators``.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from helpdp._src import ope as ko
from helpdp.data import Dataset, load_dataset
from helpdp.estimators import ESTIMATORS, REGISTRY, Terms
from helpdp.events import state_events, state_histories
from helpdp.intervals import in_range, task_interval
from helpdp.policies import StateView, action_probs, build_policy, components

__all__ = [
    "ESTIMATORS",
    "JACKKNIFE_GROUPS",
    "MIN_TASKS",
    "UNITS",
    "Estimate",
    "Logged",
    "estimate",
    "load_logged",
    "resolve_unit",
]

#: interval units (module docstring)
UNITS = ("auto", "task", "episode", "stratum")
#: ``unit="auto"`` takes tasks as the unit from this many tasks on
MIN_TASKS = 8
#: the jackknife deletes one task at a time up to this many tasks, else one of this
#: many groups of tasks (``helpdp._src.ope.jackknife_groups``): its cost is one refit
#: of the control variate per group, so linear in the data, not quadratic in the tasks
JACKKNIFE_GROUPS = 50
#: ages of the latest help at or above this are one class in the control variate's key
AGE_CAP = 4


@dataclass
class Logged:
    """The collected episodes of a random schedule, in the layout the kernels read.

    ``episodes``: one row per episode (``episode_id, task_id, split, seed, success``,
    ``stratum``: task and trigger vector); ``steps``: one row per step in episode and
    turn order (``state_id, t, action, failure, last_failure, errors, last_help``);
    ``ep_ptr``: episode ``e`` owns steps ``ep_ptr[e]:ep_ptr[e + 1]``; ``vectors``
    ``(J, K)``: the schedule's distinct trigger vectors; ``designs``: the stage-2
    designs (``episodes.parquet``'s ``design``, as :func:`helpdp.policies.build_policy`
    reads it), behaviour columns ``J ..`` after the vectors; ``mix`` ``(n_ep, J + D)``:
    each vector's and design's share of its episode's task; ``mu`` ``(n_steps, J + D)``:
    the logged action's probability under each.
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
    designs: list = field(default_factory=list)

    @property
    def n_episodes(self) -> int:
        return len(self.episodes)

    def views(self) -> list[StateView]:
        """One :class:`StateView` per logged step, as the collector builds them."""
        if self._views is None:
            self._views = _make_views(self.steps, self.episodes, self.ep_ptr, self.texts)
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
            self.vectors,
            self.mix[mask],
            self.mu[step_mask],
            self.n_actions,
            self.texts,
            views,
            self.designs,
        )


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


_EVENT_COLS = ("episode_id", "t", "kind", "tool_name", "failure", "format_error", "args_sha")


def _make_views(st: pd.DataFrame, ep: pd.DataFrame, ep_ptr: np.ndarray, texts: dict) -> list:
    lens = np.diff(ep_ptr)
    ep_ids = np.repeat(ep["episode_id"].to_numpy(), lens)
    tasks = np.repeat(ep["task_id"].to_numpy(), lens)
    return [
        StateView(
            state_id=int(s),
            task_id=str(task),
            depth=int(t),
            text=texts.get(int(s), ""),
            episode_id=int(e),
            last_failure=None if lf is None or lf != lf else str(lf),
            errors=int(err),
            last_help=int(lh),
            last_class=lc if isinstance(lc, str) else None,
            repeats=int(rp),
            context_tokens=None if c < 0 else int(c),
            calls=int(n),
            past=h,
        )
        for s, task, t, e, lf, err, lh, lc, rp, c, n, h in zip(
            st["state_id"],
            tasks,
            st["t"],
            ep_ids,
            st["last_failure"],
            st["errors"],
            st["last_help"],
            st["last_class"],
            st["last_repeats"],
            st["context_tokens"].to_numpy(np.int64),
            st["calls"],
            state_histories(st["last_class"], st["last_repeats"], st["context_tokens"], ep_ptr),
        )
    ]


def _event_columns(st: pd.DataFrame, first: np.ndarray, where: str) -> None:
    """``last_class``, ``last_repeats``, ``context_tokens`` (-1: unknown) of each step's
    state (``helpdp.events``). Data without ``kind`` (``helpdp.synthetic``): a turn
    with a failure is ``failed``, else ``working``."""
    if {"kind", "tool_name"} <= set(st.columns):
        try:
            ev = state_events(st[[c for c in _EVENT_COLS if c in st.columns]])
        except ValueError as e:
            raise ValueError(f"{where}/steps.parquet: {e}") from None
        st["last_class"] = ev["last_class"].to_numpy(dtype=object)
        st["last_repeats"] = ev["last_repeats"].to_numpy(np.int64)
    else:
        failed = (
            st["failure"].notna().to_numpy() if "failure" in st.columns else np.zeros(len(st), bool)
        )
        prev = np.r_[False, failed[:-1]]
        st["last_class"] = np.where(first, None, np.where(prev, "failed", "working")).astype(object)
        st["last_repeats"] = 0
    if {"prompt_tokens", "completion_tokens"} <= set(st.columns):
        tok = (st["prompt_tokens"].fillna(0) + st["completion_tokens"].fillna(0)).to_numpy(np.int64)
        st["context_tokens"] = np.where(first, -1, np.r_[-1, tok[:-1]])
    else:
        st["context_tokens"] = -1


def _design_probs(designs, views, action, avail, n_actions, where):
    """``(n_steps, D)``: the logged action's probability under each stage-2 design
    (its ``action_probs``; an intervention out of calls never runs: its
    probability goes to nohelp)."""
    out = np.zeros((len(views), len(designs)))
    for d, spec in enumerate(designs):
        try:
            pol = build_policy(json.loads(spec))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{where}/episodes.parquet: design {spec!r}: {e}") from None
        probs = action_probs(pol, views, n_actions)
        gone = np.c_[np.zeros(len(views), bool), ~avail]
        probs[:, 0] += np.where(gone, probs, 0.0).sum(axis=1)
        probs[gone] = 0.0
        out[:, d] = probs[np.arange(len(views)), action]
    return out


def load_logged(data, *, tasks=None, splits=None) -> Logged:
    """The episodes of a collected dataset (a directory or a ``helpdp.data.Dataset``),
    optionally only those of ``tasks`` or of the task ``splits``.

    The behaviour is the mixture of every design present, per task (the balance
    heuristic): the trigger vectors of the random grid (``trigger_p`` / ``p_<name>``)
    and the stage-2 designs (``design``: a base policy randomised at trigger states,
    ``collect/schedule.py``), whose probabilities come from the design's
    ``action_probs`` (and must match the steps' logged ``p_help``). So a ``merge`` of a
    stage-1 and a stage-2 collection is one dataset, weighted as one design."""

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
    design = ep["design"].fillna("").astype(str).to_numpy() if "design" in ep.columns else None
    is_d = design != "" if design is not None else np.zeros(len(ep), bool)
    vectors, vec_of = np.unique(probs[~is_d], axis=0, return_inverse=True)
    vectors = vectors.reshape(-1, len(pcols))
    designs = sorted(set(design[is_d])) if is_d.any() else []
    col_of = np.zeros(len(ep), np.int64)
    col_of[~is_d] = vec_of.reshape(-1)
    if designs:
        col_of[is_d] = len(vectors) + np.searchsorted(designs, design[is_d])
    n_cols = len(vectors) + len(designs)
    task_codes, task_of = np.unique(ep["task_id"].astype(str).to_numpy(), return_inverse=True)
    counts = np.zeros((len(task_codes), n_cols))
    np.add.at(counts, (task_of, col_of), 1.0)
    mix = (counts / counts.sum(axis=1, keepdims=True))[task_of]
    ep["stratum"] = task_of * n_cols + col_of
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
    _event_columns(st, first, where)
    texts = dict(zip(ds.states["state_id"].tolist(), ds.states["text"].tolist()))
    mu, views = _behaviour(ds, st, ep, ep_ptr, vectors, designs, texts, where)
    own = mu[np.arange(len(st)), np.repeat(col_of, lens)]
    if (own <= 0).any():
        r = int(np.argmax(own <= 0))
        raise ValueError(
            f"{where}/steps.parquet: row {r}: action {action[r]} has probability 0 under its "
            "episode's trigger probabilities or design (was this data collected with a policy=?)"
        )
    if designs and "p_help" in st.columns:
        d_rows = np.flatnonzero(np.repeat(is_d, lens))
        ph = st["p_help"].to_numpy(np.float64)[d_rows]
        want = np.where(action[d_rows] > 0, ph, 1.0 - ph)
        off = ~(np.abs(want - own[d_rows]) <= 1e-9)
        if off.any():
            r = int(d_rows[np.argmax(off)])
            raise ValueError(
                f"{where}/steps.parquet: row {r}: p_help {st['p_help'].iloc[r]} does not match "
                f"its episode's design (probability {own[r]:.6g} of action {action[r]})"
            )
    return Logged(ep, st, ep_ptr, vectors, mix, mu, n_actions, texts, views, designs)


def _behaviour(ds, st, ep, ep_ptr, vectors, designs, texts, where):
    """``(n_steps, J + D)``: P(logged action) under each trigger vector and each design,
    interventions out of calls (max_calls in the collection's config) masked; and the
    views when the designs needed them (else None). Adds ``calls`` to ``st``."""
    lens = np.diff(ep_ptr)
    action = st["action"].to_numpy(np.int64)
    n_actions = len(ds.actions)
    cfg = ds.manifest.get("source", {}).get("config", {}) or {}
    ivs = cfg.get("interventions") or {}
    limits = [(ivs.get(n) or {}).get("max_calls") for n in ds.actions[1:]]
    calls_before = np.zeros((len(st), n_actions - 1), np.int64)
    for k in range(1, n_actions):
        c = np.cumsum(action == k)
        c0 = np.repeat(np.r_[0, c][ep_ptr[:-1]], lens)
        calls_before[:, k - 1] = c - c0 - (action == k)
    st["calls"] = calls_before.sum(axis=1)
    avail = np.ones_like(calls_before, bool)
    for k, lim in enumerate(limits):
        if lim is not None:
            avail[:, k] = calls_before[:, k] < int(lim)
    mu = np.zeros((len(st), len(vectors) + len(designs)))
    for pattern in np.unique(avail, axis=0):
        rows = np.flatnonzero((avail == pattern).all(axis=1))
        table = ko.trigger_action_probs(vectors, pattern)  # (J, A)
        mu[rows, : len(vectors)] = table[:, action[rows]].T
    views = None
    if designs:
        views = _make_views(st, ep, ep_ptr, texts)
        mu[:, len(vectors) :] = _design_probs(designs, views, action, avail, n_actions, where)
    return mu, views


@dataclass
class Estimate:
    """One policy's estimates: ``table`` has one row per (estimator, quantity):
    ``estimator, quantity`` (``SR``, ``U_<k>``, ``U``; with a reference also ``dSR``,
    ``dU_<k>``, ``dU``: the policy minus the reference), ``value, lo, hi`` and ``tasks``
    (how many tasks the value averages); ``per_task``: per task ``task, estimator,
    quantity, value, estimate, group``: ``estimate`` the task's own estimate, ``value``
    what pools across folds (``helpdp.select``): with ``unit="task"`` the jackknife
    pseudo-value (module docstring; their mean is the estimate), else the estimate;
    ``group`` the task's jackknife group;
    ``diagnostics``: ``episodes, agree, ess, max_share, tasks, tasks_empty`` and, per
    estimator, ``parts``: ``{quantity: [model, data]}`` (the DM part and the correction);
    with a reference ``reference, agree_ref, deviate, deviate_ref, support`` (module
    docstring)."""

    policy: str
    table: pd.DataFrame
    diagnostics: dict
    level: float
    unit: str
    per_task: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    _index: dict | None = field(default=None, repr=False, compare=False)

    def get(self, estimator: str = "wdr", quantity: str = "SR") -> tuple[float, float, float]:
        if self._index is None:  # one pass over the table (a filter per call was slow)
            t = self.table
            self._index = dict(zip(zip(t.estimator, t.quantity), zip(t.value, t.lo, t.hi)))
        if (estimator, quantity) not in self._index:
            raise KeyError(f"no {estimator} estimate of {quantity}")
        return tuple(float(x) for x in self._index[(estimator, quantity)])

    def to_dict(self) -> dict:
        est = self.table.to_dict(orient="records")
        return {"policy": self.policy, "level": self.level, "unit": self.unit,
                "diagnostics": self.diagnostics, "estimates": est}  # fmt: skip

    def support_line(self, estimator: str = "wdr") -> str:
        """Where the value comes from: agreeing episodes, those that deviate from the
        reference, and the model's and the data's parts of the estimate."""
        d = self.diagnostics
        q = "dSR" if "reference" in d else "SR"
        model, data = d.get("parts", {}).get(estimator, {}).get(q, (np.nan, np.nan))
        out = f"agree {d['agree']}/{d['episodes']}"
        if d.get("tasks_empty"):
            out += f" ({d['tasks_empty']} of {d['tasks']} tasks without one)"
        if "reference" in d:
            out += (
                f", deviating from {d['reference']}: {d['deviate']} (its own: {d['deviate_ref']})"
            )
        return out + f"; {q} = model {model:+.3f} + data {data:+.3f}"

    def line(self, estimator: str = "wdr") -> str:
        if self.diagnostics["agree"] == 0:  # the model's extrapolation alone: no value
            return f"OPE ({estimator}): no value: no logged episode agrees with {self.policy}"
        s, slo, shi = self.get(estimator, "SR")
        u, ulo, uhi = self.get(estimator, "U")
        d = self.diagnostics
        return (
            f"OPE ({estimator}) SR={s:.3f} [{slo:.3f}, {shi:.3f}] U={u:.2f} [{ulo:.2f}, {uhi:.2f}]"
            f" (ESS {d['ess']:.0f}, max weight share {d['max_share']:.3f}; "
            f"{self.support_line(estimator)})"
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


def _model_context(logged: Logged) -> dict:
    """What every control-variate fit on ``logged`` shares (keys, their grouping, the
    steps' successors and folds): computed once per estimate, not per fit."""
    t, keys = _model_keys(logged)
    lens = np.diff(logged.ep_ptr)
    nxt = np.arange(1, len(t) + 1)
    last = logged.ep_ptr[1:][lens > 0] - 1
    nxt[last] = -1
    return {
        "t": t,
        "keys": keys,
        "layout": ko.q_layout(t, keys),
        "nxt": nxt,
        "last": last,
        "has": lens > 0,
        "fold": np.repeat(_folds(logged), lens),
        "action": logged.steps["action"].to_numpy(np.int64),
    }


def _q_model(
    logged: Logged,
    dist: np.ndarray,
    reward: np.ndarray,
    terminal: np.ndarray,
    ctx: dict | None = None,
    drop: np.ndarray | None = None,
):
    """Cross-fitted Q (``(n, A)``) of one quantity (by seed parity); ``reward`` ``(n, A)``:
    each action's known immediate reward; ``drop`` (per step): steps left out of the fit
    (the jackknife's task)."""
    c = _model_context(logged) if ctx is None else ctx
    term = np.zeros(len(c["t"]))
    term[c["last"]] = terminal[c["has"]]
    fold = c["fold"]
    q = np.zeros((len(c["t"]), logged.n_actions))
    for f in (0, 1):
        fit = fold != f if drop is None else (fold != f) & ~drop
        steps = ko.Steps(c["t"], c["keys"], c["action"], reward, c["nxt"], term)
        qf = ko.fit_q(steps, dist, fit, logged.n_actions, layout=c["layout"])
        q[fold == f] = qf[fold == f]
    return q


def _terms(logged: Logged, policy, ctx: dict | None = None, target=None, drop=None) -> Terms:
    """What the estimators read (:class:`helpdp.estimators.Terms`); ``target``: what
    :func:`_target` gave (passed back to skip recomputing it); ``drop``: steps left out
    of the control variate's fit."""
    ptr = logged.ep_ptr
    taken, w, dist = _target(policy, logged) if target is None else target
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
    ctx = _model_context(logged) if ctx is None else ctx
    for name, (known, terminal) in quantities.items():
        q = _q_model(logged, dist, known, terminal, ctx, drop)
        reward = known[np.arange(len(a)), a]
        v = (dist * q).sum(axis=1)
        q_taken = q[np.arange(len(a)), a]
        v0 = terminal.copy()
        v0[has] = v[ptr[:-1][has]]
        terms = ko.episode_terms(ptr, rho, reward, terminal, q_taken, v, v0)
        out[name] = terms
        v_next = ko.next_values(ptr, v, terminal)
        pads[name] = (v0, ko.padded(ptr, reward + v_next - q_taken, fill_last=False))
    return Terms(out, rho_pad, pads, list(quantities), dist, (taken, w, dist))


def _jackknife_shift(logged: Logged, tm: Terms, ctx: dict, g, task, groups, estimators) -> dict:
    """The delete-a-group jackknife of the model-based estimators: ``{(estimator,
    quantity): (K,)}``, for each task of group ``c`` the summed change of the other
    tasks' values when the control variate is refitted without the group (its steps out
    of the fit; the target's probabilities kept), over the group's size: the ``shift``
    of :func:`helpdp._src.ope.jackknife_pseudo`. One refit per group."""
    ests = [e for e in estimators if REGISTRY[e].model_based]
    out = {(e, n): np.full(g.shape[1], np.nan) for e in ests for n in tm.names + ["U"]}
    if not ests:
        return out
    step_task = np.repeat(task, np.diff(logged.ep_ptr))
    ones = np.ones((1, len(task)))
    base = {k: _per_task(tm, k[0], k[1], ones, g, task)[0] for k in out}
    for c in np.unique(groups):
        members = groups == c
        tj = _terms(logged, None, ctx, target=tm.target, drop=members[step_task])
        for k in out:
            d = _per_task(tj, k[0], k[1], ones, g, task)[0] - base[k]
            d[members] = np.nan
            if np.isfinite(d).any():
                out[k][members] = np.nansum(d) / members.sum()
    return out


def _pseudo(vals: np.ndarray, shift: np.ndarray | None) -> np.ndarray:
    """The jackknife pseudo-values (``shift`` None, the IS family: ``vals``, the
    jackknife of a plain mean of independent tasks)."""
    return vals if shift is None else ko.jackknife_pseudo(vals, shift)


def _per_task(tm: Terms, est: str, name: str, counts, g, task) -> np.ndarray:
    """``(B, K)``: one estimator's value of one quantity per task under each replicate
    of ``counts`` (NaN: a task the replicate did not draw, or, for ``snis``, a task
    without an agreeing episode). ``U`` (several interventions): the sum of ``U_k``."""
    if name == "U":
        return sum(_per_task(tm, est, n, counts, g, task) for n in tm.names if n[:2] == "U_")
    drawn = counts @ g
    with np.errstate(invalid="ignore", divide="ignore"):
        val = REGISTRY[est].per_task(tm, name, counts, g, task)
    return np.where(drawn > 0, val, np.nan)


def _interval(vals: np.ndarray, unit: str, level: float, groups) -> tuple[float, float, float, int]:
    """``(value, lo, hi, tasks)`` from the per-task values ``(B, K)`` (row 0: the data)."""
    if unit == "task":
        return task_interval(vals[0], groups, level)
    with np.errstate(invalid="ignore"):
        means = np.nanmean(vals, axis=1)
    point, boot = means[0], means[1:]
    a = (1 - level) / 2
    lo, hi = np.nanquantile(boot, [a, 1 - a]) if np.isfinite(boot).any() else (np.nan,) * 2
    return float(point), float(lo), float(hi), int(np.isfinite(vals[0]).sum())


def _support(tm: Terms, tr: Terms, ptr: np.ndarray) -> dict:
    """The episodes that inform the difference from the reference (module docstring)."""
    dev = ko.differs(ptr, tm.dist, tr.dist)
    agree, agree_r = tm.terms["SR"]["w"] > 0, tr.terms["SR"]["w"] > 0
    out = {
        "agree_ref": int(agree_r.sum()),
        "deviate": int((agree & dev).sum()),
        "deviate_ref": int((agree_r & dev).sum()),
        "differs": int(dev.sum()),
    }
    out["support"] = min(out["deviate"], out["deviate_ref"])
    return out


def resolve_unit(unit: str, n_tasks: int, min_tasks: int = MIN_TASKS) -> str:
    """``auto``: ``task`` with at least ``min_tasks`` tasks, else ``episode``."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    if unit == "auto":
        return "task" if n_tasks >= min_tasks else "episode"
    return unit


def estimate(
    policy,
    data,
    *,
    estimators=ESTIMATORS,
    n_boot: int = 500,
    level: float = 0.95,
    unit: str = "auto",
    seed: int = 0,
    reference=None,
    min_tasks: int = MIN_TASKS,
    max_groups: int = JACKKNIFE_GROUPS,
    clusters: dict | None = None,
) -> Estimate:
    """SR and U of ``policy`` (anything with ``decide(views)``) from the logged
    ``data`` (a :class:`Logged`, a dataset directory or a ``Dataset``), with ``level``
    intervals (``unit``: module docstring); with a ``reference`` policy also the paired
    differences ``dSR``, ``dU`` and the support diagnostics. ``max_groups``: the
    jackknife's groups of tasks (module docstring); ``clusters``: ``{task: group}``
    instead (to keep the groups of estimates on parts of one collection the same)."""
    logged = data if isinstance(data, Logged) else load_logged(data)
    bad = [e for e in estimators if e not in REGISTRY]
    if bad:
        raise ValueError(f"estimators: unknown {bad[0]!r} (one of {', '.join(REGISTRY)})")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_boot < 10:
        raise ValueError(f"n_boot must be >= 10, got {n_boot}")
    task_names, task = np.unique(
        logged.episodes["task_id"].astype(str).to_numpy(), return_inverse=True
    )
    task = task.reshape(-1)
    unit = resolve_unit(unit, len(task_names), min_tasks)
    ctx = _model_context(logged)
    tm = _terms(logged, policy, ctx)
    tr = None if reference is None else _terms(logged, reference, ctx)
    g = ko.group_matrix(task)
    ones = np.ones((1, logged.n_episodes))
    if unit == "task":
        counts = ones
    else:
        rng = np.random.default_rng(seed)
        strata = task if unit == "episode" else logged.episodes["stratum"].to_numpy()
        counts = np.vstack([ones, ko.stratified_counts(strata, n_boot, rng)]).astype(np.float64)
    names = tm.names + ["U"]
    rows, per_task, parts = [], [], {e: {} for e in estimators}
    dm = {n: _per_task(tm, "dm", n, ones, g, task)[0] for n in ("SR", "U")}
    if tr is not None:
        dm.update({"d" + n: dm[n] - _per_task(tr, "dm", n, ones, g, task)[0] for n in ("SR", "U")})
    if clusters is None:
        groups = ko.jackknife_groups(len(task_names), max_groups)
    else:
        missing = sorted(set(task_names) - set(clusters))
        if missing:
            raise ValueError(f"clusters: no group for task {missing[0]!r}")
        groups = np.unique([clusters[t] for t in task_names], return_inverse=True)[1].reshape(-1)
    if unit == "task":  # the jackknife's shifts (model-based estimators; one refit per group)
        sh = _jackknife_shift(logged, tm, ctx, g, task, groups, estimators)
        sh_r = (
            None if tr is None else _jackknife_shift(logged, tr, ctx, g, task, groups, estimators)
        )
    for name in names:
        for est in estimators:
            vals = _per_task(tm, est, name, counts, g, task)
            todo = [(name, vals, vals)]
            if tr is not None:
                ref = _per_task(tr, est, name, counts, g, task)
                todo.append(("d" + name, vals - ref, ref))
            for q, raw, ref in todo:
                v = raw
                if unit == "task":
                    v = _pseudo(vals[0], sh.get((est, name)))[None, :]
                    if q[0] == "d":
                        v = v - _pseudo(ref[0], sh_r.get((est, name)))[None, :]
                value, lo, hi, k = _interval(v, unit, level, groups)
                lo, hi = in_range(q, lo, hi)  # SR within [0, 1], dSR [-1, 1], calls >= 0
                rows.append(
                    {
                        "estimator": est,
                        "quantity": q,
                        "value": value,
                        "lo": lo,
                        "hi": hi,
                        "tasks": k,
                    }
                )
                per_task += [
                    (str(task_names[j]), est, q, float(v[0, j]), float(raw[0, j]), int(groups[j]))
                    for j in range(g.shape[1])
                ]
                if q in dm:  # the model's part: the DM estimate (none for the IS family)
                    model = (
                        float(np.nanmean(dm[q][np.isfinite(v[0])]))
                        if REGISTRY[est].model_based
                        else 0.0
                    )
                    parts[est][q] = [model, value - model]
    w = tm.terms["SR"]["w"]
    empty = int(((w > 0).astype(np.float64) @ g == 0).sum())
    diag = {
        "episodes": int(logged.n_episodes),
        "agree": int((w > 0).sum()),
        "ess": float(w.sum() ** 2 / max((w**2).sum(), 1e-300)),
        "max_share": float(w.max() / w.sum()) if w.sum() > 0 else float("nan"),
        "tasks": int(g.shape[1]),
        "tasks_empty": empty,
        "parts": parts,
    }
    name = str(getattr(policy, "name", type(policy).__name__))
    if tr is not None:
        diag["reference"] = str(getattr(reference, "name", type(reference).__name__))
        diag.update(_support(tm, tr, logged.ep_ptr))
    if empty and "snis" in estimators:
        warnings.warn(
            f"{name}: snis averages {g.shape[1] - empty} of {g.shape[1]} tasks "
            f"({empty} without an agreeing episode)",
            stacklevel=2,
        )
    table = pd.DataFrame(rows)
    pt = pd.DataFrame(
        per_task, columns=["task", "estimator", "quantity", "value", "estimate", "group"]
    )
    return Estimate(name, table, diag, level, unit, pt)


def slug(name: str) -> str:
    """A file-name-safe form of a policy's name."""
    return re.sub(r"[^A-Za-z0-9.=]+", "_", name).strip("_")
