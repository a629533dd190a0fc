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
* with a text PRM (``prm_dir=DIR``, ``kind=lm``; ``prm.policy``): help at the top
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
The paired statistics are in :mod:`helpdp.evaluate.stats`; the report, the plot and
the off-policy tables in :mod:`helpdp.evaluate.report`.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collect import collector  # collector.collect: patchable in tests
from collect.awm.dataset import AWMDataset
from collect.awm.sandbox import COMMAND_ERRORS
from collect.schedule import SplitConfig, split_tasks
from collect.shards import PlanMismatch
from collect.worlds import WORLDS_DIR, is_shipped_label
from helpdp.budget import search_budget, write_result
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import parse_budgets, run_app
from helpdp.data import load_dataset
from helpdp.demo import demo_dataset_path
from helpdp.evaluate.report import (
    forecast_frontier,
    headroom_report,
    ope_estimates,
    ope_report,
    report,
    usage_success_plot,
)
from helpdp.evaluate.stats import compare, headroom, mix_curve, summarize
from helpdp.policies import HelpPolicy, TablePolicy, build_policy
from helpdp.splits import task_splits
from helpdp.subset import task_subset
from prm.policy import PRMScorer, TaskPolicy, dataset_views, state_policy

#: outcomes without a verdict on the agent (the environment or verifier failed); a
#: format error is the agent's own failure and counts as one
INVALID_OUTCOMES = ("server_error", "verifier_error", "no_verifier")

__all__ = [
    "EvaluateConfig",
    "evaluate",
    "main",
    "oracle_policy",
    "policies",
    "reuse_key",
    "run_evaluate",
    "shared_actor",
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
        "a trained text PRM (python -m prm.train prm=tiny|minilm, kind=lm): adds the PRM-threshold "
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
    tasks: Any = _f(
        None,
        "task indices (within each scenario) to run, e.g. [6,7]: held-out tasks outside the "
        "collection's schedule.tasks; null: the collection's schedule.tasks",
    )
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
        "directory): the policy chosen by cross-fitted off-policy evaluation; or a name of "
        "helpdp.policies.build_policy (e.g. turn0+after:repeat,failed+max:2)",
    )
    ope: bool = _f(
        True,
        "for every policy run, also estimate its SR and calls per episode off-policy "
        "(helpdp.ope) from data's collected episodes of the same split's tasks, and report "
        "how often the measured SR and U fall inside the estimate's interval (ope.parquet)",
    )
    ope_estimator: str = _f("wdr", "the off-policy estimator reported (helpdp.ope.ESTIMATORS)")
    ope_boot: int = _f(500, "bootstrap replicates of each off-policy interval")
    seed: int = _f(0, "seed of the random policies' draws and of the DP mixture's draw")
    out: str = _f("outputs/evaluate", "output directory (results, report.md, plot)")
    progress: bool = _f(True, "progress bars")


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=]+", "_", name).strip("_")


def policies(cfg: EvaluateConfig, ds, train_tasks: list[str], out: Path) -> list[HelpPolicy]:
    """Every policy of the evaluation, fitted on ``train_tasks`` of ``ds``."""

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
    names = ["never", "always", *(f"random:{float(p)}" for p in cfg.random_p),
             f"random_episodes:{float(cfg.episode_p)}", "turn0", "after:failure",
             "turn0+after:failure", *("turns:" + ",".join(map(str, t)) for t in cfg.turn_rules)]  # fmt: skip
    fixed: list[HelpPolicy] = [build_policy(n, seed=cfg.seed) for n in names]
    pols: list[HelpPolicy] = [
        *(fixed if cfg.baselines else []),
        TablePolicy.load(search_dir, seed=cfg.seed, name=table_name, fallback=fallback),
        *prm_pols,
    ]
    if cfg.policy_files:
        from helpdp.select import load_policy

        pols += [build_policy(p, seed=cfg.seed, load_json=load_policy) for p in cfg.policy_files]
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


def pinned_splits(manifest: dict, data_splits: pd.Series, world_tasks) -> dict:
    """The collector's ``split`` config that puts every task where the data says it is.

    The policies are fitted on the data's train tasks (its episodes' ``split`` column,
    :func:`helpdp.splits.task_splits`), so the environments must run the same tasks
    under each split name, also when the data's splits are not what its collection
    config would give (relabelled to hold a world family out, or merged). Tasks of the
    worlds the data does not hold keep the split the collection config gives them.
    """
    cfg_split = {**SplitConfig().__dict__, **(manifest["source"]["config"].get("split") or {})}
    final = split_tasks(list(world_tasks), SplitConfig(**cfg_split))
    final.update({str(t): str(s) for t, s in data_splits.items()})
    return {
        **cfg_split,
        "validation": 0.0,
        "test": 0.0,
        "validation_tasks": sorted(t for t, s in final.items() if s == "validation"),
        "test_tasks": sorted(t for t, s in final.items() if s == "test"),
    }


def _collect_config(
    manifest: dict, cfg: EvaluateConfig, split: str, out: Path, split_config: dict | None = None
) -> dict:
    """The data's own collection config, re-aimed: fresh seeds, one split, no random help;
    ``split_config`` (:func:`pinned_splits`) replaces its task splits."""
    c = json.loads(json.dumps(manifest["source"]["config"]))
    if split_config is not None:
        c["split"] = split_config
    if cfg.worlds:
        c["worlds"] = str(cfg.worlds)
    elif is_shipped_label(c.get("worlds")):
        c["worlds"] = None  # the shipped demo worlds
    # resume this policy's own shards (an interrupted evaluation goes on); a run directory
    # of another plan is started over by the caller
    c.update(out=str(out), overwrite=False, keep_shards=True, progress=False)
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
    if cfg.tasks is not None:
        c["schedule"]["tasks"] = [int(t) for t in cfg.tasks]
    c.pop("policy", None)
    return c


def shared_actor(collect_config: dict) -> Callable[[], dict]:
    """``collect(**shared_actor(c)())``: each run gets a fresh actor on one loaded model
    (:func:`collect.actors.shared_model_actors`, loaded at the first run), so a
    real model loads once per evaluation, not once per policy; nothing for the actors
    that are cheap to build (the collector builds those)."""
    from collect.actors import shared_model_actors

    made: list = []  # [the factory, or None for a kind the collector builds], at the first run

    def kwargs() -> dict:
        if not made:
            made.append(shared_model_actors(collect_config["actor"]))
        return {} if made[0] is None else {"actor": made[0]()}

    return kwargs


def _worlds_dir(cfg_worlds: Any, manifest: dict) -> Path | None:
    """The AWM directory to run in: ``worlds=`` or the data's own (None: the shipped demo)."""
    worlds = cfg_worlds or manifest["source"]["config"].get("worlds")
    return None if not worlds or is_shipped_label(worlds) else Path(worlds)


def _reference_turns(worlds: Path | None) -> dict[str, int]:

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
    ref = _reference_turns(_worlds_dir(cfg.worlds, manifest))
    pinned = pinned_splits(manifest, splits, ref)
    rows = []
    runs = out / "runs"
    from tqdm import tqdm

    bar = tqdm(total=sum(map(len, by_split.values())), desc="evaluate", unit="run",
               disable=not cfg.progress)  # fmt: skip
    actor = shared_actor(_collect_config(manifest, cfg, cfg.splits[0], out, pinned))
    for split, split_pols in by_split.items():
        for pol in split_pols:
            bar.set_postfix(split=split, policy=pol.name, refresh=True)
            run_dir = runs / split / _slug(pol.name)
            key = reuse_key(pol) if cfg.reuse else None
            if key is None or _read(run_dir / "policy.txt") != key:
                shutil.rmtree(run_dir, ignore_errors=True)  # never resume another policy's shards
            run_cfg = _collect_config(manifest, cfg, split, run_dir, pinned)
            try:
                collector.collect(run_cfg, help_policy=pol, **actor())
            except PlanMismatch:  # our own run directory, of other seeds or tasks: start over
                shutil.rmtree(run_dir, ignore_errors=True)
                collector.collect(run_cfg, help_policy=pol, **actor())
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
    frontier = forecast_frontier(ds, train_tasks)
    curves = {split: mix_curve(results, split, baselines) for split in cfg.splits}
    usage_success_plot(summary, frontier, out / "usage_success.png", curves)
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


def run_evaluate(cfg) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """The body of ``python -m helpdp.evaluate``."""
    from omegaconf import OmegaConf

    parse_budgets(cfg.budget)  # at least 0, before anything loads
    if not isinstance(cfg, EvaluateConfig):
        cfg = EvaluateConfig(**OmegaConf.to_container(cfg, resolve=True))
    results, summary, comparisons = evaluate(cfg)
    print((Path(cfg.out) / "report.md").read_text())
    return results, summary, comparisons


def main() -> None:

    run_app(
        "helpdp.evaluate",
        EvaluateConfig,
        run_evaluate,
        config_name="evaluate",
        errors=COMMAND_ERRORS,
    )


if __name__ == "__main__":
    main()
