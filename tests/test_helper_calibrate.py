"""Calibrating a helper's thresholds by its realised calls (helpdp.evaluate.calibrate)."""

import json

import numpy as np
import pandas as pd
import pytest
from helper_helpers import TINY, toy_labels

from helpdp.evaluate.calibrate import bisect_threshold, calibrate_in_env


def test_bisection_by_hand():
    # usage 4 (1 - t): budget 1 sits at t = 0.75, which the third step hits exactly
    t, u, trace = bisect_threshold(lambda t: 4 * (1 - t), 1.0, iters=3)
    assert [x for x, _ in trace] == [0.5, 0.75, 0.625]
    assert (t, u) == (0.75, 1.0)
    # a step curve: the closest measured usage wins, the smaller one at a tie
    step = lambda t: 2.0 if t < 0.3 else 0.0  # noqa: E731
    t, u, trace = bisect_threshold(step, 1.0, iters=4)
    assert [x for x, _ in trace] == [0.5, 0.25, 0.375, 0.3125]
    assert u == 0.0 and t == 0.5  # |0 - 1| == |2 - 1|: spend less
    # a budget beyond every usage goes to the lowest threshold tried
    t, u, _ = bisect_threshold(lambda t: 1 - t, 5.0, iters=5)
    assert t == pytest.approx(1 / 32) and u == pytest.approx(31 / 32)
    with pytest.raises(ValueError, match="iters"):
        bisect_threshold(step, 1.0, iters=0)
    with pytest.raises(ValueError, match="lo < hi"):
        bisect_threshold(step, 1.0, lo=0.5, hi=0.5)


class FakePolicy:
    """Scores of the states each episode meets; calls = scores above the threshold."""

    def __init__(self, scores):
        self.scores, self.fixed_threshold = scores, None

    def set_threshold(self, t):
        self.fixed_threshold = t


def test_each_budget_gets_its_spend_and_thresholds_fall_with_it():
    rng = np.random.default_rng(0)
    scores = rng.beta(2, 5, size=(200, 8))  # 200 episodes, 8 decisions each
    pol = FakePolicy(scores)
    runs = []

    def run(p):
        runs.append(p.fixed_threshold)
        return pd.DataFrame({"expert_calls": (p.scores > p.fixed_threshold).sum(1)})

    out = calibrate_in_env(pol, run, [2.0, 0.5, 1.0], iters=10)
    assert list(out) == [0.5, 1.0, 2.0]
    for b, c in out.items():
        assert c["usage"] == pytest.approx(b, abs=0.05)
        assert c["usage"] == pytest.approx(float((scores > c["threshold"]).sum(1).mean()))
        assert c["episodes"] == 200 and len(c["trace"]) == 10
    th = [out[b]["threshold"] for b in (0.5, 1.0, 2.0)]
    assert th[0] > th[1] > th[2]
    assert len(runs) == len(set(runs))  # each threshold is run once
    assert pol.fixed_threshold is None  # the policy is handed back as it was


@pytest.fixture(scope="module")
def tiny_helper(tmp_path_factory):
    from helpdp.helper.train import train_helper

    out = tmp_path_factory.mktemp("helper")
    meta = {"actions": ["nohelp", "expert"], "strategy": "all_states", "rule": "exact"}
    train_helper(
        toy_labels(), meta, {"helper": TINY, "progress": False, "calibration": "help_rate"}, out
    )
    return out


def test_set_threshold_overrides_the_budget(tiny_helper):
    from helpdp.helper.policy import HelperPolicy
    from helpdp.policies import StateView

    pol = HelperPolicy(tiny_helper, budget=1.0)
    views = [
        StateView(state_id=i, task_id="t", depth=0, text=f"alpha alarm level {i % 4}")
        for i in range(8)
    ]
    pol.set_threshold(1.0)
    assert (pol.decide(views) == 0).all() and "threshold 1" in pol.name
    pol.set_threshold(-1.0)
    assert (pol.decide(views) == 1).all()
    pol.set_threshold(None)
    assert pol.name.endswith("budget 1)")


def test_calibrate_cli_rewrites_a_copy_and_keeps_the_old_thresholds(
    tiny_helper, tmp_path, monkeypatch, capsys
):
    import collect.collector as collector
    from helpdp.evaluate.calibrate import HelperCalibrateConfig, run_calibrate
    from helpdp.helper.policy import HelperPolicy

    before = json.loads((tiny_helper / "helper.json").read_text())
    out = tmp_path / "calibrated"
    cfg = HelperCalibrateConfig(
        helper_dir=str(tiny_helper),
        split="test",
        seeds=[900],
        max_tasks=1,
        budgets=[1.0],
        iters=2,
        out=str(out),
        progress=True,
    )
    real, outs = collector.collect, []

    def spy(config, help_policy=None):
        outs.append(config.out)
        return real(config, help_policy=help_policy)

    monkeypatch.setattr(collector, "collect", spy)
    capsys.readouterr()
    meta = run_calibrate(cfg)  # real episodes in the demo worlds
    assert len(outs) == 2 and len(set(outs)) == 2  # each run in a fresh directory
    # the bar is labelled and has its total from its first frame (issue 34, item 9)
    frames = [f for f in capsys.readouterr().err.replace("\r", "\n").splitlines() if f.strip()]
    assert frames[0].startswith("calibrate (runs, at most):") and "0/2" in frames[0], frames[:3]
    assert json.loads((tiny_helper / "helper.json").read_text()) == before  # source untouched
    assert meta["calibration"] == "env" and meta["thresholds_before"] == before["thresholds"]
    c = meta["metrics"]["calibration_env"]["budgets"]["1"]
    assert len(c["trace"]) == 2 and c["episodes"] > 0
    assert HelperPolicy(out, budget=1.0).threshold() == pytest.approx(c["threshold"])
    assert HelperPolicy(out, budget=1.0).tie_weight() == 0.0
    with pytest.raises(ValueError, match="exists"):
        run_calibrate(cfg)


def test_readme_calibrate_command_line_writes_out(tiny_helper, tmp_path):
    """The README's command as written (its placeholders filled, one task, two runs):
    the out= guard records the run in OUT/.hydra before calibrate starts, and calibrate
    must take that directory as new (issue 46, item 3); a rerun is accepted too."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from helpdp import demo_dataset_path

    before = json.loads((tiny_helper / "helper.json").read_text())
    data, out = tmp_path / "DATA", tmp_path / "HELPER_ENV"
    shutil.copytree(demo_dataset_path(), data)
    cmd = [
        sys.executable,
        "-m",
        "helpdp.evaluate.calibrate",
        f"helper_dir={tiny_helper}",
        f"data={data}",
        "split=test",
        "seeds=900:901",
        f"out={out}",
        "max_tasks=1",
        "budgets=[1.0]",
        "iters=2",
        "progress=false",
    ]
    repo = Path(__file__).resolve().parents[1]
    for _ in range(2):  # the run, then its rerun
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        meta = json.loads((out / "helper.json").read_text())
        assert meta["calibration"] == "env"
        assert len(meta["metrics"]["calibration_env"]["budgets"]["1"]["trace"]) == 2
        assert (out / ".hydra" / "config.yaml").is_file()
    assert json.loads((tiny_helper / "helper.json").read_text()) == before  # source untouched
