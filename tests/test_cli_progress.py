"""Progress and cost (issue 34, item 9): every long step shows a labelled bar with its
total from the start, and the heavy commands say what they will cost before they start,
from the rates measured once (``helpdp.cliconf.progress.RATES``)."""

import io
import json
import re
import shutil

import pytest
from prm_helpers import TINY_PRM

from helpdp import demo_dataset_path
from helpdp.cliconf import progress
from helpdp.cliconf.progress import RATES, Rate, Stages, cost_line, duration, expected_seconds


def _frames(text: str) -> list[str]:
    """What a bar drew, one frame per carriage return or line."""
    return [f.strip() for f in re.split(r"[\r\n]", text) if f.strip()]


def test_a_stage_bar_has_its_label_and_total_from_the_start():
    out = io.StringIO()
    stages = Stages("prm.train prm=minilm", ["loading data", "fitting", "saving"], file=out)
    first = _frames(out.getvalue())
    assert first and first[0].startswith("prm.train prm=minilm: loading data:")
    assert "0/3" in first[0]  # the total, before any work
    stages("saving")  # a stage skipped counts as done
    stages.close()
    last = _frames(out.getvalue())[-1]
    assert last.startswith("prm.train prm=minilm: saving:") and "3/3" in last


def test_a_failed_stage_leaves_the_bar_where_it_stopped():
    out = io.StringIO()
    with pytest.raises(RuntimeError), Stages("x", ["a", "b", "c"], file=out) as stages:
        stages("b")
        raise RuntimeError
    assert "1/3" in _frames(out.getvalue())[-1]


def test_durations_by_hand():
    assert [duration(s) for s in (0.2, 40, 89.6, 90, 28 * 60, 5399, 5400, 36000)] == [
        "about 1 s",
        "about 40 s",
        "about 90 s",
        "about 2 min",
        "about 28 min",
        "about 90 min",
        "about 1.5 h",
        "about 10.0 h",
    ]


@pytest.fixture
def rates(monkeypatch):
    """Two made-up rates for a tiny LM PRM (2 examples/s fitting, 10 scoring, 2 cores)."""
    fake = {
        "prm.train.tiny.fit": Rate(2.0, "example", "2 CPU cores (test)", 2, "by hand"),
        "prm.train.tiny.score": Rate(10.0, "example", "2 CPU cores (test)", 2, "by hand"),
    }
    monkeypatch.setattr(progress, "RATES", {**RATES, **fake})
    monkeypatch.setattr(progress.os, "cpu_count", lambda: 2)
    return fake


def test_the_cost_line_scales_the_measured_rate_by_the_size(rates, monkeypatch):
    work = {"prm.train.tiny.fit": 300, "prm.train.tiny.score": 300}  # 150 s + 30 s
    assert expected_seconds(work) == 180.0
    assert cost_line("prm.train", work, "100 examples x 3 epochs") == (
        "prm.train: expected cost: about 3 min on 2 CPU cores (test) (measured there: 2 "
        "examples/s fitting, 10 scoring; here: 100 examples x 3 epochs)"
    )
    monkeypatch.setattr(progress.os, "cpu_count", lambda: 16)
    assert cost_line("prm.train", work, "n").endswith("here: n; this machine has 16 cores)")


def test_every_rate_is_measured_and_positive():
    for key, rate in RATES.items():
        assert rate.per_s > 0 and rate.cores >= 1 and rate.machine and rate.measured, key
    # each model step has both of its rates
    fits = {k.rsplit(".", 1)[0] for k in RATES if k.endswith(".fit")}
    assert fits == {k.rsplit(".", 1)[0] for k in RATES if k.endswith(".score")}


def test_prm_train_shows_its_stages_and_its_cost_before_fitting(rates, tmp_path, capfd):
    from prm.train import train

    data = tmp_path / "demo"
    shutil.copytree(demo_dataset_path(), data)
    cfg = {
        "data": str(data),
        "out": str(tmp_path / "prm"),
        "device": "cpu",
        "progress": True,
        "prm": {**TINY_PRM, "epochs": 2, "max_train_examples": 200},
    }
    summary = train(cfg)
    err = capfd.readouterr().err
    frames = _frames(err)
    # the stage bar from the first frame, every stage in order, each with the total
    stages = [f.split(":")[1].strip() for f in frames if f.startswith("prm.train prm=tiny:")]
    assert stages[0] == "building examples" and "0/6" in frames[0]
    seen = list(dict.fromkeys(stages))
    assert seen == [
        "building examples",
        "building the model",
        "loss before",
        "fitting",
        "loss after",
        "saving",
    ]
    # the cost, before the first scoring bar: 200 x 2 fitted, 2 x 200 + 4 x n_val scored
    n_val = summary["examples"]["validation"]
    line = next(f for f in frames if f.startswith("prm.train: expected cost:"))
    expected = duration(200 * 2 / 2.0 + (400 + 4 * n_val) / 10.0)
    assert line.startswith(f"prm.train: expected cost: {expected} on 2 CPU cores (test)"), line
    assert f"here: 200 examples x 2 epochs, {n_val} validation)" in line
    assert err.index("expected cost") < err.index("train loss:")  # said before the work
    # the scoring bars count examples, with their total
    assert re.search(r"train loss: +\d+%.*\| ?\d+/200 ", err), err[-2000:]
    assert json.loads((tmp_path / "prm/prm.json").read_text())["examples"]


def test_without_a_measured_rate_or_with_progress_off_no_cost_is_said(tmp_path, capfd):
    from prm.train import train

    data = tmp_path / "demo"
    shutil.copytree(demo_dataset_path(), data)
    cfg = {
        "data": str(data),
        "out": str(tmp_path / "prm"),
        "device": "cpu",
        "progress": True,
        "prm": {**TINY_PRM, "epochs": 1, "max_train_examples": 50},
    }
    train(cfg)
    err = capfd.readouterr().err
    assert "expected cost" not in err and "prm.train prm=tiny: saving" in err
    train({**cfg, "out": str(tmp_path / "prm2"), "progress": False})
    assert capfd.readouterr().err == ""


def test_collect_and_evaluate_say_their_cost_from_the_actor(monkeypatch):
    from types import SimpleNamespace

    from helpdp.cliconf.progress import announce_episodes

    monkeypatch.setattr(progress.os, "cpu_count", lambda: 2)
    real = SimpleNamespace(kind="hf", device="cpu")
    out = io.StringIO()
    seconds = announce_episodes("collect", 630, real, file=out)
    rate = RATES["collect.real_cpu"]
    assert seconds == pytest.approx(630 / rate.per_s)
    assert out.getvalue() == (
        f"collect: expected cost: {duration(630 / rate.per_s)} on {rate.machine} (measured "
        f"there: {rate.per_s:.3g} episodes/s; here: 630 episodes, one at a time)\n"
    )
    # the simulated actor: collect says nothing, evaluate uses its own rate
    sim = SimpleNamespace(kind="simulated")
    out = io.StringIO()
    assert announce_episodes("collect", 630, sim, file=out) == 0.0 and out.getvalue() == ""
    assert announce_episodes("helpdp.evaluate", 10, sim, file=out) == pytest.approx(
        10 / RATES["evaluate"].per_s
    )
    assert out.getvalue().startswith("helpdp.evaluate: expected cost: ")
    # a real model on a GPU: no rate was measured there, nothing is said
    gpu = SimpleNamespace(kind="hf", device="cuda")
    assert announce_episodes("collect", 630, gpu, file=io.StringIO()) == 0.0
    # device=auto (the preset's default) is the CPU where torch is not loaded
    monkeypatch.delitem(progress.sys.modules, "torch", raising=False)
    auto = SimpleNamespace(kind="hf", device="auto")
    assert announce_episodes("collect", 630, auto, file=io.StringIO()) == pytest.approx(
        630 / rate.per_s
    )


def _evaluate_saying_its_cost(tmp_path, monkeypatch, capsys, actor=None, bars=True):
    """helpdp.evaluate on the demo data's test split (seed 100, the collector faked):
    (its stderr, the episodes the collector was asked for)."""
    import dataclasses
    from pathlib import Path

    import pandas as pd

    import collect.collector as collector
    from collect.plan import plan_shards
    from helpdp.evaluate import EvaluateConfig, evaluate, harness

    asked = []

    def fake_collect(config, help_policy=None):
        asked.append(len(plan_shards(config, help_policy.name).specs))
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {
                "task_id": ["smart_home_1/2"],
                "seed": [100],
                "success": [True],
                "outcome": ["complete"],
                "expert_calls": [0],
                "steps": [3],
                "policy_errors": [0],
                "format_errors": [0],
                "errors": [0],
                "blind_calls": [0],
                "recovery_calls": [0],
            }
        ).to_parquet(out / "episodes.parquet")

    monkeypatch.setattr(collector, "collect", fake_collect)
    monkeypatch.setattr(progress.os, "cpu_count", lambda: 2)
    if actor is not None:  # the data's recorded actor replaced; nothing is loaded
        rerun = harness.rerun_config
        monkeypatch.setattr(
            harness,
            "rerun_config",
            lambda *a: dataclasses.replace(rerun(*a), actor=actor),
        )
        monkeypatch.setattr(harness, "shared_actor", lambda _: dict)
    cfg = EvaluateConfig(
        seeds=[100], splits=["test"], random_p=[0.1], out=str(tmp_path), progress=bars
    )
    capsys.readouterr()
    evaluate(cfg)
    return capsys.readouterr().err, sum(asked)


def test_evaluate_says_its_cost_before_its_bar(tmp_path, monkeypatch, capsys):
    """The cost line comes first, for the episodes the runs ask for: the simulated actor
    (the demo data's) at the evaluation's own measured rate, the real CPU actor at its."""
    from collect.actors import HFActorConfig

    err, episodes = _evaluate_saying_its_cost(tmp_path / "sim", monkeypatch, capsys)
    sim = RATES["evaluate"]
    assert episodes == 8 * 6  # 8 policies on the 6 test tasks, seed 100
    assert err.splitlines()[0] == (
        f"helpdp.evaluate: expected cost: {duration(episodes / sim.per_s)} on {sim.machine} "
        f"(measured there: {sim.per_s:.3g} episodes/s; here: {episodes} episodes, the "
        "simulated actor)"
    ), err
    err, episodes = _evaluate_saying_its_cost(
        tmp_path / "real", monkeypatch, capsys, HFActorConfig(device="cpu")
    )
    rate = RATES["collect.real_cpu"]
    line = (
        f"helpdp.evaluate: expected cost: {duration(episodes / rate.per_s)} on "
        f"{rate.machine} (measured there: {rate.per_s:.3g} episodes/s; here: {episodes} "
        "episodes, one at a time)"
    )
    assert episodes == 48 and err.splitlines()[0] == line, err
    assert "evaluate:" in err.split(line, 1)[1]  # the bar comes after it
    monkeypatch.undo()
    # progress off: no line
    err, _ = _evaluate_saying_its_cost(tmp_path / "quiet", monkeypatch, capsys, bars=False)
    assert "expected cost" not in err, err
