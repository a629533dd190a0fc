"""A helper loaded the transformers way decides as HelperPolicy does (issue 46, item 5):
``pipeline(...)`` and ``from_pretrained`` on real state texts, long ones included (the
helper's window is 128 tokens, its first 32 and last 96; a plain tokenizer call gives
thousands). And the helper's notes are said once per process (item 8)."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from helper_helpers import TINY, toy_labels

from helpdp.demo import demo_dataset_path
from helpdp.policies import StateView

META = {"actions": ["nohelp", "expert"], "strategy": "all_states", "rule": "exact"}
WINDOW = {"max_length": 128, "head_tokens": 32}


def _real_states() -> pd.DataFrame:
    return pd.read_parquet(demo_dataset_path() / "states.parquet")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny helper trained on the toy labels, each state's text a real (demo) state text;
    transformers' remote-code modules go under a temporary directory."""
    import transformers.dynamic_module_utils as dmu

    from helpdp.helper.train import train_helper

    states = _real_states()
    labels = toy_labels(n_tasks=20)
    ids = sorted(labels["state_id"].unique())
    pick = dict(zip(ids, np.random.default_rng(0).choice(len(states), len(ids), replace=False)))
    labels["text"] = [states["text"].iloc[pick[s]] for s in labels["state_id"]]
    out = tmp_path_factory.mktemp("helper")
    helper = {**TINY, **WINDOW, "vocab_size": 300, "epochs": 2}
    cfg = {"helper": helper, "progress": False, "calibration": "help_rate"}
    res = train_helper(labels, META, cfg, out)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dmu, "HF_MODULES_CACHE", str(tmp_path_factory.mktemp("hf_modules")))
        yield out, res


def _views(n=24, seed=1):
    s = _real_states().sample(n, random_state=seed)
    return [
        StateView(state_id=int(i), task_id=str(t), depth=int(d), text=x, episode_id=f"ep{k}")
        for k, (i, t, d, x) in enumerate(zip(s["state_id"], s["task_id"], s["depth"], s["text"]))
    ]


def _probs(results, classes):
    return np.array([[r["probabilities"][c] for c in classes] for r in results])


def test_the_directory_carries_its_window_and_decision_rule(trained):
    from transformers import AutoTokenizer

    from helpdp.helper.export import decision_rule

    out, res = trained
    config = json.loads((out / "config.json").read_text())
    assert config["helper_decision"] == json.loads(json.dumps(decision_rule(res)))
    assert config["helper_decision"]["thresholds"] == res["thresholds"]
    assert (config["max_tokens"], config["front_tokens"]) == (128, 32)  # no [CLS] here
    assert (
        config["custom_pipelines"]["text-classification"]["impl"] == "helpdp_helper.HelperPipeline"
    )
    assert (out / "helpdp_helper.py").is_file()
    assert AutoTokenizer.from_pretrained(out).model_max_length == 128  # was 1e30
    tok = AutoTokenizer.from_pretrained(out)
    lengths = [len(tok(v.text)["input_ids"]) for v in _views()]
    assert max(lengths) > 1000 and min(lengths) < 128  # long texts, and short ones


@pytest.mark.parametrize("task", [None, "text-classification"])
@pytest.mark.parametrize("batch_size", [1, 5])
def test_the_pipeline_gives_the_policys_probabilities_and_decisions(trained, task, batch_size):
    from transformers import pipeline

    from helpdp.helper import HelperPolicy

    out, _ = trained
    views = _views()
    pipe = pipeline(task, model=str(out), trust_remote_code=True, batch_size=batch_size)
    assert type(pipe).__name__ == "HelperPipeline"
    pol = HelperPolicy(out)
    want = pol.proba([v.text for v in views])
    inputs = [{"text": v.text, "depth": v.depth, "episode_id": v.episode_id} for v in views]
    seen = set()
    for budget in (0.5, 1.0, 1.5, 2.0):
        got = pipe(inputs, budget=budget)
        assert _probs(got, pol.classes) == pytest.approx(want, abs=1e-5)
        actions = [r["action"] for r in got]
        assert actions == pol.decide(views, budget=budget).tolist(), budget
        assert [r["label"] for r in got] == [pol.classes[a] for a in actions]
        assert got[0]["threshold"] == pytest.approx(pol.threshold(budget))
        seen |= set(actions)
    assert seen == {0, 1}  # the comparison covers both decisions
    # a plain text is an input too; the default budget is the policy's
    assert pipe(views[0].text)["action"] == pol.decide(views[:1])[0]


def test_the_label_is_the_decision_at_the_budget_not_the_most_likely_class(trained, tmp_path):
    from transformers import pipeline

    from helpdp.helper import HelperPolicy
    from helpdp.helper.card import write_card

    src, res = trained
    out = tmp_path / "decisive"
    shutil.copytree(src, out)
    texts = [v.text for v in _views()]
    scores = 1.0 - HelperPolicy(out).proba(texts)[:, 0]
    # a threshold on the far side of 0.5 from some state: its decision is not its argmax
    th = scores.min() - 1e-3 if scores.min() < 0.5 else scores.max() + 1e-3
    meta = {**res, "thresholds": {"1": float(th)}, "tie_weights": {"1": 0.0}}
    write_card(out, meta)
    got = pipeline(model=str(out), trust_remote_code=True)(texts, budget=1.0)
    for r in got:
        assert (
            r["action"] == int(r["help_score"] > th)
            and r["label"] == ["nohelp", "expert"][r["action"]]
        )
    argmax = [int(r["probabilities"]["expert"] > 0.5) for r in got]
    assert any(a != r["action"] for a, r in zip(argmax, got))


def test_a_plain_text_classification_pipeline_refuses_instead_of_deciding_by_argmax(trained):
    from transformers import pipeline

    import helpdp.models.hf_helper  # noqa: F401 - the model type is known: only the pipeline is remote

    out, _ = trained
    with pytest.raises(ValueError, match="trust_remote_code"):
        pipeline("text-classification", model=str(out), trust_remote_code=False)


def test_from_pretrained_and_the_tokenizer_give_the_policys_probabilities(trained):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import helpdp.models.hf_helper  # noqa: F401 - registers the model type
    from helpdp.helper import HelperPipeline, HelperPolicy

    out, _ = trained
    views = _views()
    texts = [v.text for v in views]
    pol = HelperPolicy(out)
    model = AutoModelForSequenceClassification.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    with torch.no_grad():  # no truncation: the model cuts as the encoder does
        logits = model(**tok(texts, padding=True, return_tensors="pt")).logits
    assert torch.softmax(logits, -1).numpy() == pytest.approx(pol.proba(texts), abs=1e-5)
    pipe = HelperPipeline(model=model, tokenizer=tok)  # no remote code
    inputs = [{"text": v.text, "depth": v.depth, "episode_id": v.episode_id} for v in views]
    assert [r["action"] for r in pipe(inputs, budget=1.0)] == pol.decide(views, 1.0).tolist()


def test_a_rewritten_helper_json_moves_the_pipelines_decisions(trained, tmp_path):
    """Thresholds re-picked (recalibrate, helpdp.evaluate.calibrate) reach config.json;
    a tie at the threshold is drawn per (episode, turn) as HelperPolicy draws it."""
    from transformers import pipeline

    from helpdp.helper import HelperPolicy
    from helpdp.helper.card import write_card

    src, res = trained
    out = tmp_path / "recalibrated"
    shutil.copytree(src, out)
    views = _views()
    score = 1.0 - HelperPolicy(out).proba([views[0].text])[0, 0]
    meta = {**res, "thresholds": {"0.5": 1.0, "1": float(score), "2": 0.0}}
    meta["tie_weights"] = {"0.5": 0.0, "1": 0.5, "2": 0.0}
    tied = [views[0]] + [
        StateView(views[0].state_id, views[0].task_id, d, views[0].text, f"ep{d}")
        for d in range(1, 40)
    ]
    (out / "helper.json").write_text(json.dumps(meta))
    write_card(out, meta)
    pol = HelperPolicy(out)
    pipe = pipeline(model=str(out), trust_remote_code=True)
    inputs = [{"text": v.text, "depth": v.depth, "episode_id": v.episode_id} for v in tied]
    for budget in (0.5, 1.0, 2.0):
        got = [r["action"] for r in pipe(inputs, budget=budget)]
        assert got == pol.decide(tied, budget).tolist()
    assert {r["action"] for r in pipe(inputs, budget=0.5)} == {0}
    assert {r["action"] for r in pipe(inputs, budget=2.0)} == {1}
    assert {r["action"] for r in pipe(inputs, budget=1.0)} == {0, 1}  # the tie, drawn
    # a fixed threshold, as HelperPolicy.set_threshold
    pol.set_threshold(0.0)
    got = [r["action"] for r in pipe(inputs, threshold=0.0)]
    assert got == pol.decide(tied).tolist() == [1] * len(tied)


def test_a_prefix_mode_and_a_state_header_helper_read_as_the_policy_reads(trained, tmp_path):
    """The inputs HelperPolicy builds (the budget prefix, the state header) are the
    pipeline's (same weights: only the reading changes)."""
    from transformers import pipeline

    from helpdp.helper import HelperPolicy
    from helpdp.helper.card import write_card

    src, res = trained
    out = tmp_path / "prefix"
    shutil.copytree(src, out)
    meta = {**res, "mode": "prefix", "state_header": True, "thresholds": None}
    meta["tie_weights"] = None
    (out / "helper.json").write_text(json.dumps(meta))
    write_card(out, meta)
    views = _views(8)
    pol = HelperPolicy(out, budget=2.0)
    pipe = pipeline(model=str(out), trust_remote_code=True)
    inputs = [{"text": v.text, "depth": v.depth} for v in views]
    got = pipe(inputs, budget=2.0)
    want = pol.proba([v.text for v in views], 2.0, [v.depth for v in views])
    assert _probs(got, pol.classes) == pytest.approx(want, abs=1e-5)
    assert [r["action"] for r in got] == pol.decide(views).tolist()
    with pytest.raises(ValueError, match="state_header"):
        pipe(views[0].text, budget=2.0)
    with pytest.raises(ValueError, match="trained budgets"):
        pipe(inputs[0], budget=1.5)


def test_the_cut_note_is_said_once_for_a_helper_loaded_per_budget(trained, tmp_path, capsys):
    """helpdp.evaluate loads the helper once per budget: one note, not three."""
    from helpdp.helper import HelperPolicy

    src, _ = trained
    out = tmp_path / "again"  # a directory no Encoder of this process has spoken for
    shutil.copytree(src, out)
    texts = [v.text for v in _views(6)]
    capsys.readouterr()
    for b in (0.5, 1.0, 2.0):
        HelperPolicy(out, budget=b).proba(texts)
    err = capsys.readouterr().err
    assert err.count("texts are longer than 128 tokens") == 1, err


KERNEL = """
import sys, types, warnings
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
ipython = types.ModuleType("IPython")
ipython.get_ipython = lambda: type("ZMQInteractiveShell", (), {})()
sys.modules["IPython"] = ipython
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    exec(sys.argv[1])
print(sum("IProgress" in str(w.message) for w in caught))
"""


@pytest.mark.parametrize(
    "code, warned",
    [
        ("import tqdm.auto", 1),  # what a Jupyter kernel without ipywidgets shows
        ("import helpdp, helpdp.helper.pipeline, transformers; import tqdm.auto", 0),
    ],
)
def test_no_iprogress_warning_in_a_kernel_without_ipywidgets(code, warned):
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is not None:
        pytest.skip("ipywidgets is installed: tqdm.auto draws widgets and does not warn")
    r = subprocess.run([sys.executable, "-c", KERNEL, code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == str(warned), r.stdout + r.stderr[-2000:]


def test_tqdm_bar_is_the_plain_one_without_ipywidgets(monkeypatch):
    import importlib.util

    import tqdm

    from helpdp.cliconf.progress import tqdm_bar

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "ipywidgets" else real(n, *a)
    )
    assert tqdm_bar() is tqdm.tqdm
