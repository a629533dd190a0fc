"""Is the selection safe held out? The whole protocol on random HelpWorlds, measured exactly.

    python bench/safe_select.py [--worlds 200] [--tasks 8 16] [--budgets 1.05 2] [--out FILE.json]

Per world (``helpdp.synthetic.HelpWorld`` with random difficulties and help memory; its
values are exact by recursion): collect the grid, optionally stage 2 at turns 2 and 3
(``TriggerRandomised``), run ``helpdp.select`` (its confirmation fold included), and
value the chosen policy exactly against the best mixture of the fixed rules (never, the
configured turn rules, always) at the chosen policy's own exact spend. Reported per design
and task count: the rate at which the choice is worse than that hull by more than
``delta`` (0.01; the target: at most 5%), the rate at which it beats the hull by more
than ``delta`` (its power to find an advantage where the world has one), and how often it
keeps the reference. Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import two_stage as ts  # noqa: E402
from helpdp.evaluate.stats import _upper_hull  # noqa: E402
from helpdp.intervals import wilson  # noqa: E402
from helpdp.policies import AtTurns, Never, TriggerRandomised  # noqa: E402
from helpdp.select import SelectConfig, select  # noqa: E402
from helpdp.synthetic import HelpWorld  # noqa: E402

RULES = [[0], [0, 2], [0, 3]]


def hull_value(world: HelpWorld, usage: float) -> float:
    """The best mixture of the fixed rules at ``usage`` calls, exactly."""
    pols = [Never()] + [AtTurns(tuple(r)) for r in RULES] + [AtTurns(tuple(range(world.horizon)))]
    pts = sorted((*world.exact(p)[::-1], p.name) for p in pols)
    pts = sorted(((u, s, n) for u, s, n in pts), key=lambda x: (x[0], -x[1]))
    hull = _upper_hull(pts)
    if usage >= hull[-1][0]:
        return hull[-1][1]
    for (u0, s0, _), (u1, s1, _) in zip(hull, hull[1:]):
        if u0 <= usage <= u1:
            return s0 + (s1 - s0) * (usage - u0) / (u1 - u0)
    return hull[0][1]


def one_world(k: int, n_tasks: int, stage2: bool, budgets, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng([seed, k, n_tasks, int(stage2)])
    world = HelpWorld(
        difficulty=tuple(np.round(rng.uniform(0.0, 0.6, n_tasks), 3)),
        memory=int(rng.integers(1, 4)),
    )
    ds = world.collect(seeds=6, seed=int(rng.integers(1 << 30)))
    if stage2:
        design = TriggerRandomised("turn0", ("turn:2", "turn:3"), 0.5)
        ds = ts.join(ds, ts.collect_design(world, design, 30, seed=int(rng.integers(1 << 30))))
    cfg = SelectConfig(
        splits=["train"], rungs=["turn", "turn_age"], rules=RULES, event_rules=[], n_boot=100,
        out="unused",
    )  # fmt: skip
    out = []
    for b in budgets:
        rec = select(ds, cfg, float(b), log=lambda *_: None)
        from helpdp.selected import (
            _from_json,
            load_policy,  # noqa: F401  (the record's policy, as deployed)
        )

        pol = _from_json(rec["policy"], 0, "select")
        s, u = world.exact(pol)
        h = hull_value(world, u)
        out.append(
            {
                "world": k, "tasks": n_tasks, "stage2": stage2, "budget": float(b),
                "chosen": rec["policy_name"], "SR": s, "U": u, "hull": h, "gap": s - h,
                "kept_reference": rec["policy_name"] == "rule: turns 0",
            }
        )  # fmt: skip
    return out


def summarize(rows: list[dict], delta: float = 0.01) -> list[dict]:
    cells = {}
    for r in rows:
        cells.setdefault((r["tasks"], r["stage2"], r["budget"]), []).append(r)
    out = []
    for (n, s2, b), rs in sorted(cells.items()):
        gaps = np.array([r["gap"] for r in rs])
        worse, better = int((gaps < -delta).sum()), int((gaps > delta).sum())
        out.append(
            {
                "tasks": n, "design": "grid + stage 2" if s2 else "grid", "budget": b,
                "worlds": len(rs), "worse": worse, "worse_rate": worse / len(rs),
                "worse_ci": wilson(worse, len(rs)), "better_rate": better / len(rs),
                "kept_reference": float(np.mean([r["kept_reference"] for r in rs])),
                "mean_gap": float(gaps.mean()),
            }
        )  # fmt: skip
    return out


def run(worlds: int, tasks=(8, 16), budgets=(1.05, 2.0), seed: int = 0, progress=True):
    rows = []
    todo = [(k, n, s2) for n in tasks for s2 in (False, True) for k in range(worlds)]
    for k, n, s2 in tqdm(todo, disable=not progress, desc="worlds"):
        rows += one_world(k, n, s2, budgets, seed)
    return rows, summarize(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=200)
    ap.add_argument("--tasks", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--budgets", type=float, nargs="+", default=[1.05, 2.0])
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.out and Path(args.out).exists():
        ap.error(f"--out {args.out} exists: give a new file (nothing is replaced)")
    rows, table = run(args.worlds, tuple(args.tasks), tuple(args.budgets))
    print(
        "| tasks | design | budget | worlds | worse than the rules' hull by > 0.01 [95%] | better by > 0.01 | kept turn 0 | mean gap |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for t in table:
        lo, hi = t["worse_ci"]
        print(
            f"| {t['tasks']} | {t['design']} | {t['budget']:g} | {t['worlds']} | "
            f"{t['worse_rate']:.3f} [{lo:.3f}, {hi:.3f}] | {t['better_rate']:.3f} | "
            f"{t['kept_reference']:.2f} | {t['mean_gap']:+.4f} |"
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "table": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
