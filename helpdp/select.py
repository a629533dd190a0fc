"""`python -m helpdp.select budget=1.0`: choose the help policy by an honest estimate.

The DP's own forecast rates the policy it optimised on the counts it optimised
(the winner's curse), and a table keyed by the collected states knows no state of an
unseen task. Selection instead compares candidates that can deploy anywhere, each
valued by off-policy evaluation (``helpdp.ope``) on tasks it was not fitted on:

* **candidates** at each budget: the DP on each rung of ``rungs`` (``helpdp.rekey``:
  coarse keys such as (turn, age of the latest help)) at that budget, with the
  search's mixture; the hand rules ``rules`` (help at exactly those turns); the event
  rules ``event_rules`` (any :func:`helpdp.policies.build_policy` spec: help at turn 0,
  then after a repeated call, a loop, a failed call, an unknown tool, within a
  per-episode cap, ``turn0+after:repeat,failed+max:2``); never;
* **cross-fitting**: the selection tasks (``splits``) are dealt into ``folds`` folds;
  each candidate is fitted on the other folds and estimated (SR and calls per episode
  U, ``estimator``) on the held-out fold's logged episodes; the fold estimates are
  averaged (weighted by tasks), so usage, too, is measured out of sample;
* **intervals**: each task is held out once, so the candidates' per-task estimates
  pool over the folds and the interval is Student-t across the tasks (``helpdp.ope``,
  ``unit="task"``; below ``min_tasks`` tasks, the folds' within-task episode bootstraps
  combined in quadrature); beside SR and U, the paired difference from ``reference``
  (default: the turn-0 rule) task by task, with its model and data parts;
* **support**: a candidate that acts differently from the reference on the logged
  steps, but with fewer than ``min_support`` agreeing episodes in which it deviates
  from the reference (or the reference from it), is marked unsupported and never
  picked: its difference is the control variate's extrapolation, not data;
* **estimators**: only those of the allow list ``helpdp.estimators.COVERAGE_CHECKED``
  (``dr``, ``wdr``: their intervals were checked to cover, ``bench/ope_coverage.py``,
  docs/ope.md's coverage table); ``is``, ``pdis``, ``snis`` and ``dm`` are refused (they
  did not reach 0.90 coverage on HelpWorld), and so is any estimator registered since
  until it is added there with its check;
* **choice**: among the supported candidates, the best point at the budget on the upper concave hull of the
  candidates' cross-fitted (U, SR - ``pessimism`` x half-width): one candidate, or a per-episode mixture of two
  that spends the budget (plus ``slack``) exactly, as the constrained MDP's optimum
  is;
* **confirmation** (high-confidence policy improvement): ``confirm`` of the selection
  tasks are held out before any of the above; the choice (and up to ``confirm_top - 1``
  runners-up), fitted on the other tasks, must beat on them, at a Bonferroni-corrected
  level, the reference and the best rule at the budget (the rules' hull valued on every
  selection task), with a data part above 0 and a model-free (``model_free``) estimate
  above 0, else the reference is kept (``fallback``); ``bench/safe_select.py`` measures
  how often that loses to the best rule, exactly, on random HelpWorlds (docs/ope.md).

Writes ``OUT/budget=<b>/selected.json`` (the policy: :func:`load_policy` reads it,
as do ``helpdp.label policy=`` and ``helpdp.evaluate policy_files=``) and
``candidates.csv`` (every candidate's estimate per fold), and prints the choice, its
cross-fitted OPE estimate and interval, and beside it the in-sample model value that
``helpdp.search`` prints for the table keyed by the collected states.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpdp._src import ope as ko
from helpdp.budget import InfeasibleBudget, search_budget
from helpdp.cliconf import as_config, parse_budgets, run_app
from helpdp.cliconf import doc_field as _f
from helpdp.confirm import (
    as_policy,
    confirm_one,
    hull_at,
    mix_name,
    pooled_interval,
    rule_lead,
    rule_values,
    rules_hull,
    task_values,
)
from helpdp.data import Dataset, load_dataset
from helpdp.demo import demo_dataset_path
from helpdp.estimators import COVERAGE_CHECKED, refusal
from helpdp.intervals import in_range
from helpdp.ope import ESTIMATORS, estimate, load_logged
from helpdp.policies import (
    AtTurns,
    HelpPolicy,
    Never,
    build_policy,
)
from helpdp.rekey import RUNGS, solve_rung
from helpdp.selected import MixturePolicy, load_policy, policy_json
from helpdp.splits import stable_int64
from helpdp.subset import task_subset

__all__ = [
    "SELECT_ESTIMATORS",
    "MixturePolicy",
    "SelectConfig",
    "load_policy",
    "policy_json",
    "run_select",
    "select",
]

#: the estimators ``select`` offers: the allow list of those whose coverage was checked
#: (``helpdp.estimators.COVERAGE_CHECKED``, docs/ope.md's coverage table); any other is
#: refused with ``helpdp.estimators.refusal``'s line
SELECT_ESTIMATORS = tuple(e for e in ESTIMATORS if e in COVERAGE_CHECKED)
#: what the confirmation keeps where no candidate clears it (``SelectConfig.fallback``)
FALLBACKS = ("reference", "confirmed_rule", "rules_hull", "stable_rule")
#: task resamples ``fallback=stable_rule`` draws to ask how often the best rule is picked
STABLE_BOOT = 200
#: ``event_rules``' default: turn 0, then after a repeated call / a loop / a failed call /
#: an unknown tool / any of them, at most 2 calls an episode (3 for the union)
EVENT_RULES = (
    "turn0+after:repeat+max:2",
    "turn0+after:loop+max:2",
    "turn0+after:failed+max:2",
    "turn0+after:unknown_tool+max:2",
    "turn0+after:repeat,failed,unknown_tool+max:2",
    "turn0+after:repeat,failed,unknown_tool+max:3",
)


@dataclass
class SelectConfig:
    """`python -m helpdp.select`: choose a deployable help policy by cross-fitted OPE."""

    data: Any = _f(None, "collected dataset (with episodes/steps.parquet); null: the demo dataset")
    budget: Any = _f(1.0, "expected expert calls per episode (a list: one selection each)")
    splits: list = _f(
        ["train", "validation"], "task splits the candidates are fitted and estimated on"
    )
    exclude_tasks: list = _f([], "task ids of those splits to leave out (e.g. episodes known bad)")
    rungs: list = _f(
        ["turn", "turn_fail", "turn_age", "turn_age_fail", "turn_event"],
        "state keys the DP runs on (helpdp.rekey.RUNGS; turn_event: the turn, the last turn's "
        "class and repeat; event: the same without the turn, discounted by 0.999); "
        "task-specific rungs (state, task_turn_age_fail) know no state of a held-out fold's tasks",
    )
    rules: list = _f(
        [[0], [0, 2], [0, 3], [0, 4], [0, 3, 6], [0, 4, 8]],
        "hand rules, one list of turns each: help at exactly those turns",
    )
    event_rules: list = _f(
        list(EVENT_RULES),
        "event rules, one helpdp.policies.build_policy spec each (turn0+after:EVENTS[+max:N], "
        "EVENTS from repeat, loop, failed, unknown_tool, format_error, working, turn:K, "
        "context:N; max: the episode's expert calls); quote a spec with a comma on the command "
        "line ('event_rules=[\"turn0+after:repeat,failed+max:2\"]'); []: none",
    )
    folds: int = _f(2, "folds of tasks: fit on the others, estimate on one")
    fold_seed: int = _f(0, "seed of the tasks' assignment to folds")
    estimator: str = _f(
        "wdr",
        "OPE estimator that values candidates (SELECT_ESTIMATORS: those whose intervals covered "
        "on HelpWorld, bench/ope_coverage.py); wdr: narrower and steadier than dr where few "
        "episodes agree with a rule (docs/results/ope.md)",
    )
    n_boot: int = _f(
        300, "bootstrap replicates of each estimate's interval (fewer tasks than min_tasks)"
    )
    min_tasks: int = _f(
        8,
        "from this many selection tasks on, intervals are Student-t across tasks (each task's "
        "held-out estimate pooled over the folds); below, episode bootstrap within tasks",
    )
    reference: Any = _f(
        [0],
        "the policy each candidate is compared with (paired differences dSR, dU and the data "
        "support): a list of turns (a rule; [0]: help at turn 0, the hand rule to beat), "
        "best_rule (the rule of rules with the highest cross-fitted SR within the budget, which "
        "may itself lack support against turn 0) or a build_policy spec (turn0+after:failed)",
    )
    min_support: int = _f(
        5,
        "a candidate that acts differently from the reference on the data needs at least this "
        "many agreeing episodes in which it deviates from the reference, and as many agreeing "
        "with the reference in which the reference deviates from it; fewer: marked unsupported "
        "and never picked (its difference is the control variate's extrapolation)",
    )
    level: float = _f(0.95, "interval level")
    slack: float = _f(0.0, "calls per episode the cross-fitted usage may exceed the budget by")
    pessimism: float = _f(
        0.0,
        "choose on SR - pessimism x the interval's half-width (0: the point estimate; 1: "
        "its lower bound, which passes over candidates valued on few agreeing episodes: "
        "measured, 1 lost 0.017-0.034 to 0 on an unseen world family, docs/results/ope.md)",
    )
    keep_reference: bool = _f(
        True,
        "where the reference spends at most the budget, only candidates whose paired "
        "difference in SR from it has its lower bound above 0 may replace it (a near tie "
        "goes to the reference, not to a dearer candidate); false: the highest point estimate",
    )
    confirm: float = _f(
        0.5,
        "share of the selection tasks held out as the confirmation fold, which no candidate "
        "sees while the choice is made: a choice replaces the best rule (fallback) only if, "
        "there, its paired lower bound against it (corrected for the candidates confirmed) is "
        "above 0, its data part is above 0 and the model-free estimate agrees in sign; else "
        "the best rule is kept (0: no confirmation, the choice of the folds alone)",
    )
    confirm_top: int = _f(
        3, "candidates taken to the confirmation fold in the choice's order (Bonferroni over them)"
    )
    fallback: str = _f(
        "reference",
        "what a choice must beat on the confirmation fold, and what is kept where it does not: "
        "reference, beat both the reference and the best rule at the budget (the hull of the "
        "rules with their own agreeing episodes, valued on every selection task), else keep the "
        "reference where it is affordable (a rule's gain carried by the model alone cannot "
        "replace it); confirmed_rule, as reference, but the best rule chosen on the choice's "
        "tasks alone replaces the reference first where it beats it on the confirmation fold "
        "(the same bar); rules_hull, beat the best rule, else keep it (a choice of rules alone "
        "is replaced by it); stable_rule, as reference, but the best rule replaces the "
        "reference where its lead is well estimated (it beats the reference in at least "
        "stable_share of task resamples); bench/safe_select.py measures the four, docs/ope.md",
    )
    stable_share: float = _f(
        0.95,
        "fallback=stable_rule: the share of resamples of the selection tasks (with "
        "replacement, paired) in which the best rule, at its weights, must have a higher SR "
        "than the reference to replace it (0.95: the least loss of 0.9, 0.95 and 0.99 on "
        "worlds 15-44 of bench/safe_select.py's cells, docs/ope.md)",
    )
    stable_margin: float = _f(
        0.0,
        "fallback=stable_rule: the lead over the reference (in SR) that the best rule must "
        "exceed in stable_share of the resamples (0: any lead)",
    )
    model_free: str = _f(
        "pdis",
        "model-free estimator printed beside the model-based one and asked to agree in sign "
        "on the confirmation fold (is or pdis: unbiased, wide)",
    )
    age_cap: int = _f(4, "ages of the latest help at or above this are one key")
    seed: int = _f(0, "seed of the policies' per-episode mixture draws and the bootstrap")
    max_solves: int = _f(200, "most solves one budget search may use")
    out: Any = _f("outputs/select", "output directory; one budget=<b>/ sub-directory per budget")


def _task_folds(tasks: list[str], folds: int, seed: int) -> dict[str, int]:

    order = sorted(tasks, key=lambda t: stable_int64("select-fold", seed, t))
    return {t: i % folds for i, t in enumerate(order)}


def _reference(cfg: SelectConfig, rules_pt: dict, rules: list, budget: float, level: float):
    """The reference policy: ``cfg.reference`` turns or spec, or the rule with the highest
    pooled SR within the budget (never where none is)."""
    if isinstance(cfg.reference, str) and cfg.reference != "best_rule":
        try:
            return build_policy(cfg.reference, seed=cfg.seed, load_json=load_policy)
        except ValueError as e:
            raise ValueError(f"reference: {e}") from None
    if cfg.reference != "best_rule":
        return AtTurns(tuple(cfg.reference))
    best, best_sr = rules[0], -math.inf
    for pol in rules:
        sr = ko.t_interval(task_values(rules_pt[pol.name], cfg.estimator, "SR"), level)[0]
        u = ko.t_interval(task_values(rules_pt[pol.name], cfg.estimator, "U"), level)[0]
        if u <= budget + cfg.slack and sr > best_sr:
            best, best_sr = pol, sr
    return best


@dataclass(frozen=True)
class _Selection:
    """One budget's selection, what its steps share: the config, the budget, the
    dataset's discount and where the log lines go."""

    cfg: SelectConfig
    budget: float
    gamma: float
    log: Callable[[str], object]


@dataclass(frozen=True)
class _Candidates:
    """What the choice compared, read again by the confirmation: the candidates' pooled
    rows (``cands``), the supported ones (``ok``) and their pessimistic scores, the
    per-task values, the fixed candidates (``[(kind, policy)]``), the reference and
    whether it is affordable at the budget."""

    cands: pd.DataFrame
    ok: pd.DataFrame
    score: pd.DataFrame
    per_task: dict
    fixed: list
    ref: HelpPolicy
    ref_affordable: bool


def _fold_estimates(sel: _Selection, logged, ep_fold, fixed, ref, unit):
    """Per fold: every candidate (``fixed``: ``[(kind, policy)]``, the rules and event
    rules; the rung DPs where ``ref`` is given) fitted on the other folds and estimated on
    the fold (against ``ref`` where given); returns the per-fold rows and the candidates'
    per-task values (all folds)."""
    cfg, budget, gamma, log = sel.cfg, sel.budget, sel.gamma, sel.log
    rows, per_task = [], {}
    for f in range(cfg.folds):
        fit, held = logged.subset(ep_fold != f), logged.subset(ep_fold == f)
        n_held = held.episodes["task_id"].nunique()
        cands: list[tuple[str, str, HelpPolicy, dict]] = [(k, p.name, p, {}) for k, p in fixed]
        for rung in cfg.rungs if ref is not None else []:
            try:
                pol = solve_rung(
                    fit,
                    rung,
                    budget,
                    age_cap=cfg.age_cap,
                    gamma=gamma,
                    seed=cfg.seed,
                    max_solves=cfg.max_solves,
                )
            except InfeasibleBudget as e:
                log(f"  fold {f}: rung {rung}: skipped ({e})")
                continue
            cands.append(("rung", rung, pol, pol.info))
        for kind, name, pol, info in cands:
            est = estimate(
                pol,
                held,
                estimators=(cfg.estimator, cfg.model_free),
                n_boot=cfg.n_boot,
                level=cfg.level,
                seed=cfg.seed,
                reference=ref,
                unit=unit,
            )
            per_task.setdefault(name, []).append(est.per_task.assign(fold=f))
            d = est.diagnostics
            row = {"budget": budget, "fold": f, "kind": kind, "candidate": name, "tasks": n_held}
            for q in ("SR", "U") + (("dSR", "dU") if ref is not None else ()):
                v, lo, hi = est.get(cfg.estimator, q)
                row.update({q: v, f"{q}_lo": lo, f"{q}_hi": hi})
            row.update(
                {
                    "agree": d["agree"],
                    "ess": d["ess"],
                    "tasks_empty": d["tasks_empty"],
                    "model_SR": info.get("model_success", math.nan),
                    "model_U": info.get("model_usage", math.nan),
                }
            )
            if ref is not None:
                model, data = d["parts"][cfg.estimator]["dSR"]
                row.update({k: d[k] for k in ("deviate", "deviate_ref", "differs", "support")})
                row.update({"dSR_model": model, "dSR_data": data})
                v, lo, hi = est.get(cfg.model_free, "dSR")
                row.update({"dSR_mf": v, "dSR_mf_lo": lo, "dSR_mf_hi": hi})
            rows.append(row)
    return pd.DataFrame(rows), {k: pd.concat(v, ignore_index=True) for k, v in per_task.items()}


def _pool(per_fold: pd.DataFrame, per_task: dict, cfg, unit: str, ref_name: str) -> pd.DataFrame:
    """One row per candidate: its per-task values pooled over the folds (each task is
    held out once) with the Student-t interval across tasks (``unit="task"``), or the
    folds' intervals combined in quadrature (``unit="episode"``: few tasks)."""
    out = []
    for name, g in per_fold.groupby("candidate", sort=False):
        if len(g) < cfg.folds:
            continue
        w = g["tasks"] / g["tasks"].sum()
        row = {"candidate": name, "kind": g["kind"].iloc[0], "folds": len(g)}
        for q in ("SR", "U", "dSR", "dU"):
            if unit == "task":
                v, lo, hi, _ = pooled_interval(per_task[name], cfg.estimator, q, cfg.level)
                hw = (hi - lo) / 2
            else:
                v = float((w * g[q]).sum())
                hw = float(np.sqrt(((w * (g[f"{q}_hi"] - g[f"{q}_lo"]) / 2) ** 2).sum()))
            row.update({q: v, f"{q}_lo": v - hw, f"{q}_hi": v + hw, f"{q}_hw": hw})
        if unit == "task":
            v, lo, hi, _ = pooled_interval(per_task[name], cfg.model_free, "dSR", cfg.level)
        else:
            v = float((w * g["dSR_mf"]).sum())
            hw = float(np.sqrt(((w * (g["dSR_mf_hi"] - g["dSR_mf_lo"]) / 2) ** 2).sum()))
            lo, hi = v - hw, v + hw
        row.update({"dSR_mf": v, "dSR_mf_lo": lo, "dSR_mf_hi": hi})
        for k in ("agree", "tasks_empty", "deviate", "deviate_ref", "differs", "support"):
            row[k] = int(g[k].sum())
        row["agree_min"] = int(g["agree"].min())  # the fold with the fewest agreeing episodes
        # support counts per fold: every fold in which the candidate acts differently needs
        # its own agreeing episodes (a sum would let one fold's carry another's none)
        parts = g.loc[g["differs"] > 0, "support"]
        row["support"] = int(parts.min()) if len(parts) else 0
        row["dSR_model"] = float((w * g["dSR_model"]).sum())
        row["dSR_data"] = float((w * g["dSR_data"]).sum())
        row["model_SR"] = float((w * g["model_SR"]).sum())
        row["supported"] = bool(
            name == ref_name or row["differs"] == 0 or row["support"] >= cfg.min_support
        )
        out.append(row)
    return pd.DataFrame(out)


def _event_rules(cfg: SelectConfig) -> list[HelpPolicy]:
    """The policies of ``cfg.event_rules`` (a bad spec or a repeated name: one error)."""
    out, seen = [], set()
    for i, spec in enumerate(cfg.event_rules or []):
        try:
            pol = build_policy(str(spec), seed=cfg.seed, load_json=load_policy)
        except ValueError as e:
            why = str(e) if repr(str(spec)) in str(e) else f"{str(spec)!r}: {e}"
            raise ValueError(f"event_rules[{i}]: {why}") from None
        if pol.name in seen:
            raise ValueError(f"event_rules[{i}]: {spec!r} repeats the candidate {pol.name!r}")
        seen.add(pol.name)
        out.append(pol)
    return out


def _chosen_interval(chosen, per_task: dict, cfg, unit: str, q: str) -> tuple[float, float, float]:
    """``(value, lo, hi)`` of quantity ``q`` of the chosen candidate or mixture: across
    tasks, the mixture's per-task values (``unit="task"``); else the weighted rows."""
    if unit == "task":
        vals = sum(w * task_values(per_task[r["candidate"]], cfg.estimator, q) for w, r in chosen)
        first = per_task[chosen[0][1]["candidate"]]
        v, lo, hi, _ = pooled_interval(first, cfg.estimator, q, cfg.level, values=vals)
        return float(v), float(lo), float(hi)
    v = sum(w * r[q] for w, r in chosen)
    hw = sum(w * r[f"{q}_hw"] for w, r in chosen)
    return float(v), float(v - hw), float(v + hw)


def _confirm_tasks(tasks: list[str], share: float, seed: int) -> list[str]:
    """The confirmation fold: ``share`` of ``tasks`` (at least one where ``share`` > 0, and
    never all), dealt by a stable hash of the seed and the task."""
    if not 0 <= share < 1:
        raise ValueError(f"confirm must be in [0, 1), got {share}")
    if share == 0:
        return []
    k = min(max(1, int(round(share * len(tasks)))), len(tasks) - 1)
    order = sorted(tasks, key=lambda t: stable_int64("select-confirm", seed, t))
    return sorted(order[:k])


def _fit(chosen, fixed, fit_on, budget, cfg, gamma) -> tuple[list, dict]:
    """The policies of ``chosen`` (``[(weight, candidate row)]``), the rung DPs fitted on
    ``fit_on``: ``([(weight, policy)], {rung: solve info})``."""
    fitted, parts = {}, []
    for w, row in chosen:
        if row["kind"] != "rung":
            pol = next(p for _, p in fixed if p.name == row["candidate"])
        else:
            pol = solve_rung(
                fit_on,
                row["candidate"],
                budget,
                age_cap=cfg.age_cap,
                gamma=gamma,
                seed=cfg.seed,
                max_solves=cfg.max_solves,
            )
            fitted[row["candidate"]] = pol.info
        parts.append((w, pol))
    return parts, fitted


def _confirm_order(chosen, ok, score, cands, ref, budget, cfg) -> list:
    """The candidates taken to the confirmation fold: the choice, then the best-scored
    affordable others (at most ``cfg.confirm_top`` in all)."""
    order = [chosen]
    names = {r["candidate"] for _, r in chosen} | {ref.name}
    within = score[ok.loc[score.index, "U"] <= budget + cfg.slack]
    for i in within.sort_values("SR", ascending=False).index:
        if len(order) >= cfg.confirm_top:
            break
        rule = cands.loc[i, "kind"] == "rule" and cfg.fallback == "rules_hull"
        if cands.loc[i, "candidate"] not in names and not rule:
            order.append([(1.0, cands.loc[i])])
            names.add(cands.loc[i, "candidate"])
    return order


def _log_confirm(log, budget, name, rec, level, n_confirm, mf) -> None:
    log(
        f"budget {budget:g}: confirm {name} against {rec['against']}: dSR {rec['dSR']:+.3f} "
        f"[{rec['dSR_lo']:+.3f}, {rec['dSR_hi']:+.3f}] at level {level:.4f} (model "
        f"{rec['dSR_model']:+.3f}, data {rec['dSR_data']:+.3f}; {mf} "
        f"{rec[f'dSR_{mf}']:+.3f}) on {n_confirm} confirmation tasks: "
        + ("confirmed" if rec["confirmed"] else "refused: " + rec["why_not"])
    )


def _confirm(sel: _Selection, pool: _Candidates, chosen, choose, confirm, n_confirm):
    """High-confidence policy improvement. The bar: the best rule at the budget
    (:func:`rules_hull`, valued on every selection task) and, with
    ``fallback=reference``, the reference too. With ``confirmed_rule``, first the best
    rule chosen on the choice's tasks alone is paired with the reference on the
    confirmation fold, and replaces it (as what is kept, and in the bar) where it clears
    the bar against it. With ``rules_hull`` a choice made of rules alone is replaced by
    the best rule. Otherwise the choice and the runners-up (:func:`_confirm_order`),
    fitted on the choice's tasks, are valued on the confirmation fold paired with each
    policy of the bar, at level ``1 - (1 - level) / k`` (Bonferroni over the ``k`` tests:
    the candidates, and the rule's with ``confirmed_rule``); the first in the choice's
    order that clears it against each (:func:`confirm_one`) is kept, else the fallback.
    Returns ``(chosen, record, parts, fitted)``: the policy deployed, fitted on the
    choice's tasks."""
    cfg, budget, gamma, log = sel.cfg, sel.budget, sel.gamma, sel.log
    cands, ok, score, per_task = pool.cands, pool.ok, pool.score, pool.per_task
    fixed, ref, ref_affordable = pool.fixed, pool.ref, pool.ref_affordable
    unit = "task" if n_confirm >= cfg.min_tasks else "episode"
    mf = cfg.model_free
    rule_vals = rule_values(cands, per_task, ref, cfg, confirm, unit)
    hull = rules_hull(cands, per_task, ref, budget, cfg, confirm, unit, rule_vals)
    order = _confirm_order(chosen, ok, score, cands, ref, budget, cfg)
    level = 1 - (1 - cfg.level) / (len(order) + int(cfg.fallback == "confirmed_rule"))
    head = {"level": level, "unit": unit, "tasks": n_confirm, "tried": []}
    bars, kept = [hull], hull
    ref_kept = None
    if cfg.fallback != "rules_hull" and ref_affordable:
        kept = ref_kept = [(1.0, cands[cands["candidate"] == ref.name].iloc[0])]
        n_sel = min((len(v[1]) for v in rule_vals.values()), default=0)
        if cfg.fallback == "stable_rule" and mix_name(hull) != mix_name(kept):
            if n_sel < cfg.min_tasks:  # a resample of a few tasks says nothing of others
                log(f"budget {budget:g}: {n_sel} selection tasks < min_tasks {cfg.min_tasks}: "
                    f"the best rule's lead is not resampled, the reference is kept")  # fmt: skip
            else:
                share = rule_lead(rule_vals, hull, kept[0][1].name, STABLE_BOOT, cfg.seed,
                                  cfg.stable_margin)  # fmt: skip
                head["stable_share"] = share
                by = f" by more than {cfg.stable_margin:g}" if cfg.stable_margin else ""
                log(
                    f"budget {budget:g}: the best rule {mix_name(hull)} beats the reference{by} "
                    f"in {share:.0%} of {STABLE_BOOT} task resamples: "
                    + ("kept instead of the reference" if share >= cfg.stable_share else
                       f"under {cfg.stable_share:.0%}, the reference is kept")
                )  # fmt: skip
                kept = hull if share >= cfg.stable_share else kept
        rule = rules_hull(cands, per_task, ref, budget, cfg, None, unit)  # the choice's tasks
        if cfg.fallback == "confirmed_rule" and mix_name(rule) != mix_name(kept):
            pol = as_policy(_fit(rule, fixed, choose, budget, cfg, gamma)[0], cfg.seed)
            rec = confirm_one(pol, mix_name(rule), confirm, ref, budget, cfg, level, unit)
            rec["against"] = ref.name
            head["tried"].append(rec)
            _log_confirm(log, budget, mix_name(rule), rec, level, n_confirm, mf)
            kept = rule if rec["confirmed"] else kept
        bars = [kept] + ([hull] if mix_name(hull) != mix_name(kept) else [])
    kept_parts, kept_name = _fit(kept, fixed, choose, budget, cfg, gamma)[0], mix_name(kept)
    if len(chosen) == 1 and chosen[0][1]["candidate"] == ref.name and kept is not hull:
        why = "nothing to confirm" if kept is ref_kept else f"kept {kept_name}, which beat it"
        return kept, {**head, "outcome": f"the reference was chosen: {why}"}, kept_parts, {}
    if cfg.fallback == "rules_hull" and all(r["kind"] == "rule" for _, r in chosen):
        return kept, {"outcome": f"rules chosen: kept the best rule, {kept_name}"}, kept_parts, {}
    bar_pols = [(mix_name(b), as_policy(_fit(b, fixed, choose, budget, cfg, gamma)[0], cfg.seed))
                for b in bars]  # fmt: skip
    head["against"] = " and ".join(n for n, _ in bar_pols)
    for cand in order:
        parts, fitted = _fit(cand, fixed, choose, budget, cfg, gamma)
        pol = as_policy(parts, cfg.seed)
        name = mix_name(cand)
        mine = [(n, b) for n, b in bar_pols if n != name] or bar_pols  # not against itself
        for bar_name, bar in mine:  # the record of the first bar it fails, or the last
            rec = confirm_one(pol, name, confirm, bar, budget, cfg, level, unit)
            rec["against"] = bar_name
            if not rec["confirmed"]:
                break
        head["tried"].append(rec)
        _log_confirm(log, budget, name, rec, level, n_confirm, mf)
        if rec["confirmed"]:
            return cand, {**head, "outcome": f"confirmed {name}"}, parts, fitted
    outcome = f"none of {len(order)} confirmed: kept {kept_name}"
    return kept, {**head, "outcome": outcome}, kept_parts, {}


def select(ds: Dataset, cfg: SelectConfig, budget: float, log=print) -> dict:
    """One budget's selection (module docstring); returns the record written to
    ``selected.json`` with the chosen policy under ``policy``."""

    why = refusal(cfg.estimator)  # the allow list (helpdp.estimators.COVERAGE_CHECKED)
    if why is not None:
        raise ValueError(f"estimator: {cfg.estimator!r}: {why}")
    bad = [r for r in cfg.rungs if r not in RUNGS]
    if bad:
        raise ValueError(f"rungs: unknown rung {bad[0]!r} (one of {', '.join(RUNGS)})")
    if cfg.folds < 2:
        raise ValueError(f"folds must be >= 2, got {cfg.folds}")
    if cfg.fallback not in FALLBACKS:
        raise ValueError(f"fallback: {cfg.fallback!r}: one of {', '.join(FALLBACKS)}")
    if not 0 < cfg.stable_share <= 1:
        raise ValueError(f"stable_share: {cfg.stable_share!r}: a share in (0, 1]")
    if not 0 <= cfg.stable_margin < 1:
        raise ValueError(f"stable_margin: {cfg.stable_margin!r}: an SR difference in [0, 1)")
    events = _event_rules(cfg)
    logged = load_logged(ds, splits=list(cfg.splits))
    if cfg.exclude_tasks:
        keep = ~logged.episodes["task_id"].astype(str).isin(set(map(str, cfg.exclude_tasks)))
        logged = logged.subset(keep.to_numpy())
    logged.views()  # once, shared by the subsets
    tasks = sorted(logged.episodes["task_id"].astype(str).unique())
    confirm_tasks = _confirm_tasks(tasks, cfg.confirm, cfg.fold_seed)
    in_confirm = logged.episodes["task_id"].astype(str).isin(set(confirm_tasks)).to_numpy()
    full, logged = logged, logged.subset(~in_confirm)  # the choice sees no confirmation task
    choose_tasks = [t for t in tasks if t not in set(confirm_tasks)]
    if len(choose_tasks) < cfg.folds:
        raise ValueError(
            f"{len(choose_tasks)} tasks in splits {list(cfg.splits)} outside the confirmation "
            f"fold ({len(confirm_tasks)} tasks, confirm={cfg.confirm:g}): fewer than folds"
        )
    unit = "task" if len(choose_tasks) >= cfg.min_tasks else "episode"
    fold_of = _task_folds(choose_tasks, cfg.folds, cfg.fold_seed)
    ep_fold = logged.episodes["task_id"].astype(str).map(fold_of).to_numpy()
    rules = [Never()] + [AtTurns(tuple(r)) for r in cfg.rules]
    sel = _Selection(cfg, budget, ds.gamma, log)
    rules_pt = {}
    if cfg.reference == "best_rule":  # a first pass over the rules finds it
        _, rules_pt = _fold_estimates(
            sel, logged, ep_fold, [("rule", p) for p in rules], None, unit
        )
    ref = _reference(cfg, rules_pt, rules, budget, cfg.level)
    fixed = [("rule", p) for p in rules] + [("event", p) for p in events]
    if ref.name not in {p.name for _, p in fixed}:
        fixed.append(("rule" if isinstance(ref, (Never, AtTurns)) else "event", ref))
    per_fold, per_task = _fold_estimates(sel, logged, ep_fold, fixed, ref, unit)
    cands = _pool(per_fold, per_task, cfg, unit, ref.name)
    ok = cands[cands["supported"]]
    is_ref = ok["candidate"] == ref.name
    ref_affordable = bool((is_ref & (ok["U"] <= budget + cfg.slack)).any())
    if cfg.keep_reference and ref_affordable:
        # the reference is affordable: only candidates whose paired difference from it has
        # its lower bound above 0 may replace it (or mix with it)
        ok = ok[is_ref | (ok["dSR_lo"] > 0)]
        others = cands[cands["supported"] & (cands["candidate"] != ref.name)]
        log(
            f"budget {budget:g}: keep_reference: {len(ok) - 1} of {len(others)} candidates "
            "beat the reference with a paired lower bound above 0"
        )
    score = pd.DataFrame({"U": ok["U"], "SR": ok["SR"] - cfg.pessimism * ok["SR_hw"]})
    pick = hull_at(score, budget + cfg.slack)
    if pick is None:
        raise ValueError(_no_pick(cands, budget, cfg))
    chosen = [(w, cands.loc[i]) for w, i in pick]

    confirmation = None
    if confirm_tasks:
        pool = _Candidates(cands, ok, score, per_task, fixed, ref, ref_affordable)
        chosen, confirmation, parts, fitted = _confirm(
            sel, pool, chosen, logged, full.subset(in_confirm), len(confirm_tasks)
        )
        confirmation["confirm_tasks"] = confirm_tasks
    else:
        parts, fitted = _fit(chosen, fixed, full, budget, cfg, ds.gamma)
    logged = full
    policy = parts[0][1] if len(parts) == 1 else MixturePolicy(parts, seed=cfg.seed)
    ope = {"estimator": cfg.estimator, "level": cfg.level, "unit": unit, "reference": ref.name}
    for q in ("SR", "U", "dSR", "dU"):
        v, lo, hi = _chosen_interval(chosen, per_task, cfg, unit, q)
        lo, hi = in_range(q, lo, hi)
        ope.update({q: float(v), f"{q}_lo": float(lo), f"{q}_hi": float(hi)})
    for part in ("dSR_model", "dSR_data"):  # the difference's model part and data part
        ope[part] = float(sum(w * r[part] for w, r in chosen))

    # what `helpdp.search` prints today: the table keyed by the collected states,
    # on the same tasks, valued by its own (in-sample) model
    try:
        dp = search_budget(
            task_subset(ds, tasks).mdp, budget, gamma=ds.gamma, max_solves=cfg.max_solves
        )
        insample = {"expected_success": dp.expected_success, "expected_usage": dp.expected_usage}
    except InfeasibleBudget as e:
        insample = {"error": str(e)}
    rules_ok = cands[(cands["kind"] == "rule") & (cands["U"] <= budget + cfg.slack)]
    best_rule = rules_ok.loc[rules_ok["SR"].idxmax()] if len(rules_ok) else None
    diag_cols = [
        "candidate",
        "kind",
        "SR",
        "U",
        "dSR",
        "dSR_lo",
        "dSR_hi",
        "agree",
        "deviate",
        "deviate_ref",
        "support",
        "dSR_model",
        "dSR_data",
        "supported",
    ]
    return {
        "budget": float(budget),
        "policy_name": policy.name,
        "components": [{"weight": float(w), "candidate": r["candidate"]} for w, r in chosen],
        "ope": ope,
        "best_rule": None
        if best_rule is None
        else {
            "candidate": best_rule["candidate"],
            "SR": float(best_rule["SR"]),
            "U": float(best_rule["U"]),
        },
        "candidates": json.loads(cands[diag_cols].to_json(orient="records")),
        "insample_model": insample,
        "refit": fitted,
        "tasks": tasks,
        "confirm": confirmation,
        "folds": cfg.folds,
        "policy": policy_json(policy),
        "_candidates": cands,
        "_per_fold": per_fold,
    }


def _no_pick(cands: pd.DataFrame, budget: float, cfg) -> str:
    """The error where no supported candidate spends at most the budget: which ones would
    and why they are not supported, and what would let one through."""
    cheap = cands[cands["U"] <= budget + cfg.slack].sort_values("U")
    msg = f"budget {budget:g}: no supported candidate spends at most the budget"
    if not len(cheap):
        low = cands.sort_values("U").iloc[0] if len(cands) else None
        if low is not None:
            msg += f" (the cheapest, {low.candidate}, spends {low.U:.2f})"
        return msg
    names = ", ".join(
        f"{r.candidate} (U={r.U:.2f}, support {r.support} in its weakest fold)"
        for r in cheap.head(3).itertuples()
    )
    return (
        f"{msg}: {names} {'is' if len(cheap) == 1 else 'are'} under min_support={cfg.min_support}"
        " (agreeing episodes where it and the reference act differently, per fold of tasks);"
        " collect more seeds or tasks, or lower min_support"
    )


def _candidate_line(r, min_support: int) -> str:
    """One candidate's printed line: no value where no logged episode agrees with it (its
    estimate would be the model's extrapolation alone); rates cut to their range."""
    mark = (
        ""
        if r.supported
        else f"  UNSUPPORTED (support {r.support} in its weakest fold < {min_support}): never picked"
    )
    sup = f"agree {r.agree}, support {r.deviate}/{r.deviate_ref}{mark}"
    if r.agree == 0:
        return f"no value: no logged episode agrees with it  {sup}"
    return (
        f"SR={r.SR:.3f} [{max(r.SR_lo, 0.0):.3f}, {min(r.SR_hi, 1.0):.3f}]  U={r.U:.2f} ± "
        f"{r.U_hw:.2f}  dSR={r.dSR:+.3f} [{max(r.dSR_lo, -1.0):+.3f}, {min(r.dSR_hi, 1.0):+.3f}]"
        f" (model {r.dSR_model:+.3f}, data {r.dSR_data:+.3f})  {sup}"
    )


def run_select(cfg) -> list[dict]:
    """The body of ``python -m helpdp.select``."""

    cfg = as_config(SelectConfig, cfg)
    budgets = parse_budgets(cfg.budget)
    data = Path(cfg.data) if cfg.data else demo_dataset_path()
    ds = load_dataset(data)
    out = Path(cfg.out)
    recs = []
    for b in budgets:
        rec = select(ds, cfg, float(b))
        cands, per_fold = rec.pop("_candidates"), rec.pop("_per_fold")
        d = out / f"budget={float(b):g}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "selected.json").write_text(json.dumps(rec, indent=2) + "\n")
        per_fold.to_csv(d / "candidates.csv", index=False)
        o, m = rec["ope"], rec["insample_model"]
        model = (
            f"E[S]={m['expected_success']:.4f} E[U]={m['expected_usage']:.4f}"
            if "expected_success" in m
            else "n/a"
        )
        print(
            f"budget {b:g}: candidates (cross-fitted {cfg.estimator}, {cfg.folds} folds of tasks):"
        )
        print(
            f"  (paired differences from {o['reference']}; support: agreeing episodes where "
            "the candidate deviates from it / where it deviates from the candidate)"
        )
        width = max(24, *(len(c) for c in cands["candidate"]))
        for r in cands.sort_values("U").itertuples():
            print(f"  {r.candidate:<{width}} " + _candidate_line(r, cfg.min_support))
        print(
            f"budget {b:g}: selected {rec['policy_name']}: OPE SR={o['SR']:.3f} "
            f"[{o['SR_lo']:.3f}, {o['SR_hi']:.3f}] U={o['U']:.2f} [{o['U_lo']:.2f}, "
            f"{o['U_hi']:.2f}], dSR={o['dSR']:+.3f} [{o['dSR_lo']:+.3f}, {o['dSR_hi']:+.3f}] "
            f"(model {o['dSR_model']:+.3f}, data {o['dSR_data']:+.3f}) -> {d / 'selected.json'}"
        )
        print(
            f"  (not the selected policy: the table helpdp.search would choose at this budget, "
            f"keyed by the collected states and valued by its own in-sample model: {model})"
        )
        recs.append(rec)
    return recs


def main() -> None:

    run_app("helpdp.select", SelectConfig, run_select, config_name="select")


if __name__ == "__main__":
    main()
