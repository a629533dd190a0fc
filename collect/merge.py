"""Merge collections of disjoint tasks into one dataset: ``python -m collect.merge``.

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
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from collect.awm.wire import RemoteMessageError, bounded_json
from collect.config import config_differences
from collect.publish import summarize
from collect.schedule import ScheduleConfig
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.data import DatasetError, load_dataset, write_dataset

__all__ = ["MergeConfig", "merge_collections"]

# config keys that may differ between the sources: what each run collected and where
# it wrote, not how (the schedule's own keys are compared apart)
RUN_KEYS = ("out", "overwrite", "keep_shards", "progress", "executor", "schedule")
SCHEDULE_UNION = ("tasks", "splits")  # merged as the sorted union
SCHEDULE_FREE = ("seeds", "max_tasks", "scenarios")  # may differ; recorded per source
#: the columns only a stage-2 collection writes (collect.rollout.DESIGN_STEP/_EPISODE)
DESIGN_COLUMNS = {"steps": ("p_help", "args_sha"), "episodes": ("design",)}


def _stage2(manifest: dict) -> dict | None:
    """The ``stage2`` config of a stage-2 collection's manifest (None: the grid)."""
    st = manifest.get("source", {}).get("config", {}).get("stage2")
    return st if isinstance(st, dict) and st.get("base") is not None else None


@dataclass
class MergeConfig:
    """`python -m collect.merge`: one dataset from collections of disjoint tasks."""

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


def actor_identity(actor: Any) -> dict | None:
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


def _actor_differences(actor: Any, actor0: Any) -> list[str]:
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
            value = values.iloc[row]
            value = value.item() if isinstance(value, np.generic) else value
            raise DatasetError(
                f"{name}/{table}.parquet: row {row}: {col} {value!r} is not one "
                f"of {name}'s own {what}: a source holds rows of its own tasks and episodes only"
            )


def _check_disjoint(
    names: list[str], frames: list[dict[str, pd.DataFrame]], stage2: list[bool]
) -> bool:
    """Refuse a task (or state) in two sources unless one of the two is a stage-2
    collection, and an episode in two sources always; whether some tasks are shared."""
    shared = False
    for table, col in (("states", "task_id"), ("states", "state_id"), ("episodes", "episode_id")):
        seen: dict[Any, int] = {}
        for i, (name, f) in enumerate(zip(names, frames)):
            if f.get(table) is None:
                continue
            for v in pd.unique(f[table][col]):
                j = seen.get(v)
                if j is not None and (col == "episode_id" or not (stage2[i] or stage2[j])):
                    shown = v.item() if isinstance(v, np.generic) else v
                    raise DatasetError(
                        f"{name}/{table}.parquet: {col} {shown!r} is also in {names[j]}: merged "
                        "collections must hold disjoint tasks (or be the two stages of the "
                        "two-stage design) and disjoint episodes"
                    )
                shared |= j is not None
                seen.setdefault(v, i)
        # (a task's states and episodes belong to one source, so this is enough)
    return shared


def _merge_shared(names: list[str], tables: dict[str, pd.DataFrame]) -> None:
    """Sources that share tasks (the two stages): one row per state (its smallest depth,
    first source first), the transitions' counts summed, one score row per state."""
    st = tables["states"]
    agg = st.groupby("state_id", sort=False).agg(
        task=("task_id", "nunique"), term=("terminal", "nunique"), succ=("success", "nunique")
    )
    clash = agg[(agg[["task", "term", "succ"]] > 1).any(axis=1)]
    if len(clash):
        raise DatasetError(
            f"states.parquet: state_id {clash.index[0]!r} names different tasks or "
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
    sc = tables.get("scores")
    if sc is not None:
        sc = sc.drop_duplicates()
        if sc["state_id"].duplicated().any():
            bad = sc["state_id"][sc["state_id"].duplicated()].iloc[0]
            raise DatasetError(
                f"scores.parquet: state_id {bad!r} has different scores in {', '.join(names)}"
            )
        tables["scores"] = sc.reset_index(drop=True)


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
    shared = _check_disjoint(names, frames, stage2)
    tables = {t: _concat(names, frames, t) for t in frames[0]}
    tables = {t: v for t, v in tables.items() if v is not None}
    if shared:
        _merge_shared(names, tables)
    base = stage2.index(False) if False in stage2 else 0  # the grid's manifest, if any
    man = copy.deepcopy(manifests[base])
    src = man.setdefault("source", {})
    src.get("config", {}).pop("stage2", None)  # per source in merged_from
    scheds = [m.get("source", {}).get("config", {}).get("schedule") for m in manifests]
    if all(isinstance(s, dict) for s in scheds):
        for key in SCHEDULE_UNION:
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
