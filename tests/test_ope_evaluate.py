"""helpdp.evaluate's off-policy columns, helpdp.forecast's OPE line and helpdp.label policy=."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest


def test_ope_summary_by_hand():
    from helpdp.evaluate import ope_report, ope_summary

    df = pd.DataFrame(
        {
            "split": ["test"] * 2,
            "policy": ["a", "b"],
            "SR": [0.5, 0.8],
            "U": [0.0, 1.0],
            "ope_SR": [0.52, 0.6],
            "ope_SR_lo": [0.45, 0.5],
            "ope_SR_hi": [0.6, 0.7],
            "ope_U": [0.0, 1.1],
            "ope_U_lo": [0.0, 0.9],
            "ope_U_hi": [0.0, 1.3],
            "inside_SR": [True, False],
            "inside_U": [True, True],
            "abs_err_SR": [0.02, 0.2],
            "abs_err_U": [0.0, 0.1],
            "agree": [10, 3],
            "episodes": [20, 20],
            "ess": [9.0, 2.0],
            "max_share": [0.1, 0.5],
            "agrees_SR": [True, True],
            "agrees_U": [True, False],
        }
    )
    s = ope_summary(df)
    assert s["coverage_SR"] == 0.5 and s["coverage_U"] == 1.0
    assert s["agrees_SR"] == 1.0 and s["agrees_U"] == 0.5
    assert s["half_width_SR"] == pytest.approx((0.075 + 0.1) / 2)
    assert s["mae_SR"] == pytest.approx(0.11) and s["mae_U"] == pytest.approx(0.05)
    text = ope_report(df, "dr")
    assert "inside the interval for 50% of the 2 policies" in text
    assert "0.600 [0.500, 0.700] ✗" in text
    assert "combined 95% uncertainty): SR 100%, U 50%" in text


def test_evaluate_adds_ope_and_selected_policies(tmp_path, monkeypatch):
    """With a fake collector: policy_files adds the selected policy, baselines=false and
    skip leave the others out, and ope.parquet holds one row per policy run."""
    import collect.collector as collector
    from helpdp.evaluate import EvaluateConfig, evaluate
    from helpdp.policies import AtTurns
    from helpdp.select import policy_json

    def fake_collect(config, help_policy=None):
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {
                "task_id": ["smart_home_1/2"] * 2,
                "seed": [100, 101],
                "success": [True, False],
                "outcome": ["complete", "others"],
                "expert_calls": [1, 1],
                "steps": [3, 7],
                "policy_errors": [0, 0],
                "format_errors": [0, 0],
                "errors": [0, 0],
                "blind_calls": [0, 0],
                "recovery_calls": [0, 0],
            }
        ).to_parquet(out / "episodes.parquet")

    monkeypatch.setattr(collector, "collect", fake_collect)
    sel = tmp_path / "sel"
    sel.mkdir()
    (sel / "selected.json").write_text(
        json.dumps({"budget": 1.0, "policy": policy_json(AtTurns((0,)))})
    )
    cfg = EvaluateConfig(
        seeds=[100, 101],
        splits=["test"],
        random_p=[0.1],
        out=str(tmp_path / "e"),
        baselines=False,
        policy_files=[str(sel)],
        skip=["dp table (budget 1)"],
        progress=False,
        ope_boot=20,
    )
    results, summary, _ = evaluate(cfg)
    assert list(summary["policy"]) == ["selected (budget 1): rule: turns 0"]
    ope = pd.read_parquet(tmp_path / "e" / "ope.parquet")
    assert list(ope["policy"]) == ["selected (budget 1): rule: turns 0"]
    row = ope.iloc[0]
    assert row["SR"] == 0.5 and row["U"] == 1.0
    assert row["ope_SR_lo"] <= row["ope_SR"] <= row["ope_SR_hi"]
    # the rule's usage is known exactly (1 call); the measured 1.0 agrees
    assert row["ope_U"] == pytest.approx(1.0) and row["inside_U"] and row["agrees_U"]
    # SR 0.5 measured on 2 episodes: half-width 0.69, so any estimate in [0, 1] agrees
    assert row["agrees_SR"]
    assert row["episodes"] == 126  # the demo's 6 test tasks x 21 collected episodes
    assert "Off-policy estimates" in (tmp_path / "e" / "report.md").read_text()
    with pytest.raises(ValueError, match="skip: no policy named 'nope'"):
        evaluate(EvaluateConfig(**{**cfg.__dict__, "skip": ["nope"]}))


def test_forecast_prints_the_held_out_ope(capsys):
    from helpdp.forecast import ForecastConfig, run_forecast

    (rec,) = run_forecast(ForecastConfig(budget=1.0, repeats=1, kappa=[], ope_boot=30))
    o = rec["ope"]
    assert o["estimator"] == "wdr" and o["SR_lo"] < o["SR"] < o["SR_hi"]
    assert o["episodes"] == 630
    # held out, the DP's policy is worth far less than its in-sample model says
    assert o["SR"] < rec["dp"]["expected_success"] - 0.1
    assert "OPE (wdr, held out) SR=" in capsys.readouterr().out


def test_label_from_a_selected_policy(tmp_path):
    from helpdp.label import LabelConfig, run_label
    from helpdp.policies import AtTurns
    from helpdp.select import policy_json

    (tmp_path / "selected.json").write_text(
        json.dumps({"budget": 1.0, "policy": policy_json(AtTurns((0,)))})
    )
    labels, meta = run_label(LabelConfig(policy=str(tmp_path), out=str(tmp_path / "L")))
    assert meta["rule"] == "select" and meta["budgets"][0]["budget"] == 1.0
    assert (labels.loc[labels["depth"] == 0, "label"] == 1).all()
    assert (labels.loc[labels["depth"] > 0, "label"] == 0).all()
    assert labels["p_oracle"].between(0, 1).all() and (labels["visits"] >= 1).all()
    assert (tmp_path / "L" / "labels.parquet").exists()


def test_evaluate_prints_the_support_behind_a_selected_policy(tmp_path, monkeypatch, capsys):
    """A policy_files entry written by helpdp.select: the printed report sets the OPE
    estimate that chose it beside the measured SR (Wilson) and lists each chosen
    candidate's support, as helpdp.select printed them."""
    import collect.collector as collector
    from helpdp.evaluate import EvaluateConfig, run_evaluate
    from helpdp.policies import AtTurns
    from helpdp.select import policy_json

    def fake_collect(config, help_policy=None):
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {
                "task_id": ["smart_home_1/2"] * 4,
                "seed": [100, 101, 102, 103],
                "success": [True, True, True, False],
                "outcome": "complete",
                "expert_calls": 1,
                "steps": 3,
                "policy_errors": 0,
                "format_errors": 0,
                "errors": 0,
                "blind_calls": 0,
                "recovery_calls": 0,
            }
        ).to_parquet(out / "episodes.parquet")

    monkeypatch.setattr(collector, "collect", fake_collect)
    ope = {
        "estimator": "wdr",
        "level": 0.95,
        "unit": "task",
        "reference": "never",
        "SR": 0.61,
        "SR_lo": 0.55,
        "SR_hi": 0.67,
        "U": 1.0,
        "U_lo": 1.0,
        "U_hi": 1.0,
        "dSR": 0.08,
        "dSR_lo": 0.02,
        "dSR_hi": 0.14,
    }
    cand = {
        "candidate": "rule: turns 0",
        "kind": "rule",
        "SR": 0.61,
        "U": 1.0,
        "dSR": 0.08,
        "dSR_lo": 0.02,
        "dSR_hi": 0.14,
        "agree": 57,
        "deviate": 40,
        "deviate_ref": 0,
        "support": 40,
        "supported": True,
    }
    (tmp_path / "selected.json").write_text(
        json.dumps(
            {
                "budget": 1.0,
                "policy": policy_json(AtTurns((0,))),
                "ope": ope,
                "folds": 5,
                "components": [{"weight": 1.0, "candidate": "rule: turns 0"}],
                "candidates": [cand],
            }
        )
    )
    cfg = EvaluateConfig(
        seeds=[100],
        splits=["test"],
        random_p=[],
        out=str(tmp_path / "e"),
        baselines=False,
        policy_files=[str(tmp_path)],
        skip=["dp table (budget 1)"],
        progress=False,
        ope=False,
    )
    run_evaluate(cfg)
    out = capsys.readouterr().out
    assert "### selected (budget 1): rule: turns 0" in out
    assert "wdr, 5 folds of tasks, reference never: OPE SR 0.610 [0.550, 0.670]" in out
    assert "dSR vs the reference +0.080 [+0.020, +0.140]" in out
    assert "Measured (test tasks, 4 episodes): SR 0.750 [0.301, 0.954]" in out
    assert (
        "| rule: turns 0 | 1.00 | 0.610 | 1.00 | +0.080 [+0.020, +0.140] | 57 | 40 / 0 | True |"
        in out
    )
