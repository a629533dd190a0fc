"""Issue 34 through the command lines: ``label`` and ``helper.train`` never replace the
outputs of another config or command (item 3), and the model commands print nothing of
third-party code on stderr by default (item 8): only their own lines."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpdp import demo_dataset_path

REPO = Path(__file__).resolve().parents[1]
#: a tiny helper from config, through the command line (seconds on CPU)
TINY_HELPER = [
    "helper=tiny",
    "helper.hidden_size=32",
    "helper.num_layers=1",
    "helper.num_heads=2",
    "helper.intermediate_size=64",
    "helper.vocab_size=64",
    "helper.max_length=16",
    "helper.head_tokens=4",
    "helper.epochs=1",
    "helper.cpu_threads=1",
]


def _run(argv, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRANSFORMERS_VERBOSITY", None)  # the commands' own defaults, not the caller's
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=cwd, timeout=600, env=env
    )


def _own_lines(stderr: str, *prefixes: str) -> list[str]:
    """The stderr lines that are not the command's own (its prefixes)."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(prefixes)]


def test_label_and_helper_train_never_replace_another_configs_outputs(tmp_path):
    first = _run(["helpdp.label", "budget=[0.5,1,2]", "out=L", "quiet=true"], tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    labels = (tmp_path / "L/labels.parquet").read_bytes()
    # the case: one budget over the three-budget labels two helpers were trained on
    again = _run(["helpdp.label", "budget=1", "out=L"], tmp_path)
    assert again.returncode == 2 and again.stderr.strip().startswith(
        "helpdp.label: error: out=L holds the outputs of another helpdp.label config (budget="
    ), again.stderr
    assert again.stderr.strip().endswith("use another out= or overwrite=true to write there anyway")
    assert len(again.stderr.strip().splitlines()) == 1
    # another command into the labels' directory
    helper = _run(["helpdp.helper.train", "labels=L", "out=L", *TINY_HELPER], tmp_path)
    assert helper.returncode == 2 and helper.stderr.strip().startswith(
        "helpdp.helper.train: error: out=L holds the outputs of helpdp.label, not "
        "helpdp.helper.train"
    ), helper.stderr
    assert (tmp_path / "L/labels.parquet").read_bytes() == labels  # untouched
    # out= left empty is an error, not the current directory
    empty = _run(["helpdp.label", "budget=1", "out="], tmp_path)
    assert empty.returncode == 2 and "out= is empty" in empty.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L"]


def test_model_commands_print_only_their_own_lines(tmp_path):
    pytest.importorskip("torch", reason="the model commands need the ml extra (make full)")
    pytest.importorskip("transformers", reason="the model commands need the ml extra")
    lab = _run(["helpdp.label", "budget=[0.5,1,2]", "out=L", "quiet=true"], tmp_path)
    assert lab.returncode == 0 and lab.stderr == "", lab.stderr
    helper = _run(
        ["helpdp.helper.train", "labels=L", "out=H", "progress=false", *TINY_HELPER], tmp_path
    )
    assert helper.returncode == 0, helper.stderr[-3000:]
    # its own notes (a cut text, a helper that learned nothing) and nothing else
    assert _own_lines(helper.stderr, "helper: ") == [], helper.stderr
    data = demo_dataset_path()
    prm = _run(
        [
            "prm.train",
            f"data={data}",
            "out=P",
            "prm=tiny",
            "prm.epochs=1",
            "prm.max_train_examples=200",
            "progress=false",
        ],
        tmp_path,
    )
    assert prm.returncode == 0, prm.stderr[-3000:]
    assert prm.stderr == ""
    report = _run(["prm.report", f"data={data}", "prm_dir=P", "progress=false"], tmp_path)
    assert report.returncode == 0, report.stderr[-3000:]
    assert _own_lines(report.stderr, "temperature", "reliability") == [], report.stderr
