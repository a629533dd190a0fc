"""Kernels take a few named bundles (``helpdp._src.bundles``), not long runs of
positional arrays: every function of ``helpdp/_src`` has at most ``MAX_PARAMS``
parameters, and no ``fmt: skip`` marker keeps an argument list aligned there."""

import ast
from pathlib import Path

import helpdp._src

MAX_PARAMS = 8
SRC = Path(helpdp._src.__file__).parent


def n_params(fn: ast.FunctionDef) -> int:
    a = fn.args
    return (
        len(a.posonlyargs)
        + len(a.args)
        + len(a.kwonlyargs)
        + (a.vararg is not None)
        + (a.kwarg is not None)
    )


def signatures(text: str) -> dict[str, int]:
    """Function name (qualified by its line) -> number of parameters, every def."""
    return {
        f"{node.name}:{node.lineno}": n_params(node)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def test_counting_sees_every_kind_of_parameter():
    text = "def f(a, /, b, *c, d, e=1, **f):\n    def g(x): pass\n"
    assert signatures(text) == {"f:1": 6, "g:2": 1}


def test_no_kernel_takes_more_than_eight_parameters():
    files = sorted(SRC.glob("*.py"))
    assert {p.name for p in files} >= {"kernels.py", "pertask.py", "parametric.py", "forecast.py"}
    too_long = {
        f"{p.name}:{name}": k
        for p in files
        for name, k in signatures(p.read_text()).items()
        if k > MAX_PARAMS
    }
    assert too_long == {}
    marked = [p.name for p in files if "fmt: skip" in p.read_text()]
    assert marked == []
