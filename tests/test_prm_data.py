"""Examples, weights and task splits."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from toy_prm import separable_dataset, write_episodes

from helpdp import load_dataset
from prm import build_examples, example_weights, hash_split, task_splits


def test_splits_follow_episodes(tmp_path):
    ds = load_dataset(separable_dataset(tmp_path / "d", n_tasks=20))
    sp = task_splits(ds)
    ep = ds.episodes.drop_duplicates("task_id").set_index("task_id")["split"]
    assert (sp.reindex(ep.index) == ep).all()
    ex = build_examples(ds, sp).frame
    # no task in two splits
    assert ex.groupby("task_id")["split"].nunique().max() == 1


def test_task_in_two_splits_is_refused(tmp_path):
    states = {
        "s": {"task_id": "A", "depth": 0, "text": "x"},
        "t": {"task_id": "A", "depth": 1, "terminal": True, "success": True},
    }
    eps = [
        {"task_id": "A", "split": "train", "path": ["s", 0, "t"]},
        {"task_id": "A", "split": "test", "path": ["s", 0, "t"]},
    ]
    ds = load_dataset(write_episodes(tmp_path / "d", states, eps))
    with pytest.raises(ValueError, match="several splits"):
        task_splits(ds)


def test_hash_split_deterministic_and_proportional():
    names = [f"task_{i}" for i in range(4000)]
    a = [hash_split(t, val_fraction=0.2, test_fraction=0.1) for t in names]
    assert a == [hash_split(t, val_fraction=0.2, test_fraction=0.1) for t in names]
    share = pd.Series(a).value_counts(normalize=True)
    assert share["train"] == pytest.approx(0.7, abs=0.03)
    assert share["validation"] == pytest.approx(0.2, abs=0.03)
    assert share["test"] == pytest.approx(0.1, abs=0.03)
    assert a != [hash_split(t, val_fraction=0.2, test_fraction=0.1, seed=1) for t in names]
    with pytest.raises(ValueError):
        hash_split("x", val_fraction=0.6, test_fraction=0.5)


def test_hash_split_used_without_episode_splits(tmp_path):
    ds = load_dataset(separable_dataset(tmp_path / "d", n_tasks=30))
    ds_no = dataclasses.replace(ds, episodes=None)
    sp = task_splits(ds_no, val_fraction=0.3, test_fraction=0.3, seed=5)
    expect = [hash_split(t, val_fraction=0.3, test_fraction=0.3, seed=5) for t in sp.index]
    assert sp.tolist() == expect


def test_weights():
    n = np.array([1, 3, 40])
    np.testing.assert_allclose(example_weights(n), [0.5, 0.75, 40 / 41])
    np.testing.assert_allclose(example_weights(n, "count"), n)
    np.testing.assert_allclose(example_weights(n, "uniform"), 1)
    with pytest.raises(ValueError):
        example_weights(n, "bogus")


def test_eval_rows_expand_visits(tmp_path):
    ds = load_dataset(separable_dataset(tmp_path / "d", n_tasks=10))
    ex = build_examples(ds, task_splits(ds))
    idx, y, w = ex.eval_rows()
    f = ex.frame
    assert w.sum() == pytest.approx(f["n"].sum()) == len(ds.steps)
    assert (w * y).sum() == pytest.approx(f["k"].sum())
    assert np.all(w > 0) and set(np.unique(idx)) == set(range(len(f)))
