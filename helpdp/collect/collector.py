"""The one-pass collector (paper Sec. 5.3, "Transition Model Collection").

Runs the base actor on the tasks with interventions triggered at random
(:mod:`helpdp.collect.schedule`), once, and writes a dataset directory as the contract
says (``manifest.json``, ``states.parquet``, ``transitions.parquet``) plus the raw
episodes (``episodes.parquet``, ``steps.parquet``; docs/data-format.md)::

    python -m helpdp.collect out=DIR                    # the demo: shipped worlds, simulated actor, oracle
    python -m helpdp.collect out=DIR collect/actor=openai actor.base_url=http://host:8000/v1 actor.model=M
    python -m helpdp.collect out=DIR collect/interventions=oracle_expert   # two interventions

Work is split into shards (:mod:`helpdp.collect.shards`) run by an executor
(:mod:`helpdp.collect.executors`); a rerun of the same command skips finished shards.
Every field is declared and documented once, in the dataclasses of this module
and of the modules they name; ``python -m helpdp.collect --help`` lists them all.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from helpdp.cliconf import Interrupted, compose_config, run_app, to_dict
from helpdp.cliconf import as_config as _as_config
from helpdp.cliconf import doc_field as _f
from helpdp.collect.actors import (
    ActorConfig,
    LenientActor,
    SimulatedActorConfig,
    actor_config,
    actor_name,
    build_actor,
    check_actor,
    register_actor_schemas,
)
from helpdp.collect.awm.clock import WorldClock, clock_field
from helpdp.collect.awm.dataset import AWMDataset
from helpdp.collect.awm.env import EnvConfig, EnvPool
from helpdp.collect.awm.sandbox import COMMAND_ERRORS, check_isolation
from helpdp.collect.awm.sandbox.rmtree import remove_tree
from helpdp.collect.executors import ExecutorConfig, execute, resolve_workers
from helpdp.collect.interventions import INTERVENTION_KINDS, InterventionConfig, build_interventions
from helpdp.collect.policy import evaluation_line
from helpdp.collect.rollout import RunContext, TextRenderer, episode_tables, run_episodes
from helpdp.collect.schedule import (
    EpisodeSpec,
    ScheduleConfig,
    SplitConfig,
    build_schedule,
    shard_episodes,
)
from helpdp.collect.shards import ShardStore, aggregate, table_bytes
from helpdp.collect.statekey import make_keys
from helpdp.collect.worlds import SHIPPED_LABEL, WORLDS_DIR
from helpdp.contract import build_manifest
from helpdp.data import write_dataset
from helpdp.policies import TablePolicy

__all__ = [
    "CollectConfig",
    "CollectResult",
    "ShardTask",
    "TextConfig",
    "collect",
    "collect_config",
    "collect_demo",
    "main",
    "plan_episodes",
    "run_shard",
]

REPO = Path(__file__).resolve().parents[1]


def _default_env() -> EnvConfig:
    env = EnvConfig()
    env.expert_enabled = False
    return env


@dataclass
class TextConfig:
    """The ``text`` of a state: the rendered history a PRM or helper model is given."""

    max_tokens: int = _f(
        2048, "token budget of a state's text: the task plus the latest turns (0: all)"
    )
    tokenizer: Any = _f(
        None,
        "Hugging Face tokenizer (local id or directory) counting tokens; null: ceil(chars / 4)",
    )


@dataclass
class CollectConfig:
    """`python -m helpdp.collect out=DIR`: collect transitions of an actor with random interventions."""

    out: str = _f("outputs/collect", "output dataset directory (shards/ inside while collecting)")
    worlds: Any = _f(None, "AWM-format directory of the scenarios; null: the shipped demo worlds")
    actor: Any = _f(
        SimulatedActorConfig(),
        "the agent being taught: the config class of its kind (helpdp/collect/actors.py), selected by "
        "the config group collect/actor=simulated|openai|hf|vllm",
    )
    interventions: dict[str, InterventionConfig] = field(
        default_factory=lambda: {"oracle": InterventionConfig()},
        metadata={
            "help": "name -> intervention, in action order (action k = the k-th; config group "
            "collect/interventions)"
        },
    )
    schedule: ScheduleConfig = _f(
        ScheduleConfig(), "tasks, trigger probabilities, seeds (group collect/schedule)"
    )
    split: SplitConfig = _f(SplitConfig(), "train/validation/test split of the tasks")
    state_key: str = _f(
        "history",
        "history: a state is the task and its canonical history (a tree); db: the task, a "
        "digest of the database and the last observation (same world states merge); db_help: "
        "db plus the age of the latest expert message the actor remembers (help_window)",
    )
    help_window: int = _f(
        3,
        "state_key=db_help: turns an expert's message stays in the state (its age, 1 = the "
        "previous turn); older messages count as forgotten. Set it to how long the actor's "
        "behaviour changes after advice",
    )
    text: TextConfig = _f(TextConfig(), "state texts")
    env: EnvConfig = _f(
        _default_env(), "episode rules, sandbox limits, rewards (helpdp/collect/awm/env.py)"
    )
    runtime: str = _f(
        "local",
        "where episodes run: local (sandboxed app workers in this process) or openenv (an "
        "OpenEnv AWM server at env_url, e.g. OpenEnv's container or python -m "
        "helpdp.collect.awm.openenv_server; tasks and solutions still come from worlds; "
        "docs/openenv.md)",
    )
    env_url: str = _f("", "runtime=openenv: the server's URL, e.g. http://HOST:8000")
    env_token_env: str = _f(
        "OPENENV_AWM_TOKEN",
        "runtime=openenv: name of the environment variable holding the server's bearer "
        "token (unset or empty: none is sent)",
    )
    executor: ExecutorConfig = _f(ExecutorConfig(), "processes, shards, Ray")
    clock: str = clock_field()
    gamma: float = _f(1.0, "discount written to the manifest")
    invalid_episodes: str = _f(
        "count",
        "count: episodes without a valid verdict (server errors, verifier failures) count as "
        "failures in the tables; skip: they are listed in episodes.parquet only",
    )
    overwrite: bool = _f(False, "start over when out/ holds shards of a different collection")
    keep_shards: bool = _f(
        True, "keep out/shards after aggregating (a rerun then only re-aggregates)"
    )
    progress: bool = _f(True, "show a progress bar (stderr)")
    policy: Any = _f(
        None,
        "evaluate a help policy: the out= directory of `python -m helpdp.search` (solved on data "
        "collected with the same state_key); the expert is called where it says, not at random, "
        "and states it never saw get nohelp. Use fresh seeds and one probability in schedule",
    )


@dataclass
class ShardTask:
    """One unit of work: shard ``index``'s episodes under ``config``."""

    index: int
    specs: list[EpisodeSpec]
    config: CollectConfig
    fingerprint: str


@dataclass
class ShardResult:
    index: int
    blobs: dict[str, bytes]
    episodes: int
    successes: int
    steps: int
    help_steps: int


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

    def line(self) -> str:
        s = self.summary
        return (
            f"wrote {self.out}: {self.episodes} episodes, {self.steps} steps, {self.states} states, "
            f"{self.transitions} transitions; success {s['success_rate']:.3f}, help rate "
            f"{s['help_rate']:.3f}, server errors {s['server_errors']}; {self.shards_run}/"
            f"{self.shards_total} shards run in {self.seconds:.1f} s"
        )


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------


def as_config(config: Any) -> CollectConfig:
    """A :class:`CollectConfig` from itself, an OmegaConf node or a plain dict (an
    ``interventions`` given replaces the default oracle)."""
    if isinstance(config, CollectConfig):
        actor = actor_config(config.actor)
        return config if actor is config.actor else dataclasses.replace(config, actor=actor)
    data = to_dict(config)
    actor = actor_config(data.pop("actor", None))  # its kind picks its class
    cfg = _as_config(CollectConfig, data, instance=True)
    cfg.actor = actor
    return cfg


def collect_config(overrides: list[str] | None = None) -> CollectConfig:
    """The configuration ``python -m helpdp.collect`` would use with these overrides (Hydra compose)."""
    return as_config(compose_config("collect", list(overrides or []), node=_schema_node()))


def _config_dict(cfg: CollectConfig) -> dict[str, Any]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)


def _worlds_dir(cfg: CollectConfig) -> Path:
    return Path(cfg.worlds) if cfg.worlds else WORLDS_DIR


def source_config(cfg: CollectConfig) -> dict[str, Any]:
    """The config as recorded in the manifest: no output or scratch paths, shipped worlds by name."""
    d = _config_dict(cfg)
    d.pop("out", None)
    d["worlds"] = str(cfg.worlds) if cfg.worlds else SHIPPED_LABEL
    d["env"]["work_root"] = None
    for key in ("overwrite", "progress", "keep_shards"):
        d.pop(key, None)
    if d.get("runtime") == "local":  # local collections record no runtime (as before it)
        for key in ("runtime", "env_url", "env_token_env"):
            d.pop(key, None)
    if d.get("policy") is None:
        d.pop("policy", None)  # collections with random help record no policy
    return d


def _fingerprint_config(cfg: CollectConfig) -> dict[str, Any]:
    """What determines the shards' content (not how they are run)."""
    d = source_config(cfg)
    for key in ("executor", "invalid_episodes", "gamma"):
        d.pop(key, None)
    d["shard_size"] = cfg.executor.shard_size
    d["env"].pop("verifier_workers", None)
    plumbing = ("timeout_s", "retries", "concurrency", "api_key_env")
    for node in [d["actor"], *d["interventions"].values()]:
        for key in plumbing:
            node.pop(key, None)
    return d


def _validate(cfg: CollectConfig) -> None:
    make_keys(cfg.state_key, cfg.help_window)  # names a bad state_key or help_window
    if cfg.invalid_episodes not in ("count", "skip"):
        raise ValueError(f"invalid_episodes must be count or skip, got {cfg.invalid_episodes!r}")
    if not 0 < float(cfg.gamma) <= 1:
        raise ValueError(f"gamma must lie in (0, 1], got {cfg.gamma}")
    if cfg.executor.batch_size < 1:
        raise ValueError("executor.batch_size must be >= 1")
    check_actor(cfg.actor)
    for name, iv in cfg.interventions.items():
        if iv.kind not in INTERVENTION_KINDS:
            raise ValueError(f"interventions.{name}.kind must be one of {INTERVENTION_KINDS}")
        if iv.kind == "expert_llm" and not (iv.base_url and iv.model):
            raise ValueError(f"interventions.{name}: expert_llm needs base_url and model")
    if cfg.runtime not in ("local", "openenv"):
        raise ValueError(f"runtime must be local or openenv, got {cfg.runtime!r}")
    if cfg.runtime == "openenv":
        if not str(cfg.env_url).startswith(("http://", "https://", "ws://", "wss://")):
            raise ValueError(f"runtime=openenv needs env_url=http://HOST:PORT, got {cfg.env_url!r}")
        if make_keys(cfg.state_key, cfg.help_window).needs_digest:
            raise ValueError(
                f"state_key={cfg.state_key} needs database digests, which an OpenEnv AWM "
                "server does not offer: use state_key=history or runtime=local"
            )
        return  # the server confines the worlds' code, not this process
    _scratch_root(cfg)  # a configured work_root that is not ours alone is refused up front
    check_isolation(cfg.env.sandbox)  # refused here, once, not in every worker process
    check_isolation(cfg.env.verifier_sandbox)


# ---------------------------------------------------------------------------
# planning
# ---------------------------------------------------------------------------


def runnable_tasks(cfg: CollectConfig) -> tuple[list[tuple[str, int]], list[str]]:
    """``(scenario, task_idx)`` pairs that can run, and why others were left out."""
    dataset = AWMDataset(_worlds_dir(cfg))
    wanted = cfg.schedule.scenarios
    names = dataset.names()
    if wanted:
        unknown = [n for n in wanted if n not in dataset]
        if unknown:
            raise ValueError(f"schedule.scenarios: {unknown[0]!r} is not in {_worlds_dir(cfg)}")
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


def plan_episodes(cfg: CollectConfig) -> list[EpisodeSpec]:
    """Every episode the collection runs (see :func:`helpdp.collect.schedule.build_schedule`)."""
    tasks, _ = runnable_tasks(cfg)
    return build_schedule(tasks, len(cfg.interventions), cfg.schedule, cfg.split)


# ---------------------------------------------------------------------------
# workers
# ---------------------------------------------------------------------------


def _token_counter(name: Any):
    if not name:
        return None
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(name), local_files_only=True)
    return lambda s: len(tok(s, add_special_tokens=False)["input_ids"])


#: name prefix of a worker's private scratch directory: ``helpdp-collect-<pid>-<random>``
_SCRATCH_PREFIX = "helpdp-collect-"


def _private_dir_problem(st: os.stat_result) -> str | None:
    """Why a directory with this ``lstat`` result is not ours alone (None: it is)."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by us (uid {os.getuid()})"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return "is writable by every user (and not sticky)"
    return None


def _scratch_root(cfg: CollectConfig) -> Path:
    """The parent of the workers' private scratch directories: ``env.work_root``
    (created if missing; refused if it is a symlink, owned by another uid or
    world-writable), else tmpfs or /tmp (system directories, where each worker makes
    its own ``mkdtemp``)."""
    if not cfg.env.work_root:
        shm = Path("/dev/shm")
        return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    root = Path(cfg.env.work_root)
    with contextlib.suppress(FileExistsError):
        root.mkdir(parents=True, mode=0o700)
    problem = _private_dir_problem(os.lstat(root))
    if problem:
        raise ValueError(
            f"env.work_root={root} {problem}: refusing it as scratch space (another local "
            "user could swap the databases built there); use a directory you own"
        )
    return root


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: a dead worker's directory that could not be removed is renamed with this prefix
#: (reported once, then skipped by every later sweep)
_STALE_PREFIX = "helpdp-stale-"


def sweep_scratch(root: Path) -> int:
    """Remove the scratch directories of dead workers under ``root`` (killed runs, Ray
    workers stopped without cleanup); returns how many were removed. Only directories
    that are ours alone are touched (never a symlink or another user's entry). Never
    raises: removal cannot recurse (:func:`~helpdp.collect.awm.sandbox.rmtree.remove_tree`),
    and a tree it cannot remove (beyond its budgets, a mount point) is renamed
    ``helpdp-stale-...``, reported once on stderr, and skipped from then on."""
    removed = 0
    try:
        entries = list(root.glob(f"{_SCRATCH_PREFIX}*-*")) if root.is_dir() else []
    except OSError:
        return 0
    for d in entries:
        try:
            pid = int(d.name[len(_SCRATCH_PREFIX) :].split("-")[0])
            if _private_dir_problem(os.lstat(d)):
                continue
        except (ValueError, OSError):
            continue
        if pid == os.getpid() or _pid_alive(pid):
            continue
        gone = remove_tree(d)
        if gone.removed:
            removed += 1
            continue
        stale = d.with_name(_STALE_PREFIX + d.name)
        with contextlib.suppress(OSError):
            os.rename(d, stale)
        print(
            f"collect: warning: a dead worker's scratch directory could not be removed "
            f"({gone.error}); left as {stale if stale.exists() else d}, skipped from now on",
            file=sys.stderr,
        )
    return removed


class _Worker:
    """Environments, actor and interventions of one process (kept across shards)."""

    def __init__(self, cfg: CollectConfig, actor: Any = None, help_policy: Any = None):
        root = _scratch_root(cfg)
        sweep_scratch(root)
        # private (0700, ours, a fresh name): nobody else can plant or swap databases here
        self._scratch = Path(tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{os.getpid()}-", dir=root))
        env_cfg = dataclasses.replace(cfg.env, work_root=str(self._scratch))
        if cfg.runtime == "openenv":
            from helpdp.collect.awm.remote_env import OpenEnvPool

            self.pool = OpenEnvPool(
                cfg.env_url,
                _worlds_dir(cfg),
                env_cfg,
                scenarios=cfg.schedule.scenarios or None,
                token_env=cfg.env_token_env,
            )
        else:
            self.pool = EnvPool(
                _worlds_dir(cfg),
                env_cfg,
                scenarios=cfg.schedule.scenarios or None,
                clock=WorldClock.resolve(cfg.clock, _worlds_dir(cfg)),
            )
        self.own_actor = actor is None
        if actor is not None and getattr(cfg.actor, "call_format", "strict") == "lenient":
            actor = LenientActor(actor)  # the manifest's call_format is what the turns get
        self.actor = actor if actor is not None else build_actor(cfg.actor)
        self.interventions = build_interventions(cfg.interventions)
        self.ctx = RunContext(
            self.pool,
            self.interventions,
            make_keys(cfg.state_key, cfg.help_window),
            TextRenderer(cfg.text.max_tokens, _token_counter(cfg.text.tokenizer)),
            policy=help_policy
            if help_policy is not None
            else (TablePolicy.load(cfg.policy) if cfg.policy else None),
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


def _close_workers() -> None:
    while _WORKERS:
        _, w = _WORKERS.popitem()
        with contextlib.suppress(Exception):
            w.close()


atexit.register(_close_workers)


def run_shard(
    task: ShardTask, *, actor: Any = None, help_policy: Any = None, on_episode=None
) -> ShardResult:
    """Run one shard's episodes; its tables as Parquet bytes and its counts."""
    key = (
        f"{task.fingerprint}/{id(actor) if actor else ''}/{id(help_policy) if help_policy else ''}"
    )
    worker = _WORKERS.get(key)
    if worker is None:
        _close_workers()
        worker = _WORKERS[key] = _Worker(task.config, actor, help_policy)
    logs = run_episodes(
        task.specs, worker.actor, worker.ctx, batch_size=worker.batch_size, on_episode=on_episode
    )
    tables = episode_tables(logs, worker.names)
    steps = sum(len(lg.steps) for lg in logs)
    return ShardResult(
        task.index,
        {name: table_bytes(t) for name, t in tables.items()},
        len(logs),
        sum(bool(lg.episode["success"]) for lg in logs),
        steps,
        sum(1 for lg in logs for s in lg.steps if s["action"] != 0),
    )


# ---------------------------------------------------------------------------
# provenance
# ---------------------------------------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(cfg: CollectConfig) -> dict[str, str | None]:
    """Versions of what shaped the data."""
    names = ["helpdp", "numpy", "pyarrow", "duckdb", "httpx", "fastapi", "sqlalchemy", "hydra-core"]
    if cfg.actor.kind in ("hf", "vllm") or cfg.text.tokenizer:
        names += ["torch", "transformers"]
    if cfg.actor.kind == "vllm":
        names.append("vllm")
    if cfg.executor.kind == "ray":
        names.append("ray")
    if cfg.runtime == "openenv":
        names.append("openenv")
    out: dict[str, str | None] = {"python": platform.python_version()}
    out.update({n: _version(n) for n in names})
    if "os" in (cfg.env.sandbox.isolation, cfg.env.verifier_sandbox.isolation):
        from helpdp.collect.awm.sandbox.confine import IsolationUnavailable, probe

        try:
            tool, _, version = probe().partition(" ")
            out[tool] = version
        except IsolationUnavailable:
            pass
    return out


def git_sha() -> str | None:
    """The repository's commit, when this code runs from a git checkout."""
    try:
        r = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = r.stdout.strip()
    return sha if r.returncode == 0 and len(sha) == 40 else None


def summarize(tables: dict[str, pa.Table]) -> dict[str, Any]:
    """Counts and rates of a collection (deterministic: no times)."""
    ep = tables["episodes"]
    st = tables["steps"]
    n = ep.num_rows

    def total(values) -> int:
        return int(pc.sum(values).as_py() or 0) if len(values) else 0

    succ = total(ep["success"])
    helps = total(pc.not_equal(st["action"], 0))
    outcomes = ep.group_by("outcome").aggregate([("episode_id", "count")]).to_pylist()
    by_p = (
        ep.group_by("trigger_p")
        .aggregate([("success", "mean"), ("episode_id", "count"), ("expert_calls", "mean")])
        .sort_by("trigger_p")
        .to_pylist()
    )
    return {
        "episodes": n,
        "counted_episodes": total(ep["counted"]),
        "steps": st.num_rows,
        "states": tables["states"].num_rows,
        "transitions": tables["transitions"].num_rows,
        "success_rate": succ / n if n else 0.0,
        "help_rate": helps / st.num_rows if st.num_rows else 0.0,
        "server_errors": sum(
            o["episode_id_count"] for o in outcomes if o["outcome"] == "server_error"
        ),
        "outcomes": {
            o["outcome"]: o["episode_id_count"]
            for o in sorted(outcomes, key=lambda o: o["outcome"])
        },
        "by_trigger_p": [
            {
                "trigger_p": r["trigger_p"],
                "episodes": r["episode_id_count"],
                "success_rate": r["success_mean"],
                "expert_calls": r["expert_calls_mean"],
            }
            for r in by_p
        ],
    }


def _isolation(cfg: CollectConfig) -> dict[str, Any]:
    """What confined the dataset code (``source.isolation``): app and verifier workers."""
    from helpdp.collect.awm.sandbox import describe

    app, verifier = cfg.env.sandbox.isolation, cfg.env.verifier_sandbox.isolation
    out = {**describe(app), **({"verifier_mode": verifier} if verifier != app else {})}
    if app == "os":  # which totals bounded a worker here (a cgroup, or the fallback)
        from helpdp.collect.awm.sandbox.limits import describe as describe_limits

        lim = cfg.env.sandbox
        out["limits"] = describe_limits(lim.max_processes, lim.memory_mb, lim.run_dir_mb)
        out["limits"].update(
            tool_budget_s=cfg.env.tool_budget_s,
            fresh_app=cfg.env.fresh_app,
            reuse_shipped_apps=cfg.env.reuse_shipped_apps,
        )
    return out


def _runtime(cfg: CollectConfig) -> dict[str, Any]:
    """Where a ``runtime=openenv`` collection ran its episodes (``source.runtime``)."""
    return {"kind": "openenv", "env_url": cfg.env_url, "protocol": "OpenEnv AWM (MCP)"}


def manifest(
    cfg: CollectConfig,
    summary: dict[str, Any],
    skipped: list[str],
    clock: WorldClock,
    help_policy: Any = None,
) -> dict[str, Any]:
    """``manifest.json``: actions, gamma, format and the provenance in ``source``
    (:func:`helpdp.contract.build_manifest`)."""
    return build_manifest(
        ["nohelp", *cfg.interventions],
        gamma=float(cfg.gamma),
        source={
            "generator": "collect",
            "actor": actor_name(cfg.actor),
            "actor_kind": cfg.actor.kind,
            "interventions": {name: iv.kind for name, iv in cfg.interventions.items()},
            "state_key": cfg.state_key,
            **({"help_policy": help_policy.name} if help_policy is not None else {}),
            "clock": clock.describe(),
            "isolation": _isolation(cfg)
            if cfg.runtime == "local"
            else {"mode": "remote", "by": "the OpenEnv AWM server at runtime.env_url"},
            **({"runtime": _runtime(cfg)} if cfg.runtime == "openenv" else {}),
            "config": source_config(cfg),
            "versions": versions(cfg),
            "git_sha": git_sha(),
            "skipped_tasks": skipped,
            "summary": summary,
        },
    )


# ---------------------------------------------------------------------------
# the collection
# ---------------------------------------------------------------------------


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
    _validate(cfg)
    # One "now" for the whole run, resolved once: it is part of the shards' fingerprint,
    # so a resumed run keeps the recorded clock (a different one is refused).
    clock = WorldClock.resolve(cfg.clock, _worlds_dir(cfg))
    cfg = dataclasses.replace(cfg, clock=clock.iso())
    if (actor is not None or help_policy is not None) and cfg.executor.kind == "ray":
        raise ValueError("an actor or policy object runs in this process: use executor.kind=local")
    tasks, skipped = runnable_tasks(cfg)
    if not tasks:
        why = "; ".join(skipped[:5]) or f"{_worlds_dir(cfg)} holds no scenario with tasks"
        raise ValueError("no task can run: " + why)
    specs = build_schedule(tasks, len(cfg.interventions), cfg.schedule, cfg.split)
    if not specs:
        raise ValueError(
            f"the schedule is empty (no task in schedule.splits={cfg.schedule.splits})"
        )
    shards = shard_episodes(specs, cfg.executor.shard_size)
    fp_config = _fingerprint_config(cfg)
    if help_policy is not None:
        fp_config["help_policy"] = help_policy.name
    ids = hashlib.sha256(json.dumps([s.episode_id for s in specs]).encode()).hexdigest()
    fingerprint = hashlib.sha256(
        json.dumps({"config": fp_config, "episodes": ids}, sort_keys=True, default=str).encode()
    ).hexdigest()
    out = Path(cfg.out)
    store = ShardStore(out)
    store.prepare(
        {
            "fingerprint": fingerprint,
            "config": fp_config,
            "episodes": len(specs),
            "shards": len(shards),
            "episode_ids_sha256": ids,
        },
        overwrite=cfg.overwrite,
    )
    todo = [i for i in range(len(shards)) if not store.done(i)]
    done_eps = sum(len(shards[i]) for i in range(len(shards)) if i not in set(todo))
    if todo and len(todo) < len(shards):
        print(
            f"resuming {out}: reusing {len(shards) - len(todo)} of {len(shards)} shards "
            f"({done_eps} episodes)",
            flush=True,
        )
    bar = _Progress(len(specs), done_eps, cfg.progress)

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
            [ShardTask(i, shards[i], cfg, fingerprint) for i in todo],
            cfg.executor,
            on_result,
            inline_kwargs={"actor": actor, "help_policy": help_policy, "on_episode": on_episode},
            force_inline=inline,
        )
    except KeyboardInterrupt:
        kept = sum(store.done(i) for i in range(len(shards)))
        raise Interrupted(
            f"{kept} of {len(shards)} shards kept in {store.dir}; rerun the same command to resume"
        ) from None
    finally:
        bar.close()
        _close_workers()
    tables = aggregate(
        store.files("steps", len(shards)),
        store.files("states", len(shards)),
        store.files("episodes", len(shards)),
        count_invalid=cfg.invalid_episodes == "count",
    )
    summary = summarize(tables)
    # one atomic write through the contract, which loads the result with the loader
    # before it replaces anything (self-check: a writer bug fails here, naming the
    # file, column and row); out/ is this collection's (ShardStore checked the plan),
    # so its previous dataset is replaced and shards/ carried over
    write_dataset(
        out,
        manifest(cfg, summary, skipped, clock, help_policy),
        {name: tables[name] for name in ("states", "transitions", "episodes", "steps")},
        overwrite=True,
        check=True,
    )
    if not cfg.keep_shards:
        shutil.rmtree(store.dir, ignore_errors=True)
    return CollectResult(
        out,
        summary["episodes"],
        summary["steps"],
        summary["states"],
        summary["transitions"],
        len(todo),
        len(shards),
        time.perf_counter() - started,
        summary,
        skipped,
    )


def collect_demo(out: str | Path, overrides: list[str] | None = None) -> CollectResult:
    """The demo dataset (``python -m helpdp.collect out=DIR``): the shipped worlds, the simulated
    actor, the oracle, the paper's schedule. Deterministic: a rerun into a fresh
    directory gives byte-identical Parquet files. ``overrides``: extra Hydra overrides."""
    cfg = collect_config([f"out={out}", *(overrides or [])])
    return collect(cfg)


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


def _schema_node() -> CollectConfig:
    """What helpdp/conf/collect.yaml builds on: no interventions, so the group
    ``collect/interventions`` chosen names all of them (not those plus the oracle), and
    the bare :class:`~helpdp.collect.actors.ActorConfig`, into which ``collect/actor=KIND``
    merges its kind's class (``collect/actor_schema/KIND``, registered here)."""
    register_actor_schemas()
    return CollectConfig(interventions={}, actor=ActorConfig())


HELP = (
    "",
    "Config groups: collect/actor=simulated|openai|hf|vllm, "
    "collect/interventions=oracle|expert_llm|oracle_expert, collect/schedule=paper|quick",
)


def run_cli(cfg: Any) -> CollectResult:
    """What ``python -m helpdp.collect`` does with its composed config."""
    result = collect(cfg)
    if result.skipped:
        print(f"left out {len(result.skipped)} tasks: {'; '.join(result.skipped[:3])}", flush=True)
    print(result.line(), flush=True)
    if cfg.policy:
        episodes = pd.read_parquet(Path(cfg.out) / "episodes.parquet")
        steps = pd.read_parquet(Path(cfg.out) / "steps.parquet", columns=["state_id"])
        print(evaluation_line(TablePolicy.load(cfg.policy), episodes, steps), flush=True)
    return result


def main() -> None:
    """``python -m helpdp.collect``."""
    run_app(
        "helpdp.collect",
        CollectConfig,
        run_cli,
        config_name="collect",
        node=_schema_node(),
        usage="python -m helpdp.collect out=DIR [KEY=VALUE ...]",
        extra_help=HELP,
        errors=COMMAND_ERRORS,
    )
