"""`python -m helpdp.label data=DIR budget=C strategy=all_states|trajectory_only out=LABELS`

Labels for the helper (paper Sec. 6): the budgeted DP's decision at each state.

**Which tasks choose the policy.** The budget search runs on the tasks of
``search_splits`` only (default: train), so the help cost r never sees a
validation or test task. The policy is then solved at that r on every task:
tasks are disconnected components of the state graph, so on the search tasks the
labels are exactly the search's policies, and on the other tasks they are what
the same DP, at the same help cost, chooses from their own counts (the
validation labels on which the helper's thresholds are picked). The ``split``
column (from episodes.parquet, else a hash of the task, as ``prm.data``) lets
every consumer keep to train tasks.

**Strategies.** ``all_states``: every collected non-terminal state with an
observed action. ``trajectory_only``: the states reachable from the start states
by following the policy through observed transitions (under either policy of a
mixture). ``on_path`` says which rows are on those paths in either case.

**Mixtures.** Where the budget falls between two deterministic policies, the
optimum follows the more-help policy with probability ``w`` per episode. Both
are recorded: ``label`` is the less-help policy's action (the one of
policy.parquet, never over budget), ``label_more_help`` the other's, and
``weight_more_help`` is ``w`` (0 when not mixed). ``p_<action>`` is the
probability of each action at the state under the mixture,
``(1 - w)[label = a] + w[label_more_help = a]``: **the helper trains on these
soft targets** (cross-entropy against the mixture's action distribution), which
carries the breakpoint's randomisation into the classifier instead of rounding it
away. With K > 1 interventions (``budgets.<name>=C``) the column-generation
mixture of up to K + 1 policies is recorded the same way: ``label`` is
policy.parquet's component, ``label_more_help`` the mixture's most likely action,
``p_<action>`` the mixture's distribution.

Several budgets (``budget=[0.5,1,2]``) give one block of rows per budget, from one
load: one helper can then be trained for every budget.

**A policy instead of the DP** (``policy=``): a ``selected.json`` of
``helpdp.select`` or any ``helpdp.policies.build_policy`` spec (event rules included):
each state's ``p_<action>`` is that policy's action distribution over the state's
logged visits. Every run prints the hard labels' help share and the **soft help
mass** (the mean help probability of the soft targets), which differ where the
policy mixes: a mixture's rows can carry help mass while no hard label is help.

Output, in the directory ``out``: ``labels.parquet`` (``state_id, task_id, split,
depth, text, label, label_more_help, weight_more_help, p_<action>..., r, budget,
on_path, visits, success, usage, strategy, rule``) and ``labels.json`` (the
configuration and, per budget, the search result and label counts).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpdp._src.forecast import deterministic_rows, reachable
from helpdp.budget import mix_budgets, search_budget
from helpdp.cliconf import UsageError, parse_budgets, run_app
from helpdp.cliconf import doc_field as _f
from helpdp.config import SolverConfig
from helpdp.data import Dataset, load_dataset
from helpdp.demo import demo_dataset_path
from helpdp.ope import load_logged
from helpdp.policies import action_probs, build_policy, components, policy_spec
from helpdp.select import load_policy
from helpdp.solve import Solution, score_rows, solve
from helpdp.splits import task_splits
from helpdp.subset import task_subset

STRATEGIES = ("all_states", "trajectory_only")


@dataclass
class LabelConfig(SolverConfig):
    """`python -m helpdp.label`: the DP's decisions as training labels for the helper."""

    data: Any = _f(None, "dataset directory; null runs on the embedded demo dataset")
    budget: Any = _f(
        1.0, "expected expert calls per episode; a list (budget=[0.5,1,2]) labels every budget"
    )
    budgets: dict = _f(
        {},
        "K > 1 interventions: per-intervention budgets, e.g. budgets.expert=1 budgets.oracle=0.5",
    )
    strategy: str = _f(
        "all_states",
        "all_states: every collected non-terminal state; trajectory_only: the states the "
        "policy reaches from the start states",
    )
    out: str = _f("outputs/labels", "output directory (labels.parquet, labels.json)")
    search_splits: list = _f(
        ["train"], "splits whose tasks choose the help cost r (the budget search runs on them)"
    )
    label_splits: list = _f(["train", "validation", "test"], "splits whose states get label rows")
    val_fraction: float = _f(
        0.2, "share of tasks in validation when episodes.parquet gives no split"
    )
    test_fraction: float = _f(0.2, "share of tasks in test when episodes.parquet gives no split")
    split_seed: int = _f(0, "seed of the task-hash split (prm.data.hash_split)")
    max_solves: int = _f(200, "most solves one budget search may use")
    quiet: bool = _f(False, "print only the summary lines")
    policy: Any = _f(
        None,
        "label every collected state with a policy's action distribution over its logged "
        "visits instead of the DP's decisions: a selected.json of python -m helpdp.select (or "
        "its directory; the rows are filed under its budget) or any helpdp.policies."
        "build_policy spec (turn0, turns:0,2, turn0+after:repeat,failed+max:2, ...; filed "
        "under budget, one number)",
    )


def task_split(ds: Dataset, *, val_fraction=0.2, test_fraction=0.2, seed=0) -> pd.Series:
    """``task_id -> split`` (episodes.parquet's column, else a hash of the task)."""

    return task_splits(ds, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed)


def _components(ds: Dataset, sub: Dataset, budget, kw: dict, max_solves: int, log):
    """Search on ``sub``; return ``(components, summary)`` where components are
    ``(r, weight)`` pairs, the deterministic (less-help) one first."""
    mdp = sub.mdp
    if mdp.n_actions == 2:
        p_row = score_rows(sub) if kw["rule"] == "paper" else None
        res = search_budget(mdp, float(budget), p_row=p_row, max_solves=max_solves, log=log, **kw)
        w = res.weight_more_help or 0.0
        comps = [(res.policy.r, 1.0 - w)]
        if res.more_help is not None:
            comps.append((res.more_help.r, w))
        return comps, res.to_json()
    if kw["rule"] != "exact":
        raise ValueError("per-intervention budgets are searched with rule=exact")
    b = np.asarray(budget, np.float64)
    skw = {k: v for k, v in kw.items() if k not in ("rule", "dm_tol")}
    pols, w, solves = mix_budgets(mdp, b, max_solves=max_solves, log=log, **skw)
    fits = [i for i, p in enumerate(pols) if np.all(p.expected_usage <= b + 1e-12)]
    det = max(fits, key=lambda i: pols[i].expected_success)
    order = [det] + [i for i in range(len(pols)) if i != det]
    comps = [(pols[i].r, float(w[i])) for i in order]
    summary = {
        "budget": b.tolist(),
        "r": pols[det].r.tolist(),
        "expected_usage": np.sum([wi * p.expected_usage for wi, p in zip(w, pols)], 0).tolist(),
        "expected_success": float(sum(wi * p.expected_success for wi, p in zip(w, pols))),
        "components": [{"weight": float(w[i]), "r": pols[i].r.tolist()} for i in order],
        "solves": solves,
    }
    return comps, summary


def label_frame(
    ds: Dataset,
    sols: list[tuple[Solution, float]],
    splits: pd.Series,
    *,
    strategy: str,
    label_splits,
) -> pd.DataFrame:
    """Label rows of the policies ``sols`` (``(solution, weight)``, the less-help /
    deterministic one first) solved on the whole of ``ds``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")

    mdp = ds.mdp
    na = mdp.n_actions
    det = sols[0][0]
    probs = np.zeros((mdp.n_states, na))
    for sol, w in sols:
        ok = sol.action >= 0
        probs[np.flatnonzero(ok), sol.action[ok].astype(np.int64)] += w
    on_path = np.zeros(mdp.n_states, bool)
    for sol, w in sols:
        if w <= 0 and sol is not det:
            continue
        pi = deterministic_rows(mdp.sa_ptr, mdp.sa_action, sol.action)
        on_path |= reachable(mdp.start_weight > 0, mdp.sa_ptr, mdp.tr_ptr, mdp.tr_next, pi)
    keep = det.action >= 0
    if strategy == "trajectory_only":
        keep &= on_path
    idx = np.flatnonzero(keep)
    if len(sols) == 2:
        more = sols[1][0].action[idx]
        w_more = sols[1][1]
    elif len(sols) > 2:
        more = np.argmax(probs[idx], axis=1).astype(np.int8)
        w_more = float("nan")
    else:
        more = det.action[idx]
        w_more = 0.0
    visits = np.bincount(
        np.repeat(np.arange(mdp.n_states), np.diff(mdp.sa_ptr)),
        weights=mdp.sa_count,
        minlength=mdp.n_states,
    )
    sid = ds.state_ids[idx]
    st = ds.states.set_index("state_id").loc[sid]
    task = st["task_id"].astype(str).to_numpy()
    split = splits.reindex(task).to_numpy()
    df = pd.DataFrame(
        {
            "state_id": sid.astype(np.int64),
            "task_id": task,
            "split": split,
            "depth": st["depth"].to_numpy(np.int32),
            "text": st["text"].astype(str).to_numpy(),
            "label": det.action[idx].astype(np.int8),
            "label_more_help": more.astype(np.int8),
            "weight_more_help": np.float64(w_more),
        }
    )
    for a, name in enumerate(ds.actions):
        df[f"p_{name}"] = probs[idx, a]
    df["on_path"] = on_path[idx]
    df["visits"] = visits[idx].astype(np.int64)
    df["success"] = det.values[idx, 1]
    df["usage"] = det.values[idx, 2:].sum(axis=1)
    df = df[df["split"].isin(list(label_splits))]
    return df.sort_values("state_id", ignore_index=True)


def help_shares(df: pd.DataFrame, actions) -> tuple[float, float]:
    """``(share of rows whose hard label is help, soft help mass)``: the mass is the mean
    over rows of the soft targets' help probability (``1 - p_<nohelp>``), what the helper
    trains on; a mixture's rows can carry help mass while no hard label is help."""
    if not len(df):
        return math.nan, math.nan
    return float((df["label"] > 0).mean()), float(1.0 - df[f"p_{actions[0]}"].mean())


def make_labels(ds: Dataset, cfg) -> tuple[pd.DataFrame, dict]:
    """Label rows for every budget of ``cfg`` (a ``LabelConfig``-shaped mapping) and
    a summary (``labels.json``)."""
    say = (lambda *a: None) if cfg.quiet else print
    splits = task_split(
        ds, val_fraction=cfg.val_fraction, test_fraction=cfg.test_fraction, seed=cfg.split_seed
    )
    search_tasks = splits.index[splits.isin(list(cfg.search_splits))]
    if len(search_tasks) == 0:
        raise ValueError(f"{ds.path}: no task in search_splits {list(cfg.search_splits)}")
    sub = ds if len(search_tasks) == len(splits) else task_subset(ds, search_tasks)
    kw = dict(
        gamma=ds.gamma,
        rule=cfg.rule,
        tol=cfg.tol,
        max_iters=cfg.max_iters,
        tie_tol=cfg.tie_tol,
        dm_tol=cfg.dm_tol,
    )
    p_row_full = score_rows(ds) if cfg.rule == "paper" else None
    if ds.mdp.n_actions > 2:
        names = ds.actions[1:]
        missing = [n for n in names if n not in (cfg.budgets or {})]
        if missing:
            raise ValueError(f"give budgets.<name>=C for {missing} (interventions {names})")
        budget_list = [np.array([float(cfg.budgets[n]) for n in names])]
    else:
        b = cfg.budget
        budget_list = [float(x) for x in (b if not isinstance(b, (int, float)) else [b])]
    frames, per_budget = [], []
    for b in budget_list:
        t0 = time.perf_counter()
        comps, summary = _components(ds, sub, b, kw, cfg.max_solves, say if not cfg.quiet else None)
        sols = [(solve(ds.mdp, r, p_row=p_row_full, **kw), w) for r, w in comps]
        df = label_frame(ds, sols, splits, strategy=cfg.strategy, label_splits=cfg.label_splits)
        df["r"] = float(np.asarray(summary["r"]).ravel()[0])
        df["budget"] = float(np.sum(b))
        if ds.mdp.n_actions > 2:
            for name, bk in zip(ds.actions[1:], np.asarray(b)):
                df[f"budget_{name}"] = float(bk)
        df["strategy"] = cfg.strategy
        df["rule"] = cfg.rule
        counts = {
            split: {ds.actions[a]: int((g["label"] == a).sum()) for a in range(len(ds.actions))}
            for split, g in df.groupby("split")
        }
        per_budget.append({**summary, "label_counts": counts, "rows": len(df)})
        frames.append(df)
        help_rate, mass = help_shares(df, ds.actions)
        per_budget[-1].update({"help_label_share": help_rate, "soft_help_mass": mass})
        print(
            f"budget {np.round(np.asarray(b), 6).tolist()}: r={df['r'].iloc[0] if len(df) else float('nan'):.6g} "
            f"E[U]={np.sum(summary['expected_usage']):.4f} E[S]={summary['expected_success']:.4f} "
            f"(search tasks: {len(search_tasks)})  {len(df)} rows, help label on {help_rate:.1%}, "
            f"soft help mass {mass:.3f}  [{time.perf_counter() - t0:.2f}s]"
        )
    labels = pd.concat(frames, ignore_index=True)
    meta = {
        "data": None if ds.path is None else str(ds.path),
        "actions": list(ds.actions),
        "strategy": cfg.strategy,
        "rule": cfg.rule,
        "gamma": ds.gamma,
        "search_splits": list(cfg.search_splits),
        "label_splits": list(cfg.label_splits),
        "search_tasks": int(len(search_tasks)),
        "budgets": per_budget,
        "training_target": "p_<action> (the mixture's action distribution, soft labels)",
    }
    return labels, meta


def write_labels(labels: pd.DataFrame, meta: dict, out: str | Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labels.to_parquet(out / "labels.parquet", index=False)
    (out / "labels.json").write_text(json.dumps(meta, indent=2, default=float) + "\n")
    return out


def read_labels(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """``labels.parquet`` and ``labels.json`` from a label directory (or the
    Parquet file itself, with its sibling JSON when present)."""
    path = Path(path)
    pq_file = path / "labels.parquet" if path.is_dir() else path
    if not pq_file.exists():
        raise FileNotFoundError(f"{pq_file}: no labels (write them with python -m helpdp.label)")
    js = pq_file.with_suffix(".json")
    meta = json.loads(js.read_text()) if js.exists() else {}
    return pd.read_parquet(pq_file), meta


def _policy_and_budget(cfg):
    """The policy of ``cfg.policy`` (a spec or a selected.json), the budget its rows are
    filed under, and the selection record (``{}`` for a spec)."""
    spec = str(cfg.policy)
    try:
        policy = build_policy(spec, seed=0, load_json=load_policy)
    except ValueError as e:
        raise UsageError(f"policy: {e}") from None
    path = Path(spec)
    sel = path / "selected.json" if path.is_dir() else path
    if sel.suffix == ".json" and sel.is_file():
        rec = json.loads(sel.read_text())
        return policy, float(rec.get("budget", math.nan)), rec
    budgets = parse_budgets(cfg.budget)
    if len(budgets) != 1:
        raise UsageError(f"budget: policy={spec} labels one budget, got {budgets}")
    return policy, float(budgets[0]), {}


def policy_labels(ds: Dataset, cfg) -> tuple[pd.DataFrame, dict]:
    """``helpdp.label policy=SPEC``: label rows from a policy (a selected.json or any
    :func:`helpdp.policies.build_policy` spec, event rules included). Each collected
    non-terminal state's ``p_<action>`` is the policy's action distribution (its
    per-episode mixture included) averaged over the state's logged visits, ``label``
    the likeliest action (ties: less help); the columns are ``helpdp.label``'s."""

    policy, budget, rec = _policy_and_budget(cfg)
    splits = task_split(
        ds, val_fraction=cfg.val_fraction, test_fraction=cfg.test_fraction, seed=cfg.split_seed
    )
    logged = load_logged(ds)
    views = logged.views()
    na = logged.n_actions
    probs = sum(w * action_probs(c, views, na) for w, c in components(policy))
    sid = logged.steps["state_id"].to_numpy(np.int64)
    g = pd.DataFrame(probs, columns=[f"p_{a}" for a in ds.actions]).groupby(sid)
    mean, visits = g.mean(), g.size()
    st = ds.states.set_index("state_id").loc[mean.index]
    task = st["task_id"].astype(str).to_numpy()
    p = mean.to_numpy()
    label = np.argmax(p >= p.max(axis=1, keepdims=True) - 1e-12, axis=1).astype(np.int8)
    df = pd.DataFrame(
        {
            "state_id": mean.index.to_numpy(np.int64),
            "task_id": task,
            "split": splits.reindex(task).to_numpy(),
            "depth": st["depth"].to_numpy(np.int32),
            "text": st["text"].astype(str).to_numpy(),
            "label": label,
            "label_more_help": label,
            "weight_more_help": 0.0,
        }
    )
    for c in mean.columns:
        df[c] = mean[c].to_numpy()
    rule = "select" if rec else "policy"
    df = df.assign(
        on_path=True,
        visits=visits.to_numpy(np.int64),
        success=math.nan,
        usage=math.nan,
        r=math.nan,
        budget=budget,
        strategy="all_states",
        rule=rule,
    )
    df = df[df["split"].isin(list(cfg.label_splits))].sort_values("state_id", ignore_index=True)
    help_rate, mass = help_shares(df, ds.actions)
    print(
        f"budget {budget:g}: labels from {policy.name}: {len(df)} rows, help label on "
        f"{help_rate:.1%}, soft help mass {mass:.3f} (the mean help probability of the "
        "soft targets the helper trains on)"
    )
    meta = {
        "data": None if ds.path is None else str(ds.path),
        "actions": list(ds.actions),
        "strategy": "all_states",
        "rule": rule,
        "policy": str(cfg.policy),
        "policy_spec": policy_spec(policy),
        "selection": {k: rec.get(k) for k in ("budget", "policy_name", "ope", "tasks")}
        if rec
        else None,
        "label_splits": list(cfg.label_splits),
        "budgets": [
            {
                "budget": budget,
                "rows": len(df),
                "help_label_share": help_rate,
                "soft_help_mass": mass,
            }
        ],
        "training_target": "p_<action> (the policy's action distribution, soft labels)",
    }
    return df, meta


def run_label(cfg: LabelConfig) -> tuple[pd.DataFrame, dict]:
    """The body of ``python -m helpdp.label``."""

    per_name = {str(k): parse_budgets(v, f"budgets.{k}")[0] for k, v in (cfg.budgets or {}).items()}
    parse_budgets(cfg.budget)  # before the data loads: a typo costs nothing
    if cfg.strategy not in STRATEGIES:  # before the search, not after it
        raise UsageError(f"strategy: {cfg.strategy!r} is not one of {', '.join(STRATEGIES)}")
    data = Path(cfg.data) if cfg.data else demo_dataset_path()
    ds = load_dataset(data, gamma=cfg.gamma)
    unknown = sorted(set(per_name) - set(ds.actions[1:]))
    if unknown:
        raise UsageError(
            f"budgets.{unknown[0]}: the dataset has no intervention {unknown[0]!r} (its "
            f"interventions: {ds.actions[1:]})"
        )
    if per_name and ds.mdp.n_actions == 2:  # budgets.<the one intervention>=C is budget=C
        cfg.budget = per_name[ds.actions[1]]
    if cfg.policy:
        labels, meta = policy_labels(ds, cfg)
    else:
        labels, meta = make_labels(ds, cfg)
    out = write_labels(labels, meta, cfg.out)
    print(f"{len(labels)} label rows -> {out / 'labels.parquet'}")
    return labels, meta


def main() -> None:
    run_app("helpdp.label", LabelConfig, run_label, config_name="label")


if __name__ == "__main__":
    main()
