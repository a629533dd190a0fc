"""The dataset contract has one owner (helpdp/contract.py): schemas, format version,
manifest, the atomic writer, and the collector's self-check through the loader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dp_helpers import make_frames

import helpdp
from helpdp import contract, data
from helpdp.contract import (
    FORMAT_VERSION,
    SCHEMAS,
    DatasetError,
    build_manifest,
    conform,
    write_table,
)
from helpdp.data import write_dataset

REPO = Path(__file__).resolve().parents[1]
TR = [(0, 0, 1, 2), (0, 1, 2, 1), (1, 0, 3, 1), (1, 0, 4, 1), (2, 0, 3, 1)]


def _tables(scores: bool = False) -> tuple[dict, dict]:
    manifest, states, trans = make_frames(5, TR, success=(3,))
    tables = {"states": states, "transitions": trans}
    if scores:
        tables["scores"] = pd.DataFrame(
            {"state_id": [7, 7], "action": [0, 1], "p_success": [0.25, 0.75], "source": "t"}
        )  # int64 actions on purpose: conform casts them to int8
    return manifest, tables


def _snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def _leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


# --- schemas --------------------------------------------------------------------------


def test_schemas_round_trip(tmp_path):
    manifest, tables = _tables(scores=True)
    tables["episodes"] = pd.DataFrame(
        {"episode_id": [0, 1, 2], "task_id": "t", "split": "train", "steps": [2, 2, 2]}
    )
    out = write_dataset(tmp_path / "ds", manifest, tables)
    for name in ("states", "transitions", "scores"):
        schema = pq.read_schema(out / f"{name}.parquet")
        assert [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in SCHEMAS[name]]
    ep = pq.read_schema(out / "episodes.parquet")
    assert ep.field("episode_id").type == pa.int64() and ep.field("steps").type == pa.int32()
    ds = helpdp.load_dataset(out)
    pd.testing.assert_frame_equal(ds.states, tables["states"], check_dtype=False)
    pd.testing.assert_frame_equal(ds.transitions, tables["transitions"], check_dtype=False)
    assert ds.scores["action"].tolist() == [0, 1] and ds.scores["p_success"].tolist() == [
        0.25,
        0.75,
    ]
    assert json.loads((out / "manifest.json").read_text()) == {
        "actions": ["nohelp", "expert"],
        "gamma": 1.0,
        "format": FORMAT_VERSION,
        "source": {},
    }
    assert list(json.loads((out / "manifest.json").read_text())) == [
        "actions",
        "gamma",
        "format",
        "source",
    ]


def test_the_loader_checks_the_contract_schemas():
    for name, kinds in [
        ("states", data.STATES_SCHEMA),
        ("transitions", data.TRANSITIONS_SCHEMA),
        ("scores", data.SCORES_SCHEMA),
    ]:
        assert list(kinds) == SCHEMAS[name].names
    assert kinds == {"state_id": "int", "action": "int", "p_success": "float", "source": "str"}
    assert data.FORMAT_VERSION is contract.FORMAT_VERSION and data.DatasetError is DatasetError
    assert helpdp.FORMAT_VERSION == FORMAT_VERSION == 1


def test_conform_casts_keeps_extras_and_refuses_with_file_and_column():
    t = pa.table(
        {
            "state_id": pa.array([1], pa.int32()),
            "extra": ["x"],
            "action": pa.array([1], pa.int64()),
            "next_state_id": [2],
            "count": pa.array([3.0]),
        }
    )
    out = conform("transitions", t)
    assert out.column_names == ["state_id", "extra", "action", "next_state_id", "count"]
    assert [out.schema.field(c).type for c in out.column_names] == [
        pa.int64(),
        pa.string(),
        pa.int8(),
        pa.int64(),
        pa.int64(),
    ]
    with pytest.raises(DatasetError, match=r"^transitions.parquet: column 'count': missing column"):
        conform("transitions", t.drop_columns(["count"]))
    with pytest.raises(
        DatasetError, match=r"^transitions.parquet: column 'count': has type double, expected int64"
    ):
        conform("transitions", t.set_column(4, "count", pa.array([2.5])))
    with pytest.raises(
        DatasetError, match=r"^transitions.parquet: column 'action': has type int64, expected int8"
    ):
        conform("transitions", t.set_column(2, "action", pa.array([300], pa.int64())))
    # episodes and steps are read as they are: missing core columns are allowed there
    assert conform("episodes", pa.table({"task_id": ["t"]})).column_names == ["task_id"]


def test_build_manifest_refuses_actions_without_nohelp_first():
    assert build_manifest(("nohelp", "oracle"), gamma=0.9, source={"a": 1}) == {
        "actions": ["nohelp", "oracle"],
        "gamma": 0.9,
        "format": FORMAT_VERSION,
        "source": {"a": 1},
    }
    with pytest.raises(
        DatasetError,
        match=r"^manifest.json: column 'actions': must list 'nohelp' then >= 1 intervention, "
        r"got \['expert'\]$",
    ):
        build_manifest(["expert"])


# --- the atomic writer ----------------------------------------------------------------


def test_write_dataset_refuses_a_non_empty_target_then_replaces_it_keeping_other_entries(
    tmp_path,
):
    manifest, tables = _tables(scores=True)
    target = write_dataset(tmp_path / "ds", manifest, tables)
    (target / "shards").mkdir()
    (target / "shards" / "plan.json").write_text("{}")
    with pytest.raises(FileExistsError, match=r"ds: not empty \(pass overwrite=True"):
        write_dataset(target, manifest, tables)
    manifest2, tables2 = _tables()
    tables2["transitions"] = tables2["transitions"].assign(count=lambda t: t["count"] * 10)
    write_dataset(target, manifest2, tables2, overwrite=True)
    assert sorted(p.name for p in target.iterdir()) == [
        "manifest.json",
        "shards",
        "states.parquet",
        "transitions.parquet",
    ]  # the old scores described the replaced dataset; shards/ is carried over
    assert (target / "shards" / "plan.json").read_text() == "{}"
    assert helpdp.load_dataset(target).transitions["count"].tolist() == [20, 10, 10, 10, 10]
    assert _leftovers(target) == []
    # an existing empty directory is a fine target
    (tmp_path / "empty").mkdir()
    assert (
        helpdp.load_dataset(write_dataset(tmp_path / "empty", manifest, tables)).mdp.n_states == 5
    )


@pytest.mark.parametrize("existing", [False, True])
def test_a_failure_mid_write_leaves_the_target_untouched(tmp_path, monkeypatch, existing):
    manifest, tables = _tables(scores=True)
    target = tmp_path / "ds"
    if existing:
        write_dataset(target, manifest, tables)
        (target / "notes.txt").write_text("mine")
    before = _snapshot(target) if existing else None
    written = []
    real = contract._write_parquet

    def crash_on_second(table, path):
        if written:
            raise OSError("disk full")
        written.append(path)
        real(table, path)

    monkeypatch.setattr(data, "_write_parquet", crash_on_second)
    _, tables2 = _tables()
    with pytest.raises(OSError, match="disk full"):
        write_dataset(target, manifest, tables2, overwrite=True)
    assert len(written) == 1 and written[0].parent.name.startswith(".ds.tmp-")
    if existing:
        assert _snapshot(target) == before
    else:
        assert not target.exists()
    assert _leftovers(target) == []


def test_the_check_refuses_a_bad_table_before_anything_is_replaced(tmp_path):
    manifest, tables = _tables()
    target = write_dataset(tmp_path / "ds", manifest, tables)
    before = _snapshot(target)
    bad = dict(tables, transitions=tables["transitions"].assign(count=[2, 0, 1, 1, 1]))
    with pytest.raises(
        DatasetError, match=r"^transitions.parquet: column 'count': row 1: count 0 is not positive$"
    ):
        write_dataset(target, manifest, bad, overwrite=True)
    assert _snapshot(target) == before and _leftovers(target) == []
    with pytest.raises(
        DatasetError, match=r"^manifest.json: column 'format': must be 1, got None$"
    ):
        write_dataset(tmp_path / "new", {"actions": ["nohelp", "x"], "gamma": 1.0}, tables)
    with pytest.raises(DatasetError, match=r"^transitions.parquet: missing table \(required\)$"):
        write_dataset(tmp_path / "new", manifest, {"states": tables["states"]})
    assert not (tmp_path / "new").exists()


def test_write_table_is_atomic(tmp_path, monkeypatch):
    path = write_table(pa.table({"a": [1, 2]}), tmp_path / "x" / "t.parquet")
    before = path.read_bytes()

    def boom(table, where, **kw):
        Path(where).write_bytes(b"half")
        raise OSError("killed")

    monkeypatch.setattr(pq, "write_table", boom)
    with pytest.raises(OSError, match="killed"):
        write_table(pa.table({"a": [3]}), path)
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == [
        "t.parquet"
    ]


# --- the writers use it -----------------------------------------------------------------


def test_toy_and_synthetic_writers_go_through_the_contract(tmp_path):
    from toy_prm import separable_dataset

    from helpdp.synthetic import SyntheticParams, write_synthetic

    params = SyntheticParams(n_tasks=3, seeds=1, episodes_per_seed=1)
    out = write_synthetic(tmp_path / "syn", params)
    assert pq.read_schema(out / "states.parquet").field("depth").type == pa.int32()
    with pytest.raises(FileExistsError):
        write_synthetic(out, params)
    assert helpdp.load_dataset(write_synthetic(out, params, overwrite=True)).actions == [
        "nohelp",
        "expert",
    ]
    toy = separable_dataset(tmp_path / "toy", n_tasks=5)
    assert json.loads((toy / "manifest.json").read_text())["format"] == FORMAT_VERSION
    assert pq.read_schema(toy / "transitions.parquet").field("action").type == pa.int8()


def test_no_hand_written_format_version_outside_the_contract():
    """Every manifest gets its ``format`` from helpdp.contract (FORMAT_VERSION)."""
    literal = re.compile(r"""["']format["']\s*:\s*\d""")
    allowed = {
        "helpdp/contract.py",
        "helpdp/helper/train.py",  # the helper model's own metadata format, not a dataset's
        "tests/test_helper_hf.py",  # writes a helper directory of the older helper format
        "tests/test_merge.py",  # a hostile manifest, nested 200,000 deep
    }
    hits = []
    for top in ("helpdp", "collect", "prm", "bench", "tests", "notebooks"):
        for p in sorted((REPO / top).rglob("*")):
            if p.suffix not in (".py", ".ipynb") or not p.is_file():
                continue
            rel = p.relative_to(REPO).as_posix()
            if rel in allowed or "/worlds/" in rel or "/fixtures/" in rel:
                continue
            hits += [f"{rel}: {m.group(0)}" for m in literal.finditer(p.read_text())]
    assert hits == []


# --- the collector's self-check --------------------------------------------------------


def _quick(out: Path, work: Path) -> list[str]:
    return [
        f"out={out}",
        "schedule.scenarios=[smart_home_1]",
        "schedule.max_tasks=2",
        "schedule.probabilities=[0.0,1.0]",
        "schedule.seeds=[0]",
        "executor.workers=1",
        "progress=false",
        f"env.work_root={work}",
    ]


def test_the_collector_checks_its_output_with_the_loader(tmp_path, monkeypatch):
    from collect.collector import collect, collect_config

    cfg = collect_config(_quick(tmp_path / "ds", tmp_path / "work"))
    real = contract._write_parquet

    def buggy(table, path):  # a writer bug: states.parquet loses its text column
        if path.name == "states.parquet":
            table = table.drop_columns(["text"])
        real(table, path)

    monkeypatch.setattr(data, "_write_parquet", buggy)
    with pytest.raises(DatasetError) as err:
        collect(cfg)
    assert re.fullmatch(
        r"states.parquet: column 'text': missing column \(has \['state_id', 'task_id', 'depth', "
        r"'is_start', 'terminal', 'success'\]\)",
        str(err.value),
    )
    # nothing was published: the shards are there, no dataset file is
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == ["shards"]
    monkeypatch.setattr(data, "_write_parquet", real)
    result = collect(cfg)  # the rerun only aggregates the finished shards
    assert result.shards_run == 0 and helpdp.load_dataset(tmp_path / "ds").mdp.n_states > 0
    assert np.all(helpdp.load_dataset(tmp_path / "ds").states["text"].str.len() > 0)
