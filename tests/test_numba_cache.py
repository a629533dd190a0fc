"""The kernels' numba cache sees a change to a callee in another module of the package
(helpdp._src._numba_cache): numba alone checks only the caller's own file and would run
the callee's old code from the cache."""

import os
import subprocess
import sys
import textwrap

CALLER = """
from numba import njit
from kpkg.callee import f

@njit(cache=True)
def g():
    return f() * 10
"""

CALLEE = """
from numba import njit

@njit(cache=True)
def f():
    return {value}
"""


def _run(root, env):
    code = "from kpkg.caller import g; print(g())"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


def _package(root, shared):
    pkg = root / "kpkg"
    pkg.mkdir()
    init = "import os\n"
    if shared:
        init += (
            "from helpdp._src._numba_cache import share_stamp\n"
            "share_stamp(os.path.dirname(__file__))\n"
        )
    (pkg / "__init__.py").write_text(init)
    (pkg / "caller.py").write_text(textwrap.dedent(CALLER))
    (pkg / "callee.py").write_text(textwrap.dedent(CALLEE).format(value=1))
    return pkg


def _env():
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = repo
    return env


def test_a_changed_callee_recompiles_its_caller_from_another_module(tmp_path):
    pkg = _package(tmp_path, shared=True)
    env = _env()
    assert _run(tmp_path, env) == 10
    assert any(n.startswith("caller.g") for n in os.listdir(pkg / "__pycache__"))
    assert _run(tmp_path, env) == 10  # from the cache
    (pkg / "callee.py").write_text(textwrap.dedent(CALLEE).format(value=2))
    assert _run(tmp_path, env) == 20
    assert _run(tmp_path, env) == 20  # the new entry is cached in turn


def test_a_user_cache_dir_is_kept(tmp_path):
    """NUMBA_CACHE_DIR still decides where the entries go."""
    pkg = _package(tmp_path, shared=True)
    env = _env()
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "nbcache")
    assert _run(tmp_path, env) == 10
    assert not (pkg / "__pycache__").exists() or not any(
        n.endswith(".nbi") for n in os.listdir(pkg / "__pycache__")
    )
    entries = [n for _, _, names in os.walk(tmp_path / "nbcache") for n in names]
    assert any(n.startswith("caller.g") and n.endswith(".nbi") for n in entries)


def test_the_kernels_share_one_stamp():
    import helpdp._src  # noqa: F401 - registers the locator
    from helpdp._src import kernels, pertask
    from helpdp._src._numba_cache import SharedStampLocator

    for fn in (kernels.sweep, pertask.backward_chunks):
        assert isinstance(fn._cache._impl.locator, SharedStampLocator)
