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
episode and policy), ``OUT/episode_table.parquet`` (its slim cut: policy, split, task,
seed, success, calls; what a results entry ships), ``OUT/summary.parquet``, ``OUT/report.md`` and
``OUT/usage_success.png`` (each policy a point, the DP's forecast frontier a line).
The paired statistics are in :mod:`helpdp.evaluate.stats`; the report, the plot and
the off-policy tables in :mod:`helpdp.evaluate.report`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from collect import collector  # collector.collect: patchable in tests
from collect import config as collect_config
from collect.awm.dataset import AWMDataset
from collect.awm.sandbox import COMMAND_ERRORS
from collect.schedule import SplitConfig, Stage2Config, split_tasks
from collect.shards import PlanMismatch
from collect.worlds import WORLDS_DIR, is_shipped_label
from helpdp.budget import (
    InfeasibleBudget,
    SearchResult,
    policy_frame,
    search_budget,
    write_result,
)
from helpdp.cliconf import parse_budgets, run_app
from helpdp.data import Dataset, load_dataset
from helpdp.demo import demo_dataset_path
from helpdp.evaluate.config import EvaluateConfig
from helpdp.evaluate.plots import usage_success_plot
from helpdp.evaluate.report import (
    forecast_frontier,
    headroom_report,
    ope_estimates,
    ope_report,
    report,
    selection_report,
)
from helpdp.evaluate.stats import compare, episode_table, headroom, mix_curve, summarize
from helpdp.policies import HelpPolicy, TablePolicy, build_policy, policy_family
from helpdp.solve import Solution
from helpdp.splits import task_splits
from helpdp.subset import task_subset
from prm.policy import PRMScorer, TaskPolicy, dataset_views, state_policy

#: outcomes without a verdict on the agent (the environment or verifier failed); a
#: format error is the agent's own failure and counts as one
INVALID_OUTCOMES = ("server_error", "verifier_error", "no_verifier")

__all__ = [
    "EvaluateConfig",
    "Evaluation",
    "environment_runs",
    "evaluate",
    "evaluation",
    "main",
    "oracle_policy",
    "policies",
    "reuse_key",
    "run_config",
    "run_evaluate",
    "shared_actor",
    "table_policy",
]


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=]+", "_", name).strip("_")


def table_policy(
    ds: Dataset, res: SearchResult, *, seed: int, name: str, fallback: HelpPolicy | None = None
) -> TablePolicy:
    """The DP's result as the policy it deploys, in memory: the tables of ``res`` keyed by
    ``ds``'s states, as :meth:`TablePolicy.load` reads them from ``write_result``'s files."""

    def table(sol: Solution) -> dict[int, int]:
        frame = policy_frame(ds, sol)
        return dict(zip(frame["state_id"].tolist(), frame["action"].astype(int).tolist()))

    more = None if res.more_help is None else table(res.more_help)
    weight = float(res.weight_more_help) if res.more_help is not None else 0.0
    return TablePolicy(
        table(res.policy),
        more,
        weight,
        fallback=fallback,
        seed=seed,
        search=res.to_json(),
        name=name,
    )


def _dp_table(
    cfg: EvaluateConfig,
    ds: Dataset,
    tasks: list[str],
    out: Path,
    name: str,
    fallback: HelpPolicy | None = None,
) -> TablePolicy:
    """The DP's table at ``cfg.budget`` solved on ``tasks`` of ``ds``; its search output is
    written to ``out`` (search.json, policy*.parquet) and not read back."""
    sub = task_subset(ds, tasks)
    res = search_budget(sub.mdp, float(cfg.budget), gamma=ds.gamma)
    write_result(sub, res, out)
    return table_policy(sub, res, seed=cfg.seed, name=name, fallback=fallback)


def policies(
    cfg: EvaluateConfig, ds: Dataset, train_tasks: list[str], out: Path
) -> list[HelpPolicy]:
    """Every policy of the evaluation, fitted on ``train_tasks`` of ``ds``."""
    return _policies(cfg, ds, train_tasks, out)[0]


def _policies(
    cfg: EvaluateConfig, ds: Dataset, train_tasks: list[str], out: Path
) -> tuple[list[HelpPolicy], TablePolicy | None, dict[str, dict]]:
    """``(policies, the DP's table, selected)``: every policy of the evaluation (without
    ``skip``), the table also when skipped (the report quotes its forecast; None when
    skipped and no policy of the data reaches ``cfg.budget``) and the
    ``selected.json`` record of each policy chosen by ``helpdp.select``, by name."""

    prm_pols, fallback = _prm_policies(cfg, ds)
    table_name = f"dp table (budget {cfg.budget:g})"
    if fallback is not None:
        table_name = f"dp table (budget {cfg.budget:g}, unseen: {fallback.name})"
    bad = [t for t in cfg.turn_rules if not isinstance(t, (list, tuple))]
    if bad:
        raise ValueError(f"turn_rules: each rule is a list of turns (e.g. [[0,3]]), got {bad[0]!r}")
    names = [
        "never",
        "always",
        *(f"random:{float(p)}" for p in cfg.random_p),
        f"random_episodes:{float(cfg.episode_p)}",
        "turn0",
        "after:failure",
        "turn0+after:failure",
        *("turns:" + ",".join(map(str, t)) for t in cfg.turn_rules),
    ]
    fixed: list[HelpPolicy] = [build_policy(n, seed=cfg.seed) for n in names]
    try:
        table = _dp_table(cfg, ds, train_tasks, out / "dp_search", table_name, fallback)
    except InfeasibleBudget as e:
        if table_name not in cfg.skip:
            raise ValueError(f"{e} (skip=['{table_name}'] evaluates the other policies)") from e
        table = None  # skipped, and no table exists at this budget: the report says so
    pols: list[HelpPolicy] = [
        *(fixed if cfg.baselines else []),
        *([] if table is None else [table]),
        *prm_pols,
    ]
    selected = {}
    if cfg.policy_files:
        from helpdp.select import load_policy

        for spec in cfg.policy_files:
            pol = build_policy(spec, seed=cfg.seed, load_json=load_policy)
            record = _selected_record(spec)
            if record is not None:
                selected[pol.name] = record
            pols.append(pol)
    if cfg.helper_dir:
        from helpdp.helper import HelperPolicy

        for b in cfg.helper_budgets or [cfg.budget]:
            pols.append(HelperPolicy(cfg.helper_dir, budget=float(b), seed=cfg.seed))
    unknown = sorted(set(cfg.skip) - {p.name for p in pols} - {table_name})
    if unknown:
        raise ValueError(f"skip: no policy named {unknown[0]!r}")
    return [p for p in pols if p.name not in set(cfg.skip)], table, selected


def _selected_record(spec: str | Path) -> dict | None:
    """The ``selected.json`` of ``helpdp.select`` that ``spec`` names (a file or its
    directory; its cross-fitted estimate and the candidates' support), else None."""
    path = Path(str(spec))
    if path.is_dir():
        path = path / "selected.json"
    if path.suffix != ".json" or not path.is_file():
        return None
    record = json.loads(path.read_text())  # build_policy has read it: it is JSON
    return record if isinstance(record, dict) and "ope" in record else None


def oracle_policy(cfg: EvaluateConfig, ds: Dataset, split: str, out: Path) -> HelpPolicy:
    """The DP table at ``cfg.budget`` fitted on the ``split`` tasks of ``ds`` themselves:
    evaluated on fresh seeds of those tasks, it measures what a state-wise policy can
    gain there when the data covers them (a reference, not a held-out result)."""

    splits = task_splits(ds)
    tasks = sorted(splits.index[splits == split])
    if not tasks:
        raise ValueError(f"oracle: data has no {split} task to fit the oracle table on")
    name = f"dp oracle (fitted on these {split} tasks, budget {cfg.budget:g})"
    return _dp_table(cfg, ds, tasks, out / f"dp_search_oracle_{split}", name)


def _prm_policies(cfg: EvaluateConfig, ds: Dataset) -> tuple[list[HelpPolicy], HelpPolicy | None]:
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


def pinned_splits(
    recorded: SplitConfig, data_splits: pd.Series, world_tasks: Iterable[str]
) -> SplitConfig:
    """The collector's ``split`` config that puts every task where the data says it is.

    The policies are fitted on the data's train tasks (its episodes' ``split`` column,
    :func:`helpdp.splits.task_splits`), so the environments must run the same tasks
    under each split name, also when the data's splits are not what its collection
    config (``recorded``) would give (relabelled to hold a world family out, or merged).
    Tasks of the worlds the data does not hold keep the split ``recorded`` gives them.
    """
    final = split_tasks(list(world_tasks), recorded)
    final.update({str(t): str(s) for t, s in data_splits.items()})
    return dataclasses.replace(
        recorded,
        validation=0.0,
        test=0.0,
        validation_tasks=sorted(t for t, s in final.items() if s == "validation"),
        test_tasks=sorted(t for t, s in final.items() if s == "test"),
    )


def recorded_config(
    manifest: dict, worlds: str | Path | None = None
) -> collect_config.CollectConfig:
    """The data's own collection config (its manifest's ``source.config``), typed, in
    ``worlds`` (null: the data's own; the shipped label: the shipped demo worlds)."""
    rec = collect_config.as_config(manifest["source"]["config"])
    if worlds:
        return dataclasses.replace(rec, worlds=str(worlds))
    return dataclasses.replace(rec, worlds=None) if is_shipped_label(rec.worlds) else rec


def _task_ids(recorded, cfg: EvaluateConfig) -> list[str] | None:
    """The evaluation's task-id filter: ``cfg.task_ids``, else the collection's, cut to
    ``cfg.scenarios`` where those are given (none of its ids there: no filter)."""
    if cfg.task_ids is not None:
        return [str(t) for t in cfg.task_ids]
    if recorded is None or cfg.scenarios is None:
        return recorded
    kept = [str(t) for t in recorded if str(t).rpartition("/")[0] in set(map(str, cfg.scenarios))]
    return kept or None


def rerun_config(
    recorded: collect_config.CollectConfig, cfg: EvaluateConfig, n_interventions: int
) -> collect_config.CollectConfig:
    """The data's collection config re-aimed at the evaluation: fresh seeds, no random
    help (neither the grid's nor a stage-2 design's: the policy evaluated decides every
    state), one worker in this process, no policy of its own; each run sets its ``out`` and
    split (:func:`_run_config`). A run resumes its own shards (an interrupted evaluation
    goes on); a run directory of another plan is started over by the caller."""
    sched = recorded.schedule
    sched = dataclasses.replace(
        sched,
        probabilities=[[0.0] * n_interventions] if n_interventions > 1 else [0.0],
        seeds=[int(s) for s in cfg.seeds],
        max_tasks=cfg.max_tasks,
        tasks=sched.tasks if cfg.tasks is None else [int(t) for t in cfg.tasks],
        scenarios=sched.scenarios if cfg.scenarios is None else [str(s) for s in cfg.scenarios],
        task_ids=_task_ids(sched.task_ids, cfg),
    )
    executor = dataclasses.replace(
        recorded.executor, workers=1, kind="local", batch_size=int(cfg.batch_size)
    )
    return dataclasses.replace(
        recorded,
        overwrite=False,
        keep_shards=True,
        progress=False,
        policy=None,
        stage2=Stage2Config(),
        schedule=sched,
        executor=executor,
    )


def run_config(
    base: collect_config.CollectConfig, split: str, out: Path
) -> collect_config.CollectConfig:
    """``base`` (:func:`rerun_config`) for one run: the tasks of ``split``, into ``out``."""
    schedule = dataclasses.replace(base.schedule, splits=[split])
    return dataclasses.replace(base, out=str(out), schedule=schedule)


def environment_runs(
    manifest: dict, data_splits: pd.Series, cfg: EvaluateConfig
) -> tuple[collect_config.CollectConfig, dict[str, int]]:
    """``(base, reference turns)``: the collection config every run of the evaluation
    starts from (:func:`rerun_config` of the data's own, with its tasks pinned to the
    data's splits, :func:`pinned_splits`) and each task's reference turns (SPL's)."""
    recorded = recorded_config(manifest, cfg.worlds)
    ref = _reference_turns(recorded.worlds)
    split = pinned_splits(recorded.split, data_splits, ref)
    base = rerun_config(
        dataclasses.replace(recorded, split=split), cfg, len(manifest["actions"]) - 1
    )
    return base, ref


def shared_actor(actor: object) -> Callable[[], dict]:
    """``collect(**shared_actor(cfg.actor)())``: each run gets a fresh actor on one loaded
    model (:func:`collect.actors.shared_model_actors`, loaded at the first run), so a
    real model loads once per evaluation, not once per policy; nothing for the actors
    that are cheap to build (the collector builds those)."""
    from collect.actors import shared_model_actors

    made: list = []  # [the factory, or None for a kind the collector builds], at the first run

    def kwargs() -> dict:
        if not made:
            made.append(shared_model_actors(actor))
        return {} if made[0] is None else {"actor": made[0]()}

    return kwargs


def _reference_turns(worlds: str | Path | None) -> dict[str, int]:
    """Per task, its reference solution's calls plus the final answer (SPL's reference)."""
    ds = AWMDataset(Path(worlds) if worlds else WORLDS_DIR)
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


@dataclass
class Evaluation:
    """What :func:`evaluation` measured and wrote: ``results`` (one row per episode and
    policy: ``results.parquet``), ``summary`` (per split and policy:
    ``summary.parquet``), the paired ``comparisons`` and the ``report`` (``report.md``)."""

    results: pd.DataFrame
    summary: pd.DataFrame
    comparisons: list[dict]
    report: str


def _run_policies(
    cfg: EvaluateConfig,
    by_split: dict[str, list[HelpPolicy]],
    base: collect_config.CollectConfig,
    out: Path,
) -> pd.DataFrame:
    """Every policy's episodes on its split, the collector's rows with ``policy`` and
    ``split``; a baseline's run directory is kept for a rerun (``reuse``)."""
    from tqdm import tqdm

    rows = []
    runs = out / "runs"
    if cfg.progress:  # the cost line: runs x episodes of the split, at the measured rate
        from collect.plan import plan_shards
        from helpdp.cliconf.progress import announce_episodes

        episodes = sum(
            len(pols) * len(plan_shards(run_config(base, split, runs), pols[0].name).specs)
            for split, pols in by_split.items()
            if pols
        )
        announce_episodes("helpdp.evaluate", episodes, base.actor)
    bar = tqdm(
        total=sum(map(len, by_split.values())),
        desc="evaluate",
        unit="run",
        disable=not cfg.progress,
    )
    actor = shared_actor(base.actor)
    for split, split_pols in by_split.items():
        for pol in split_pols:
            bar.set_postfix(split=split, policy=pol.name, refresh=True)
            run_dir = runs / split / _slug(pol.name)
            key = reuse_key(pol) if cfg.reuse else None
            if key is None or _read(run_dir / "policy.txt") != key:
                shutil.rmtree(run_dir, ignore_errors=True)  # never resume another policy's shards
            run_cfg = run_config(base, split, run_dir)
            try:
                collector.collect(run_cfg, help_policy=pol, **actor())
            except PlanMismatch:  # our own run directory, of other seeds or tasks: start over
                shutil.rmtree(run_dir, ignore_errors=True)
                collector.collect(run_cfg, help_policy=pol, **actor())
            ep = pd.read_parquet(run_dir / "episodes.parquet")
            rows.append(ep.assign(policy=pol.name, split=split))
            if key is None:
                shutil.rmtree(run_dir / "shards", ignore_errors=True)
            else:
                (run_dir / "policy.txt").write_text(key)
            bar.update(1)
    bar.close()
    return pd.concat(rows, ignore_index=True)


def evaluation(cfg: EvaluateConfig) -> Evaluation:
    """Run every policy on every split; write the results, the report and the plot, and
    hand them back (nothing written is read back)."""

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
    pols, table, selected = _policies(cfg, ds, train_tasks, out)
    by_split = {
        split: pols
        + ([oracle_policy(cfg, ds, split, out)] if cfg.oracle and split != "train" else [])
        for split in cfg.splits
    }
    base, ref = environment_runs(manifest, splits, cfg)
    results = _run_policies(cfg, by_split, base, out)
    results["pair"] = results["task_id"].astype(str) + "#" + results["seed"].astype(str)
    refs = results["task_id"].map(ref).fillna(results["steps"]).astype(float)
    results["spl"] = results["success"] * refs / np.maximum(results["steps"], refs)
    results["invalid"] = results["outcome"].isin(INVALID_OUTCOMES)
    keep = [
        "policy",
        "split",
        "pair",
        "task_id",
        "seed",
        "success",
        "outcome",
        "invalid",
        "expert_calls",
        "steps",
        "spl",
        "policy_errors",
        "format_errors",
        "errors",
        "blind_calls",
        "recovery_calls",
    ]
    results = results[keep]
    results.to_parquet(out / "results.parquet", index=False)
    # the slim table a results entry ships (kilobytes): every verdict recomputable from it
    episode_table(results).to_parquet(out / "episode_table.parquet", index=False)
    summary = summarize(results)
    summary.to_parquet(out / "summary.parquet", index=False)
    baselines = sorted({p.name for p in pols if reuse_key(p) is not None})
    if "never" not in baselines:  # the task-wise mixes need a zero-call policy
        baselines = []
    comparisons = [
        compare(results, p.name, split, [float(x) for x in cfg.random_p], baselines)
        for split, split_pols in by_split.items()
        for p in split_pols
        if policy_family(p) not in ("random", "baseline")  # the curve's points: no comparison
    ]
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
    text = (
        report(
            summary,
            comparisons,
            None if table is None else table.search,
            cfg,
            time.perf_counter() - t0,
            len(train_tasks),
        )
        + headroom_report(rooms)
        + selection_report(selected, summary)
        + ("" if ope_df is None else ope_report(ope_df, cfg.ope_estimator))
    )
    (out / "report.md").write_text(text)
    return Evaluation(results, summary, comparisons, text)


def evaluate(cfg: EvaluateConfig) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """``(results, summary, comparisons)`` of :func:`evaluation`."""
    e = evaluation(cfg)
    return e.results, e.summary, e.comparisons


def run_evaluate(cfg: EvaluateConfig) -> Evaluation:
    """The body of ``python -m helpdp.evaluate``: prints the report it wrote."""
    parse_budgets(cfg.budget)  # at least 0, before anything loads
    result = evaluation(cfg)
    print(result.report)
    return result


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
