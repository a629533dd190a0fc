"""Running the shards: a worker process keeps its environments, actor and
interventions across the shards it is given (:func:`run_shard`, what an executor of
:mod:`collect.executors` calls) and returns each shard's tables as Parquet bytes."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any

from collect.actors import LenientActor, build_actor
from collect.awm.clock import WorldClock
from collect.awm.env import EnvPool
from collect.awm.sandbox.rmtree import remove_tree
from collect.config import CollectConfig, TextConfig, worlds_dir
from collect.interventions import build_interventions
from collect.policy import load_help_policy
from collect.rollout import RunContext, TextRenderer, episode_tables, run_episodes
from collect.schedule import EpisodeSpec, design_spec, stage2_design
from collect.scratch import make_scratch_dir, scratch_root, sweep_scratch
from collect.shards import table_bytes
from collect.statekey import make_keys

__all__ = ["ShardResult", "ShardTask", "close_workers", "run_shard"]


@dataclass
class ShardTask:
    """One unit of work: shard ``index``'s episodes under ``config``."""

    index: int
    specs: list[EpisodeSpec]
    config: CollectConfig
    fingerprint: str


@dataclass
class ShardResult:
    """What a shard's run returns: its tables as Parquet bytes, and counts for the progress bar."""

    index: int
    blobs: dict[str, bytes]
    episodes: int
    successes: int
    steps: int
    help_steps: int


def _text_renderer(text: TextConfig) -> TextRenderer:
    """Renders a state's text within ``text.max_tokens`` (counted by ``text.tokenizer``)."""
    return TextRenderer(text.max_tokens, _token_counter(text.tokenizer))


def _token_counter(name: Any):
    if not name:
        return None
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(name), local_files_only=True)
    return lambda s: len(tok(s, add_special_tokens=False)["input_ids"])


class _Worker:
    """Environments, actor and interventions of one process (kept across shards)."""

    def __init__(self, cfg: CollectConfig, actor: Any = None, help_policy: Any = None):
        root = scratch_root(cfg.env.work_root)
        sweep_scratch(root)
        # private (0700, ours, a fresh name): nobody else can plant or swap databases here
        self._scratch = make_scratch_dir(root)
        env_cfg = dataclasses.replace(cfg.env, work_root=str(self._scratch))
        if cfg.runtime == "openenv":
            from collect.awm.remote_env import OpenEnvPool

            self.pool = OpenEnvPool(
                cfg.env_url,
                worlds_dir(cfg),
                env_cfg,
                scenarios=cfg.schedule.scenarios or None,
                token_env=cfg.env_token_env,
            )
        else:
            self.pool = EnvPool(
                worlds_dir(cfg),
                env_cfg,
                scenarios=cfg.schedule.scenarios or None,
                clock=WorldClock.resolve(cfg.clock, worlds_dir(cfg)),
            )
        self.own_actor = actor is None
        if actor is not None and getattr(cfg.actor, "call_format", "strict") == "lenient":
            actor = LenientActor(actor)  # the manifest's call_format is what the turns get
        self.actor = actor if actor is not None else build_actor(cfg.actor)
        self.interventions = build_interventions(cfg.interventions)
        design = stage2_design(cfg.stage2, cfg.schedule.seed)  # stage 2: it decides
        if design is not None:
            help_policy = design
        self.ctx = RunContext(
            self.pool,
            self.interventions,
            make_keys(cfg.state_key, cfg.help_window),
            _text_renderer(cfg.text),
            policy=help_policy
            if help_policy is not None
            else (load_help_policy(cfg.policy) if cfg.policy else None),
            design=None if design is None else design_spec(design),
        )
        self.batch_size = cfg.executor.batch_size
        self.names = list(cfg.interventions)

    def close(self) -> None:
        for iv in self.interventions:
            with contextlib.suppress(Exception):
                iv.close()
        if self.own_actor:
            with contextlib.suppress(Exception):
                self.actor.close()
        self.pool.close()
        remove_tree(self._scratch)  # iterative: a world's deep tree cannot make this raise


_WORKERS: dict[str, _Worker] = {}


def close_workers() -> None:
    """Close this process's worker (its environments, actor, scratch directory)."""
    while _WORKERS:
        _, w = _WORKERS.popitem()
        with contextlib.suppress(Exception):
            w.close()


atexit.register(close_workers)


def run_shard(
    task: ShardTask, *, actor: Any = None, help_policy: Any = None, on_episode=None
) -> ShardResult:
    """Run one shard's episodes; its tables as Parquet bytes and its counts."""
    key = (
        f"{task.fingerprint}/{id(actor) if actor else ''}/{id(help_policy) if help_policy else ''}"
    )
    worker = _WORKERS.get(key)
    if worker is None:
        close_workers()
        worker = _WORKERS[key] = _Worker(task.config, actor, help_policy)
    logs = run_episodes(
        task.specs, worker.actor, worker.ctx, batch_size=worker.batch_size, on_episode=on_episode
    )
    tables = episode_tables(logs, worker.names, worker.ctx.design is not None)
    steps = sum(len(lg.steps) for lg in logs)
    return ShardResult(
        task.index,
        {name: table_bytes(t) for name, t in tables.items()},
        len(logs),
        sum(bool(lg.episode["success"]) for lg in logs),
        steps,
        sum(1 for lg in logs for s in lg.steps if s["action"] != 0),
    )
