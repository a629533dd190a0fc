"""Every contract rule refuses bad input with one message naming file, column and row."""

import hashlib
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dp_helpers import make_frames

from helpdp import FORMAT_VERSION, DatasetError, load_dataset

TR = [(0, 0, 1, 2), (0, 1, 2, 1), (1, 0, 3, 1), (1, 0, 4, 1), (2, 0, 3, 1)]


def _write(tmp_path, manifest=None, states=None, trans=None, scores=None):
    m, s, t = make_frames(5, TR, success=(3,))
    manifest = m if manifest is None else manifest
    s = s if states is None else states(s)
    t = t if trans is None else trans(t)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    for name, df in [("states", s), ("transitions", t), ("scores", scores)]:
        if df is not None:
            df.to_parquet(tmp_path / f"{name}.parquet", index=False)
    return tmp_path


def _scores(p, ids=(7, 7)):
    return pd.DataFrame(
        {
            "state_id": np.array(ids, np.int64),
            "action": np.array([0, 1], np.int8),
            "p_success": np.array(p, np.float64),
            "source": "t",
        }
    )


def test_valid_dataset_loads(tmp_path):
    ds = load_dataset(_write(tmp_path, scores=_scores([0.2, 0.7])))
    assert ds.mdp.n_states == 5 and ds.mdp.n_transitions == 5 and ds.mdp.acyclic
    assert ds.mdp.start_weight.sum() == 3  # three episodes start at state 7


def _with(df, col, values):
    df = df.copy()
    df[col] = values
    return df


def _swap_row(df, row, col, value):
    df = df.copy()
    df.loc[row, col] = value
    return df


CASES = [
    # (what, writer kwargs, expected message fragment)
    (
        "missing column",
        dict(states=lambda s: s.drop(columns="terminal")),
        r"states.parquet: column 'terminal': missing column",
    ),
    (
        "wrong type",
        dict(states=lambda s: _with(s, "depth", s["depth"].astype(float))),
        r"states.parquet: column 'depth': has type double, expected int",
    ),
    (
        "wrong type str",
        dict(states=lambda s: _with(s, "task_id", 3)),
        r"states.parquet: column 'task_id': has type int64, expected str",
    ),
    (
        "non-positive count",
        dict(trans=lambda t: _swap_row(t, 3, "count", 0)),
        r"transitions.parquet: column 'count': row 3: count 0 is not positive",
    ),
    (
        "unknown state",
        dict(trans=lambda t: _swap_row(t, 2, "state_id", 999)),
        r"transitions.parquet: column 'state_id': row 2: unknown state_id 999",
    ),
    (
        "unknown next state",
        dict(trans=lambda t: _swap_row(t, 4, "next_state_id", 998)),
        r"transitions.parquet: column 'next_state_id': row 4: unknown state_id 998",
    ),
    (
        "terminal with outgoing",
        dict(
            trans=lambda t: pd.concat(
                [
                    t,
                    pd.DataFrame(
                        {
                            "state_id": [37],
                            "action": np.int8(0),
                            "next_state_id": [47],
                            "count": [1],
                        }
                    ),
                ],
                ignore_index=True,
            )
        ),
        r"transitions.parquet: column 'state_id': row 5: terminal state 37 has an outgoing transition",
    ),
    (
        "no start",
        dict(states=lambda s: _with(s, "is_start", False)),
        r"states.parquet: column 'is_start': no start state",
    ),
    (
        "duplicate state",
        dict(states=lambda s: _swap_row(s, 4, "state_id", 17)),
        r"states.parquet: column 'state_id': row 4: duplicate state_id 17",
    ),
    (
        "duplicate transition",
        dict(trans=lambda t: pd.concat([t, t.iloc[[1]]], ignore_index=True)),
        r"transitions.parquet: column 'next_state_id': row 5: duplicate \(state_id, action, next_state_id\) = \(7, 1, 27\)",
    ),
    (
        "action beyond manifest",
        dict(trans=lambda t: _swap_row(t, 1, "action", 2)),
        r"transitions.parquet: column 'action': row 1: action 2 but manifest.json names 2 actions",
    ),
    (
        "success on non-terminal",
        dict(states=lambda s: _swap_row(s, 1, "success", True)),
        r"states.parquet: column 'success': row 1: success is true on a non-terminal state",
    ),
    (
        "null",
        dict(states=lambda s: _swap_row(s, 2, "text", None)),
        r"states.parquet: column 'text': row 2: is null",
    ),
    (
        "negative action",
        dict(trans=lambda t: _swap_row(t, 0, "action", -1)),
        r"transitions.parquet: column 'action': row 0: value -1 outside \[0, 127\]",
    ),
]


@pytest.mark.parametrize(("what", "kw", "msg"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused(tmp_path, what, kw, msg):
    path = _write(tmp_path, **kw)
    before = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in path.iterdir()}
    with pytest.raises(DatasetError, match=msg):
        load_dataset(path)
    after = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in path.iterdir()}
    assert before == after  # loading never touches the data


@pytest.mark.parametrize(
    ("p", "row", "msg"),
    [
        ([0.2, 1.5], 1, r"p_success 1.5 outside \[0, 1\]"),
        ([-0.1, 0.5], 0, r"p_success -0.1 outside \[0, 1\]"),
        ([0.3, float("nan")], 1, "is null"),
    ],  # pandas writes NaN as a Parquet null
    ids=["above", "below", "nan"],
)
def test_probability_outside_unit_interval(tmp_path, p, row, msg):
    with pytest.raises(
        DatasetError, match=rf"scores.parquet: column 'p_success': row {row}: {msg}"
    ):
        load_dataset(_write(tmp_path, scores=_scores(p)))


def test_scores_naming_unknown_state(tmp_path):
    with pytest.raises(
        DatasetError, match=r"scores.parquet: column 'state_id': row 1: unknown state_id 5"
    ):
        load_dataset(_write(tmp_path, scores=_scores([0.1, 0.2], ids=(7, 5))))


@pytest.mark.parametrize(
    ("manifest", "msg"),
    [
        (
            {"actions": ["nohelp"], "gamma": 1.0, "format": FORMAT_VERSION},
            "column 'actions': must list >= 2",
        ),
        (
            {"actions": ["help", "nohelp"], "gamma": 1.0, "format": FORMAT_VERSION},
            "column 'actions': actions\\[0\\] must be 'nohelp'",
        ),
        (
            {"actions": ["nohelp", "expert"], "gamma": 0.0, "format": FORMAT_VERSION},
            "column 'gamma': must be a number in \\(0, 1\\]",
        ),
        (
            {"actions": ["nohelp", "expert"], "gamma": 1.0, "format": FORMAT_VERSION + 1},
            f"column 'format': unsupported format {FORMAT_VERSION + 1}",
        ),
    ],
)
def test_bad_manifest(tmp_path, manifest, msg):
    with pytest.raises(DatasetError, match=f"manifest.json: {msg}"):
        load_dataset(_write(tmp_path, manifest=manifest))


def test_missing_file_and_unreadable_parquet(tmp_path):
    path = _write(tmp_path)
    (path / "transitions.parquet").unlink()
    with pytest.raises(DatasetError, match="transitions.parquet: missing file"):
        load_dataset(path)
    (path / "transitions.parquet").write_text("not parquet")
    with pytest.raises(DatasetError, match="transitions.parquet: not a readable Parquet file"):
        load_dataset(path)


def test_integer_width_is_accepted(tmp_path):
    """int32 ids or int64 actions are the same numbers: accepted, checked for range."""
    path = _write(tmp_path, trans=lambda t: _with(t, "action", t["action"].astype(np.int64)))
    table = pq.read_table(path / "states.parquet")
    table = table.set_column(0, "state_id", table.column("state_id").cast(pa.int32()))
    pq.write_table(table, path / "states.parquet")
    assert load_dataset(path).mdp.n_states == 5
