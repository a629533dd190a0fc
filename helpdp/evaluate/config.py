"""The schema of ``python -m helpdp.evaluate`` (``conf/evaluate.yaml``); every field is
documented here, once. No heavy import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helpdp.cliconf import doc_field as _f

__all__ = ["EvaluateConfig"]


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
    scenarios: Any = _f(
        None,
        "scenario names to run, e.g. [workflow_automation_1]: held-out tasks in worlds outside "
        "the collection's schedule.scenarios; null: the collection's schedule.scenarios",
    )
    task_ids: Any = _f(
        None,
        "run only these tasks, by id (scenario/index): e.g. the held-out tasks of a split "
        "chosen by world; null: the collection's schedule.task_ids, those in the scenarios "
        "run (none of them there: no such filter)",
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
