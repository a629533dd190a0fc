"""Publishing a collection: the finished shards aggregated into the dataset's tables,
their summary, and ``manifest.json`` with its provenance (config, versions, git commit,
isolation), written atomically through the contract (:func:`helpdp.data.write_dataset`).

A collection writes :data:`OWN_FILES` and ``shards/``, nothing else: every other file in
``out/`` is kept. A dataset file it does not write (``scores.parquet`` of ``prm.score``)
is kept as it is while the tables it goes with are unchanged, and otherwise refused by
name (nothing replaced). :func:`check_out` refuses, before anything runs, an ``out=``
that holds something else than this collection (unless ``overwrite=true``)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from collect.actors import actor_name
from collect.awm.clock import WorldClock
from collect.awm.env import EnvConfig
from collect.awm.sandbox import describe
from collect.config import CollectConfig, config_differences, source_config
from collect.shards import TABLES, PlanMismatch, ShardStore, aggregate
from helpdp.contract import DATASET_FILES, MANIFEST_FILE, build_manifest, fsync_dir
from helpdp.data import write_dataset
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from helpdp.policies import HelpPolicy

__all__ = ["OWN_FILES", "check_out", "git_sha", "manifest", "publish", "summarize", "versions"]

#: the tables a collection writes
WRITTEN_TABLES = ("states", "transitions", "episodes", "steps")
#: the files of ``out/`` a collection writes (besides ``shards/``); every other is kept
OWN_FILES = (MANIFEST_FILE, *(f"{t}.parquet" for t in WRITTEN_TABLES))

REPO = Path(__file__).resolve().parents[1]


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
        from collect.awm.sandbox.confine import IsolationUnavailable, probe

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


def summarize(tables: dict[str, pa.Table]) -> dict[str, JSON]:
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


def _isolation(env: EnvConfig) -> dict[str, JSON]:
    """What confined the dataset code (``source.isolation``): app and verifier workers."""

    app, verifier = env.sandbox.isolation, env.verifier_sandbox.isolation
    out = {**describe(app), **({"verifier_mode": verifier} if verifier != app else {})}
    if app == "os":  # which totals bounded a worker here (a cgroup, or the fallback)
        from collect.awm.sandbox.limits import describe as describe_limits

        lim = env.sandbox
        out["limits"] = describe_limits(lim.max_processes, lim.memory_mb, lim.run_dir_mb)
        out["limits"].update(
            tool_budget_s=env.tool_budget_s,
            fresh_app=env.fresh_app,
            reuse_shipped_apps=env.reuse_shipped_apps,
        )
    return out


def _runtime(env_url: str) -> dict[str, JSON]:
    """Where a ``runtime=openenv`` collection ran its episodes (``source.runtime``)."""
    return {"kind": "openenv", "env_url": env_url, "protocol": "OpenEnv AWM (MCP)"}


def manifest(
    cfg: CollectConfig,
    summary: dict[str, JSON],
    skipped: list[str],
    clock: WorldClock,
    help_policy: HelpPolicy | None = None,
) -> dict[str, JSON]:
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
            "isolation": _isolation(cfg.env)
            if cfg.runtime == "local"
            else {"mode": "remote", "by": "the OpenEnv AWM server at runtime.env_url"},
            **({"runtime": _runtime(cfg.env_url)} if cfg.runtime == "openenv" else {}),
            "config": source_config(cfg),
            "versions": versions(cfg),
            "git_sha": git_sha(),
            "skipped_tasks": skipped,
            "summary": summary,
        },
    )


def _collect_manifest(out: Path) -> dict[str, JSON] | None:
    """``out/manifest.json`` when a collection wrote it."""
    try:
        man = json.loads((out / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return None
    src = man.get("source") if isinstance(man, dict) else None
    return man if isinstance(src, dict) and src.get("generator") == "collect" else None


def check_out(cfg: CollectConfig) -> None:
    """Refuse (before anything runs) an ``out=`` that is not a directory, or a non-empty
    one that holds neither this collection's shards (``shards/plan.json``, checked by
    :meth:`ShardStore.prepare`) nor a dataset this config collected, unless
    ``cfg.overwrite``. Raises :class:`PlanMismatch`."""
    out = Path(cfg.out)
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"{out}: exists and is not a directory (out= names a directory)")
    if cfg.overwrite or (out / "shards" / "plan.json").exists() or not any(out.iterdir()):
        return
    man = _collect_manifest(out)
    if man is None:
        raise PlanMismatch(
            f"{out}: not empty and holds no collection (no shards/plan.json, no manifest.json "
            "of collect); use another out= or overwrite=true (files collect did not write are "
            "kept)"
        )
    now = json.loads(json.dumps(source_config(cfg), default=str))
    # a config field only one of the two records was added or removed by the code since
    differ = config_differences(man["source"].get("config") or {}, now, absent=[])
    if differ:
        raise PlanMismatch(
            f"{out} holds a dataset of another collection (config differs in: "
            f"{', '.join(differ[:5])}); use another out= or overwrite=true"
        )


def _digest(path: Path) -> str | None:
    if not path.is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _replaced(out: Path, before: dict[str, str | None], after: dict[str, str | None]) -> str:
    """What a republication replaced (one line)."""
    changed = [f for f in OWN_FILES if before[f] != after[f]]
    same = [f for f in OWN_FILES if before[f] is not None and before[f] == after[f]]
    if not changed:
        return f"republished {out}: the same dataset (every file identical)"
    return f"republished {out}: replaced {', '.join(changed)} (changed)" + (
        f"; {', '.join(same)} identical" if same else ""
    )


def _write(out: Path, man: dict[str, JSON], tables: dict[str, pa.Table]) -> list[str]:
    """Write the dataset into ``out`` keeping every file a collection does not write;
    returns what it says about a previous dataset (none: nothing)."""
    before = {f: _digest(out / f) for f in OWN_FILES}
    foreign = [f for f in DATASET_FILES if f not in OWN_FILES and (out / f).exists()]
    if not foreign:
        # one atomic write through the contract, which loads the result with the loader
        # before it replaces anything (a writer bug fails here, naming the file, column
        # and row); every entry of out/ that is not a dataset file is carried over
        write_dataset(out, man, tables, overwrite=True, check=True)
        after = {f: _digest(out / f) for f in OWN_FILES}
        return [_replaced(out, before, after)] if any(before.values()) else []
    # a dataset file someone else wrote (write_dataset would drop it): the new dataset is
    # written beside out/ (a name write_dataset sweeps when a killed run leaves it) and
    # compared; only an unchanged set of tables keeps it, with the manifest replaced alone
    stage = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        write_dataset(stage, man, tables, check=True)
        after = {f: _digest(stage / f) for f in OWN_FILES}
        changed = [f for f in OWN_FILES if f != MANIFEST_FILE and before[f] != after[f]]
        if changed:
            raise ValueError(
                f"{', '.join(str(out / f) for f in foreign)}: not written by collect, and goes "
                f"with tables this run changes ({', '.join(changed)}): move it out of {out} and "
                "rerun the same command (the shards are kept; nothing was replaced)"
            )
        if before[MANIFEST_FILE] != after[MANIFEST_FILE]:
            os.replace(stage / MANIFEST_FILE, out / MANIFEST_FILE)
            fsync_dir(out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return [
        _replaced(out, before, after),
        f"kept {', '.join(str(out / f) for f in foreign)}: not written by collect (the tables "
        "it goes with are unchanged)",
    ]


def publish(
    cfg: CollectConfig,
    store: ShardStore,
    n_shards: int,
    skipped: list[str],
    clock: WorldClock,
    help_policy: HelpPolicy | None = None,
) -> tuple[dict[str, JSON], list[str]]:
    """Aggregate the ``n_shards`` finished shards of ``store`` and write the dataset into
    ``cfg.out``; returns its summary (:func:`summarize`) and what it says about the
    previous dataset it replaced (lines; none on a first publication)."""
    import duckdb

    files = {t: store.files(t, n_shards) for t in TABLES}
    try:
        tables = aggregate(
            files["steps"],
            files["states"],
            files["episodes"],
            count_invalid=cfg.invalid_episodes == "count",
        )
    except duckdb.Error as e:  # a shard damaged after it was verified
        said = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(
            f"{store.dir}: a shard cannot be read ({said}); rerun the same command (a damaged "
            "shard is run again)"
        ) from None
    summary = summarize(tables)
    criteria = sum(store.criteria_tokens(i) for i in range(n_shards))
    if criteria:  # an expert_llm's criteria: the expert's tokens outside the episodes'
        summary["expert_criteria_tokens"] = criteria
    out = Path(cfg.out)
    if not summary["counted_episodes"]:
        outcomes = ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
        raise ValueError(
            f"{out}: none of the {summary['episodes']} episodes can be published ({outcomes}); "
            "nothing written, the shards are kept (shards whose every episode ended in a "
            "server error run again when the same command is rerun)"
        )
    notes = _write(
        out,
        manifest(cfg, summary, skipped, clock, help_policy),
        {name: tables[name] for name in WRITTEN_TABLES},
    )
    if not cfg.keep_shards:
        store.remove()
    return summary, notes
