"""prm.score never replaces a file it did not write, nor other scores unasked.

``out=FILE`` onto a user's file is refused (exit 2, one line) and leaves it byte for
byte; a second ``prm.score`` of another PRM into ``DATA/scores.parquet`` is refused and
keeps the first scores (``overwrite=true`` replaces them, ``out=OTHER`` keeps both);
the same PRM again (a rerun) rewrites the same scores."""

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpdp import demo_dataset_path
from prm.train import train

REPO = Path(__file__).resolve().parents[1]


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "prm.score", *args, "progress=false"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("score_guard")
    data = root / "data"
    shutil.copytree(demo_dataset_path(), data)
    a, b = root / "prm_a", root / "prm_b"
    train({"data": str(data), "out": str(a), "prm": {"kind": "tabular"}})
    train({"data": str(data), "out": str(b), "prm": {"kind": "tabular", "prior_strength": 50.0}})
    return root, data, a, b


def test_out_onto_a_users_file_is_refused_and_left_intact(setup, tmp_path):
    _, data, a, _ = setup
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my thesis notes\n")
    proc = cli(f"data={data}", f"prm_dir={a}", f"out={notes}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1 and str(notes) in lines[0] and "not a scores table" in lines[0]
    assert notes.read_bytes() == b"my thesis notes\n"
    # overwrite=true does not make a user's file ours
    proc = cli(f"data={data}", f"prm_dir={a}", f"out={notes}", "overwrite=true")
    assert proc.returncode == 2 and notes.read_bytes() == b"my thesis notes\n"


def test_second_score_of_another_prm_is_refused_and_both_can_be_kept(setup, tmp_path):
    _, data0, a, b = setup
    data = tmp_path / "d"
    shutil.copytree(data0, data)
    first = cli(f"data={data}", f"prm_dir={a}")
    assert first.returncode == 0, first.stderr
    kept = (data / "scores.parquet").read_bytes()
    again = cli(f"data={data}", f"prm_dir={a}")  # a rerun: the same scores
    assert again.returncode == 0, again.stderr
    other = cli(f"data={data}", f"prm_dir={b}")
    assert other.returncode == 2, other.stdout + other.stderr
    msg = other.stderr.strip()
    assert "holds other scores" in msg and "overwrite=true" in msg and "\n" not in msg
    assert (data / "scores.parquet").read_bytes() == kept
    both = cli(f"data={data}", f"prm_dir={b}", f"out={tmp_path / 'b.parquet'}")
    assert both.returncode == 0, both.stderr
    pa_, pb = pd.read_parquet(data / "scores.parquet"), pd.read_parquet(tmp_path / "b.parquet")
    assert len(pa_) == len(pb) and (pa_["p_success"] != pb["p_success"]).any()
    replaced = cli(f"data={data}", f"prm_dir={b}", "overwrite=true")
    assert replaced.returncode == 0, replaced.stderr
    assert pd.read_parquet(data / "scores.parquet")["p_success"].equals(pb["p_success"])
