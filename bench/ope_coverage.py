"""Do the off-policy intervals cover the exact value?

    python bench/ope_coverage.py [--reps 200] [--seeds 3 10] [--out FILE.json]
        [--dump PREFIX] [--estimators ...] [--methods ...] [--rep-start R]
        [--tasks K] [--groups G]

On ``helpdp.synthetic.HelpWorld`` with 12 tasks (``--tasks``; difficulties evenly spaced
from 0.05 to 0.6; exact values by recursion), each replication collects the shipped design (one
episode per task, trigger probability in 0, .1, .3, .5, .7, .9, 1 and seed: 12 x 7 x
``seeds``) and estimates five policies (never, turn 0, turns 0,2, turns 0,3, turn 0 +
after a failure) and their paired differences from the turn-0 rule with every
estimator of ``helpdp.ope``, under each interval method:

* ``task-jk`` (``unit="task"``, the default from 8 tasks on, shipped): the mean of the
  per-task estimates -/+ the Student-t quantile x the delete-one-task jackknife SE,
  the control variate refitted without the task;
* ``task-gjk``: the same with the delete-a-group jackknife (``--groups`` groups of
  tasks dealt round-robin, one refit per group; the default from
  ``helpdp.ope.JACKKNIFE_GROUPS`` tasks on), to check it at many tasks (``--tasks``);
* ``task-t``: the Student-t interval of the tasks' own estimates (the model held fixed;
  the intervals shipped first on 2026-11-28, before the jackknife);
* ``task-pct``: a percentile bootstrap of those per-task estimates (tasks resampled);
* ``episode`` (``unit="episode"``): a percentile bootstrap of episodes within each task;
* ``stratum`` (``unit="stratum"``): the percentile bootstrap of episodes within (task,
  trigger probability) strata, the intervals shipped until 2026-11-28.

It prints, per design, method, estimator and quantity (``SR``, ``U``, the differences
``dSR``, ``dU``), the smallest coverage over the policies (and the mean), and writes
every cell (coverage, bias, mean half-width) to ``--out``; ``--dump`` saves the
per-task estimates (``PREFIX_seeds<S>.npz``) for other intervals offline. Collection
``r`` is ``HelpWorld.collect(seed=r)``, so ``--rep-start`` splits a run in chunks that
give the same collections. Fixed seeds: the same command gives the same numbers.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from helpdp._src import ope as ko
from helpdp.ope import ESTIMATORS, JACKKNIFE_GROUPS, estimate, load_logged
from helpdp.policies import AtTurns, Never, TurnZero, TurnZeroOrAfterFailure
from helpdp.synthetic import HelpWorld

PROBS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def world_of(tasks: int) -> HelpWorld:
    """``tasks`` tasks, difficulties evenly spaced from 0.05 to 0.6."""
    return HelpWorld(difficulty=tuple(float(x) for x in np.round(np.linspace(0.05, 0.6, tasks), 3)))


WORLD = world_of(12)
METHODS = ("task-jk", "task-gjk", "task-t", "task-pct", "episode", "stratum")
QUANTITIES = ("SR", "U", "dSR", "dU")


def policies():
    return [Never(), TurnZero(), AtTurns((0, 2)), AtTurns((0, 3)), TurnZeroOrAfterFailure()]


def _pct(per_task: np.ndarray, b: int, level: float, rng) -> tuple[float, float]:
    """Percentile interval of the mean over tasks, tasks resampled ``b`` times."""
    x = per_task[np.isfinite(per_task)]
    if len(x) < 2:
        return np.nan, np.nan
    means = x[rng.integers(0, len(x), size=(b, len(x)))].mean(axis=1)
    a = (1 - level) / 2
    return tuple(np.quantile(means, [a, 1 - a]))


def run(
    reps: int,
    seeds: int,
    *,
    world=WORLD,
    methods=METHODS,
    estimators=ESTIMATORS,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    pols=None,
    dump: dict | None = None,
    rep_start: int = 0,
    groups: int = JACKKNIFE_GROUPS,
) -> dict:
    """Coverage of every (method, estimator, policy, quantity) over ``reps`` collections.
    ``dump`` (a dict): receives ``per_task`` ``(reps, policies, estimators, quantities,
    tasks)``, the per-task estimates (``unit="task"``), for other intervals offline.
    ``rep_start``: the first collection's index (a run split in chunks gives the same
    collections as one run); ``groups``: ``task-gjk``'s jackknife groups."""
    pols = policies() if pols is None else pols
    ref = TurnZero()
    exact = {p.name: world.exact(p) for p in pols}
    ex_ref = world.exact(ref)
    truth = {}
    for p in pols:
        s, u = exact[p.name]
        truth[p.name] = {"SR": s, "U": u, "dSR": s - ex_ref[0], "dU": u - ex_ref[1]}
    cells: dict = {}
    rng = np.random.default_rng(seed)
    n_tasks = len(world.difficulty)
    per_task_all = np.full((reps, len(pols), len(estimators), len(QUANTITIES), n_tasks), np.nan)
    for rep in range(rep_start, rep_start + reps):
        logged = load_logged(world.collect(seeds=seeds, probs=PROBS, seed=10_000 * seed + rep))
        logged.views()
        for p in pols:
            is_ref = p.name == ref.name
            kw = {"estimators": estimators, "reference": None if is_ref else ref, "level": level}
            got = {}
            jk = "task-jk" in methods
            e = estimate(p, logged, unit="task", max_groups=n_tasks if jk else groups, **kw)
            if jk:
                got["task-jk"] = e
            if "task-gjk" in methods:
                got["task-gjk"] = (
                    e if not jk else estimate(p, logged, unit="task", max_groups=groups, **kw)
                )
            for m in ("episode", "stratum"):
                if m in methods:
                    got[m] = estimate(p, logged, unit=m, n_boot=n_boot, seed=rep, **kw)
            pt = e.per_task
            for (est, q), g in pt.groupby(["estimator", "quantity"]):
                if q in QUANTITIES:
                    ip = pols.index(p)
                    ie, iq = list(estimators).index(est), QUANTITIES.index(q)
                    per_task_all[rep - rep_start, ip, ie, iq] = g["estimate"].to_numpy()
            for m, est in got.items():
                for r in est.table.itertuples():
                    if r.quantity not in QUANTITIES:
                        continue
                    _add(
                        cells,
                        (m, r.estimator, p.name, r.quantity),
                        r.value,
                        r.lo,
                        r.hi,
                        truth[p.name][r.quantity],
                    )
            for (est, q), g in pt.groupby(["estimator", "quantity"]):
                if q not in QUANTITIES:
                    continue
                v = g["estimate"].to_numpy()  # the tasks' own estimates (no jackknife)
                if "task-t" in methods:
                    m, lo, hi, _ = ko.t_interval(v, level)
                    _add(cells, ("task-t", est, p.name, q), m, lo, hi, truth[p.name][q])
                if "task-pct" in methods:
                    lo, hi = _pct(v, n_boot, level, rng)
                    _add(
                        cells,
                        ("task-pct", est, p.name, q),
                        float(np.nanmean(v)),
                        lo,
                        hi,
                        truth[p.name][q],
                    )
    if dump is not None:
        dump.update(
            per_task=per_task_all,
            policies=[p.name for p in pols],
            estimators=list(estimators),
            quantities=list(QUANTITIES),
            truth=np.array([[truth[p.name][q] for q in QUANTITIES] for p in pols]),
        )
    out = {
        "reps": reps,
        "seeds": seeds,
        "tasks": len(world.difficulty),
        "episodes": len(world.difficulty) * len(PROBS) * seeds,
        "level": level,
        "exact": truth,
        "cells": [],
    }
    for (m, est, pol, q), c in cells.items():
        a = np.asarray(c)
        out["cells"].append(
            {
                "method": m,
                "estimator": est,
                "policy": pol,
                "quantity": q,
                "coverage": float(a[:, 0].mean()),
                "bias": float(a[:, 1].mean()),
                "half_width": float(np.nanmean(a[:, 2])),
                "rmse": float(np.sqrt((a[:, 1] ** 2).mean())),
            }
        )
    return out


def _add(cells, key, value, lo, hi, truth, tol=1e-9):
    ok = bool(np.isfinite(lo) and lo - tol <= truth <= hi + tol)
    cells.setdefault(key, []).append((ok, value - truth, (hi - lo) / 2))


def summary(res: dict) -> list[dict]:
    """Per (method, estimator, quantity): the smallest and the mean coverage over the
    policies, and the policy where it is smallest."""
    rows = {}
    for c in res["cells"]:
        rows.setdefault((c["method"], c["estimator"], c["quantity"]), []).append(c)
    out = []
    for (m, est, q), cs in rows.items():
        worst = min(cs, key=lambda c: c["coverage"])
        out.append(
            {
                "method": m,
                "estimator": est,
                "quantity": q,
                "min": worst["coverage"],
                "mean": float(np.mean([c["coverage"] for c in cs])),
                "worst": worst["policy"],
                "half_width": float(np.mean([c["half_width"] for c in cs])),
            }
        )
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seeds", type=int, nargs="+", default=[3, 10])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=ESTIMATORS)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=12, help="tasks (difficulty 0.05 to 0.6)")
    ap.add_argument("--groups", type=int, default=JACKKNIFE_GROUPS, help="task-gjk's groups")
    ap.add_argument("--rep-start", type=int, default=0, help="first collection (run in chunks)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dump", default=None, help="NPZ prefix: per-task estimates per seeds")
    args = ap.parse_args(argv)
    res = {}
    for s in args.seeds:
        t0 = time.perf_counter()
        dump: dict = {}
        r = run(
            args.reps,
            s,
            methods=tuple(args.methods),
            n_boot=args.n_boot,
            dump=dump,
            rep_start=args.rep_start,
            estimators=tuple(args.estimators),
            world=world_of(args.tasks),
            groups=args.groups,
        )
        if args.dump:
            np.savez(f"{args.dump}_seeds{s}.npz", **dump)
        r["summary"] = summary(r)
        r["seconds"] = time.perf_counter() - t0
        res[f"seeds={s}"] = r
        print(
            f"{r['tasks']} tasks x 7 probabilities x {s} seeds = {r['episodes']} episodes, "
            f"{args.reps} collections; 95% intervals, coverage min (mean) over "
            f"{len(r['exact'])} policies:"
        )
        print("| method | estimator | " + " | ".join(QUANTITIES) + " |")
        print("|---|---|" + "---|" * len(QUANTITIES))
        tab = {(x["method"], x["estimator"], x["quantity"]): x for x in r["summary"]}
        for m in args.methods:
            for est in args.estimators:
                cells = [tab.get((m, est, q)) for q in QUANTITIES]
                txt = [f"{c['min']:.2f} ({c['mean']:.2f})" if c else "" for c in cells]
                print(f"| {m} | {est} | " + " | ".join(txt) + " |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
