"""What ``python -m helpdp.evaluate`` writes besides the results: ``report.md`` (the
tables with Wilson intervals of each SR and paired intervals of each difference,
:func:`report`, :func:`headroom_report`; for a policy chosen by ``helpdp.select``, the
off-policy support of that choice, :func:`selection_report`), the plot
``usage_success.png`` and the off-policy estimates beside the measured values
(:func:`ope_estimates`, :func:`ope_summary`, :func:`ope_report`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from helpdp.data import Dataset
from helpdp.evaluate.config import EvaluateConfig
from helpdp.ope import estimate, load_logged
from helpdp.pareto import frontier
from helpdp.subset import task_subset

__all__ = [
    "forecast_frontier",
    "headroom_report",
    "ope_estimates",
    "ope_report",
    "ope_summary",
    "report",
    "selection_report",
    "task_table",
]


def ope_estimates(
    ds: Dataset, by_split: dict, summary: pd.DataFrame, cfg: EvaluateConfig
) -> pd.DataFrame:
    """Every policy's off-policy estimate (``cfg.ope_estimator``) from ``ds``'s collected
    episodes of the split's tasks, beside its measured SR and U (``summary``): one row
    per (split, policy) with ``inside_SR``/``inside_U`` (the measured value lies in the
    interval, clipped to [0, 1] for SR and [0, inf) for U), ``agrees_SR``/``agrees_U``
    (the two differ by less than their combined 95% uncertainty,
    sqrt(half-width² + measured half-width²), the measured SR's from its Wilson interval
    on the side of the estimate: the check that also allows for the measurement's own
    noise, e.g. of a policy whose usage the estimate knows exactly) and the absolute
    errors. ``cfg``: ``ope_estimator``, ``ope_boot``, ``seed``."""

    meas = summary.set_index(["split", "policy"])
    rows = []
    for split, split_pols in by_split.items():
        try:
            logged = load_logged(ds, splits=[split])
        except ValueError:
            continue  # no collected episode of this split
        logged.views()
        for pol in split_pols:
            e = estimate(
                pol,
                logged,
                estimators=(cfg.ope_estimator,),
                n_boot=int(cfg.ope_boot),
                seed=cfg.seed,
            )
            s, slo, shi = e.get(cfg.ope_estimator, "SR")
            u, ulo, uhi = e.get(cfg.ope_estimator, "U")
            slo, shi, ulo, uhi = max(slo, 0.0), min(shi, 1.0), max(ulo, 0.0), max(uhi, 0.0)
            m = meas.loc[(split, pol.name)]
            sr = float(m["SR"])
            sr_half = float(m["SR_hi"]) - sr if s >= sr else sr - float(m["SR_lo"])
            both = {
                "SR": float(np.hypot((shi - slo) / 2, sr_half)),
                "U": float(np.hypot((uhi - ulo) / 2, float(m["U_ci"]))),
            }
            rows.append(
                {
                    "split": split,
                    "policy": pol.name,
                    "SR": float(m["SR"]),
                    "U": float(m["U"]),
                    "ope_SR": s,
                    "ope_SR_lo": slo,
                    "ope_SR_hi": shi,
                    "ope_U": u,
                    "ope_U_lo": ulo,
                    "ope_U_hi": uhi,
                    "inside_SR": bool(slo <= m["SR"] <= shi),
                    "inside_U": bool(ulo <= m["U"] <= uhi),
                    "agrees_SR": bool(abs(s - float(m["SR"])) <= both["SR"]),
                    "agrees_U": bool(abs(u - float(m["U"])) <= both["U"]),
                    "abs_err_SR": abs(s - float(m["SR"])),
                    "abs_err_U": abs(u - float(m["U"])),
                    "agree": e.diagnostics["agree"],
                    "episodes": e.diagnostics["episodes"],
                    "ess": e.diagnostics["ess"],
                    "max_share": e.diagnostics["max_share"],
                }
            )
    return pd.DataFrame(rows)


def ope_summary(ope_df: pd.DataFrame) -> dict:
    """Coverage (share of policies whose measured value lies in the interval), mean
    half-width and mean absolute error of the off-policy estimates, for SR and U."""
    out = {"policies": len(ope_df)}
    for q in ("SR", "U"):
        if len(ope_df) == 0:
            out.update(
                {f"coverage_{q}": math.nan, f"half_width_{q}": math.nan, f"mae_{q}": math.nan}
            )
            continue
        out[f"coverage_{q}"] = float(ope_df[f"inside_{q}"].mean())
        if f"agrees_{q}" in ope_df:
            out[f"agrees_{q}"] = float(ope_df[f"agrees_{q}"].mean())
        out[f"half_width_{q}"] = float(((ope_df[f"ope_{q}_hi"] - ope_df[f"ope_{q}_lo"]) / 2).mean())
        out[f"mae_{q}"] = float(ope_df[f"abs_err_{q}"].mean())
    return out


def ope_report(ope_df: pd.DataFrame, estimator: str) -> str:
    """The report's section on the off-policy estimates."""
    if ope_df.empty:
        return ""
    lines = [
        "",
        f"## Off-policy estimates from the collected data ({estimator}, 95% bootstrap)",
        "",
        "Each policy's SR and calls per episode estimated from the collection's episodes of "
        "the same tasks (`helpdp.ope`: the schedule's known trigger probabilities, balance "
        "heuristic), beside what the environments measured.",
        "",
        "| split | policy | measured SR | OPE SR [95%] | measured U | OPE U [95%] | agreeing "
        "episodes | ESS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in ope_df.itertuples():
        lines.append(
            f"| {r.split} | {r.policy} | {r.SR:.3f} | {r.ope_SR:.3f} [{r.ope_SR_lo:.3f}, "
            f"{r.ope_SR_hi:.3f}]{'' if r.inside_SR else ' ✗'} | {r.U:.2f} | {r.ope_U:.2f} "
            f"[{r.ope_U_lo:.2f}, {r.ope_U_hi:.2f}]{'' if r.inside_U else ' ✗'} | {r.agree} / "
            f"{r.episodes} | {r.ess:.0f} |"
        )
    s = ope_summary(ope_df)
    lines += [
        "",
        f"SR: the measured value is inside the interval for {s['coverage_SR']:.0%} of the "
        f"{s['policies']} policies; mean half-width {s['half_width_SR']:.3f}, mean absolute "
        f"error {s['mae_SR']:.3f}. U: {s['coverage_U']:.0%}, {s['half_width_U']:.3f}, "
        f"{s['mae_U']:.3f}. ✗: outside."
        + (
            " Allowing for the measurement's own noise too (the difference within the "
            f"combined 95% uncertainty): SR {s['agrees_SR']:.0%}, U {s['agrees_U']:.0%}."
            if "agrees_SR" in s
            else ""
        ),
        "",
    ]
    return "\n".join(lines)


def forecast_frontier(ds: Dataset, train_tasks: list[str]) -> pd.DataFrame | None:
    """The DP's forecast frontier on the ``train_tasks`` of ``ds`` (the plot's line;
    None when it cannot be computed)."""

    try:
        return frontier(task_subset(ds, train_tasks).mdp, gamma=ds.gamma, progress=False).table
    except ValueError:
        return None


def _budgets(cfg) -> list[float]:
    """The helper's budgets where a helper is evaluated (``helper_budgets``), else []."""
    hb = getattr(cfg, "helper_budgets", None)
    if not getattr(cfg, "helper_dir", None) or hb is None:
        return []
    return [float(b) for b in ([hb] if isinstance(hb, (int, float, str)) else hb)]


def _fmt_ci(t) -> str:
    if t is None or not isinstance(t, tuple) or math.isnan(t[0]):
        return "n/a"
    return f"{t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]"


def report(
    summary: pd.DataFrame,
    comparisons: list[dict],
    search: dict | None,
    cfg: EvaluateConfig,
    seconds: float,
    n_train: int,
) -> str:
    """``report.md``: the tables, with 95% intervals (Wilson for each SR, paired for
    each difference); ``search``: the DP's search.json fields at ``cfg.budget`` (None: no
    policy of the data reaches it)."""
    forecast = (
        "no policy of the data reaches this budget (states only ever observed with help)"
        if search is None
        else f"E[S] = {search['expected_success']:.3f}, E[U] = {search['expected_usage']:.3f}"
    )
    lines = [
        "# Help policies in the environments",
        "",
        f"The DP table's budget {cfg.budget:g}"
        + (f" (the helper's: {', '.join(f'{b:g}' for b in hb)})" if (hb := _budgets(cfg)) else "")
        + f"; seeds {cfg.seeds[0]}..{cfg.seeds[-1]} ({len(cfg.seeds)}), one "
        f"episode per (task, seed); every policy on the same pairs. Policies fitted on "
        f"{n_train} train tasks. The DP forecast at this budget: {forecast}. "
        f"{seconds:.0f} s.",
        "",
    ]
    for split in dict.fromkeys(summary["split"]):
        s = summary[summary["split"] == split]
        lines += [
            f"## {split} tasks ({'unseen by every policy' if split == 'test' else 'seen'})",
            "",
            "| policy | episodes | SR [95%] | U (calls/ep) ± 95% | SR gain per call | L (turns) "
            "| SPL | policy errors | invalid |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in s.itertuples():
            gain = "" if math.isnan(r.gain_per_call) else f"{r.gain_per_call:+.3f}"
            lines.append(
                f"| {r.policy} | {r.episodes} | {r.SR:.3f} [{r.SR_lo:.3f}, {r.SR_hi:.3f}] | "
                f"{r.U:.2f} ± {r.U_ci:.2f} | "
                f"{gain} | {r.L:.2f} | {r.SPL:.3f} | {r.policy_errors} | {r.invalid} |"
            )
        if s["invalid"].sum():
            lines += [
                "",
                f"**Warning:** {int(s['invalid'].sum())} episodes had no valid verdict "
                "(server or verifier errors); they count as failures.",
            ]
        lines += [
            "",
            "Paired differences in SR (95% interval, pairs as the unit: for these tasks):",
            "",
        ]
        lines += [
            "| policy | vs random at equal spend | vs the rules' hull at equal spend | vs never | vs rule: turn 0 | vs the best task-wise mix of the baselines at equal spend, chosen with hindsight (its calls) |",
            "|---|---|---|---|---|---|",
        ]
        for c in comparisons:
            if c["split"] != split:
                continue
            lines.append(
                f"| {c['policy']} (U {c['U']:.2f}) | {_fmt_ci(c.get('vs_random_equal_spend'))} "
                f"({c.get('random_equal_spend', 'outside the random curve')}) | "
                f"{_fmt_ci(c.get('vs_rules_equal_spend'))} "
                f"({c.get('rules_equal_spend', 'outside the rules')}) | "
                f"{_fmt_ci(c.get('vs never'))} | {_fmt_ci(c.get('vs rule: turn 0'))} | "
                f"{_fmt_ci(c.get('vs_best_mix_equal_spend'))}"
                + (f" ({c['best_mix_calls']:.2f})" if "best_mix_calls" in c else "")
                + " |"
            )
        lines += ["", *task_table([c for c in comparisons if c["split"] == split]), ""]
    return "\n".join(lines) + "\n"


#: the differences :func:`task_table` restates with tasks as the unit
TASK_KEYS = (
    ("vs_random_equal_spend", "random at equal spend"),
    ("vs_rules_equal_spend", "the rules' hull at equal spend"),
    ("vs never", "never"),
    ("vs rule: turn 0", "rule: turn 0"),
)


def _fmt_task(t: dict) -> str:
    """One task-level cell: the cluster interval, ``k of G`` tasks differ, the top share,
    the detectable difference and the tasks ``delta`` needs (or the refusal)."""
    if not isinstance(t, dict) or math.isnan(t["mean"]):
        return "n/a"
    share = "" if math.isnan(t["top_share"]) else f", one carries {t['top_share']:.0%}"
    mde = "n/a" if math.isnan(t["detectable"]) else f"{t['detectable']:.3f}"
    need = "n/a" if t["tasks_for_delta"] is None else str(t["tasks_for_delta"])
    head = f"{t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}] (df {t['df']:.1f})"
    return (
        f"{head}; {t['differ']} of {t['G']} tasks differ{share}; detectable {mde}, "
        f"{need} tasks for {t['delta']:g}" + (f"; **{t['note']}**" if t["note"] else "")
    )


def task_table(comparisons: list[dict]) -> list[str]:
    """The same differences with tasks as the unit (``compare``'s ``*_tasks`` keys: CR2
    cluster interval, t with the Bell-McCaffrey df), a statement for tasks like these."""
    keys = [(k, n) for k, n in TASK_KEYS if any(f"{k}_tasks" in c for c in comparisons)]
    if not keys:
        return []
    lines = [
        "The same differences with tasks as the unit (95% cluster-robust CR2 interval, "
        "t with the Bell-McCaffrey df: for tasks like these), the tasks in which the "
        "policies differ at all, the largest share one task carries, the difference these "
        "tasks detect at 80% power and the tasks 0.05 needs:",
        "",
        "| policy | " + " | ".join(f"vs {n}" for _, n in keys) + " |",
        "|---" * (len(keys) + 1) + "|",
    ]
    for c in comparisons:
        cells = [_fmt_task(c.get(f"{k}_tasks")) for k, _ in keys]
        lines.append(f"| {c['policy']} | " + " | ".join(cells) + " |")
    return lines


def headroom_report(rooms: list[dict]) -> str:
    """The report's section on :func:`~helpdp.evaluate.stats.headroom`."""
    if not rooms:
        return ""
    lines = [
        "## What the world allows: the best task-wise mix of the baselines",
        "",
        "Per task, any mixture of the fixed policies measured here (never, always, random, "
        "the rules) may run; the mixture with the most SR at the budget's mean calls is "
        "chosen (`helpdp.evaluate.task_mix`). Cross-fitted: chosen on even seeds, measured on "
        "odd ones and the other way round. A policy that matches it at equal spend has "
        "found what these baselines can express.",
        "",
        "| split | budget | cross-fitted SR (U) | with hindsight SR (U) |",
        "|---|---|---|---|",
    ]
    for h in rooms:
        (cs, cu), (ins, inu) = h["crossfit"], h["insample"]
        # one seed has no odd seeds to measure on: say so rather than print nan (nan)
        cf = f"{cs:.3f} ({cu:.2f})" if np.isfinite(cs) else "n/a (needs 2 seeds or more)"
        lines.append(f"| {h['split']} | {h['budget']:g} | {cf} | {ins:.3f} ({inu:.2f}) |")
    return "\n".join(lines) + "\n"


def _num(x, fmt: str) -> str:
    """``x`` in ``fmt``, ``n/a`` when it is not a number (an older or partial record)."""
    return format(x, fmt) if isinstance(x, int | float) and not isinstance(x, bool) else "n/a"


def _iv(d: dict, q: str, fmt: str) -> str:
    """``v [lo, hi]`` of ``d``'s ``q``, ``q_lo``, ``q_hi`` in ``fmt``; ``n/a`` without them."""
    if not all(isinstance(d.get(k), int | float) for k in (q, f"{q}_lo", f"{q}_hi")):
        return "n/a"
    return f"{d[q]:{fmt}} [{d[f'{q}_lo']:{fmt}}, {d[f'{q}_hi']:{fmt}}]"


def selection_report(selected: dict[str, dict], summary: pd.DataFrame) -> str:
    """The report's section on the policies chosen by ``helpdp.select`` (``selected``:
    policy name -> its ``selected.json``): the cross-fitted off-policy estimate that
    chose it beside what the environments measured, and the support of each chosen
    candidate (what ``helpdp.select`` prints: agreeing episodes, the episodes where it
    deviates from the reference and where the reference deviates from it)."""
    rows = summary[summary["policy"].isin(list(selected))]
    if rows.empty:
        return ""
    lines = [
        "## Chosen by helpdp.select: the off-policy evidence behind each choice",
        "",
        "Each policy below was chosen by cross-fitted off-policy evaluation on the data's "
        "episodes (`python -m helpdp.select`); its estimate is set beside what the "
        "environments measured, and each chosen candidate's support beside it (few agreeing "
        "or deviating episodes: an estimate resting on little data).",
        "",
    ]
    for name in dict.fromkeys(rows["policy"]):
        rec, o = selected[name], selected[name].get("ope", {})
        lines += [
            f"### {name}",
            "",
            f"select: {o.get('estimator', '?')}, {rec.get('folds', '?')} folds of "
            f"{o.get('unit', '?')}s, reference {o.get('reference', '?')}: OPE SR "
            f"{_iv(o, 'SR', '.3f')}, U {_iv(o, 'U', '.2f')}, dSR vs the reference "
            f"{_iv(o, 'dSR', '+.3f')}.",
        ]
        for r in rows[rows["policy"] == name].itertuples():
            lines.append(
                f"Measured ({r.split} tasks, {r.episodes} episodes): SR {r.SR:.3f} "
                f"[{r.SR_lo:.3f}, {r.SR_hi:.3f}], U {r.U:.2f} ± {r.U_ci:.2f}."
            )
        cands = {c.get("candidate"): c for c in rec.get("candidates", [])}
        lines += [
            "",
            "| chosen candidate | weight | OPE SR | OPE U | dSR [95%] | agreeing episodes | "
            "support (deviates / reference deviates) | supported |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for comp in rec.get("components", []):
            c = cands.get(comp.get("candidate"), {})
            lines.append(
                f"| {comp.get('candidate')} | {_num(comp.get('weight'), '.2f')} | "
                f"{_num(c.get('SR'), '.3f')} | {_num(c.get('U'), '.2f')} | "
                f"{_iv(c, 'dSR', '+.3f')} | "
                f"{c.get('agree', 'n/a')} | {c.get('deviate', 'n/a')} / "
                f"{c.get('deviate_ref', 'n/a')} | {c.get('supported', 'n/a')} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"
