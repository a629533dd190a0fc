"""Shards on disk: atomic writes, resumption, and the aggregation into a dataset.

Layout of an output directory while (and after) collecting::

    OUT/shards/plan.json         what the shards are (config fingerprint, episode ids)
    OUT/shards/000000/           one finished shard: steps, states, episodes (.parquet)
    OUT/shards/.tmp-*            a shard being written (removed on the next run)

A shard directory is written under a temporary name and renamed into place, so
it either exists complete or not at all; a rerun of the same command skips the
shards that exist. A directory with another collection's ``plan.json`` is
refused (``overwrite=true`` starts over).

:func:`aggregate` builds the dataset tables from all shards with DuckDB
group-bys (no Python loop per row), typed as :mod:`helpdp.contract` declares them
(the SQL casts to the contract's types, and each result is checked against its
schema); rows are sorted so the files do not depend on sharding, worker count or
completion order. The collector writes them with :func:`helpdp.data.write_dataset`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from helpdp.contract import STATES_SCHEMA, TRANSITIONS_SCHEMA, conform, fsync_dir

__all__ = [
    "TABLES",
    "PlanMismatch",
    "ShardStore",
    "aggregate",
    "table_bytes",
]

TABLES = ("steps", "states", "episodes")


class PlanMismatch(RuntimeError):
    """The output directory holds shards of a different collection."""


def table_bytes(table: pa.Table) -> bytes:
    """``table`` as Parquet bytes (how shards travel from workers to the writer)."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def write_text(text: str, path: Path) -> None:
    """Write a text file atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        _write_file(tmp, text.encode("utf-8"))
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


class ShardStore:
    """The shards of one collection under ``out/shards``."""

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.dir = self.out / "shards"

    def path(self, index: int) -> Path:
        return self.dir / f"{index:06d}"

    def prepare(self, plan: dict[str, Any], *, overwrite: bool = False) -> None:
        """Create the directory or check it belongs to ``plan``; clear leftovers of a crash."""
        self.dir.mkdir(parents=True, exist_ok=True)
        plan_path = self.dir / "plan.json"
        if plan_path.exists():
            old = json.loads(plan_path.read_text())
            if old.get("fingerprint") != plan.get("fingerprint"):
                if not overwrite:
                    differ = sorted(
                        k
                        for k in set(old.get("config", {})) | set(plan.get("config", {}))
                        if old.get("config", {}).get(k) != plan.get("config", {}).get(k)
                    )
                    raise PlanMismatch(
                        f"{self.out} holds shards of another collection (config differs in: "
                        f"{', '.join(differ) or 'the schedule'}); use another out= or overwrite=true"
                    )
                shutil.rmtree(self.dir)
                self.dir.mkdir(parents=True)
        for leftover in self.dir.glob(".tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n", plan_path)

    def done(self, index: int) -> bool:
        return all((self.path(index) / f"{t}.parquet").is_file() for t in TABLES)

    def write(self, index: int, blobs: dict[str, bytes]) -> bool:
        """Write one shard atomically; False when it already exists (nothing written)."""
        final = self.path(index)
        if final.exists():
            return False
        tmp = self.dir / f".tmp-{index:06d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            for name in TABLES:
                _write_file(tmp / f"{name}.parquet", blobs[name])
            fsync_dir(tmp)
            try:
                os.rename(tmp, final)
            except OSError:
                if final.exists():
                    return False
                raise
            fsync_dir(self.dir)
            return True
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def files(self, table: str, n_shards: int) -> list[str]:
        return [str(self.path(i) / f"{table}.parquet") for i in range(n_shards)]


def _arrow(rel: Any) -> pa.Table:
    fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
    return fetch()


#: DuckDB's name of each Arrow type the contract declares
_SQL_TYPES = {
    pa.int8(): "TINYINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.bool_(): "BOOLEAN",
    pa.string(): "VARCHAR",
    pa.float64(): "DOUBLE",
}


def _sql(schema: pa.Schema, column: str) -> str:
    """The SQL type of ``column`` in a contract schema (for a ``CAST``)."""
    return _SQL_TYPES[schema.field(column).type]


def aggregate(
    steps_files: list[str],
    states_files: list[str],
    episodes_files: list[str],
    *,
    count_invalid: bool = True,
    threads: int | None = None,
) -> dict[str, pa.Table]:
    """Dataset tables from shard files: ``states``, ``transitions``, ``episodes``, ``steps``.

    Every episode is listed, with ``counted``: it has steps and, unless
    ``count_invalid``, a valid outcome. Only counted episodes enter states,
    transitions and steps. A state's ``depth`` is the smallest it was seen at, its ``text`` the one of
    that visit (ties: lowest episode id, then turn). Raises ValueError on an id that
    names two tasks, or that is terminal in one episode and not in another (a collision).
    """
    import duckdb

    con = duckdb.connect()
    try:
        if threads:
            con.execute(f"SET threads = {int(threads)}")

        keep = "TRUE" if count_invalid else "valid"
        S, T = STATES_SCHEMA, TRANSITIONS_SCHEMA  # noqa: N806 (the contract's types)

        def src(files: list[str]) -> str:
            return (
                "read_parquet([" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "])"
            )

        states = _arrow(
            con.sql(
                f"""
                SELECT CAST(state_id AS {_sql(S, "state_id")}) AS state_id,
                       CAST(min(task_id) AS {_sql(S, "task_id")}) AS task_id,
                       CAST(min(depth) AS {_sql(S, "depth")}) AS depth,
                       CAST(bool_or(is_start) AS {_sql(S, "is_start")}) AS is_start,
                       CAST(bool_or(terminal) AS {_sql(S, "terminal")}) AS terminal,
                       CAST(bool_or(success) AS {_sql(S, "success")}) AS success,
                       CAST(arg_min(text, (depth, episode_id, t)) AS {_sql(S, "text")}) AS text,
                       min(task_id) <> max(task_id) OR bool_or(terminal) <> bool_and(terminal)
                           OR bool_or(success) <> bool_and(success) AS clash
                FROM {src(states_files)}
                WHERE {keep}
                GROUP BY state_id
                ORDER BY state_id
                """
            )
        )
        clash = states.column("clash").to_numpy(zero_copy_only=False)
        if clash.any():
            bad = states.column("state_id")[int(clash.argmax())].as_py()
            raise ValueError(
                f"state id {bad} names different tasks or terminal/non-terminal situations "
                "(an id collision)"
            )
        states = conform("states", states.drop_columns(["clash"]))
        transitions = _arrow(
            con.sql(
                f"""
                SELECT CAST(state_id AS {_sql(T, "state_id")}) AS state_id,
                       CAST(action AS {_sql(T, "action")}) AS action,
                       CAST(next_state_id AS {_sql(T, "next_state_id")}) AS next_state_id,
                       CAST(count(*) AS {_sql(T, "count")}) AS count
                FROM {src(steps_files)}
                WHERE {keep}
                GROUP BY state_id, action, next_state_id
                ORDER BY state_id, action, next_state_id
                """
            )
        )
        transitions = conform("transitions", transitions)
        steps = _arrow(
            con.sql(
                f"SELECT * EXCLUDE (valid) FROM {src(steps_files)} WHERE {keep} "
                "ORDER BY episode_id, t"
            )
        )
        episodes = _arrow(
            con.sql(
                f"SELECT * REPLACE (steps > 0 AND {keep} AS counted) FROM "
                f"(SELECT *, FALSE AS counted FROM {src(episodes_files)}) ORDER BY episode_id"
            )
        )
    finally:
        con.close()
    return {"states": states, "transitions": transitions, "episodes": episodes, "steps": steps}
