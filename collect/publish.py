"""Publishing a collection: the finished shards aggregated into the dataset's tables,
their summary, and ``manifest.json`` with its provenance (config, versions, git commit,
isolation), written atomically through the contract (:func:`helpdp.data.write_dataset`)."""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from collect.actors import actor_name
from collect.awm.clock import WorldClock
from collect.awm.env import EnvConfig
from collect.awm.sandbox import describe
from collect.config import CollectConfig, source_config
from collect.shards import ShardStore, aggregate
from helpdp.contract import build_manifest
from helpdp.data import write_dataset

__all__ = ["git_sha", "manifest", "publish", "summarize", "versions"]

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


def _isolation(env: EnvConfig) -> dict[str, Any]:
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


def _runtime(env_url: str) -> dict[str, Any]:
    """Where a ``runtime=openenv`` collection ran its episodes (``source.runtime``)."""
    return {"kind": "openenv", "env_url": env_url, "protocol": "OpenEnv AWM (MCP)"}


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


def publish(
    cfg: CollectConfig,
    store: ShardStore,
    n_shards: int,
    skipped: list[str],
    clock: WorldClock,
    help_policy: Any = None,
) -> dict[str, Any]:
    """Aggregate the ``n_shards`` finished shards of ``store`` and write the dataset into
    ``cfg.out``; returns its summary (:func:`summarize`)."""
    tables = aggregate(
        store.files("steps", n_shards),
        store.files("states", n_shards),
        store.files("episodes", n_shards),
        count_invalid=cfg.invalid_episodes == "count",
    )
    summary = summarize(tables)
    # one atomic write through the contract, which loads the result with the loader
    # before it replaces anything (self-check: a writer bug fails here, naming the
    # file, column and row); out/ is this collection's (ShardStore checked the plan),
    # so its previous dataset is replaced and shards/ carried over
    write_dataset(
        Path(cfg.out),
        manifest(cfg, summary, skipped, clock, help_policy),
        {name: tables[name] for name in ("states", "transitions", "episodes", "steps")},
        overwrite=True,
        check=True,
    )
    if not cfg.keep_shards:
        shutil.rmtree(store.dir, ignore_errors=True)
    return summary
