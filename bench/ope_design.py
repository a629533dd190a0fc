"""Which collection design estimates candidate policies best, for the same episodes?

    python bench/ope_design.py [--reps 40] [--seeds 10] [--out FILE.json]

On ``helpdp.synthetic.HelpWorld`` (4 tasks, exact values known by recursion), for a
set of candidate policies (never, always, the rules), each replication spends the same
number of episodes two ways:

* **grid** -- the schedule of Min et al. (2025): one episode per (task, p, seed) at p in 0, .1, .3,
  .5, .7, .9, 1; every candidate is then estimated off-policy (``helpdp.ope``:
  self-normalised IS, doubly robust, weighted DR);
* **candidates** -- each episode runs one candidate, drawn in turn (so every
  candidate gets N/K episodes per task); each candidate is estimated by its own
  episodes' mean (on-policy: no weights);

and reports, per design and estimator, the root-mean-square and mean absolute error
of SR and of U (calls per episode) over the candidates and replications, against the
exact values. Every number comes from one run; nothing is timed.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from helpdp.ope import estimate
from helpdp.policies import AfterFailure, Always, AtTurns, Never, TurnZero, TurnZeroOrAfterFailure
from helpdp.synthetic import HelpWorld

PROBS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def candidates():
    return [
        Never(),
        Always(),
        TurnZero(),
        AtTurns((0, 3)),
        AtTurns((0, 2, 4)),
        AfterFailure(),
        TurnZeroOrAfterFailure(),
    ]


def run(reps: int, seeds: int, estimators=("snis", "dr", "wdr")) -> dict:
    world = HelpWorld()
    pols = candidates()
    exact = np.array([world.exact(p) for p in pols])  # (K, 2): SR, U
    n_tasks = len(world.difficulty)
    n_eps = n_tasks * len(PROBS) * seeds
    per_cand = n_eps // (len(pols) * n_tasks)  # episodes per (candidate, task)
    err = {f"grid/{e}": [] for e in estimators}
    err["candidates/mean"] = []
    for rep in range(reps):
        ds = world.collect(seeds=seeds, probs=PROBS, seed=1000 + rep)
        for k, pol in enumerate(pols):
            est = estimate(pol, ds, estimators=estimators, n_boot=10, seed=rep)
            for e in estimators:
                sr, u = est.get(e, "SR")[0], est.get(e, "U")[0]
                err[f"grid/{e}"].append((sr - exact[k, 0], u - exact[k, 1]))
            s, u = world.run(pol, per_cand, seed=2000 + 97 * rep + k)
            err["candidates/mean"].append((s.mean() - exact[k, 0], u.mean() - exact[k, 1]))
    out = {
        "episodes_per_replication": n_eps,
        "per_candidate_and_task": per_cand,
        "candidates": [p.name for p in pols],
        "reps": reps,
        "designs": {},
    }
    for name, e in err.items():
        a = np.array(e)
        out["designs"][name] = {
            "SR_rmse": float(np.sqrt((a[:, 0] ** 2).mean())),
            "SR_mae": float(np.abs(a[:, 0]).mean()),
            "U_rmse": float(np.sqrt((a[:, 1] ** 2).mean())),
            "U_mae": float(np.abs(a[:, 1]).mean()),
        }
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    res = run(args.reps, args.seeds)
    base = res["designs"]["candidates/mean"]["SR_rmse"]
    print(
        f"{res['episodes_per_replication']} episodes per replication, {args.reps} replications, "
        f"{len(res['candidates'])} candidates ({res['per_candidate_and_task']} episodes each "
        "per task under the candidates design)"
    )
    for name, d in res["designs"].items():
        print(
            f"  {name:18s} SR rmse {d['SR_rmse']:.4f} (x{d['SR_rmse'] / base:.2f} the "
            f"candidates design)  mae {d['SR_mae']:.4f}   U rmse {d['U_rmse']:.4f}  "
            f"mae {d['U_mae']:.4f}"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
