"""Merge collections into one dataset: ``python -m collect.merge``.

A collection grows by task: collect more tasks later (``schedule.tasks=[...]``, a new
``out``, its own shards and fingerprint) and merge. The sources must be the same
experiment on different tasks: the same actions, discount, interventions,
environment, state key and trigger probabilities (everything of
``source.config`` but the schedule's tasks, splits and seeds and the run's own
output options) and the same actor. An actor whose weights' sha256 is recorded
(``actor.model_sha256``; the pin of a ``make real-actor`` model) is compared by its model
identity (:data:`IDENTITY`: the sha256, temperature, top-p, the other sampling options
(:data:`HF_SAMPLER` for the hf actor), max tokens, call format, the cut at
``</tool_call>``, chat-template arguments, prompt truncation; and ``source.actor``),
so transformers in process and llama.cpp servers sampling the same GGUF file merge, each
source's actor config and versions (its runtime) kept in ``merged_from``; any other actor
is compared whole. There must be no task, state or episode in two of them, and every row of a source's tables
naming only that source's own tasks, states and episodes (:data:`OWNED`; each
manifest read within :data:`MANIFEST_MAX_BYTES` and :data:`MANIFEST_MAX_DEPTH` first).
A refusal is one line naming the source, the table and the row. The merged
manifest is the first source's, with the schedule's tasks and splits the union of
the sources', a fresh ``summary``, and ``source.merged_from`` saying what each
source held (its directory name, episodes, tasks, fingerprint-relevant schedule,
``partial`` where it was one).

The two stages of the two-stage design (docs/collect.md, "Stage 2: randomising at
trigger states") merge on the same tasks: a stage-2 collection (``stage2`` in its
config, ``design`` in its episodes) may share tasks and states with the other sources
(the same experiment but for ``stage2`` and ``schedule.probabilities``); their
episodes stay disjoint, a state seen by several sources is one row (its smallest
depth; the same task, terminal and success in all of them, else refused) and the
transitions' counts add up. The stage-2 columns (:data:`DESIGN_COLUMNS`) are null in
the rows of a source without them. The merged manifest is then the first grid
source's, without ``stage2`` (each source's is in ``merged_from``).

A source's word alone shares nothing: a source whose manifest claims ``stage2``, and
every source that shares a task with another, proves it from its tables first
(:func:`_prove_scheduled`): a stage-2 claim builds its design
(``collect.schedule.stage2_design``) and every episode records that design, with the
trigger probabilities ``(q, 0, ...)``; every episode's id is the one the schedule gives
its task, seed and design (or trigger vector, one of ``schedule.probabilities``); the
steps' ``p_help`` and actions are the design's (``helpdp.ope.load_logged``: the base
policy's decision where it does not randomise); the transitions are the counts of its
steps, and its states' depth and start those its steps give. A shared task has one
split in every source, and no two grid sources share a task, whatever the order.
What no table can prove (outcomes of whole episodes consistent with the design, a
state's text) is the collector's.

Scores (``scores.parquet``, a PRM's estimates) are derived data: they are not merged.
Each source keeps its own; ``merged_from`` records their rows and PRM, the command
prints which were left out and how to score the merged set (``python -m prm.score
data=OUT prm_dir=PRM``), and an ``out`` that holds a ``scores.parquet`` is refused
rather than have it replaced by a merge that writes none.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from collect.awm.wire import RemoteMessageError, bounded_json
from collect.config import config_differences
from collect.publish import summarize
from collect.schedule import (
    ScheduleConfig,
    Stage2Config,
    design_spec,
    stable_int64,
    stage2_design,
    trigger_vectors,
)
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.data import DatasetError, load_dataset, write_dataset
from helpdp.jsonvalue import JSON
from helpdp.ope import load_logged

__all__ = ["MergeConfig", "merge_collections"]

# config keys that may differ between the sources: what each run collected and where
# it wrote, not how (the schedule's own keys are compared apart)
RUN_KEYS = ("out", "overwrite", "keep_shards", "progress", "executor", "schedule")
SCHEDULE_UNION = ("tasks", "splits", "task_ids")  # merged as the sorted union
SCHEDULE_FREE = ("seeds", "max_tasks", "scenarios")  # may differ; recorded per source
#: the columns only a stage-2 collection writes (collect.rollout.DESIGN_STEP/_EPISODE)
DESIGN_COLUMNS = {"steps": ("p_help", "args_sha"), "episodes": ("design",)}


def _stage2(manifest: dict) -> dict | None:
    """The ``stage2`` config of a stage-2 collection's manifest (None: the grid)."""
    st = manifest.get("source", {}).get("config", {}).get("stage2")
    return st if isinstance(st, dict) and st.get("base") is not None else None


@dataclass
class MergeConfig:
    """`python -m collect.merge`: one dataset from collections of disjoint tasks, or of
    the two stages of the two-stage design on shared tasks (a stage-2 source proves its
    design from its tables); scores.parquet is not merged: rescore the merged set."""

    sources: list = _f([], "dataset directories to merge (at least two), in this order")
    out: str = _f("", "directory of the merged dataset")
    overwrite: bool = _f(False, "replace the dataset files of an existing out")


def _union(values: list) -> list | None:
    if any(v is None for v in values):
        return None  # one source took every task (or split): so does the union
    return sorted({x for v in values for x in v}, key=lambda x: (str(type(x)), x))


#: what makes two actors one sampled model, whichever runtime ran it: the weights (their
#: sha256), the sampling, how turns are read and cut, what the prompt holds. The actor's
#: other fields (kind, endpoint, threads, float precision, caches, timeouts) are the runtime's.
IDENTITY = {
    "model_sha256": "",
    "temperature": None,
    "top_p": None,
    "max_tokens": None,
    "call_format": "strict",
    "stop_after_tool_call": False,
    "chat_template_kwargs": {},
    "max_prompt_tokens": 0,
    "sampler": {},
    "sampler_order": "",
}
#: where the temperature applies relative to the truncations (top-k, top-p), by actor kind:
#: transformers and vLLM scale the logits first, a llama.cpp server (collect.realserve, the
#: openai actor) truncates first and scales last, so with a temperature other than 0 and 1
#: and top_p < 1 the same settings sample different distributions (the nucleus is cut on
#: other probabilities). An openai actor's server is taken to be llama.cpp's.
SAMPLER_ORDER = {"hf": "temperature first", "vllm": "temperature first"}
SERVER_ORDER = "truncation first (llama.cpp server)"
#: what the hf actor's sampler is beyond temperature and top-p, in llama.cpp's names:
#: transformers' generate defaults (top-k 50, no repetition penalty, no min-p), which an
#: openai actor must send as ``actor.sampler`` to be the same model (a server's own
#: defaults differ: llama.cpp's are top_k 40, min_p 0.05, repeat_penalty 1.1)
HF_SAMPLER = {
    "top_k": 50,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


def actor_identity(actor: JSON) -> dict | None:
    """The model identity of an actor config (:data:`IDENTITY`; a field the config lacks
    has its default there), or None when the weights' sha256 is not known (an hf actor
    on a `make real-actor` model without ``model_sha256`` has that model's pin)."""
    if not isinstance(actor, dict):
        return None
    ident = {k: actor.get(k, default) for k, default in IDENTITY.items()}
    if actor.get("kind") == "hf":
        ident["sampler"] = HF_SAMPLER
    t, top_p = ident["temperature"], ident["top_p"]
    if t not in (None, 0, 0.0, 1, 1.0) and top_p is not None and float(top_p) < 1.0:
        ident["sampler_order"] = SAMPLER_ORDER.get(str(actor.get("kind")), SERVER_ORDER)
    if not ident["model_sha256"] and actor.get("kind") == "hf" and actor.get("gguf"):
        from collect.realmodel import MODELS

        pinned = MODELS.get(str(actor["gguf"]))
        ident["model_sha256"] = pinned.sha256 if pinned else ""
    return ident if ident["model_sha256"] else None


def _actor_differences(actor: JSON, actor0: JSON) -> list[str]:
    """``actor.FIELD`` for each identity field that differs when both actors state their
    weights' sha256 (runtimes of one model merge; a field one config lacks has its
    :data:`IDENTITY` default); else every field that differs or only one records."""
    ident, ident0 = actor_identity(actor), actor_identity(actor0)
    if ident is None or ident0 is None:
        return config_differences({"actor": actor}, {"actor": actor0})
    return config_differences(ident, ident0, None, "actor")


def _check_same_experiment(names: list[str], manifests: list[dict]) -> dict[str, list[str]]:
    """Refuse sources that are not the same experiment as the first; per source, the
    config fields only one of the two records (not compared)."""
    first = manifests[0]
    unchecked: dict[str, list[str]] = {}
    for name, m in zip(names[1:], manifests[1:]):
        for key in ("format", "actions", "gamma"):
            if m.get(key) != first.get(key):
                raise DatasetError(
                    f"{name}/manifest.json: {key} is {m.get(key)!r}, {names[0]} has "
                    f"{first.get(key)!r}: not the same experiment"
                )
        src, src0 = m.get("source", {}), first.get("source", {})
        # stage 2 on the same experiment merges with stage 1; the actor by its identity
        free = (*RUN_KEYS, "stage2", "actor")
        conf = {k: v for k, v in src.get("config", {}).items() if k not in free}
        conf0 = {k: v for k, v in src0.get("config", {}).items() if k not in free}
        sched = src.get("config", {}).get("schedule", {})
        sched0 = src0.get("config", {}).get("schedule", {})
        skip = SCHEDULE_UNION + SCHEDULE_FREE
        if _stage2(m) or _stage2(first):
            skip += ("probabilities",)  # stage 2 draws at trigger states, not on the grid
        actor = src.get("config", {}).get("actor")
        absent: list[str] = []  # declared fields only one records (collect.config)
        diff = _actor_differences(actor, src0.get("config", {}).get("actor"))
        diff += config_differences(conf, conf0, absent=absent)
        diff += config_differences(
            {k: v for k, v in sched.items() if k not in skip},
            {k: v for k, v in sched0.items() if k not in skip},
            ScheduleConfig,
            "schedule",
            absent,
        )
        keys = ("generator", "state_key", "actor")
        diff += [f"source.{k}" for k in keys if src.get(k) != src0.get(k)]
        if diff:
            raise DatasetError(
                f"{name}/manifest.json: source.config differs from {names[0]}'s in "
                f"{', '.join(diff[:5])}: not the same experiment (only the tasks, splits, "
                "seeds and the runtime of one model (same weights sha256, sampling, turn "
                "format) may differ)"
            )
        unchecked[name] = absent
    return unchecked


#: a source's manifest is read within these bounds before anything else of it
MANIFEST_MAX_BYTES = 16 << 20
MANIFEST_MAX_VALUES = 1_000_000
MANIFEST_MAX_DEPTH = 64


def _check_manifest(path: Path, name: str) -> None:
    """``name``'s manifest.json parses within the bounds above (a manifest nested
    200,000 deep is one DatasetError, not a RecursionError)."""
    file = path / "manifest.json"
    if not file.is_file():
        return  # load_dataset names it
    size = file.stat().st_size
    if size > MANIFEST_MAX_BYTES:
        raise DatasetError(
            f"{name}/manifest.json: {size} bytes, over the {MANIFEST_MAX_BYTES}-byte limit"
        )
    try:
        bounded_json(
            file.read_bytes(),
            max_bytes=MANIFEST_MAX_BYTES,
            max_values=MANIFEST_MAX_VALUES,
            max_depth=MANIFEST_MAX_DEPTH,
            what="manifest",
        )
    except RemoteMessageError as e:
        raise DatasetError(f"{name}/manifest.json: {e}") from None


#: (table, column, what of the source it must name): every row of a source belongs to
#: its own tasks, states and episodes
OWNED = (
    ("episodes", "task_id", "tasks"),
    ("steps", "episode_id", "episodes"),
    ("steps", "state_id", "states"),
    ("steps", "next_state_id", "states"),
    ("transitions", "state_id", "states"),
    ("transitions", "next_state_id", "states"),
    ("scores", "state_id", "states"),
)


def _check_owned(name: str, f: dict[str, pd.DataFrame]) -> None:
    """Every row of every table of source ``name`` names only its own tasks, states and
    episodes (a source cannot add episodes to another source's task, or steps to
    another source's episode); the first row that does not is refused by number."""
    states = f["states"]
    own = {"tasks": states["task_id"], "states": states["state_id"]}
    if f.get("episodes") is not None:
        own["episodes"] = f["episodes"]["episode_id"]
    for table, col, what in OWNED:
        frame = f.get(table)
        if frame is None or col not in frame.columns or what not in own:
            continue
        values = frame[col]
        stray = ~values.isin(own[what]) & values.notna()
        if stray.any():
            row = int(np.flatnonzero(stray.to_numpy())[0])
            value = _plain(values.iloc[row])
            raise DatasetError(
                f"{name}/{table}.parquet: row {row}: {col} {value!r} is not one "
                f"of {name}'s own {what}: a source holds rows of its own tasks and episodes only"
            )


def _plain(value: object) -> object:
    """A numpy scalar as the Python number it is (messages show ``-918...``, not
    ``np.int64(-918...)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _check_disjoint(
    names: list[str], frames: list[dict[str, pd.DataFrame]], stage2: list[bool]
) -> set[int]:
    """Refuse a task (or state) in two grid sources, whatever the order and whichever
    stage-2 sources share it too, and an episode in two sources always; the sources that
    share a task with another (each of them proves its rows: :func:`_prove_scheduled`)."""
    sharing: set[int] = set()
    for table, col in (("states", "task_id"), ("states", "state_id"), ("episodes", "episode_id")):
        first: dict[Hashable, int] = {}
        grid: dict[Hashable, int] = {}  # the first grid source holding each value
        for i, (name, f) in enumerate(zip(names, frames)):
            if f.get(table) is None:
                continue
            for v in pd.unique(f[table][col]):
                j = first.get(v)
                if j is not None:
                    k = j if col == "episode_id" else (None if stage2[i] else grid.get(v))
                    if k is not None:
                        raise DatasetError(
                            f"{name}/{table}.parquet: {col} {_plain(v)!r} is also in "
                            f"{names[k]}: merged collections must hold disjoint tasks (or be "
                            "the two stages of the two-stage design) and disjoint episodes"
                        )
                    sharing |= {i, j}
                first.setdefault(v, i)
                if not stage2[i]:
                    grid.setdefault(v, i)
    return sharing


def _check_splits(names: list[str], frames: list[dict[str, pd.DataFrame]]) -> None:
    """A task is in one split in every source (the split is the task's, not the run's)."""
    seen: dict[Hashable, tuple[Hashable, str]] = {}
    for name, f in zip(names, frames):
        ep = f.get("episodes")
        if ep is None or "split" not in ep.columns:
            continue
        for r, (task, split) in enumerate(zip(ep["task_id"].tolist(), ep["split"].tolist())):
            split0, name0 = seen.setdefault(task, (split, name))
            if split != split0:
                raise DatasetError(
                    f"{name}/episodes.parquet: row {r}: task {task!r} is in split {split!r}, "
                    f"in {name0} in {split0!r}: a task has one split"
                )


def _stage2_spec(name: str, manifest: dict) -> str:
    """The design (:func:`collect.schedule.design_spec`) a stage-2 manifest's
    ``source.config.stage2`` builds with its ``schedule.seed``, as episodes record it."""
    conf = manifest.get("source", {}).get("config", {})
    sched = conf.get("schedule") if isinstance(conf.get("schedule"), dict) else {}
    try:
        design = stage2_design(Stage2Config(**conf["stage2"]), int(sched.get("seed", 0)))
    except (TypeError, ValueError) as e:
        raise DatasetError(f"{name}/manifest.json: source.config.stage2: {e}") from None
    return design_spec(design)


def _prove_episodes(name: str, ds, manifest: dict, spec: str | None) -> None:
    """Every episode of ``ds`` is one its schedule runs: the stage-2 claim's design
    (``spec``) in each row, the trigger probabilities of its design or of one of
    ``schedule.probabilities``, the id the schedule gives its task, seed and design."""
    ep, where = ds.episodes, f"{name}/episodes.parquet"
    sched = manifest.get("source", {}).get("config", {}).get("schedule")
    sched = sched if isinstance(sched, dict) else {}
    names = list(ds.actions[1:])
    cols = [f"p_{a}" for a in names]  # as helpdp.ope reads them: trigger_p for one
    if not set(cols) <= set(ep.columns) and len(names) == 1 and "trigger_p" in ep.columns:
        cols = ["trigger_p"]
    for col in ("task_id", "seed", *cols, *(("design",) if spec is not None else ())):
        if col not in ep.columns:
            why = (
                "source.config.stage2 in its manifest claims a stage-2 collection, whose "
                "episodes record their design"
                if col == "design"
                else "the schedule's record of each episode, which a source that shares "
                "tasks must hold"
            )
            raise DatasetError(f"{where}: no column {col!r}: {why}")
    designs = ep["design"].tolist() if "design" in ep.columns else [None] * len(ep)
    try:
        grid = {tuple(v) for v in trigger_vectors(sched.get("probabilities", []), len(names))}
        seed0 = int(sched.get("seed", 0))
    except (TypeError, ValueError) as e:
        raise DatasetError(f"{name}/manifest.json: source.config.schedule: {e}") from None
    probs = ep[cols].to_numpy(np.float64)
    rows = zip(ep["episode_id"].tolist(), ep["task_id"].tolist(), ep["seed"].tolist())
    for r, (eid, task, seed) in enumerate(rows):
        d = designs[r] if isinstance(designs[r], str) and designs[r] else None
        if spec is not None and d != spec:
            raise DatasetError(
                f"{where}: row {r}: design {designs[r]!r} is not its manifest's "
                f"source.config.stage2 ({spec})"
            )
        vec = tuple(probs[r].tolist())
        if "trigger_p" in ep.columns and not ep["trigger_p"].iloc[r] == vec[0]:
            raise DatasetError(
                f"{where}: row {r}: trigger_p {_plain(ep['trigger_p'].iloc[r])} is not "
                f"{cols[0]} {vec[0]}"
            )
        if d is not None:
            try:
                q = float(json.loads(d)["q"])
            except (ValueError, KeyError, TypeError):
                raise DatasetError(f"{where}: row {r}: design {d!r} is not a design") from None
            ok, want = vec == (q,) + (0.0,) * (len(names) - 1), f"{q} then 0"
        else:
            ok, want = vec in grid, "one of source.config.schedule.probabilities"
        if not ok:
            raise DatasetError(
                f"{where}: row {r}: trigger probabilities {list(vec)} ({', '.join(cols)}) "
                f"are not its {'design' if d else 'schedule'}'s ({want})"
            )
        key = ["stage2", d] if d is not None else list(vec)
        try:
            want_id = stable_int64("episode", seed0, str(task), key, int(seed))
        except (TypeError, ValueError):
            raise DatasetError(f"{where}: row {r}: seed {seed!r} is not an integer") from None
        if eid != want_id:
            raise DatasetError(
                f"{where}: row {r}: episode_id {eid} is not the id the schedule gives task "
                f"{task!r}, seed {seed} and {'design ' + d if d else f'trigger vector {vec}'} "
                f"(schedule.seed {seed0}): a source holds the episodes its schedule ran"
            )


def _prove_tables(name: str, ds) -> None:
    """The transitions of ``ds`` are the counts of its steps, its states' depth and start
    those its steps give (what a collection publishes; no other rows for shared states)."""
    st, keys = ds.steps, ["state_id", "action", "next_state_id"]
    counted = st.groupby(keys, sort=False).size().rename("steps").reset_index()
    both = ds.transitions.reset_index(drop=True).reset_index().merge(counted, "outer", on=keys)
    off = both["count"].ne(both["steps"])
    if off.any():
        bad = both[off].sort_values("index", na_position="last")
        key = ", ".join(f"{k} {_plain(bad[k].iloc[0])}" for k in keys)  # int64 kept
        row, n = bad["index"].iloc[0], bad["steps"].iloc[0]
        if pd.isna(row):
            raise DatasetError(
                f"{name}/steps.parquet: {int(n)} steps ({key}) that transitions.parquet "
                "does not count: the transitions are its steps' counts"
            )
        raise DatasetError(
            f"{name}/transitions.parquet: row {int(row)}: {key} counts "
            f"{int(bad['count'].iloc[0])}, its steps.parquet {0 if pd.isna(n) else int(n)}: "
            "the transitions are its steps' counts"
        )
    reach = pd.concat(
        [
            pd.DataFrame({"state_id": st["state_id"], "depth": st["t"]}),
            pd.DataFrame({"state_id": st["next_state_id"], "depth": st["t"] + 1}),
        ]
    )
    ids = ds.states["state_id"]
    depth = reach.groupby("state_id")["depth"].min().reindex(ids).to_numpy(np.float64)
    start = ids.isin(st.loc[st["t"] == 0, "state_id"]).to_numpy()
    is_start = ds.states["is_start"].to_numpy(bool)
    off = np.isnan(depth) | (depth != ds.states["depth"].to_numpy()) | (start != is_start)
    if off.any():
        r = int(np.flatnonzero(off)[0])
        sid = _plain(ids.iloc[r])
        if np.isnan(depth[r]):
            raise DatasetError(
                f"{name}/states.parquet: row {r}: state_id {sid} is reached by none of its steps"
            )
        raise DatasetError(
            f"{name}/states.parquet: row {r}: state_id {sid} is_start {bool(is_start[r])}, "
            f"depth {_plain(ds.states['depth'].iloc[r])}; its steps give is_start "
            f"{bool(start[r])}, depth {int(depth[r])}"
        )


def _prove_scheduled(name: str, ds, manifest: dict) -> None:
    """Source ``name`` proves from its tables what its manifest (or its sharing of a task)
    claims (module docstring): one DatasetError naming the file, row and field if not."""
    if ds.episodes is None or ds.steps is None:
        missing = "episodes" if ds.episodes is None else "steps"
        raise DatasetError(
            f"{name}/{missing}.parquet: missing: a source that claims stage 2 or shares a "
            "task with another proves its episodes by their schedule"
        )
    spec = _stage2_spec(name, manifest) if _stage2(manifest) else None
    _prove_episodes(name, ds, manifest, spec)
    has_design = "design" in ds.episodes.columns and ds.episodes["design"].notna().any()
    if has_design and "p_help" not in ds.steps.columns:
        raise DatasetError(
            f"{name}/steps.parquet: no column 'p_help': a stage-2 episode's steps record "
            "the design's probability of help"
        )
    try:
        load_logged(ds)  # p_help and the actions under each episode's design or vector
    except ValueError as e:
        msg = str(e)
        raise DatasetError(msg.replace(str(ds.path), name, 1) if ds.path else msg) from None
    _prove_tables(name, ds)


def _merge_shared(names: list[str], tables: dict[str, pd.DataFrame]) -> None:
    """Sources that share tasks (the two stages): one row per state (its smallest depth,
    first source first), the transitions' counts summed."""
    st = tables["states"]
    agg = st.groupby("state_id", sort=False).agg(
        task=("task_id", "nunique"), term=("terminal", "nunique"), succ=("success", "nunique")
    )
    clash = agg[(agg[["task", "term", "succ"]] > 1).any(axis=1)]
    if len(clash):
        raise DatasetError(
            f"states.parquet: state_id {_plain(clash.index[0])!r} names different tasks or "
            f"terminal/success in {', '.join(names)} (another state key or worlds?)"
        )
    first = st.sort_values("depth", kind="stable").drop_duplicates("state_id")
    start = st.groupby("state_id")["is_start"].any()
    first = first.assign(is_start=start.reindex(first["state_id"]).to_numpy())
    tables["states"] = first.sort_values("state_id", kind="stable").reset_index(drop=True)
    tr = tables["transitions"]
    keys = ["state_id", "action", "next_state_id"]
    summed = tr.groupby(keys, as_index=False, sort=True)["count"].sum()
    tables["transitions"] = summed.astype({"count": tr["count"].dtype})[list(tr.columns)]


def _concat(names: list[str], frames: list[dict], table: str) -> pd.DataFrame | None:
    parts = [f.get(table) for f in frames]
    if all(p is None for p in parts):
        return None
    if any(p is None for p in parts):
        missing = names[[p is None for p in parts].index(True)]
        raise DatasetError(f"{missing}/{table}.parquet: missing, other sources have it")
    opt = DESIGN_COLUMNS.get(table, ())
    cols = [c for c in parts[0].columns if c not in opt]
    for name, p in zip(names[1:], parts[1:]):
        own = [c for c in p.columns if c not in opt]
        if own != cols:
            raise DatasetError(
                f"{name}/{table}.parquet: columns {own} differ from {names[0]}'s {cols}"
            )
    extra = [c for c in opt if any(c in p.columns for p in parts)]  # null where absent
    return pd.concat([p.reindex(columns=cols + extra) for p in parts], ignore_index=True)


def merge_collections(sources, out, *, overwrite: bool = False) -> Path:
    """Write the merged dataset of ``sources`` (dataset directories) to ``out``."""
    paths = [Path(s) for s in sources]
    if len(paths) < 2:
        raise ValueError(f"sources: merge needs at least two datasets, got {len(paths)}")
    names = [p.name for p in paths]
    for path, name in zip(paths, names):
        _check_manifest(path, name)
    dss = [load_dataset(p) for p in paths]  # each validated on its own first
    manifests = [ds.manifest for ds in dss]
    unchecked = _check_same_experiment(names, manifests)
    frames = [
        {
            "states": d.states,
            "transitions": d.transitions,
            "scores": d.scores,
            "episodes": d.episodes,
            "steps": d.steps,
        }
        for d in dss
    ]
    for name, f in zip(names, frames):
        _check_owned(name, f)
    stage2 = [_stage2(m) is not None for m in manifests]
    sharing = _check_disjoint(names, frames, stage2)
    for i, (name, d, m) in enumerate(zip(names, dss, manifests)):
        if stage2[i] or i in sharing:
            _prove_scheduled(name, d, m)
    _check_splits(names, frames)
    out_scores = Path(out) / "scores.parquet"
    if out_scores.exists() or out_scores.is_symlink():
        raise FileExistsError(
            f"{out_scores}: exists (a PRM's scores of the dataset there); a merge writes no "
            "scores and would drop them: move it away, merge, then score the merged set "
            f"(python -m prm.score data={out} prm_dir=PRM)"
        )
    # scores are derived data (a PRM's): not merged, each source keeps its own
    tables = {t: _concat(names, frames, t) for t in frames[0] if t != "scores"}
    tables = {t: v for t, v in tables.items() if v is not None}
    if sharing:
        _merge_shared(names, tables)
    base = stage2.index(False) if False in stage2 else 0  # the grid's manifest, if any
    man = copy.deepcopy(manifests[base])
    src = man.setdefault("source", {})
    src.get("config", {}).pop("stage2", None)  # per source in merged_from
    scheds = [m.get("source", {}).get("config", {}).get("schedule") for m in manifests]
    if all(isinstance(s, dict) for s in scheds):
        for key in SCHEDULE_UNION:
            if any(key in s for s in scheds):  # a key no source records stays unrecorded
                src["config"]["schedule"][key] = _union([s.get(key) for s in scheds])
    src.pop("partial", None)
    merged_from = []
    for name, m, d in zip(names, manifests, dss):
        s = m.get("source", {})
        entry = {
            "name": name,
            "episodes": 0 if d.episodes is None else len(d.episodes),
            "tasks": sorted(map(str, pd.unique(d.states["task_id"]))),
            "schedule": s.get("config", {}).get("schedule"),
            "git_sha": s.get("git_sha"),
            # the runtime that sampled this part (the model is the same in every part)
            "actor": s.get("config", {}).get("actor"),
            "versions": s.get("versions"),
        }
        if _stage2(m):
            entry["stage2"] = _stage2(m)
        if d.scores is not None:  # not merged (derived data): what the source holds
            entry["scores"] = {
                "rows": len(d.scores),
                "source": sorted(map(str, pd.unique(d.scores["source"]))),
            }
        if "partial" in s:
            entry["partial"] = s["partial"]
        if unchecked.get(name):  # fields the first source's code did not record, or this one's
            entry["unchecked"] = unchecked[name]
        merged_from.append(entry)
    src["merged_from"] = merged_from
    if "episodes" in tables and "steps" in tables and "summary" in src:
        arrow = {t: pa.Table.from_pandas(v, preserve_index=False) for t, v in tables.items()}
        src["summary"] = summarize(arrow)
    json.dumps(man)  # a manifest that cannot be written fails before anything is
    return write_dataset(Path(out), man, tables, overwrite=overwrite, check=True)


def run_merge(cfg: MergeConfig) -> Path:
    if not cfg.out:
        raise ValueError("out: the merged dataset's directory is required")
    out = merge_collections(list(cfg.sources), cfg.out, overwrite=cfg.overwrite)
    ds = load_dataset(out)
    n_ep = 0 if ds.episodes is None else len(ds.episodes)
    n_tasks = ds.states["task_id"].nunique()
    print(f"merged {len(cfg.sources)} collections -> {out}: {n_tasks} tasks, {n_ep} episodes")
    scored = [
        f"{Path(str(s))}/scores.parquet"
        for s, e in zip(cfg.sources, ds.manifest["source"]["merged_from"])
        if "scores" in e
    ]
    if scored:
        print(
            f"{', '.join(scored)} not merged: scores are a PRM's, derived from the tables; "
            f"score the merged set: python -m prm.score data={out} prm_dir=PRM"
        )
    return out


def main() -> None:
    run_app(
        "collect.merge",
        MergeConfig,
        run_merge,
        config_name="merge",
        errors=(DatasetError,),
    )


if __name__ == "__main__":
    main()
