"""End to end on the demo dataset, through the command lines: prm.train (tabular and
tiny LM) -> prm.score -> scores.parquet validates with helpdp.load_dataset ->
helpdp.search rule=paper runs on it; prm.report and prm.selfreg print their JSON."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from plot_helpers import assert_drawn_png

from helpdp import demo_dataset_path, load_dataset
from prm import dataset_actor
from prm.data import observed_pairs
from prm.score import score

REPO = Path(__file__).resolve().parents[1]


def run(*args) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("prm_e2e")
    data = root / "demo"
    shutil.copytree(demo_dataset_path(), data)
    return root, data


@pytest.fixture(scope="module")
def lm_prm(demo):
    root, data = demo
    out = root / "prm_lm"
    lines = run(
        "prm.train",
        f"data={data}",
        "prm=tiny",
        f"out={out}",
        "prm.epochs=1",
        "prm.max_train_examples=2000",
        "progress=false",
    )
    summary = json.loads(lines[-1])
    assert summary["kind"] == "lm" and summary["train_loss_after"] < summary["train_loss_before"]
    return out


def test_train_tabular_and_score(demo, tmp_path):
    root, data = demo
    out = root / "prm_tab"
    lines = run("prm.train", f"data={data}", "kind=tabular", f"out={out}")
    assert json.loads(lines[-1])["kind"] == "tabular"
    assert json.loads((out / "prm.json").read_text())["actor"] == dataset_actor(load_dataset(data))
    copy = tmp_path / "d"
    shutil.copytree(data, copy)
    score({"data": str(copy), "prm_dir": str(out), "progress": False})
    ds = load_dataset(copy)
    assert ds.scores["source"].iloc[0].startswith("prm:tabular")


def test_score_validates_and_paper_rule_runs(demo, lm_prm):
    root, data = demo
    lines = run("prm.score", f"data={data}", f"prm_dir={lm_prm}", "progress=false")
    assert json.loads(lines[-1])["rows"] > 0
    ds = load_dataset(data)  # the contract's validation of scores.parquet
    sc = ds.scores
    assert str(sc["state_id"].dtype) == "int64" and str(sc["action"].dtype) == "int8"
    assert str(sc["p_success"].dtype) == "float64"
    assert np.all((sc["p_success"] >= 0) & (sc["p_success"] <= 1))
    pairs = observed_pairs(ds)
    assert len(sc) == len(pairs)
    assert (sc[["state_id", "action"]].to_numpy() == pairs.to_numpy()).all()
    assert not ds.states.set_index("state_id").loc[sc["state_id"], "terminal"].any()
    out = root / "search"
    run("helpdp.search", f"data={data}", "budget=1.0", "rule=paper", f"out={out}", "quiet=true")
    js = json.loads((out / "search.json").read_text())
    assert js["rule"] == "paper" and js["expected_usage"] <= 1.0 + 1e-9


def test_report_prints_json_last(demo, lm_prm):
    root, data = demo
    plot = root / "rel.png"
    lines = run("prm.report", f"data={data}", f"prm_dir={lm_prm}", f"plot={plot}", "progress=false")
    js = json.loads(lines[-1])
    assert set(js) == {"train", "validation", "test"}
    for split in js.values():
        assert {"auroc", "brier", "ece", "ece_scaled"} <= set(split)
        assert 0 <= split["brier"] <= 1 and 0 <= split["ece"] <= 1
        assert {"auroc", "brier", "ece", "ece_scaled"} <= set(split["baseline"])
    assert js["validation"]["auroc"] > 0.6
    assert_drawn_png(plot, min_width=500, min_height=600)


def test_selfreg_prints_json_and_writes_policies(demo, lm_prm):
    root, data = demo
    out = root / "policies"
    lines = run("prm.selfreg", f"data={data}", f"prm_dir={lm_prm}", f"out={out}", "progress=false")
    js = json.loads(lines[-1])
    for key in ("accuracy", "precision", "recall"):
        assert 0 <= js["test"][key] <= 1
    assert js["validation"]["accuracy"] >= js["validation"]["majority_accuracy"] - 1e-12
    n_states = len(np.unique(observed_pairs(load_dataset(data))["state_id"]))
    for name, frac in (("prm_threshold_10", 0.1), ("prm_threshold_30", 0.3)):
        assert js["policies"][name]["help_states"] == round(frac * n_states)
        assert (out / f"{name}.parquet").exists()


def test_actor_mismatch_refused_on_the_command_line(demo, lm_prm, tmp_path):
    _, data = demo
    copy = tmp_path / "other"
    shutil.copytree(data, copy, ignore=shutil.ignore_patterns("scores.parquet"))
    m = json.loads((copy / "manifest.json").read_text())
    m["source"]["actor"] = "another-model"
    (copy / "manifest.json").write_text(json.dumps(m))
    proc = subprocess.run(
        [sys.executable, "-m", "prm.score", f"data={copy}", f"prm_dir={lm_prm}"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "allow_other_actor" in proc.stdout + proc.stderr
    assert not (copy / "scores.parquet").exists()
