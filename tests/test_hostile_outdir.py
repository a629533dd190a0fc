"""A hostile ``out=`` (issue 45, classes 6 and 7): links planted inside it never take a
write or a removal out of it, and a shard that another plan made, or that was edited
with its checksums updated, is never published as this collection's.

Each attack goes through the command line (``python -m helpdp.search``, ``python -m
collect`` on the small collection of :mod:`collector_helpers`) or the function the
command line calls (:func:`helpdp.cliconf.claim_out`); afterwards the file outside is
intact and the next honest run works and writes the bytes of a clean one."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from collector_helpers import run_cli as _cli
from collector_helpers import table_bytes_of as _tables

from collect.shards import META, TABLES, ShardStore
from helpdp.cliconf import read_record

ROOT = Path(__file__).resolve().parents[1]


def _files(d: Path) -> dict[str, bytes | str]:
    """Every entry below ``d``: a file's bytes, a link's target."""
    found: dict[str, bytes | str] = {}
    for p in sorted(d.rglob("*")):
        if p.is_symlink():
            found[str(p.relative_to(d))] = f"-> {os.readlink(p)}"
        elif p.is_file():
            found[str(p.relative_to(d))] = p.read_bytes()
    return found


def _one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-3000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


# --- class 6: OUT/.hydra, the record of the run -------------------------------------


def _search(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(cwd)}
    return subprocess.run(
        [sys.executable, "-m", "helpdp.search", "budget=1.0", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=env,
    )


def _outside(root: Path) -> Path:
    """A directory of someone else's files, named like the record's."""
    outside = root / "outside"
    outside.mkdir()
    for name in ("config.yaml", "overrides.yaml", "job.yaml"):
        (outside / name).write_text(f"someone else's {name}\n")
    return outside


def test_a_planted_hydra_link_is_refused_and_nothing_outside_is_written_or_removed(tmp_path):
    """Through ``OUT/.hydra -> outside``, a run wrote its record into ``outside`` and a run
    that failed removed it there (the record of a run that wrote nothing is dropped)."""
    outside = _outside(tmp_path)
    before = _files(outside)
    out = tmp_path / "o"
    out.mkdir()
    (out / ".hydra").symlink_to(outside)
    expected = (
        f"helpdp.search: error: out={out}: {out / '.hydra'} is a symbolic link; the record "
        "of a run is written there and never through a link: remove it or use another out="
    )
    failed = _search(tmp_path, f"out={out}", f"data={tmp_path / 'no-such-dataset'}")
    assert _one_error(failed) == expected
    assert _files(outside) == before
    ran = _search(tmp_path, f"out={out}")  # a run that would succeed
    assert _one_error(ran) == expected
    assert _files(outside) == before
    assert (out / ".hydra").is_symlink() and sorted(p.name for p in out.iterdir()) == [".hydra"]
    # overwrite=true does not write through it either
    assert _one_error(_search(tmp_path, f"out={out}", "overwrite=true")) == expected
    assert _files(outside) == before
    # the next honest run (the link removed) writes what a clean run writes
    (out / ".hydra").unlink()
    clean = tmp_path / "clean"
    for d in (out, clean):
        r = _search(tmp_path, f"out={d}")
        assert r.returncode == 0, r.stderr[-3000:]
    for name in ("policy.parquet", "policy_more_help.parquet"):
        assert (out / name).read_bytes() == (clean / name).read_bytes()
    assert sorted(p.name for p in (out / ".hydra").iterdir()) == [
        "config.yaml",
        "job.yaml",
        "overrides.yaml",
    ]
    assert _files(outside) == before


def test_a_planted_link_to_an_output_outside_out_is_refused(tmp_path):
    """``OUT/policy.parquet -> outside``: the rerun of the same config wrote its policy
    through the link, over the file outside."""
    out, clean = tmp_path / "o", tmp_path / "clean"
    for d in (out, clean):
        r = _search(tmp_path, f"out={d}")
        assert r.returncode == 0, r.stderr[-3000:]
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious\n")
    (out / "policy.parquet").unlink()
    (out / "policy.parquet").symlink_to(victim)
    for extra in ((), ("overwrite=true",)):
        assert _one_error(_search(tmp_path, f"out={out}", *extra)) == (
            f"helpdp.search: error: out={out}: {out / 'policy.parquet'} is a symbolic link to "
            f"{victim}, outside out=; a command never writes through a link out of its out=: "
            "remove it or use another out="
        )
        assert victim.read_bytes() == b"precious\n"
    (out / "policy.parquet").unlink()
    r = _search(tmp_path, f"out={out}")
    assert r.returncode == 0, r.stderr[-3000:]
    for name in ("policy.parquet", "policy_more_help.parquet"):
        assert (out / name).read_bytes() == (clean / name).read_bytes()
    assert victim.read_bytes() == b"precious\n"


def _claim(out: Path, **config):
    from omegaconf import OmegaConf

    from helpdp.cliconf import claim_out

    cfg = OmegaConf.create({"out": str(out), "budget": 1.0, "quiet": False, **config})
    return claim_out("helpdp.search", cfg, config_name="search", overrides=["budget=1.0"])


@pytest.mark.parametrize("name", ["config.yaml", "overrides.yaml", "job.yaml"])
def test_a_link_in_the_record_is_refused_and_its_target_kept(tmp_path, name):
    """``OUT/.hydra/<file> -> outside``: the record was written through the link (and a
    run that wrote nothing removed the link, a file it did not write)."""
    outside = _outside(tmp_path)
    before = _files(outside)
    out = tmp_path / "o"
    (out / ".hydra").mkdir(parents=True)
    (out / ".hydra" / name).symlink_to(outside / name)
    with pytest.raises(FileExistsError) as e, _claim(out):
        raise AssertionError("the body must not run")
    assert str(e.value) == (
        f"out={out}: {out / '.hydra' / name} is a symbolic link; the record of a run is "
        "written there and never through a link: remove it or use another out="
    )
    with pytest.raises(FileExistsError), _claim(out):  # and a run that fails: the same
        raise RuntimeError("failed before writing")
    assert _files(outside) == before and (out / ".hydra" / name).is_symlink()
    (out / ".hydra" / name).unlink()
    with _claim(out):
        (out / "a.json").write_text("1")
    with _claim(tmp_path / "clean"):
        (tmp_path / "clean" / "a.json").write_text("1")
    clean = (tmp_path / "clean" / ".hydra" / "overrides.yaml").read_bytes()
    assert (out / ".hydra" / "overrides.yaml").read_bytes() == clean
    config = {"out": str(out), "budget": 1.0, "quiet": False}
    assert read_record(out) == {"command": "helpdp.search", "config": config}
    assert _files(outside) == before


def test_a_failed_run_removes_only_the_record_it_wrote(tmp_path):
    """A run that writes nothing drops its record: the three files it wrote, by the
    identity it wrote them with, and the directories it created."""
    out = tmp_path / "new" / "o"
    with pytest.raises(RuntimeError), _claim(out):
        assert sorted(p.name for p in (out / ".hydra").iterdir()) == [
            "config.yaml",
            "job.yaml",
            "overrides.yaml",
        ]
        raise RuntimeError("failed before writing")
    assert not (tmp_path / "new").exists()
    # the body replaced a record file with its own: that one is not ours, and stays
    with pytest.raises(RuntimeError), _claim(out):
        (out / ".hydra" / "job.yaml").unlink()
        (out / ".hydra" / "job.yaml").write_text("the body's\n")
        raise RuntimeError("failed after replacing it")
    assert (out / ".hydra" / "job.yaml").read_text() == "the body's\n"
    assert sorted(p.name for p in (out / ".hydra").iterdir()) == ["job.yaml"]


def test_a_planted_lock_link_truncates_nothing(tmp_path):
    """The writer lock of an ``out=`` lives in the temporary directory: a lock file (or a
    lock directory) planted there as a link was opened with O_CREAT and truncated."""
    from helpdp.cliconf.outdir import lock_out

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "o"
    r = _search(tmp, f"out={out}")  # makes the lock directory under TMPDIR
    assert r.returncode == 0, r.stderr[-3000:]
    (lock_dir,) = tmp.glob("helpdp-out-locks-*")
    (lock,) = lock_dir.iterdir()
    lock.unlink()
    lock.symlink_to(victim)
    err = _one_error(_search(tmp, f"out={out}"))
    assert (
        err
        == f"helpdp.search: error: {lock}: a symbolic link; the lock of out={out} is never opened through a link: remove it"
    )
    assert victim.read_text() == "precious\n"
    lock.unlink()
    shutil.rmtree(lock_dir)
    lock_dir.symlink_to(tmp_path)
    err = _one_error(_search(tmp, f"out={out}"))
    assert err.startswith(f"helpdp.search: error: {lock_dir}: a symbolic link")
    assert victim.read_text() == "precious\n"
    lock_dir.unlink()
    with lock_out("helpdp.search", out):  # honest again
        pass


# --- class 6 and 7: the shards of a collection ---------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``ref``: the small collection, clean; ``other``: the same with another seed."""
    root = tmp_path_factory.mktemp("hostile")
    for name, extra in (("ref", ()), ("other", ("schedule.seeds=[1]",))):
        r = _cli(root / name, root / "work", *extra)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "4/4 shards run" in r.stdout, r.stdout
    assert _tables(root / "ref") != _tables(root / "other")
    return root


def _copy(runs: Path, dest: Path) -> Path:
    shutil.copytree(runs / "ref", dest, symlinks=True)
    return dest


def _resumed(runs: Path, out: Path, shard: str) -> subprocess.CompletedProcess:
    """The rerun of a collection whose shard ``shard`` was tampered with: that shard is
    not reused but moved aside and run again; the tables are the clean run's."""
    r = _cli(out, runs / "work")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "1/4 shards run" in r.stdout, r.stdout
    assert _tables(out) == _tables(runs / "ref")
    store = ShardStore(out)
    assert all(store.done(i) for i in range(4))
    assert (out / "shards" / f"rejected-{shard}").exists()
    return r


def test_overwrite_through_a_shards_link_is_refused(runs, tmp_path):
    """``out/shards -> another collection's shards`` with ``overwrite=true``: that
    collection's shards were removed and replaced by this one's."""
    victim = tmp_path / "victim"
    shutil.copytree(runs / "other", victim)
    before = _files(victim)
    out = tmp_path / "out"
    out.mkdir()
    (out / "shards").symlink_to(victim / "shards")
    for extra in (("overwrite=true",), ()):
        err = _one_error(_cli(out, runs / "work", *extra))
        assert err == (
            f"collect: error: {out / 'shards'}: a symbolic link; collect writes its shards "
            "in a directory of its own, never through a link: remove the link or use "
            "another out="
        )
        assert _files(victim) == before
    assert sorted(p.name for p in out.iterdir()) == ["shards"]
    (out / "shards").unlink()
    r = _cli(out, runs / "work", "overwrite=true")
    assert r.returncode == 0, r.stderr[-3000:]
    assert _tables(out) == _tables(runs / "ref") and _files(victim) == before


def test_a_shard_that_is_a_link_is_moved_aside_not_followed(runs, tmp_path):
    """``out/shards/000001 -> another collection's shard``: reused (its own checksums
    match), so the dataset held the other collection's episodes."""
    victim = tmp_path / "victim"
    shutil.copytree(runs / "other", victim)
    before = _files(victim)
    out = _copy(runs, tmp_path / "out")
    shutil.rmtree(out / "shards" / "000001")
    (out / "shards" / "000001").symlink_to(victim / "shards" / "000001")
    r = _resumed(runs, out, "000001")
    assert f"{out / 'shards' / '000001'} is a symbolic link" in r.stderr
    assert (out / "shards" / "rejected-000001").is_symlink()
    assert _files(victim) == before


def test_a_shard_of_another_seed_with_its_meta_is_not_reused(runs, tmp_path):
    """A shard copied from the collection of another seed, its meta.json with it: its
    checksums match, and it was published as this collection's."""
    out = _copy(runs, tmp_path / "out")
    foreign = _files(runs / "other" / "shards" / "000001")
    shutil.rmtree(out / "shards" / "000001")
    shutil.copytree(runs / "other" / "shards" / "000001", out / "shards" / "000001")
    r = _resumed(runs, out, "000001")
    assert "made for another plan" in r.stderr, r.stderr
    assert _files(out / "shards" / "rejected-000001") == foreign  # kept, byte for byte


def test_a_shard_edited_with_its_checksums_updated_is_not_reused(runs, tmp_path):
    """This collection's shard 000001 with another seed's tables, and the sha256 in its
    meta.json updated to match them: published as this collection's."""
    out = _copy(runs, tmp_path / "out")
    d = out / "shards" / "000001"
    meta = json.loads((d / META).read_text())
    for t in TABLES:
        data = (runs / "other" / "shards" / "000001" / f"{t}.parquet").read_bytes()
        (d / f"{t}.parquet").write_bytes(data)
        meta["sha256"][f"{t}.parquet"] = hashlib.sha256(data).hexdigest()
    (d / META).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    assert ShardStore(runs / "ref").problem(1) is None  # what the checksums alone say
    edited = _files(d)
    r = _resumed(runs, out, "000001")
    assert "holds episodes of another shard" in r.stderr, r.stderr
    assert _files(out / "shards" / "rejected-000001") == edited


def test_a_shard_copied_to_another_slot_is_not_reused(runs, tmp_path):
    """This collection's own shard 000002 copied over 000001 (meta and all): episode
    000001's went missing and 000002's were counted twice."""
    out = _copy(runs, tmp_path / "out")
    shutil.rmtree(out / "shards" / "000001")
    shutil.copytree(out / "shards" / "000002", out / "shards" / "000001")
    r = _resumed(runs, out, "000001")
    assert "is shard 000002 of its plan" in r.stderr, r.stderr


def _unbind(d: Path, *, keep_meta: bool) -> None:
    """Shard ``d`` as collect wrote it before the binding: its meta.json without
    fingerprint, index and episode ids (its checksums still match), or none at all."""
    if not keep_meta:
        (d / META).unlink()
        return
    meta = json.loads((d / META).read_text())
    for key in ("fingerprint", "index", "episode_ids"):
        del meta[key]
    (d / META).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def test_an_old_format_shard_of_another_seed_is_not_reused(runs, tmp_path):
    """Shards copied from the collection of another seed and made to look written before
    the binding (000001: meta.json without it; 000002: no meta.json): reused on their
    checksums alone, so the dataset held the other collection's episodes."""
    out = _copy(runs, tmp_path / "out")
    planted = {}
    for shard, keep_meta in (("000001", True), ("000002", False)):
        shutil.rmtree(out / "shards" / shard)
        shutil.copytree(runs / "other" / "shards" / shard, out / "shards" / shard)
        _unbind(out / "shards" / shard, keep_meta=keep_meta)
        planted[shard] = _files(out / "shards" / shard)
    r = _cli(out, runs / "work")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2/4 shards run" in r.stdout, r.stdout
    assert _tables(out) == _tables(runs / "ref")
    for shard, files in planted.items():
        moved = [ln for ln in r.stderr.splitlines() if f"shards/{shard}: not reused" in ln]
        assert len(moved) == 1 and "written before the binding" in moved[0], r.stderr
        assert _files(out / "shards" / f"rejected-{shard}") == files  # kept, byte for byte
    store = ShardStore(out)
    assert all(store.done(i) for i in range(4))


def test_an_old_format_shard_of_this_plan_is_still_reused(runs, tmp_path):
    """Shards of this plan written before the binding (000001: meta.json without it;
    000002: no meta.json) hold exactly the plan's episodes: reused, not run again."""
    out = _copy(runs, tmp_path / "out")
    _unbind(out / "shards" / "000001", keep_meta=True)
    _unbind(out / "shards" / "000002", keep_meta=False)
    old = {s: _files(out / "shards" / s) for s in ("000001", "000002")}
    r = _cli(out, runs / "work")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "0/4 shards run" in r.stdout and "not reused" not in r.stderr, (r.stdout, r.stderr)
    assert _tables(out) == _tables(runs / "ref")
    assert {s: _files(out / "shards" / s) for s in old} == old  # as they were
    assert not list((out / "shards").glob("rejected-*"))


def test_bound_shards_record_their_plan_and_episodes(runs):
    store = ShardStore(runs / "ref")
    plan = json.loads((runs / "ref" / "shards" / "plan.json").read_text())
    seen = []
    for i in range(4):
        meta = json.loads((store.path(i) / META).read_text())
        ids = pq.read_table(store.path(i) / "episodes.parquet", columns=["episode_id"])
        assert meta["fingerprint"] == plan["fingerprint"] and meta["index"] == i
        assert meta["episode_ids"] == sorted(ids.column("episode_id").to_pylist())
        seen += meta["episode_ids"]
    assert len(seen) == len(set(seen)) == plan["episodes"]


def test_a_collect_lock_planted_as_a_link_truncates_nothing(tmp_path):
    """``.OUT.lock`` beside ``out=`` planted as a link: it was opened with O_CREAT through
    the link, truncated and overwritten with the writer's pid, then removed."""
    from collect.shards import OutputBusy, OutputLock

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    lock = tmp_path / ".out.lock"
    lock.symlink_to(victim)
    with pytest.raises(OutputBusy) as e, OutputLock(out):
        raise AssertionError("the body must not run")
    assert str(e.value) == (
        f"{lock}: a symbolic link; the lock of {out} is never opened through a link: remove it"
    )
    assert victim.read_text() == "precious\n" and lock.is_symlink()
    lock.unlink()
    with OutputLock(out):  # honest again
        assert lock.read_text() == f"{os.getpid()}\n"
    assert not lock.exists()
