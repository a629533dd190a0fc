"""What the real model's pilot (bench/real_pilot.sh) says so far: which tasks the model
solves with and without help, the help's effect with tasks as the unit, and how many
held-out tasks and seeds a 0.05 difference at equal spend needs at 80% power.

    python bench/real_pilot_report.py helpdp/data/real-actor-pilot \\
        --worlds outputs/worlds-gen40-seed0 [--json FILE] [--rate]

It reads the finished shards of a running or stopped collection (each shard's
``episodes.parquet`` checked against the sha256 in its ``meta.json``), never writes into
them. A task counts only where it has both probabilities of a seed (a stopped run may hold
one). ``--rate`` adds the episodes per hour from the shards' modification times (on the
machine that ran it; a clone's times are its checkout's).

The sizing (``sizing``) models the paired difference of two policies at equal spend on a
task with ``m`` seeds as a between-task part ``sigma_b`` (how much the true difference
varies across tasks) plus each task's own noise ``sigma_w^2 / m``, with ``sigma_w^2 =
q 2 p(1 - p)`` at the task's pooled success rate ``p`` (two policies near it) where a
share ``q`` of the paired episodes diverge (the rest are one episode twice: difference
0). Neither ``sigma_b`` nor ``q`` is measured by a pilot of never and always: ``sigma_b``
is stated as a share of the between-task spread of the help effect (always - never), and
``q`` as 1 (every pair diverges: the upper bound) or 0.3; the rows say which.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpdp.intervals import cluster_ci, in_range, tasks_needed  # noqa: E402

COLUMNS = ["episode_id", "task_id", "scenario", "task_idx", "seed", "trigger_p", "success"]
COLUMNS += ["end_reason", "expert_calls", "steps"]
SEEDS_GRID = (4, 8, 16, 32)
SHARES = (0.0, 0.25)  # sigma_b as a share of the help effect's between-task sd
# the share of paired episodes in which the two policies act differently somewhere (the
# others are the same episode: the same seed, the same draws, difference 0); 0.15 on the
# earlier real verdict's 81 pairs (12 nonzero, 3 tasks)
DIVERGE = (1.0, 0.3)


def load_pilot(shards_root: Path) -> tuple[pd.DataFrame, list[float]]:
    """The finished shards' episodes (checked) and their files' modification times."""
    frames, times = [], []
    for meta_path in sorted(Path(shards_root).glob("shards/*/meta.json")):
        meta = json.loads(meta_path.read_text())
        ep = meta_path.parent / "episodes.parquet"
        want = meta.get("sha256", {}).get("episodes.parquet")
        if not ep.is_file() or hashlib.sha256(ep.read_bytes()).hexdigest() != want:
            raise SystemExit(f"{ep}: missing or not the sha256 its meta.json records")
        frames.append(pd.read_parquet(ep, columns=COLUMNS))
        times.append(meta_path.stat().st_mtime)
    if not frames:
        raise SystemExit(f"{shards_root}: no finished shard (shards/*/meta.json)")
    eps = pd.concat(frames, ignore_index=True)
    eps["p"] = eps["trigger_p"].map(lambda v: float(np.asarray(v).ravel()[0]))
    return eps, times


def paired(eps: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, seed) holding both p=0 and p=1: ``s0``, ``s1`` (0/1)."""
    piv = eps.pivot_table(index=["task_id", "seed"], columns="p", values="success", aggfunc="max")
    piv = piv.reindex(columns=[0.0, 1.0]).dropna().astype(int)
    piv.columns = ["s0", "s1"]
    return piv.reset_index()


def task_table(pairs: pd.DataFrame, calls: dict[str, int] | None = None) -> pd.DataFrame:
    """Per task: seeds, successes without and with help, the pooled SR, and its class:
    ``varies`` (solved in some episodes, failed in others: the tasks that can say when
    help pays), ``never`` or ``always``."""
    g = pairs.groupby("task_id")
    t = pd.DataFrame({"seeds": g.size(), "k0": g["s0"].sum(), "k1": g["s1"].sum()})
    t["pooled"] = (t["k0"] + t["k1"]) / (2 * t["seeds"])
    t["kind"] = np.where(t["pooled"] == 0, "never", np.where(t["pooled"] == 1, "always", "varies"))
    if calls is not None:
        t["calls"] = [calls.get(i) for i in t.index]
    return t


def sizing(tasks: pd.DataFrame, pairs: pd.DataFrame, delta: float = 0.05) -> list[dict]:
    """Held-out tasks that show ``delta`` at 80% power (two-sided 5%, tasks as the unit),
    per seeds per task and share of the help effect's between-task sd taken as
    ``sigma_b``, over the tasks whose outcome varies."""
    var = tasks[tasks["kind"] == "varies"]
    if len(var) < 2:
        return []
    p = var["pooled"].to_numpy()
    sigma_w2 = float(np.mean(2 * p * (1 - p)))
    eff = pairs[pairs["task_id"].isin(var.index)].assign(d=lambda x: x["s1"] - x["s0"])
    effect_means = eff.groupby("task_id")["d"].mean()
    m0 = float(eff.groupby("task_id").size().mean())
    # the between-task variance of the help effect: the spread of task means less their noise
    noise = float(np.mean(eff.groupby("task_id")["d"].var(ddof=1).fillna(0) / m0))
    effect_b2 = max(float(np.var(effect_means, ddof=1)) - noise, 0.0)
    rows = []
    for share in SHARES:
        for q in DIVERGE:
            for m in SEEDS_GRID:
                sd = math.sqrt((share**2) * effect_b2 + q * sigma_w2 / m)
                n = tasks_needed(sd, delta)
                row = {"share": share, "diverge": q, "seeds": m, "sd_task": sd, "tasks": n}
                rows.append({**row, "episodes_per_policy": n * m})
    return rows


def candidates(eps: pd.DataFrame) -> pd.DataFrame:
    """Per task with a helped episode (docs/real-actor.md, the split rule as amended for
    the helped-first pilot): its helped episodes and successes ``n1``, ``k1``, unhelped
    ``n0``, ``k0``, and ``candidate``: at least one success, and a failure among its 4
    episodes possible (a failure seen, or unhelped episodes still to run, presumed to
    fail)."""
    helped = eps[eps["p"] == 1.0].groupby("task_id")["success"].agg(["size", "sum"])
    helped.columns = ["n1", "k1"]
    plain = eps[eps["p"] == 0.0].groupby("task_id")["success"].agg(["size", "sum"])
    plain.columns = ["n0", "k0"]
    t = helped.join(plain, how="left").fillna(0).astype(int)
    n_all = t["n0"] + t["n1"]
    failure_possible = (t["k0"] + t["k1"] < n_all) | (t["n0"] < t["n1"])
    t["candidate"] = ((t["k0"] + t["k1"]) > 0) & failure_possible
    t["scenario"] = [i.rpartition("/")[0] for i in t.index]
    return t


def world_rank(scenarios) -> list[str]:
    """The worlds in the split rule's order: by the sha256 of the scenario name."""
    return sorted(set(scenarios), key=lambda w: hashlib.sha256(w.encode()).hexdigest())


def choose_splits(cands: pd.DataFrame, worlds: list[str], min_test: int = 30) -> dict:
    """The split rule: test worlds taken in :func:`world_rank` order until they hold at
    least ``min_test`` candidates, the rest train; ``extend`` when that takes more than
    half of the candidates (the rule then extends the pilot to more worlds) or when the
    worlds do not hold ``min_test`` candidates at all."""
    chosen = cands[cands["candidate"]]
    per = chosen.groupby("scenario").size()
    total = int(per.sum())
    test, held = [], 0
    for w in world_rank(worlds):
        if held >= min_test:
            break
        test.append(w)
        held += int(per.get(w, 0))
    in_test = chosen["scenario"].isin(test)
    return {
        "candidates": total,
        "test_worlds": test,
        "train_worlds": [w for w in world_rank(worlds) if w not in test],
        "test_candidates": held,
        "train_candidates": total - held,
        "test_tasks": sorted(chosen.index[in_test]),
        "train_tasks": sorted(chosen.index[~in_test]),
        "extend": held < min_test or held > total / 2,
    }


def split_record(s: dict, seeds: int = 2) -> dict:
    """The split choice as ``--splits`` writes it (docs/real-actor.md, "The split rule"):
    refused unless the helped arm is complete (every task at probability 1 in ``seeds``
    seeds: the amended rule chooses then) and the rule needs no extension."""
    h, sp = s["helped"], s["splits"]
    if h["episodes"] != seeds * h["tasks"]:
        raise ValueError(
            f"the helped arm holds {h['episodes']} of {seeds * h['tasks']} episodes: the "
            "split rule chooses when it is complete"
        )
    if sp["extend"]:
        raise ValueError(
            f"{len(sp['test_worlds'])} test worlds hold {sp['test_candidates']} of "
            f"{sp['candidates']} candidates: the rule extends the pilot (n=80) first"
        )
    keys = ("test_worlds", "train_worlds", "test_tasks", "train_tasks")
    return {
        "rule": "docs/real-actor.md, The split rule (amended for the helped-first pilot)",
        "pilot": {"episodes": s["episodes"], "helped_episodes": h["episodes"]},
        **{k: sp[k] for k in keys},
    }


def reference_calls(worlds: Path) -> dict[str, int]:
    out = {}
    for line in (Path(worlds) / "gen_solutions.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out[f"{rec['scenario']}/{rec['task_idx']}"] = len(rec["calls"])
    return out


def summary(
    eps: pd.DataFrame, calls: dict[str, int] | None = None, worlds: list[str] | None = None
) -> dict:
    pairs = paired(eps)
    tasks = task_table(pairs, calls)
    out: dict = {
        "episodes": len(eps),
        "pairs": len(pairs),
        "tasks": len(tasks),
        "kinds": {k: int((tasks["kind"] == k).sum()) for k in ("never", "varies", "always")},
        "end_reasons": {str(k): int(v) for k, v in eps["end_reason"].value_counts().items()},
    }
    for name, col in (("never", "s0"), ("always", "s1")):
        mean, lo, hi, _se, g = cluster_ci(pairs[col], pairs["task_id"])
        lo, hi = in_range("SR", lo, hi)
        out[f"sr_{name}"] = {"mean": mean, "lo": lo, "hi": hi, "tasks": g}
    if len(tasks) >= 2:
        d = pairs["s1"] - pairs["s0"]
        mean, lo, hi, _se, g = cluster_ci(d, pairs["task_id"])
        lo, hi = in_range("dSR", lo, hi)
        out["help_effect"] = {"mean": mean, "lo": lo, "hi": hi, "tasks": g}
    if calls is not None:
        by = tasks.groupby("calls").agg(tasks=("seeds", "size"), k0=("k0", "sum"), k1=("k1", "sum"))
        by["n"] = tasks.groupby("calls")["seeds"].sum()
        out["by_calls"] = {
            int(c): {"tasks": int(r.tasks), "sr_never": r.k0 / r.n, "sr_always": r.k1 / r.n}
            for c, r in by.iterrows()
        }
    out["varying_tasks"] = sorted(tasks.index[tasks["kind"] == "varies"])
    out["sizing"] = sizing(tasks, pairs)
    cands = candidates(eps)
    out["helped"] = {"episodes": int(cands["n1"].sum()), "tasks": len(cands)}
    if len(cands):
        mean, lo, hi, _se, g = cluster_ci(
            eps.loc[eps["p"] == 1.0, "success"].astype(float),
            eps.loc[eps["p"] == 1.0, "task_id"],
        )
        lo, hi = in_range("SR", lo, hi)
        out["helped"]["sr"] = {"mean": mean, "lo": lo, "hi": hi, "tasks": g}
    out["candidates"] = sorted(cands.index[cands["candidate"]])
    if worlds:
        out["splits"] = choose_splits(cands, worlds)
    return out


def render(s: dict, rate: float | None = None) -> str:
    lines = [
        f"{s['episodes']} episodes, {s['pairs']} (task, seed) pairs with both p=0 and p=1 "
        f"over {s['tasks']} tasks",
    ]
    if rate is not None:
        lines.append(f"{rate:.0f} episodes an hour (shard times)")
    k = s["kinds"]
    lines.append(
        f"tasks never solved {k['never']}, solved in some episodes only {k['varies']}, "
        f"always solved {k['always']}"
    )
    lines.append("end reasons: " + ", ".join(f"{a} {b}" for a, b in s["end_reasons"].items()))
    for name in ("never", "always"):
        r = s[f"sr_{name}"]
        lines.append(
            f"SR {name:6s} {r['mean']:.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}] (tasks as the unit, "
            f"{r['tasks']} tasks)"
        )
    if "help_effect" in s:
        r = s["help_effect"]
        lines.append(
            f"always - never {r['mean']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}] ({r['tasks']} tasks)"
        )
    if "by_calls" in s:
        lines.append("by reference calls: calls tasks SR(never) SR(always)")
        for c, r in s["by_calls"].items():
            lines.append(f"  {c} {r['tasks']:4d} {r['sr_never']:.3f} {r['sr_always']:.3f}")
    lines.append(f"tasks whose outcome varies: {', '.join(s['varying_tasks']) or 'none'}")
    h = s["helped"]
    lines.append(f"helped arm: {h['episodes']} episodes over {h['tasks']} tasks")
    if "sr" in h:
        r = h["sr"]
        lines.append(
            f"  SR with help {r['mean']:.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}] (tasks as the unit)"
        )
    lines.append(f"  candidates (the split rule): {len(s['candidates'])}")
    if "splits" in s:
        sp = s["splits"]
        lines.append(
            f"  the split rule now: {len(sp['test_worlds'])} test worlds hold "
            f"{sp['test_candidates']} of {sp['candidates']} candidates"
            + ("; the rule extends the pilot" if sp["extend"] else "")
        )
    if s["sizing"]:
        lines.append(
            "held-out tasks for a 0.05 difference at equal spend, 80% power, tasks as the unit"
        )
        lines.append("  sigma_b share  diverging  seeds  sd_task  tasks  episodes per policy")
        for r in s["sizing"]:
            lines.append(
                f"  {r['share']:13.2f}  {r['diverge']:9.2f}  {r['seeds']:5d}  {r['sd_task']:.3f}  "
                f"{r['tasks']:5d}  {r['episodes_per_policy']:6d}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="the pilot's collection (its shards/)")
    ap.add_argument("--worlds", type=Path, help="its worlds: reference calls per task")
    ap.add_argument("--json", type=Path, help="write the summary here (refused if it exists)")
    ap.add_argument("--rate", action="store_true", help="episodes an hour from shard times")
    ap.add_argument(
        "--splits",
        type=Path,
        help="write the split choice here (needs --worlds; refused if it exists)",
    )
    a = ap.parse_args(argv)
    for flag, path in (("--json", a.json), ("--splits", a.splits)):
        if path is not None and path.exists():
            ap.error(f"{flag} {path}: exists; give a new path")
    if a.splits is not None and a.worlds is None:
        ap.error("--splits needs --worlds (the split goes by world)")
    eps, times = load_pilot(a.data)
    calls = reference_calls(a.worlds) if a.worlds else None
    worlds = sorted({t.rpartition("/")[0] for t in calls}) if calls else None
    s = summary(eps, calls, worlds)
    rate = None
    if a.rate and len(times) > 1:
        rate = (len(eps) - 1) / ((max(times) - min(times)) / 3600)
    print(render(s, rate))
    if a.json is not None:
        a.json.write_text(json.dumps(s, indent=1, sort_keys=True, default=float) + "\n")
    if a.splits is not None:
        try:
            record = split_record(s)
        except ValueError as e:
            print(f"--splits {a.splits}: not written: {e}", file=sys.stderr)
            return 1
        a.splits.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
