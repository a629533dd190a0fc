"""Shards are verified before they are reused: each records the sha256 of its files when
written; a damaged or truncated one (or, written before checksums, an unreadable one) is
run again with a one-line notice instead of a DuckDB traceback at publish, and a shard
whose every episode failed on the environment's side is not a finished one."""

from __future__ import annotations

import hashlib
import json
import re

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from collector_helpers import run_cli as _cli
from collector_helpers import small_args as _args
from collector_helpers import table_bytes_of as _tables

from collect.collector import collect, collect_config
from collect.shards import META, TABLES, ShardStore, table_bytes


def _rewrite(store: ShardStore, index: int, change) -> None:
    """Replace shard ``index`` by one whose episodes table is ``change(table)``, written
    the collector's way (with its checksums)."""
    d = store.path(index)
    blobs = {t: (d / f"{t}.parquet").read_bytes() for t in TABLES}
    blobs["episodes"] = table_bytes(change(pq.read_table(d / "episodes.parquet")))
    store.discard(index)
    assert store.write(index, blobs)


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    r = _cli(root / "ref", root / "work")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "4/4 shards run" in r.stdout, r.stdout
    return root


def test_each_shard_records_the_sha256_of_its_files(first):
    store = ShardStore(first / "ref")
    for i in range(4):
        meta = json.loads((store.path(i) / META).read_text())
        assert meta["episodes"] == 1 and meta["failed"] == 0
        assert sorted(meta["sha256"]) == sorted(f"{t}.parquet" for t in TABLES)
        for name, digest in meta["sha256"].items():
            data = (store.path(i) / name).read_bytes()
            assert hashlib.sha256(data).hexdigest() == digest, name
        assert store.problem(i) is None and store.done(i)


def test_a_truncated_shard_runs_again_with_one_line_and_the_same_tables(first, tmp_path):
    out = tmp_path / "out"
    r = _cli(out, first / "work")
    assert r.returncode == 0, r.stderr[-3000:]
    before = _tables(out)
    assert before == _tables(first / "ref")
    victim = out / "shards" / "000002" / "episodes.parquet"
    victim.write_bytes(victim.read_bytes()[:100])  # truncated
    r = _cli(out, first / "work")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stderr.strip().splitlines() == [
        f"collect: running 1 shard(s) of {out / 'shards'} again: 000002 (episodes.parquet does "
        "not match its sha256)"
    ]
    assert f"resuming {out}: reusing 3 of 4 shards (3 episodes)" in r.stdout
    assert re.search(r"1/4 shards run", r.stdout), r.stdout
    assert _tables(out) == before
    assert ShardStore(out).problem(2) is None  # written again, with its checksums


def test_shards_from_before_checksums_resume_and_an_unreadable_one_runs_again(first, tmp_path):
    out = tmp_path / "out"
    assert collect(collect_config(_args(out, first / "work"))).shards_run == 4
    before = _tables(out)
    store = ShardStore(out)
    for i in range(4):
        (store.path(i) / META).unlink()  # as the collector wrote them before checksums
    assert [store.problem(i) for i in range(4)] == [None] * 4  # read in full: intact
    steps = store.path(1) / "steps.parquet"
    steps.write_bytes(steps.read_bytes()[:-20])  # its footer gone
    problem = store.problem(1)
    assert problem.startswith("steps.parquet is unreadable (")
    again = collect(collect_config(_args(out, first / "work")))
    assert again.shards_run == 1 and again.notes == [
        f"republished {out}: the same dataset (every file identical)"
    ]
    assert _tables(out) == before
    assert (store.path(1) / META).exists() and not (store.path(0) / META).exists()


def test_a_shard_whose_episodes_all_failed_is_not_finished(first, tmp_path):
    """Issue 33 item 9: a run whose every episode failed (a server down) left shards that
    a rerun treated as finished; they run again, and overwrite=true runs every shard."""
    out = tmp_path / "out"
    assert collect(collect_config(_args(out, first / "work"))).shards_run == 4
    before = _tables(out)
    store = ShardStore(out)

    def failed(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index("outcome")
        return t.set_column(i, "outcome", pa.array(["server_error"] * t.num_rows))

    _rewrite(store, 3, failed)
    assert json.loads((store.path(3) / META).read_text())["failed"] == 1
    assert store.problem(3) == "all 1 episodes ended in server errors"
    (store.path(3) / META).unlink()  # a shard from before checksums: read from the table
    assert store.problem(3) == "all 1 episodes ended in server errors"
    again = collect(collect_config(_args(out, first / "work")))
    assert again.shards_run == 1
    assert _tables(out) == before
    full = collect(collect_config(_args(out, first / "work", "overwrite=true")))
    assert full.shards_run == 4 and _tables(out) == before


def test_nothing_to_publish_is_one_error_and_keeps_the_shards(first, tmp_path):
    """Every episode failed before its first step (the issue's server down): no dataset
    (the loader would say 'states.parquet: has no rows'), one line, the shards kept."""
    from collect.awm.clock import WorldClock
    from collect.config import worlds_dir
    from collect.publish import publish

    out = tmp_path / "out"
    cfg = collect_config(_args(out, first / "work"))
    assert collect(cfg).shards_run == 4
    store = ShardStore(out)

    def no_steps(t: pa.Table) -> pa.Table:
        n = t.num_rows
        t = t.set_column(
            t.schema.get_field_index("outcome"), "outcome", pa.array(["server_error"] * n)
        )
        t = t.set_column(
            t.schema.get_field_index("steps"), "steps", pc.multiply(t.column("steps"), 0)
        )
        return t.set_column(t.schema.get_field_index("valid"), "valid", pa.array([False] * n))

    for i in range(4):
        _rewrite(store, i, no_steps)
    clock = WorldClock.resolve(cfg.clock, worlds_dir(cfg))
    before = _tables(out)
    with pytest.raises(ValueError) as e:
        publish(cfg, store, 4, [], clock)
    assert str(e.value) == (
        f"{out}: none of the 4 episodes can be published (server_error 4); nothing written, "
        "the shards are kept (shards whose every episode ended in a server error run again "
        "when the same command is rerun)"
    )
    assert _tables(out) == before and all(store.present(i) for i in range(4))


def test_a_fill_that_cannot_land_keeps_the_finished_shard(first, tmp_path, monkeypatch):
    """fill() swaps a shard for its merge with a rerun's rows by two renames; when the
    second fails (a full disk, another process), the finished shard goes back in place."""
    import os
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(first / "ref", out)
    store = ShardStore(out)
    before = {t: (store.path(0) / f"{t}.parquet").read_bytes() for t in TABLES}
    real, calls = os.rename, []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="No space left"):
        store.fill(0, before, [])
    monkeypatch.setattr(os, "rename", real)
    assert {t: (store.path(0) / f"{t}.parquet").read_bytes() for t in TABLES} == before
    assert store.problem(0) is None and store.done(0)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".tmp")) == []
