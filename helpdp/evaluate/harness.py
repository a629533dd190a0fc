"""`python -m helpdp.evaluate`: every help policy, in the environments, on held-out tasks.

What the DP forecasts is not evidence; this is. For each policy and each split
(``test``: tasks no policy was fitted on; ``train``: the tasks it was), fresh
episodes are collected with the collector's own loop, the expert called exactly
where the policy says (:class:`helpdp.policies.HelpPolicy`). Every policy runs on
the same (task, seed) pairs with the same actor draws (common random numbers:
the actor's randomness is a function of the episode and the turn), so differences
between policies are **paired**: a confidence interval is the paired t interval
of the per-episode differences.

Policies (fitted on the train tasks of ``data`` only):

* ``never``, ``always``; random state-wise help at each ``random_p``, random
  episode-wise help at ``episode_p``;
* the hand-written rules: turn 0, after a failed turn, both, and ``turn_rules`` (help
  at given turns);
* the DP's pi* at ``budget`` (searched on the train tasks; unseen states: nohelp);
* the helper (``helper_dir=DIR``, from ``python -m helpdp.helper.train``), deployed at
  ``budget`` (or at each of ``helper_budgets``: one helper, several budgets);
* with a text PRM (``prm_dir=DIR``, ``kind=lm``; ``helpdp.prm.policy``): help at the top
  ``prm_q`` of the validation states' predicted gain of help (``prm_score``),
  task-wise help for the ``prm_task_q`` of episodes with the lowest predicted
  start-state success, and ``table_fallback=prm``: the DP table with that PRM
  policy (at ``prm_q[0]``) on the states it never saw;
* ``oracle=true``: on each evaluated split other than train, the DP table fitted on
  that split's own tasks of ``data``. It is not held out: fresh seeds of tasks whose
  data it was solved on measure how much a state-wise policy can gain on them when
  the data covers them, the reference a held-out policy is measured against.

**Equal spend.** A policy is compared with random state-wise help at *its own
realised* calls per episode U: the two random runs whose U bracket it are mixed
per episode pair with weights that match U (linear interpolation of the
random-help curve, paired), so "beats random" means at the same spend.

Metrics (paper Tables 2-4): SR (success rate), U (expert calls per episode), L
(mean turns), SPL (success weighted by reference turns / max(turns, reference
turns); a task's reference is its solution's calls plus the final answer), seen
(train) vs unseen (test) tasks. Writes ``OUT/results.parquet`` (one row per
episode and policy), ``OUT/summary.parquet``, ``OUT/report.md`` and
``OUT/usage_success.png`` (each policy a point, the DP's forecast frontier a line).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.collect.worlds import is_shipped_label
from helpdp.policies import (
    AfterFailure,
    Always,
    AtTurns,
    HelpPolicy,
    Never,
    RandomEpisodes,
    RandomStates,
    TablePolicy,
    TurnZero,
    TurnZeroOrAfterFailure,
)

#: outcomes without a verdict on the agent (the environment or verifier failed); a
#: format error is the agent's own failure and counts as one
INVALID_OUTCOMES = ("server_error", "verifier_error", "no_verifier")

__all__ = [
    "EvaluateConfig",
    "compare",
    "evaluate",
    "headroom",
    "mix_baseline",
    "ope_estimates",
    "ope_report",
    "ope_summary",
    "paired_ci",
    "run_evaluate",
    "summarize",
    "task_mix",
]


@dataclass
class EvaluateConfig:
    """`python -m helpdp.evaluate`: help policies in the environments, on held-out tasks."""

    data: Any = _f(None, "collected dataset the policies are fitted on; null: the demo dataset")
    worlds: Any = _f(
        None, "AWM directory the data was collected in; null: as the data's manifest says"
    )
    budget: float = _f(1.0, "expert calls per episode for the DP's policy and the helper")
    helper_dir: Any = _f(
        None, "a trained helper directory (python -m helpdp.helper.train); null: no helper"
    )
    helper_budgets: Any = _f(
        None,
        "deploy the helper at each of these budgets, one policy each (e.g. [0.5,1,2]: does "
        "realised usage follow helper.budget?); null: at budget",
    )
    prm_dir: Any = _f(
        None,
        "a trained text PRM (python -m helpdp.prm.train prm=tiny|minilm, kind=lm): adds the PRM-threshold "
        "policies (prm_q, prm_task_q, table_fallback=prm); null: none",
    )
    prm_score: str = _f(
        "gain", "PRM state-wise score: gain (p_help - p_nohelp) or risk (1 - p_nohelp)"
    )
    prm_q: list = _f(
        [0.1, 0.3], "PRM state-wise policies: help at the top q of the calibration states' scores"
    )
    prm_task_q: list = _f(
        [0.3],
        "PRM task-wise policies: help at every turn of the episodes whose start state's predicted "
        "success is in the lowest q of the calibration tasks'",
    )
    prm_splits: list = _f(
        ["validation"], "task splits of data whose states calibrate the PRM policies' thresholds"
    )
    table_fallback: str = _f(
        "nohelp",
        "the DP table's decision at states it never saw: nohelp, or prm (the PRM state-wise "
        "policy at prm_q[0], needs prm_dir)",
    )
    oracle: bool = _f(
        False,
        "add, on each evaluated split other than train, the DP table fitted on that split's own "
        "tasks of data (budget): not a deployable policy but an in-sample reference for how much "
        "a state-wise policy can gain on those tasks (data must hold their episodes)",
    )
    seeds: list[int] = _f(list(range(100, 120)), "evaluation seeds: one episode per (task, seed)")
    splits: list = _f(["test", "train"], "task splits to evaluate on (test: unseen tasks)")
    random_p: list = _f(
        [0.05, 0.1, 0.2, 0.3, 0.5], "random state-wise help probabilities (the equal-spend curve)"
    )
    episode_p: float = _f(0.5, "random episode-wise help: share of episodes helped at every turn")
    turn_rules: list = _f(
        [],
        "more hand-written rules, one list of turns each: help at exactly those turns (e.g. "
        "[[1],[2],[0,3]]: single turns map where a call pays, pairs what a second call adds)",
    )
    max_tasks: Any = _f(None, "evaluate at most the first N tasks of each scenario (smoke runs)")
    reuse: bool = _f(
        True,
        "keep the runs of the baselines (never, always, random, the rules: policies whose fields "
        "decide every action) in out/runs and resume them when evaluate runs again into the same "
        "out (the collector's fingerprint checks seeds, tasks and config); fitted policies "
        "(tables, PRM, helper) always run afresh",
    )
    batch_size: int = _f(
        8,
        "episodes run in lock step per policy (environment steps in threads, one decide() per "
        "round); results do not depend on it",
    )
    baselines: bool = _f(
        True,
        "run the fixed baselines (never, always, random, the rules, turn_rules); false runs "
        "only the fitted policies (the DP table, PRM, helper, policy_files, oracle), e.g. in a "
        "second process whose results.parquet is joined with a baseline run's (same pairs)",
    )
    skip: list = _f([], "names of policies not to run (e.g. ['random episodes p=0.5'])")
    policy_files: list = _f(
        [],
        "more policies to run, each a selected.json of python -m helpdp.select (or its "
        "directory): the policy chosen by cross-fitted off-policy evaluation",
    )
    ope: bool = _f(
        True,
        "for every policy run, also estimate its SR and calls per episode off-policy "
        "(helpdp.ope) from data's collected episodes of the same split's tasks, and report "
        "how often the measured SR and U fall inside the estimate's interval (ope.parquet)",
    )
    ope_estimator: str = _f("dr", "the off-policy estimator reported (helpdp.ope.ESTIMATORS)")
    ope_boot: int = _f(500, "bootstrap replicates of each off-policy interval")
    seed: int = _f(0, "seed of the random policies' draws and of the DP mixture's draw")
    out: str = _f("outputs/evaluate", "output directory (results, report.md, plot)")
    progress: bool = _f(True, "progress bars")


# ---------------------------------------------------------------------------
# statistics (pure)
# ---------------------------------------------------------------------------


def paired_ci(diff: np.ndarray, z: float = 1.96) -> tuple[float, float, float]:
    """Mean of paired differences and its 95% interval (normal approximation)."""
    d = np.asarray(diff, np.float64)
    if len(d) == 0:
        return float("nan"), float("nan"), float("nan")
    m = float(d.mean())
    half = z * float(d.std(ddof=1)) / math.sqrt(len(d)) if len(d) > 1 else float("inf")
    return m, m - half, m + half


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
        hull: list[tuple[float, float, str]] = []
        for u, sr, pol in zip(g["U"], g["SR"], g["policy"]):
            if hull and sr <= hull[-1][1]:
                continue  # costs more, gains nothing
            while len(hull) >= 2:
                (u0, s0, _), (u1, s1, _) = hull[-2], hull[-1]
                if (s1 - s0) * (u - u0) <= (sr - s0) * (u1 - u0):
                    hull.pop()  # under the chord: never on the hull
                else:
                    break
            hull.append((float(u), float(sr), str(pol)))
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
    out: dict[str, Any] = {"split": split, "budget": float(budget), "policies": sorted(baselines)}
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
    """SR, U, L, SPL per (split, policy), the 95% half-widths of SR and U, and
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
    out["SR_ci"] = 1.96 * np.sqrt(out["SR"] * (1 - out["SR"]) / out["episodes"].clip(lower=1))
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
    """``policy`` against random help at equal spend, never, each rule, and (given
    ``baselines``) the best task-wise mix of them at its spend, chosen with hindsight
    (:func:`mix_baseline`), paired."""
    r = results[results["split"] == split].set_index("pair")
    mine = r[r["policy"] == policy]
    out: dict[str, Any] = {
        "policy": policy,
        "split": split,
        "U": float(mine["expert_calls"].mean()),
    }
    names = {0.0: "never", 1.0: "always", **{p: f"random p={p:g}" for p in random_p}}
    curve = {p: r[r["policy"] == name] for p, name in names.items()}  # never/always: p = 0, 1
    curve = {p: f.reindex(mine.index) for p, f in curve.items() if len(f)}
    eq = equal_spend_baseline(out["U"], curve) if curve else None
    if eq is not None:
        base, how = eq
        out["vs_random_equal_spend"] = paired_ci(mine["success"] - base)
        out["random_equal_spend"] = how
    if baselines and policy not in baselines:
        mb = mix_baseline(results, split, out["U"], baselines)
        if mb is not None:
            base, calls = mb
            out["vs_best_mix_equal_spend"] = paired_ci(
                mine["success"].astype(float) - base.reindex(mine.index)
            )
            out["best_mix_calls"] = calls
    for other in r["policy"].unique():
        if other == policy or other.startswith("random p="):
            continue
        o = r[r["policy"] == other].reindex(mine.index)
        out[f"vs {other}"] = paired_ci(mine["success"].astype(float) - o["success"])
    return out


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=]+", "_", name).strip("_")


def policies(cfg: EvaluateConfig, ds, train_tasks: list[str], out: Path) -> list[HelpPolicy]:
    """Every policy of the evaluation, fitted on ``train_tasks`` of ``ds``."""
    from helpdp.budget import search_budget, write_result
    from helpdp.subset import task_subset

    sub = task_subset(ds, train_tasks)
    res = search_budget(sub.mdp, float(cfg.budget), gamma=ds.gamma)
    search_dir = write_result(sub, res, out / "dp_search")
    prm_pols, fallback = _prm_policies(cfg, ds)
    table_name = f"dp table (budget {cfg.budget:g})"
    if fallback is not None:
        table_name = f"dp table (budget {cfg.budget:g}, unseen: {fallback.name})"
    bad = [t for t in cfg.turn_rules if not isinstance(t, (list, tuple))]
    if bad:
        raise ValueError(f"turn_rules: each rule is a list of turns (e.g. [[0,3]]), got {bad[0]!r}")
    fixed: list[HelpPolicy] = [
        Never(),
        Always(),
        *(RandomStates(float(p), seed=cfg.seed) for p in cfg.random_p),
        RandomEpisodes(float(cfg.episode_p), seed=cfg.seed),
        TurnZero(),
        AfterFailure(),
        TurnZeroOrAfterFailure(),
        *(AtTurns(tuple(turns)) for turns in cfg.turn_rules),
    ]
    pols: list[HelpPolicy] = [
        *(fixed if cfg.baselines else []),
        TablePolicy.load(search_dir, seed=cfg.seed, name=table_name, fallback=fallback),
        *prm_pols,
    ]
    if cfg.policy_files:
        from helpdp.select import load_policy

        pols += [load_policy(p, seed=cfg.seed) for p in cfg.policy_files]
    if cfg.helper_dir:
        from helpdp.helper import HelperPolicy

        for b in cfg.helper_budgets or [cfg.budget]:
            pols.append(HelperPolicy(cfg.helper_dir, budget=float(b), seed=cfg.seed))
    unknown = sorted(set(cfg.skip) - {p.name for p in pols})
    if unknown:
        raise ValueError(f"skip: no policy named {unknown[0]!r}")
    return [p for p in pols if p.name not in set(cfg.skip)]


def oracle_policy(cfg: EvaluateConfig, ds, split: str, out: Path) -> HelpPolicy:
    """The DP table at ``cfg.budget`` fitted on the ``split`` tasks of ``ds`` themselves:
    evaluated on fresh seeds of those tasks, it measures what a state-wise policy can
    gain there when the data covers them (a reference, not a held-out result)."""
    from helpdp.budget import search_budget, write_result
    from helpdp.splits import task_splits
    from helpdp.subset import task_subset

    splits = task_splits(ds)
    tasks = sorted(splits.index[splits == split])
    if not tasks:
        raise ValueError(f"oracle: data has no {split} task to fit the oracle table on")
    sub = task_subset(ds, tasks)
    res = search_budget(sub.mdp, float(cfg.budget), gamma=ds.gamma)
    search_dir = write_result(sub, res, out / f"dp_search_oracle_{split}")
    name = f"dp oracle (fitted on these {split} tasks, budget {cfg.budget:g})"
    return TablePolicy.load(search_dir, seed=cfg.seed, name=name)


def _prm_policies(cfg: EvaluateConfig, ds) -> tuple[list[HelpPolicy], HelpPolicy | None]:
    """The PRM-threshold policies (``prm_dir``), calibrated on the ``prm_splits``
    tasks of ``ds``, and the table's fallback (null: nohelp)."""
    if cfg.table_fallback not in ("nohelp", "prm"):
        raise ValueError(f"table_fallback must be nohelp or prm, got {cfg.table_fallback!r}")
    if not cfg.prm_dir:
        if cfg.table_fallback == "prm":
            raise ValueError("table_fallback=prm needs prm_dir")
        return [], None
    from helpdp.prm.policy import PRMScorer, TaskPolicy, dataset_views, state_policy
    from helpdp.splits import task_splits

    splits = task_splits(ds)
    tasks = sorted(splits.index[splits.isin(list(cfg.prm_splits))])
    if not tasks:
        raise ValueError(f"no task of data in prm_splits {list(cfg.prm_splits)}")
    scorer = PRMScorer.load(cfg.prm_dir, device="cpu")
    views = dataset_views(ds, tasks)
    starts = dataset_views(ds, tasks, start_only=True)
    state = [state_policy(scorer, views, float(q), kind=cfg.prm_score) for q in cfg.prm_q]
    task = [TaskPolicy.calibrated(scorer, starts, float(q)) for q in cfg.prm_task_q]
    fallback = None
    if cfg.table_fallback == "prm":
        if not state:
            raise ValueError("table_fallback=prm needs at least one prm_q")
        fallback = state[0]
    return [*state, *task], fallback


def reuse_key(policy: HelpPolicy) -> str | None:
    """What identifies a baseline's decisions (its frozen dataclass's repr: every field,
    the seed included), or None for a policy fitted to data, which is never reused."""
    import dataclasses

    params = getattr(policy, "__dataclass_params__", None)
    if dataclasses.is_dataclass(policy) and params is not None and params.frozen:
        return repr(policy)
    return None


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def _collect_config(manifest: dict, cfg: EvaluateConfig, split: str, out: Path) -> dict:
    """The data's own collection config, re-aimed: fresh seeds, one split, no random help."""
    c = json.loads(json.dumps(manifest["source"]["config"]))
    if cfg.worlds:
        c["worlds"] = str(cfg.worlds)
    elif is_shipped_label(c.get("worlds")):
        c["worlds"] = None  # the shipped demo worlds
    c.update(out=str(out), overwrite=True, keep_shards=True, progress=False)
    c["executor"] = {
        **c.get("executor", {}), "workers": 1, "kind": "local", "batch_size": int(cfg.batch_size),
    }  # fmt: skip
    n_iv = len(manifest["actions"]) - 1
    c["schedule"] = {
        **c["schedule"],
        "probabilities": [[0.0] * n_iv] if n_iv > 1 else [0.0],
        "seeds": [int(s) for s in cfg.seeds],
        "splits": [split],
        "max_tasks": cfg.max_tasks,
    }
    c.pop("policy", None)
    return c


def _reference_turns(worlds: Path | None) -> dict[str, int]:
    from helpdp.collect.awm.dataset import AWMDataset
    from helpdp.collect.worlds import WORLDS_DIR

    ds = AWMDataset(worlds or WORLDS_DIR)
    ref = {}
    for name in ds.names():
        sc = ds.get(name)
        for idx, sol in sc.solutions.items():
            ref[f"{name}/{idx}"] = len(sol.calls) + 1  # the calls, then the final answer
    return ref


SPLITS = ("train", "validation", "test")


def _check_before_loading(cfg: EvaluateConfig) -> None:
    """What the command line got wrong, said before any data loads or any output exists."""
    bad = [s for s in cfg.splits if s not in SPLITS]
    if bad:
        raise ValueError(f"splits: {bad[0]!r} is not a task split (one of {SPLITS})")
    if cfg.helper_dir and not (Path(cfg.helper_dir) / "helper.json").is_file():
        raise FileNotFoundError(
            f"helper_dir={cfg.helper_dir}: no helper.json there (python -m helpdp.helper.train "
            "writes one)"
        )


def evaluate(cfg: EvaluateConfig) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """Run every policy on every split; write the results, the report and the plot."""
    from helpdp.collect.collector import collect
    from helpdp.data import load_dataset
    from helpdp.demo import demo_dataset_path
    from helpdp.splits import task_splits

    t0 = time.perf_counter()
    _check_before_loading(cfg)
    data = Path(cfg.data) if cfg.data else demo_dataset_path()
    ds = load_dataset(data)
    manifest = ds.manifest
    if manifest.get("source", {}).get("generator") != "collect":
        raise ValueError(f"{data}: not collected in the environments (manifest source.generator)")
    splits = task_splits(ds)
    train_tasks = sorted(splits.index[splits == "train"])
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    pols = policies(cfg, ds, train_tasks, out)
    by_split = {
        split: pols
        + ([oracle_policy(cfg, ds, split, out)] if cfg.oracle and split != "train" else [])
        for split in cfg.splits
    }
    worlds = cfg.worlds or manifest["source"]["config"].get("worlds")
    worlds = None if is_shipped_label(worlds) else worlds
    ref = _reference_turns(Path(worlds) if worlds else None)
    rows = []
    runs = out / "runs"
    from tqdm import tqdm

    bar = tqdm(total=sum(map(len, by_split.values())), desc="evaluate", unit="run",
               disable=not cfg.progress)  # fmt: skip
    for split, split_pols in by_split.items():
        for pol in split_pols:
            bar.set_postfix(split=split, policy=pol.name, refresh=True)
            run_dir = runs / split / _slug(pol.name)
            key = reuse_key(pol) if cfg.reuse else None
            if key is None or _read(run_dir / "policy.txt") != key:
                shutil.rmtree(run_dir, ignore_errors=True)  # never resume another policy's shards
            collect(_collect_config(manifest, cfg, split, run_dir), help_policy=pol)
            ep = pd.read_parquet(run_dir / "episodes.parquet")
            ep = ep.assign(policy=pol.name, split=split)
            rows.append(ep)
            if key is None:
                shutil.rmtree(run_dir / "shards", ignore_errors=True)
            else:
                (run_dir / "policy.txt").write_text(key)
            bar.update(1)
    bar.close()
    results = pd.concat(rows, ignore_index=True)
    results["pair"] = results["task_id"].astype(str) + "#" + results["seed"].astype(str)
    refs = results["task_id"].map(ref).fillna(results["steps"]).astype(float)
    results["spl"] = results["success"] * refs / np.maximum(results["steps"], refs)
    results["invalid"] = results["outcome"].isin(INVALID_OUTCOMES)
    keep = ["policy", "split", "pair", "task_id", "seed", "success", "outcome", "invalid",
            "expert_calls",
            "steps", "spl", "policy_errors", "format_errors", "errors", "blind_calls",
            "recovery_calls"]  # fmt: skip
    results = results[keep]
    results.to_parquet(out / "results.parquet", index=False)
    summary = summarize(results)
    summary.to_parquet(out / "summary.parquet", index=False)
    baselines = sorted({p.name for p in pols if reuse_key(p) is not None})
    if "never" not in baselines:  # the task-wise mixes need a zero-call policy
        baselines = []
    comparisons = [
        compare(results, p.name, split, [float(x) for x in cfg.random_p], baselines)
        for split, split_pols in by_split.items()
        for p in split_pols
        if not p.name.startswith(("random p=", "never", "always"))
    ]
    search = json.loads((out / "dp_search" / "search.json").read_text())
    frontier = _frontier(ds, train_tasks)
    curves = {split: mix_curve(results, split, baselines) for split in cfg.splits}
    _plot(summary, frontier, out / "usage_success.png", curves)
    budgets = sorted({float(cfg.budget), *map(float, cfg.helper_budgets or [])})
    rooms = [headroom(results, split, b, baselines) for split in cfg.splits for b in budgets]
    (out / "headroom.json").write_text(json.dumps(rooms, indent=2) + "\n")
    ope_df = None
    if cfg.ope:
        ope_df = ope_estimates(ds, by_split, summary, cfg)
        ope_df.to_parquet(out / "ope.parquet", index=False)
    (out / "report.md").write_text(
        report(summary, comparisons, search, cfg, time.perf_counter() - t0, len(train_tasks))
        + headroom_report(rooms)
        + ("" if ope_df is None else ope_report(ope_df, cfg.ope_estimator))
    )
    return results, summary, comparisons


def ope_estimates(ds, by_split: dict, summary: pd.DataFrame, cfg: EvaluateConfig) -> pd.DataFrame:
    """Every policy's off-policy estimate (``cfg.ope_estimator``) from ``ds``'s collected
    episodes of the split's tasks, beside its measured SR and U (``summary``): one row
    per (split, policy) with ``inside_SR``/``inside_U`` (the measured value lies in the
    interval, clipped to [0, 1] for SR and [0, inf) for U) and the absolute errors."""
    from helpdp.ope import estimate, load_logged

    meas = summary.set_index(["split", "policy"])
    rows = []
    for split, split_pols in by_split.items():
        try:
            logged = load_logged(ds, splits=[split])
        except ValueError:
            continue  # no collected episode of this split
        logged.views()
        for pol in split_pols:
            e = estimate(pol, logged, estimators=(cfg.ope_estimator,), n_boot=int(cfg.ope_boot),
                         seed=cfg.seed)  # fmt: skip
            s, slo, shi = e.get(cfg.ope_estimator, "SR")
            u, ulo, uhi = e.get(cfg.ope_estimator, "U")
            slo, shi, ulo, uhi = max(slo, 0.0), min(shi, 1.0), max(ulo, 0.0), max(uhi, 0.0)
            m = meas.loc[(split, pol.name)]
            rows.append({
                "split": split, "policy": pol.name, "SR": float(m["SR"]), "U": float(m["U"]),
                "ope_SR": s, "ope_SR_lo": slo, "ope_SR_hi": shi,
                "ope_U": u, "ope_U_lo": ulo, "ope_U_hi": uhi,
                "inside_SR": bool(slo <= m["SR"] <= shi), "inside_U": bool(ulo <= m["U"] <= uhi),
                "abs_err_SR": abs(s - float(m["SR"])), "abs_err_U": abs(u - float(m["U"])),
                "agree": e.diagnostics["agree"], "episodes": e.diagnostics["episodes"],
                "ess": e.diagnostics["ess"], "max_share": e.diagnostics["max_share"],
            })  # fmt: skip
    return pd.DataFrame(rows)


def ope_summary(ope_df: pd.DataFrame) -> dict:
    """Coverage (share of policies whose measured value lies in the interval), mean
    half-width and mean absolute error of the off-policy estimates, for SR and U."""
    out = {"policies": len(ope_df)}
    for q in ("SR", "U"):
        if len(ope_df) == 0:
            out.update({f"coverage_{q}": math.nan, f"half_width_{q}": math.nan,
                        f"mae_{q}": math.nan})  # fmt: skip
            continue
        out[f"coverage_{q}"] = float(ope_df[f"inside_{q}"].mean())
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
        f"{s['mae_U']:.3f}. ✗: outside.",
        "",
    ]
    return "\n".join(lines)


def _frontier(ds, train_tasks) -> pd.DataFrame | None:
    from helpdp.pareto import frontier
    from helpdp.subset import task_subset

    try:
        return frontier(task_subset(ds, train_tasks).mdp, gamma=ds.gamma, progress=False).table
    except ValueError:
        return None


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


def _plot(
    summary: pd.DataFrame, frontier: pd.DataFrame | None, path: Path, curves: dict | None = None
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = list(dict.fromkeys(summary["split"]))
    fig, axes = plt.subplots(1, len(splits), figsize=(6.5 * len(splits), 5), squeeze=False)
    for ax, split in zip(axes[0], splits):
        s = summary[summary["split"] == split]
        if frontier is not None:
            ax.plot(frontier["expected_usage"], frontier["expected_success"], "-", color="0.6",
                    label="DP forecast frontier (train data)")  # fmt: skip
        mix = (curves or {}).get(split)
        if mix is not None:
            ax.plot(mix["U"], mix["SR"], ":", color="0.2",
                    label="best task-wise mix of the baselines (hindsight)")  # fmt: skip
        rnd = s[s["policy"].str.startswith("random p=")].sort_values("U")
        ax.plot(rnd["U"], rnd["SR"], "o--", color="tab:blue", label="random state-wise help")
        points = [r for r in s.itertuples() if not r.policy.startswith("random p=")]
        colours = plt.cm.tab20((np.arange(len(points)) + 2) % 20)  # blue is the random curve
        for r, c in zip(points, colours):
            ax.errorbar(r.U, r.SR, yerr=r.SR_ci, fmt="s", capsize=3, color=c, label=r.policy)
        ax.set_xlabel("expert calls per episode (realised)")
        ax.set_ylabel("success rate")
        ax.set_title(f"{split} tasks ({'unseen' if split == 'test' else 'seen'})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt_ci(t) -> str:
    if t is None or not isinstance(t, tuple) or math.isnan(t[0]):
        return "n/a"
    return f"{t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]"


def report(summary, comparisons, search, cfg, seconds, n_train) -> str:
    """``report.md``: the tables, with paired 95% intervals."""
    lines = [
        "# Help policies in the environments",
        "",
        f"Budget {cfg.budget:g}; seeds {cfg.seeds[0]}..{cfg.seeds[-1]} ({len(cfg.seeds)}), one "
        f"episode per (task, seed); every policy on the same pairs. Policies fitted on "
        f"{n_train} train tasks. The DP forecast at this budget: E[S] = "
        f"{search['expected_success']:.3f}, E[U] = {search['expected_usage']:.3f}. "
        f"{seconds:.0f} s.",
        "",
    ]
    for split in dict.fromkeys(summary["split"]):
        s = summary[summary["split"] == split]
        lines += [
            f"## {split} tasks ({'unseen by every policy' if split == 'test' else 'seen'})",
            "",
            "| policy | episodes | SR ± 95% | U (calls/ep) ± 95% | SR gain per call | L (turns) "
            "| SPL | policy errors | invalid |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in s.itertuples():
            gain = "" if math.isnan(r.gain_per_call) else f"{r.gain_per_call:+.3f}"
            lines.append(
                f"| {r.policy} | {r.episodes} | {r.SR:.3f} ± {r.SR_ci:.3f} | {r.U:.2f} ± {r.U_ci:.2f} | "
                f"{gain} | {r.L:.2f} | {r.SPL:.3f} | {r.policy_errors} | {r.invalid} |"
            )
        if s["invalid"].sum():
            lines += ["", f"**Warning:** {int(s['invalid'].sum())} episodes had no valid verdict "
                      "(server or verifier errors); they count as failures."]  # fmt: skip
        lines += ["", "Paired differences in SR (95% interval):", ""]
        lines += ["| policy | vs random at equal spend | vs never | vs rule: turn 0 | vs the best task-wise mix of the baselines at equal spend, chosen with hindsight (its calls) |", "|---|---|---|---|---|"]  # fmt: skip
        for c in comparisons:
            if c["split"] != split:
                continue
            lines.append(
                f"| {c['policy']} (U {c['U']:.2f}) | {_fmt_ci(c.get('vs_random_equal_spend'))} "
                f"({c.get('random_equal_spend', 'outside the random curve')}) | "
                f"{_fmt_ci(c.get('vs never'))} | {_fmt_ci(c.get('vs rule: turn 0'))} | "
                f"{_fmt_ci(c.get('vs_best_mix_equal_spend'))}"
                + (f" ({c['best_mix_calls']:.2f})" if "best_mix_calls" in c else "")
                + " |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def headroom_report(rooms: list[dict]) -> str:
    """The report's section on :func:`headroom`."""
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
        lines.append(
            f"| {h['split']} | {h['budget']:g} | {cs:.3f} ({cu:.2f}) | {ins:.3f} ({inu:.2f}) |"
        )
    return "\n".join(lines) + "\n"


def run_evaluate(cfg) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """The body of ``python -m helpdp.evaluate``."""
    from omegaconf import OmegaConf

    from helpdp.cliconf import parse_budgets

    parse_budgets(cfg.budget)  # at least 0, before anything loads
    if not isinstance(cfg, EvaluateConfig):
        cfg = EvaluateConfig(**OmegaConf.to_container(cfg, resolve=True))
    results, summary, comparisons = evaluate(cfg)
    print((Path(cfg.out) / "report.md").read_text())
    return results, summary, comparisons


def main() -> None:
    from helpdp.collect.awm.sandbox import COMMAND_ERRORS  # the environments run sandboxed

    run_app(
        "helpdp.evaluate",
        EvaluateConfig,
        run_evaluate,
        config_name="evaluate",
        errors=COMMAND_ERRORS,
    )


if __name__ == "__main__":
    main()
