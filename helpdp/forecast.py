"""Honest forecasts of a budgeted policy's success: estimates the winner's curse does not fool.

The DP's E[S] is measured on the same counts it optimised: at a state seen once
with each action, it picks whichever action happened to work, and then reports
that lucky outcome as the policy's value. On the demo data it promises 0.82 at
one call per episode; the environments measure 0.62. Two estimates that are not
fooled (``python -m helpdp.forecast data=DIR budget=1``):

* **cross-fitting** (``cross_fit``): split the episodes in two halves (stratified
  by task and trigger probability), choose the policy by the budget search on one
  half's count model, evaluate that fixed policy on the other half's model by
  policy evaluation, swap the halves, average, repeat over random splits. The
  evaluation data played no part in the choice, so the selection bias is gone
  (evaluation of a fixed policy on independent counts is unbiased on trees). The
  policy is deployed as a table: at a state the choosing half never saw it takes
  nohelp (``unseen``), as the tabular policy does in the environments. Where the
  evaluation half never observed the policy's action at a state, the value of
  that state is the evaluation half's behaviour (its observed action
  frequencies); the expected number of such fallbacks per episode is reported
  (``fallback``). The policy is chosen from half the episodes, so the estimate
  is, if anything, conservative for the policy chosen from all of them.
* **off-policy evaluation** (``ope_cross_fit``, ``helpdp.ope``): the same held-out
  choice, valued not by the held-out half's count model but by importance weighting
  of its logged episodes with the schedule's known trigger probabilities (doubly
  robust by default), with a bootstrap interval.
* **pessimistic backup** (``pessimistic_search``): at every state where the DP has
  a choice (two or more observed actions), each (state, action) with n visits
  sends ``kappa / (n + kappa)`` of its probability to failure (``kappa`` pseudo-
  visits that failed), then the usual budget search runs on that model. Actions
  seen rarely are discounted, most where the choice rests on one lucky episode;
  states without a choice carry no selection bias and are left alone. Its E[S]
  is a lower-confidence-style estimate (it also undercounts later calls slightly,
  since the failure pseudo-visits call no one).

The numeric parts are pure functions in ``helpdp._src.forecast``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpdp._src import forecast as kf
from helpdp._src import ope as ko
from helpdp.budget import policy_frame, search_budget
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import parse_budgets, run_app
from helpdp.config import SolverConfig
from helpdp.data import MDP, Dataset, load_dataset
from helpdp.demo import demo_dataset_path
from helpdp.intervals import task_interval
from helpdp.ope import JACKKNIFE_GROUPS, estimate, load_logged, resolve_unit
from helpdp.policies import TablePolicy, TurnZero
from helpdp.subset import episode_subset


@dataclass(frozen=True)
class PolicyValue:
    """A fixed policy evaluated on a count model."""

    values: np.ndarray  # (n, 2 + K): S, M^1..M^K, fallback visits F per state
    expected_success: float
    expected_usage: np.ndarray  # (K,)
    fallback: float  # expected visits per episode to states evaluated by the behaviour

    @property
    def total_usage(self) -> float:
        return float(self.expected_usage.sum())


def policy_rows(mdp: MDP, action: np.ndarray) -> np.ndarray:
    """Row policy (probability per state-action row) of a deterministic ``action``
    per internal state (-1: none)."""
    return kf.deterministic_rows(mdp.sa_ptr, mdp.sa_action, action)


def policy_value(
    mdp: MDP,
    pi_row: np.ndarray,
    *,
    gamma: float,
    flag: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iters: int = 100_000,
) -> PolicyValue:
    """S, M^k (and visits to ``flag``-ged states) of the row policy ``pi_row``."""
    pi_row = np.ascontiguousarray(pi_row, np.float64)
    if pi_row.shape != (mdp.n_rows,):
        raise ValueError(f"pi_row must have one entry per row ({mdp.n_rows}), got {pi_row.shape}")
    flag = np.zeros(mdp.n_states) if flag is None else np.asarray(flag, np.float64)
    val = np.zeros((mdp.n_states, mdp.n_actions + 1))
    iters = 1 if mdp.acyclic else max_iters
    kf.evaluate_rows(mdp.order, mdp.graph, pi_row, flag, float(gamma), tol, iters, val)
    w = mdp.start_weight
    means = (w @ val) / w.sum()
    return PolicyValue(val, float(means[0]), means[1:-1].copy(), float(means[-1]))


def transfer_policy(
    src: Dataset, action: np.ndarray, dst: Dataset, *, unseen: str = "nohelp"
) -> tuple[np.ndarray, np.ndarray]:
    """Carry a deterministic policy of ``src`` (``action`` per internal state of
    ``src``) onto ``dst``'s rows, by state_id. Returns ``(pi_row, flag)``.

    At states where ``src`` had no action (never seen there), the policy takes
    nohelp (``unseen="nohelp"``) or the behaviour (``unseen="behavior"``). Where
    the action it takes was never observed in ``dst``, the row policy is ``dst``'s
    behaviour there (observed action frequencies) and ``flag`` is 1.
    """
    if unseen not in ("nohelp", "behavior"):
        raise ValueError(f"unseen must be 'nohelp' or 'behavior', got {unseen!r}")
    ids = src.state_ids
    act_by_id = pd.Series(np.asarray(action, np.int64), index=ids)
    want = act_by_id.reindex(dst.state_ids).fillna(-1).to_numpy(np.int64)
    if unseen == "nohelp":
        want = np.where(want < 0, 0, want)
    mdp = dst.mdp
    row_state = np.repeat(np.arange(mdp.n_states), np.diff(mdp.sa_ptr))
    match = (mdp.sa_action.astype(np.int64) == want[row_state]).astype(np.float64)
    has = np.bincount(row_state, weights=match, minlength=mdp.n_states) > 0
    totals = np.bincount(row_state, weights=mdp.sa_count, minlength=mdp.n_states)
    behaviour = mdp.sa_count / np.maximum(totals[row_state], 1)
    pi_row = np.where(has[row_state], match, behaviour)
    flag = ((~has) & (np.diff(mdp.sa_ptr) > 0)).astype(np.float64)
    return pi_row, flag


def split_episodes(ds: Dataset, folds: int = 2, seed: int = 0) -> pd.Series:
    """``episode_id -> fold``: within each (task, trigger probability) stratum the
    episodes are shuffled and dealt to the folds in turn, so every task (and every
    help rate) is in every fold as evenly as the counts allow."""
    if ds.steps is None:
        raise ValueError(f"{ds.path}: cross-fitting needs steps.parquet")
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    ep_ids = np.sort(ds.steps["episode_id"].unique())
    ep = pd.DataFrame({"episode_id": ep_ids})
    if ds.episodes is not None and "task_id" in ds.episodes.columns:
        cols = ["episode_id", "task_id"] + [
            c for c in ("trigger_p", "design") if c in ds.episodes.columns
        ]
        ep = ep.merge(ds.episodes[cols], on="episode_id", how="left")
    else:  # the task of an episode's first state
        first = ds.steps.sort_values(["episode_id", "t"]).groupby("episode_id").head(1)
        task = ds.states.set_index("state_id")["task_id"]
        ep["task_id"] = task.reindex(first["state_id"].to_numpy()).to_numpy()
    # a stage-2 design is a stratum of its own (its trigger_p is q at trigger states only)
    strata = [c for c in ("task_id", "trigger_p", "design") if c in ep.columns]
    rng = np.random.default_rng(seed)
    ep = ep.iloc[rng.permutation(len(ep))].reset_index(drop=True)
    rank = ep.groupby(strata, sort=False, dropna=False).cumcount().to_numpy()
    offset = ep.groupby(strata, sort=False, dropna=False).ngroup().to_numpy()
    # rotate the first fold per stratum, so odd strata do not all favour fold 0
    start = rng.integers(0, folds, offset.max() + 1)[offset]
    return pd.Series((rank + start) % folds, index=ep["episode_id"].to_numpy(), name="fold")


@dataclass
class CrossFit:
    """Per fold: the chosen policy's in-sample forecast and its held-out value."""

    table: pd.DataFrame  # one row per (repeat, fold)
    budget: float

    @property
    def expected_success(self) -> float:
        return float(self.table["heldout_success"].mean())

    @property
    def expected_usage(self) -> float:
        return float(self.table["heldout_usage"].mean())

    def summary(self) -> dict:
        t = self.table
        per_repeat = t.groupby("repeat")[["heldout_success", "heldout_usage"]].mean()
        se = per_repeat.std(ddof=1) / np.sqrt(len(per_repeat)) if len(per_repeat) > 1 else None
        return {
            "budget": self.budget,
            "heldout_success": self.expected_success,
            "heldout_usage": self.expected_usage,
            "heldout_success_se": None if se is None else float(se["heldout_success"]),
            "heldout_usage_se": None if se is None else float(se["heldout_usage"]),
            "insample_success": float(t["insample_success"].mean()),
            "insample_usage": float(t["insample_usage"].mean()),
            "fallback": float(t["fallback"].mean()),
            "folds": int(t["fold"].nunique()),
            "repeats": int(t["repeat"].nunique()),
        }


def cross_fit(
    ds: Dataset,
    budget: float,
    *,
    folds: int = 2,
    repeats: int = 5,
    seed: int = 0,
    unseen: str = "nohelp",
    max_solves: int = 200,
    fold_of: pd.Series | None = None,
    **solver_kw,
) -> CrossFit:
    """Choose on the other folds, evaluate on the held-out fold (module docstring).

    One intervention, ``rule=exact`` (the paper rule's PRM scores would have seen
    the held-out episodes). ``fold_of`` (``episode_id -> fold``) fixes the split
    (then one repeat); by default ``split_episodes`` draws one per repeat.
    ``solver_kw`` go to ``search_budget`` (tol, tie_tol...).
    """
    if ds.mdp.n_actions != 2:
        raise ValueError("cross_fit handles one intervention")
    gamma = ds.gamma
    rows = []
    fixed = fold_of
    if fixed is not None:
        repeats, folds = 1, int(fixed.max()) + 1
    for rep in range(repeats):
        fold_of = fixed if fixed is not None else split_episodes(ds, folds, seed + rep)
        for f in range(folds):
            held = fold_of.index[fold_of.to_numpy() == f]
            fit = fold_of.index[fold_of.to_numpy() != f]
            ds_fit, ds_held = episode_subset(ds, fit), episode_subset(ds, held)
            res = search_budget(
                ds_fit.mdp, budget, gamma=gamma, rule="exact", max_solves=max_solves, **solver_kw
            )
            parts = [(res.policy, 1.0 - (res.weight_more_help or 0.0))]
            if res.more_help is not None:
                parts.append((res.more_help, res.weight_more_help))
            s = u = fb = 0.0
            for pol, w in parts:
                pi_row, flag = transfer_policy(ds_fit, pol.action, ds_held, unseen=unseen)
                v = policy_value(ds_held.mdp, pi_row, gamma=gamma, flag=flag)
                s += w * v.expected_success
                u += w * v.total_usage
                fb += w * v.fallback
            rows.append(
                {
                    "repeat": rep,
                    "fold": f,
                    "fit_episodes": len(fit),
                    "heldout_episodes": len(held),
                    "r": res.r,
                    "insample_success": res.expected_success,
                    "insample_usage": res.expected_usage,
                    "heldout_success": s,
                    "heldout_usage": u,
                    "fallback": fb,
                }
            )
    return CrossFit(pd.DataFrame(rows), float(budget))


def ope_cross_fit(
    ds: Dataset,
    budget: float,
    *,
    folds: int = 2,
    seed: int = 0,
    estimator: str = "wdr",
    n_boot: int = 200,
    max_solves: int = 200,
    level: float = 0.95,
    **solver_kw,
) -> dict:
    """The DP's policy valued off-policy (``helpdp.ope``) on episodes it was not chosen
    on: per fold of ``split_episodes``, the budget search on the other folds' count
    model, deployed as a table (unseen states: nohelp), estimated by ``estimator`` on
    the held-out fold's logged episodes, with the paired difference from the turn-0
    rule. The folds' per-task estimates are averaged per task and the interval is
    Student-t across tasks (``helpdp.ope.MIN_TASKS`` tasks or more; fewer: the folds'
    within-task episode bootstraps, combined in quadrature). Also the diagnostics:
    agreeing episodes, those that deviate from the turn-0 rule, and the model's and
    the data's parts of the difference."""

    logged = load_logged(ds)
    logged.views()
    fold_of = split_episodes(ds, folds, seed)
    ep_fold = fold_of.reindex(logged.episodes["episode_id"].to_numpy()).to_numpy()
    n_tasks = logged.episodes["task_id"].nunique()
    unit = resolve_unit("auto", n_tasks)
    ref = TurnZero()
    names = np.unique(logged.episodes["task_id"].astype(str).to_numpy())
    clusters = dict(zip(names, ko.jackknife_groups(len(names), JACKKNIFE_GROUPS).tolist()))
    parts = []
    for f in range(folds):
        held = fold_of.index[fold_of.to_numpy() == f]
        fit = fold_of.index[fold_of.to_numpy() != f]
        ds_fit = episode_subset(ds, fit)
        res = search_budget(
            ds_fit.mdp, budget, gamma=ds.gamma, rule="exact", max_solves=max_solves, **solver_kw
        )

        def table(sol, ds_fit=ds_fit):
            fr = policy_frame(ds_fit, sol)
            return dict(zip(fr["state_id"].tolist(), fr["action"].astype(int).tolist()))

        more = table(res.more_help) if res.more_help is not None else None
        pol = TablePolicy(table(res.policy), more, res.weight_more_help or 0.0, seed=seed)
        e = estimate(
            pol,
            logged.subset(ep_fold == f),
            estimators=(estimator,),
            n_boot=n_boot,
            seed=seed,
            reference=ref,
            unit="task" if unit == "task" else "episode",
            level=level,
            clusters=clusters,
        )
        parts.append((len(held), e))
    n = sum(p[0] for p in parts)
    out = {
        "estimator": estimator,
        "folds": folds,
        "unit": unit,
        "reference": ref.name,
        "tasks": int(n_tasks),
    }
    pt = pd.concat([e.per_task for _, e in parts], ignore_index=True)
    for q in ("SR", "U", "dSR", "dU"):
        if unit == "task":
            sel = pt[(pt["estimator"] == estimator) & (pt["quantity"] == q)]
            by = sel.groupby("task").agg(value=("value", "mean"), group=("group", "first"))
            v, lo, hi, _ = task_interval(by["value"].to_numpy(), by["group"].to_numpy(), level)
        else:
            got = [(k / n, e.get(estimator, q)) for k, e in parts]
            v = sum(w * g[0] for w, g in got)
            hw = float(np.sqrt(sum((w * (g[2] - g[1]) / 2) ** 2 for w, g in got)))
            lo, hi = v - hw, v + hw
        out.update({q: float(v), f"{q}_lo": float(lo), f"{q}_hi": float(hi)})
    for k in ("agree", "episodes", "deviate", "deviate_ref", "tasks_empty"):
        out[k] = int(sum(e.diagnostics[k] for _, e in parts))
    for i, k in enumerate(("dSR_model", "dSR_data")):
        out[k] = float(sum(m / n * e.diagnostics["parts"][estimator]["dSR"][i] for m, e in parts))
    return out


def pessimistic_mdp(mdp: MDP, kappa: float, *, choices_only: bool = True) -> MDP:
    """The count model with ``kappa`` failed pseudo-visits per (state, action): a
    row with n visits keeps ``n / (n + kappa)`` of its probabilities and sends
    ``kappa / (n + kappa)`` to a new terminal failure state (index ``n_states``).
    ``choices_only``: only at states with two or more observed actions."""
    if kappa < 0:
        raise ValueError(f"kappa must be >= 0, got {kappa}")
    n = mdp.n_states
    n_rows_of = np.diff(mdp.sa_ptr)
    row_state = np.repeat(np.arange(n), n_rows_of)
    extra = np.ones(mdp.n_rows, bool) if not choices_only else (n_rows_of[row_state] >= 2)
    extra &= kappa > 0
    shrink = np.where(extra, mdp.sa_count / (mdp.sa_count + kappa), 1.0)
    lens = np.diff(mdp.tr_ptr)
    new_lens = lens + extra
    tr_ptr = np.r_[0, np.cumsum(new_lens)].astype(np.int64)
    tr_next = np.empty(tr_ptr[-1], np.int32)
    tr_prob = np.empty(tr_ptr[-1], np.float64)
    # old transitions keep their order at the start of each row; the sink goes last
    pos_old = np.repeat(tr_ptr[:-1], lens) + (
        np.arange(mdp.n_transitions) - np.repeat(mdp.tr_ptr[:-1], lens)
    )
    tr_next[pos_old] = mdp.tr_next
    tr_prob[pos_old] = mdp.tr_prob * np.repeat(shrink, lens)
    sink_pos = tr_ptr[1:][extra] - 1
    tr_next[sink_pos] = n
    tr_prob[sink_pos] = 1.0 - shrink[extra]
    return MDP(
        sa_ptr=np.r_[mdp.sa_ptr, mdp.sa_ptr[-1]].astype(np.int64),
        sa_action=mdp.sa_action,
        sa_count=mdp.sa_count,
        tr_ptr=tr_ptr,
        tr_next=tr_next,
        tr_prob=tr_prob,
        terminal=np.r_[mdp.terminal, True],
        success=np.r_[mdp.success, False],
        start_weight=np.r_[mdp.start_weight, 0.0],
        order=np.r_[n, mdp.order].astype(np.int64),  # the sink is backed up first
        block_ptr=np.r_[0, mdp.block_ptr + 1].astype(np.int64),
        acyclic=mdp.acyclic,
        n_actions=mdp.n_actions,
    )


def pessimistic_search(
    ds: Dataset, budget: float, kappa: float = 1.0, *, choices_only: bool = True, **search_kw
) -> dict:
    """The budget search on ``pessimistic_mdp``: its E[S], E[U], and the plain
    model's (optimistic) values of the same policies for comparison."""
    pm = pessimistic_mdp(ds.mdp, kappa, choices_only=choices_only)
    res = search_budget(pm, budget, gamma=ds.gamma, rule="exact", **search_kw)
    parts = [(res.policy, 1.0 - (res.weight_more_help or 0.0))]
    if res.more_help is not None:
        parts.append((res.more_help, res.weight_more_help))
    s_plain = u_plain = 0.0
    for pol, w in parts:
        v = policy_value(ds.mdp, policy_rows(ds.mdp, pol.action[:-1]), gamma=ds.gamma)
        s_plain += w * v.expected_success
        u_plain += w * v.total_usage
    return {
        "budget": float(budget),
        "kappa": float(kappa),
        "r": res.r,
        "pessimistic_success": res.expected_success,
        "pessimistic_usage": res.expected_usage,
        "plain_model_success": s_plain,
        "plain_model_usage": u_plain,
    }


@dataclass
class ForecastConfig(SolverConfig):
    """`python -m helpdp.forecast`: the DP's forecast next to cross-fitted and pessimistic ones."""

    data: Any = _f(None, "dataset directory; null runs on the embedded demo dataset")
    budget: Any = _f(1.0, "expected expert calls per episode (a list: several budgets)")
    folds: int = _f(2, "cross-fitting: folds of episodes (choose on the rest, evaluate on one)")
    repeats: int = _f(5, "cross-fitting: random splits averaged")
    seed: int = _f(0, "cross-fitting: seed of the first split")
    unseen: str = _f(
        "nohelp", "cross-fitting: action at states the choosing half never saw (nohelp|behavior)"
    )
    kappa: list = _f(
        [0.5, 1.0, 2.0], "pessimistic backup: failed pseudo-visits per (state, action) to try"
    )
    out: Any = _f(None, "write forecast.json here (a directory); null: print only")
    max_solves: int = _f(200, "most solves one budget search may use")
    ope: bool = _f(
        True,
        "also value the DP's policy off-policy (helpdp.ope) on held-out episodes: chosen on "
        "the other folds, estimated from the logged episodes with the schedule's known "
        "trigger probabilities (needs episodes.parquet and steps.parquet)",
    )
    ope_estimator: str = _f("wdr", "off-policy estimator (helpdp.ope.ESTIMATORS)")
    ope_boot: int = _f(200, "bootstrap replicates of the off-policy interval")


#: a forecast E[U] over ``budget * (1 + OVER_BUDGET)`` is flagged
OVER_BUDGET = 0.05


def over_budget(budget: float, usages: dict) -> list[str]:
    """One line per forecast (name -> E[U]) that spends more than ``OVER_BUDGET`` over
    ``budget`` calls per episode (the DP's in-sample E[U] meets the budget by
    construction; held out, the chosen policy may not)."""
    b = float(budget)
    return [
        f"budget {b:g}: OVER BUDGET: the {name} policy spends E[U]={u:.3f} calls/episode, "
        f"{(u / b - 1) * 100:.0f}% over the budget"
        for name, u in usages.items()
        if u is not None and b > 0 and u > b * (1 + OVER_BUDGET)
    ]


def run_forecast(cfg: ForecastConfig) -> list[dict]:
    """The body of ``python -m helpdp.forecast``."""

    if cfg.rule != "exact":
        raise ValueError("forecast: rule=exact only (a PRM fitted on all episodes would leak)")
    budgets = parse_budgets(cfg.budget)  # before the data loads
    data = Path(cfg.data) if cfg.data else demo_dataset_path()
    ds = load_dataset(data, gamma=cfg.gamma)
    kw = {"tol": cfg.tol, "max_iters": cfg.max_iters, "tie_tol": cfg.tie_tol}
    out = []
    for b in budgets:
        t0 = time.perf_counter()
        dp = search_budget(ds.mdp, float(b), gamma=ds.gamma, max_solves=cfg.max_solves, **kw)
        cf = cross_fit(
            ds,
            float(b),
            folds=cfg.folds,
            repeats=cfg.repeats,
            seed=cfg.seed,
            unseen=cfg.unseen,
            max_solves=cfg.max_solves,
            **kw,
        )
        pess = [
            pessimistic_search(ds, float(b), float(k), max_solves=cfg.max_solves, **kw)
            for k in cfg.kappa
        ]
        ope = None
        if cfg.ope:
            ope = ope_cross_fit(
                ds,
                float(b),
                folds=cfg.folds,
                seed=cfg.seed,
                estimator=cfg.ope_estimator,
                n_boot=cfg.ope_boot,
                max_solves=cfg.max_solves,
                **kw,
            )
        rec = {
            "budget": float(b),
            "dp": {"expected_success": dp.expected_success, "expected_usage": dp.expected_usage},
            "cross_fit": cf.summary(),
            "pessimistic": pess,
            "ope": ope,
            "seconds": time.perf_counter() - t0,
        }
        cs = rec["cross_fit"]
        usages = {"cross-fitted (held-out)": cs["heldout_usage"]}
        if ope is not None:
            usages["OPE (held-out)"] = ope["U"]
        rec["over_budget"] = over_budget(b, usages)
        print(
            f"budget {b:g}: DP E[S]={dp.expected_success:.4f} E[U]={dp.expected_usage:.4f} | "
            f"cross-fit E[S]={cs['heldout_success']:.4f} E[U]={cs['heldout_usage']:.4f} "
            f"(in-sample {cs['insample_success']:.4f}, fallback {cs['fallback']:.3f}/episode) | "
            + (
                ""
                if ope is None
                else f"OPE ({ope['estimator']}, held out) SR={ope['SR']:.4f} "
                f"[{ope['SR_lo']:.4f}, {ope['SR_hi']:.4f}] U={ope['U']:.4f}; minus "
                f"{ope['reference']}: dSR={ope['dSR']:+.4f} [{ope['dSR_lo']:+.4f}, "
                f"{ope['dSR_hi']:+.4f}] = model {ope['dSR_model']:+.4f} + data "
                f"{ope['dSR_data']:+.4f}; agree {ope['agree']}/{ope['episodes']}, deviating "
                f"from it {ope['deviate']} (its own {ope['deviate_ref']}) | "
            )
            + "  ".join(
                f"pessimistic(kappa={p['kappa']:g}) E[S]={p['pessimistic_success']:.4f}"
                for p in pess
            )
        )
        for line in rec["over_budget"]:
            print(line)
        out.append(rec)
    if cfg.out:
        d = Path(cfg.out)
        d.mkdir(parents=True, exist_ok=True)
        (d / "forecast.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


def main() -> None:

    run_app("helpdp.forecast", ForecastConfig, run_forecast, config_name="forecast")


if __name__ == "__main__":
    main()
