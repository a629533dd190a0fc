"""The paired statistics of ``python -m helpdp.evaluate`` (pure functions of the results).

Every policy runs on the same (task, seed) pairs, so differences between policies are
paired: :func:`paired_ci`, random help interpolated to a policy's own spend
(:func:`equal_spend_baseline`), the fixed rules' hull at a policy's spend
(:func:`rule_hull_baseline`), the best task-wise mix of the fixed baselines at a
spend (:func:`task_mix`, :func:`mix_baseline`, :func:`mix_curve`, :func:`headroom`),
and the per-policy table (:func:`summarize`) and comparisons (:func:`compare`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpdp.intervals import MIN_TASKS_DIFFER, cluster_ci, mean_ci, task_power, task_shares, wilson
from helpdp.jsonvalue import JSON
from helpdp.policies import RandomStates, name_family

__all__ = [
    "EPISODE_TABLE",
    "compare",
    "episode_table",
    "equal_spend_baseline",
    "headroom",
    "is_rule",
    "mix_baseline",
    "mix_curve",
    "paired_ci",
    "read_episode_table",
    "rule_hull_baseline",
    "summarize",
    "task_ci",
    "task_mix",
]


def paired_ci(diff: np.ndarray, z: float = 1.96) -> tuple[float, float, float]:
    """Mean of paired differences and its 95% interval (:func:`helpdp.intervals.mean_ci`)."""
    return mean_ci(diff, z)


def task_ci(diff, tasks, delta: float = 0.05) -> dict:
    """Paired differences ``diff`` with ``tasks`` (each pair's task) as the unit: the
    statement "for tasks like these" beside :func:`paired_ci`'s "for these tasks".

    ``mean``/``lo``/``hi``/``df``/``G``: :func:`helpdp.intervals.cluster_ci` (CR2, t with
    the Bell-McCaffrey df; G - 1 for equal tasks); ``differ``: the tasks in which a pair
    differs at all; ``top_share``: the largest share of the summed absolute task sums one
    task carries; ``detectable``: the difference these tasks show at 80% power (5%
    two-sided) and ``tasks_for_delta``: the tasks ``delta`` needs
    (:func:`helpdp.intervals.task_power`); ``statement``: False where fewer than
    :data:`helpdp.intervals.MIN_TASKS_DIFFER` tasks differ (no statement about other
    tasks), ``note``: that sentence.
    """
    d = np.asarray(diff, np.float64)
    t = np.asarray(tasks)
    m, lo, hi, df, g = cluster_ci(d, t)
    sh = task_shares(d, t) if len(d) else {"tasks": 0, "differ": 0, "top_share": float("nan")}
    pw = (
        task_power(d, t, delta) if len(d) else {"detectable": float("nan"), "tasks_for_delta": None}
    )
    ok = sh["differ"] >= MIN_TASKS_DIFFER
    return {
        "mean": m,
        "lo": lo,
        "hi": hi,
        "df": df,
        "G": g,
        "differ": sh["differ"],
        "top_share": sh["top_share"],
        "detectable": pw["detectable"],
        "tasks_for_delta": pw["tasks_for_delta"],
        "delta": float(delta),
        "statement": bool(ok),
        "note": ""
        if ok
        else f"no statement about other tasks ({sh['differ']} of {sh['tasks']} tasks differ)",
    }


#: the slim episode table every held-out verdict ships: one row per (policy, split, task,
#: seed); kilobytes, and enough to recompute every paired and task-level number
EPISODE_TABLE = ("policy", "split", "task_id", "seed", "success", "expert_calls")


def episode_table(results: pd.DataFrame) -> pd.DataFrame:
    """``results`` (``helpdp.evaluate``'s, or ``--eval-report``'s joined runs) cut to
    :data:`EPISODE_TABLE`: ``task_id`` and ``seed`` from the pair ``task#seed`` where the
    columns are absent; success as 0/1, calls as integers where they are."""
    r = results
    if "task_id" not in r or "seed" not in r:
        parts = r["pair"].astype(str).str.rsplit("#", n=1)
        r = r.assign(task_id=parts.str[0], seed=parts.str[1].astype(int))
    out = r[list(EPISODE_TABLE)].reset_index(drop=True).copy()
    out["success"] = out["success"].astype(np.int8)
    calls = out["expert_calls"].astype(float)
    out["expert_calls"] = calls.astype(np.int32) if (calls % 1 == 0).all() else calls
    out["seed"] = out["seed"].astype(np.int64)
    return out


def read_episode_table(path: str | Path) -> pd.DataFrame:
    """An episode table written by :func:`episode_table` (Parquet), with the ``pair``
    column the statistics join on; one clear error naming the file and the missing
    column, or the row of a duplicated (policy, split, pair) or a success not 0/1."""
    try:
        t = pd.read_parquet(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a Parquet episode table ({e})") from None
    missing = [c for c in EPISODE_TABLE if c not in t.columns]
    if missing:
        raise ValueError(f"{path}: no column {missing[0]!r} (an episode table has {EPISODE_TABLE})")
    t = t.assign(pair=t["task_id"].astype(str) + "#" + t["seed"].astype(str))
    bad = ~t["success"].isin([0, 1])
    if bad.any():
        raise ValueError(f"{path}: row {int(np.flatnonzero(bad)[0])}: success is not 0 or 1")
    dup = t.duplicated(["policy", "split", "pair"])
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise ValueError(f"{path}: row {i}: (policy, split, task_id, seed) appears twice")
    return t


def equal_spend_baseline(
    usage: float, curve: dict[float, pd.DataFrame], key: str = "success"
) -> tuple[pd.Series, str] | None:
    """The random-help outcome per pair, interpolated to realised ``usage``.

    ``curve``: p -> per-pair frame (index: pair) with ``expert_calls`` and ``key``.
    Returns (per-pair baseline, description), or None when ``usage`` lies outside
    the curve's range of realised usage.
    """
    pts = sorted((float(f["expert_calls"].mean()), p) for p, f in curve.items())
    for (u0, p0), (u1, p1) in zip(pts, pts[1:]):
        if u0 - 1e-12 <= usage <= u1 + 1e-12 and u1 > u0:
            lam = (usage - u0) / (u1 - u0)
            base = (1 - lam) * curve[p0][key] + lam * curve[p1][key]
            return base, f"random p={p0:g}/{p1:g} mixed {1 - lam:.2f}/{lam:.2f}"
    return None


def is_rule(name: str) -> bool:
    """A fixed rule's policy name (never, always, ``rule: ...``: the ``baseline`` and
    ``rule`` families of ``helpdp.policy_registry``): what :func:`rule_hull_baseline` mixes."""
    return name_family(name) in ("baseline", "rule")


def _upper_hull(points) -> list[tuple[float, float, str]]:
    """The upper concave hull of ``(calls, value, name)`` points sorted by calls, then by
    value descending: the points no mixture of two others beats at their calls."""
    hull: list[tuple[float, float, str]] = []
    for u, v, n in points:
        if hull and v <= hull[-1][1]:
            continue  # costs as much or more, gains nothing
        while len(hull) >= 2:
            (u0, v0, _), (u1, v1, _) = hull[-2], hull[-1]
            if (v1 - v0) * (u - u0) <= (v - v0) * (u1 - u0):
                hull.pop()  # under the chord: never on the hull
            else:
                break
        hull.append((float(u), float(v), str(n)))
    return hull


def rule_hull_baseline(
    usage: float, frames: dict[str, pd.DataFrame], key: str = "success"
) -> tuple[pd.Series, str] | None:
    """The best episode-wise mixture of fixed rules at realised ``usage``, per pair.

    ``frames``: rule name -> per-pair frame (index: pair, the same pairs) with
    ``expert_calls`` and ``key``. A mixture that runs rule a on a share 1 - lam of the
    episodes and rule b on lam spends and succeeds in between, so the rules' upper concave
    hull of (mean calls, mean ``key``) is what a deployment can buy with them at any spend
    (the hull is chosen on the same pairs: a baseline slightly in the rules' favour).
    Returns (per-pair baseline, description), or None when ``usage`` lies outside the
    hull's range of calls.
    """
    pts = sorted(
        ((float(f["expert_calls"].mean()), float(f[key].mean()), n) for n, f in frames.items()),
        key=lambda x: (x[0], -x[1]),
    )
    hull = _upper_hull(pts)
    for u0, _, a in hull:
        if abs(usage - u0) <= 1e-12:
            return frames[a][key].astype(float), a
    for (u0, _, a), (u1, _, b) in zip(hull, hull[1:]):
        if u0 < usage < u1:
            lam = (usage - u0) / (u1 - u0)
            base = (1 - lam) * frames[a][key].astype(float) + lam * frames[b][key].astype(float)
            return base, f"{a} / {b} mixed {1 - lam:.2f}/{lam:.2f}"
    return None


def task_mix(points: pd.DataFrame, budget: float) -> dict[str, dict[str, float]]:
    """The best per-task mixture of fixed policies at mean ``budget`` calls per episode.

    ``points``: one row per (``task_id``, ``policy``) with ``SR`` and ``U``; every task
    needs a zero-call policy (``never``). Each task may run any mixture of its
    policies (per episode); the mean SR over tasks is maximised under mean U <=
    ``budget``. That linear program is a fractional knapsack over each task's upper
    concave hull of (U, SR): hull segments are bought in order of SR per call, the
    last one in part. Returns ``task -> {policy: weight}``.
    """
    hulls, segs = {}, []
    for task, g in points.groupby("task_id", sort=True):
        g = g.sort_values(["U", "SR"], ascending=[True, False]).drop_duplicates("U")
        if len(g) == 0 or g["U"].iloc[0] > 1e-12:
            raise ValueError(f"task_mix: task {task} has no zero-call policy (never)")
        hull = _upper_hull(zip(g["U"], g["SR"], g["policy"]))
        hulls[task] = hull
        for i in range(1, len(hull)):
            du, ds = hull[i][0] - hull[i - 1][0], hull[i][1] - hull[i - 1][1]
            segs.append((ds / du, task, i, du))
    left = float(budget) * len(hulls)
    reached = {t: (0, 0.0) for t in hulls}  # (last full vertex, share of the next segment)
    for _, task, i, du in sorted(segs, key=lambda x: (-x[0], x[1], x[2])):
        if left <= 1e-12:
            break
        take = min(1.0, left / du)
        reached[task] = (i, 0.0) if take >= 1.0 else (i - 1, take)
        left -= take * du
    out = {}
    for task, hull in hulls.items():
        i, w = reached[task]
        mix = {hull[i][2]: 1.0 - w}
        if w > 0:
            mix[hull[i + 1][2]] = w
        out[task] = mix
    return out


def headroom(results: pd.DataFrame, split: str, budget: float, baselines: list[str]) -> dict:
    """What the world allows at ``budget``: the best per-task mixture (:func:`task_mix`)
    of the measured ``baselines`` (fixed policies: never, always, random, the rules).

    ``insample`` (SR, U): chosen with hindsight on every pair (optimistic: it picks
    each task's luckiest policy). ``crossfit``: chosen on the even seeds and measured
    on the odd ones and the other way round (NaN where a half lacks a (task,
    baseline)). A state-wise policy can realise any such mixture (the start state
    names the task). ``mix``: the in-sample mixture, ``task -> {policy: weight}``.
    """
    out: dict[str, JSON] = {"split": split, "budget": float(budget), "policies": sorted(baselines)}
    for name, cf in (("insample", False), ("crossfit", True)):
        mb = mix_baseline(results, split, budget, baselines, crossfit=cf)
        out[name] = (float("nan"), float("nan")) if mb is None else (float(mb[0].mean()), mb[1])
    r = results[(results["split"] == split) & results["policy"].isin(baselines)]
    pts = _task_points(r)
    out["mix"] = task_mix(pts, budget) if len(pts) else {}
    return out


def _task_points(results: pd.DataFrame) -> pd.DataFrame:
    """SR and U per (task, policy): the points :func:`task_mix` mixes."""
    g = results.groupby(["task_id", "policy"])
    return g.agg(SR=("success", "mean"), U=("expert_calls", "mean")).reset_index()


def mix_baseline(
    results: pd.DataFrame,
    split: str,
    usage: float,
    baselines: list[str],
    *,
    crossfit: bool = False,
) -> tuple[pd.Series, float] | None:
    """The best task-wise mix of ``baselines`` at ``usage`` calls (:func:`task_mix`),
    as a success per pair: the mix's weighted success of the baselines on that pair.

    By default the mix is chosen with hindsight on the same pairs: an optimistic
    baseline, so a policy that ties it has found the best per-task choice among the
    baselines. ``crossfit=True`` chooses it on the even seeds for the pairs of odd
    seeds and the other way round (an honest value of choosing among them per task,
    which pays for its own noise). Returns (success per pair, the mix's mean calls),
    or None when there is nothing to mix (or, cross-fitted, a half lacks a
    (task, baseline)).
    """
    r = results[(results["split"] == split) & results["policy"].isin(baselines)]
    if crossfit:
        even = (r["seed"] % 2 == 0).to_numpy()
        parts = [(r[even], r[~even]), (r[~even], r[even])]  # (choose on, value on)
    else:
        parts = [(r, r)]

    n = len(_task_points(r))
    vals, calls = [], []
    for choose, on in parts:
        pts = _task_points(choose)
        if n == 0 or len(pts) != n:
            return None
        mix = task_mix(pts, usage)
        w = pd.Series({(t, k): v for t, m in mix.items() for k, v in m.items()}, dtype=float)
        key = pd.MultiIndex.from_frame(on[["task_id", "policy"]])
        weight = w.reindex(key).fillna(0.0).to_numpy()
        pair = on["pair"].to_numpy()
        vals.append((on["success"].astype(float) * weight).groupby(pair).sum())
        calls.append((on["expert_calls"].astype(float) * weight).groupby(pair).sum())
    return pd.concat(vals), float(pd.concat(calls).mean())


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """SR, U, L, SPL per (split, policy), SR's 95% Wilson interval ``SR_lo``/``SR_hi``
    (:func:`helpdp.intervals.wilson`: inside [0, 1], also at 0 or n successes), U's 95%
    half-width ``U_ci``, and
    ``gain_per_call``: (SR - SR of never) / U, what one expert call bought on average
    (NaN without a ``never`` run or without calls)."""
    g = results.groupby(["split", "policy"], sort=False)
    out = g.agg(
        episodes=("success", "size"),
        SR=("success", "mean"),
        U=("expert_calls", "mean"),
        U_sd=("expert_calls", "std"),
        L=("steps", "mean"),
        SPL=("spl", "mean"),
        policy_errors=("policy_errors", "sum"),
        invalid=("invalid", "sum"),
    ).reset_index()
    bounds = [wilson(sr * n, n) for sr, n in zip(out["SR"].astype(float), out["episodes"])]
    out["SR_lo"] = [lo for lo, _ in bounds]
    out["SR_hi"] = [hi for _, hi in bounds]
    out["U_ci"] = (1.96 * out.pop("U_sd") / np.sqrt(out["episodes"].clip(lower=1))).fillna(0.0)
    never = out[out["policy"] == "never"].set_index("split")["SR"]
    base = out["split"].map(never)
    out["gain_per_call"] = ((out["SR"] - base) / out["U"].where(out["U"] > 0)).astype(float)
    return out


def compare(
    results: pd.DataFrame,
    policy: str,
    split: str,
    random_p: list[float],
    baselines: list[str] | None = None,
) -> dict:
    """``policy`` against random help at equal spend, the rules' hull at equal spend
    (:func:`rule_hull_baseline`: never, always and the ``rule: ...`` policies), never, each
    rule, and (given ``baselines``) the best task-wise mix of them at its spend, chosen
    with hindsight (:func:`mix_baseline`), paired. Each difference ``key`` (a tuple from
    :func:`paired_ci`, pairs as the unit: "for these tasks") has ``key + "_tasks"`` beside
    it (:func:`task_ci`, tasks as the unit: "for tasks like these")."""
    r = results[results["split"] == split].set_index("pair")
    mine = r[r["policy"] == policy]
    if "task_id" in mine:
        tasks = mine["task_id"].astype(str).to_numpy()
    else:
        tasks = mine.index.astype(str).str.rsplit("#", n=1).str[0].to_numpy()

    def both(key: str, diff: pd.Series) -> None:  # per pair, and with tasks as the unit
        out[key] = paired_ci(diff)
        out[f"{key}_tasks"] = task_ci(diff.to_numpy(float), tasks)

    out: dict[str, JSON] = {
        "policy": policy,
        "split": split,
        "U": float(mine["expert_calls"].mean()),
    }
    names = {0.0: "never", 1.0: "always", **{p: RandomStates(p).name for p in random_p}}
    curve = {p: r[r["policy"] == name] for p, name in names.items()}  # never/always: p = 0, 1
    curve = {p: f.reindex(mine.index) for p, f in curve.items() if len(f)}
    eq = equal_spend_baseline(out["U"], curve) if curve else None
    if eq is not None:
        base, how = eq
        both("vs_random_equal_spend", mine["success"] - base)
        out["random_equal_spend"] = how
    rules = {
        n: r[r["policy"] == n].reindex(mine.index)
        for n in r["policy"].unique()
        if n != policy and is_rule(n)
    }
    hull = rule_hull_baseline(out["U"], rules) if rules else None
    if hull is not None:
        base, how = hull
        both("vs_rules_equal_spend", mine["success"].astype(float) - base)
        out["rules_equal_spend"] = how
    if baselines and policy not in baselines:
        mb = mix_baseline(results, split, out["U"], baselines)
        if mb is not None:
            base, calls = mb
            both(
                "vs_best_mix_equal_spend",
                mine["success"].astype(float) - base.reindex(mine.index),
            )
            out["best_mix_calls"] = calls
    for other in r["policy"].unique():
        if other == policy or name_family(other) == "random":
            continue
        o = r[r["policy"] == other].reindex(mine.index)
        both(f"vs {other}", mine["success"].astype(float) - o["success"])
    return out


def mix_curve(results: pd.DataFrame, split: str, baselines: list[str], n: int = 41):
    """(U, SR) of the best task-wise mix of ``baselines`` chosen with hindsight
    (:func:`mix_baseline`), from 0 calls to the most any baseline spends."""
    r = results[(results["split"] == split) & results["policy"].isin(baselines)]
    if r.empty:
        return None
    top = float(r.groupby("policy")["expert_calls"].mean().max())
    pts = []
    for b in np.linspace(0.0, top, n):
        mb = mix_baseline(results, split, float(b), baselines)
        if mb is not None:
            pts.append((mb[1], float(mb[0].mean())))
    return pd.DataFrame(pts, columns=["U", "SR"]) if pts else None
