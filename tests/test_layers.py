"""The package layers. Statically: import-linter's contracts in pyproject.toml (the
folders' order, no cycles); at run time: what importing a layer loads, in a fresh
interpreter (lazy imports included)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

COLLECTION_SIDE = (
    "collect.actors",
    "collect.cli",
    "collect.config",
    "collect.plan",
    "collect.publish",
    "collect.scratch",
    "collect.worker",
    "collect.collector",
    "collect.executors",
    "collect.interventions",
    "collect.policy",
    "collect.rollout",
    "collect.schedule",
    "collect.shards",
    "collect.statekey",
    "collect.types",
)


def _under(module: str, packages: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one ("collect" is not "collections")."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def _modules_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize(
    "statement",
    [
        "import collect.awm",
        "import collect.awm.env, collect.awm.serve, collect.awm.check, collect.awm.llm",
    ],
)
def test_the_awm_runtime_never_imports_the_collector(statement):
    if "collect.awm.env" in statement:
        pytest.importorskip("fastapi", reason="the AWM runtime needs the env extra")
    loaded = _modules_after(statement)
    assert "collect.awm.env" in loaded or statement == "import collect.awm"
    assert not loaded & set(COLLECTION_SIDE), sorted(loaded & set(COLLECTION_SIDE))


def test_the_dp_core_imports_neither_collect_nor_torch():
    loaded = _modules_after("import helpdp, helpdp.search, helpdp.budget, helpdp.contract")
    above = ("collect", "helpdp.models", "prm", "helpdp.helper", "helpdp.evaluate")
    heavy = {m for m in loaded if _under(m, above) or m.split(".")[0] in ("torch", "trl")}
    assert not heavy, sorted(heavy)


def test_the_collector_imports_no_layer_above_it():
    """collect uses helpdp's contract, DP and policies, never the layers built on it."""
    loaded = _modules_after("import collect.collector")
    above = ("helpdp.train", "helpdp.helper", "helpdp.evaluate", "helpdp.models", "prm")
    bad = {m for m in loaded if _under(m, above)}
    assert "helpdp.contract" in loaded and not bad, sorted(bad)


def test_the_import_contracts_hold():
    """``lint-imports`` (import-linter) checks pyproject.toml's contracts: the layers
    applications > helper > prm > models > collection > core, and no cycles."""
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip("import-linter is not installed (make full installs it)")
    out = subprocess.run([str(exe), "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_no_script_shadows_a_package():
    """``python bench/X.py`` puts bench/ first on sys.path: a script named like one of the
    packages would be imported in its place (bench/collect.py did, after the layout move)."""
    packages = {"helpdp", "collect", "prm", "conf"}
    for folder in ("bench", "notebooks", "tests"):
        names = {p.stem for p in (ROOT / folder).glob("*.py")} | {
            p.name for p in (ROOT / folder).iterdir() if p.is_dir()
        }
        assert not names & packages, (folder, sorted(names & packages))
