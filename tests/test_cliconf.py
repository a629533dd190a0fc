"""The command boundary (cliconf): unknown keys with a suggestion, budgets checked
before the data loads, one-line errors with exit status 2."""

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from collect.collector import CollectConfig
from helpdp.cliconf import UsageError, check_argv, parse_budgets
from helpdp.search import SearchConfig


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


def test_a_renamed_key_is_refused_naming_the_new_one(capsys):
    from helpdp.train.config import TrainConfig

    # helpdp.train's expert/solo split was `schedule` (collect's episode schedule's name)
    assert _fails(["schedule.kind=budget"], TrainConfig, capsys) == (
        "cmd: error: 'schedule.kind' is now 'split.kind': give split.kind=budget"
    )
    assert "give split=" in _fails(["+schedule={kind: fixed}"], TrainConfig, capsys)
    assert check_argv("cmd", TrainConfig, ["split.kind=budget"]) == ["split.kind=budget"]
    assert check_argv("cmd", CollectConfig, ["schedule.seeds=[0]"]) == ["schedule.seeds=[0]"]
    from helpdp.train.config import train_config

    with pytest.raises(ValueError, match=r"'schedule.kind' is now 'split.kind'"):
        train_config(["schedule.kind=adaptive"])  # composed in code: the same line


def test_known_keys_pass_and_dict_keys_open_up():
    argv = ["budget=[0.5,1]", "budgets.expert=1", "--help", "hydra.run.dir=.", "rule=paper"]
    assert check_argv("cmd", SearchConfig, argv) == [
        "budget=[0.5,1]",
        "++budgets.expert=1",
        "--help",
        "hydra.run.dir=.",
        "rule=paper",
    ]
    out = check_argv("c", CollectConfig, ["collect/actor=openai", "interventions.oracle.kind=x"])
    assert out == ["collect/actor=openai", "++interventions.oracle.kind=x"]
    # a sweep's folder passed back: the '=' in the value is quoted for Hydra's parser
    assert check_argv("c", CollectConfig, ["policy=out/budget=1"]) == ['policy="out/budget=1"']


def test_typed_values_are_checked_before_hydra(capsys):
    from prm.config import PRMTrainConfig

    assert _fails(["tol=abc"], capsys=capsys) == "cmd: error: 'tol' takes a float, not 'abc'"
    assert _fails(["quiet=maybe"], capsys=capsys) == (
        "cmd: error: 'quiet' takes a bool (true|false), not 'maybe'"
    )
    assert _fails(["schedule.seeds=[0,x]"], CollectConfig, capsys) == (
        "cmd: error: 'schedule.seeds' takes a list of ints, not '[0,x]'"
    )
    assert _fails(["prm.cpu_threads=two"], PRMTrainConfig, capsys) == (
        "cmd: error: 'prm.cpu_threads' takes an int or null, not 'two'"
    )
    assert _fails(["prm.epochs=null"], PRMTrainConfig, capsys) == (
        "cmd: error: 'prm.epochs' takes an int, not 'null'"
    )
    ok = ["tol=1e-3", "max_iters=5", "quiet=yes", "tol=${oc.env:TOL}", "tol=1e-3,1e-4"]
    assert check_argv("cmd", SearchConfig, ok) == ok  # Hydra's own conversions pass
    ok = ["prm.bf16=null", "prm.lora.r=4", "schedule.seeds=[0,1]"]
    assert check_argv("cmd", PRMTrainConfig, ok[:2]) == ok[:2]
    assert check_argv("cmd", CollectConfig, ok[2:]) == ok[2:]


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
    run = subprocess.run(
        [sys.executable, "-m", "helpdp.search", arg, f"out={tmp_path}"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert run.stderr.strip().startswith(message) and len(run.stderr.strip().splitlines()) == 1


def test_budget_of_the_one_intervention_by_name(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "helpdp.search", "budgets.oracle=0.5", f"out={tmp_path}"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0 and "budget 0.5:" in run.stdout


# --- every command, wired by cliconf.run_app ------------------------------------------

COMMANDS = {  # module: (schema "module:Class", conf name, a nested typo, its suggestion)
    "helpdp.search": ("helpdp.search:SearchConfig", "search"),
    "helpdp.frontier": ("helpdp.pareto:FrontierConfig", "frontier"),
    "helpdp.label": ("helpdp.label:LabelConfig", "label"),
    "helpdp.forecast": ("helpdp.forecast:ForecastConfig", "forecast"),
    "helpdp.evaluate": ("helpdp.evaluate:EvaluateConfig", "evaluate"),
    "helpdp.synthetic": ("helpdp.synthetic:SyntheticConfig", "synthetic"),
    "helpdp.helper.train": ("helpdp.helper.config:HelperTrainConfig", "helper_train"),
    "helpdp.evaluate.calibrate": (
        "helpdp.evaluate.calibrate:HelperCalibrateConfig",
        "helper_calibrate",
    ),
    "helpdp.train": ("helpdp.train.config:TrainConfig", "train"),
    "prm.train": ("prm.config:PRMTrainConfig", "prm_train"),
    "prm.score": ("prm.config:ScoreConfig", "prm_score"),
    "prm.report": ("prm.config:ReportConfig", "prm_report"),
    "prm.selfreg": ("prm.config:SelfRegConfig", "prm_selfreg"),
    "collect": ("collect.collector:CollectConfig", "collect"),
    "collect.awm.check": ("collect.awm.check:CheckConfig", "check"),
    "collect.awm.serve": ("collect.awm.serve:ServeConfig", "serve"),
    "collect.awm.openenv_server": ("collect.awm.serve:ServeConfig", "serve_openenv"),
    "collect.realmodel": ("collect.realmodel:FetchConfig", "realmodel"),
    "collect.realserve": ("collect.realserve:RealServeConfig", "realserve"),
    "helpdp.select": ("helpdp.select:SelectConfig", "select"),
}


def _node(command):
    """What run_app registers for the command (schema or instance, config groups)."""
    if command == "collect":
        from collect.config import schema_node as _schema_node

        return _schema_node(), None
    if command == "helpdp.helper.train":
        from helpdp.helper.config import HelperModelConfig

        return _schema(command), {"helper": HelperModelConfig}
    return _schema(command), None


def _schema(command):
    import importlib

    module, name = COMMANDS[command][0].split(":")
    return getattr(importlib.import_module(module), name)


def test_every_command_has_a_primary_config():
    from helpdp.cliconf import CONF_DIR

    assert {f"{n}.yaml" for _, n in COMMANDS.values()} <= {p.name for p in CONF_DIR.glob("*.yaml")}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_exits_0_writes_nothing_and_lists_the_resolved_fields(command, tmp_path):
    import dataclasses

    run = subprocess.run(
        [sys.executable, "-m", command, "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert list(tmp_path.iterdir()) == []  # no ./--help dataset, no outputs/, no .hydra/
    assert run.stdout.startswith(f"python -m {command}")
    for f in dataclasses.fields(_schema(command)):
        assert f"  {f.name}=" in run.stdout or f"  {f.name}." in run.stdout, f.name
        assert f.metadata["help"][:30] in run.stdout


@pytest.mark.parametrize(
    "command, key, shown",
    [
        (
            "collect.awm.check",
            "sandbox.call_timeout_s",
            "20.0",
        ),  # the instance's, not the class's
        ("collect.awm.check", "verifier_sandbox.call_timeout_s", "30.0"),
        (
            "prm.train",
            "prm.max_length",
            "128",
        ),  # conf/prm/tiny.yaml's, not the schema's
        ("prm.train", "prm.lr", "0.003"),
        ("prm.train", "prm.epochs", "8"),
    ],
)
def test_help_shows_the_values_the_command_runs_with(command, key, shown):
    from helpdp.cliconf import compose_config, help_text

    schema, name = _schema(command), COMMANDS[command][1]
    cfg = compose_config(name, node=schema)
    assert OmegaConf.select(cfg, key) == float(shown)
    text = help_text(command, schema, cfg)
    assert f"  {key}={shown}\n" in text


def test_help_follows_the_command_line(capsys):
    from helpdp.cliconf import compose_config, help_text
    from prm.config import PRMTrainConfig

    cfg = compose_config("prm_train", ["prm=tabular"], node=PRMTrainConfig)
    assert "  prm.kind=tabular\n" in help_text("prm.train", PRMTrainConfig, cfg)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_suggests_the_closest_key(command, capsys):
    import dataclasses

    schema = _schema(command)
    name = next(f.name for f in dataclasses.fields(schema) if len(f.name) > 3)
    typo = name[:-2] + name[-1] + name[-2]  # swap the last two letters
    err = _fails([f"{typo}=1"], schema, capsys)
    assert err.endswith(f"(did you mean '{name}'?)"), err
    nested = [f for f in dataclasses.fields(schema) if dataclasses.is_dataclass(f.type)]
    for f in nested:  # nested keys too (sandbox.call_timeot_s, schedule.sedes, ...)
        sub = dataclasses.fields(f.type)[0].name
        err = _fails([f"+{f.name}.{sub}x=1"], schema, capsys)
        assert err.endswith(f"(did you mean '{f.name}.{sub}'?)"), err


PATH_FIELDS = [
    ("helpdp.search", "data"),
    ("helpdp.search", "out"),
    ("helpdp.frontier", "data"),
    ("helpdp.label", "data"),
    ("helpdp.forecast", "data"),
    ("helpdp.evaluate", "data"),
    ("helpdp.evaluate", "helper_dir"),
    ("helpdp.synthetic", "out"),
    ("helpdp.helper.train", "labels"),
    ("helpdp.evaluate.calibrate", "helper_dir"),
    ("prm.train", "data"),
    ("prm.score", "prm_dir"),
    ("prm.score", "data"),
    ("prm.report", "prm_dir"),
    ("prm.selfreg", "prm_dir"),
    ("collect", "policy"),
    ("collect", "out"),
    ("collect.awm.check", "data"),
    ("collect.awm.serve", "data"),
]


@pytest.mark.parametrize("command, key", PATH_FIELDS)
def test_a_sweep_folder_passes_back_as_a_path(command, key):
    """OUT/budget=<value>/ (the contract's name of a sweep's folder) as policy=, data=, ..."""
    from helpdp.cliconf import compose_config

    schema, name = _schema(command), COMMANDS[command][1]
    argv = check_argv(command, schema, [f"{key}=outputs/sweep/budget=1"])
    node, groups = _node(command)
    cfg = compose_config(name, argv, node=node, groups=groups)
    assert cfg[key] == "outputs/sweep/budget=1"


def test_a_sweep_folder_as_policy_end_to_end(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "helpdp.search", "budget=[1]", f"out={tmp_path}/s", "quiet=true"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "helpdp.frontier", f"data={tmp_path}/s/budget=1"],
        capture_output=True,
        text=True,
    )
    # the path reaches the command intact (a search folder is not a dataset)
    err = run.stderr.strip()
    assert err.startswith("helpdp.frontier: error: ") and f"{tmp_path}/s/budget=1/manifest" in err


def test_a_positional_argument_is_refused_with_a_hint(capsys):
    from helpdp.synthetic import SyntheticConfig

    assert _fails(["/tmp/x"], SyntheticConfig, capsys) == (
        "cmd: error: '/tmp/x': arguments are KEY=VALUE (did you mean 'out=/tmp/x'?)"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["prm.score", "data=/nonexistent", "prm_dir=/x"],
            "prm.score: error: /nonexistent: not a dataset directory",
        ),
        (
            ["prm.train", "data=/nonexistent", "out=/x", "kind=tabular"],
            "prm.train: error: /nonexistent: not a dataset directory",
        ),
        (
            ["collect.awm.check", "data=/nonexistent"],
            "collect.awm.check: error: AWM data directory not found: /nonexistent",
        ),
        (
            ["helpdp.frontier", "budget=-1"],
            "helpdp.frontier: error: budget=-1: a budget is a number of calls, at least 0",
        ),
        (["helpdp.forecast", "budget=abc"], "helpdp.forecast: error: budget='abc': not a number"),
        (
            ["helpdp.label", "budgets.expert=1"],
            "helpdp.label: error: budgets.expert: the dataset has no intervention 'expert'",
        ),
        # a value that does not convert to the field's type: before Hydra, nested too
        (
            ["helpdp.evaluate", "budget=abc"],
            "helpdp.evaluate: error: 'budget' takes a float, not 'abc'",
        ),
        (
            ["helpdp.frontier", "max_solves=1.5"],
            "helpdp.frontier: error: 'max_solves' takes an int, not '1.5'",
        ),
        (
            ["prm.train", "data=x", "out=y", "prm.lora.r=abc"],
            "prm.train: error: 'prm.lora.r' takes an int, not 'abc'",
        ),
        (
            ["helpdp.helper.train", "labels=x", "helper.lr=fast"],
            "helpdp.helper.train: error: 'helper.lr' takes a float, not 'fast'",
        ),
        # a required field left '???': the body gets a typed instance, so it is refused first
        (["prm.score", "prm_dir=/x"], "prm.score: error: data: required; give data=VALUE"),
        (["helpdp.helper.train"], "helpdp.helper.train: error: labels: required; give labels="),
    ],
)
def test_every_command_reports_errors_in_one_line(argv, message, tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert run.returncode == 2, run.stderr
    err = run.stderr.strip()
    assert err.startswith(message) and len(err.splitlines()) == 1, err


def test_every_command_body_gets_a_typed_instance(tmp_path, monkeypatch):
    """run_app hands the body an instance of the schema (nested configs as their
    dataclasses), not Hydra's DictConfig."""
    from helpdp.cliconf import run_app
    from helpdp.pareto import FrontierConfig

    seen = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["helpdp.frontier"])
    run_app(
        "helpdp.frontier",
        FrontierConfig,
        seen.append,
        config_name="frontier",
        argv=[f"out={tmp_path / 'o'}", "budget=2"],
    )
    (cfg,) = seen
    assert type(cfg) is FrontierConfig and cfg.budget == 2.0
