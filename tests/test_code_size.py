"""Orchestrators stay readable: no function over 150 lines and no module over 800 in the
packages and the benches (the demo worlds' generated sources excepted), counted from the AST."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION, MAX_MODULE = 150, 800


def _sources():
    for p in sorted(
        p for pkg in ("helpdp", "collect", "prm", "bench") for p in (ROOT / pkg).rglob("*.py")
    ):
        if "worlds/src" not in p.as_posix():
            yield p.relative_to(ROOT).as_posix(), p.read_text()


def test_no_module_over_800_lines():
    long = [f"{rel}: {n}" for rel, text in _sources() if (n := len(text.splitlines())) > MAX_MODULE]
    assert long == [], long


def test_no_function_over_150_lines():
    long = []
    for rel, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION:
                    long.append(f"{rel}:{node.lineno} {node.name}: {n}")
    assert long == [], long
