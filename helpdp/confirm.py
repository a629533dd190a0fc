"""The confirmation's parts of ``helpdp.select`` (high-confidence policy improvement).

The rules' hull at a budget (:func:`rules_hull`: the best mixture of never and the
hand rules, each valued on its own agreeing episodes) and one candidate's test on the
confirmation fold against a policy it would replace (:func:`confirm_one`: a paired
lower bound above 0 at a corrected level, a data part above 0, a model-free estimate
above 0, support and budget). :mod:`helpdp.select` orders the candidates and decides.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpdp.intervals import task_interval
from helpdp.ope import estimate
from helpdp.policies import AtTurns, Never
from helpdp.selected import MixturePolicy

__all__ = [
    "as_policy",
    "confirm_one",
    "hull_at",
    "mix_name",
    "pooled_interval",
    "rule_lead",
    "rule_values",
    "rules_hull",
    "task_groups",
    "task_values",
]


def hull_at(points: pd.DataFrame, budget: float):
    """The best point at ``budget`` on the upper concave hull of (U, SR): ``[(weight,
    row index)]`` (one or two rows), or None when no point spends at most the budget."""
    p = points.sort_values(["U", "SR"], ascending=[True, False])
    ok = p[p["U"] <= budget]
    if ok.empty:
        return None
    best = ok.loc[ok["SR"].idxmax()]
    out = [(1.0, best.name)]
    best_sr = float(best["SR"])
    for i, a in ok.iterrows():  # mixtures of a cheaper and a dearer point
        for j, b in p[p["U"] > budget].iterrows():
            lam = (budget - a["U"]) / (b["U"] - a["U"])
            sr = (1 - lam) * a["SR"] + lam * b["SR"]
            if sr > best_sr + 1e-12:
                best_sr, out = sr, [(1.0 - lam, i), (lam, j)]
    return out


def task_values(per_task: pd.DataFrame, estimator: str, quantity: str) -> np.ndarray:
    r = per_task[(per_task["estimator"] == estimator) & (per_task["quantity"] == quantity)]
    return r.sort_values("task")["value"].to_numpy()


def task_groups(per_task: pd.DataFrame, estimator: str, quantity: str) -> np.ndarray:
    """The jackknife group of each of :func:`task_values`, per fold where the values
    pool several folds (``fold:group``: a fold's groups are its own)."""
    r = per_task[(per_task["estimator"] == estimator) & (per_task["quantity"] == quantity)]
    r = r.sort_values("task")
    g = r["group"].astype(str)
    return (r["fold"].astype(str) + ":" + g if "fold" in r else g).to_numpy()


def pooled_interval(per_task, estimator, quantity, level, values=None):
    """``(value, lo, hi, tasks)`` of the per-task values (``values`` instead: e.g. a
    mixture's, aligned with :func:`task_values`) with the jackknife's groups as the unit
    (:func:`helpdp.intervals.task_interval`)."""
    v = task_values(per_task, estimator, quantity) if values is None else values
    return task_interval(v, task_groups(per_task, estimator, quantity), level)


def mix_name(mix) -> str:
    """``[(weight, candidate row)]`` as printed: ``name weight / name weight``."""
    return " / ".join(f"{r['candidate']} {w:.2f}" for w, r in mix)


def as_policy(parts, seed):
    return parts[0][1] if len(parts) == 1 else MixturePolicy(parts, seed=seed)


def rule_values(cands, per_task, ref, cfg, confirm, unit) -> dict:
    """Each rule's per-task values, ``{row index: (U, SR)}`` (arrays over the selection
    tasks in task order): the rules are never, ``rules`` and the reference where it is a
    rule, with at least ``min_support`` agreeing episodes of their own in every fold (a
    rule's value needs no deviation from the reference, only its own episodes); each is
    valued on every selection task: its cross-fitted per-task values on the choice's
    tasks and (``confirm`` given) its estimates on the confirmation fold (rules are fitted
    to nothing, so the fold is fair to them)."""
    pols = {p.name: p for p in [Never(), *(AtTurns(tuple(r)) for r in cfg.rules), ref]}
    rules = cands[cands["candidate"].isin(set(pols)) & (cands["agree_min"] >= cfg.min_support)]
    vals = {}
    for i, row in rules.iterrows():
        pt = [per_task[row["candidate"]]]
        if confirm is not None:
            est = estimate(
                pols[row["candidate"]], confirm, estimators=(cfg.estimator,), n_boot=cfg.n_boot,
                level=cfg.level, seed=cfg.seed, unit=unit,
            )  # fmt: skip
            if est.diagnostics["agree"] < cfg.min_support:
                continue
            pt.append(est.per_task)
        vals[i] = tuple(np.concatenate([task_values(t, cfg.estimator, q) for t in pt])
                        for q in ("U", "SR"))  # fmt: skip
    return vals


def rules_hull(cands, per_task, ref, budget, cfg, confirm, unit, values=None):
    """The best rule at the budget: the best point at the budget on the hull of the rules
    (:func:`rule_values`, or ``values`` of it), by their mean over the selection tasks.
    Returns ``[(weight, candidate row)]``."""
    vals = rule_values(cands, per_task, ref, cfg, confirm, unit) if values is None else values
    table = pd.DataFrame(
        [(u.mean(), sr.mean()) for u, sr in vals.values()], index=list(vals), columns=["U", "SR"]
    )
    pick = hull_at(table, budget + cfg.slack)
    if pick is None:
        raise ValueError(f"budget {budget:g}: no rule with support spends at most the budget")
    return [(w, cands.loc[i]) for w, i in pick]


def rule_lead(values: dict, pick, ref_index, n_boot: int, seed: int, margin: float = 0.0) -> float:
    """How well the best rule's lead over the reference is estimated: the share of
    ``n_boot`` resamples of the selection tasks (with replacement, tasks as the unit, paired)
    in which ``pick`` (``[(weight, candidate row)]``, at its weights) has an SR higher than
    the reference's (row ``ref_index``) by more than ``margin``. 0 where the reference is
    not among ``values`` or the rules are not valued on the same tasks."""
    if ref_index not in values or any(r.name not in values for _, r in pick):
        return 0.0
    if len({len(u) for u, _ in values.values()} | {len(s) for _, s in values.values()}) != 1:
        return 0.0
    diff = sum(w * values[r.name][1] for w, r in pick) - values[ref_index][1]
    rng = np.random.default_rng(seed)
    n = len(diff)
    means = diff[rng.integers(0, n, (n_boot, n))].mean(axis=1)
    return float((means > margin).mean())


def confirm_one(pol, name, confirm, ref, budget, cfg, level, unit) -> dict:
    """One candidate on the confirmation fold: its paired estimates against ``ref`` (what
    it would replace: the rules' hull at the budget) and why it fails the bar (empty
    ``why_not``: confirmed)."""
    est = estimate(
        pol,
        confirm,
        estimators=(cfg.estimator, cfg.model_free),
        n_boot=cfg.n_boot,
        level=level,
        seed=cfg.seed,
        reference=ref,
        unit=unit,
    )
    d, mf = est.diagnostics, cfg.model_free
    v, lo, hi = est.get(cfg.estimator, "dSR")
    m, m_lo, m_hi = est.get(mf, "dSR")
    u = est.get(cfg.estimator, "U")
    model, data = (float(x) for x in d["parts"][cfg.estimator]["dSR"])
    why = []
    if not lo > 0:
        why.append(f"lower bound {lo:+.3f} <= 0")
    if not data > 0:
        why.append(f"data part {data:+.3f} <= 0 (the gain is the model's)")
    if not m > 0:
        why.append(f"{mf} {m:+.3f} <= 0")
    if not d["differs"]:
        why.append("acts as the reference on every confirmation episode")
    elif d["support"] < cfg.min_support:
        why.append(f"support {d['support']} < {cfg.min_support}")
    if u[1] > budget + cfg.slack:
        why.append(f"U {u[0]:.2f} [{u[1]:.2f}, {u[2]:.2f}] over the budget")
    return {
        "candidate": name,
        "dSR": v,
        "dSR_lo": lo,
        "dSR_hi": hi,
        "dSR_model": model,
        "dSR_data": data,
        f"dSR_{mf}": m,
        f"dSR_{mf}_lo": m_lo,
        f"dSR_{mf}_hi": m_hi,
        "U": u[0],
        "support": int(d["support"]),
        "confirmed": not why,
        "why_not": "; ".join(why),
    }
