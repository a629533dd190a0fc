"""The fast lane (``make check``) installs only the core and the test tools (no torch, no
web stack): a test module that needs an optional extra which is not installed is left
out of collection, and pytest's header says which and why. ``make test`` installs every
extra, so there nothing is left out.

What a module needs is read from its source, not guessed from its name: every module it
imports (at any depth of the file) and every ``-m MODULE`` it runs, mapped to what that
module imports when it loads (the layers of pyproject.toml: ``collect`` needs the web
stack, the models, the helper, the applications and ``prm`` need torch).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

# first-party packages -> the third-party modules they import when they load
NEEDS = {
    "collect": ("fastapi", "httpx", "duckdb", "sqlalchemy"),
    "prm": ("torch", "transformers"),
    "helpdp.models": ("torch", "transformers"),
    "helpdp.helper": ("torch", "transformers"),
    "helpdp.evaluate": ("torch", "transformers", "fastapi"),
    "helpdp.train": ("torch", "transformers", "trl", "fastapi"),
}
FIRST_PARTY = ("helpdp", "collect", "prm", "conf", "tests")
_RUN_MODULE = re.compile(r"""["']-m["'],\s*["']([A-Za-z_][\w.]*)["']""")


@cache
def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _imports(source: str) -> set[str]:
    """Modules the file imports: first-party ones anywhere (a test imports the collector
    inside its body), third-party ones at module level (one imported inside a test is
    the test's own business: an ``importorskip``, or a failure it provokes on purpose)."""
    tree = ast.parse(source)
    top_level = _module_level_ids(tree)
    # ``-m MODULE`` of our own packages (a third-party one runs in its own venv: a tool)
    names = {m for m in _RUN_MODULE.findall(source) if m.split(".")[0] in FIRST_PARTY}
    for node in ast.walk(tree):
        found = []
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in found:
            if id(node) in top_level or name.split(".")[0] in FIRST_PARTY:
                names.add(name)
    return names


def _module_level_ids(tree: ast.Module) -> set[int]:
    """The ids of the nodes at module level (inside ``if``/``try``/``with``, not in a
    def or class): one walk of those statements, not one per node of the file."""
    out, stack = set(), list(tree.body)
    while stack:
        n = stack.pop()
        out.add(id(n))
        if isinstance(n, (ast.If, ast.Try, ast.With)):
            stack.extend(ast.iter_child_nodes(n))
    return out


def missing_for(path: Path, _seen: frozenset = frozenset()) -> list[str]:
    """The modules ``path`` needs that are not installed (sorted; empty: it can run). A
    sibling module of tests/ it imports (``from awm_helpers import ...``) adds its own."""
    missing = set()
    for name in _imports(path.read_text()):
        top = name.split(".")[0]
        sibling = path.parent / f"{top}.py"
        if sibling.exists():
            if sibling not in _seen:
                missing.update(missing_for(sibling, _seen | {path}))
            continue
        if top not in FIRST_PARTY and not _installed(top):
            missing.add(top)
        for package, needs in NEEDS.items():
            if name == package or name.startswith(package + "."):
                missing.update(n for n in needs if not _installed(n))
    return sorted(missing)


_LEFT_OUT: dict[str, list[str]] = {}


def pytest_ignore_collect(collection_path, config):
    path = Path(collection_path)
    if path.suffix != ".py" or not path.name.startswith("test_"):
        return None
    missing = missing_for(path)
    if missing:
        _LEFT_OUT[path.name] = missing
        return True
    return None


def pytest_report_collectionfinish(config, start_path, items):
    if not _LEFT_OUT:
        return None
    needs = sorted({m for ms in _LEFT_OUT.values() for m in ms})
    return (
        f"fast lane: {len(_LEFT_OUT)} test modules left out, they need {', '.join(needs)} "
        "(make test installs every extra)"
    )
