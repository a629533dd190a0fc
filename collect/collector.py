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
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collect.awm.clock import WorldClock
from collect.config import CollectConfig, as_config, collect_config, validate, worlds_dir
from collect.executors import execute, resolve_workers
from collect.plan import plan_shards
from collect.publish import check_out, publish
from collect.shards import OutputLock, ShardStore
from collect.worker import ShardResult, ShardTask, close_workers, run_shard
from helpdp.cliconf import Interrupted

__all__ = ["CollectConfig", "CollectResult", "collect", "collect_config", "collect_demo"]


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
    summary: dict[str, Any]
    skipped: list[str] = field(default_factory=list)
    #: what publishing said about the previous dataset in ``out`` (replaced, kept)
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        s = self.summary
        return (
            f"wrote {self.out}: {self.episodes} episodes, {self.steps} steps, {self.states} states, "
            f"{self.transitions} transitions; success {s['success_rate']:.3f}, help rate "
            f"{s['help_rate']:.3f}, server errors {s['server_errors']}; {self.shards_run}/"
            f"{self.shards_total} shards run in {self.seconds:.1f} s"
        )


class _Progress:
    def __init__(self, total: int, initial: int, enabled: bool):
        self.bar = None
        self.episodes = self.successes = self.steps = self.helps = 0
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total, initial=initial, unit="ep", desc="collect", dynamic_ncols=True,
                file=sys.stderr, smoothing=0.1,
            )  # fmt: skip

    def add(self, episodes: int, successes: int, steps: int, helps: int) -> None:
        self.episodes += episodes
        self.successes += successes
        self.steps += steps
        self.helps += helps
        if self.bar is not None:
            self.bar.update(episodes)
            self.bar.set_postfix(
                success=f"{self.successes / max(1, self.episodes):.2f}",
                help=f"{self.helps / max(1, self.steps):.2f}",
                refresh=False,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _reusable(store: ShardStore, n_shards: int) -> list[int]:
    """The shards to run: those not written, and the written ones that fail their check
    (:meth:`ShardStore.problem`), removed and announced in one line on stderr."""
    todo, bad = [], []
    for i in range(n_shards):
        if not store.present(i):
            todo.append(i)
            continue
        problem = store.problem(i)
        if problem is not None:
            store.discard(i)
            todo.append(i)
            bad.append(f"{i:06d} ({problem})")
    if bad:
        more = f", and {len(bad) - 3} more" if len(bad) > 3 else ""
        print(
            f"collect: running {len(bad)} shard(s) of {store.dir} again: "
            f"{', '.join(bad[:3])}{more}",
            file=sys.stderr,
            flush=True,
        )
    return sorted(todo)


def collect(config: Any, *, actor: Any = None, help_policy: Any = None) -> CollectResult:
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
    plan = plan_shards(cfg, None if help_policy is None else help_policy.name)
    with OutputLock(cfg.out):
        check_out(cfg)
        store = ShardStore(cfg.out)
        store.prepare(plan.record(), overwrite=cfg.overwrite)
        todo = _reusable(store, len(plan.shards))
        _run(cfg, plan, store, todo, actor, help_policy)
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
    )


def _run(
    cfg: CollectConfig, plan: Any, store: ShardStore, todo: list[int], actor: Any, help_policy: Any
) -> None:
    """Run the shards ``todo`` of ``plan`` and write each into ``store`` as it ends; Ctrl-C
    stops them (:func:`~collect.executors.execute`) and says what was kept."""
    shards = plan.shards
    done_eps = sum(len(shards[i]) for i in set(range(len(shards))) - set(todo))
    if todo and len(todo) < len(shards):
        print(
            f"resuming {cfg.out}: reusing {len(shards) - len(todo)} of {len(shards)} shards "
            f"({done_eps} episodes)",
            flush=True,
        )
    bar = _Progress(len(plan.specs), done_eps, cfg.progress)

    def on_episode(log) -> None:
        bar.add(
            1, int(log.episode["success"]), len(log.steps), sum(s["action"] != 0 for s in log.steps)
        )

    inline = cfg.executor.kind == "local" and (
        actor is not None
        or help_policy is not None
        or resolve_workers(cfg.executor, len(todo)) == 1
    )

    def on_result(res: ShardResult) -> None:
        store.write(res.index, res.blobs)
        if not inline:
            bar.add(res.episodes, res.successes, res.steps, res.help_steps)

    try:
        execute(
            run_shard,
            [ShardTask(i, shards[i], cfg, plan.fingerprint) for i in todo],
            cfg.executor,
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


def collect_demo(out: str | Path, overrides: list[str] | None = None) -> CollectResult:
    """The demo dataset (``python -m collect out=DIR``): the shipped worlds, the simulated
    actor, the oracle, the schedule of Min et al. (2025). Deterministic: a rerun into a fresh
    directory gives byte-identical Parquet files. ``overrides``: extra Hydra overrides."""
    cfg = collect_config([f"out={out}", *(overrides or [])])
    return collect(cfg)
