"""The one-pass collector (paper Sec. 5.3, "Transition Model Collection").

Runs the base actor on the tasks with interventions triggered at random
(:mod:`collect.schedule`), once, and writes a dataset directory as the contract
says (``manifest.json``, ``states.parquet``, ``transitions.parquet``) plus the raw
episodes (``episodes.parquet``, ``steps.parquet``; docs/data-format.md)::

    python -m collect out=DIR                    # the demo: shipped worlds, simulated actor, oracle
    python -m collect out=DIR collect/actor=openai actor.base_url=http://host:8000/v1 actor.model=M
    python -m collect out=DIR collect/interventions=oracle_expert   # two interventions

This module runs the steps in order; each has its module:

* :mod:`collect.config`: the config (:class:`CollectConfig`; every field is
  declared and documented once, there and in the modules it names;
  ``python -m collect --help`` lists them all) and its checks;
* :mod:`collect.plan`: the runnable tasks, the episodes and their shards;
* :mod:`collect.worker`: running a shard (in a worker process with its private
  scratch directory, :mod:`collect.scratch`), by an executor
  (:mod:`collect.executors`); a rerun of the same command reuses the finished shards
  once verified, and runs a damaged or failed one again (:mod:`collect.shards`);
* :mod:`collect.publish`: the tables, summary and manifest, written as a dataset
  (files it did not write are kept);
* :mod:`collect.cli`: the command line.

One collect writes an ``out=`` at a time (:class:`~collect.shards.OutputLock`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from collect.awm.clock import WorldClock
from collect.awm.verification import Verification
from collect.config import CollectConfig, as_config, collect_config, validate, worlds_dir
from collect.executors import ExecutorConfig, execute, resolve_workers, run_order
from collect.plan import UNTOUCHED_FILE, plan_shards, untouched_record
from collect.publish import check_out, publish
from collect.shards import OutputLock, ShardStore, write_text
from collect.worker import ShardResult, ShardTask, close_workers, run_shard
from helpdp.cliconf import Interrupted
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from collect.plan import ShardPlan
    from collect.schedule import EpisodeSpec
    from collect.types import Actor
    from helpdp.policies import HelpPolicy

__all__ = [
    "CollectConfig",
    "CollectResult",
    "EpisodesLost",
    "collect",
    "collect_config",
    "collect_demo",
]


@dataclass
class CollectResult:
    """What a collection wrote: paths, sizes, summary, seconds."""

    out: Path
    episodes: int
    steps: int
    states: int
    transitions: int
    shards_run: int
    shards_total: int
    seconds: float
    summary: dict[str, JSON]
    skipped: list[str] = field(default_factory=list)
    #: what publishing said about the previous dataset in ``out`` (replaced, kept)
    notes: list[str] = field(default_factory=list)
    #: episodes run again after their runtime failed (``executor.episode_retries``)
    reruns: int = 0
    #: pauses for a session while the server was at capacity (runtime=openenv)
    capacity_retries: int = 0

    def line(self) -> str:
        """The run in one line: its success rate over the valid episodes (a verified
        outcome), the invalid ones by outcome beside it, the help rate over the steps."""
        s = self.summary
        outcomes = s.get("outcomes") or {}
        valid = sum(n for o, n in outcomes.items() if Verification(o, "none").valid)
        invalid = ", ".join(
            f"{o} {n}" for o, n in sorted(outcomes.items()) if not Verification(o, "none").valid
        )
        success = outcomes.get("complete", 0) / valid if valid else 0.0
        runtime = ""
        if self.reruns or self.capacity_retries:
            runtime = (
                f"; runtime: {self.reruns} episodes run again, "
                f"{self.capacity_retries} waits at capacity"
            )
        return (
            f"wrote {self.out}: {self.episodes} episodes, {self.steps} steps, {self.states} states, "
            f"{self.transitions} transitions; success {success:.3f} over {valid} valid episodes "
            f"(invalid: {invalid or 'none'}), help rate {s['help_rate']:.3f} over "
            f"{self.steps} steps{runtime}; {self.shards_run}/{self.shards_total} shards run in "
            f"{self.seconds:.1f} s"
        )


class EpisodesLost(RuntimeError):
    """Episodes were lost to the runtime after their retries: their shards are
    unfinished, nothing was published (the command exits 2; a rerun runs just those)."""


class _Progress:
    def __init__(self, total: int, initial: int, enabled: bool):
        self.bar = None
        self.episodes = self.successes = self.steps = self.helps = self.valid = 0
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                initial=initial,
                unit="ep",
                desc="collect",
                dynamic_ncols=True,
                file=sys.stderr,
                smoothing=0.1,
            )

    def add(self, episodes: int, successes: int, steps: int, helps: int, valid: int) -> None:
        self.episodes += episodes
        self.successes += successes
        self.steps += steps
        self.helps += helps
        self.valid += valid
        if self.bar is not None:
            self.bar.update(episodes)
            self.bar.set_postfix(
                success_of_valid=f"{self.successes / max(1, self.valid):.2f}",
                invalid=self.episodes - self.valid,
                help=f"{self.helps / max(1, self.steps):.2f}",
                refresh=False,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _reusable(store: ShardStore, n_shards: int) -> tuple[list[int], dict[int, list[int]]]:
    """The shards to run: those not written, and the written ones that fail their check
    (:meth:`ShardStore.problem`), removed and announced in one line on stderr; and of
    those that hold episodes lost to the runtime, the ids to run (:meth:`ShardStore.lost`)."""
    todo, bad, partial = [], [], {}
    for i in range(n_shards):
        if not store.present(i):
            todo.append(i)
            continue
        problem = store.problem(i)
        if problem is not None:
            store.discard(i)
            todo.append(i)
            bad.append(f"{i:06d} ({problem})")
        elif lost := store.lost(i):
            todo.append(i)
            partial[i] = lost
    if bad:
        more = f", and {len(bad) - 3} more" if len(bad) > 3 else ""
        print(
            f"collect: running {len(bad)} shard(s) of {store.dir} again: "
            f"{', '.join(bad[:3])}{more}",
            file=sys.stderr,
            flush=True,
        )
    return sorted(todo), partial


def collect(
    config: CollectConfig | Mapping[str, object],
    *,
    actor: Actor | None = None,
    help_policy: HelpPolicy | None = None,
) -> CollectResult:
    """Collect a dataset as ``config`` says (resuming finished shards); see the module doc.

    The dataset is written by :func:`helpdp.data.write_dataset`, which loads it
    with :func:`helpdp.load_dataset` before publishing it: output that breaks the
    contract raises the loader's ``DatasetError`` and replaces nothing.

    ``actor``: an actor object to use instead of building ``config.actor`` (runs in
    this process; ``config.actor`` still names it in the manifest).
    ``help_policy``: a :class:`helpdp.policies.HelpPolicy` that decides every call of
    the expert instead of the random schedule (runs in this process; its ``name`` is
    part of the shards' fingerprint and of the manifest). Use fresh seeds and one
    probability in ``schedule``; ``config.policy`` (a search output) is the CLI's way.
    """
    started = time.perf_counter()
    cfg = as_config(config)
    validate(cfg)
    if not str(cfg.out or "").strip():
        raise ValueError("out: empty; name the output directory (out=DIR)")
    # One "now" for the whole run, resolved once: it is part of the shards' fingerprint,
    # so a resumed run keeps the recorded clock (a different one is refused).
    clock = WorldClock.resolve(cfg.clock, worlds_dir(cfg))
    cfg = dataclasses.replace(cfg, clock=clock.iso())
    if (actor is not None or help_policy is not None) and cfg.executor.kind == "ray":
        raise ValueError("an actor or policy object runs in this process: use executor.kind=local")
    policy_name = None if help_policy is None else help_policy.name
    plan = plan_shards(cfg, policy_name)
    untouched = untouched_record(plan) if plan.untouched else None
    with OutputLock(cfg.out):
        cfg, plan = _resumable(cfg, plan, policy_name)
        if plan.trivial:
            _say(_trivial_line(plan.trivial))
        check_out(cfg)
        store = ShardStore(cfg.out)
        episodes = [
            [{"episode_id": e.episode_id, "task_id": e.task_id, "seed": e.seed} for e in shard]
            for shard in plan.shards
        ]
        store.prepare(plan.record(), overwrite=cfg.overwrite, episodes=episodes)
        if untouched is not None:  # a resume runs none of these verifiers again
            write_text(untouched, store.dir / UNTOUCHED_FILE)
        todo, partial = _reusable(store, len(plan.shards))
        counts = _run(cfg, plan, store, todo, partial, actor, help_policy)
        _check_complete(cfg, plan, store, counts)
        summary, notes = publish(cfg, store, len(plan.shards), plan.skipped, clock, help_policy)
    return CollectResult(
        Path(cfg.out),
        summary["episodes"],
        summary["steps"],
        summary["states"],
        summary["transitions"],
        len(todo),
        len(plan.shards),
        time.perf_counter() - started,
        summary,
        plan.skipped,
        notes,
        counts["reruns"],
        counts["capacity_retries"],
    )


def _trivial_line(trivial: list[str]) -> str:
    shown = ", ".join(trivial[:20]) + (
        f", and {len(trivial) - 20} more" if len(trivial) > 20 else ""
    )
    return (
        f"collect: left out {len(trivial)} task(s) whose verifier says complete on the "
        f"untouched database (include_trivial_tasks=true keeps them): {shown}"
    )


def _resumable(
    cfg: CollectConfig, plan: ShardPlan, policy_name: str | None
) -> tuple[CollectConfig, ShardPlan]:
    """The config and plan this run keeps: shards planned before trivial tasks were left
    out (``shards/plan.json`` records the plan with them) resume with them, as
    ``include_trivial_tasks=true`` (announced; the manifest records it); else ``plan``."""
    if not plan.trivial or cfg.overwrite:
        return cfg, plan
    path = Path(cfg.out) / "shards" / "plan.json"
    try:
        recorded = json.loads(path.read_text()).get("fingerprint") if path.is_file() else None
    except (OSError, ValueError, AttributeError):
        recorded = None  # ShardStore.prepare says what is wrong with it
    if recorded is None or recorded == plan.fingerprint:
        return cfg, plan
    kept_cfg = dataclasses.replace(cfg, include_trivial_tasks=True)
    kept = plan_shards(kept_cfg, policy_name)
    if kept.fingerprint != recorded:
        return cfg, plan
    _say(
        f"collect: resuming {cfg.out} with its {len(plan.trivial)} trivial task(s): its shards "
        "were planned with them (include_trivial_tasks=true)"
    )
    return kept_cfg, kept


def _check_complete(cfg: CollectConfig, plan: ShardPlan, store: ShardStore, counts: dict) -> None:
    """Raise :class:`EpisodesLost` when an episode of the plan is in no shard (lost to the
    runtime after its retries, or its whole shard was)."""
    lost = shards = 0
    for i, specs in enumerate(plan.shards):
        n = len(store.lost(i)) if store.present(i) else len(specs)
        lost += n
        shards += n > 0
    if lost:
        first = f"; first: {counts['lost_error'][:160]}" if counts["lost_error"] else ""
        raise EpisodesLost(
            f"{lost} of {len(plan.specs)} episodes lost to the runtime after "
            f"{cfg.executor.episode_retries} retries each ({shards} unfinished shard(s) in "
            f"{store.dir}{first}); nothing published: rerun the same command to run just "
            "those episodes"
        )


def _fit_sessions(cfg: CollectConfig, n_tasks: int, inline: bool) -> ExecutorConfig:
    """runtime=openenv: the executor with its episodes in flight (workers x batch_size)
    cut to the sessions the server takes (``executor.max_sessions``, else its advertised
    cap), announced in one line; the tables do not depend on either. A local executor
    gets the cap as its ``max_sessions`` and its workers resolved: every worker knows its
    sessions are within the cap (:class:`~collect.awm.remote_env.OpenEnvPool`'s
    ``within_cap``, what :mod:`collect.worker` gives it)."""
    ex = cfg.executor
    if cfg.runtime != "openenv":
        return ex
    cap, source, held = int(ex.max_sessions), "executor.max_sessions", 0
    if not cap:
        from collect.awm.remote_env import server_capacity

        info = server_capacity(cfg.env_url, cfg.env_token_env)
        if info is None:
            return ex
        cap, source = int(info["max_sessions"]), f"the server's max_sessions at {cfg.env_url}"
        held = int(info.get("active_sessions") or 0)
        if held:  # another client's sessions: ours get what is free, and may still wait
            cap, source = max(1, cap - held), f"{source} less {held} held by other clients"
    if ex.kind == "ray":  # how many tasks run at once is Ray's: the batch alone is cut
        batch = min(ex.batch_size, cap)
        if batch != ex.batch_size:
            _say(f"collect: {batch} episodes in flight per Ray task: {source} is {cap}")
        return dataclasses.replace(ex, batch_size=batch)
    asked = 1 if inline else resolve_workers(ex, n_tasks)
    workers = min(asked, cap)
    batch = min(ex.batch_size, max(1, cap // workers))
    if (workers, batch) != (asked, ex.batch_size):
        _say(f"collect: {batch} episodes in flight x {workers} worker(s): {source} is {cap}")
    # max_sessions tells the workers their sessions alone are within the cap (a wait for a
    # session cannot deadlock): not so while another client holds some (0: not known)
    return dataclasses.replace(
        ex, workers=workers, batch_size=batch, max_sessions=0 if held else cap
    )


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _run(
    cfg: CollectConfig,
    plan: ShardPlan,
    store: ShardStore,
    todo: list[int],
    partial: dict[int, list[int]],
    actor: Actor | None,
    help_policy: HelpPolicy | None,
) -> dict[str, JSON]:
    """Run the shards ``todo`` of ``plan`` (of those in ``partial``, only the episodes it
    names) and write each into ``store`` as it ends; Ctrl-C stops them
    (:func:`~collect.executors.execute`) and says what was kept. Returns the runtime's
    counts: ``reruns``, ``capacity_retries``, ``lost_error`` (the first lost episode's)."""
    shards = plan.shards
    done_eps = sum(len(shards[i]) for i in set(range(len(shards))) - set(todo))
    done_eps += sum(len(shards[i]) - len(ids) for i, ids in partial.items())
    if todo and (len(todo) < len(shards) or partial):
        print(
            f"resuming {cfg.out}: reusing {len(shards) - len(todo) + len(partial)} of "
            f"{len(shards)} shards ({done_eps} episodes)",
            flush=True,
        )
    if cfg.progress and todo:
        from helpdp.cliconf.progress import announce_episodes

        announce_episodes("collect", len(plan.specs) - done_eps, cfg.actor)
    bar = _Progress(len(plan.specs), done_eps, cfg.progress)
    counts: dict[str, JSON] = {"reruns": 0, "capacity_retries": 0, "lost_error": ""}

    def on_episode(log) -> None:
        ep = log.episode
        helps = sum(s["action"] != 0 for s in log.steps)
        bar.add(1, int(ep["success"]), len(log.steps), helps, int(ep["valid"]))

    inline = cfg.executor.kind == "local" and (
        actor is not None
        or help_policy is not None
        or resolve_workers(cfg.executor, len(todo)) == 1
    )
    executor = _fit_sessions(cfg, len(todo), inline) if todo else cfg.executor
    run_cfg = dataclasses.replace(cfg, executor=executor)

    def on_result(res: ShardResult) -> None:
        if res.blobs:
            if res.index in partial:
                store.fill(res.index, res.blobs, res.lost, res.criteria_tokens)
            else:
                store.write(res.index, res.blobs, res.lost, res.criteria_tokens)
        counts["reruns"] += res.reruns
        counts["capacity_retries"] += res.capacity_retries
        counts["lost_error"] = counts["lost_error"] or res.lost_error
        if not inline:
            bar.add(res.episodes, res.successes, res.steps, res.help_steps, res.valid)

    def specs(i: int) -> list[EpisodeSpec]:
        if i not in partial:
            return shards[i]
        ids = set(partial[i])
        return [s for s in shards[i] if s.episode_id in ids]

    try:
        execute(
            run_shard,
            [
                ShardTask(i, specs(i), run_cfg, plan.fingerprint)
                for i in run_order(todo, shards, cfg.executor.order)
            ],
            executor,
            on_result,
            inline_kwargs={"actor": actor, "help_policy": help_policy, "on_episode": on_episode},
            force_inline=inline,
        )
    except KeyboardInterrupt:
        kept = sum(store.present(i) for i in range(len(shards)))
        raise Interrupted(
            f"{kept} of {len(shards)} shards kept in {store.dir}; rerun the same command to resume"
        ) from None
    finally:
        bar.close()
        close_workers()
    return counts


def collect_demo(out: str | Path, overrides: list[str] | None = None) -> CollectResult:
    """The demo dataset (``python -m collect out=DIR``): the shipped worlds, the simulated
    actor, the oracle, the schedule of Min et al. (2025). Deterministic: a rerun into a fresh
    directory gives byte-identical Parquet files. ``overrides``: extra Hydra overrides."""
    cfg = collect_config([f"out={out}", *(overrides or [])])
    return collect(cfg)
