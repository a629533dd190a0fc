"""One cache stamp for a package of numba kernels that call each other.

numba caches a jitted function (``cache=True``) with its callees compiled into it, but
checks only the function's own source file when it loads the cache: a change to a
callee in another module (``pertask.backward_chunks`` calls ``kernels.sweep``) leaves
the caller running the old callee's code, silently (numba's documented limitation,
numba/numba#1833). Measured here: after the serial sweep's rewrite the per-task pass
kept the old sweep from its cache and ran 2.5x slower than the serial pass on one
thread, with the same results.

``share_stamp(directory)`` registers a cache locator, ahead of numba's own, for the
functions defined in that directory's modules: it keeps the location numba would
choose (``NUMBA_CACHE_DIR``, the in-tree ``__pycache__``, the user-wide cache) and
stamps every entry with the digest of every ``.py`` file of the directory, so a change
to any of them recompiles all of their kernels once.
"""

import functools
import hashlib
import os

from numba.core import caching

# the list numba walks to find a locator (CacheImpl in recent numba, _CacheImpl in older)
_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl

_SHARED: set[str] = set()


@functools.cache
def _digest(directory: str, stats: tuple) -> str:
    """sha256 over the ``.py`` files of ``directory`` (names and bytes, in name order);
    ``stats`` (each file's mtime and size) is the memo key, so an edit made while the
    process runs is seen."""
    h = hashlib.sha256()
    for name, _, _ in stats:
        h.update(name.encode() + b"\0")
        with open(os.path.join(directory, name), "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    return h.hexdigest()


def directory_digest(directory: str) -> str:
    """The digest every kernel of ``directory`` is stamped with."""
    stats = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
            st = os.stat(os.path.join(directory, name))
            stats.append((name, st.st_mtime_ns, st.st_size))
    return _digest(directory, tuple(stats))


class SharedStampLocator(caching._CacheLocator):
    """The locator numba would pick for a function, with the directory's digest added
    to its source stamp."""

    def __init__(self, inner, directory: str):
        self._inner = inner
        self._directory = directory

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    def get_source_stamp(self):
        return (self._inner.get_source_stamp(), directory_digest(self._directory))

    @classmethod
    def from_function(cls, py_func, py_file):
        directory = os.path.dirname(os.path.abspath(py_file))
        if directory not in _SHARED:
            return None
        for other in _IMPL._locator_classes:
            if other is cls:
                continue
            inner = other.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner, directory)
        return None


def share_stamp(directory: str) -> None:
    """Stamp the numba cache of every function defined in ``directory`` with the digest
    of all its ``.py`` files. Call it before those modules are imported (numba picks a
    function's locator when it is decorated). A directory that is not one on disk (a
    zip import) keeps numba's own stamps."""
    if not os.path.isdir(directory):
        return
    _SHARED.add(os.path.abspath(directory))
    if SharedStampLocator not in _IMPL._locator_classes:
        _IMPL._locator_classes.insert(0, SharedStampLocator)
