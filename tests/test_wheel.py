"""The package installs: a wheel built from this tree, installed into a fresh venv (not
editable), runs the contract's command from another directory (the Hydra configs, the
``collect`` and ``prm`` packages and the demo dataset ship inside the wheel)."""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{cmd}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.mark.slow
def test_the_wheel_installs_and_runs_the_search_from_elsewhere(tmp_path):
    pytest.importorskip("setuptools")
    wheels = tmp_path / "wheels"
    src = tmp_path / "src"  # a copy: setuptools writes build/ and *.egg-info beside the sources
    skip = shutil.ignore_patterns(".*", "build", "dist", "outputs", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT, src, ignore=skip)
    # no build isolation: the build uses this venv's setuptools (no download)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
        ],
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("helpdp-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(
        _run([str(py), "-c", "import site; print(site.getsitepackages()[0])"]).stdout.strip()
    )
    # the dependencies come from this venv's site-packages, appended after the fresh one's
    # (a path line: this venv's own .pth files, its editable helpdp among them, are not read)
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ]
    )
    where = tmp_path / "elsewhere"
    where.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = _run([str(py), "-c", "import helpdp; print(helpdp.__file__)"], cwd=where, env=env)
    assert Path(probe.stdout.strip()).is_relative_to(site), probe.stdout  # the wheel's copy
    out = _run([str(py), "-m", "helpdp.search", "budget=1.0", "out=res"], cwd=where, env=env)
    assert re.search(r"budget 1: r=0\.230769\s+E\[U\]=1\.0000\s+E\[S\]=0\.8155", out.stdout), (
        out.stdout
    )
    res = json.loads((where / "res" / "search.json").read_text())
    # the other two packages and the configs are the wheel's too: the collector composes
    # its config (conf/collect.yaml and its groups) from the installed copy
    for pkg in ("collect", "prm", "conf"):
        probe = _run([str(py), "-c", f"import {pkg}; print({pkg}.__file__)"], cwd=where, env=env)
        assert Path(probe.stdout.strip()).is_relative_to(site), probe.stdout
    out = _run([str(py), "-m", "collect", "--help"], cwd=where, env=env)
    assert "schedule.seeds" in out.stdout and "collect/actor" in out.stdout, out.stdout[-2000:]
    assert res["expected_usage"] <= 1.0 + 1e-9
