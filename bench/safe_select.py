"""Is the selection safe held out? The whole protocol on random HelpWorlds, measured exactly.

    python bench/safe_select.py [--worlds 200] [--tasks 8 16] [--budgets 1.05 2] \
        [--kinds plain rescue table features] [--fallback stable_rule] [--jobs 2] --out FILE.jsonl [--resume]

Per world (``helpdp.synthetic.HelpWorld`` with random difficulties and help memory; kind
``rescue``: help right after a failed turn pays more, an advantage no turn rule takes; its
values are exact by recursion; kinds ``table`` and ``features``: ``bench.fitted_world``'s
world played by the agent fitted to the real model, its tasks' reference calls drawn as
the generated benchmark's, values exact by forward recursion): collect the grid (``--seeds`` per task and probability, 6
by default), optionally stage 2 at turns 2 and 3
(``TriggerRandomised``), run ``helpdp.select`` (its confirmation fold included), and
value the chosen policy exactly against the best mixture of the fixed rules (never, the
turn rules, always: the rules the selection has too) at the chosen policy's own exact
spend. Reported per kind, design and task count: the rate at which the choice is worse
than that hull by more than ``delta`` (0.01; the target: at most 5%), the rate at which it
beats the hull by more than ``delta`` (its power, where the world has an advantage), and
how often it keeps a rule. Rows are appended to ``--out`` as worlds finish; ``--resume``
skips the worlds already there, so a long run continues where it stopped. Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import two_stage as ts  # noqa: E402
from bench.fitted_world import FittedWorld, load_agent  # noqa: E402
from helpdp.evaluate.stats import _upper_hull  # noqa: E402
from helpdp.intervals import wilson  # noqa: E402
from helpdp.policies import AtTurns, Never, TriggerRandomised, TurnZeroThen  # noqa: E402
from helpdp.select import FALLBACKS, SelectConfig, select  # noqa: E402
from helpdp.selected import _from_json  # noqa: E402
from helpdp.synthetic import HelpWorld  # noqa: E402

RULES = [[0], [0, 2], [0, 3]]
KINDS = {"plain": 0.0, "rescue": 0.25}  # HelpWorld.rescue of each kind of world
#: worlds played by a fitted agent (``bench.fitted_world``): its kind in ``AGENTS``
FITTED_KINDS = ("table", "features")
ALL_KINDS = (*KINDS, *FITTED_KINDS)
#: the reference calls of the 400 tasks of ``collect.worlds.generate n=40 seed=0``
#: (calls: tasks), from which a fitted world's tasks are drawn; its worlds' tools: 29-45
GEN_CALLS = {1: 80, 2: 120, 3: 40, 4: 63, 5: 31, 6: 34, 7: 11, 8: 21}
GEN_TOOLS = (29, 45)
#: the event rules whose exact gap to the turn rules' hull is a fitted world's advantage
EVENT_PROBES = (("working",), ("failed",), ("unknown_tool",), ("repeat",), ("failed", "repeat"))
DESIGNS = {"grid": False, "stage2": True}  # the grid alone, or with stage 2 at turns 2, 3


def _rules(world: HelpWorld) -> list:
    return [Never()] + [AtTurns(tuple(r)) for r in RULES] + [AtTurns(tuple(range(world.horizon)))]


def _rules_hull(world) -> list:
    """The rules' exact upper hull, computed once per world (kept on the world: every
    budget's and every probe's hull value reads the same one)."""
    hull = world.__dict__.get("_rules_hull")
    if hull is None:
        pts = sorted(
            ((*world.exact(p)[::-1], p.name) for p in _rules(world)), key=lambda x: (x[0], -x[1])
        )
        hull = _upper_hull(pts)
        object.__setattr__(world, "_rules_hull", hull)  # the worlds are frozen dataclasses
    return hull


def hull_value(world: HelpWorld, usage: float) -> float:
    """The best mixture of the fixed rules at ``usage`` calls, exactly."""
    hull = _rules_hull(world)
    if usage >= hull[-1][0]:
        return hull[-1][1]
    for (u0, s0, _), (u1, s1, _) in zip(hull, hull[1:]):
        if u0 <= usage <= u1:
            return s0 + (s1 - s0) * (usage - u0) / (u1 - u0)
    return hull[0][1]


class Rescue:
    """Help at turn 0 and right after every failed turn: the policy a ``rescue`` world
    rewards, which no turn rule is (its exact gap to the rules' hull is the world's
    available advantage)."""

    name = "turn 0 + after every failed turn"

    def decide(self, views) -> np.ndarray:
        return np.array([int(v.depth == 0 or v.errors > 0) for v in views], np.int8)


def make_world(k: int, n_tasks: int, stage2: bool, kind: str, seed: int = 0):
    """World ``k`` of a cell, its rng (for the collection) and its exact advantage: how
    far :class:`Rescue` lies above the rules' hull (negative: nowhere); for a fitted
    kind, the best of the :data:`EVENT_PROBES` rules."""
    rng = np.random.default_rng([seed, k, n_tasks, int(stage2), ALL_KINDS.index(kind)])
    if kind in FITTED_KINDS:
        calls = np.array(list(GEN_CALLS))
        weights = np.array(list(GEN_CALLS.values()), float)
        world = FittedWorld(
            load_agent(kind),
            n_calls=tuple(int(c) for c in rng.choice(calls, n_tasks, p=weights / weights.sum())),
            n_tools=tuple(int(x) for x in rng.integers(GEN_TOOLS[0], GEN_TOOLS[1] + 1, n_tasks)),
        )
        gaps = []
        for events in EVENT_PROBES:
            s, u = world.exact(TurnZeroThen(events))
            gaps.append(s - hull_value(world, u))
        return world, rng, max(gaps)
    world = HelpWorld(
        difficulty=tuple(np.round(rng.uniform(0.0, 0.6, n_tasks), 3)),
        memory=int(rng.integers(1, 4)),
        rescue=KINDS[kind],
    )
    s, u = world.exact(Rescue())
    return world, rng, s - hull_value(world, u)


def one_world(k, n_tasks, stage2, budgets, kind="plain", fallback="reference", seed=0, seeds=6,
              stable_share=None, stable_margin=None):  # fmt: skip
    """World ``k`` of a cell through the whole protocol (``seeds``: the grid's seeds per
    task and trigger probability; ``stable_share``: ``SelectConfig.stable_share``, None its
    default); one row per budget."""
    world, rng, advantage = make_world(k, n_tasks, stage2, kind, seed)
    ds = world.collect(seeds=seeds, seed=int(rng.integers(1 << 30)))
    if stage2:
        design = TriggerRandomised("turn0", ("turn:2", "turn:3"), 0.5)
        seed2 = int(rng.integers(1 << 30))
        more = (
            world.collect_design(design, 30, seed=seed2)
            if isinstance(world, FittedWorld)
            else ts.collect_design(world, design, 30, seed=seed2)
        )
        ds = ts.join(ds, more)
    cfg = SelectConfig(
        splits=["train"], rungs=["turn", "turn_age", "turn_fail"],
        rules=RULES + [list(range(world.horizon))], event_rules=[], n_boot=100,
        fallback=fallback, out="unused",
    )  # fmt: skip
    if stable_share is not None:
        cfg.stable_share = float(stable_share)
    if stable_margin is not None:
        cfg.stable_margin = float(stable_margin)
    out = []
    for b in budgets:
        rec = select(ds, cfg, float(b), log=lambda *_: None)
        pol = _from_json(rec["policy"], 0, "select")
        s, u = world.exact(pol)
        h = hull_value(world, u)
        kinds = {c["candidate"] for c in rec["components"]}
        rule_names = {p.name for p in _rules(world)}
        out.append(
            {
                "world": k, "tasks": n_tasks, "stage2": stage2, "kind": kind,
                "fallback": fallback, "budget": float(b), "chosen": rec["policy_name"],
                **({"seeds": seeds} if seeds != 6 else {}),
                **({"stable_share": cfg.stable_share} if fallback == "stable_rule" else {}),
                **({"stable_margin": cfg.stable_margin} if cfg.stable_margin else {}),
                "SR": s, "U": u, "hull": h, "gap": s - h, "advantage": advantage,
                "kept_rule": kinds <= rule_names,
                "outcome": (rec["confirm"] or {}).get("outcome", ""),
            }
        )  # fmt: skip
    return out


def summarize(rows: list[dict], delta: float = 0.01) -> list[dict]:
    cells = {}
    for r in rows:
        key = (r.get("kind", "plain"), r["tasks"], r["stage2"], r.get("seeds", 6), r["budget"])
        cells.setdefault(key, []).append(r)
    out = []
    for (kind, n, s2, seeds, b), rs in sorted(cells.items()):
        gaps = np.array([r["gap"] for r in rs])
        worse, better = int((gaps < -delta).sum()), int((gaps > delta).sum())
        out.append(
            {
                "kind": kind, "tasks": n, "seeds": seeds,
                "design": ("grid + stage 2" if s2 else "grid")
                + ("" if seeds == 6 else f", {seeds} seeds"),
                "budget": b, "worlds": len(rs), "worse": worse, "worse_rate": worse / len(rs),
                "worse_ci": wilson(worse, len(rs)), "better": better,
                "better_rate": better / len(rs), "better_ci": wilson(better, len(rs)),
                "kept_rule": float(np.mean([r.get("kept_rule", False) for r in rs])),
                "mean_gap": float(gaps.mean()),
                "advantage": float(np.mean([r.get("advantage", np.nan) for r in rs])),
            }
        )  # fmt: skip
    return out


def _job(args):
    return one_world(*args)


def run(worlds, tasks=(8, 16), budgets=(1.05, 2.0), kinds=("plain",), fallback="reference",
        seed=0, progress=True, jobs=1, out=None, done=(), designs=DESIGNS, seeds=6,
        first=0, stable_share=None, stable_margin=None):  # fmt: skip
    """Every (kind, tasks, design, world) not in ``done`` (worlds ``first`` to ``first +
    worlds - 1`` of each cell); rows appended to ``out`` (a JSONL path) as each world
    finishes. Returns the new rows."""
    todo = [
        (k, n, s2, tuple(budgets), kind, fallback, seed, seeds, stable_share, stable_margin)
        for kind in kinds for n in tasks for s2 in (DESIGNS[d] for d in designs)
        for k in range(first, first + worlds)
        if (kind, n, s2, seeds, k) not in set(done)
    ]  # fmt: skip
    rows = []
    pool = multiprocessing.get_context("spawn").Pool(jobs) if jobs > 1 else None
    try:
        it = pool.imap_unordered(_job, todo) if pool else map(_job, todo)
        for world_rows in tqdm(it, total=len(todo), disable=not progress, desc="worlds"):
            rows += world_rows
            if out is not None:
                with open(out, "a") as f:
                    f.writelines(json.dumps(r) + "\n" for r in world_rows)
    finally:
        if pool:
            pool.close()
            pool.join()
    return rows


def read_rows(path) -> list[dict]:
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}: line {i + 1}: not JSON ({e.msg})") from None
    return rows


def print_table(table) -> None:
    print(
        "| world | tasks | design | budget | worlds | worse than the rules' hull by > 0.01 [95%] "
        "| better by > 0.01 [95%] | kept a rule | mean gap | advantage available |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in table:
        lo, hi = t["worse_ci"]
        blo, bhi = t["better_ci"]
        print(
            f"| {t['kind']} | {t['tasks']} | {t['design']} | {t['budget']:g} | {t['worlds']} | "
            f"{t['worse_rate']:.3f} [{lo:.3f}, {hi:.3f}] | {t['better_rate']:.3f} "
            f"[{blo:.3f}, {bhi:.3f}] | {t['kept_rule']:.2f} | {t['mean_gap']:+.4f} | "
            f"{t['advantage']:+.3f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=200)
    ap.add_argument("--first-world", type=int, default=0, help="the first world of each cell")
    ap.add_argument(
        "--stable-share", type=float, default=None,
        help="SelectConfig.stable_share (fallback=stable_rule; default: the config's)",
    )  # fmt: skip
    ap.add_argument(
        "--stable-margin", type=float, default=None,
        help="SelectConfig.stable_margin (fallback=stable_rule; default: the config's)",
    )  # fmt: skip
    ap.add_argument("--tasks", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--budgets", type=float, nargs="+", default=[1.05, 2.0])
    ap.add_argument("--kinds", nargs="+", default=["plain", "rescue"], choices=list(ALL_KINDS))
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--fallback", default="reference", choices=list(FALLBACKS))
    ap.add_argument("--seeds", type=int, default=6, help="grid seeds per task and probability")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default="", help="JSONL of rows, appended as worlds finish")
    ap.add_argument("--resume", action="store_true", help="continue an existing --out")
    ap.add_argument("--table", action="store_true", help="only print the table of --out")
    args = ap.parse_args()
    out = Path(args.out) if args.out else None
    done, old = set(), []
    if out is not None and out.exists():
        if not (args.resume or args.table):
            ap.error(f"--out {out} exists: give a new file, or --resume to continue it")
        old = read_rows(out)
        done = {(r["kind"], r["tasks"], r["stage2"], r.get("seeds", 6), r["world"]) for r in old}
    if not args.table:
        old += run(
            args.worlds, tuple(args.tasks), tuple(args.budgets), tuple(args.kinds),
            args.fallback, jobs=args.jobs, out=out, done=done, designs=tuple(args.designs),
            seeds=args.seeds, first=args.first_world, stable_share=args.stable_share,
            stable_margin=args.stable_margin,
        )  # fmt: skip
    print_table(summarize(old))


if __name__ == "__main__":
    main()
