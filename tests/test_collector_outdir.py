"""What a collection may do to its ``out=`` (issue 34): a rerun never deletes a file it
did not write (``scores.parquet`` of ``prm.score``, a user's notes) and says what it
replaced; a change of the tables such a file goes with is refused by name; another
config or another kind of directory is one line and exit 2; one writer at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from collector_helpers import SMALL
from collector_helpers import run_cli as _cli
from collector_helpers import small_args as _args
from collector_helpers import table_bytes_of as _tables

from collect.collector import collect, collect_config
from collect.shards import TABLES, OutputBusy, OutputLock, PlanMismatch, ShardStore, table_bytes
from helpdp.contract import conform, write_table


def _scores(out: Path) -> bytes:
    """``scores.parquet`` as ``prm.score`` writes it (the contract's ``write_table``)."""
    states = pd.read_parquet(out / "states.parquet")
    df = pd.DataFrame(
        {"state_id": states["state_id"], "action": 0, "p_success": 0.5, "source": "test"}
    )
    write_table(conform("scores", df), out / "scores.parquet")
    return (out / "scores.parquet").read_bytes()


def _one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """A finished collection with scores.parquet and a user's files beside its tables."""
    root = tmp_path_factory.mktemp("outdir")
    out, work = root / "data", root / "work"
    r = _cli(out, work)
    assert r.returncode == 0, r.stderr[-3000:]
    return out, work


def test_a_rerun_keeps_files_it_did_not_write_and_says_what_it_replaced(done):
    out, work = done
    tables = _tables(out)
    scores = _scores(out)
    (out / "notes.txt").write_text("mine\n")
    (out / "shards" / "README").write_text("mine too\n")
    r = _cli(out, work)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[:2] == [
        f"republished {out}: the same dataset (every file identical)",
        f"kept {out / 'scores.parquet'}: not written by collect (the tables it goes with are "
        "unchanged)",
    ]
    # the run's line (a format_error explanation may follow it)
    assert [s for s in lines if "shards run" in s] == [s for s in lines if "0/4 shards run" in s]
    assert any("0/4 shards run" in s for s in lines), lines
    assert (out / "scores.parquet").read_bytes() == scores and _tables(out) == tables
    # overwrite=true runs every shard again; the same tables keep the scores
    r = _cli(out, work, "overwrite=true")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "4/4 shards run" in r.stdout and f"kept {out / 'scores.parquet'}" in r.stdout
    assert (out / "scores.parquet").read_bytes() == scores and _tables(out) == tables
    # keep_shards=false removes the shards it wrote, nothing else
    r = _cli(out, work, "keep_shards=false")
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in (out / "shards").iterdir()) == ["README"]
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "scores.parquet").read_bytes() == scores and _tables(out) == tables
    assert not list(out.parent.glob(f".{out.name}.*"))  # no lock, no staging left beside


def test_a_run_that_changes_the_tables_refuses_to_drop_their_scores(tmp_path, done):
    _, work = done
    out = tmp_path / "data"
    assert collect(collect_config(_args(out, work))).shards_run == 4
    scores = _scores(out)
    tables = _tables(out)
    store = ShardStore(out)
    d = store.path(0)  # shard 0 now says another reward: the episodes table changes
    blobs = {t: (d / f"{t}.parquet").read_bytes() for t in TABLES}
    ep = pq.read_table(d / "episodes.parquet")
    i = ep.schema.get_field_index("reward")
    blobs["episodes"] = table_bytes(ep.set_column(i, "reward", pc.add(ep.column("reward"), 0.5)))
    store.discard(0)
    store.write(0, blobs)
    with pytest.raises(ValueError) as e:
        collect(collect_config(_args(out, work)))
    assert str(e.value) == (
        f"{out / 'scores.parquet'}: not written by collect, and goes with tables this run "
        f"changes (episodes.parquet): move it out of {out} and rerun the same command (the "
        "shards are kept; nothing was replaced)"
    )
    assert _tables(out) == tables and (out / "scores.parquet").read_bytes() == scores
    assert all(store.done(i) for i in range(4))
    (out / "scores.parquet").rename(tmp_path / "scores.parquet")
    again = collect(collect_config(_args(out, work)))
    assert again.shards_run == 0
    assert again.notes == [
        f"republished {out}: replaced episodes.parquet (changed); manifest.json, "
        "states.parquet, transitions.parquet, steps.parquet identical"
    ]
    reward = pq.read_table(out / "episodes.parquet").column("reward").to_pylist()
    first = pq.read_table(d / "episodes.parquet").column("episode_id")[0].as_py()
    ids = pq.read_table(out / "episodes.parquet").column("episode_id").to_pylist()
    assert reward[ids.index(first)] == ep.column("reward")[0].as_py() + 0.5


def test_another_config_or_another_kind_of_directory_is_one_line(done, tmp_path):
    _, work = done
    out = tmp_path / "data"
    assert collect(collect_config(_args(out, work))).shards_run == 4
    line = _one_error(_cli(out, work, "state_key=db"))
    assert line == (
        f"collect: error: {out} holds shards of another collection (config differs in: "
        "state_key); use another out= or overwrite=true"
    )
    # a published collection without its shards: its manifest's config
    assert collect(collect_config(_args(out, work, "keep_shards=false"))).shards_run == 0
    assert not (out / "shards").exists()
    with pytest.raises(PlanMismatch, match="holds a dataset of another collection"):
        collect(collect_config(_args(out, work, "state_key=db")))
    assert collect(collect_config(_args(out, work))).shards_run == 4
    # a directory that is no collection: refused, unless overwrite=true (which keeps its files)
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("x")
    line = _one_error(_cli(other, work))
    assert line == (
        f"collect: error: {other}: not empty and holds no collection (no shards/plan.json, no "
        "manifest.json of collect); use another out= or overwrite=true (files collect did not "
        "write are kept)"
    )
    assert sorted(p.name for p in other.iterdir()) == ["thesis.tex"]
    assert collect(collect_config(_args(other, work, "overwrite=true"))).shards_run == 4
    assert (other / "thesis.tex").read_text() == "x"


def test_one_writer_per_out(tmp_path, done):
    _, work = done
    out = tmp_path / "data"
    with OutputLock(out) as lock:
        assert lock.path == tmp_path / ".data.lock"
        assert lock.path.read_text() == f"{os.getpid()}\n"
        line = _one_error(_cli(out, work))
        assert line == (
            f"collect: error: {out}: another collect (pid {os.getpid()}) is writing it "
            f"({lock.path} is locked); wait for it to end or use another out="
        )
        with pytest.raises(OutputBusy, match=f"pid {os.getpid()}"):
            OutputLock(out).acquire()
    assert not lock.path.exists() and not out.exists()  # refused before writing anything
    assert collect(collect_config(_args(out, work))).shards_run == 4
    assert not lock.path.exists()


def test_an_empty_out_is_an_error_not_the_current_directory(tmp_path, done):
    _, work = done
    cwd = tmp_path / "here"
    cwd.mkdir()
    cmd = [sys.executable, "-m", "collect", "out=", f"env.work_root={work}", *SMALL]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    assert _one_error(r) == "collect: error: out: empty; name the output directory (out=DIR)"
    assert not list(cwd.iterdir())
