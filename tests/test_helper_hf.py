"""A helper directory is a transformers model (issue 34, item 7) and says whether it
learned anything (item 10): the checkpoint, the model card, file modes, format 1."""

import json
import os
import stat

import numpy as np
import pytest
from helper_helpers import TINY, toy_labels

from helpdp.helper.quality import balanced_accuracy, classification_metrics, fit_warnings

META = {"actions": ["nohelp", "expert"], "strategy": "all_states", "rule": "exact"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from helpdp.helper.train import train_helper

    out = tmp_path_factory.mktemp("helper")
    cfg = {"helper": TINY, "progress": False, "calibration": "help_rate"}
    return out, train_helper(toy_labels(), META, cfg, out)


def test_the_directory_is_a_transformers_checkpoint_with_a_card(trained):
    out, res = trained
    names = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "helper.json",
        "README.md",
    } <= names
    assert not {"encoder", "tokenizer", "head.safetensors"} & names
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "helpdp-helper"
    assert config["id2label"] == {"0": "nohelp", "1": "expert"}
    card = (out / "README.md").read_text()
    assert "0=nohelp, 1=expert" in card and "AUROC" in card and "majority class" in card
    for b in ("0.5", "1", "2"):
        assert f"| {b} | {res['thresholds'][b]:.4f} |" in card
    umask = os.umask(0)
    os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir() if p.is_file()}
    assert set(modes.values()) == {0o666 & ~umask}, modes


def test_auto_model_loads_it_and_computes_the_helpers_probabilities(trained, tmp_path):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import helpdp.models.hf_helper  # noqa: F401 - registers the model type
    from helpdp.helper import HelperPolicy

    out, _ = trained
    texts = ["alpha beta alarm level 3 gamma", "zeta alarm level 0 eta theta"]
    pol = HelperPolicy(out)
    want = pol.proba(texts)
    model = AutoModelForSequenceClassification.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert type(model).__name__ == "HelperForSequenceClassification"
    batch = pol.encoder.collate(pol.encoder(texts))
    with torch.no_grad():
        got = torch.softmax(model(**batch).logits, -1).numpy()
    assert got == pytest.approx(want, abs=1e-6)
    assert tok(texts[0])["input_ids"][:3] == pol.encoder.tok(texts[0])["input_ids"][:3]
    # save_pretrained / from_pretrained round trip
    model.save_pretrained(tmp_path / "again")
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "again")
    with torch.no_grad():
        assert torch.equal(again(**batch).logits, model(**batch).logits)


def test_a_format_1_directory_still_loads(trained, tmp_path):
    """encoder/ + tokenizer/ + head.safetensors + helper.json (what earlier versions wrote)."""
    from safetensors.torch import save_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from helpdp.helper import HelperPolicy

    out, res = trained
    model = AutoModelForSequenceClassification.from_pretrained(out)
    old = tmp_path / "old"
    model.encoder.save_pretrained(old / "encoder")
    AutoTokenizer.from_pretrained(out).save_pretrained(old / "tokenizer")
    save_file(
        {k: v.contiguous() for k, v in model.head.state_dict().items()}, old / "head.safetensors"
    )
    (old / "helper.json").write_text(json.dumps({**res, "format": 1}))
    texts = ["alpha alarm level 2 beta", "quiet alarm level 1"]
    assert HelperPolicy(old).proba(texts) == pytest.approx(HelperPolicy(out).proba(texts), abs=1e-6)


def test_metrics_are_stored_against_the_majority_class(trained):
    _, res = trained
    m = res["metrics"]
    for k in (
        "val_balanced_accuracy",
        "val_auroc",
        "val_majority_accuracy",
        "val_majority_balanced_accuracy",
        "val_majority_auroc",
    ):
        assert k in m
    assert m["val_majority_balanced_accuracy"] == 0.5 and m["val_majority_auroc"] == 0.5
    assert m["val_auroc"] > 0.9  # the toy task: 'alarm level k' is in the text
    assert m["warnings"] == []


def test_hand_checked_metrics():
    y = np.array([0, 0, 0, 1])
    assert balanced_accuracy(y, np.array([0, 0, 1, 1])) == pytest.approx((2 / 3 + 1) / 2)
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.4, 0.6], [0.3, 0.7]])
    m = classification_metrics(p, np.eye(2)[y], majority=0)
    assert m["accuracy"] == 0.75 and m["majority_accuracy"] == 0.75
    assert m["auroc"] == 1.0 and m["majority_balanced_accuracy"] == 0.5


def test_warnings_for_a_helper_that_learned_nothing_or_misses_its_budget():
    nothing = {
        "val_accuracy": 0.474,
        "val_majority_accuracy": 0.853,
        "val_balanced_accuracy": 0.49,
        "val_majority_balanced_accuracy": 0.5,
        "val_auroc": 0.48,
    }
    w = fit_warnings(nothing)
    assert len(w) == 2 and "does not beat the majority class (0.853)" in w[0]
    assert "learned nothing" in w[0] and "AUROC 0.480" in w[1]
    ranks = {**nothing, "val_accuracy": 0.841, "val_balanced_accuracy": 0.7, "val_auroc": 0.8}
    assert fit_warnings(ranks) == [
        "validation accuracy 0.841 does not beat the majority class (0.853); balanced "
        "accuracy 0.700 vs 0.500 (it ranks better than chance)"
    ]
    usage = {"calibration_usage": {0.5: {"usage": 0.5}, 1.0: {"usage": 0.97}, 2.0: {"usage": 1.41}}}
    assert fit_warnings(usage) == [
        "budget 2: validation usage 1.410 calls/episode misses the budget "
        "(it helps at every state it can)"
    ]
