"""Planning a collection: which tasks can run, every episode of the schedule, the
shards they are split into, and the fingerprint that ties finished shards to this
plan (a rerun resumes only shards of the same plan; :class:`~collect.shards.ShardStore`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from collect.awm.dataset import AWMDataset
from collect.config import CollectConfig, source_config, worlds_dir
from collect.schedule import (
    EpisodeSpec,
    build_schedule,
    shard_episodes,
    stage2_design,
)
from collect.worlds import is_shipped_label

__all__ = ["ShardPlan", "fingerprint_config", "plan_episodes", "plan_shards", "runnable_tasks"]


def runnable_tasks(cfg: CollectConfig) -> tuple[list[tuple[str, int]], list[str]]:
    """``(scenario, task_idx)`` pairs that can run, and why others were left out."""
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
        for i in indices:
            i = int(i)
            if i not in sc.verifiers and i not in sc.sql_verifiers:
                skipped.append(f"{name}/{i}: no verifier")
            elif need_solution and i not in sc.solutions:
                skipped.append(f"{name}/{i}: no reference solution (simulated actor / oracle)")
            else:
                tasks.append((name, i))
    return tasks, skipped


def _schedule(cfg: CollectConfig, tasks, design) -> list[EpisodeSpec]:
    """The episodes of ``tasks``, each in the split the whole worlds' task pool gives it."""
    pool = AWMDataset(worlds_dir(cfg)).task_pool()
    return build_schedule(tasks, len(cfg.interventions), cfg.schedule, cfg.split, design, pool)


def plan_episodes(cfg: CollectConfig) -> list[EpisodeSpec]:
    """Every episode the collection runs (see :func:`collect.schedule.build_schedule`)."""
    tasks, _ = runnable_tasks(cfg)
    design = stage2_design(cfg.stage2, cfg.schedule.seed)
    return _schedule(cfg, tasks, design)


def fingerprint_config(cfg: CollectConfig) -> dict[str, Any]:
    """What determines the shards' content (not how they are run). The shipped worlds
    enter as one label wherever the package lives (``collect/`` at the top level, or
    ``helpdp/collect/`` as some manifests record), so shards written before a move resume
    (same worlds, same bytes)."""
    d = source_config(cfg)
    if is_shipped_label(d.get("worlds")):
        d["worlds"] = "collect/worlds (shipped demo worlds)"
    for key in ("executor", "invalid_episodes", "gamma"):
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
    config: dict[str, Any]  # what determines the shards' content (:func:`fingerprint_config`)
    episode_ids_sha256: str
    fingerprint: str

    def record(self) -> dict[str, Any]:
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
    tasks, skipped = runnable_tasks(cfg)
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
    return ShardPlan(specs, shards, skipped, fp_config, ids, fingerprint)
