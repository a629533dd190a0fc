"""The command boundary (helpdp.cli): unknown keys with a suggestion, budgets checked
before the data loads, one-line errors with exit status 2."""

import subprocess
import sys

import pytest

from collect.collector import CollectConfig
from helpdp.cli import UsageError, check_argv, parse_budgets
from helpdp.config import SearchConfig


def _fails(argv, schema=SearchConfig, capsys=None):
    with pytest.raises(SystemExit) as e:
        check_argv("cmd", schema, argv)
    assert e.value.code == 2
    return capsys.readouterr().err.strip() if capsys else None


def test_unknown_keys_are_refused_with_the_closest_field(capsys):
    assert _fails(["budgte=1"], capsys=capsys) == (
        "cmd: error: unknown key 'budgte': this command has no field 'budgte' (did you mean 'budget'?)"
    )
    assert "did you mean 'budget'" in _fails(["+budjet=1.0"], capsys=capsys)  # even with +
    err = _fails(["schedule.seed=[0,1]"], CollectConfig, capsys)
    assert "'schedule.seed' takes one value, not a list (did you mean 'schedule.seeds'?)" in err
    assert "did you mean 'schedule.seeds'" in _fails(["schedule.sedes=[1]"], CollectConfig, capsys)


def test_known_keys_pass_and_dict_keys_open_up():
    argv = ["budget=[0.5,1]", "budgets.expert=1", "--help", "hydra.run.dir=.", "rule=paper"]
    assert check_argv("cmd", SearchConfig, argv) == [
        "budget=[0.5,1]", "++budgets.expert=1", "--help", "hydra.run.dir=.", "rule=paper"
    ]  # fmt: skip
    out = check_argv("c", CollectConfig, ["collect/actor=openai", "interventions.oracle.kind=x"])
    assert out == ["collect/actor=openai", "++interventions.oracle.kind=x"]
    # a sweep's folder passed back: the '=' in the value is quoted for Hydra's parser
    assert check_argv("c", CollectConfig, ["policy=out/budget=1"]) == ['policy="out/budget=1"']


def test_budgets_are_checked_as_numbers():
    assert parse_budgets(1) == [1.0] and parse_budgets([0.5, "2"]) == [0.5, 2.0]
    with pytest.raises(UsageError, match="not a number or a list of numbers"):
        parse_budgets("abc")
    with pytest.raises(UsageError, match="at least 0"):
        parse_budgets(-1)


@pytest.mark.parametrize(
    "arg, message",
    [
        ("budget=abc", "helpdp.search: error: budget='abc': not a number"),
        ("data=/nonexistent/x", "helpdp.search: error: /nonexistent/x: not a dataset directory"),
        (
            "budgets.expert=1",
            "helpdp.search: error: budgets.expert: the dataset has no intervention",
        ),
    ],
)
def test_errors_are_one_line_and_exit_2(arg, message, tmp_path):
    run = subprocess.run([sys.executable, "-m", "helpdp.search", arg, f"out={tmp_path}"],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().startswith(message) and len(run.stderr.strip().splitlines()) == 1


def test_budget_of_the_one_intervention_by_name(tmp_path):
    run = subprocess.run([sys.executable, "-m", "helpdp.search", "budgets.oracle=0.5",
                          f"out={tmp_path}"], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0 and "budget 0.5:" in run.stdout
