"""Building an AWM scenario's SQLite database, repairing rows, snapshots and resets.

:func:`build_database` follows AWM: for each table its DDL, then its indexes,
then its ``examples`` statements; then ``PRAGMA foreign_keys=ON`` and every
sample ``INSERT`` in file order. A statement SQLite rejects is retried once
with ``\\'`` escapes rewritten to SQL's ``''``; rows that still fail are
reported (:class:`StatementFailure`, with their location) instead of being
dropped silently.

The dataset's SQL runs under an authorizer that refuses ``ATTACH``/``DETACH``
(no files other than the target database) and only statements that begin
with ``CREATE``/``INSERT``/``REPLACE``/``WITH`` are accepted.

Snapshots and resets use the SQLite backup API (consistent even while other
connections are open).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helpdp.jsonvalue import JSON

__all__ = [
    "BuildAborted",
    "BuildReport",
    "StatementFailure",
    "build_database",
    "copy_database",
    "repair_statement",
    "restore_database",
]

_ALLOWED_START = re.compile(r"^\s*(?:--[^\n]*\n\s*)*(CREATE|INSERT|REPLACE|WITH)\b", re.I)
_SQLITE_ATTACH, _SQLITE_DETACH = 24, 25


@dataclass
class StatementFailure:
    """A statement SQLite rejected (after repair, for inserts)."""

    kind: str  # "ddl", "index", "example", "insert"
    table: str
    index: int  # position within the table's list (0 for the DDL itself)
    statement: str
    error: str
    location: str  # e.g. "gen_sample.jsonl:2 tables[3] 'orders' insert_statements[5]"

    def __str__(self) -> str:
        snippet = " ".join(self.statement.split())[:120]
        return f"{self.location}: {self.error} [{snippet}]"


class BuildAborted(RuntimeError):
    """The seed data went past a build limit (time, value size, file size): no database."""


# SQLite errors that mean a limit was reached, not a bad row: the build stops there.
_LIMIT_ERRORS = (
    "interrupted",
    "string or blob too big",
    "database or disk is full",
    "disk I/O error",  # a write past RLIMIT_FSIZE (EFBIG)
)


def _limit_error(e: sqlite3.Error, where: str) -> BuildAborted | None:
    """The :class:`BuildAborted` for an error that means a build limit was reached, else None.

    SQLite says "interrupted" only when the progress handler stops a statement, and
    ``build_database`` installs that handler only with a deadline.
    """
    text = str(e)
    if not any(marker in text for marker in _LIMIT_ERRORS):
        return None
    if "interrupted" in text:
        text = "time limit of the build reached (a runaway statement, e.g. a recursive CTE)"
    elif "disk is full" in text or "disk I/O error" in text:
        text = "the database grew past the build's file size limit (RLIMIT_FSIZE)"
    elif "too big" in text:
        text = "a value is larger than the build's value size limit"
    return BuildAborted(f"database build stopped at {where}: {text}")


_COUNTS = ("tables_created", "tables_failed", "rows_total", "rows_loaded", "rows_repaired")


@dataclass
class BuildReport:
    """Outcome of :func:`build_database`."""

    path: Path
    tables_created: int = 0
    tables_failed: int = 0
    rows_total: int = 0
    rows_loaded: int = 0
    rows_repaired: int = 0
    failures: list[StatementFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def row_failures(self) -> list[StatementFailure]:
        return [f for f in self.failures if f.kind == "insert"]

    @property
    def schema_failures(self) -> list[StatementFailure]:
        return [f for f in self.failures if f.kind != "insert"]

    def summary(self) -> str:
        rep = f" ({self.rows_repaired} repaired)" if self.rows_repaired else ""
        return f"{self.tables_created} tables, rows {self.rows_loaded}/{self.rows_total}{rep}"

    def to_json(self) -> dict[str, JSON]:
        """Plain JSON (the build runs in a sandboxed worker and reports back)."""
        d = asdict(self)
        d["path"] = str(self.path)
        return d

    @classmethod
    def from_json(cls, d: dict[str, JSON]) -> BuildReport:
        """The report a worker sent; ``KeyError``/``TypeError`` on a malformed one."""
        failures = [StatementFailure(**f) for f in d.get("failures") or []]
        counts = {k: int(d[k]) for k in _COUNTS}
        return cls(path=Path(d["path"]), failures=failures, **counts)


def repair_statement(stmt: str) -> str:
    r"""Rewrite C-style ``\'`` quote escapes (which SQLite rejects) as ``''``."""
    return stmt.replace("\\'", "''")


def _authorizer(action: int, *_args: str | None) -> int:
    return sqlite3.SQLITE_DENY if action in (_SQLITE_ATTACH, _SQLITE_DETACH) else sqlite3.SQLITE_OK


def _execute(cur: sqlite3.Cursor, stmt: object) -> None:
    if not isinstance(stmt, str):
        raise sqlite3.ProgrammingError(f"statement is a {type(stmt).__name__}, not a string")
    if not _ALLOWED_START.match(stmt):
        first = stmt.strip().split(None, 1)[0] if stmt.strip() else "(empty)"
        raise sqlite3.ProgrammingError(f"refused statement kind {first[:20]!r}")
    cur.execute(stmt)


def build_database(
    path: str | Path,
    db_schema: dict[str, JSON] | None,
    sample_data: dict[str, JSON] | None = None,
    *,
    schema_source: str = "gen_db.jsonl",
    sample_source: str = "gen_sample.jsonl",
    deadline: float | None = None,
    max_value_bytes: int | None = None,
) -> BuildReport:
    """Create a fresh SQLite database at ``path`` from an AWM schema and sample data.

    ``schema_source``/``sample_source`` prefix the failure locations (e.g.
    ``"gen_db.jsonl:3"``). Never raises for bad data: see ``report.failures``.
    Past a limit — ``deadline`` (``time.monotonic()``), ``max_value_bytes`` (SQLite's
    length limit) or the process's file size limit — it raises :class:`BuildAborted`.
    """
    import time

    def limit_check(e: sqlite3.Error, where: str) -> None:
        aborted = _limit_error(e, where)
        if aborted is not None:
            raise aborted from None

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + suffix)
    report = BuildReport(path=path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.set_authorizer(_authorizer)
    if max_value_bytes:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, int(max_value_bytes))
    if deadline is not None:
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        conn.execute("PRAGMA synchronous=OFF")
        cur = conn.cursor()
        conn.execute("BEGIN")
        for t_i, table in enumerate((db_schema or {}).get("tables") or []):
            if not isinstance(table, dict):
                report.failures.append(
                    StatementFailure(
                        "ddl",
                        "?",
                        0,
                        str(table)[:200],
                        "table entry is not an object",
                        f"{schema_source} tables[{t_i}]",
                    )
                )
                report.tables_failed += 1
                continue
            name = str(table.get("name", f"#{t_i}"))
            where = f"{schema_source} tables[{t_i}] {name!r}"
            try:
                _execute(cur, table.get("ddl"))
            except sqlite3.Error as e:
                limit_check(e, f"{where} ddl")
                report.tables_failed += 1
                report.failures.append(
                    StatementFailure("ddl", name, 0, str(table.get("ddl")), str(e), f"{where} ddl")
                )
                continue
            report.tables_created += 1
            for kind, key in (("index", "indexes"), ("example", "examples")):
                for s_i, stmt in enumerate(table.get(key) or []):
                    try:
                        _execute(cur, stmt)
                    except sqlite3.Error as e:
                        limit_check(e, f"{where} {key}[{s_i}]")
                        report.failures.append(
                            StatementFailure(
                                kind, name, s_i, str(stmt), str(e), f"{where} {key}[{s_i}]"
                            )
                        )
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            limit_check(e, f"{schema_source} (commit)")
            raise
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("BEGIN")
        for t_i, table in enumerate((sample_data or {}).get("tables") or []):
            if not isinstance(table, dict):
                continue
            name = str(table.get("table_name", f"#{t_i}"))
            where = f"{sample_source} tables[{t_i}] {name!r}"
            for s_i, stmt in enumerate(table.get("insert_statements") or []):
                report.rows_total += 1
                try:
                    _execute(cur, stmt)
                    report.rows_loaded += 1
                    continue
                except sqlite3.Error as e:
                    limit_check(e, f"{where} insert_statements[{s_i}]")
                    error = str(e)
                repaired = repair_statement(stmt) if isinstance(stmt, str) else stmt
                if repaired != stmt:
                    try:
                        _execute(cur, repaired)
                        report.rows_loaded += 1
                        report.rows_repaired += 1
                        continue
                    except sqlite3.Error as e:
                        limit_check(e, f"{where} insert_statements[{s_i}]")
                        error = f"{e} (also after repairing \\' escapes)"
                report.failures.append(
                    StatementFailure(
                        "insert", name, s_i, str(stmt), error, f"{where} insert_statements[{s_i}]"
                    )
                )
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            limit_check(e, f"{sample_source} (commit)")
            raise
    finally:
        conn.close()
    return report


def copy_database(src: str | Path, dst: str | Path) -> None:
    """Consistent copy of ``src`` to a fresh file ``dst`` (SQLite backup API)."""
    dst = Path(dst)
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(dst) + suffix)
    source = sqlite3.connect(f"file:{Path(src).resolve()}?mode=ro", uri=True)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def restore_database(snapshot: str | Path | sqlite3.Connection, dst: str | Path) -> None:
    """Overwrite the database at ``dst`` with ``snapshot`` in place (other connections stay valid)."""
    own = not isinstance(snapshot, sqlite3.Connection)
    source = (
        sqlite3.connect(f"file:{Path(snapshot).resolve()}?mode=ro", uri=True) if own else snapshot
    )
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        if own:
            source.close()
