"""The configuration of a collection (``python -m collect``): :class:`CollectConfig`
and the parts it names, how it is composed from the command line, checked before
anything runs, and recorded in the manifest.

Every field is declared and documented once, in the dataclasses of this module and of
the modules they name; ``python -m collect --help`` lists them all.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collect.actors import (
    ACTOR_CONFIGS,
    ActorConfig,
    SimulatedActorConfig,
    actor_config,
    check_actor,
    register_actor_schemas,
)
from collect.awm.clock import clock_field
from collect.awm.env import EnvConfig
from collect.awm.sandbox import check_isolation
from collect.executors import ORDERS, ExecutorConfig
from collect.interventions import INTERVENTION_KINDS, InterventionConfig
from collect.schedule import ScheduleConfig, SplitConfig, Stage2Config, stage2_design
from collect.scratch import scratch_root
from collect.statekey import make_keys
from collect.worlds import SHIPPED_LABEL, WORLDS_DIR
from helpdp.cliconf import as_config as _as_config
from helpdp.cliconf import compose_config, to_dict
from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON

__all__ = [
    "CollectConfig",
    "TextConfig",
    "as_config",
    "collect_config",
    "config_differences",
    "schema_node",
    "source_config",
    "validate",
    "worlds_dir",
]


#: executor fields that change how a run waits for and retries its runtime, or the order
#: its shards run in, never its tables: not recorded in the manifest
RUN_ONLY_EXECUTOR_FIELDS = ("episode_retries", "max_sessions", "capacity_wait_s", "order")
#: the numeric ones among them (each >= 0)
_NON_NEGATIVE_EXECUTOR_FIELDS = ("episode_retries", "max_sessions", "capacity_wait_s")


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
    """`python -m collect out=DIR`: collect transitions of an actor with random interventions."""

    out: str = _f("outputs/collect", "output dataset directory (shards/ inside while collecting)")
    worlds: Any = _f(None, "AWM-format directory of the scenarios; null: the shipped demo worlds")
    actor: Any = _f(
        SimulatedActorConfig(),
        "the agent being taught: the config class of its kind (collect/actors.py), selected by "
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
    stage2: Stage2Config = _f(
        Stage2Config(),
        "stage 2 of the two-stage design: stage2.base=POLICY runs that policy on every task "
        "once per seed and randomises help only at trigger states (replaces the grid of "
        "schedule.probabilities; docs/collect.md)",
    )
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
        _default_env(), "episode rules, sandbox limits, rewards (collect/awm/env.py)"
    )
    runtime: str = _f(
        "local",
        "where episodes run: local (sandboxed app workers in this process) or openenv (an "
        "OpenEnv AWM server at env_url, e.g. OpenEnv's container or python -m "
        "collect.awm.openenv_server; tasks and solutions still come from worlds; "
        "docs/openenv.md)",
    )
    env_url: str = _f("", "runtime=openenv: the server's URL, e.g. http://HOST:8000")
    env_token_env: str = _f(
        "OPENENV_AWM_TOKEN",
        "runtime=openenv: name of the environment variable holding the server's bearer "
        "token (unset or empty: none is sent)",
    )
    include_trivial_tasks: bool = _f(
        False,
        "keep the tasks whose code-mode verifier says complete on the untouched database "
        "(python -m collect.awm.check's do-nothing check, run on every task before the plan "
        "is made: one verifier run per task and final answer it tries; runtime=local only). "
        "false: they are left out, named in one line and in the manifest's skipped_tasks",
    )
    executor: ExecutorConfig = _f(ExecutorConfig(), "processes, shards, Ray")
    clock: str = clock_field()
    gamma: float = _f(1.0, "discount written to the manifest")
    invalid_episodes: str = _f(
        "count",
        "count: episodes without a valid verdict (server errors, verifier failures) count as "
        "failures in the tables; skip: they are listed in episodes.parquet only",
    )
    overwrite: bool = _f(
        False,
        "start over: run every shard again and replace the dataset (out/ may hold another "
        "collection); files collect did not write are kept",
    )
    keep_shards: bool = _f(
        True, "keep out/shards after aggregating (a rerun then only re-aggregates)"
    )
    progress: bool = _f(True, "show a progress bar (stderr)")
    policy: Any = _f(
        None,
        "evaluate a help policy: the out= directory of `python -m helpdp.search` (solved on data "
        "collected with the same state_key; states it never saw get nohelp) or a selected.json "
        "of `python -m helpdp.select`; the expert is called where it says, not at random. A "
        "list of them is the candidates design (collect/schedule=candidates): each episode runs "
        "one, drawn uniformly by episode id, and each is measured on its own episodes. Use "
        "fresh seeds and one probability in schedule",
    )


def as_config(config: object) -> CollectConfig:
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
    """The configuration ``python -m collect`` would use with these overrides (Hydra compose)."""
    return as_config(compose_config("collect", list(overrides or []), node=schema_node()))


def _config_dict(cfg: CollectConfig) -> dict[str, JSON]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)


def worlds_dir(cfg: CollectConfig) -> Path:
    """The AWM directory of the scenarios: ``worlds``, else the shipped demo worlds."""
    return Path(cfg.worlds) if cfg.worlds else WORLDS_DIR


#: env options added after collections were shipped, each with the value that is the
#: behaviour before it: at that value :func:`source_config` leaves it out, so the manifests
#: and shard fingerprints of those collections stay as they were (resumable, mergeable)
LATER_ENV_OPTIONS: dict[str, JSON] = {
    "response_layout": "app",
    "tool_order": "methods",
    "verify_semantics": "helpdp",
}


def source_config(cfg: CollectConfig) -> dict[str, JSON]:
    """The config as recorded in the manifest: no output or scratch paths, shipped worlds by name."""
    d = _config_dict(cfg)
    d.pop("out", None)
    d["worlds"] = str(cfg.worlds) if cfg.worlds else SHIPPED_LABEL
    d["env"]["work_root"] = None
    for key in ("overwrite", "progress", "keep_shards"):
        d.pop(key, None)
    for key in RUN_ONLY_EXECUTOR_FIELDS:  # how a run waits and retries: not its data
        d["executor"].pop(key, None)
    # a server's URL is where it ran, not what ran (a port changes across restarts; the
    # manifest's source.runtime keeps it): a resume may use another one
    d.pop("env_url", None)
    if d.get("runtime") == "local":  # local collections record no runtime (as before it)
        for key in ("runtime", "env_token_env"):
            d.pop(key, None)
    for key, before in LATER_ENV_OPTIONS.items():
        if d["env"].get(key, before) == before:
            d["env"].pop(key, None)  # the old behaviour: recorded (and fingerprinted) as before
    if not (d.get("actor") or {}).get("context_window", 1):
        d["actor"].pop("context_window")  # an unchecked window: recorded as before the field
    if not d.get("include_trivial_tasks"):
        d.pop("include_trivial_tasks", None)  # the default: recorded as before the field
    if d["schedule"].get("task_ids") is None:
        d["schedule"].pop("task_ids", None)  # no task-id filter: recorded as before the field
    if d.get("policy") is None:
        d.pop("policy", None)  # collections with random help record no policy
    if (d.get("stage2") or {}).get("base") is None:
        d.pop("stage2", None)  # the grid records no stage 2 (as before it)
    elif d["stage2"].get("max_randomised") is None:
        d["stage2"].pop("max_randomised", None)  # K = null: recorded as before K existed
    return d


@dataclass(frozen=True)
class _Named:
    """The schema of a dict of named configs (``interventions``): the names are the
    user's (free-form), each value is a ``value``."""

    value: type


@functools.cache
def _hints(schema: type) -> dict[str, object]:
    return typing.get_type_hints(schema)


def _field_schema(schema: type, name: str, a: JSON, b: JSON) -> type | _Named | None:
    """The schema of the values ``a`` and ``b`` two configs record for field ``name``
    of the config class ``schema``: a config class, :class:`_Named`, or None (free-form:
    a dict, list or ``Any`` value, or a field this code does not declare)."""
    tp = _hints(schema).get(name)
    if issubclass(schema, CollectConfig) and name == "actor":  # the class of its kind
        kinds = {v.get("kind") if isinstance(v, dict) else None for v in (a, b)}
        return ACTOR_CONFIGS.get(kinds.pop()) if len(kinds) == 1 else None
    args = typing.get_args(tp)
    if typing.get_origin(tp) is dict and args and dataclasses.is_dataclass(args[-1]):
        return _Named(args[-1])
    return tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None


def config_differences(
    a: JSON,
    b: JSON,
    schema: type | _Named | None = CollectConfig,
    where: str = "",
    absent: list[str] | None = None,
) -> list[str]:
    """The fields where two recorded configs (:func:`source_config`; ``schema`` the config
    class they are, None: free-form values) differ, as dotted paths.

    With ``absent``, a field of a config class that only one of the two records (a code
    version added or removed it) is appended there instead of being a difference: the
    collector's resume rule (collect.publish) and what collect.merge lists as unchecked.
    Only a config class's own fields are: below a free-form value (a dict, list or
    ``Any`` field: a policy, a tokenizer, chat-template arguments, sampler options, the
    names of the interventions) a key only one records is a difference, like any other."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [] if a == b else [where]
    declared = isinstance(schema, type)  # the keys are a config class's fields
    out: list[str] = []
    for k in sorted(set(a) | set(b), key=str):
        path = f"{where}.{k}" if where else str(k)
        if (k in a) != (k in b):
            (absent if declared and absent is not None else out).append(path)
            continue
        sub: type | _Named | None = None
        if isinstance(schema, _Named):
            sub = schema.value
        elif isinstance(schema, type):
            sub = _field_schema(schema, k, a[k], b[k])
        out += config_differences(a[k], b[k], sub, path, absent)
    return out


def schema_node() -> CollectConfig:
    """What conf/collect.yaml builds on: no interventions, so the group
    ``collect/interventions`` chosen names all of them (not those plus the oracle), and
    the bare :class:`~collect.actors.ActorConfig`, into which ``collect/actor=KIND``
    merges its kind's class (``collect/actor_schema/KIND``, registered here)."""
    register_actor_schemas()
    return CollectConfig(interventions={}, actor=ActorConfig())


def validate(cfg: CollectConfig) -> None:
    """Refuse a config that cannot run, before anything is built or written."""
    make_keys(cfg.state_key, cfg.help_window)  # names a bad state_key or help_window
    if cfg.invalid_episodes not in ("count", "skip"):
        raise ValueError(f"invalid_episodes must be count or skip, got {cfg.invalid_episodes!r}")
    if not 0 < float(cfg.gamma) <= 1:
        raise ValueError(f"gamma must lie in (0, 1], got {cfg.gamma}")
    if cfg.executor.batch_size < 1:
        raise ValueError("executor.batch_size must be >= 1")
    if cfg.executor.order not in ORDERS:
        raise ValueError(f"executor.order must be one of {ORDERS}, got {cfg.executor.order!r}")
    for key in _NON_NEGATIVE_EXECUTOR_FIELDS:
        if not float(getattr(cfg.executor, key)) >= 0:
            raise ValueError(f"executor.{key} must be >= 0, got {getattr(cfg.executor, key)}")
    check_actor(cfg.actor)
    if stage2_design(cfg.stage2, cfg.schedule.seed) is not None and cfg.policy is not None:
        raise ValueError("stage2.base and policy exclude each other: stage 2 is its own policy")
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
    scratch_root(cfg.env.work_root)  # a work_root that is not ours alone: refused up front
    check_isolation(cfg.env.sandbox)  # refused here, once, not in every worker process
    check_isolation(cfg.env.verifier_sandbox)
