"""Which episodes a collection runs: tasks, splits, trigger probabilities, seeds.

Pure logic, no I/O. The schedule is the paper's (Sec. 5.3): every task is run
once per (trigger-probability vector, seed); at each turn of an episode, before
the actor generates, every intervention ``k`` is triggered with its probability
``p_k`` (independent draws; when several fire, one of them is chosen uniformly,
since a step takes one action). Everything random is drawn from generators
seeded by ``(schedule.seed, task, probability vector, seed)`` and the turn
index, so a schedule and its draws are the same on every run and machine,
whatever the order, batching or sharding of the episodes.

Stage 2 (:class:`Stage2Config`, ``stage2.base=...``): instead of the grid, every task
runs once per seed under a base help policy whose decision is randomised only at
trigger states (:func:`stage2_design`, ``helpdp.policies.TriggerRandomised``): help
with the known probability ``q`` where one of the events fires (with
``max_randomised`` = K: at the first K such states of an episode), the base's decision
elsewhere. Its episodes record the design and each step its probability of help, so
that off-policy evaluation weights a merge of both stages as one mixture.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON
from helpdp.policies import TablePolicy, TriggerRandomised, build_policy
from helpdp.splits import SPLITS, _digest, stable_int64

__all__ = [
    "SPLITS",
    "EpisodeSpec",
    "ScheduleConfig",
    "SplitConfig",
    "Stage2Config",
    "build_schedule",
    "design_spec",
    "draw_action",
    "episode_rng",
    "shard_episodes",
    "split_tasks",
    "stable_int64",
    "stage2_design",
    "task_id",
    "trigger_vectors",
]


@dataclass
class ScheduleConfig:
    """Trigger probabilities and seeds of every task's episodes (the paper's grid by default)."""

    probabilities: list[Any] = _f(
        [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0],
        "trigger probabilities; an entry is one number (the same p for every intervention: "
        "pairs .1/.1, .3/.3, ... with two) or a list with one p per intervention",
    )
    seeds: list[int] = _f([0, 1, 2], "episodes per (task, probability): one per seed")
    seed: int = _f(0, "base seed of every random draw (triggers, simulated actor, sampling seeds)")
    scenarios: Any = _f(None, "scenario names to run (null: every scenario of the worlds)")
    tasks: Any = _f(None, "task indices to run in each scenario (null: all)")
    max_tasks: Any = _f(None, "run at most the first N tasks of each scenario (null: no limit)")
    task_ids: Any = _f(
        None,
        "run only these tasks, by id (scenario/index, e.g. [crm_gen_0_3/1,hr_gen_0_15/4]), "
        "besides the filters above (null: no such filter)",
    )
    splits: list[str] = _f(list(SPLITS), "collect episodes of tasks in these splits")


@dataclass
class SplitConfig:
    """Train/validation/test assignment of tasks (episodes inherit their task's split)."""

    validation: float = _f(0.2, "share of tasks in validation (rounded to whole tasks)")
    test: float = _f(0.2, "share of tasks in test (rounded to whole tasks)")
    seed: int = _f(0, "seed of the task ranking that assigns splits")
    validation_tasks: list[str] = _f([], "task ids forced into validation (e.g. smart_home_1/3)")
    test_tasks: list[str] = _f([], "task ids forced into test")


@dataclass
class Stage2Config:
    """Stage 2 of the two-stage design (docs/collect.md, "Stage 2: randomising at trigger
    states"): a base policy, randomised only at trigger states, instead of the grid."""

    base: Any = _f(
        None,
        "base help policy, a name of helpdp.policies.build_policy (turn0, turns:0,2, "
        "turn0+after:failure, ...; decided per state); null: no stage 2, the grid of "
        "schedule.probabilities",
    )
    events: list[str] = _f(
        ["repeat", "failed", "unknown_tool"],
        "the trigger states: where one of these fires (helpdp.events: repeat, loop, failed, "
        "unknown_tool, format_error, working, turn:K, context:N) help is drawn with "
        "probability q, whatever the base says",
    )
    q: float = _f(0.5, "probability of help at a trigger state (the first intervention)")
    max_randomised: Any = _f(
        None,
        "randomise only at the first K trigger states of an episode; from the (K+1)-th on "
        "the base decides (importance weights at most 1/min(q,1-q)^K); null: every one",
    )


def stage2_design(stage2: Stage2Config, seed: int) -> TriggerRandomised | None:
    """The behaviour of a stage-2 collection (None: the grid): ``TriggerRandomised(base,
    events, q, max_randomised=K)`` calling the first intervention, its draws seeded by
    ``seed`` (the schedule's). Refuses a base that is not a policy name (a search output or a
    selected.json lives in a file the record of the design cannot rebuild)."""
    if stage2.base is None:
        return None
    if not 0.0 <= float(stage2.q) <= 1.0:
        raise ValueError(f"stage2.q must lie in [0, 1], got {stage2.q}")
    if not list(stage2.events):
        raise ValueError("stage2.events is empty: name the trigger states")
    k = getattr(stage2, "max_randomised", None)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"stage2.max_randomised must be an integer >= 1 or null, got {k!r}")
    base = stage2.base if isinstance(stage2.base, dict) else str(stage2.base)
    try:
        if isinstance(build_policy(base, seed=int(seed)), TablePolicy):
            raise ValueError("a search output, not a policy name")
        return TriggerRandomised(
            base, list(stage2.events), float(stage2.q), seed=int(seed), max_randomised=k
        )
    except ValueError as e:
        raise ValueError(f"stage2: {e}") from None


def design_spec(design: TriggerRandomised) -> str:
    """The design as ``episodes.parquet``'s ``design`` records it: the canonical JSON of
    its spec (keys sorted), what ``helpdp.policies.build_policy`` reads back."""
    return json.dumps(design.spec(), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class EpisodeSpec:
    """One scheduled episode. ``entropy`` seeds all of its random draws."""

    episode_id: int
    scenario: str
    task_idx: int
    task_id: str
    split: str
    seed: int
    trigger_p: tuple[float, ...]
    entropy: int

    def as_dict(self) -> dict[str, JSON]:
        return {
            "episode_id": self.episode_id,
            "scenario": self.scenario,
            "task_idx": self.task_idx,
            "task_id": self.task_id,
            "split": self.split,
            "seed": self.seed,
            "trigger_p": list(self.trigger_p),
            "entropy": str(self.entropy),
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> EpisodeSpec:
        return cls(
            int(d["episode_id"]),
            str(d["scenario"]),
            int(d["task_idx"]),
            str(d["task_id"]),
            str(d["split"]),
            int(d["seed"]),
            tuple(float(p) for p in d["trigger_p"]),
            int(d["entropy"]),
        )


def task_id(scenario: str, task_idx: int) -> str:
    """The dataset's ``task_id`` of a scenario's task: ``scenario/idx``."""
    return f"{scenario}/{int(task_idx)}"


def trigger_vectors(
    probabilities: Sequence[float | Sequence[float]], n_interventions: int
) -> list[tuple[float, ...]]:
    """One tuple of ``n_interventions`` probabilities per schedule entry.

    A number applies to every intervention; a list must have one entry per
    intervention. Probabilities must lie in [0, 1].
    """
    if n_interventions < 1:
        raise ValueError("a collection needs at least one intervention")
    out = []
    for i, entry in enumerate(probabilities):
        if isinstance(entry, int | float) and not isinstance(entry, bool):
            vec = (float(entry),) * n_interventions
        elif isinstance(entry, Sequence) and not isinstance(entry, str):
            vec = tuple(float(p) for p in entry)
            if len(vec) != n_interventions:
                raise ValueError(
                    f"schedule.probabilities[{i}] has {len(vec)} values for {n_interventions} "
                    "interventions"
                )
        else:
            raise ValueError(
                f"schedule.probabilities[{i}] must be a number or a list, got {entry!r}"
            )
        if not all(0.0 <= p <= 1.0 for p in vec):
            raise ValueError(
                f"schedule.probabilities[{i}] = {entry!r}: probabilities lie in [0, 1]"
            )
        out.append(vec)
    if len(set(out)) != len(out):
        raise ValueError("schedule.probabilities has repeated entries")
    return out


def split_tasks(task_ids: Sequence[str], config: SplitConfig) -> dict[str, str]:
    """``task_id -> split``: forced tasks first, then the rest ranked by a seeded hash.

    Of the remaining tasks, the first ``round(n * test)`` of the ranking go to test and
    the next ``round(n * validation)`` to validation (n counts every task).
    """
    if not (0 <= config.validation and 0 <= config.test and config.validation + config.test < 1):
        raise ValueError("split.validation and split.test must be >= 0 with a sum < 1")
    tasks = list(dict.fromkeys(task_ids))
    forced: dict[str, str] = {}
    for name, listed in (("validation", config.validation_tasks), ("test", config.test_tasks)):
        for t in listed:
            if t in forced and forced[t] != name:
                raise ValueError(f"task {t!r} is forced into both validation and test")
            forced[t] = name
    n = len(tasks)
    want = {"test": round(n * config.test), "validation": round(n * config.validation)}
    for split in forced.values():
        want[split] = max(0, want[split] - 1)
    rest = sorted(
        (t for t in tasks if t not in forced), key=lambda t: _digest("split", config.seed, t)
    )
    out = {t: forced[t] for t in tasks if t in forced}
    n_test = min(want["test"], len(rest))
    n_val = min(want["validation"], len(rest) - n_test)
    for i, t in enumerate(rest):
        out[t] = "test" if i < n_test else ("validation" if i < n_test + n_val else "train")
    return {t: out[t] for t in tasks}


def build_schedule(
    tasks: Sequence[tuple[str, int]],
    n_interventions: int,
    schedule: ScheduleConfig,
    split: SplitConfig,
    design: TriggerRandomised | None = None,
    pool: Sequence[str] | None = None,
) -> list[EpisodeSpec]:
    """Every episode of a collection, in a fixed order (task, probability entry, seed).

    ``tasks``: ``(scenario, task_idx)`` pairs (already filtered to what can run).
    ``pool``: the ids of every task of the worlds, whatever the schedule runs, which the
    split ranks (:func:`split_tasks`), so that a task's split never depends on which other
    tasks a collection runs (None: ``tasks`` are the whole pool).
    Episode ids and seeds depend only on (schedule.seed, task, probability vector,
    seed), never on the position in the list. With a stage-2 ``design``
    (:func:`stage2_design`) one episode per (task, seed) instead, whose ``trigger_p`` is
    ``(q, 0, ...)`` (help at trigger states, first intervention; the weights read the
    design) and whose id and seeds depend on (schedule.seed, task, design, seed).
    """
    if design is None:
        vectors = trigger_vectors(schedule.probabilities, n_interventions)
        keys = [list(v) for v in vectors]
    else:
        if n_interventions < 1:
            raise ValueError("a collection needs at least one intervention")
        vectors = [(design.q,) + (0.0,) * (n_interventions - 1)]
        keys = [["stage2", design_spec(design)]]
    seeds = [int(s) for s in schedule.seeds]
    if not seeds:
        raise ValueError("schedule.seeds is empty")
    if len(set(seeds)) != len(seeds):
        raise ValueError("schedule.seeds has repeated seeds")
    bad = [s for s in schedule.splits if s not in SPLITS]
    if bad:
        raise ValueError(f"schedule.splits: unknown split {bad[0]!r} (one of {SPLITS})")
    ids = [task_id(s, i) for s, i in tasks]
    splits = split_tasks(list(pool) if pool is not None else ids, split)
    missing = [t for t in ids if t not in splits]
    if missing:
        raise ValueError(f"task {missing[0]!r} is not in the pool of tasks the split ranks")
    specs = []
    for (scenario, idx), tid in zip(tasks, ids):
        if splits[tid] not in schedule.splits:
            continue
        for vec, vkey in zip(vectors, keys):
            for seed in seeds:
                key = ("episode", int(schedule.seed), tid, vkey, seed)
                digest = _digest(*key)
                specs.append(
                    EpisodeSpec(
                        episode_id=int.from_bytes(digest[:8], "big", signed=True),
                        scenario=scenario,
                        task_idx=int(idx),
                        task_id=tid,
                        split=splits[tid],
                        seed=seed,
                        trigger_p=vec,
                        entropy=int.from_bytes(digest[8:24], "big"),
                    )
                )
    if len({s.episode_id for s in specs}) != len(specs):
        raise ValueError("episode id collision (repeated tasks in the schedule?)")
    return specs


def shard_episodes(specs: Sequence[EpisodeSpec], shard_size: int) -> list[list[EpisodeSpec]]:
    """Consecutive chunks of ``shard_size`` episodes (the unit of work and of resumption)."""
    if shard_size < 1:
        raise ValueError("executor.shard_size must be >= 1")
    return [list(specs[i : i + shard_size]) for i in range(0, len(specs), shard_size)]


#: stream numbers of :func:`episode_rng`
STREAMS = {"trigger": 1, "actor": 2, "help": 3, "policy": 4}


def episode_rng(spec: EpisodeSpec, stream: str, turn: int) -> np.random.Generator:
    """The generator of one episode's ``stream`` at ``turn`` (independent of all others)."""
    seq = np.random.SeedSequence(spec.entropy, spawn_key=(STREAMS[stream], int(turn)))
    return np.random.Generator(np.random.PCG64(seq))


def draw_action(rng: np.random.Generator, probs: Sequence[float], available: Sequence[bool]) -> int:
    """The step's action: 0 (nohelp) or k >= 1 (intervention k = ``probs[k-1]``).

    Draws one uniform per intervention and one tie-break uniform, always (so the
    number of draws never depends on the outcome); an unavailable intervention
    (e.g. out of calls) never fires.
    """
    u = rng.random(len(probs))
    tie = rng.random()
    fired = [k + 1 for k, (p, ok) in enumerate(zip(probs, available)) if ok and u[k] < p]
    if not fired:
        return 0
    return fired[min(int(tie * len(fired)), len(fired) - 1)]
