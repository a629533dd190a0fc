"""Planning a collection: which tasks can run, every episode of the schedule, the
shards they are split into, and the fingerprint that ties finished shards to this
plan (a rerun resumes only shards of the same plan; :class:`~collect.shards.ShardStore`)."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from collect.awm.app import build_scenario_database
from collect.awm.check import passes_untouched
from collect.awm.clock import WorldClock
from collect.awm.dataset import AWMDataset
from collect.awm.sandbox import SandboxError, VerifierPool
from collect.awm.sandbox.rmtree import remove_tree
from collect.config import CollectConfig, source_config, worlds_dir
from collect.schedule import (
    EpisodeSpec,
    build_schedule,
    shard_episodes,
    stage2_design,
    task_id,
)
from collect.scratch import make_scratch_dir, scratch_root
from collect.worlds import is_shipped_label
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from collect.awm.dataset import Scenario

__all__ = [
    "UNTOUCHED_FILE",
    "ShardPlan",
    "fingerprint_config",
    "plan_episodes",
    "plan_shards",
    "runnable_tasks",
    "trivial_tasks",
]


def runnable_tasks(cfg: CollectConfig) -> tuple[list[tuple[str, int]], list[str]]:
    """``(scenario, task_idx)`` pairs that can run, and why others were left out (a task
    whose verifier says complete on the untouched database among them, unless
    ``include_trivial_tasks``: :func:`trivial_tasks`)."""
    tasks, skipped, _ = _runnable(cfg)
    return tasks, skipped


def _task_ids(ids, dataset: AWMDataset, names: list[str]) -> set[str] | None:
    """``schedule.task_ids`` as a set, each id checked against the worlds (and against
    ``schedule.scenarios``: an id outside them is a contradiction, not a filter)."""
    if ids is None:
        return None
    if isinstance(ids, str):
        raise ValueError(f"schedule.task_ids must be a list of task ids, got {ids!r}")
    out = set()
    for t in ids:
        name, _, idx = str(t).rpartition("/")
        if not name or not idx.isdigit():
            raise ValueError(f"schedule.task_ids: {t!r} is not a task id (scenario/index)")
        if name not in dataset:
            raise ValueError(f"schedule.task_ids: {t!r}: no scenario {name!r} in the worlds")
        if name not in names:
            raise ValueError(f"schedule.task_ids: {t!r} is outside schedule.scenarios")
        if int(idx) >= dataset.get(name).n_tasks:
            raise ValueError(f"schedule.task_ids: {t!r}: {name} has no task {idx}")
        out.add(task_id(name, int(idx)))
    return out


def _runnable(
    cfg: CollectConfig, verdicts: dict[str, str | None] | None = None
) -> tuple[list[tuple[str, int]], list[str], list[str]]:
    """:func:`runnable_tasks`, and the task ids of the trivial tasks left out
    (``verdicts``: :func:`trivial_tasks`')."""
    dataset = AWMDataset(worlds_dir(cfg))
    wanted = cfg.schedule.scenarios
    names = dataset.names()
    if wanted:
        unknown = [n for n in wanted if n not in dataset]
        if unknown:
            raise ValueError(f"schedule.scenarios: {unknown[0]!r} is not in {worlds_dir(cfg)}")
        names = [n for n in names if n in set(wanted)]
    need_solution = cfg.actor.kind == "simulated" or any(
        iv.kind == "oracle" for iv in cfg.interventions.values()
    )
    wanted_ids = _task_ids(cfg.schedule.task_ids, dataset, names)
    tasks, skipped = [], []
    for name in names:
        sc = dataset.get(name)
        missing = sc.missing()
        if missing:
            skipped.append(f"{name}: cannot run (missing {', '.join(missing)})")
            continue
        indices = range(sc.n_tasks)
        if cfg.schedule.tasks is not None:
            indices = [i for i in cfg.schedule.tasks if 0 <= int(i) < sc.n_tasks]
        if cfg.schedule.max_tasks is not None:
            indices = list(indices)[: int(cfg.schedule.max_tasks)]
        if wanted_ids is not None:
            indices = [i for i in indices if task_id(name, int(i)) in wanted_ids]
        for i in indices:
            i = int(i)
            if i not in sc.verifiers and i not in sc.sql_verifiers:
                skipped.append(f"{name}/{i}: no verifier")
            elif need_solution and i not in sc.solutions:
                skipped.append(f"{name}/{i}: no reference solution (simulated actor / oracle)")
            else:
                tasks.append((name, i))
    trivial = trivial_tasks(cfg, dataset, tasks, verdicts)
    if trivial:
        tasks = [t for t in tasks if t not in trivial]
        skipped += [
            f"{name}/{i}: trivial (its verifier says complete on the untouched database, "
            f"given {given})"
            for (name, i), given in sorted(trivial.items())
        ]
    return tasks, skipped, [f"{name}/{i}" for name, i in sorted(trivial)]


#: verdicts of the do-nothing check in this process, by a digest of what decides one (the
#: world's database, the verifier, the clock): a plan made again (a resume, a count of the
#: episodes, another config on the same worlds) runs no verifier twice
_UNTOUCHED: dict[str, str | None] = {}

#: where a collection keeps its plan's do-nothing verdicts, under ``out/shards/`` (written by
#: the collector beside ``plan.json``, read by the next plan of the same ``out``: a resume
#: runs no verifier again; removed with the shards). The digest covers the inputs, not the
#: check itself: ``UNTOUCHED_VERSION`` changes with ``passes_untouched``'s semantics, and a
#: file of another version is ignored
UNTOUCHED_FILE = "untouched.json"
UNTOUCHED_VERSION = 1


def _load_untouched(out: str | None) -> None:
    """Add the verdicts ``out/shards/untouched.json`` records to :data:`_UNTOUCHED` (those
    not already known). A cache of content digests: a missing, unreadable or malformed
    file, or a malformed entry, is ignored (its verifiers run again)."""
    if not str(out or "").strip():
        return
    path = Path(str(out)) / "shards" / UNTOUCHED_FILE
    try:
        if path.is_symlink() or not path.is_file():
            return
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(record, dict) or record.get("version") != UNTOUCHED_VERSION:
        return
    verdicts = record.get("verdicts")
    if not isinstance(verdicts, dict):
        return
    for key, given in verdicts.items():
        if len(key) == 64 and (given is None or isinstance(given, str)):
            _UNTOUCHED.setdefault(key, given)


def untouched_record(plan: ShardPlan) -> str:
    """``out/shards/untouched.json``'s text for ``plan``: the verdict of each task its
    do-nothing check covered, by digest (:data:`UNTOUCHED_FILE`)."""
    return (
        json.dumps(
            {"version": UNTOUCHED_VERSION, "verdicts": plan.untouched}, indent=1, sort_keys=True
        )
        + "\n"
    )


def _untouched_key(scenario: Scenario, idx: int, clock: str) -> str:
    record = scenario.verifiers[idx]
    parts = [scenario.db_schema, scenario.sample_data, record.code, record.function_name, clock]
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _code_mode(cfg: CollectConfig, scenario: Scenario, idx: int) -> bool:
    """Whether the episodes of task ``idx`` are verified by its code-mode verifier (as
    :class:`~collect.awm.verification.EpisodeVerifier` chooses)."""
    mode = cfg.env.verifier_mode
    if mode == "auto":
        judge = bool(cfg.env.judge.base_url and cfg.env.judge.model)
        return idx in scenario.verifiers and not (judge and idx in scenario.sql_verifiers)
    return mode == "code" and idx in scenario.verifiers


def trivial_tasks(
    cfg: CollectConfig,
    dataset: AWMDataset,
    tasks: list[tuple[str, int]],
    verdicts: dict[str, str | None] | None = None,
) -> dict[tuple[str, int], str]:
    """The tasks of ``tasks`` an agent completes by doing nothing: their code-mode
    verifier says complete on the untouched database (``python -m collect.awm.check``'s
    do-nothing check, :func:`~collect.awm.check.passes_untouched`), each with what the
    verifier was given. Each world's database is built once and the verifiers run in a
    sandboxed verifier worker, as the check does; verdicts are kept for this process.
    Empty (nothing run) with ``include_trivial_tasks``, or ``runtime=openenv`` (its
    server verifies, in its own sandbox). A world whose database cannot be built keeps
    its tasks (its episodes say why). ``verdicts``: filled with the verdict of every task
    checked, by digest (what :data:`UNTOUCHED_FILE` keeps); verdicts recorded there by an
    earlier run of the same ``out`` are not run again."""
    if cfg.include_trivial_tasks or cfg.runtime != "local" or not tasks:
        return {}
    _load_untouched(cfg.out)
    clock = WorldClock.resolve(cfg.clock, worlds_dir(cfg))
    checked: dict[tuple[str, int], str] = {}  # task -> the key of its verdict
    worlds: dict[str, Scenario] = {}
    for name, idx in tasks:
        sc = worlds.setdefault(name, dataset.get(name))
        if _code_mode(cfg, sc, idx):
            checked[(name, idx)] = _untouched_key(sc, idx, clock.iso())
    todo: dict[str, dict[int, str]] = {}
    for (name, idx), key in checked.items():
        if key not in _UNTOUCHED:
            todo.setdefault(name, {})[idx] = key
    if todo:
        _run_untouched(cfg, {name: (worlds[name], keys) for name, keys in todo.items()}, clock)
    if verdicts is not None:
        verdicts.update({key: _UNTOUCHED[key] for key in checked.values() if key in _UNTOUCHED})
    return {t: given for t, key in checked.items() if (given := _UNTOUCHED.get(key)) is not None}


def _run_untouched(
    cfg: CollectConfig, todo: dict[str, tuple[Scenario, dict[int, str]]], clock: WorldClock
) -> None:
    """Build each world of ``todo`` (name -> (scenario, {task: key})) and run the verifiers
    not yet in :data:`_UNTOUCHED` on its untouched database, in a scratch directory of
    this process's own, removed after; ``executor.workers`` worlds at a time (threads
    sharing a verifier pool of as many workers: at 1,000 worlds, 10,000 verifier runs
    before the first episode)."""
    root = make_scratch_dir(scratch_root(cfg.env.work_root))
    jobs = max(1, min(int(cfg.executor.workers), len(todo)))
    pool = VerifierPool(jobs, cfg.env.verifier_sandbox, work_root=root / "verify", clock=clock)

    def one(item: tuple[int, tuple[Scenario, dict[int, str]]]) -> dict[str, str | None]:
        n, (sc, keys) = item
        try:
            db_path, _ = build_scenario_database(
                sc, root / f"db-{n}", clock=clock, limits=cfg.env.sandbox
            )
        except SandboxError:
            return {}
        try:
            return {
                key: passes_untouched(sc, sc.verifiers[idx], pool, db_path)
                for idx, key in sorted(keys.items())
                if key not in _UNTOUCHED
            }
        finally:
            remove_tree(root / f"db-{n}")

    try:  # a world per thread, as many as the collection's workers (the check's way)
        with ThreadPoolExecutor(max_workers=jobs) as executor:
            for verdicts in executor.map(one, enumerate(todo[name] for name in sorted(todo))):
                _UNTOUCHED.update(verdicts)
    finally:
        pool.close()
        remove_tree(root)


def _schedule(cfg: CollectConfig, tasks, design) -> list[EpisodeSpec]:
    """The episodes of ``tasks``, each in the split the whole worlds' task pool gives it."""
    pool = AWMDataset(worlds_dir(cfg)).task_pool()
    return build_schedule(tasks, len(cfg.interventions), cfg.schedule, cfg.split, design, pool)


def plan_episodes(cfg: CollectConfig) -> list[EpisodeSpec]:
    """Every episode the collection runs (see :func:`collect.schedule.build_schedule`)."""
    tasks, _ = runnable_tasks(cfg)
    design = stage2_design(cfg.stage2, cfg.schedule.seed)
    return _schedule(cfg, tasks, design)


def fingerprint_config(cfg: CollectConfig) -> dict[str, JSON]:
    """What determines the shards' content (not how they are run). The shipped worlds
    enter as one label wherever the package lives (``collect/`` at the top level, or
    ``helpdp/collect/`` as some manifests record), so shards written before a move resume
    (same worlds, same bytes)."""
    d = source_config(cfg)
    if is_shipped_label(d.get("worlds")):
        d["worlds"] = "collect/worlds (shipped demo worlds)"
    # include_trivial_tasks decides which tasks the plan holds, which its episode ids say:
    # a plan with no trivial task is the same plan either way
    for key in ("executor", "invalid_episodes", "gamma", "include_trivial_tasks"):
        d.pop(key, None)
    d["shard_size"] = cfg.executor.shard_size
    d["env"].pop("verifier_workers", None)
    plumbing = ("timeout_s", "retries", "concurrency", "api_key_env")
    for node in [d["actor"], *d["interventions"].values()]:
        for key in plumbing:
            node.pop(key, None)
    return d


@dataclass
class ShardPlan:
    """Every episode of a collection, its shards and what identifies them."""

    specs: list[EpisodeSpec]
    shards: list[list[EpisodeSpec]]
    skipped: list[str]  # tasks left out, and why
    config: dict[str, JSON]  # what determines the shards' content (:func:`fingerprint_config`)
    episode_ids_sha256: str
    fingerprint: str
    trivial: list[str] = field(default_factory=list)  # ids of the trivial tasks left out
    #: the do-nothing verdict of each task checked, by digest (:func:`untouched_record`)
    untouched: dict[str, str | None] = field(default_factory=dict)

    def record(self) -> dict[str, JSON]:
        """The plan as ``shards/plan.json`` records it."""
        return {
            "fingerprint": self.fingerprint,
            "config": self.config,
            "episodes": len(self.specs),
            "shards": len(self.shards),
            "episode_ids_sha256": self.episode_ids_sha256,
        }


def plan_shards(cfg: CollectConfig, help_policy_name: str | None = None) -> ShardPlan:
    """The episodes of ``cfg`` split into shards, fingerprinted (``help_policy_name``: the
    policy object deciding the calls, part of the fingerprint). Refuses an empty plan."""
    untouched: dict[str, str | None] = {}
    tasks, skipped, trivial = _runnable(cfg, untouched)
    if not tasks:
        why = "; ".join(skipped[:5]) or f"{worlds_dir(cfg)} holds no scenario with tasks"
        raise ValueError("no task can run: " + why)
    design = stage2_design(cfg.stage2, cfg.schedule.seed)
    if design is not None and help_policy_name is not None:
        raise ValueError("stage2.base and a help policy exclude each other")
    specs = _schedule(cfg, tasks, design)
    if not specs:
        raise ValueError(
            f"the schedule is empty (no task in schedule.splits={cfg.schedule.splits})"
        )
    shards = shard_episodes(specs, cfg.executor.shard_size)
    fp_config = fingerprint_config(cfg)
    if help_policy_name is not None:
        fp_config["help_policy"] = help_policy_name
    ids = hashlib.sha256(json.dumps([s.episode_id for s in specs]).encode()).hexdigest()
    fingerprint = hashlib.sha256(
        json.dumps({"config": fp_config, "episodes": ids}, sort_keys=True, default=str).encode()
    ).hexdigest()
    return ShardPlan(specs, shards, skipped, fp_config, ids, fingerprint, trivial, untouched)
