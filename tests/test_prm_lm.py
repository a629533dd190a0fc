"""The LM PRM with a tiny Qwen3 built from config (random weights, CPU)."""

import numpy as np
import pytest
from prm_helpers import TINY_PRM
from toy_prm import separable_dataset

from helpdp import load_dataset
from prm import ActorMismatchError, build_examples, load_prm, task_splits
from prm.metrics import auroc
from prm.report import prm_metrics
from prm.train import fit_prm

TINY = dict(TINY_PRM)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    ds = load_dataset(separable_dataset(tmp_path_factory.mktemp("sep") / "data", n_tasks=60))
    prm, summary = fit_prm(ds, {"prm": TINY, "progress": False})
    return ds, prm, summary


def test_loss_falls_and_heldout_auroc(trained):
    ds, prm, summary = trained
    assert summary["train_loss_after"] < 0.5 * summary["train_loss_before"]
    assert summary["val_loss_after"] < 0.5 * summary["val_loss_before"]
    ex = build_examples(ds, task_splits(ds)).select("test")
    idx, y, w = ex.eval_rows()
    p = prm.predict(ds, ex.frame["state_id"], ex.frame["action"])
    assert auroc(y, p[idx], w) > 0.9
    metrics, _ = prm_metrics(prm, ds)
    assert metrics["validation"]["auroc"] > 0.9 and metrics["test"]["auroc"] > 0.9
    # the tabular baseline only knows the depth on unseen tasks: no better than chance here
    assert metrics["test"]["baseline"]["auroc"] < 0.7
    assert not metrics["test"]["in_sample"] and metrics["train"]["in_sample"]


def test_scores_in_unit_interval_for_both_actions(trained):
    ds, prm, _ = trained
    sids = ds.states.loc[~ds.states["terminal"], "state_id"].to_numpy()
    for a in (0, 1):
        p = prm.predict(ds, sids, np.full(len(sids), a))
        assert p.dtype == np.float64 and np.all((p >= 0) & (p <= 1)) and np.all(np.isfinite(p))


def test_save_load_same_scores(trained, tmp_path):
    ds, prm, _ = trained
    out = prm.save(tmp_path / "prm")
    assert {"prm.json", "adapter", "tokenizer", "base"} <= {p.name for p in out.iterdir()}
    again = load_prm(out, device="cpu")
    assert again.meta["actor"] == "toy-actor" and again.meta["kind"] == "lm"
    sids = ds.states.loc[~ds.states["terminal"], "state_id"].to_numpy()
    acts = np.arange(len(sids)) % 2
    np.testing.assert_allclose(
        again.predict(ds, sids, acts), prm.predict(ds, sids, acts), atol=1e-6
    )


def test_padding_and_batching_do_not_change_scores(trained):
    ds, prm, _ = trained
    f = build_examples(ds, task_splits(ds)).frame
    seqs = prm.encode(f["text"], f["action"].to_numpy())
    assert len({len(s) for s in seqs}) > 1  # lengths differ, so batches pad
    one = np.array([prm.logits_of([s])[0] for s in seqs[:20]])
    np.testing.assert_allclose(prm.logits_of(seqs[:20], batch_size=7), one, atol=1e-5)


def test_truncation_keeps_action_suffix(trained):
    _, prm, _ = trained
    long = " ".join(["alpha"] * 200) + " lamp green"
    a0, a1 = prm.encode([long, long], [0, 1])
    assert len(a0) == prm.cfg["max_length"] and a0 != a1
    assert a0[-len(prm._suffix_ids[0]) :] == prm._suffix_ids[0]


def test_actor_check(trained, tmp_path):
    ds, prm, _ = trained
    other = load_dataset(separable_dataset(tmp_path / "other", n_tasks=5, actor="someone-else"))
    with pytest.raises(ActorMismatchError):
        prm.predict(other, [0], [0])
    assert prm.predict(other, [0], [0], allow_other_actor=True).shape == (1,)


def test_checkpoint_backbone_from_a_local_path(trained, tmp_path):
    """base_model names a checkpoint (here a local causal LM, as a hub id would): the
    PRM directory then holds no base/ copy and loads the backbone from that name."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    from prm.lm import train_tokenizer

    ds, _, _ = trained
    texts = ds.states["text"].tolist()
    tok = train_tokenizer(texts, vocab_size=200, extra=["\n[action=nohelp]", "\n[action=expert]"])
    cfg = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        pad_token_id=tok.pad_token_id,
    )
    ckpt = tmp_path / "ckpt"
    AutoModelForCausalLM.from_config(cfg).save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    prm, summary = fit_prm(
        ds, {"prm": {**TINY, "base_model": str(ckpt), "epochs": 2}, "progress": False}
    )
    assert summary["train_loss_after"] < summary["train_loss_before"]
    out = prm.save(tmp_path / "prm")
    assert not (out / "base").exists() and prm.source.startswith(f"prm:lm:{ckpt}")
    sids = ds.states.loc[~ds.states["terminal"], "state_id"].to_numpy()[:30]
    again = load_prm(out, device="cpu")
    np.testing.assert_allclose(again.predict(ds, sids, 0), prm.predict(ds, sids, 0), atol=1e-6)
