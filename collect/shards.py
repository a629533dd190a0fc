"""Shards on disk: atomic writes, resumption, and the aggregation into a dataset.

Layout of an output directory while (and after) collecting::

    OUT/shards/plan.json         what the shards are (config fingerprint, episode ids)
    OUT/shards/000000/           one finished shard: steps, states, episodes (.parquet)
                                 and meta.json (each file's sha256, episode counts)
    OUT/shards/.tmp-*            a shard being written (removed on the next run)
    .OUT.lock                    beside OUT: held (flock) by the one collect writing OUT

A shard directory is written under a temporary name and renamed into place, so
it either exists complete or not at all; a rerun of the same command reuses the
shards that exist once they are verified (:meth:`ShardStore.problem`: each file
against its recorded sha256, or, for shards written before checksums, read in full;
a shard whose every episode ended in a server error is not finished either), and
runs the others. A shard written with episodes lost to the runtime (``meta.json``'s
``lost``: their ids; :mod:`collect.worker`) holds the others and is unfinished: a rerun
runs only the lost ones and merges them in (:meth:`ShardStore.fill`). A directory with another collection's ``plan.json`` is refused;
``overwrite=true`` starts over (every shard run again). Only the entries named above
are ever removed.

A shard is bound to the plan that made it: its ``meta.json`` records the plan's
fingerprint, the shard's index and the ids of its episodes, and a rerun reuses it only
when all three are this plan's and its tables hold exactly those episodes (after the
checksums). A shard that is not (copied from another collection or another slot, its
tables swapped with the checksums updated) or that is a link is not reused: it is
moved aside to ``shards/rejected-NNNNNN`` (kept, never removed; one line on stderr)
and run again. A damaged shard of this plan (a checksum that does not match) is removed
and run again, as before. A shard written before the binding (no fingerprint in its
``meta.json``, or no ``meta.json``) is checked against the plan instead, once its
checksums match (or, before checksums, its tables read in full): its tables must hold
exactly the episodes this plan gives its index (those the collector passes to
:meth:`ShardStore.prepare`; less any its ``meta.json`` records lost), and its
``episodes.parquet``'s ``task_id`` and ``seed``, where it has them, must be theirs. One
that does is reused; one that does not (copied from another collection, another seed,
another slot) is moved aside like a foreign one. Nothing is written or removed through
a link: ``out/shards`` or its ``plan.json`` as a symbolic link is refused
(:class:`PlanMismatch`, with or without ``overwrite=true``), and the lock beside
``out`` is opened ``O_NOFOLLOW``.

:func:`aggregate` builds the dataset tables from all shards with DuckDB
group-bys (no Python loop per row), typed as :mod:`helpdp.contract` declares them
(the SQL casts to the contract's types, and each result is checked against its
schema); rows are sorted so the files do not depend on sharding, worker count or
completion order. The collector writes them with :func:`helpdp.data.write_dataset`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import stat
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from helpdp.contract import STATES_SCHEMA, TRANSITIONS_SCHEMA, conform, fsync_dir, sha256_file
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "FAILED_OUTCOMES",
    "TABLES",
    "OutputBusy",
    "OutputLock",
    "PlanMismatch",
    "ShardStore",
    "aggregate",
    "table_bytes",
]

TABLES = ("steps", "states", "episodes")

#: a shard's metadata file: the sha256 of each table file, its episodes and failures
META = "meta.json"

#: outcomes where the environment (server, runtime) failed the episode: a shard whose
#: every episode ended so is not finished (a rerun runs it again)
FAILED_OUTCOMES = ("server_error",)

_SHARD_NAME = re.compile(r"\d{6}")


class PlanMismatch(RuntimeError):
    """The output directory holds shards (or a dataset) of a different collection."""


class OutputBusy(RuntimeError):
    """Another process is writing the same output directory."""


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
    """Write a text file atomically (a fresh file renamed over ``path``: a link there is
    replaced, never written through)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(tmp, flags, 0o644), "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _failed(outcomes: pa.Array | pa.ChunkedArray) -> int:
    return sum(o in FAILED_OUTCOMES for o in outcomes.to_pylist())


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def _kind(path: Path) -> str | None:
    """What ``path`` is, unfollowed: ``dir``, ``file``, ``link``, ``other``; None: absent."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def _ids(source: bytes | str | Path) -> list[int]:
    """The ``episode_id`` column of a shard's table (a path or Parquet bytes)."""
    src = io.BytesIO(source) if isinstance(source, bytes) else source
    return [int(i) for i in pq.read_table(src, columns=["episode_id"]).column(0).to_pylist()]


class OutputLock:
    """One writer per output directory: an exclusive ``flock`` on ``.NAME.lock`` beside
    ``out`` (beside, not inside: publishing renames ``out``), holding the writer's pid.
    A second writer gets :class:`OutputBusy` naming that pid. The file is removed on
    release; one left by a killed run holds no lock (the kernel drops it) and is reused."""

    def __init__(self, out: str | Path):
        self.out = Path(out)
        target = self.out.resolve()
        self.path = target.with_name(f".{target.name or 'root'}.lock")
        self.fd: int | None = None

    def acquire(self) -> OutputLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(
                    self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644
                )
            except OSError as e:
                if e.errno != errno.ELOOP:
                    raise
                raise OutputBusy(
                    f"{self.path}: a symbolic link; the lock of {self.out} is never opened "
                    "through a link: remove it"
                ) from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OutputBusy(f"{self.path}: not a regular file (the lock of {self.out})")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise OutputBusy(
                    f"{self.out}: another collect (pid {holder}) is writing it ({self.path} is "
                    "locked); wait for it to end or use another out="
                ) from None
            try:
                st, now = os.fstat(fd), os.lstat(self.path)
                same = (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # its holder removed the file as we opened it: lock the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            st, now = os.fstat(self.fd), os.lstat(self.path)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):  # ours, not a swapped name
                os.unlink(self.path)  # still locked: a waiting writer retries on the new file
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class ShardStore:
    """The shards of one collection under ``out/shards``."""

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.dir = self.out / "shards"
        #: the plan's fingerprint (:meth:`prepare`; else ``plan.json``'s, when read)
        self.fingerprint: str | None = None
        #: the shards :meth:`problem` found not this plan's: moved aside by :meth:`discard`
        self._foreign: dict[int, str] = {}
        #: each shard's episodes as the plan gives them (:meth:`prepare`): id -> (task
        #: id, seed); None when not given (a shard written before the binding is then
        #: reused on its checksums alone)
        self._planned: list[dict[int, tuple[str, int]]] | None = None

    def path(self, index: int) -> Path:
        return self.dir / f"{index:06d}"

    def _own_dir(self) -> bool:
        """Whether ``shards/`` exists; :class:`PlanMismatch` when it is a link or not a
        directory (nothing is written or removed through it)."""
        kind = _kind(self.dir)
        if kind == "link":
            raise PlanMismatch(
                f"{self.dir}: a symbolic link; collect writes its shards in a directory of "
                "its own, never through a link: remove the link or use another out="
            )
        if kind not in (None, "dir"):
            raise PlanMismatch(
                f"{self.dir}: not a directory; collect writes its shards there: move it away "
                "or use another out="
            )
        return kind == "dir"

    def _plan_fingerprint(self) -> str | None:
        """This plan's fingerprint: :meth:`prepare`'s, else the one ``plan.json`` records."""
        if self.fingerprint is None and _kind(self.dir / "plan.json") == "file":
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self.fingerprint = json.loads((self.dir / "plan.json").read_text()).get(
                    "fingerprint"
                )
        return self.fingerprint

    def prepare(
        self,
        plan: dict[str, JSON],
        *,
        overwrite: bool = False,
        episodes: Sequence[Sequence[Mapping[str, JSON]]] | None = None,
    ) -> None:
        """Create the directory or check it belongs to ``plan``; clear leftovers of a crash.
        ``overwrite``: remove every shard first (the collection runs again in full).
        ``episodes``: each shard's episodes (``episode_id``, ``task_id``, ``seed``), what
        a shard written before the binding is checked against (:meth:`problem`)."""
        if episodes is not None:
            self._planned = [
                {int(e["episode_id"]): (str(e["task_id"]), int(e["seed"])) for e in shard}
                for shard in episodes
            ]
        self._own_dir()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._own_dir()
        plan_path = self.dir / "plan.json"
        if _kind(plan_path) not in (None, "file"):
            raise PlanMismatch(
                f"{plan_path}: not a regular file (a link or else); collect writes its plan "
                "there, never through a link: remove it or use another out="
            )
        if overwrite:
            self.clear()
        elif plan_path.exists():
            try:
                old = json.loads(plan_path.read_text())
            except (OSError, ValueError) as e:
                raise PlanMismatch(
                    f"{plan_path}: unreadable ({_first_line(e)}); use another out= or overwrite=true"
                ) from None
            if not isinstance(old, dict) or old.get("fingerprint") != plan.get("fingerprint"):
                old = old if isinstance(old, dict) else {}
                differ = sorted(
                    k
                    for k in set(old.get("config", {})) | set(plan.get("config", {}))
                    if old.get("config", {}).get(k) != plan.get("config", {}).get(k)
                )
                raise PlanMismatch(
                    f"{self.out} holds shards of another collection (config differs in: "
                    f"{', '.join(differ) or 'the schedule'}); use another out= or overwrite=true"
                )
        self.fingerprint = plan.get("fingerprint")
        for leftover in self.dir.glob(".tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)  # a link or a file: refused, kept
        write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n", plan_path)

    def clear(self) -> None:
        """Remove this store's shards, plan, do-nothing verdicts and leftovers (nothing else
        in ``shards/``; an entry named like a shard that is a link or a file is moved aside,
        not removed)."""
        if not self._own_dir():
            return
        for entry in sorted(self.dir.iterdir()):
            if _SHARD_NAME.fullmatch(entry.name):
                if _kind(entry) == "dir":
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    self._set_aside(entry, f"{entry} is not a shard directory (a link or a file)")
            elif entry.name.startswith(".tmp-"):
                shutil.rmtree(entry, ignore_errors=True)
        for name in ("plan.json", "untouched.json"):  # untouched.json: collect.plan's
            if _kind(self.dir / name) == "file":
                with contextlib.suppress(FileNotFoundError):
                    (self.dir / name).unlink()

    def remove(self) -> None:
        """:meth:`clear`, then ``shards/`` itself unless it holds files of someone else."""
        self.clear()
        with contextlib.suppress(OSError):
            self.dir.rmdir()

    def present(self, index: int) -> bool:
        """Shard ``index`` was written (not verified: :meth:`problem`); a link or a file
        in its place counts (it is not reused, and not written through)."""
        return _kind(self.path(index)) is not None

    def problem(self, index: int) -> str | None:
        """Why the written shard ``index`` cannot be reused, or None when it is intact and
        finished: not this plan's (a link; its :data:`META` names another plan's
        fingerprint, another index, or episodes its tables do not hold; written before the
        binding, tables that do not hold the episodes the plan gives ``index``: see the
        module's docstring), a file missing or not matching the sha256 recorded when it was
        written (a shard from before checksums: unreadable), or every episode failed by
        the environment (:data:`FAILED_OUTCOMES`)."""
        self._foreign.pop(index, None)
        problem, foreign = self._check(index)
        if foreign:
            self._foreign[index] = problem
        return problem

    def _check(self, index: int) -> tuple[str | None, bool]:
        """:meth:`problem`, and whether the shard is not this plan's (moved aside)."""
        d = self.path(index)
        kind = _kind(d)
        if kind != "dir":
            what = "a symbolic link" if kind == "link" else "not a directory"
            return f"{d} is {what}, not a shard this collection wrote", True
        episodes = failed = 0
        for name in (*(f"{t}.parquet" for t in TABLES), META):
            kind = _kind(d / name)
            if kind is None and name != META:
                return f"{name} is missing", False
            if kind not in (None, "file"):
                return f"{d / name} is not a regular file (a link or else)", True
        bound: dict[str, JSON] | None = None
        if (d / META).exists():
            try:
                m = json.loads((d / META).read_text())
                sums, episodes, failed = m["sha256"], int(m["episodes"]), int(m["failed"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                return f"{META} is unreadable ({_first_line(e)})", False
            if "fingerprint" in m:
                bound = m
                mine = self._plan_fingerprint()
                if mine is not None and m["fingerprint"] != mine:
                    return (
                        f"made for another plan (its {META} names fingerprint "
                        f"{str(m['fingerprint'])[:12]}, this collection's is {mine[:12]})"
                    ), True
                if m.get("index") != index:
                    return f"is shard {m.get('index')!s:0>6} of its plan, not {index:06d}", True
            for t in TABLES:
                if sha256_file(d / f"{t}.parquet") != sums.get(f"{t}.parquet"):
                    return f"{t}.parquet does not match its sha256", False
        else:  # written before checksums: readable in full?
            for t in TABLES:
                try:
                    table = pq.read_table(d / f"{t}.parquet")
                except (OSError, ValueError, pa.ArrowException) as e:
                    return f"{t}.parquet is unreadable ({_first_line(e)})", False
                if t == "episodes":
                    if "outcome" not in table.column_names:
                        return "episodes.parquet has no outcome column", False
                    episodes, failed = table.num_rows, _failed(table.column("outcome"))
        held = self._held(d, bound) if bound is not None else self._unbound(d, index)
        if held:
            return held, True
        if episodes and failed == episodes:
            return f"all {episodes} episodes ended in server errors", False
        return None, False

    def _held(self, d: Path, meta: dict[str, JSON]) -> str | None:
        """Why the tables of shard ``d`` do not hold exactly the episodes its ``meta``
        records (those not lost to the runtime), or None."""
        try:
            recorded = {int(i) for i in meta.get("episode_ids") or []}
            want = recorded - {int(i) for i in meta.get("lost") or []}
            episodes = _ids(d / "episodes.parquet")
            others = {i for t in ("steps", "states") for i in _ids(d / f"{t}.parquet")}
        except (OSError, ValueError, TypeError, pa.ArrowException, KeyError) as e:
            return f"its episode ids cannot be read ({_first_line(e)})"
        strange = (set(episodes) ^ want) | (others - want)
        if strange or len(episodes) != len(set(episodes)):
            return (
                f"holds episodes of another shard ({len(strange)} episode ids in its tables "
                f"are not the {len(recorded)} its {META} records, or are there twice)"
            )
        return None

    def _unbound(self, d: Path, index: int) -> str | None:
        """Why the tables of shard ``d``, written before the binding, do not hold exactly
        the episodes this plan gives shard ``index`` (less those its :data:`META` records
        lost; their task ids and seeds where its episodes table has them), or None; None
        too when the plan's episodes were not given (:meth:`prepare`)."""
        if self._planned is None:
            return None
        planned = self._planned[index] if 0 <= index < len(self._planned) else {}
        try:
            lost = {int(i) for i in self.lost(index)}
            table = pq.read_table(d / "episodes.parquet")
            episodes = [int(i) for i in table.column("episode_id").to_pylist()]
            others = {i for t in ("steps", "states") for i in _ids(d / f"{t}.parquet")}
        except (OSError, ValueError, TypeError, pa.ArrowException, KeyError) as e:
            return f"its episode ids cannot be read ({_first_line(e)})"
        want = set(planned) - lost
        strange = (set(episodes) ^ want) | (others - want) | (lost - set(planned))
        if strange or len(episodes) != len(set(episodes)):
            return (
                f"written before the binding, it holds episodes this plan does not give shard "
                f"{index:06d} ({len(strange)} episode ids in its tables are not the "
                f"{len(planned)} of the plan, or are there twice)"
            )
        for pos, column in enumerate(("task_id", "seed")):
            if column not in table.column_names:
                continue
            for i, value in zip(episodes, table.column(column).to_pylist()):
                if value is None or str(value) != str(planned[i][pos]):
                    return (
                        f"written before the binding, its episode {i} has {column} {value!r}, "
                        f"not the plan's {planned[i][pos]!r}"
                    )
        return None

    def done(self, index: int) -> bool:
        """Shard ``index`` is written, intact and finished (:meth:`problem`, :meth:`lost`)."""
        return self.present(index) and self.problem(index) is None and not self.lost(index)

    def lost(self, index: int) -> list[int]:
        """The ids of the episodes of written shard ``index`` lost to the runtime (not in
        its tables; run again by a rerun); [] for a finished or unreadable shard."""
        try:
            m = json.loads((self.path(index) / META).read_text())
            return [int(i) for i in m.get("lost") or []]
        except (OSError, ValueError, TypeError, AttributeError):
            return []

    def discard(self, index: int) -> None:
        """Make room to run shard ``index`` again: a shard of this plan is removed; one that
        is not (:meth:`problem` said so, or a link or a file in its place) is moved aside
        to ``rejected-NNNNNN`` (kept: collect did not write it for this plan)."""
        self._own_dir()
        d = self.path(index)
        foreign = self._foreign.pop(index, None)
        if foreign is None and _kind(d) not in (None, "dir"):
            foreign = f"{d} is not a shard directory (a link or a file)"
        if foreign is not None:
            self._set_aside(d, foreign)
        else:
            shutil.rmtree(d, ignore_errors=True)

    def _set_aside(self, entry: Path, why: str) -> Path:
        """Rename ``entry`` (itself, not what a link names) to ``rejected-<name>`` beside it
        (``-1``, ``-2``... when taken), saying so in one line on stderr."""
        dest = entry.with_name(f"rejected-{entry.name}")
        n = 0
        while _kind(dest) is not None:
            n += 1
            dest = entry.with_name(f"rejected-{entry.name}-{n}")
        os.rename(entry, dest)
        print(
            f"collect: {entry}: not reused ({why}); moved to {dest} (kept)",
            file=sys.stderr,
            flush=True,
        )
        return dest

    def write(
        self,
        index: int,
        blobs: dict[str, bytes],
        lost: list[int] | None = None,
        criteria_tokens: int = 0,
    ) -> bool:
        """Write one shard atomically, with its :data:`META` (``lost``: ids of its
        episodes lost to the runtime, not in ``blobs``; ``criteria_tokens``: the expert's
        tokens its run spent outside any episode); False when it already exists."""
        self._own_dir()
        final = self.path(index)
        if _kind(final) is not None:
            return False
        tmp = self._staged(index, blobs, lost, criteria_tokens)
        try:
            try:
                os.rename(tmp, final)
            except OSError:
                if _kind(final) is not None:
                    return False
                raise
            fsync_dir(self.dir)
            return True
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def fill(
        self,
        index: int,
        blobs: dict[str, bytes],
        lost: list[int] | None = None,
        criteria_tokens: int = 0,
    ) -> None:
        """Merge the rows of a rerun of shard ``index``'s lost episodes (``blobs``) into
        it; ``lost``: those still lost. The shard is replaced by two renames (a crash
        between them leaves it missing: the next run runs it in full)."""
        self._own_dir()
        final = self.path(index)
        if _kind(final) != "dir":
            raise PlanMismatch(f"{final}: not a shard directory (a link or a file)")
        merged = {}
        for name in TABLES:
            old = pq.read_table(final / f"{name}.parquet")
            new = pq.read_table(io.BytesIO(blobs[name]))
            merged[name] = table_bytes(pa.concat_tables([old, new.cast(old.schema)]))
        tmp = self._staged(index, merged, lost, self.criteria_tokens(index) + criteria_tokens)
        old_dir = self.dir / f".tmp-old-{index:06d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(final, old_dir)
            try:
                os.rename(tmp, final)
            except BaseException:  # the merged shard did not land: the old one goes back
                os.rename(old_dir, final)
                raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        fsync_dir(self.dir)
        shutil.rmtree(old_dir, ignore_errors=True)

    def criteria_tokens(self, index: int) -> int:
        """The expert's tokens the runs of written shard ``index`` spent outside any
        episode (an ``expert_llm``'s criteria, once per task and process); 0 if unknown."""
        try:
            return int(json.loads((self.path(index) / META).read_text()).get("criteria_tokens", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            return 0

    def _staged(
        self, index: int, blobs: dict[str, bytes], lost: list[int] | None, criteria_tokens: int = 0
    ) -> Path:
        """A complete shard directory under a temporary name (files, meta, fsynced); its
        meta binds it to this plan (fingerprint, index, episode ids) when the plan is known."""
        outcomes = pq.read_table(io.BytesIO(blobs["episodes"]), columns=["outcome"])
        meta: dict[str, JSON] = {
            "sha256": {f"{t}.parquet": hashlib.sha256(blobs[t]).hexdigest() for t in TABLES},
            "episodes": outcomes.num_rows,
            "failed": _failed(outcomes.column("outcome")),
        }
        fingerprint = self._plan_fingerprint()
        if fingerprint is not None:
            ids = set(_ids(blobs["episodes"])) | {int(i) for i in lost or []}
            meta.update(fingerprint=fingerprint, index=int(index), episode_ids=sorted(ids))
        if lost:
            meta["lost"] = sorted(int(i) for i in lost)
        if criteria_tokens:
            meta["criteria_tokens"] = int(criteria_tokens)
        tmp = self.dir / f".tmp-{index:06d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            for name in TABLES:
                _write_file(tmp / f"{name}.parquet", blobs[name])
            _write_file(tmp / META, (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())
            fsync_dir(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return tmp

    def files(self, table: str, n_shards: int) -> list[str]:
        return [str(self.path(i) / f"{table}.parquet") for i in range(n_shards)]


def _arrow(rel: duckdb.DuckDBPyRelation) -> pa.Table:
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
