"""The dataset contract, declared once (``docs/data-format.md``).

Everything that writes or reads a dataset directory takes its shape from here:

* the Arrow schemas of the tables (``STATES_SCHEMA``, ``TRANSITIONS_SCHEMA``,
  ``SCORES_SCHEMA``, and the core columns of our additions ``EPISODES_SCHEMA`` and
  ``STEPS_SCHEMA``), keyed by table name in ``SCHEMAS``;
* ``FORMAT_VERSION``, the manifest's ``format``, and :func:`build_manifest`;
* :func:`conform`, which casts a table's contract columns to the declared types
  (extra columns are kept, in place) or refuses it with a :class:`DatasetError`;
* the pieces :func:`helpdp.data.write_dataset` (the one way to write a whole
  dataset directory, checked by the loader before it is renamed into place) is
  built from;
* :func:`write_table`, one Parquet file written atomically (e.g. ``scores.parquet``
  added to an existing dataset).

Parquet is written with zstd and row groups of 2^20 rows; the bytes of a table
depend only on it and on the pyarrow version (the shipped demo regenerates byte
for byte). This module imports nothing of the project but the standard library's and pyarrow's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from helpdp.jsonvalue import JSON

__all__ = [
    "DATASET_FILES",
    "EPISODES_SCHEMA",
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "REQUIRED_TABLES",
    "SCHEMAS",
    "SCORES_SCHEMA",
    "STATES_SCHEMA",
    "STRICT_TABLES",
    "STEPS_SCHEMA",
    "TRANSITIONS_SCHEMA",
    "DatasetError",
    "build_manifest",
    "column_kind",
    "conform",
    "fsync_dir",
    "sha256_file",
    "manifest_text",
    "write_table",
]

#: the manifest's ``format``: the version of this contract
FORMAT_VERSION = 1

MANIFEST_FILE = "manifest.json"

STATES_SCHEMA = pa.schema(
    [
        ("state_id", pa.int64()),  # unique id of the state
        ("task_id", pa.string()),  # the task the state belongs to
        ("depth", pa.int32()),  # steps taken from the task's start
        ("is_start", pa.bool_()),  # an initial state of an episode
        ("terminal", pa.bool_()),  # the episode is over here
        ("success", pa.bool_()),  # terminal states: the verifier said success
        ("text", pa.string()),  # what a model sees here (rendered history); may be ""
    ]
)
TRANSITIONS_SCHEMA = pa.schema(
    [
        ("state_id", pa.int64()),  # s
        ("action", pa.int8()),  # 0 = nohelp, k >= 1 = intervention k (manifest actions[k])
        ("next_state_id", pa.int64()),  # s'
        ("count", pa.int64()),  # times s --a--> s' was observed (> 0)
    ]
)
SCORES_SCHEMA = pa.schema(
    [
        ("state_id", pa.int64()),
        ("action", pa.int8()),
        ("p_success", pa.float64()),  # a PRM's estimate of success after taking action
        ("source", pa.string()),  # the PRM
    ]
)
#: core columns of ``episodes.parquet`` (ours, optional): typed as declared when present
EPISODES_SCHEMA = pa.schema(
    [
        ("episode_id", pa.int64()),
        ("task_id", pa.string()),
        ("split", pa.string()),  # train | validation | test
        ("seed", pa.int64()),
        ("trigger_p", pa.float64()),  # probability of a random expert call per turn
        ("steps", pa.int32()),
        ("success", pa.bool_()),
        ("reward", pa.float64()),
        ("expert_calls", pa.int32()),
    ]
)
#: core columns of ``steps.parquet`` (ours, optional): typed as declared when present
STEPS_SCHEMA = pa.schema(
    [
        ("episode_id", pa.int64()),
        ("t", pa.int32()),
        ("state_id", pa.int64()),
        ("action", pa.int8()),
        ("next_state_id", pa.int64()),
    ]
)

#: table name -> schema of its contract columns (file: ``<name>.parquet``)
SCHEMAS: dict[str, pa.Schema] = {
    "states": STATES_SCHEMA,
    "transitions": TRANSITIONS_SCHEMA,
    "scores": SCORES_SCHEMA,
    "episodes": EPISODES_SCHEMA,
    "steps": STEPS_SCHEMA,
}
REQUIRED_TABLES = ("states", "transitions")
#: tables whose every contract column is required (the loader refuses them otherwise);
#: ``episodes`` and ``steps`` are read as they are, so their columns are cast when present
STRICT_TABLES = ("states", "transitions", "scores")
#: the files of a dataset directory (what :func:`helpdp.data.write_dataset` replaces as a unit)
DATASET_FILES = (MANIFEST_FILE, *(f"{name}.parquet" for name in SCHEMAS))

_COMPRESSION = "zstd"
_ROW_GROUP_SIZE = 1 << 20


class DatasetError(ValueError):
    """A dataset directory that does not satisfy the contract."""


def fail(file: str, column: str | None, row: int | None, msg: str):
    """Raise the contract's one error: ``FILE: column 'C': row R: MSG``."""
    where = file
    if column is not None:
        where += f": column '{column}'"
    if row is not None:
        where += f": row {row}"
    raise DatasetError(f"{where}: {msg}")


def column_kind(t: pa.DataType) -> str:
    """The kind the loader checks for a declared type: int, bool, str or float."""
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_floating(t):
        return "float"
    raise TypeError(f"no contract kind for {t}")


def build_manifest(
    actions, *, gamma: float = 1.0, source: Mapping[str, JSON] | None = None
) -> dict[str, JSON]:
    """``manifest.json`` as a dict: ``actions`` (``"nohelp"`` first), ``gamma``,
    ``format`` (:data:`FORMAT_VERSION`) and the provenance ``source``, in that order."""
    actions = list(actions)
    if len(actions) < 2 or actions[0] != "nohelp":
        fail(
            MANIFEST_FILE,
            "actions",
            None,
            f"must list 'nohelp' then >= 1 intervention, got {actions!r}",
        )
    return {
        "actions": actions,
        "gamma": float(gamma),
        "format": FORMAT_VERSION,
        "source": dict(source or {}),
    }


def manifest_text(manifest: Mapping[str, JSON]) -> str:
    """The bytes of ``manifest.json`` (2-space JSON, keys in the dict's order, newline)."""
    return json.dumps(manifest, indent=2, sort_keys=False) + "\n"


def conform(name: str, data) -> pa.Table:
    """``data`` (an Arrow table or a pandas DataFrame) as table ``name`` of the contract:
    each contract column cast to its declared type (a no-op when it has it already);
    extra columns kept, and the column order as given. Raises :class:`DatasetError`
    naming the file and column when a contract column cannot be cast, or is missing
    from a table of :data:`STRICT_TABLES`."""
    file = f"{name}.parquet"
    schema = SCHEMAS[name]
    if not isinstance(data, pa.Table):
        data = pa.Table.from_pandas(data, preserve_index=False)
    for f in schema:
        if f.name not in data.column_names:
            if name not in STRICT_TABLES:
                continue
            fail(file, f.name, None, f"missing column (has {data.column_names})")
        col = data.column(f.name)
        if col.type != f.type:
            try:
                col = col.cast(f.type)  # safe: refuses overflow and lossy conversions
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                fail(
                    file,
                    f.name,
                    None,
                    f"has type {data.column(f.name).type}, expected {f.type} ({e})",
                )
            i = data.column_names.index(f.name)
            data = data.set_column(i, pa.field(f.name, f.type), col)
    return data


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """A file's sha256, read in ``chunk``-byte blocks (the shards' and manifests'
    checksums, the pinned weights' and the worlds' hashes: one helper for all of them)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries to disk (a rename in it survives a crash); best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Write one Parquet file (zstd, 2^20-row groups) and flush it to disk."""
    pq.write_table(table, path, compression=_COMPRESSION, row_group_size=_ROW_GROUP_SIZE)
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def _tmp_name(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def write_table(table: pa.Table, path: str | Path) -> Path:
    """Write ``table`` to ``path`` atomically: a temporary file in the same directory,
    flushed, then renamed over ``path`` (a reader sees the old file or the new one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path, "tmp")
    try:
        _write_parquet(table, tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsync_dir(path.parent)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _sweep(path: Path) -> None:
    """Remove temporary directories a killed :func:`write_dataset` left beside ``path``
    (``.NAME.tmp-PID-*`` of a dead process); never an ``.old-`` one (it may hold data)."""
    for p in path.parent.glob(f".{path.name}.tmp-*"):
        pid = p.name[len(path.name) + 6 :].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)
