"""What a new user meets in the first hour: every mistake below is one line (with what to
type instead where there is one) and exit status 2; ranges of seeds are written
START:STOP; ``--help`` survives a closed pipe; Ctrl-C is one line and exit 130."""

import subprocess
import sys

import pytest

from collect.collector import CollectConfig
from helpdp.cliconf import Interrupted, check_argv, guard


def _run(argv, tmp_path, **kw):
    return subprocess.run(
        [sys.executable, "-m", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=180,
        **kw,
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["helpdp.search", "gamma=abc"],
            "helpdp.search: error: 'gamma' takes a float or null, not 'abc'",
        ),
        (
            ["collect", "schedule.seeds=abc"],
            "collect: error: 'schedule.seeds' takes a list of ints (e.g. [1,2] or a range START:STOP), not 'abc'",
        ),
        (
            ["collect", "schedule.seeds=[1000,...,1029]"],
            "collect: error: 'schedule.seeds' takes a list of ints",
        ),
        (
            ["collect", "schedule.seeds=9:3"],
            "collect: error: 'schedule.seeds=9:3': an empty range (START:STOP needs STOP > START)",
        ),
        (
            ["prm.train", "prm=tni", "data=x", "out=y"],
            "prm.train: error: 'prm=tni': no such option; options: minilm, qwen3_0_6b, qwen3_4b, "
            "tabular, tiny…(did you mean 'prm=tiny'?)",
        ),
        (
            ["helpdp.train", "train=cpu_smok"],
            "helpdp.train: error: 'train=cpu_smok': no such option; options: b200, "
            "…cpu_smoke (did you mean 'train=cpu_smoke'?)",
        ),
        (
            ["collect", "collect/actor=opnai"],
            "collect: error: 'collect/actor=opnai': no such option; options: hf, openai, "
            "…(did you mean 'collect/actor=openai'?)",
        ),
        (
            ["helpdp.helper.train", "helper=tni", "labels=x"],
            "helpdp.helper.train: error: 'helper=tni': no such option; options: minilm, qwen3_0_6b, "
            "qwen3_4b, tiny…(did you mean 'helper=tiny'?)",
        ),
    ],
)
def test_first_hour_mistakes_are_one_line(argv, message, tmp_path):
    run = _run(argv, tmp_path)
    err = run.stderr.strip()
    assert run.returncode == 2, err
    # '…': the options of a config group between (others may add options)
    start, _, end = message.partition("…")
    assert err.startswith(start) and err.endswith(end) and len(err.splitlines()) == 1, err


def test_a_range_of_seeds_is_written_start_stop():
    out = check_argv(
        "c", CollectConfig, ["schedule.seeds=1000:1004", "schedule.probabilities=[0,1]"]
    )
    assert out == ["schedule.seeds=[1000,1001,1002,1003]", "schedule.probabilities=[0,1]"]
    # only list-of-int fields take the range form: a path with a colon stays a path
    assert check_argv("c", CollectConfig, ["out=a:b"]) == ["out=a:b"]


def test_help_survives_a_closed_pipe(tmp_path):
    run = subprocess.run(
        f"{sys.executable} -m helpdp.search --help | head -1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.stdout.startswith("python -m helpdp.search")
    assert "BrokenPipe" not in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_ctrl_c_is_one_line_with_what_was_kept(capsys):
    def body():
        raise Interrupted("3 shards kept; rerun the same command to resume")

    with pytest.raises(SystemExit) as e:
        guard("collect", body)
    assert e.value.code == 130
    err = capsys.readouterr().err.strip()
    assert err == "collect: interrupted: 3 shards kept; rerun the same command to resume"

    def plain():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as e:
        guard("helpdp.search", plain)
    assert e.value.code == 130 and capsys.readouterr().err.strip() == "helpdp.search: interrupted"


def test_loading_the_encoder_prints_no_load_report(capfd, monkeypatch):
    from helpdp.models.encoder import build_backbone

    monkeypatch.delenv("HELPDP_VERBOSE_LOAD", raising=False)
    build_backbone({"backbone": "minilm"}, ["a text"])
    out = "".join(capfd.readouterr())
    assert "LOAD REPORT" not in out and "Loading weights" not in out, out
    # transformers' own settings are back after the load, and left alone when asked for
    from transformers.utils import logging as hf_logging

    from helpdp.models.encoder import quiet_load

    before = hf_logging.get_verbosity()
    with quiet_load():
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    assert hf_logging.get_verbosity() == before
    monkeypatch.setenv("HELPDP_VERBOSE_LOAD", "1")
    with quiet_load():
        assert hf_logging.get_verbosity() == before


def test_the_trainer_prints_no_loss_dicts(capfd):
    import torch

    from helpdp.models.trainer import Optimisation, Reporting, fit_with_trainer

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(2, 1)

        def forward(self, x, y):
            return {"loss": ((self.w(x).squeeze(-1) - y) ** 2).mean()}

    rows = [{"x": torch.tensor([float(i), 1.0]), "y": torch.tensor(float(i))} for i in range(8)]

    def collate(batch):
        return {
            "x": torch.stack([r["x"] for r in batch]),
            "y": torch.stack([r["y"] for r in batch]),
        }

    optim = Optimisation(
        epochs=2, batch_size=4, lr=0.05, weight_decay=0.0, warmup_ratio=0.0, seed=0
    )
    quiet, printed = Reporting(logging_steps=1, print_logs=False), Reporting(logging_steps=1)
    trainer = fit_with_trainer(Net(), rows, collate, optim, cpu=True, report=quiet)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 4 and losses[-1] < losses[0]  # logged, and the loss moved
    out = "".join(capfd.readouterr())
    assert "{'loss'" not in out, out
    fit_with_trainer(Net(), rows, collate, optim, cpu=True, report=printed)
    assert "{'loss'" in "".join(capfd.readouterr())  # asked for: one dict per log


def test_a_missing_optional_package_is_one_line_with_what_installs_it(capsys):
    def body():
        import helpdp_no_such_package  # noqa: F401

    with pytest.raises(SystemExit) as e:
        guard("collect", body)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "collect: error: this command needs the package 'helpdp_no_such_package', which is not "
        "installed: `make full` installs the whole pipeline into .venv"
    )


def test_help_needs_only_the_core_packages(tmp_path):
    # the env extra's SDK is imported where it is used: blocking it leaves --help working
    blocker = tmp_path / "block" / "openai"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'openai'\")")
    env = {**__import__("os").environ, "PYTHONPATH": str(blocker.parent)}
    for command in (
        "collect",
        "helpdp.evaluate",
        "helpdp.train",
        "collect.awm.check",
    ):
        run = _run([command, "--help"], tmp_path, env=env)
        assert run.returncode == 0 and "Traceback" not in run.stderr, (command, run.stderr[-2000:])


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["helpdp.search", "rule=exakt", "data=nowhere"],
            "helpdp.search: error: rule must be one of ('exact', 'paper'), got 'exakt'",
        ),
        (
            ["helpdp.evaluate", "splits=[tset]", "out=ev"],
            "helpdp.evaluate: error: splits: 'tset' is not a task split",
        ),
        (
            ["helpdp.evaluate", "helper_dir=missing", "out=ev"],
            "helpdp.evaluate: error: helper_dir=missing: no helper.json there",
        ),
    ],
)
def test_mistakes_are_refused_before_loading_or_writing(argv, message, tmp_path):
    run = _run(argv, tmp_path)
    err = run.stderr.strip()
    assert run.returncode == 2 and err.startswith(message) and len(err.splitlines()) == 1, err
    assert "loaded" not in run.stdout  # refused before the data loads
    assert not (tmp_path / "ev").exists()  # and before any output exists


# --- out= directories: one command's outputs each, recorded, never replaced unasked ---


def _claim(out, overwrite=False, command="helpdp.search", **config):
    from omegaconf import OmegaConf

    from helpdp.cliconf import claim_out

    cfg = OmegaConf.create({"out": str(out), "budget": 1.0, "quiet": False, **config})
    return claim_out(command, cfg, config_name="search", overwrite=overwrite, overrides=["b=1"])


def test_an_out_directory_is_claimed_recorded_and_replaced_only_when_asked(tmp_path, capsys):
    from helpdp.cliconf import read_record

    out = tmp_path / "o"
    with _claim(out):
        out.mkdir(exist_ok=True)
        (out / "a.json").write_text("1")
    assert read_record(out) == {
        "command": "helpdp.search",
        "config": {"out": str(out), "budget": 1.0, "quiet": False},
    }
    assert (out / ".hydra" / "overrides.yaml").read_text() == "- b=1\n"
    assert capsys.readouterr().err == ""  # a fresh directory: nothing to say
    # a rerun of the same config (quiet and out may differ) says what it replaced
    with _claim(out, quiet=True):
        (out / "a.json").write_text("22")
    assert capsys.readouterr().err.strip() == (
        f"helpdp.search: note: a rerun of the same config: replaced a.json in out={out}"
    )
    # another config, another command, files of unknown origin: refused, untouched
    with pytest.raises(FileExistsError) as e, _claim(out, budget=[0.5, 1.0]):
        raise AssertionError("the body must not run")
    assert str(e.value) == (
        f"out={out} holds the outputs of another helpdp.search config (budget=1.0 there, "
        "[0.5,1.0] here); use another out= or overwrite=true to write there anyway"
    )
    with pytest.raises(
        FileExistsError, match="holds the outputs of helpdp.search, not helpdp.label"
    ):
        with _claim(out, command="helpdp.label"):
            raise AssertionError("the body must not run")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match=r"not empty \(notes.txt\) and holds no record"):
        with _claim(mine):
            raise AssertionError("the body must not run")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert (out / "a.json").read_text() == "22"
    # overwrite=true writes there anyway, says so, and records the new config
    with _claim(out, overwrite=True, budget=2.0):
        (out / "a.json").write_text("333")
        (out / "b.json").write_text("4")
    err = capsys.readouterr().err.strip()
    assert err.startswith("helpdp.search: note: overwrite=true (out=") and "replaced a.json" in err
    assert read_record(out)["config"]["budget"] == 2.0


def test_an_empty_out_a_file_and_a_run_that_wrote_nothing(tmp_path):
    with pytest.raises(ValueError, match=r"^out= is empty: name the directory to write"):
        with _claim(""):
            pass
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"), _claim(tmp_path / "f"):
        pass
    with pytest.raises(RuntimeError), _claim(tmp_path / "never"):
        raise RuntimeError("failed before writing")
    assert not (tmp_path / "never").exists()  # no record, no empty directory
    with _claim(None):  # out=null: the command writes no directory
        pass


def test_a_run_killed_midway_is_resumed_by_its_rerun(tmp_path):
    """The record is written before the command runs: a run killed after writing part
    of its outputs (no cleanup runs on SIGKILL) leaves a record, and its rerun goes on
    in the same directory instead of being refused as files of unknown origin."""
    import subprocess
    import sys
    import textwrap

    from helpdp.cliconf import read_record

    out = tmp_path / "o"
    code = textwrap.dedent(
        f"""
        import os
        from omegaconf import OmegaConf
        from helpdp.cliconf import claim_out
        cfg = OmegaConf.create({{"out": {str(out)!r}, "budget": 1.0, "quiet": False}})
        with claim_out("helpdp.search", cfg, config_name="search", overrides=["b=1"]):
            os.makedirs({str(out)!r}, exist_ok=True)
            open(os.path.join({str(out)!r}, "part.json"), "w").write("1")
            os._exit(9)  # killed: no finally runs
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 9, run.stderr
    assert read_record(out)["config"]["budget"] == 1.0
    with _claim(out):  # the same config: resumed, not refused
        (out / "rest.json").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == [".hydra", "part.json", "rest.json"]
    with pytest.raises(FileExistsError, match="another helpdp.search config"):
        with _claim(out, budget=2.0):
            raise AssertionError("the body must not run")
    # a run into a directory that exists and is empty, writing nothing: no record left
    (tmp_path / "empty").mkdir()
    with _claim(tmp_path / "empty"):
        pass
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())


def test_one_writer_per_out_directory(tmp_path):
    import os

    from helpdp.cliconf import lock_out

    with lock_out("helpdp.label", tmp_path / "o"):
        with pytest.raises(FileExistsError) as e, lock_out("helpdp.label", tmp_path / "o/"):
            pass
        with lock_out("helpdp.label", tmp_path / "other"):
            pass  # another directory is free
        # the same lock from another process, through the command line
        run = _run(["helpdp.search", f"out={tmp_path / 'o'}"], tmp_path)
    assert str(e.value) == (
        f"out={tmp_path / 'o'} is being written by pid {os.getpid()} (helpdp.label); wait "
        "for it to end or use another out="
    )
    assert run.returncode == 2 and run.stderr.strip() == (
        f"helpdp.search: error: out={tmp_path / 'o'} is being written by pid {os.getpid()} "
        "(helpdp.label); wait for it to end or use another out="
    )
    with lock_out("helpdp.label", tmp_path / "o"):
        pass  # released when its holder ends


def test_a_value_hydra_cannot_parse_is_one_line_naming_the_key(tmp_path):
    run = _run(["helpdp.label", "budget=[0.5,1"], tmp_path)
    assert run.returncode == 2 and run.stderr.strip() == (
        "helpdp.label: error: 'budget=[0.5,1': cannot parse the value of 'budget' (no viable "
        "alternative at input '[0.5,1'); close its brackets and quotes, or quote the whole value"
    )
    from helpdp.search import SearchConfig

    with pytest.raises(SystemExit) as e:
        check_argv("helpdp.search", SearchConfig, ["rule='exact"])
    assert e.value.code == 2
    # Hydra's flags that take a value pass with it: --cfg job is no typo of out=job
    args = ["--cfg", "job", "--package", "_global_", "-cn", "search", "--info", "all", "-m"]
    assert check_argv("helpdp.search", SearchConfig, args) == args
