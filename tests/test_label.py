"""DP labels for the helper (helpdp.label) on hand-worked MDPs."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from toy_prm import write_episodes

from helpdp import load_dataset, search_budget
from helpdp.label import LabelConfig, make_labels, read_labels, run_label
from helpdp.subset import task_subset


def _cfg(**kw):
    return OmegaConf.merge(OmegaConf.structured(LabelConfig), {"quiet": True, **kw})


@pytest.fixture
def toy(tmp_path):
    """Task a (train): a0 -nohelp-> a2 -> lose; a0 -help-> a1 -> win (a1 seen with
    both actions, both win). pi* at r < 1: help at a0, nohelp at a1 and a2.
    Task b (validation): b0 -nohelp-> win, b0 -help-> lose: pi* = nohelp."""
    s = {
        "a0": {"task_id": "a", "depth": 0, "text": "a start"},
        "a1": {"task_id": "a", "depth": 1, "text": "a helped"},
        "a2": {"task_id": "a", "depth": 1, "text": "a alone"},
        "aW": {"task_id": "a", "depth": 2, "terminal": True, "success": True},
        "aL": {"task_id": "a", "depth": 2, "terminal": True},
        "b0": {"task_id": "b", "depth": 0, "text": "b start"},
        "bW": {"task_id": "b", "depth": 1, "terminal": True, "success": True},
        "bL": {"task_id": "b", "depth": 1, "terminal": True},
    }
    eps = [
        {"task_id": "a", "split": "train", "path": ["a0", 0, "a2", 0, "aL"]},
        {"task_id": "a", "split": "train", "path": ["a0", 1, "a1", 0, "aW"]},
        {"task_id": "a", "split": "train", "path": ["a0", 1, "a1", 1, "aW"]},
        {"task_id": "b", "split": "validation", "path": ["b0", 0, "bW"]},
        {"task_id": "b", "split": "validation", "path": ["b0", 1, "bL"]},
    ]
    return write_episodes(tmp_path / "toy", s, eps)


def _by_text(df):
    return df.set_index("text")


def test_all_states_labels_pi_star(toy):
    ds = load_dataset(toy)
    labels, meta = make_labels(ds, _cfg(budget=1.0))
    d = _by_text(labels)
    assert list(d.index) == ["a start", "a helped", "a alone", "b start"]
    assert d["label"].tolist() == [1, 0, 0, 0]
    assert d["split"].tolist() == ["train", "train", "train", "validation"]
    assert (d["label_more_help"] == d["label"]).all() and (d["weight_more_help"] == 0).all()
    assert d["p_expert"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert d["on_path"].tolist() == [True, True, False, True]
    assert d.loc["a start", "success"] == 1.0 and d.loc["a start", "usage"] == 1.0
    assert (labels["r"] == 0.0).all() and (labels["budget"] == 1.0).all()
    assert {"state_id", "task_id", "split", "text", "label", "r", "budget"} <= set(labels)
    # the search ran on the train task only: E[U] = 1 there (task b would halve it)
    assert meta["search_tasks"] == 1 and meta["budgets"][0]["expected_usage"] == 1.0


def test_trajectory_only_follows_pi_star_from_the_start(toy):
    labels, _ = make_labels(load_dataset(toy), _cfg(budget=1.0, strategy="trajectory_only"))
    assert sorted(labels["text"]) == ["a helped", "a start", "b start"]


def test_mixture_records_both_policies(toy):
    labels, meta = make_labels(
        load_dataset(toy), _cfg(budget=[0.5, 1.0], strategy="trajectory_only")
    )
    half = _by_text(labels[labels["budget"] == 0.5])
    # between "never help" (U=0, S=0) and "help at a0" (U=1, S=1): w = 0.5, r = 1
    assert half.loc["a start", "label"] == 0 and half.loc["a start", "label_more_help"] == 1
    assert half.loc["a start", "weight_more_help"] == pytest.approx(0.5)
    assert half.loc["a start", "p_expert"] == pytest.approx(0.5)
    assert half["r"].iloc[0] == pytest.approx(1.0)
    # trajectory_only: either policy's path (a1 under help, a2 under nohelp)
    assert sorted(half.index) == ["a alone", "a helped", "a start", "b start"]
    assert meta["budgets"][0]["mixture"]["weight_more_help"] == pytest.approx(0.5)
    assert len(labels[labels["budget"] == 1.0]) == 3


def test_labels_on_search_tasks_are_the_search_policies(toy):
    ds = load_dataset(toy)
    sub = task_subset(ds, ["a"])
    res = search_budget(sub.mdp, 0.5, gamma=1.0)
    labels, _ = make_labels(ds, _cfg(budget=0.5))
    a = labels[labels["task_id"] == "a"].set_index("state_id")
    for sol, col in [(res.policy, "label"), (res.more_help, "label_more_help")]:
        keep = sol.action >= 0
        expect = pd.Series(sol.action[keep], index=sub.state_ids[keep]).sort_index()
        assert a[col].sort_index().tolist() == expect.tolist()


def test_label_splits_and_search_splits(toy):
    ds = load_dataset(toy)
    labels, meta = make_labels(ds, _cfg(budget=0.5, label_splits=["train"]))
    assert set(labels["split"]) == {"train"}
    # with the validation task in the search, task b's start counts: E[U] averages
    _, meta_all = make_labels(ds, _cfg(budget=0.5, search_splits=["train", "validation"]))
    assert meta_all["search_tasks"] == 2
    # starts weighted by episodes (a0: 3, b0: 2): the more-help policy spends 3/5
    assert meta_all["budgets"][0]["mixture"]["weight_more_help"] == pytest.approx(0.5 / 0.6)
    assert meta_all["budgets"][0]["mixture"]["more_help"]["expected_usage"] == pytest.approx(0.6)


def test_k_interventions_label_is_the_action_index(tmp_path):
    s = {
        "s0": {"task_id": "t", "depth": 0, "text": "start"},
        "W": {"task_id": "t", "depth": 1, "terminal": True, "success": True},
        "L": {"task_id": "t", "depth": 1, "terminal": True},
    }
    eps = [{"task_id": "t", "path": ["s0", a, end]} for a, end in [(0, "L"), (1, "L"), (2, "W")]]
    path = write_episodes(tmp_path / "k2", s, eps, actions=("nohelp", "expert", "oracle"))
    labels, meta = make_labels(load_dataset(path), _cfg(budgets={"expert": 1, "oracle": 1}))
    assert labels["label"].tolist() == [2]
    assert [labels[f"p_{a}"].iloc[0] for a in ("nohelp", "expert", "oracle")] == [0, 0, 1]
    assert labels["budget_oracle"].iloc[0] == 1.0


def test_run_label_writes_parquet_and_json(toy, tmp_path):
    out = tmp_path / "labels"
    run_label(_cfg(data=str(toy), budget=[0.5, 1, 2], out=str(out)))
    df, meta = read_labels(out)
    assert sorted(df["budget"].unique()) == [0.5, 1.0, 2.0]
    assert json.loads((out / "labels.json").read_text())["strategy"] == "all_states"
    assert df["label"].dtype == np.int8 and df["state_id"].dtype == np.int64


def test_label_help_lists_every_field():
    out = subprocess.run(
        [sys.executable, "-m", "helpdp.label", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for f in ("strategy=", "search_splits=", "label_splits=", "budget=", "rule="):
        assert f in out


def test_labels_from_a_mixture_report_the_soft_help_mass(toy, tmp_path, capsys):
    """A selected mixture (0.4 turn 0 | 0.6 never): no hard label is help, yet the soft
    targets carry help probability 0.4 at the two start states of four rows (mass 0.2):
    both are printed and stored (issue 34 item 10)."""
    from helpdp.policies import AtTurns, Never
    from helpdp.select import MixturePolicy, policy_json

    mix = MixturePolicy([(0.4, AtTurns((0,))), (0.6, Never())])
    (tmp_path / "selected.json").write_text(json.dumps({"budget": 0.4, "policy": policy_json(mix)}))
    labels, meta = run_label(_cfg(data=str(toy), policy=str(tmp_path), out=str(tmp_path / "L")))
    d = _by_text(labels)
    assert d["p_expert"].tolist() == pytest.approx([0.4, 0.0, 0.0, 0.4])
    assert (d["label"] == 0).all()
    b = meta["budgets"][0]
    assert b["budget"] == 0.4 and b["help_label_share"] == 0.0
    assert b["soft_help_mass"] == pytest.approx(0.2) and meta["rule"] == "select"
    assert "help label on 0.0%, soft help mass 0.200" in capsys.readouterr().out
    # the DP's labels report it too: at budget 1 help at a0 only, one of four rows
    _, meta = make_labels(load_dataset(toy), _cfg(budget=1.0))
    assert meta["budgets"][0]["soft_help_mass"] == pytest.approx(0.25)
    assert meta["budgets"][0]["help_label_share"] == pytest.approx(0.25)


def test_labels_from_an_event_rule_spec():
    """policy=turn0+after:failed: help at turn 0 and after a failed turn, at every visit
    (HelpWorld's states record whether the last turn failed), filed under budget=."""
    from helpdp.label import policy_labels
    from helpdp.ope import load_logged
    from helpdp.synthetic import HelpWorld

    ds = HelpWorld().collect(seeds=3, seed=0)
    labels, meta = policy_labels(ds, _cfg(policy="turn0+after:failed", budget=1.5))
    views = load_logged(ds).views()
    want = {v.state_id: int(v.depth == 0 or v.last_class == "failed") for v in views}
    got = labels.set_index("state_id")["p_expert"]
    assert got.to_dict() == {s: float(want[s]) for s in got.index}
    assert (labels["label"] == got.to_numpy()).all()
    assert 0 < labels["label"].mean() < 1 and (labels["budget"] == 1.5).all()
    assert meta["rule"] == "policy" and meta["policy_spec"] == "turn0+after:failed"
    assert meta["budgets"][0]["soft_help_mass"] == pytest.approx(labels["p_expert"].mean())
    # with a per-episode cap: the share of the state's visits whose logged history left a
    # call (the view's calls: the logged episode's expert calls so far)
    capped, _ = policy_labels(ds, _cfg(policy="turn0+after:failed+max:1", budget=1.0))
    c = capped.set_index("state_id")["p_expert"]
    ok = (
        pd.Series(
            [float(v.depth == 0 or (v.last_class == "failed" and v.calls < 1)) for v in views]
        )
        .groupby([v.state_id for v in views])
        .mean()
    )
    assert c.to_numpy() == pytest.approx(ok.reindex(c.index).to_numpy())
    assert c.sum() < got.sum()  # fewer calls: some failed turns come after a call
    from helpdp.cliconf import UsageError

    with pytest.raises(UsageError, match="budget: policy=turn0 labels one budget"):
        policy_labels(ds, _cfg(policy="turn0", budget=[1, 2]))
    with pytest.raises(UsageError, match="policy: policy 'sometimes': not a policy name"):
        policy_labels(ds, _cfg(policy="sometimes"))


def test_an_unknown_strategy_is_refused_before_the_data_loads(tmp_path):
    # the issue's `strategy=bogus` was refused only after the search had run; now first
    # (here the data directory does not even exist: the strategy is named, not the data)
    from helpdp.cliconf import UsageError

    cfg = LabelConfig(data=str(tmp_path / "missing"), strategy="bogus", out=str(tmp_path / "o"))
    with pytest.raises(
        UsageError, match="strategy: 'bogus' is not one of all_states, trajectory_only"
    ):
        run_label(cfg)
