"""setuptools' package list (pyproject.toml) holds every importable directory that ships
files: a data directory left out of it (helpdp/data, helpdp/data/demo) makes setuptools
print a 40-line "Package would be ignored" banner at each install."""

import fnmatch
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")
PEP420PackageFinder = pytest.importorskip("setuptools.discovery").PEP420PackageFinder

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"__pycache__", "build", "dist", "outputs"}


def _config():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return tool["packages"]["find"], tool["package-data"]["*"]


def _packages():
    find, _ = _config()
    return set(
        PEP420PackageFinder.find(
            str(ROOT), include=find["include"], exclude=find.get("exclude", ())
        )
    )


def _shipped_dirs():
    """Directories under the package roots holding a module or a package-data file."""
    find, patterns = _config()
    names = [p for p in patterns if "/" not in p]
    roots = {pat.rstrip("*") for pat in find["include"]}
    out = set()
    for root in roots:
        for path in (ROOT / root).rglob("*"):
            rel = path.relative_to(ROOT)
            if not path.is_file() or SKIP & set(rel.parts) or rel.parts[0].endswith(".egg-info"):
                continue
            if path.suffix == ".py" or any(fnmatch.fnmatch(path.name, p) for p in names):
                out.add(rel.parent)
    return out


def test_every_importable_directory_that_ships_files_is_a_package():
    packages = _packages()
    missing = []
    for d in _shipped_dirs():
        if "shards" in d.parts:  # a collection's shards: excluded from the package data
            continue
        if all(part.isidentifier() for part in d.parts) and ".".join(d.parts) not in packages:
            missing.append(".".join(d.parts))
    assert not missing, f"absent from [tool.setuptools.packages.find]: {sorted(missing)}"
    assert {"helpdp.data", "helpdp.data.demo", "helpdp", "collect", "prm", "conf"} <= packages


def test_the_shards_are_no_package():
    assert not [p for p in _packages() if ".shards" in p]
