"""`python -m helpdp.search budget=1.0`: the budget search from the command line.

Its fields (:class:`SearchConfig`, or `--help`) and its body (:func:`run_search`) are
here; the search itself is in helpdp.budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helpdp.budget import (
    R_MAX,
    MixResult,
    _r_text,
    mix_budgets,
    search_budgets,
    warm_up,
    write_result,
)
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.config import SolverConfig
from helpdp.solve import solve


@dataclass
class SearchConfig(SolverConfig):
    """`python -m helpdp.search`: find the help cost r whose policy meets a budget."""

    data: Any = _f(
        None, "dataset directory (docs/data-format.md); null runs on the embedded demo dataset"
    )
    budget: Any = _f(
        1.0,
        "expected expert calls per episode allowed (E[U] <= budget); a list sweeps several budgets",
    )
    budgets: dict = _f(
        {},
        "K > 1 interventions: per-intervention budgets, e.g. budgets.expert=1.0 budgets.oracle=0.5",
    )
    out: str = _f(
        "outputs/search",
        "output directory (search.json, policy.parquet, ...), relative to the current "
        "directory (make demo writes outputs/ inside the checkout); a list of budgets "
        "writes OUT/budget=<value>/ each",
    )
    max_solves: int = _f(200, "most solves one budget search may use")
    method: str = _f(
        "auto",
        "auto: answer budgets from the per-task frontier trace where it applies (rule=exact, "
        "one intervention, acyclic graph), else by solves; frontier: the trace only; solves: "
        "the chord search over solves",
    )
    quiet: bool = _f(False, "print only the final line")


def _budget_dir(b: float) -> str:
    return f"budget={b:g}"


def run_search(cfg: SearchConfig) -> list[dict]:
    """The body of ``python -m helpdp.search``: load once, search each budget, write."""
    from helpdp.cliconf import UsageError, parse_budgets
    from helpdp.data import load_dataset
    from helpdp.demo import demo_dataset_path
    from helpdp.solve import RULES, score_rows

    say = (lambda *a: None) if cfg.quiet else print
    per_name = {str(k): parse_budgets(v, f"budgets.{k}")[0] for k, v in (cfg.budgets or {}).items()}
    sweep = not isinstance(cfg.budget, int | float)  # a list sweeps from one load
    budgets = parse_budgets(cfg.budget)  # before the data loads: a typo costs nothing
    if cfg.rule not in RULES:
        raise UsageError(f"rule must be one of {RULES}, got {cfg.rule!r}")
    data = Path(cfg.data) if cfg.data else demo_dataset_path()
    t0 = time.perf_counter()
    ds = load_dataset(data, gamma=cfg.gamma)
    mdp = ds.mdp
    unknown = sorted(set(per_name) - set(ds.actions[1:]))
    if unknown:
        raise UsageError(
            f"budgets.{unknown[0]}: the dataset has no intervention {unknown[0]!r} (its "
            f"interventions: {ds.actions[1:]})"
        )
    if per_name and mdp.n_actions == 2:  # budgets.<the one intervention>=C is budget=C
        budgets, sweep = [per_name[ds.actions[1]]], False
    say(
        f"loaded {data}: {mdp.n_states} states, {mdp.n_transitions} transitions, "
        f"actions {ds.actions}, gamma {ds.gamma}, "
        f"{'acyclic' if mdp.acyclic else 'cyclic'} ({time.perf_counter() - t0:.2f}s)"
    )
    p_row = score_rows(ds) if cfg.rule == "paper" else None
    kw = dict(
        gamma=ds.gamma,
        rule=cfg.rule,
        p_row=p_row,
        tol=cfg.tol,
        max_iters=cfg.max_iters,
        tie_tol=cfg.tie_tol,
        dm_tol=cfg.dm_tol,
    )
    out = Path(cfg.out)
    summaries = []
    if mdp.n_actions > 2:
        names = ds.actions[1:]
        missing = [n for n in names if n not in per_name]
        if missing:
            raise ValueError(
                f"this dataset has {len(names)} interventions {names}: give budgets.<name>=C for {missing}"
            )
        b = np.array([per_name[n] for n in names])
        if cfg.rule != "exact":
            raise ValueError("per-intervention budgets are searched with rule=exact")
        kw = {key: v for key, v in kw.items() if key not in ("rule", "p_row", "dm_tol")}
        warm = warm_up(mdp, **kw)
        t1 = time.perf_counter()
        pols, w, solves = mix_budgets(mdp, b, max_solves=cfg.max_solves, log=say, **kw)
        res = MixResult(
            names=list(names),
            budgets=b,
            policies=pols,
            weights=w,
            solves=solves,
            seconds=time.perf_counter() - t1,
            rule=cfg.rule,
            gamma=ds.gamma,
        )
        if not res.fitting():  # no component alone meets every budget: the least-help policy
            res.least_help = solve(mdp, np.full(len(names), R_MAX), rule="exact", **kw)
        summary = res.to_json()
        write_result(ds, res, out)
        print(
            f"budgets {summary['budget']}: E[U]={summary['expected_usage']} "
            f"E[S]={summary['expected_success']:.4f} ({len(pols)} policies mixed)  "
            f"[{solves} solves, {res.seconds:.3f}s{warm}] -> {out}"
        )
        return [summary]
    warm = warm_up(mdp, **kw)
    results = search_budgets(
        mdp,
        [float(b) for b in budgets],
        max_solves=cfg.max_solves,
        log=say,
        method=cfg.method,
        **kw,
    )
    # one result at a time, by next() (zip's reused tuple would hold the last result
    # while the next batch is computed, and with it the block that batch could reuse)
    for b in budgets:
        res = next(results)
        where = write_result(ds, res, out / _budget_dir(float(b)) if sweep else out)
        js = res.to_json()
        mix = ""
        if res.more_help is not None:
            mix = f" (mixture: more-help policy with probability {res.weight_more_help:.4f})"
        print(
            f"budget {b:g}: r={_r_text(res.r)}  E[U]={js['expected_usage']:.4f}  "
            f"E[S]={js['expected_success']:.4f}{mix}  [{res.solves_text}, {res.seconds:.3f}s{warm}] -> {where}"
        )
        warm = ""
        summaries.append(js)
        del res  # (written: its batch's block is free for the next batch)
    return summaries


def main() -> None:
    run_app("helpdp.search", SearchConfig, run_search, config_name="search")


if __name__ == "__main__":
    main()
