"""Running the shards: a worker process keeps its environments, actor and
interventions across the shards it is given (:func:`run_shard`, what an executor of
:mod:`collect.executors` calls) and returns each shard's tables as Parquet bytes.

An episode lost to its runtime (:func:`runtime_failed`: the environment did not start,
or a step raised: a session refused at capacity, a connection lost) is not an outcome
of the world: it is run again, with its id and seed (so its rows are those it would
have had), up to ``executor.episode_retries`` times; one still lost is left out of the
shard's tables and named in :attr:`ShardResult.lost`. An episode that ended
``server_error`` inside the world (the app's worker died, the tool time budget was
spent, an actor or helper endpoint failed) is recorded as it ended."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from collect.executors import ExecutorConfig
    from collect.rollout import EpisodeLog
    from collect.types import Actor
    from helpdp.policies import HelpPolicy

__all__ = [
    "RUNTIME_FAILURES",
    "ShardResult",
    "ShardTask",
    "close_workers",
    "run_shard",
    "runtime_failed",
]

#: how :class:`~collect.rollout.EpisodeRunner` words an exception of the environment
#: (at start, or at a step): the runtime failed, not the world
RUNTIME_FAILURES = ("environment failed to start", "environment step failed")


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
    blobs: dict[str, bytes]  # empty when no episode of the shard was kept
    episodes: int
    successes: int
    steps: int
    help_steps: int
    valid: int = 0  # episodes with a verified outcome
    lost: list[int] = dataclasses.field(default_factory=list)  # episode ids lost to the runtime
    lost_error: str = ""  # the first lost episode's error
    reruns: int = 0  # episodes run again after a runtime failure
    capacity_retries: int = 0  # pauses for a session while the server was at capacity
    criteria_tokens: int = 0  # the expert's tokens spent outside any episode (criteria)


def _text_renderer(text: TextConfig) -> TextRenderer:
    """Renders a state's text within ``text.max_tokens`` (counted by ``text.tokenizer``)."""
    return TextRenderer(text.max_tokens, _token_counter(text.tokenizer))


def _token_counter(name: str | None) -> Callable[[str], int] | None:
    if not name:
        return None
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(name), local_files_only=True)
    return lambda s: len(tok(s, add_special_tokens=False)["input_ids"])


class _Worker:
    """Environments, actor and interventions of one process (kept across shards)."""

    def __init__(
        self, cfg: CollectConfig, actor: Actor | None = None, help_policy: HelpPolicy | None = None
    ):
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
                max_sessions=cfg.executor.batch_size,  # its episodes in flight
                capacity_wait_s=cfg.executor.capacity_wait_s,
                within_cap=_within_cap(cfg.executor),
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
            if help_policy is not None:
                raise ValueError(
                    "stage2.base and a help policy exclude each other: stage 2 is its own policy"
                )
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
        self.retries = int(cfg.executor.episode_retries)
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


def _within_cap(ex: ExecutorConfig) -> bool:
    """The collection's sessions in all (workers x batch_size of a local executor) are
    within the server's cap (``max_sessions``, as :mod:`collect.collector` fitted them)."""
    return ex.kind == "local" and 0 < max(1, int(ex.workers)) * ex.batch_size <= ex.max_sessions


def runtime_failed(log: EpisodeLog) -> bool:
    """The episode was lost to its runtime (:data:`RUNTIME_FAILURES`), not ended by its
    world: it has no outcome to record."""
    ep = log.episode
    return ep["outcome"] == "server_error" and str(ep.get("error") or "").startswith(
        RUNTIME_FAILURES
    )


def run_shard(
    task: ShardTask,
    *,
    actor: Actor | None = None,
    help_policy: HelpPolicy | None = None,
    on_episode: Callable[[EpisodeLog], None] | None = None,
) -> ShardResult:
    """Run one shard's episodes (those lost to the runtime again, up to
    ``executor.episode_retries`` times); its tables as Parquet bytes and its counts."""
    key = (
        f"{task.fingerprint}/{id(actor) if actor else ''}/{id(help_policy) if help_policy else ''}"
    )
    worker = _WORKERS.get(key)
    if worker is None:
        close_workers()
        worker = _WORKERS[key] = _Worker(task.config, actor, help_policy)
    waits = getattr(worker.pool, "capacity_retries", 0)
    spent = sum(iv.criteria_tokens for iv in worker.interventions)

    def kept(log: EpisodeLog) -> None:
        if on_episode is not None and not runtime_failed(log):
            on_episode(log)

    def run(specs: list[EpisodeSpec]) -> list[EpisodeLog]:
        return run_episodes(
            specs, worker.actor, worker.ctx, batch_size=worker.batch_size, on_episode=kept
        )

    logs = run(task.specs)
    reruns = 0
    for attempt in range(worker.retries):
        lost = [i for i, lg in enumerate(logs) if runtime_failed(lg)]
        if not lost:
            break
        time.sleep(min(5.0, 0.5 * 2**attempt))  # a restarting server, a busy one
        reruns += len(lost)
        for i, log in zip(lost, run([logs[i].spec for i in lost]), strict=True):
            logs[i] = log
    lost_logs = [lg for lg in logs if runtime_failed(lg)]
    logs = [lg for lg in logs if not runtime_failed(lg)]
    blobs = {}
    if logs:
        tables = episode_tables(logs, worker.names, worker.ctx.design is not None)
        blobs = {name: table_bytes(t) for name, t in tables.items()}
    return ShardResult(
        task.index,
        blobs,
        len(logs),
        sum(bool(lg.episode["success"]) for lg in logs),
        sum(len(lg.steps) for lg in logs),
        sum(1 for lg in logs for s in lg.steps if s["action"] != 0),
        valid=sum(bool(lg.episode["valid"]) for lg in logs),
        lost=[int(lg.spec.episode_id) for lg in lost_logs],
        lost_error=str(lost_logs[0].episode["error"])[:300] if lost_logs else "",
        reruns=reruns,
        capacity_retries=getattr(worker.pool, "capacity_retries", 0) - waits,
        criteria_tokens=sum(iv.criteria_tokens for iv in worker.interventions) - spent,
    )
